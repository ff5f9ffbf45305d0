mod kube_driver;

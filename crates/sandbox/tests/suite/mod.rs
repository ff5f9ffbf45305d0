mod docker_driver;
mod engines;
mod harness;
mod kube_driver;
mod mounts_docker;

mod docker_driver;
mod engines;
mod harness;
mod kube_driver;
mod mount_race;
mod mounts_docker;

mod docker_driver;
mod engines;
mod harness;
mod mounts_docker;

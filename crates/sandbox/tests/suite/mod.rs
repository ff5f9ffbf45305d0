mod harness;
mod docker_driver;
mod engines;

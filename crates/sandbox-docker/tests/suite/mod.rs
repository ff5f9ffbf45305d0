mod docker_driver;
mod engines;
mod harness;
mod mount_race;
mod mounts_docker;
mod warm_pool;

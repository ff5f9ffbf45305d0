pub(crate) mod driver;
mod cgroup;

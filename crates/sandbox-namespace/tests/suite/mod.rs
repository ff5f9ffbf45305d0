mod cgroup;
pub(crate) mod driver;

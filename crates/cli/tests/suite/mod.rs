mod admission;
mod devcontainer;
mod egress_bridge;
mod faults;
mod matrix;
mod resume;
mod run;
pub mod support;
mod validate;

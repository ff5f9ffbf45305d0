mod admission;
mod faults;
mod matrix;
mod resume;
mod run;
pub mod support;
mod validate;

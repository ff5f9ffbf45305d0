mod admission;
mod matrix;
mod resume;
mod run;
pub mod support;
mod validate;

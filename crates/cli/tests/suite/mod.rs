mod admission;
mod matrix;
mod run;
pub mod support;
mod validate;

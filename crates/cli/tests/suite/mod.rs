mod run;
pub mod support;
mod validate;

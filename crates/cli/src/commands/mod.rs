//! One module per command.
pub mod validate;

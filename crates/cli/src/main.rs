//! The `iterion` binary.
fn main() {}

//! iterion-dsl: the `.iter` front end.
#![deny(missing_docs)]

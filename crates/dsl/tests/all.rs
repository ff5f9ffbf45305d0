//! The dsl crate's one integration binary (STYLE.md §5.12): the normative fixtures of DSL.md §9.
mod suite;

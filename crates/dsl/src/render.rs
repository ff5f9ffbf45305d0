//! Human and JSON rendering of diagnostics (DSL.md §8.2).

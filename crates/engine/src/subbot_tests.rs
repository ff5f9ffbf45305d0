//! Unit tests of the adoption rules and child runs.

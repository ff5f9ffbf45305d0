//! Tokens → [`crate::ast::File`] with parse-stage diagnostics (DSL.md §2–§3). OWNER: parse stage.
use crate::{ast, diag::Diagnostic};

/// Parses normalised text.
pub(crate) fn parse(_text: &str) -> (ast::File, Vec<Diagnostic>) {
    todo!("parse stage")
}

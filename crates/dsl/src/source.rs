//! Bytes → normalised source text (DSL.md §1.1). OWNER: parse stage.
use crate::diag::Diagnostic;

/// Strips a BOM, turns CRLF and lone CR into LF; invalid UTF-8 is E006 at the first bad byte.
pub(crate) fn normalise(_bytes: &[u8]) -> Result<String, Diagnostic> {
    todo!("parse stage")
}

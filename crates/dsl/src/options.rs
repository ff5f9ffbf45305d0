//! What a compile takes besides the text, and what it gives back.

use crate::diag::Diagnostic;
use crate::ir;

/// Inputs of the validator besides the file (DSL.md §8.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// The engine has the ask-user relay inside a sandbox (turns C136 off). Default `false`.
    pub ask_user_in_sandbox: bool,
}

/// The outcome of compiling one source text.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// Every diagnostic, sorted by line, column, code (DSL.md §8.3).
    pub diagnostics: Vec<Diagnostic>,
    /// The lowered workflow, present exactly when no diagnostic is an error.
    pub workflow: Option<ir::Workflow>,
    /// The fragments the file imports, in the order they were read (docs/language.md
    /// "Imports"): a diagnostic whose [`crate::Diagnostic::file`] names one is on its lines.
    pub fragments: Vec<crate::import::Fragment>,
}

impl Compiled {
    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.diagnostics.len() - self.error_count()
    }
}

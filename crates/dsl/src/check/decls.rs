//! Declaration-level checks: vars, secrets, schemas, prompts, node properties, sandbox and
//! network blocks, worktree. OWNER: declaration checks + IR.
use super::symbols::Symbols;
use crate::{CompileOptions, ast, diag::Diagnostic};

pub(super) fn check(
    _file: &ast::File,
    _syms: &Symbols<'_>,
    _opts: &CompileOptions,
    _out: &mut Vec<Diagnostic>,
) {
}

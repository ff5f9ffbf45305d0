//! Graph, edge, loop, fan-out, template and expression checks. OWNER: graph/template checks.
use super::symbols::Symbols;
use crate::{CompileOptions, ast, diag::Diagnostic};

pub(super) fn check(
    _file: &ast::File,
    _syms: &Symbols<'_>,
    _opts: &CompileOptions,
    _out: &mut Vec<Diagnostic>,
) {
}

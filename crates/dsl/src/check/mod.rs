//! Compile-stage checks (C-codes, DSL.md §8.5). They run only when the parse stage reported
//! nothing, and read the tree through [`symbols::Symbols`].
use crate::{CompileOptions, ast, diag::Diagnostic};

mod decls;
mod graph;
pub(crate) mod symbols;

/// Runs every compile-stage check. Identical diagnostics (a named prompt checked for two nodes
/// that use it the same way) are reported once.
pub(crate) fn run(file: &ast::File, opts: &CompileOptions) -> Vec<Diagnostic> {
    let syms = symbols::Symbols::build(file);
    let mut out = Vec::new();
    decls::check(file, &syms, opts, &mut out);
    graph::check(file, &syms, opts, &mut out);
    let mut seen = std::collections::HashSet::new();
    out.retain(|d| seen.insert((d.code, d.span, d.message.clone(), d.node.clone())));
    out
}

//! Compile-stage checks (C-codes, DSL.md §8.5). They run only when the parse stage reported
//! nothing, and read the tree through [`symbols::Symbols`].
use crate::{CompileOptions, ast, diag::Diagnostic};

mod decls;
mod graph;
mod resources;
mod subbots;
pub(crate) mod symbols;

pub(crate) use subbots::{Children, Origin};

/// Runs every compile-stage check. Identical diagnostics (a named prompt checked for two nodes
/// that use it the same way) are reported once. `origin` is where the file was read from; without
/// it, subbot children cannot be loaded (C910).
pub(crate) fn run(
    file: &ast::File,
    opts: &CompileOptions,
    origin: Option<&Origin>,
) -> (Vec<Diagnostic>, Children) {
    let syms = symbols::Symbols::build(file);
    let mut out = Vec::new();
    decls::check(file, &syms, opts, &mut out);
    graph::check(file, &syms, opts, &mut out);
    resources::check(&syms, &mut out);
    let children = subbots::check(&syms, opts, origin, &mut out);
    let mut seen = std::collections::HashSet::new();
    out.retain(|d| seen.insert((d.code, d.span, d.message.clone(), d.node.clone())));
    (out, children)
}

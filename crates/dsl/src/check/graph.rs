//! Graph, edge, loop, fan-out, template and expression checks (DSL.md §4–§6, §8.5).
//!
//! - `C006`/`C007` here; then the first workflow's edges are resolved into a [`Graph`] (C001:
//!   edges with an undeclared endpoint are reported and dropped, §8.3).
//! - [`refs`]: every template place and `when` expression (C004, C029–C036, C040, C093, C095,
//!   C137, C138, C147, C148, C904, C014 for expression fields).
//! - [`edges`]: per-source edge rules and loop clauses (C005, C010–C015, C026, C123, C124,
//!   C145, C901, C903, C905).
//! - [`topology`]: entry, reachability and cycles (C008, C016, C019).
//! - [`fanout`]: `fan_out_all` structure, joins and input keys (C028, C906, C907, C908).
//!
//! Declaration-level codes are `decls.rs`'s.
use super::symbols::Symbols;
use crate::{
    CompileOptions,
    ast::{self, Span},
    diag::{Code, Diagnostic},
};

mod edges;
mod fanout;
mod model;
mod refs;
mod topology;

use self::model::Graph;

#[cfg(test)]
mod e2e_tests;
#[cfg(test)]
mod tests;

pub(super) fn check<'a>(
    file: &'a ast::File,
    syms: &Symbols<'a>,
    _opts: &CompileOptions,
    out: &mut Vec<Diagnostic>,
) {
    workflows(file, syms, out);
    let graph = syms.workflow().map(|wf| Graph::build(wf, syms, out));
    refs::check(file, syms, graph.as_ref(), out);
    if let Some(g) = &graph {
        edges::check(g, syms, out);
        topology::check(g, syms, out);
        fanout::check(g, syms, out);
    }
}

/// C006 / C150 / C007. A file of declarations but no node and no workflow (a library of
/// cursors, schemas or prompts to copy from, as upstream ships them) is C150, a warning: it
/// validates, and `iterion run` refuses it as having nothing to run. Nodes without a workflow
/// are a workflow missing its block: C006.
fn workflows(file: &ast::File, syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    if syms.workflows.is_empty() {
        out.push(if file.decls.is_empty() || !syms.node_list.is_empty() {
            Diagnostic::new(Code::C006, Span::new(1, 1, 1), "no workflow declared").with_hint(
                "add `workflow NAME:`; a fragment another file imports is validated through \
                 that file (iterion validate main.bot)",
            )
        } else {
            Diagnostic::new(
                Code::C150,
                Span::new(1, 1, 1),
                "no workflow declared: the file only declares (a library); there is nothing to run",
            )
            .with_hint("add `workflow NAME:` with an entry and edges to run it")
        });
    }
    for w in syms.workflows.iter().skip(1) {
        out.push(Diagnostic::new(
            Code::C007,
            w.name.span,
            format!(
                "second workflow \"{}\"; a file holds exactly one",
                w.name.name
            ),
        ));
    }
}

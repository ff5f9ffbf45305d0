//! Subbot children (DSL.md §3.9): each `source` is loaded relative to the parent file's directory
//! and compiled with the same validator input.
//!
//! Codes: C910 (a child that cannot be loaded or does not compile, or no parent file to load it
//! from), C911 (a required child var that no input key sets), C912 (an input key naming no child
//! var), C913 (a cycle of sources).
//!
//! The compiled children are handed to the lowering so the IR carries them
//! (`ir::SubbotNode::child`). Files are read and children compiled through the [`Session`] of the
//! top-level compile, which reuses what it can prove gives the same result (`session.rs`).
use std::collections::BTreeSet;

mod children;
mod session;
pub(crate) use children::Children;
pub(crate) use session::Origin;
use session::Outcome;

use super::symbols::Symbols;
use crate::{
    Code, CompileOptions,
    ast::{self, NodeBody},
    diag::Diagnostic,
    ir,
};

pub(super) fn check(
    syms: &Symbols<'_>,
    opts: &CompileOptions,
    origin: Option<&Origin>,
    out: &mut Vec<Diagnostic>,
) -> Children {
    let mut children = Children::default();
    // The child runs the nodes checked so far expand to (`ir::MAX_SUBBOT_RUNS`).
    let mut runs: u64 = 0;
    for n in &syms.node_list {
        let NodeBody::Subbot(b) = &n.body else {
            continue;
        };
        // A child's parent reads only its first cycle once there is one (and drops the rest of
        // its diagnostics), so a child stops there; the root reports every node.
        if let Some(o) = origin
            && children.cycle.is_some()
            && o.chain.len() > 1
            && o.session.stops_children_at_a_cycle()
        {
            break;
        }
        let first = syms
            .nodes
            .get(n.name.name.as_str())
            .is_some_and(|f| std::ptr::eq(*f, *n));
        if !first {
            continue;
        }
        let name = n.name.name.as_str();
        let c910 = |why: String| {
            Diagnostic::new(
                Code::C910,
                b.source.span,
                format!("subbot \"{name}\": {why}"),
            )
            .with_node(name)
        };
        let c913 = |chain: &str| {
            Diagnostic::new(
                Code::C913,
                b.source.span,
                format!("subbot \"{name}\": {chain} includes itself"),
            )
            .with_node(name)
        };
        let Some(origin) = origin else {
            out.push(
                c910("cannot load a child without the parent's file path".to_owned()).with_hint(
                    "compile the workflow from its file (iterion validate FILE) so `source` \
                     can be resolved",
                ),
            );
            continue;
        };
        let path = origin.dir.join(&b.source.value);
        let canon = origin.session.canonical(&path);
        // A workflow from a repository runs only children of that repository (issue 15 item
        // 15): the canonical path (symlinks and `..` resolved) must lie beneath the canonical
        // root; the read is then done beneath it too, so a swap after this check cannot escape.
        if let Some(repo) = &origin.repo
            && !canon.starts_with(repo)
        {
            out.push(
                Diagnostic::new(
                    Code::C915,
                    b.source.span,
                    format!(
                        "subbot \"{name}\": {} resolves to {}, outside the repository {}; a workflow from a repository runs only children inside it",
                        b.source.value,
                        canon.display(),
                        repo.display()
                    ),
                )
                .with_node(name),
            );
            continue;
        }
        // Only workflow files are read: a broken child's first error is quoted in C910, so a
        // `source` naming any other file (`/etc/passwd`, a key file, a `.iter` symlink to one)
        // would echo its first token into the output of a run someone else wrote.
        if canon.extension().is_none_or(|e| e != "iter" && e != "bot") {
            let resolved = if canon == path {
                String::new()
            } else {
                format!(" (it resolves to {})", canon.display())
            };
            out.push(c910(format!(
                "{} is not a .iter or .bot file{resolved}; a subbot runs a workflow file",
                b.source.value
            )));
            continue;
        }
        children.footprint.insert(canon.clone());
        if let Some(at) = origin.chain.iter().position(|(p, _)| *p == canon) {
            let mut names: Vec<&str> = origin.chain[at..].iter().map(|(_, s)| s.as_str()).collect();
            names.push(b.source.value.as_str());
            let chain = names.join(" -> ");
            out.push(c913(&chain));
            children.cycle.get_or_insert(chain);
            continue;
        }
        if origin.chain.len() > ir::MAX_SUBBOT_DEPTH as usize {
            out.push(c910(format!(
                "children nest deeper than {}",
                ir::MAX_SUBBOT_DEPTH
            )));
            continue;
        }
        let visit = match origin
            .session
            .visit(origin, &path, &canon, &b.source.value, opts)
        {
            Ok(visit) => visit,
            Err(e) => {
                out.push(c910(e.to_string()));
                continue;
            }
        };
        children.footprint.extend(visit.footprint.iter().cloned());
        let workflow = match &visit.outcome {
            Outcome::Cycle(chain) => {
                out.push(c913(chain));
                children.cycle.get_or_insert_with(|| chain.clone());
                continue;
            }
            Outcome::Broken(d) => {
                out.push(c910(format!(
                    "{}:{}:{}: {} {}",
                    b.source.value, d.span.line, d.span.col, d.code, d.message
                )));
                continue;
            }
            Outcome::NoWorkflow => {
                out.push(c910(format!("{} declares no workflow", b.source.value)));
                continue;
            }
            Outcome::Compiled(workflow) => workflow,
        };
        check_inputs(syms, n, workflow, out);
        // Bounded before the child is copied in: what is nested never grows past the limit.
        let adds = 1 + workflow.subbot_runs;
        if runs + adds > ir::MAX_SUBBOT_RUNS {
            out.push(c910(format!(
                "the subbot tree expands to more than {} child runs (this node adds {adds})",
                ir::MAX_SUBBOT_RUNS
            )));
            continue;
        }
        runs += adds;
        children
            .compiled
            .insert(name.to_owned(), ir::Workflow::clone(workflow));
    }
    children
}

/// C911 and C912: the input keys of the node (§5.3) against the child's vars.
fn check_inputs(
    syms: &Symbols<'_>,
    n: &ast::Node,
    child: &ir::Workflow,
    out: &mut Vec<Diagnostic>,
) {
    let name = n.name.name.as_str();
    let mut keys: BTreeSet<&str> = BTreeSet::new();
    let mut key_order: Vec<&str> = Vec::new();
    let wf = syms.workflow();
    if let ast::NodeBody::Subbot(b) = &n.body {
        for (k, _) in b.with.iter().flat_map(|m| &m.entries) {
            if keys.insert(k.name.as_str()) {
                key_order.push(k.name.as_str());
            }
        }
    }
    for e in wf.iter().flat_map(|w| &w.edges) {
        if e.to.name != name {
            continue;
        }
        for (k, _) in e.with.iter().flat_map(|m| &m.entries) {
            if keys.insert(k.name.as_str()) {
                key_order.push(k.name.as_str());
            }
        }
    }
    // The entry node without mapped keys gets the map of all vars (§5.3 step 3); those keys are
    // not the author's, so C912 does not judge them.
    let is_entry = wf
        .and_then(|w| w.entry.as_ref())
        .is_some_and(|e| e.text == name);
    if keys.is_empty() && is_entry {
        keys.extend(syms.vars.keys().copied());
    } else {
        for k in key_order {
            if child.var(k).is_none() {
                out.push(
                    Diagnostic::new(
                        Code::C912,
                        n.name.span,
                        format!("subbot \"{name}\": child has no var \"{k}\""),
                    )
                    .with_node(name),
                );
            }
        }
    }
    for v in child.vars.iter().filter(|v| v.is_required()) {
        if !keys.contains(v.name.as_str()) {
            out.push(
                Diagnostic::new(
                    Code::C911,
                    n.name.span,
                    format!(
                        "subbot \"{name}\": child var \"{}\" has no default and no input",
                        v.name
                    ),
                )
                .with_node(name),
            );
        }
    }
}

#[cfg(test)]
mod tests;

//! What the graph checks share: the first workflow's edges resolved into a [`Graph`], and the
//! small questions they all ask of nodes and schemas (terminal, fan-out, await, pure edges,
//! output schemas, suggestions).

use std::collections::{HashMap, HashSet};

use crate::ast::{self, Span};
use crate::check::symbols::Symbols;
use crate::diag::{Code, Diagnostic};

/// `done` and `fail`.
pub(super) fn is_terminal(name: &str) -> bool {
    name == "done" || name == "fail"
}

/// The closest candidate within edit distance 2 (ties: the smaller name), as a hint. Names
/// longer than 64 chars, or whose lengths differ by more than 2, are not compared, and a table of
/// more than 1000 names is not searched, so hints stay cheap on hostile input.
pub(super) fn did_you_mean<'n>(
    name: &str,
    candidates: impl Iterator<Item = &'n str>,
) -> Option<String> {
    const MAX_LEN: usize = 64;
    const MAX_CANDIDATES: usize = 1000;
    let len = name.chars().count();
    if len > MAX_LEN {
        return None;
    }
    let candidates: Vec<&str> = candidates.take(MAX_CANDIDATES + 1).collect();
    if candidates.len() > MAX_CANDIDATES {
        return None;
    }
    candidates
        .into_iter()
        .filter(|c| *c != name && c.len() <= MAX_LEN + 2 && c.chars().count().abs_diff(len) <= 2)
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, c)| format!("did you mean \"{c}\"?"))
}

/// What is known about a node's output schema.
#[derive(Clone, Copy, Debug)]
pub(super) enum OutputSchema<'a> {
    /// `output:` names a declared schema.
    Known(&'a ast::Schema),
    /// No `output:` (or a router): fields cannot be checked.
    Missing,
    /// `output:` names no schema (C002), or the node is unknown: say nothing.
    Unknown,
}

pub(super) fn output_schema<'a>(syms: &Symbols<'a>, node: &str) -> OutputSchema<'a> {
    let Some(n) = syms.nodes.get(node) else {
        return OutputSchema::Unknown;
    };
    let name = match &n.body {
        ast::NodeBody::Agent(a) => a.output.as_ref(),
        ast::NodeBody::Tool(t) => t.output.as_ref(),
        ast::NodeBody::Subbot(b) => b.output.as_ref(),
        ast::NodeBody::Compute(c) => c.output.as_ref(),
        ast::NodeBody::Human(h) => h.output.as_ref(),
        ast::NodeBody::Router(_) | ast::NodeBody::Fail(_) => None,
    };
    match name {
        None => OutputSchema::Missing,
        Some(id) => match syms.schemas.get(id.name.as_str()) {
            Some(s) => OutputSchema::Known(s),
            None => OutputSchema::Unknown,
        },
    }
}

/// C920 for a condition on input field `f` of `router`, once per predecessor whose output cannot
/// hold `f`: a router's input is the output of the node it was reached from, with the `with`
/// entries of the edges into it applied over it (DSL.md §3.7). A predecessor whose edge sets
/// `f` with `with`, or whose output is unchecked (no schema, or a router), says nothing.
pub(super) fn router_input_lacks(
    syms: &Symbols<'_>,
    router: &str,
    f: &str,
    span: Span,
    out: &mut Vec<Diagnostic>,
) {
    if !matches!(
        syms.nodes.get(router).map(|n| &n.body),
        Some(ast::NodeBody::Router(r)) if r.mode == ast::RouterMode::Condition
    ) {
        return;
    }
    let Some(wf) = syms.workflows.first() else {
        return;
    };
    let into: Vec<&ast::Edge> = wf.edges.iter().filter(|e| e.to.name == router).collect();
    let mapped = into.iter().any(|e| {
        e.with
            .as_ref()
            .is_some_and(|w| w.entries.iter().any(|(k, _)| k.name == f))
    });
    if mapped {
        return;
    }
    let mut seen = HashSet::new();
    for e in into {
        let pred = e.from.name.as_str();
        if !seen.insert(pred) {
            continue;
        }
        if let OutputSchema::Known(schema) = output_schema(syms, pred)
            && field(schema, f).is_none()
        {
            out.push(
                Diagnostic::new(
                    Code::C920,
                    span,
                    format!(
                        "router \"{router}\" reads input.{f}, which its input from \"{pred}\" cannot have: output schema \"{}\" of \"{pred}\" has no field \"{f}\"",
                        schema.name.name
                    ),
                )
                .with_node(router)
                .with_hint(format!(
                    "a router's input is its predecessor's output; map the field on the edge ({pred} -> {router} with {{ {f}: \"{{{{input.…}}}}\" }}) or test a field \"{pred}\" has"
                )),
            );
        }
    }
}

pub(super) fn field<'a>(schema: &'a ast::Schema, name: &str) -> Option<&'a ast::Field> {
    schema.fields.iter().find(|f| f.name.name == name)
}

/// Whether a declared node is a fan-out router: `fan_out_all`, or `fan_out_each` (whose one
/// branch has the same structure, replayed per item).
pub(super) fn is_fan_out(syms: &Symbols<'_>, node: &str) -> bool {
    matches!(
        syms.nodes.get(node).map(|n| &n.body),
        Some(ast::NodeBody::Router(r))
            if matches!(r.mode, ast::RouterMode::FanOutAll | ast::RouterMode::FanOutEach)
    )
}

/// Whether `field` of `node`'s output is a `fan_out_each` router's item (its `as` name, or
/// `item`).
pub(super) fn is_each_item(syms: &Symbols<'_>, node: &str, field: &str) -> bool {
    matches!(
        syms.nodes.get(node).map(|n| &n.body),
        Some(ast::NodeBody::Router(r)) if r.mode == ast::RouterMode::FanOutEach
            && r.as_.as_ref().map_or("item", |w| w.text.as_str()) == field
    )
}

/// Whether a declared node has `await`.
pub(super) fn has_await(syms: &Symbols<'_>, node: &str) -> bool {
    await_span(syms, node).is_some()
}

pub(super) fn await_span(syms: &Symbols<'_>, node: &str) -> Option<Span> {
    match &syms.nodes.get(node)?.body {
        ast::NodeBody::Agent(a) => a.await_.map(|(_, s)| s),
        ast::NodeBody::Tool(t) => t.await_.map(|(_, s)| s),
        ast::NodeBody::Subbot(b) => b.await_.map(|(_, s)| s),
        ast::NodeBody::Compute(c) => c.await_.map(|(_, s)| s),
        ast::NodeBody::Human(h) => h.await_.map(|(_, s)| s),
        ast::NodeBody::Router(_) | ast::NodeBody::Fail(_) => None,
    }
}

/// The first declaration of every node name, in declaration order.
pub(super) fn first_nodes<'a>(syms: &Symbols<'a>) -> Vec<&'a ast::Node> {
    syms.node_list
        .iter()
        .copied()
        .filter(|n| {
            syms.nodes
                .get(n.name.name.as_str())
                .is_some_and(|first| std::ptr::eq(*first, *n))
        })
        .collect()
}

/// Whether an edge is pure unconditional: no `when`, no `else`, no `as` (§5.1).
pub(super) fn is_pure(e: &ast::Edge) -> bool {
    e.when.is_none() && e.else_.is_none() && e.loop_.is_none()
}

/// The workflow's edges with both endpoints declared, and what the checks ask of them.
pub(super) struct Graph<'a> {
    /// The workflow.
    pub wf: &'a ast::Workflow,
    /// Edges whose endpoints are declared (targets may be `done`/`fail`), in declaration order.
    pub edges: Vec<&'a ast::Edge>,
    /// Outgoing edges (indices into `edges`) by source.
    pub outgoing: HashMap<&'a str, Vec<usize>>,
    /// Incoming edges (indices into `edges`) by target.
    pub incoming: HashMap<&'a str, Vec<usize>>,
    /// Sources of every edge as written, dangling ones included (C901 counts them).
    pub written_sources: HashSet<&'a str>,
    /// Loop names of every `as` clause.
    pub loops: HashSet<&'a str>,
}

impl<'a> Graph<'a> {
    /// Resolves the edges, reporting C001 for undeclared endpoints.
    pub(super) fn build(
        wf: &'a ast::Workflow,
        syms: &Symbols<'a>,
        out: &mut Vec<Diagnostic>,
    ) -> Self {
        let mut g = Graph {
            wf,
            edges: Vec::new(),
            outgoing: HashMap::new(),
            incoming: HashMap::new(),
            written_sources: HashSet::new(),
            loops: HashSet::new(),
        };
        for e in &wf.edges {
            let (a, b) = (e.from.name.as_str(), e.to.name.as_str());
            g.written_sources.insert(a);
            if let Some(l) = &e.loop_ {
                g.loops.insert(l.name.name.as_str());
            }
            let from_ok = syms.nodes.contains_key(a);
            let to_ok = syms.nodes.contains_key(b) || is_terminal(b);
            let names = || syms.nodes.keys().copied();
            if !from_ok {
                let mut d = Diagnostic::new(
                    Code::C001,
                    e.from.span,
                    format!("edge \"{a} -> {b}\": unknown node \"{a}\""),
                );
                if let Some(h) = did_you_mean(a, names()) {
                    d = d.with_hint(h);
                }
                out.push(d);
            }
            if !to_ok {
                let mut d = Diagnostic::new(
                    Code::C001,
                    e.to.span,
                    format!("edge \"{a} -> {b}\": unknown node \"{b}\""),
                );
                if from_ok {
                    d = d.with_node(a);
                }
                if let Some(h) = did_you_mean(b, names().chain(["done", "fail"])) {
                    d = d.with_hint(h);
                }
                out.push(d);
            }
            if from_ok && to_ok {
                let i = g.edges.len();
                g.edges.push(e);
                g.outgoing.entry(a).or_default().push(i);
                g.incoming.entry(b).or_default().push(i);
            }
        }
        g
    }

    /// The resolved outgoing edges of `node`, in declaration order.
    pub fn out_edges(&self, node: &str) -> impl Iterator<Item = &'a ast::Edge> + '_ {
        self.outgoing
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|i| self.edges.get(*i).copied())
    }

    /// The resolved incoming edges of `node`, in declaration order.
    pub fn in_edges(&self, node: &str) -> impl Iterator<Item = &'a ast::Edge> + '_ {
        self.incoming
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|i| self.edges.get(*i).copied())
    }

    /// For each `(from, to)` pair, whether a path of one or more edges (of any kind) leads from
    /// `from` to `to` (§4.1, "runs before"; a node on a cycle reaches itself). Names that are
    /// no declared node reach nothing.
    ///
    /// Answered in one batch so a hostile file cannot make it quadratic: strongly connected
    /// components are condensed, then the distinct sources are propagated 64 at a time as
    /// bit masks over the component DAG, in O(⌈sources/64⌉ · (V + E)).
    pub fn reach_many(&self, syms: &Symbols<'a>, pairs: &[(&str, &str)]) -> Vec<bool> {
        let nodes: Vec<&str> = first_nodes(syms)
            .into_iter()
            .map(|n| n.name.name.as_str())
            .collect();
        let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nodes.len()];
        let mut self_loop = vec![false; nodes.len()];
        for (ei, e) in self.edges.iter().enumerate() {
            if let (Some(&a), Some(&b)) = (
                index.get(e.from.name.as_str()),
                index.get(e.to.name.as_str()),
            ) {
                if let Some(list) = adj.get_mut(a) {
                    list.push((ei, b));
                }
                if a == b
                    && let Some(s) = self_loop.get_mut(a)
                {
                    *s = true;
                }
            }
        }
        // Tarjan emits components in reverse topological order: successors first.
        let comps = tarjan(&adj);
        let mut comp_of = vec![0usize; nodes.len()];
        let mut cyclic = vec![false; comps.len()];
        for (ci, comp) in comps.iter().enumerate() {
            for &u in comp {
                if let Some(c) = comp_of.get_mut(u) {
                    *c = ci;
                }
            }
            if let Some(flag) = cyclic.get_mut(ci) {
                *flag = comp.len() > 1 || comp.iter().any(|&u| self_loop.get(u) == Some(&true));
            }
        }
        let comp = |name: &str| index.get(name).and_then(|&i| comp_of.get(i).copied());
        let mut answers = vec![false; pairs.len()];
        // Pairs inside one component; the rest wait for the DAG pass, by source component.
        let mut by_source: Vec<usize> = Vec::new();
        let mut pending: Vec<(usize, usize, usize)> = Vec::new(); // (pair, source comp, target comp)
        for (pi, (from, to)) in pairs.iter().enumerate() {
            let (Some(cf), Some(ct)) = (comp(from), comp(to)) else {
                continue;
            };
            if cf == ct {
                if let Some(a) = answers.get_mut(pi) {
                    *a = cyclic.get(cf) == Some(&true);
                }
            } else if cf > ct {
                // Only a component emitted later (earlier in topological order) can reach.
                by_source.push(cf);
                pending.push((pi, cf, ct));
            }
        }
        if pending.is_empty() {
            return answers;
        }
        by_source.sort_unstable();
        by_source.dedup();
        pending.sort_unstable_by_key(|&(_, cf, _)| cf);
        let mut bit_of = vec![0u64; comps.len()];
        let mut next_pending = 0;
        for chunk in by_source.chunks(64) {
            let mut mask = vec![0u64; comps.len()];
            for (i, &c) in chunk.iter().enumerate() {
                if let (Some(b), Some(m)) = (bit_of.get_mut(c), mask.get_mut(c)) {
                    *b = 1u64 << i;
                    *m = 1u64 << i;
                }
            }
            // Sources before successors: walk the components from last emitted to first, from
            // the chunk's latest source down to its earliest target.
            let last = chunk.last().copied().unwrap_or(0);
            let lowest = pending
                .iter()
                .skip(next_pending)
                .take_while(|&&(_, cf, _)| cf <= last)
                .map(|&(_, _, ct)| ct)
                .min()
                .unwrap_or(last);
            for ci in (lowest..=last).rev() {
                let m = mask.get(ci).copied().unwrap_or(0);
                if m == 0 {
                    continue;
                }
                for &u in comps.get(ci).into_iter().flatten() {
                    for &(_, v) in adj.get(u).into_iter().flatten() {
                        let cv = comp_of.get(v).copied().unwrap_or(ci);
                        if cv != ci
                            && let Some(t) = mask.get_mut(cv)
                        {
                            *t |= m;
                        }
                    }
                }
            }
            // The pending pairs whose source is in this chunk are contiguous.
            while let Some(&(pi, cf, ct)) = pending.get(next_pending) {
                if cf > last {
                    break;
                }
                next_pending += 1;
                let b = bit_of.get(cf).copied().unwrap_or(0);
                if mask.get(ct).is_some_and(|m| m & b != 0)
                    && let Some(a) = answers.get_mut(pi)
                {
                    *a = true;
                }
            }
            for &c in chunk {
                if let Some(b) = bit_of.get_mut(c) {
                    *b = 0;
                }
            }
        }
        answers
    }
}

/// Strongly connected components (Tarjan), iteratively so a long chain cannot overflow the
/// stack. Returns every component, singletons included.
pub(super) fn tarjan(adj: &[Vec<(usize, usize)>]) -> Vec<Vec<usize>> {
    let n = adj.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut comps = Vec::new();
    let mut next = 0usize;
    // Call stack frames: (node, position in its adjacency list).
    let mut frames: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index.get(root) != Some(&usize::MAX) {
            continue;
        }
        frames.push((root, 0));
        while let Some(&mut (u, ref mut pos)) = frames.last_mut() {
            if *pos == 0 && index.get(u) == Some(&usize::MAX) {
                if let (Some(i), Some(l), Some(s)) =
                    (index.get_mut(u), low.get_mut(u), on_stack.get_mut(u))
                {
                    *i = next;
                    *l = next;
                    *s = true;
                }
                next += 1;
                stack.push(u);
            }
            let succ = adj.get(u).and_then(|l| l.get(*pos)).map(|&(_, v)| v);
            match succ {
                Some(v) => {
                    *pos += 1;
                    let vi = index.get(v).copied().unwrap_or(0);
                    if vi == usize::MAX {
                        frames.push((v, 0));
                    } else if on_stack.get(v).copied().unwrap_or(false) {
                        let lu = low.get(u).copied().unwrap_or(0);
                        if let Some(l) = low.get_mut(u) {
                            *l = lu.min(vi);
                        }
                    }
                }
                None => {
                    frames.pop();
                    let lu = low.get(u).copied().unwrap_or(0);
                    if let Some(&(parent, _)) = frames.last()
                        && let Some(lp) = low.get_mut(parent)
                    {
                        *lp = (*lp).min(lu);
                    }
                    if Some(&lu) == index.get(u) {
                        let mut comp = Vec::new();
                        while let Some(w) = stack.pop() {
                            if let Some(s) = on_stack.get_mut(w) {
                                *s = false;
                            }
                            comp.push(w);
                            if w == u {
                                break;
                            }
                        }
                        comps.push(comp);
                    }
                }
            }
        }
    }
    comps
}

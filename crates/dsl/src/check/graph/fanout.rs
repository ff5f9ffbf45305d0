//! `fan_out_all` structure and input keys (DSL.md §5.6, §5.1): C028, C906, C907, C908.
use std::collections::{HashMap, HashSet, VecDeque};

use super::{Graph, await_span, first_nodes, has_await, is_fan_out, is_pure, is_terminal};
use crate::ast;
use crate::check::symbols::Symbols;
use crate::diag::{Code, Diagnostic};

/// One branch of a fan-out: the nodes reachable from its target without entering an `await`
/// node, and the `await` nodes at its boundary.
struct Branch<'a> {
    /// The branch's first node (the target of the router's edge).
    start: &'a str,
    /// Region nodes in discovery order.
    nodes: Vec<&'a str>,
    /// The edge through which each region node was first entered.
    entered_by: HashMap<&'a str, &'a ast::Edge>,
    /// `await` nodes reached at the boundary, in discovery order.
    awaits: Vec<&'a str>,
}

fn branch<'a>(g: &Graph<'a>, syms: &Symbols<'a>, edge: &'a ast::Edge) -> Branch<'a> {
    let start = edge.to.name.as_str();
    let mut b = Branch {
        start,
        nodes: Vec::new(),
        entered_by: HashMap::new(),
        awaits: Vec::new(),
    };
    let visit =
        |b: &mut Branch<'a>, v: &'a str, by: &'a ast::Edge, queue: &mut VecDeque<&'a str>| {
            if is_terminal(v) {
                return;
            }
            if has_await(syms, v) {
                if !b.awaits.contains(&v) {
                    b.awaits.push(v);
                }
            } else if !b.entered_by.contains_key(v) {
                b.entered_by.insert(v, by);
                b.nodes.push(v);
                queue.push_back(v);
            }
        };
    let mut queue = VecDeque::new();
    visit(&mut b, start, edge, &mut queue);
    while let Some(u) = queue.pop_front() {
        for e in g.out_edges(u) {
            visit(&mut b, e.to.name.as_str(), e, &mut queue);
        }
    }
    b
}

/// What the fan-out analysis found about one valid join.
struct Join<'a> {
    /// Region node → branch index.
    branch_of: HashMap<&'a str, usize>,
}

pub(super) fn check<'a>(g: &Graph<'a>, syms: &Symbols<'a>, out: &mut Vec<Diagnostic>) {
    let mut reached: HashSet<&str> = HashSet::new();
    let mut joins: HashMap<&str, (&str, Join<'_>)> = HashMap::new();
    for node in first_nodes(syms) {
        let r = node.name.name.as_str();
        if !is_fan_out(syms, r) {
            continue;
        }
        let branches: Vec<Branch<'_>> = g.out_edges(r).map(|e| branch(g, syms, e)).collect();
        let mut all: Vec<&str> = Vec::new();
        for b in &branches {
            for a in &b.awaits {
                if !all.contains(a) {
                    all.push(a);
                }
            }
        }
        reached.extend(all.iter().copied());
        let missing = branches
            .iter()
            .find(|b| all.first().is_none_or(|j| !b.awaits.contains(j)));
        let j = match (all.as_slice(), missing) {
            ([j], None) => *j,
            _ => {
                let hint = match (all.as_slice(), missing) {
                    ([], _) => "give the node where the branches meet an await".to_string(),
                    ([j], Some(b)) => format!("branch \"{}\" never reaches \"{j}\"", b.start),
                    (many, _) => format!(
                        "the branches reach {}; keep one",
                        many.iter()
                            .map(|n| format!("\"{n}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                out.push(
                    Diagnostic::new(
                        Code::C906,
                        node.name.span,
                        format!(
                            "fan-out \"{r}\" needs one join with await; found {}",
                            all.len()
                        ),
                    )
                    .with_node(r)
                    .with_hint(hint),
                );
                continue;
            }
        };
        let mut c = Breaches { r, out: &mut *out };
        // Regions are disjoint: report a shared node where it is first entered from a node
        // that is not itself shared (so one overlap is one diagnostic).
        let mut owner: HashMap<&str, usize> = HashMap::new();
        let mut shared: HashSet<&str> = HashSet::new();
        for (bi, b) in branches.iter().enumerate() {
            for v in &b.nodes {
                match owner.get(v) {
                    None => {
                        owner.insert(v, bi);
                    }
                    Some(&first) => {
                        let Some(by) = b.entered_by.get(v) else {
                            continue;
                        };
                        if !shared.contains(by.from.name.as_str()) {
                            let other = branches.get(first).map_or("", |f| f.start);
                            c.push(
                                by,
                                format!(
                                    "\"{v}\" is in the branches of both \"{other}\" and \"{}\"",
                                    b.start
                                ),
                            );
                        }
                        shared.insert(v);
                    }
                }
            }
        }
        // Every edge into a region node comes from R or from the region.
        for e in &g.edges {
            let (a, t) = (e.from.name.as_str(), e.to.name.as_str());
            if let Some(&bi) = owner.get(t)
                && a != r
                && !owner.contains_key(a)
            {
                let start = branches.get(bi).map_or("", |b| b.start);
                c.push(
                    e,
                    format!(
                        "edge \"{a} -> {t}\" enters branch \"{start}\" from outside the fan-out"
                    ),
                );
            }
        }
        // Every edge into J comes from a region of R.
        for e in g.in_edges(j) {
            let a = e.from.name.as_str();
            if !owner.contains_key(a) {
                c.push(
                    e,
                    format!("join \"{j}\" is also entered from \"{a}\", outside the branches"),
                );
            }
        }
        // No region holds an edge to done, a loop edge, or a fan_out_all router.
        let mut region: Vec<(&str, usize)> = owner.iter().map(|(n, b)| (*n, *b)).collect();
        region.sort_by_key(|(n, b)| {
            (
                *b,
                branches
                    .get(*b)
                    .and_then(|br| br.nodes.iter().position(|x| x == n)),
            )
        });
        for (u, bi) in region {
            let Some(b) = branches.get(bi) else { continue };
            if is_fan_out(syms, u)
                && let Some(by) = b.entered_by.get(u)
            {
                c.push(
                    by,
                    format!("branch \"{}\" holds the fan-out \"{u}\"", b.start),
                );
            }
            for e in g.out_edges(u) {
                if e.to.name == "done" {
                    c.push(e, format!("branch \"{}\" has an edge to done", b.start));
                }
                if e.loop_.is_some() {
                    c.push(
                        e,
                        format!(
                            "branch \"{}\" holds the loop edge \"{} -> {}\"",
                            b.start, e.from.name, e.to.name
                        ),
                    );
                }
            }
        }
        // A node is the join of at most one router.
        if let Some((first, _)) = joins.get(j) {
            let first = *first;
            if let Some(e) = g
                .in_edges(j)
                .find(|e| owner.contains_key(e.from.name.as_str()))
            {
                c.push(e, format!("\"{j}\" is already the join of \"{first}\""));
            }
        } else {
            joins.insert(j, (r, Join { branch_of: owner }));
        }
    }
    // C908: `await` on a node that no fan-out reaches.
    for node in first_nodes(syms) {
        let n = node.name.name.as_str();
        if let Some(span) = await_span(syms, n)
            && !reached.contains(n)
        {
            out.push(
                Diagnostic::new(
                    Code::C908,
                    span,
                    format!("await on \"{n}\" has no effect: it is not a fan-out join"),
                )
                .with_node(n),
            );
        }
    }
    input_keys(g, &joins, out);
}

struct Breaches<'r, 'o> {
    r: &'r str,
    out: &'o mut Vec<Diagnostic>,
}

impl Breaches<'_, '_> {
    fn push(&mut self, e: &ast::Edge, why: String) {
        self.out.push(
            Diagnostic::new(
                Code::C907,
                e.from.span,
                format!("fan-out \"{}\": {why}", self.r),
            )
            .with_node(e.from.name.as_str()),
        );
    }
}

/// C028: two pure unconditional edges from different sources into one target map the same key;
/// into a join, any two edges from different branches do.
fn input_keys(g: &Graph<'_>, joins: &HashMap<&str, (&str, Join<'_>)>, out: &mut Vec<Diagnostic>) {
    let mut targets: Vec<&str> = Vec::new();
    for e in &g.edges {
        let t = e.to.name.as_str();
        if !is_terminal(t) && !targets.contains(&t) {
            targets.push(t);
        }
    }
    for t in targets {
        let join = joins.get(t).map(|(_, j)| j);
        let edges: Vec<&ast::Edge> = g.in_edges(t).filter(|e| e.with.is_some()).collect();
        for (i, later) in edges.iter().enumerate() {
            let Some(with) = &later.with else { continue };
            for (key, _) in &with.entries {
                let clash = edges.iter().take(i).find(|earlier| {
                    let maps_key = earlier
                        .with
                        .as_ref()
                        .is_some_and(|w| w.entries.iter().any(|(k, _)| k.name == key.name));
                    let (a, b) = (earlier.from.name.as_str(), later.from.name.as_str());
                    let branches =
                        join.and_then(|j| Some((j.branch_of.get(a)?, j.branch_of.get(b)?)));
                    maps_key
                        && a != b
                        && ((is_pure(earlier) && is_pure(later))
                            || branches.is_some_and(|(x, y)| x != y))
                });
                if let Some(earlier) = clash {
                    out.push(
                        Diagnostic::new(
                            Code::C028,
                            key.span,
                            format!(
                                "node \"{t}\" receives \"{}\" from both \"{}\" and \"{}\"",
                                key.name, earlier.from.name, later.from.name
                            ),
                        )
                        .with_node(later.from.name.as_str()),
                    );
                }
            }
        }
    }
}

//! `fan_out_all` structure and input keys (DSL.md §5.6, §5.1): C028, C906, C907, C908.
//!
//! A join is an `await` node, or a `fan_out_all` router that every branch reaches (a chained
//! fan-out: the router waits for all branches, as `await: wait_all`, then fans out again).
//!
//! Every region node is claimed by the first branch that reaches it, across all routers, and a
//! walk never expands a claimed node again: the whole analysis is linear in the graph however
//! many routers and branches a file has. A branch that runs into another branch of its router
//! is a disjointness breach (C907) and shares that branch's joins; one that runs into another
//! router's region, or into a `fan_out_all` router, makes its router's structure undecidable
//! here, so only the breach is reported for it.
use std::collections::{HashMap, HashSet, VecDeque};

use super::model::{Graph, await_span, first_nodes, has_await, is_fan_out, is_pure, is_terminal};
use crate::ast;
use crate::check::symbols::Symbols;
use crate::diag::{Code, Diagnostic};

/// One branch of a fan-out: the nodes reachable from its target without entering an `await`
/// node, and the `await` nodes at its boundary.
struct Branch<'a> {
    /// The branch's first node (the target of the router's edge).
    start: &'a str,
    /// Region nodes this branch claimed, in discovery order.
    nodes: Vec<&'a str>,
    /// The edge through which each claimed node was entered.
    entered_by: HashMap<&'a str, &'a ast::Edge>,
    /// `await` nodes reached at the boundary, in discovery order.
    awaits: Vec<&'a str>,
    /// Earlier branches of the same router this one ran into: (node, entering edge, branch).
    overlaps: Vec<(&'a str, &'a ast::Edge, usize)>,
    /// `fan_out_all` routers entered: (router, entering edge).
    routers: Vec<(&'a str, &'a ast::Edge)>,
    /// Ran into another router's region.
    foreign: bool,
    /// Has an edge to `done`.
    to_done: bool,
}

/// Region node → (router ordinal, branch index).
type Claims<'a> = HashMap<&'a str, (usize, usize)>;

fn branch<'a>(
    g: &Graph<'a>,
    syms: &Symbols<'a>,
    claims: &mut Claims<'a>,
    (ri, bi): (usize, usize),
    edge: &'a ast::Edge,
) -> Branch<'a> {
    let mut b = Branch {
        start: edge.to.name.as_str(),
        nodes: Vec::new(),
        entered_by: HashMap::new(),
        awaits: Vec::new(),
        overlaps: Vec::new(),
        routers: Vec::new(),
        foreign: false,
        to_done: false,
    };
    let mut awaits: HashSet<&str> = HashSet::new();
    let mut overlapped: HashSet<&str> = HashSet::new();
    let mut queue = VecDeque::new();
    let mut visit =
        |b: &mut Branch<'a>, v: &'a str, by: &'a ast::Edge, queue: &mut VecDeque<&'a str>| {
            if is_terminal(v) {
                b.to_done |= v == "done";
                return;
            }
            if has_await(syms, v) {
                if awaits.insert(v) {
                    b.awaits.push(v);
                }
                return;
            }
            if is_fan_out(syms, v) {
                // A `fan_out_all` router every branch reaches is their join (wait_all), and
                // then fans out again; anywhere else it nests a fan-out (C907).
                if !b.routers.iter().any(|(r, _)| *r == v) {
                    b.routers.push((v, by));
                }
                if awaits.insert(v) {
                    b.awaits.push(v);
                }
                return;
            }
            match claims.get(v).copied() {
                None => {
                    claims.insert(v, (ri, bi));
                    b.entered_by.insert(v, by);
                    b.nodes.push(v);
                    queue.push_back(v);
                }
                Some((r, o)) if r == ri && o != bi => {
                    if overlapped.insert(v) {
                        b.overlaps.push((v, by, o));
                    }
                }
                Some((r, _)) if r != ri => b.foreign = true,
                Some(_) => {}
            }
        };
    visit(&mut b, edge.to.name.as_str(), edge, &mut queue);
    while let Some(u) = queue.pop_front() {
        for e in g.out_edges(u) {
            visit(&mut b, e.to.name.as_str(), e, &mut queue);
        }
    }
    b
}

/// A valid join: its router, and the branch of every region node of that router.
struct Join<'a> {
    router: &'a str,
    branch_of: HashMap<&'a str, usize>,
}

pub(super) fn check<'a>(g: &Graph<'a>, syms: &Symbols<'a>, out: &mut Vec<Diagnostic>) {
    let mut reached: HashSet<&str> = HashSet::new();
    let mut joins: HashMap<&str, Join<'_>> = HashMap::new();
    let mut claims: Claims<'_> = HashMap::new();
    let routers = first_nodes(syms)
        .into_iter()
        .filter(|n| is_fan_out(syms, &n.name.name));
    for (ri, node) in routers.enumerate() {
        let r = node.name.name.as_str();
        let branches: Vec<Branch<'_>> = g
            .out_edges(r)
            .enumerate()
            .map(|(bi, e)| branch(g, syms, &mut claims, (ri, bi), e))
            .collect();
        let mut c = Breaches { r, out: &mut *out };
        let mut all: Vec<&str> = Vec::new();
        let mut all_set: HashSet<&str> = HashSet::new();
        for b in &branches {
            for a in &b.awaits {
                reached.insert(a);
                if all_set.insert(a) {
                    all.push(a);
                }
            }
        }
        // The only boundary node, a router: a chained fan-out, joined by that router.
        let chained = |inner: &str| matches!(all.as_slice(), [j] if *j == inner);
        let mut nested = false;
        for b in &branches {
            for (inner, by) in &b.routers {
                if !chained(inner) {
                    nested = true;
                    c.push(
                        by,
                        format!("branch \"{}\" holds the fan-out \"{inner}\"", b.start),
                    );
                }
            }
        }
        if nested || branches.iter().any(|b| b.foreign) {
            continue;
        }
        // Which branches can reach each candidate join: their own awaits, or those of an
        // earlier branch they ran into.
        let reaches = |j: &str| {
            let mut can: Vec<bool> = Vec::with_capacity(branches.len());
            for b in &branches {
                let via = b
                    .overlaps
                    .iter()
                    .any(|(_, _, o)| can.get(*o).copied().unwrap_or(false));
                can.push(via || b.awaits.contains(&j));
            }
            can
        };
        let missing = match all.as_slice() {
            [j] => reaches(j).iter().position(|ok| !ok),
            _ => None,
        };
        let j = match (all.as_slice(), missing) {
            ([j], None) => *j,
            _ => {
                let hint = match (all.as_slice(), missing.and_then(|m| branches.get(m))) {
                    // Upstream converged branches that all end at `done` there, implicitly.
                    ([], _) if branches.iter().all(|b| b.to_done) => {
                        "the branches all end at done: \
                         gather them first in a node with await (a compute node that maps their \
                         outputs, or a join), then go from it to done"
                            .to_string()
                    }
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
                c.out.push(
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
        // Regions are disjoint.
        for b in &branches {
            for (v, by, o) in &b.overlaps {
                let other = branches.get(*o).map_or("", |f| f.start);
                c.push(
                    by,
                    format!(
                        "\"{v}\" is in the branches of both \"{other}\" and \"{}\"",
                        b.start
                    ),
                );
            }
        }
        let owner = |n: &str| match claims.get(n) {
            Some((cr, cb)) if *cr == ri => Some(*cb),
            _ => None,
        };
        for b in &branches {
            for &u in &b.nodes {
                // Every edge into a region node comes from R or from the region.
                for e in g.in_edges(u) {
                    let a = e.from.name.as_str();
                    if a != r && owner(a).is_none() {
                        c.push(
                            e,
                            format!(
                                "edge \"{a} -> {u}\" enters branch \"{}\" from outside the fan-out",
                                b.start
                            ),
                        );
                    }
                }
                // No region holds an edge to done or a loop edge.
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
        }
        // A node is the join of at most one router; every edge into J comes from a region.
        if let Some(first) = joins.get(j) {
            if let Some(e) = g.in_edges(j).find(|e| owner(&e.from.name).is_some()) {
                c.push(
                    e,
                    format!("\"{j}\" is already the join of \"{}\"", first.router),
                );
            }
            continue;
        }
        for e in g.in_edges(j) {
            let a = e.from.name.as_str();
            // An edge from the router straight to the join is a branch with no node: it
            // arrives at once with its `with` (upstream accepts it).
            if a != r && owner(a).is_none() {
                c.push(
                    e,
                    format!("join \"{j}\" is also entered from \"{a}\", outside the branches"),
                );
            }
        }
        let branch_of = branches
            .iter()
            .enumerate()
            .flat_map(|(bi, b)| b.nodes.iter().map(move |n| (*n, bi)))
            .collect();
        joins.insert(
            j,
            Join {
                router: r,
                branch_of,
            },
        );
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

/// Two `with` values that are the same whichever edge delivers them: equal, and (for template
/// text) reading nothing from `input`, the only namespace that differs per edge.
fn same_context_free(a: &ast::Value, b: &ast::Value) -> bool {
    match (a, b) {
        (ast::Value::Str(x), ast::Value::Str(y)) => {
            x.value == y.value
                && crate::template::parse(&x.value)
                    .references()
                    .all(|r| r.namespace != crate::template::Namespace::Input)
        }
        (ast::Value::Int(x, _), ast::Value::Int(y, _)) => x == y,
        (ast::Value::Bool(x, _), ast::Value::Bool(y, _)) => x == y,
        (ast::Value::Ident(x), ast::Value::Ident(y)) => x.name == y.name,
        _ => false,
    }
}

/// The first earlier edges mapping one key into one target: what C028 compares a later edge
/// with, kept small so the check is linear in the number of keys.
#[derive(Default)]
struct KeySeen<'a> {
    /// The first pure edge, and the first pure edge from another source than it.
    pure: [Option<(usize, &'a str)>; 2],
    /// The first edge from a join branch, and the first from another branch than it.
    branch: [Option<(usize, &'a str, usize)>; 2],
}

/// C028: into a join, two pure unconditional edges from different sources map the same key, or
/// any two edges from different branches do.
///
/// An edge whose source is a loop's entry (the target of a loop edge) does not count among the
/// pure ones: that source runs again on every crossing and its edge re-enters the target on a
/// later pass than the first edge, with the taken edge's mapping winning (§5.3), as upstream's
/// check has it (its workflows re-run a node after a fix loop with the first pass's keys).
fn input_keys(g: &Graph<'_>, joins: &HashMap<&str, Join<'_>>, out: &mut Vec<Diagnostic>) {
    let reentries: HashSet<&str> = g
        .edges
        .iter()
        .filter(|e| e.loop_.is_some())
        .map(|e| e.to.name.as_str())
        .collect();
    let mut targets: Vec<&str> = Vec::new();
    let mut seen_target: HashSet<&str> = HashSet::new();
    for e in &g.edges {
        let t = e.to.name.as_str();
        if !is_terminal(t) && seen_target.insert(t) {
            targets.push(t);
        }
    }
    for t in targets {
        let join = joins.get(t);
        let mut keys: HashMap<&str, KeySeen<'_>> = HashMap::new();
        for (i, e) in g.in_edges(t).enumerate() {
            let Some(with) = &e.with else { continue };
            let src = e.from.name.as_str();
            // Into a node that is not a join, the taken edge's mapping wins (§5.3): two sources
            // mapping one key there overwrite nothing (upstream's workflows route a success and
            // a failure branch into one bookkeeping node, each saying why).
            let pure = join.is_some() && is_pure(e) && !reentries.contains(src);
            let br = join.and_then(|j| j.branch_of.get(src).copied());
            for (key, value) in &with.entries {
                let seen = keys.entry(key.name.as_str()).or_default();
                let by_pure = if pure {
                    match seen.pure {
                        [Some((k, a)), _] if a != src => Some((k, a)),
                        [_, second] => second,
                    }
                } else {
                    None
                };
                let by_branch = br.and_then(|b| match seen.branch {
                    [Some((k, a, x)), _] if x != b => Some((k, a)),
                    [_, second] => second.map(|(k, a, _)| (k, a)),
                });
                let clash = match (by_pure, by_branch) {
                    (Some(p), Some(q)) => Some(if p.0 <= q.0 { p } else { q }),
                    (p, q) => p.or(q),
                };
                // The same text reading no `input` is the same value from either edge: nothing
                // is overwritten (upstream does not check keys into a node with two sources).
                let same_value = |k: usize| {
                    g.in_edges(t)
                        .nth(k)
                        .and_then(|other| other.with.as_ref())
                        .and_then(|w| w.entries.iter().find(|(k2, _)| k2.name == key.name))
                        .is_some_and(|(_, v)| same_context_free(v, value))
                };
                if let Some((k, earlier)) = clash
                    && !same_value(k)
                {
                    out.push(
                        Diagnostic::new(
                            Code::C028,
                            key.span,
                            format!(
                                "node \"{t}\" receives \"{}\" from both \"{earlier}\" and \"{src}\"",
                                key.name
                            ),
                        )
                        .with_node(src),
                    );
                }
                if pure {
                    match seen.pure {
                        [None, _] => seen.pure[0] = Some((i, src)),
                        [Some((_, a)), None] if a != src => seen.pure[1] = Some((i, src)),
                        _ => {}
                    }
                }
                if let Some(b) = br {
                    match seen.branch {
                        [None, _] => seen.branch[0] = Some((i, src, b)),
                        [Some((_, _, x)), None] if x != b => seen.branch[1] = Some((i, src, b)),
                        _ => {}
                    }
                }
            }
        }
    }
}

//! What the executor precomputes from a workflow's edges: incoming edges per node (§5.3), each
//! loop's entries and body (§5.5), each fan-out router's join (§5.6) and every `when`
//! expression, parsed once (§5.2).
//!
//! The compiler has already enforced the structure (C019, C905–C907), so this module only
//! derives; where a check guarantees a single answer, the first one found is taken.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use iterion_dsl::expr::{self, Expr, ExprError};
use iterion_dsl::ir::{Condition, NodeBody, Target, Workflow};

/// One loop (DSL.md §5.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoopInfo {
    /// N: crossings allowed (0 when [`Self::cap_template`] is set).
    pub cap: u32,
    /// The cap written as a template, resolved when an edge of the loop is checked.
    pub cap_template: Option<String>,
    /// Entries(L): the targets of L's edges.
    pub entries: BTreeSet<String>,
    /// Body(L): the endpoints of L's edges, plus every node reachable from an entry that can reach
    /// a source of an L edge, both over non-loop edges.
    pub body: BTreeSet<String>,
}

/// The derived facts.
#[derive(Debug)]
pub(crate) struct Graph {
    /// Node → the indices of the edges into it, in declaration order.
    incoming: HashMap<String, Vec<usize>>,
    /// Loop name → its facts.
    pub loops: BTreeMap<String, LoopInfo>,
    /// Fan-out router → its join.
    joins: HashMap<String, String>,
    /// Per edge: the parsed `when` expression (or the parse error's text).
    exprs: Vec<Option<Result<Expr, ExprError>>>,
}

impl Graph {
    pub(crate) fn new(wf: &Workflow) -> Graph {
        let mut incoming: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, e) in wf.edges.iter().enumerate() {
            if let Target::Node(t) = &e.to {
                incoming.entry(t.clone()).or_default().push(i);
            }
        }
        let exprs = wf
            .edges
            .iter()
            .map(|e| match &e.condition {
                Condition::Expr(text) => Some(expr::parse(text)),
                Condition::None | Condition::Field { .. } | Condition::Else => None,
            })
            .collect();
        Graph {
            incoming,
            loops: loops(wf),
            joins: joins(wf),
            exprs,
        }
    }

    /// The indices of the edges into `node`, in declaration order.
    pub(crate) fn incoming(&self, node: &str) -> &[usize] {
        self.incoming.get(node).map_or(&[], Vec::as_slice)
    }

    /// Whether `node` is in the body of a loop (its outputs are kept as its history).
    pub(crate) fn in_loop(&self, node: &str) -> bool {
        self.loops.values().any(|l| l.body.contains(node))
    }

    /// The join of a fan-out router.
    pub(crate) fn join_of(&self, router: &str) -> Option<&str> {
        self.joins.get(router).map(String::as_str)
    }

    /// The parsed expression of edge `i`, when it has one.
    pub(crate) fn expr(&self, i: usize) -> Option<&Result<Expr, ExprError>> {
        self.exprs.get(i).and_then(Option::as_ref)
    }
}

/// Node → neighbours.
type Adjacency<'a> = HashMap<&'a str, Vec<&'a str>>;

/// Forward and backward adjacency over non-loop edges into nodes.
fn non_loop_adjacency(wf: &Workflow) -> (Adjacency<'_>, Adjacency<'_>) {
    let mut fwd: Adjacency<'_> = HashMap::new();
    let mut bwd: Adjacency<'_> = HashMap::new();
    for e in wf.edges.iter().filter(|e| e.loop_.is_none()) {
        if let Target::Node(t) = &e.to {
            fwd.entry(e.from.as_str()).or_default().push(t.as_str());
            bwd.entry(t.as_str()).or_default().push(e.from.as_str());
        }
    }
    (fwd, bwd)
}

fn reach<'a>(starts: impl IntoIterator<Item = &'a str>, adj: &Adjacency<'a>) -> BTreeSet<&'a str> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut queue: VecDeque<&str> = starts.into_iter().collect();
    while let Some(n) = queue.pop_front() {
        if seen.insert(n) {
            queue.extend(adj.get(n).into_iter().flatten().copied());
        }
    }
    seen
}

fn loops(wf: &Workflow) -> BTreeMap<String, LoopInfo> {
    let (fwd, bwd) = non_loop_adjacency(wf);
    let mut out = BTreeMap::new();
    for (name, cap) in &wf.loops {
        let edges: Vec<_> = wf
            .edges
            .iter()
            .filter(|e| e.loop_.as_ref().is_some_and(|l| &l.name == name))
            .collect();
        let sources: BTreeSet<&str> = edges.iter().map(|e| e.from.as_str()).collect();
        let entries: BTreeSet<&str> = edges
            .iter()
            .filter_map(|e| match &e.to {
                Target::Node(t) => Some(t.as_str()),
                Target::Done | Target::Fail => None,
            })
            .collect();
        let from_entries = reach(entries.iter().copied(), &fwd);
        let to_sources = reach(sources.iter().copied(), &bwd);
        let mut body: BTreeSet<String> = sources
            .iter()
            .chain(entries.iter())
            .map(|s| (*s).to_owned())
            .collect();
        body.extend(
            from_entries
                .intersection(&to_sources)
                .map(|s| (*s).to_owned()),
        );
        out.insert(
            name.clone(),
            LoopInfo {
                cap: *cap,
                cap_template: edges
                    .iter()
                    .find_map(|e| e.loop_.as_ref().and_then(|l| l.cap_template.clone())),
                entries: entries.iter().map(|s| (*s).to_owned()).collect(),
                body,
            },
        );
    }
    out
}

/// For every `fan_out_all` router, the first join met walking forward from its branch targets
/// without entering one (C906 makes it the only one): an `await` node, or a `fan_out_all`
/// router, which waits for every branch (`wait_all`) and then fans out again (a chained
/// fan-out).
fn joins(wf: &Workflow) -> HashMap<String, String> {
    let is_await = |id: &str| {
        wf.node(id).is_some_and(|n| {
            n.await_mode.is_some() || matches!(&n.body, NodeBody::Router(r) if r.mode.fans_out())
        })
    };
    let mut out = HashMap::new();
    for router in &wf.nodes {
        let NodeBody::Router(r) = &router.body else {
            continue;
        };
        if !r.mode.fans_out() {
            continue;
        }
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut queue: VecDeque<&str> = wf
            .outgoing(&router.id)
            .filter_map(|e| match &e.to {
                Target::Node(t) => Some(t.as_str()),
                Target::Done | Target::Fail => None,
            })
            .collect();
        let mut join = None;
        while let Some(n) = queue.pop_front() {
            if is_await(n) {
                join = Some(n);
                break;
            }
            if !seen.insert(n) {
                continue;
            }
            queue.extend(wf.outgoing(n).filter_map(|e| match &e.to {
                Target::Node(t) => Some(t.as_str()),
                Target::Done | Target::Fail => None,
            }));
        }
        if let Some(j) = join {
            out.insert(router.id.clone(), j.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn compile(src: &str) -> Workflow {
        let c = iterion_dsl::compile(src.as_bytes(), &Default::default());
        c.workflow
            .unwrap_or_else(|| panic!("does not compile: {:?}", c.diagnostics))
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn loop_body_is_endpoints_plus_nodes_between_entry_and_source() {
        let wf = compile(
            "tool a:\n  command: `true`\ntool b:\n  command: `true`\ntool c:\n  command: `true`\ntool d:\n  command: `true`\n\
             workflow w:\n  entry: a\n  a -> b\n  b -> c\n  c -> b as again(2)\n  c -> d\n  d -> done\n",
        );
        let g = Graph::new(&wf);
        assert_eq!(
            g.loops.get("again"),
            Some(&LoopInfo {
                cap: 2,
                cap_template: None,
                entries: set(&["b"]),
                body: set(&["b", "c"]),
            })
        );
        assert_eq!(g.incoming("b"), &[0, 2]);
    }

    #[test]
    fn fan_out_routers_know_their_join() {
        let wf = compile(
            "router r:\n  mode: fan_out_all\ntool x:\n  command: `true`\ntool y:\n  command: `true`\ntool y2:\n  command: `true`\ntool j:\n  await: wait_all\n  command: `true`\n\
             workflow w:\n  entry: r\n  r -> x\n  r -> y\n  x -> j\n  y -> y2\n  y2 -> j\n  j -> done\n",
        );
        assert_eq!(Graph::new(&wf).join_of("r"), Some("j"));
    }
}

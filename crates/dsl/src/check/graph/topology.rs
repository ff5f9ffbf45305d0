//! Entry, reachability and cycles (DSL.md §3.8, §5.1): C008, C016, C019.
use std::collections::{HashMap, HashSet, VecDeque};

use super::model::{Graph, first_nodes, is_terminal, tarjan};
use crate::ast::NodeBody;
use crate::check::symbols::Symbols;
use crate::diag::{Code, Diagnostic};

pub(super) fn check<'a>(g: &Graph<'a>, syms: &Symbols<'a>, out: &mut Vec<Diagnostic>) {
    if let Some(entry) = entry(g, syms, out) {
        unreachable(g, syms, entry, out);
    }
    cycles(g, syms, out);
}

/// C008; the entry node when it is valid.
fn entry<'a>(g: &Graph<'a>, syms: &Symbols<'a>, out: &mut Vec<Diagnostic>) -> Option<&'a str> {
    let wf = g.wf;
    match &wf.entry {
        None => {
            out.push(Diagnostic::new(
                Code::C008,
                wf.name.span,
                format!("workflow \"{}\" has no entry", wf.name.name),
            ));
            None
        }
        Some(w) => match syms.nodes.get_key_value(w.text.as_str()) {
            Some((name, _)) => Some(*name),
            None => {
                let mut d = Diagnostic::new(
                    Code::C008,
                    w.span,
                    format!("entry \"{}\" is not a declared node", w.text),
                );
                if let Some(h) = super::model::did_you_mean(&w.text, syms.nodes.keys().copied()) {
                    d = d.with_hint(h);
                }
                out.push(d);
                None
            }
        },
    }
}

/// C016: every node reachable from the entry over edges of any kind.
fn unreachable(g: &Graph<'_>, syms: &Symbols<'_>, entry: &str, out: &mut Vec<Diagnostic>) {
    let mut seen: HashSet<&str> = HashSet::from([entry]);
    let mut queue = VecDeque::from([entry]);
    while let Some(u) = queue.pop_front() {
        for e in g.out_edges(u) {
            let v = e.to.name.as_str();
            if seen.insert(v) {
                queue.push_back(v);
            }
        }
    }
    for node in first_nodes(syms) {
        let n = node.name.name.as_str();
        if !seen.contains(n) {
            out.push(
                Diagnostic::new(
                    Code::C016,
                    node.name.span,
                    format!("node \"{n}\" is unreachable from entry \"{entry}\""),
                )
                .with_node(n),
            );
        }
    }
}

/// C019: the graph without loop edges is acyclic. Each strongly connected component with two
/// or more nodes, or with a self-edge, is reported once, at its last-declared internal edge.
/// A workflow whose budget sets `max_iterations` bounds every cycle that runs a node it counts
/// (anything but a router): such a cycle is not reported (upstream's own workflows rely on it).
fn cycles(g: &Graph<'_>, syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    let budget_bounds =
        g.wf.budget
            .as_ref()
            .and_then(|b| b.max_iterations.as_ref())
            .is_some_and(|n| n.value >= 1);
    let nodes: Vec<&str> = first_nodes(syms)
        .into_iter()
        .map(|n| n.name.name.as_str())
        .collect();
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    // Non-loop edges between nodes: (edge index, from, to).
    let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nodes.len()];
    for (ei, e) in g.edges.iter().enumerate() {
        if e.loop_.is_some() || is_terminal(&e.to.name) {
            continue;
        }
        if let (Some(&a), Some(&b)) = (
            index.get(e.from.name.as_str()),
            index.get(e.to.name.as_str()),
        ) && let Some(list) = adj.get_mut(a)
        {
            list.push((ei, b));
        }
    }
    for comp in tarjan(&adj) {
        let members: HashSet<usize> = comp.iter().copied().collect();
        // The last-declared internal edge.
        let last = comp
            .iter()
            .flat_map(|&u| {
                adj.get(u)
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| members.contains(v))
                    .map(move |&(ei, v)| (ei, u, v))
            })
            .max();
        let Some((ei, u, v)) = last else { continue };
        if comp.len() < 2 && u != v {
            continue;
        }
        let counted = comp.iter().any(|&i| {
            nodes
                .get(i)
                .and_then(|n| syms.nodes.get(n))
                .is_some_and(|n| !matches!(n.body, NodeBody::Router(_)))
        });
        if budget_bounds && counted {
            continue;
        }
        let Some(edge) = g.edges.get(ei) else {
            continue;
        };
        // The cycle through that edge: v -> … -> u -> v, shortest inside the component.
        let path = shortest_path(&adj, &members, v, u);
        let mut names: Vec<&str> = path.iter().filter_map(|i| nodes.get(*i).copied()).collect();
        if u == v {
            names.truncate(1);
        }
        names.extend(nodes.get(v).copied());
        let cycle = names.join(" -> ");
        let from = edge.from.name.as_str();
        out.push(
            Diagnostic::new(
                Code::C019,
                edge.from.span,
                format!("cycle {cycle} has no loop clause"),
            )
            .with_node(from)
            .with_hint("add as NAME(N) to its back-edge"),
        );
    }
}

/// The nodes of a shortest path `from` → `to` inside `members` (both ends included).
fn shortest_path(
    adj: &[Vec<(usize, usize)>],
    members: &HashSet<usize>,
    from: usize,
    to: usize,
) -> Vec<usize> {
    let mut prev: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([from]);
    let mut seen = HashSet::from([from]);
    while let Some(u) = queue.pop_front() {
        if u == to {
            break;
        }
        for &(_, v) in adj.get(u).into_iter().flatten() {
            if members.contains(&v) && seen.insert(v) {
                prev.insert(v, u);
                queue.push_back(v);
            }
        }
    }
    let mut path = vec![to];
    let mut cur = to;
    while cur != from {
        match prev.get(&cur) {
            Some(&p) => {
                path.push(p);
                cur = p;
            }
            None => break,
        }
    }
    path.reverse();
    path
}

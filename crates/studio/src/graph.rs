//! A run's workflow graph: nodes and edges, from the workflow file when it is still the one the
//! run started from, else from what the run's events show.
//!
//! The run record keeps the workflow's path and the hash of its source, not the source itself.
//! The file is read again (through the DSL's size-capped loader) and compiled only when its hash
//! is still the run's; otherwise the graph is the nodes and edges the events name, and
//! [`Graph::origin`] says so.

use std::collections::BTreeSet;

use iterion_dsl::ir::{Condition, Target, Workflow};
use iterion_store::{Event, Run};
use serde::Serialize;

/// The pseudo-node an edge into `done` points at.
pub const DONE: &str = "done";
/// The pseudo-node an edge into `fail` points at.
pub const FAIL: &str = "fail";

/// Where a graph came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "note")]
pub enum Origin {
    /// The workflow file, whose hash is still the run's.
    Workflow,
    /// The run's events, with why the file was not used.
    Events(String),
}

/// A node of the graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GraphNode {
    /// The node id (`done` and `fail` for the two ends).
    pub id: String,
    /// `agent`, `judge`, `tool`, `router`, `subbot`, or `end` for `done`/`fail`; `unknown` when
    /// derived from events that never started it.
    pub kind: String,
}

/// An edge of the graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GraphEdge {
    /// Source node id.
    pub from: String,
    /// Target node id (`done`/`fail` included).
    pub to: String,
    /// The condition as written, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// The loop of an `as L(N)` edge.
    #[serde(rename = "loop", skip_serializing_if = "Option::is_none")]
    pub loop_: Option<String>,
}

/// Nodes and edges, the entry first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Graph {
    /// The entry node, when known.
    pub entry: Option<String>,
    /// Nodes in declaration (or first-seen) order.
    pub nodes: Vec<GraphNode>,
    /// Edges in declaration (or first-seen) order, without duplicates.
    pub edges: Vec<GraphEdge>,
    /// Where it came from.
    pub origin: Origin,
    /// The workflow's declared secrets, by name only (empty when derived from events).
    pub secret_names: Vec<String>,
}

/// The graph of `run`: from its workflow file when the file still hashes to the run's
/// `workflow_hash`, else from `events`.
pub fn graph_of(run: &Run, events: &[Event]) -> Graph {
    match workflow_of(run) {
        Ok(wf) => from_workflow(&wf),
        Err(why) => from_events(events, why),
    }
}

fn workflow_of(run: &Run) -> Result<Workflow, String> {
    let path = &run.file_path;
    let bytes = iterion_dsl::load(path).map_err(|e| {
        format!(
            "the workflow file {} cannot be read ({e}); the graph shows the nodes and edges the run's events name",
            path.display()
        )
    })?;
    if iterion_engine::workflow_hash_at(path, &bytes) != run.workflow_hash {
        return Err(format!(
            "the workflow file {} changed since the run started; the graph shows the nodes and edges the run's events name",
            path.display()
        ));
    }
    let compiled = iterion_dsl::compile_at(&bytes, path, &iterion_dsl::CompileOptions::default());
    compiled.workflow.ok_or_else(|| {
        format!(
            "the workflow file {} no longer compiles; the graph shows the nodes and edges the run's events name",
            path.display()
        )
    })
}

/// The graph a compiled workflow declares.
pub fn from_workflow(wf: &Workflow) -> Graph {
    let mut nodes: Vec<GraphNode> = wf
        .nodes
        .iter()
        .map(|n| GraphNode {
            id: n.id.clone(),
            kind: n.kind.as_str().to_owned(),
        })
        .collect();
    let mut ends = BTreeSet::new();
    let edges = wf
        .edges
        .iter()
        .map(|e| {
            let to = match &e.to {
                Target::Node(id) => id.clone(),
                Target::Done => {
                    ends.insert(DONE);
                    DONE.to_owned()
                }
                Target::Fail => {
                    ends.insert(FAIL);
                    FAIL.to_owned()
                }
            };
            GraphEdge {
                from: e.from.clone(),
                to,
                condition: condition_text(&e.condition),
                loop_: e.loop_.as_ref().map(|l| match &l.cap_template {
                    Some(t) => format!("{}({t:?})", l.name),
                    None => format!("{}({})", l.name, l.cap),
                }),
            }
        })
        .collect();
    for end in [DONE, FAIL] {
        if ends.contains(end) {
            nodes.push(GraphNode {
                id: end.to_owned(),
                kind: "end".to_owned(),
            });
        }
    }
    Graph {
        entry: Some(wf.entry.clone()),
        nodes,
        edges,
        origin: Origin::Workflow,
        secret_names: wf.secrets.iter().map(|s| s.name.clone()).collect(),
    }
}

fn condition_text(c: &Condition) -> Option<String> {
    match c {
        Condition::None => None,
        Condition::Field { name, negated } => Some(if *negated {
            format!("not {name}")
        } else {
            name.clone()
        }),
        Condition::Expr(text) => Some(text.clone()),
        Condition::Else => Some("else".to_owned()),
    }
}

/// The graph the events show: every node that started, every edge that was selected.
pub fn from_events(events: &[Event], why: String) -> Graph {
    let mut graph = Graph {
        entry: None,
        nodes: Vec::new(),
        edges: Vec::new(),
        origin: Origin::Events(why),
        secret_names: Vec::new(),
    };
    let add_node = |graph: &mut Graph, id: &str, kind: &str| {
        if let Some(n) = graph.nodes.iter_mut().find(|n| n.id == id) {
            if n.kind == "unknown" {
                kind.clone_into(&mut n.kind);
            }
        } else {
            graph.nodes.push(GraphNode {
                id: id.to_owned(),
                kind: kind.to_owned(),
            });
        }
    };
    for e in events {
        let s = |k: &str| e.data.get(k).and_then(|v| v.as_str());
        match e.kind.as_str() {
            "node_started" => {
                if let Some(node) = s("node") {
                    if graph.entry.is_none() {
                        graph.entry = Some(node.to_owned());
                    }
                    add_node(&mut graph, node, s("kind").unwrap_or("unknown"));
                }
            }
            "edge_selected" => {
                let (Some(from), Some(to)) = (s("from"), s("to")) else {
                    continue;
                };
                let kind = if to == DONE || to == FAIL {
                    "end"
                } else {
                    "unknown"
                };
                add_node(&mut graph, from, "unknown");
                add_node(&mut graph, to, kind);
                let edge = GraphEdge {
                    from: from.to_owned(),
                    to: to.to_owned(),
                    condition: s("condition").map(str::to_owned),
                    loop_: s("loop").map(str::to_owned),
                };
                if !graph.edges.contains(&edge) {
                    graph.edges.push(edge);
                }
            }
            _ => {}
        }
    }
    graph
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;

use iterion_store::{Event, RunId, Timestamp};
use serde_json::json;

use super::*;

fn ev(seq: u64, kind: &str, data: serde_json::Value) -> Event {
    Event {
        run_id: RunId::parse("0190a000-0000-7000-8000-000000000001").unwrap(),
        seq,
        ts: Timestamp::from_millis(0),
        kind: kind.into(),
        data,
    }
}

#[test]
fn a_compiled_workflow_gives_its_nodes_edges_ends_and_secret_names() {
    let src = "secrets:\n  api_key: \"${KEY}\"\n\ntool a:\n  command: \"true\"\n\ntool b:\n  command: \"true\"\n\nworkflow w:\n  entry: a\n  a -> b when ok\n  a -> fail else\n  b -> done\n";
    let compiled = iterion_dsl::compile(src.as_bytes(), &iterion_dsl::CompileOptions::default());
    let wf = compiled
        .workflow
        .unwrap_or_else(|| panic!("{:?}", compiled.diagnostics));
    let g = from_workflow(&wf);
    let ids: Vec<_> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "done", "fail"]);
    assert_eq!(g.entry.as_deref(), Some("a"));
    assert_eq!(g.edges.len(), 3);
    assert_eq!(g.edges[0].condition.as_deref(), Some("ok"));
    assert_eq!(g.edges[1].condition.as_deref(), Some("else"));
    assert_eq!(g.secret_names, ["api_key"]);
    assert_eq!(g.origin, Origin::Workflow);
}

#[test]
fn without_the_file_the_events_give_the_graph_and_say_why() {
    let events = [
        ev(
            1,
            "node_started",
            json!({"node": "a", "kind": "tool", "attempt": 1}),
        ),
        ev(2, "edge_selected", json!({"from": "a", "to": "b"})),
        ev(
            3,
            "node_started",
            json!({"node": "b", "kind": "agent", "attempt": 1}),
        ),
        ev(
            4,
            "edge_selected",
            json!({"from": "b", "to": "a", "loop": "again", "iteration": 1}),
        ),
        ev(5, "edge_selected", json!({"from": "a", "to": "b"})),
        ev(6, "edge_selected", json!({"from": "b", "to": "done"})),
    ];
    let g = from_events(&events, "gone".into());
    let nodes: Vec<_> = g
        .nodes
        .iter()
        .map(|n| (n.id.as_str(), n.kind.as_str()))
        .collect();
    assert_eq!(nodes, [("a", "tool"), ("b", "agent"), ("done", "end")]);
    assert_eq!(g.edges.len(), 3, "a repeated crossing is one edge");
    assert_eq!(g.origin, Origin::Events("gone".into()));
    assert_eq!(g.entry.as_deref(), Some("a"));
}

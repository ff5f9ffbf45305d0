use super::*;
use crate::graph::{GraphEdge, GraphNode, Origin};

fn graph(nodes: &[&str], edges: &[(&str, &str, Option<&str>)]) -> Graph {
    Graph {
        entry: nodes.first().map(|s| (*s).to_owned()),
        nodes: nodes
            .iter()
            .map(|id| GraphNode {
                id: (*id).to_owned(),
                kind: "tool".into(),
            })
            .collect(),
        edges: edges
            .iter()
            .map(|(f, t, l)| GraphEdge {
                from: (*f).to_owned(),
                to: (*t).to_owned(),
                condition: None,
                loop_: l.map(str::to_owned),
            })
            .collect(),
        origin: Origin::Workflow,
        secret_names: Vec::new(),
    }
}

fn node<'a>(l: &'a Layout, id: &str) -> &'a PlacedNode {
    l.nodes.iter().find(|n| n.id == id).unwrap()
}

#[test]
fn forward_edges_point_down_and_a_diamond_spreads_its_middle() {
    let g = graph(
        &["a", "b", "c", "d", "done"],
        &[
            ("a", "b", None),
            ("a", "c", None),
            ("b", "d", None),
            ("c", "d", None),
            ("d", "done", None),
        ],
    );
    let l = layout(&g);
    for e in &g.edges {
        assert!(
            node(&l, &e.from).y < node(&l, &e.to).y,
            "{} -> {}",
            e.from,
            e.to
        );
    }
    assert_eq!(node(&l, "b").layer, 1);
    assert_eq!(node(&l, "c").layer, 1);
    assert_eq!(node(&l, "d").layer, 2);
    assert!(
        (node(&l, "b").x - node(&l, "c").x).abs() >= NODE_W,
        "no overlap in a layer"
    );
    assert!(l.edges.iter().all(|e| !e.back));
    // Everything inside the picture.
    for n in &l.nodes {
        assert!(n.x >= 0.0 && n.x + NODE_W <= l.width && n.y + NODE_H <= l.height);
    }
}

#[test]
fn a_loop_is_a_back_edge_and_does_not_push_its_target_down() {
    let g = graph(
        &["write", "review", "done"],
        &[
            ("write", "review", None),
            ("review", "write", Some("again(3)")),
            ("review", "done", None),
        ],
    );
    let l = layout(&g);
    assert_eq!(node(&l, "write").layer, 0);
    assert_eq!(node(&l, "review").layer, 1);
    assert_eq!(node(&l, "done").layer, 2);
    let back: Vec<_> = l
        .edges
        .iter()
        .filter(|e| e.back)
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert_eq!(back, [("review", "write")]);
    assert_eq!(layout(&g), l, "deterministic");
}

#[test]
fn a_cycle_without_a_loop_name_is_still_drawn_and_edges_to_unknown_nodes_are_dropped() {
    let g = graph(
        &["a", "b"],
        &[("a", "b", None), ("b", "a", None), ("a", "ghost", None)],
    );
    let l = layout(&g);
    assert_eq!(l.edges.len(), 2);
    assert_eq!(l.edges.iter().filter(|e| e.back).count(), 1);
    assert!(node(&l, "a").y < node(&l, "b").y);
}

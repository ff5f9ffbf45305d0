//! A layered-DAG layout of a [`Graph`], computed here and drawn by the page as SVG.
//!
//! The classic steps, kept small: loop edges (and any other edge closing a cycle in a depth-first
//! walk from the entry) are set aside as back edges; every node gets the layer of its longest path
//! from a source over the remaining forward edges; a few barycenter sweeps order each layer to cut
//! crossings; layers are centred and stacked top to bottom. Deterministic: the same graph always
//! gives the same picture.

use std::collections::HashMap;

use serde::Serialize;

use crate::graph::Graph;

/// A node box's width.
pub const NODE_W: f64 = 160.0;
/// A node box's height.
pub const NODE_H: f64 = 44.0;
const H_GAP: f64 = 36.0;
const V_GAP: f64 = 64.0;
const MARGIN: f64 = 24.0;
/// Room on the left for back edges.
const BACK_ROOM: f64 = 48.0;

/// A placed node: its box's top-left corner.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlacedNode {
    /// The node id.
    pub id: String,
    /// Its kind, as in [`crate::graph::GraphNode::kind`].
    pub kind: String,
    /// Its layer (0 at the top).
    pub layer: usize,
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
}

/// A placed edge: an SVG path and where its label goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlacedEdge {
    /// Source id.
    pub from: String,
    /// Target id.
    pub to: String,
    /// The SVG path data (numbers only).
    pub d: String,
    /// The label (condition, loop), if any.
    pub label: Option<String>,
    /// The label's anchor.
    pub label_x: f64,
    /// The label's baseline.
    pub label_y: f64,
    /// Whether the edge goes back up (a loop).
    pub back: bool,
}

/// The whole picture.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Layout {
    /// The SVG's width.
    pub width: f64,
    /// The SVG's height.
    pub height: f64,
    /// Every node, placed.
    pub nodes: Vec<PlacedNode>,
    /// Every edge whose two ends are nodes of the graph.
    pub edges: Vec<PlacedEdge>,
}

/// Lays `graph` out.
pub fn layout(graph: &Graph) -> Layout {
    let n = graph.nodes.len();
    let index: HashMap<&str, usize> = graph
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| (node.id.as_str(), i))
        .collect();
    let edges: Vec<(usize, usize, usize)> = graph
        .edges
        .iter()
        .enumerate()
        .filter_map(|(k, e)| Some((k, *index.get(e.from.as_str())?, *index.get(e.to.as_str())?)))
        .collect();
    let back = back_edges(graph, &index, &edges, n);
    let forward: Vec<(usize, usize)> = edges
        .iter()
        .filter(|(k, _, _)| !back[*k])
        .map(|&(_, u, v)| (u, v))
        .collect();
    let layer = layers(&forward, n);
    let order = order_layers(&forward, &layer, n);

    let widest = order.iter().map(Vec::len).max().unwrap_or(0);
    let inner_w = widest as f64 * (NODE_W + H_GAP) - H_GAP;
    let width = (inner_w.max(NODE_W) + 2.0 * MARGIN + BACK_ROOM).ceil();
    let height = (order.len() as f64 * (NODE_H + V_GAP) - V_GAP).max(NODE_H) + 2.0 * MARGIN + 16.0;
    let mut pos = vec![(0.0, 0.0); n];
    for (l, row) in order.iter().enumerate() {
        let row_w = row.len() as f64 * (NODE_W + H_GAP) - H_GAP;
        let left = MARGIN + BACK_ROOM + (inner_w - row_w) / 2.0;
        for (i, &v) in row.iter().enumerate() {
            pos[v] = (
                left + i as f64 * (NODE_W + H_GAP),
                MARGIN + l as f64 * (NODE_H + V_GAP),
            );
        }
    }
    let nodes = graph
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| PlacedNode {
            id: node.id.clone(),
            kind: node.kind.clone(),
            layer: layer[i],
            x: pos[i].0,
            y: pos[i].1,
        })
        .collect();
    let placed = edges
        .iter()
        .map(|&(k, u, v)| {
            let e = &graph.edges[k];
            let label = match (&e.condition, &e.loop_) {
                (Some(c), Some(l)) => Some(format!("{c} · {l}")),
                (Some(c), None) => Some(c.clone()),
                (None, Some(l)) => Some(l.clone()),
                (None, None) => None,
            };
            let (d, lx, ly) = edge_path(pos[u], pos[v], back[k], u == v);
            PlacedEdge {
                from: e.from.clone(),
                to: e.to.clone(),
                d,
                label,
                label_x: lx,
                label_y: ly,
                back: back[k],
            }
        })
        .collect();
    Layout {
        width,
        height: height.ceil(),
        nodes,
        edges: placed,
    }
}

/// Marks the edges that close a cycle in a depth-first walk from the entry (then from every node
/// not reached yet, in order), and every loop edge.
fn back_edges(
    graph: &Graph,
    index: &HashMap<&str, usize>,
    edges: &[(usize, usize, usize)],
    n: usize,
) -> Vec<bool> {
    let mut out_edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for &(k, u, v) in edges {
        out_edges[u].push((k, v));
    }
    let mut back = vec![false; graph.edges.len()];
    // 0 unvisited, 1 on the stack, 2 done.
    let mut state = vec![0u8; n];
    let mut roots: Vec<usize> = graph
        .entry
        .as_deref()
        .and_then(|e| index.get(e).copied())
        .into_iter()
        .collect();
    roots.extend(0..n);
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        // Iterative DFS: (node, next out-edge to look at).
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (u, ref mut next)) = stack.last_mut() {
            if let Some(&(k, v)) = out_edges[u].get(*next) {
                *next += 1;
                match state[v] {
                    0 => {
                        state[v] = 1;
                        stack.push((v, 0));
                    }
                    1 => back[k] = true,
                    _ => {}
                }
            } else {
                state[u] = 2;
                stack.pop();
            }
        }
    }
    for &(k, _, _) in edges {
        if graph.edges[k].loop_.is_some() {
            back[k] = true;
        }
    }
    back
}

/// Longest-path layering over the forward edges (a DAG once back edges are set aside; a node left
/// in a cycle anyway keeps layer 0's successor rule by being visited last).
fn layers(forward: &[(usize, usize)], n: usize) -> Vec<usize> {
    let mut indeg = vec![0usize; n];
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(u, v) in forward {
        if u != v {
            indeg[v] += 1;
            succ[u].push(v);
        }
    }
    let mut layer = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).rev().collect();
    let mut seen = 0;
    while let Some(u) = ready.pop() {
        seen += 1;
        for &v in &succ[u] {
            layer[v] = layer[v].max(layer[u] + 1);
            indeg[v] -= 1;
            if indeg[v] == 0 {
                ready.push(v);
            }
        }
    }
    debug_assert!(seen <= n);
    layer
}

/// Nodes of each layer, ordered by a few barycenter sweeps (down, then up).
fn order_layers(forward: &[(usize, usize)], layer: &[usize], n: usize) -> Vec<Vec<usize>> {
    let depth = layer.iter().copied().max().map_or(0, |m| m + 1);
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for v in 0..n {
        order[layer[v]].push(v);
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(u, v) in forward {
        if u != v {
            preds[v].push(u);
            succs[u].push(v);
        }
    }
    let mut rank = vec![0.0f64; n];
    let set_rank = |order: &Vec<Vec<usize>>, rank: &mut Vec<f64>| {
        for row in order {
            for (i, &v) in row.iter().enumerate() {
                rank[v] = i as f64;
            }
        }
    };
    set_rank(&order, &mut rank);
    for sweep in 0..4 {
        let down = sweep % 2 == 0;
        let rows: Vec<usize> = if down {
            (1..depth).collect()
        } else {
            (0..depth.saturating_sub(1)).rev().collect()
        };
        for l in rows {
            let neighbours = if down { &preds } else { &succs };
            let mut keyed: Vec<(f64, usize)> = order[l]
                .iter()
                .map(|&v| {
                    let ns = &neighbours[v];
                    let key = if ns.is_empty() {
                        rank[v]
                    } else {
                        ns.iter().map(|&u| rank[u]).sum::<f64>() / ns.len() as f64
                    };
                    (key, v)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            order[l] = keyed.into_iter().map(|(_, v)| v).collect();
            for (i, &v) in order[l].iter().enumerate() {
                rank[v] = i as f64;
            }
        }
    }
    order
}

fn edge_path(from: (f64, f64), to: (f64, f64), back: bool, self_loop: bool) -> (String, f64, f64) {
    if self_loop {
        let (x, y) = (from.0, from.1 + NODE_H / 2.0);
        return (
            format!(
                "M {x:.1} {:.1} C {:.1} {:.1}, {:.1} {:.1}, {x:.1} {:.1}",
                y - 8.0,
                x - 40.0,
                y - 30.0,
                x - 40.0,
                y + 30.0,
                y + 8.0
            ),
            x - 44.0,
            y,
        );
    }
    if back {
        let (x1, y1) = (from.0, from.1 + NODE_H / 2.0);
        let (x2, y2) = (to.0, to.1 + NODE_H / 2.0);
        let bulge = x1.min(x2) - BACK_ROOM + 4.0;
        return (
            format!("M {x1:.1} {y1:.1} C {bulge:.1} {y1:.1}, {bulge:.1} {y2:.1}, {x2:.1} {y2:.1}"),
            bulge + 4.0,
            (y1 + y2) / 2.0,
        );
    }
    let (x1, y1) = (from.0 + NODE_W / 2.0, from.1 + NODE_H);
    let (x2, y2) = (to.0 + NODE_W / 2.0, to.1);
    let dy = (y2 - y1).abs() / 2.0;
    (
        format!(
            "M {x1:.1} {y1:.1} C {x1:.1} {:.1}, {x2:.1} {:.1}, {x2:.1} {y2:.1}",
            y1 + dy,
            y2 - dy
        ),
        (x1 + x2) / 2.0 + 4.0,
        (y1 + y2) / 2.0,
    )
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;

//! Choosing the next edge (DSL.md §5.4), as pure functions over the run state.
//!
//! [`walk`] does steps 1–6 and returns the events they produce (`loop_exhausted`,
//! `edge_condition_error`) with the selected edge; [`take`] does steps 7–8: the loop counter or
//! the resets, and the `edge_selected` event.

use iterion_dsl::ir::{Condition, Edge, Target, Workflow};
use iterion_dsl::template::Namespace;
use serde_json::{Map, Value};

use crate::executor::checkpoint::{Checkpoint, LoopCounter};
use crate::executor::graph::Graph;
use crate::executor::input::{CapInvalid, loop_scope, resolve_cap};
use crate::records::events::{EdgeConditionError, EdgeSelected, Event, LoopExhausted};

/// An edge's target as events spell it: a node id, `done` or `fail`.
pub(crate) fn target_name(t: &Target) -> &str {
    match t {
        Target::Node(n) => n,
        Target::Done => "done",
        Target::Fail => "fail",
    }
}

/// The condition as events spell it: `approved`, `not approved`, the expression's text,
/// `else`; `None` for an edge without either.
pub(crate) fn condition_text(c: &Condition) -> Option<String> {
    match c {
        Condition::None => None,
        Condition::Field {
            name,
            negated: false,
        } => Some(name.clone()),
        Condition::Field {
            name,
            negated: true,
        } => Some(format!("not {name}")),
        Condition::Expr(text) => Some(text.clone()),
        Condition::Else => Some("else".to_owned()),
    }
}

/// What [`walk`] needs besides the workflow.
pub(crate) struct WalkInput<'a> {
    pub wf: &'a Workflow,
    pub graph: &'a Graph,
    pub state: &'a Checkpoint,
    pub vars: &'a Value,
    /// The `run` namespace.
    pub run: Value,
}

/// The cap of a loop edge: its literal N, or its template resolved now, against the source's
/// `output` as `input` and the run's vars, outputs and artifacts.
pub(crate) fn cap_of(
    w: &WalkInput<'_>,
    l: &iterion_dsl::ir::LoopRef,
    output: &Value,
) -> Result<u32, CapInvalid> {
    let Some(text) = &l.cap_template else {
        return Ok(l.cap);
    };
    resolve_cap(
        &l.name,
        text,
        w.vars,
        output,
        &w.state.outputs,
        &w.state.artifacts,
    )
}

/// Steps 1–6: the selected edge's index (`None`: `NO_OUTGOING_EDGE`), and the events met; a
/// templated loop cap that does not resolve is [`CapInvalid`].
pub(crate) fn walk(
    w: &WalkInput<'_>,
    source: &str,
    output: &Value,
) -> Result<(Option<usize>, Vec<Event>), CapInvalid> {
    let mut events = Vec::new();
    let mut fallback = None;
    for (i, e) in
        w.wf.edges
            .iter()
            .enumerate()
            .filter(|(_, e)| e.from == source)
    {
        // Step 2: a spent loop edge is skipped.
        if let Some(l) = &e.loop_ {
            let cap = cap_of(w, l, output)?;
            let counter = w.state.loops.get(&l.name).map_or(0, |c| c.iteration);
            if counter >= cap {
                events.push(Event::LoopExhausted(LoopExhausted {
                    from: e.from.clone(),
                    to: target_name(&e.to).to_owned(),
                    loop_: l.name.clone(),
                    max: cap,
                }));
                continue;
            }
        }
        // Step 5: the first edge without `when` is the fallback.
        if matches!(e.condition, Condition::None | Condition::Else) {
            fallback.get_or_insert(i);
            continue;
        }
        match holds(w, i, output) {
            Ok(true) => return Ok((Some(i), events)),
            Ok(false) => {}
            Err(reason) => events.push(condition_error(e, reason)),
        }
    }
    Ok((fallback, events))
}

/// Whether the `when` of edge `i` holds on its source's `output` (steps 3–4): an edge without
/// one holds; a missing field does not; a non-bool field or a failing expression is the error's
/// text.
pub(crate) fn holds(w: &WalkInput<'_>, i: usize, output: &Value) -> Result<bool, String> {
    let Some(e) = w.wf.edges.get(i) else {
        return Ok(false);
    };
    match &e.condition {
        Condition::None | Condition::Else => Ok(true),
        Condition::Field { name, negated } => match output.get(name) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b != *negated),
            Some(other) => Err(format!(
                "field \"{name}\" is {}, not bool",
                iterion_dsl::expr::type_name(other)
            )),
        },
        Condition::Expr(_) => match w.graph.expr(i) {
            Some(Ok(expr)) => expr
                .eval_condition(&expr_scope(w, expr, output))
                .map_err(|err| err.to_string()),
            Some(Err(parse_error)) => Err(parse_error.to_string()),
            None => Err("the expression was not parsed".to_owned()),
        },
    }
}

pub(crate) fn condition_error(e: &Edge, reason: String) -> Event {
    Event::EdgeConditionError(EdgeConditionError {
        from: e.from.clone(),
        to: target_name(&e.to).to_owned(),
        condition: condition_text(&e.condition).unwrap_or_default(),
        reason,
    })
}

/// The scope of a `when` expression: vars, the source's output as `input`, outputs, loop, run.
/// Namespaces the expression does not read are left out, so large outputs are not copied for
/// nothing.
fn expr_scope(w: &WalkInput<'_>, expr: &iterion_dsl::expr::Expr, output: &Value) -> Value {
    let paths = expr.paths();
    let reads = |ns: Namespace| paths.iter().any(|p| p.namespace() == ns);
    let mut scope = Map::new();
    scope.insert("input".to_owned(), output.clone());
    if reads(Namespace::Vars) {
        scope.insert("vars".to_owned(), w.vars.clone());
    }
    if reads(Namespace::Outputs) {
        let outputs: Map<String, Value> = w
            .state
            .outputs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        scope.insert("outputs".to_owned(), Value::Object(outputs));
    }
    if reads(Namespace::Loop) {
        scope.insert("loop".to_owned(), loop_scope(w.graph, w.state, w.vars));
    }
    if reads(Namespace::Run) {
        scope.insert("run".to_owned(), w.run.clone());
    }
    Value::Object(scope)
}

/// Steps 7–8: updates the loops for the selected edge and returns its `edge_selected` event.
pub(crate) fn take(graph: &Graph, state: &mut Checkpoint, edge: &Edge, output: &Value) -> Event {
    let mut iteration = None;
    match &edge.loop_ {
        Some(l) => {
            let counter = state.loops.entry(l.name.clone()).or_default();
            counter.iteration = counter.iteration.saturating_add(1);
            counter.previous_output = output.clone();
            iteration = Some(counter.iteration);
        }
        None => {
            if let Target::Node(target) = &edge.to {
                for (name, info) in &graph.loops {
                    if info.entries.contains(target) && !info.body.contains(&edge.from) {
                        state.loops.insert(name.clone(), LoopCounter::default());
                    }
                }
            }
        }
    }
    Event::EdgeSelected(EdgeSelected {
        from: edge.from.clone(),
        to: target_name(&edge.to).to_owned(),
        condition: condition_text(&edge.condition),
        loop_: edge.loop_.as_ref().map(|l| l.name.clone()),
        iteration,
    })
}

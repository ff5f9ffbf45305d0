//! Linear flows, node input (§5.3) and edge selection (§5.4).

use iterion_engine::{
    EdgeConditionError, Event, FailureCode, NodeKindLabel, OutcomeStatus, RunOutcome,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

#[tokio::test]
async fn hello_example_runs_to_done_with_its_whole_event_sequence() {
    let (ran, _host) = run_src(include_str!("../../../../examples/hello.iter")).await;
    let uname = ran.report.outcome.outputs["greet"]["shell"].clone();
    let greet = json!({"message": "hello, world", "shell": uname});
    assert_eq!(
        ran.events,
        vec![
            tool("greet"),
            finished("greet", greet.clone()),
            edge("greet", "check"),
            tool("check"),
            finished("check", json!({"result": "ok"})),
            edge("check", "done"),
        ]
    );
    assert_eq!(
        ran.report.outcome,
        RunOutcome {
            status: OutcomeStatus::Finished,
            failure_code: None,
            message: None,
            last_completed_node: Some("check".into()),
            final_output: Some(json!({"result": "ok"})),
            outputs: [
                ("check".to_owned(), json!({"result": "ok"})),
                ("greet".to_owned(), greet),
            ]
            .into(),
            declared_code: None,
            paused: None,
        }
    );
    assert_eq!(ran.report.checkpoint.next, None);
    assert_eq!(ran.report.checkpoint.iterations, 2);
}

#[tokio::test]
async fn commands_see_the_run_and_node_ids_and_the_entry_gets_the_vars() {
    let (ran, _host) = run_src(
        r#"
vars:
  who: string = "ann"
  n: int = 3
tool first:
  command: `printf '{"run":"%s","node":"%s","who":%s,"n":%s}' "$ITERION_RUN_ID" "$ITERION_NODE_ID" '"'{{input.who}}'"' {{!input.n}}`
workflow w:
  entry: first
  first -> done
"#,
    )
    .await;
    assert_eq!(
        ran.report.outcome.final_output,
        Some(json!({"run": "run-1", "node": "first", "who": "ann", "n": 3}))
    );
}

#[tokio::test]
async fn with_mappings_keep_types_and_every_produced_predecessor_contributes() {
    let (ran, _host) = run_src(
        r#"
tool a:
  command: `echo '{"flag": false, "v": 1, "n": 3, "l": ["x", "y"], "o": {"k": 1}}'`
tool b:
  command: `echo '{"b": "from b"}'`
tool c:
  command: `printf '%s' {{input}}`
workflow w:
  entry: a
  a -> c when flag with { from_a: "{{input.v}}" }
  a -> b
  b -> c with { n: "{{outputs.a.n}}", l: "{{outputs.a.l}}", o: "{{outputs.a.o}}", mixed: "n={{outputs.a.n}} {{input.nope}}", missing: "{{input.nope}}", lit: 5, f: 1.5, yes: false, text: "{{input.b}}" }
  c -> done
"#,
    )
    .await;
    assert_eq!(
        ran.report.outcome.final_output,
        Some(json!({
            "from_a": 1,
            "n": 3,
            "l": ["x", "y"],
            "o": {"k": 1},
            "mixed": "n=3 {{input.nope}}",
            "missing": null,
            "lit": 5,
            "f": 1.5,
            "yes": false,
            "text": "from b",
        }))
    );
}

/// `check` prints `vars.out`; `edges` route it to some of `yes`, `no`, `other`, which finish.
async fn route(edges: &str, out: Value) -> (Vec<Event>, RunOutcome) {
    let mut src =
        "vars:\n  out: json = \"{}\"\ntool check:\n  command: `echo {{vars.out}}`\n".to_owned();
    let mut tail = String::new();
    for target in ["yes", "no", "other"] {
        if edges.contains(&format!("-> {target}")) {
            src.push_str(&format!("tool {target}:\n  command: `echo {target}`\n"));
            tail.push_str(&format!("  {target} -> done\n"));
        }
    }
    src.push_str(&format!("workflow w:\n  entry: check\n{edges}{tail}"));
    let wf = workflow(&src);
    let host = Host::new().await;
    let mut vars = serde_json::Map::new();
    vars.insert("out".into(), out);
    let ran = run_with(&wf, &host, |e| e.vars(vars)).await;
    let routing: Vec<Event> = ran
        .events
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::EdgeSelected(_)
                    | Event::EdgeConditionError(_)
                    | Event::LoopExhausted(_)
                    | Event::NodeFailed(_)
            )
        })
        .collect();
    (routing, ran.report.outcome)
}

#[tokio::test]
async fn when_field_and_when_not_pick_by_the_bool() {
    let edges = "  check -> yes when ok\n  check -> no when not ok\n";
    assert_eq!(
        route(edges, json!({"ok": true})).await.0,
        vec![edge_when("check", "yes", "ok"), edge("yes", "done")]
    );
    assert_eq!(
        route(edges, json!({"ok": false})).await.0,
        vec![edge_when("check", "no", "not ok"), edge("no", "done")]
    );
}

#[tokio::test]
async fn a_non_bool_field_is_a_condition_error_and_the_fallback_is_taken() {
    let edges = "  check -> yes when ok\n  check -> other\n";
    assert_eq!(
        route(edges, json!({"ok": "yes"})).await.0,
        vec![
            Event::EdgeConditionError(EdgeConditionError {
                from: "check".into(),
                to: "yes".into(),
                condition: "ok".into(),
                reason: "field \"ok\" is string, not bool".into(),
            }),
            edge("check", "other"),
            edge("other", "done"),
        ]
    );
    // An absent field is skipped silently.
    assert_eq!(
        route(edges, json!({})).await.0,
        vec![edge("check", "other"), edge("other", "done")]
    );
}

#[tokio::test]
async fn expressions_select_in_declaration_order_and_errors_are_reported() {
    let edges = "  check -> yes when \"n > 'x'\"\n  check -> no when \"n >= 3 and contains(tags, 'a')\"\n  check -> other else\n";
    assert_eq!(
        route(edges, json!({"n": 3, "tags": ["a"]})).await.0,
        vec![
            Event::EdgeConditionError(EdgeConditionError {
                from: "check".into(),
                to: "yes".into(),
                condition: "n > 'x'".into(),
                reason: "> needs two numbers or two strings, found number and string".into(),
            }),
            edge_when("check", "no", "n >= 3 and contains(tags, 'a')"),
            edge("no", "done"),
        ]
    );
    assert_eq!(
        route(edges, json!({"n": 1, "tags": []})).await.0[1..],
        [edge_when("check", "other", "else"), edge("other", "done")]
    );
}

#[tokio::test]
async fn the_first_edge_without_when_is_the_fallback_even_before_a_match() {
    let edges = "  check -> other\n  check -> yes when ok\n";
    assert_eq!(
        route(edges, json!({"ok": true})).await.0,
        vec![edge_when("check", "yes", "ok"), edge("yes", "done")]
    );
}

#[tokio::test]
async fn no_edge_that_can_be_taken_fails_the_run() {
    let edges = "  check -> yes when ok\n  check -> no when not ok\n";
    let (events, outcome) = route(edges, json!({"other": 1})).await;
    assert_eq!(events, vec![]);
    assert_eq!(
        (outcome.status, outcome.failure_code, outcome.message),
        (
            OutcomeStatus::Failed,
            Some(FailureCode::NoOutgoingEdge),
            Some("node \"check\": no outgoing edge can be taken".into())
        )
    );
}

#[tokio::test]
async fn an_edge_into_fail_fails_the_workflow() {
    let (ran, _host) = run_src(
        "tool a:\n  command: `echo '{\"ok\": false}'`\nworkflow w:\n  entry: a\n  a -> done when ok\n  a -> fail else\n",
    )
    .await;
    assert_eq!(
        ran.events,
        vec![
            tool("a"),
            finished("a", json!({"ok": false})),
            edge_when("a", "fail", "else"),
        ]
    );
    let o = ran.report.outcome;
    assert_eq!(
        (
            o.status,
            o.failure_code,
            o.message,
            ran.report.checkpoint.next
        ),
        (
            OutcomeStatus::Failed,
            Some(FailureCode::WorkflowFailed),
            Some("node \"a\": the edge to fail was taken".into()),
            None
        )
    );
}

#[tokio::test]
async fn a_condition_router_passes_its_input_through() {
    let (ran, _host) = run_src(
        r#"
tool a:
  command: `echo '{"go": true}'`
router pick:
  mode: condition
tool b:
  command: `printf '%s' {{input}}`
workflow w:
  entry: a
  a -> pick with { go: "{{input.go}}" }
  pick -> b when go with { seen: "{{input.go}}" }
  pick -> fail
  b -> done
"#,
    )
    .await;
    assert_eq!(
        ran.events,
        vec![
            tool("a"),
            finished("a", json!({"go": true})),
            edge("a", "pick"),
            started("pick", NodeKindLabel::Router, 1),
            finished("pick", json!({"go": true})),
            edge_when("pick", "b", "go"),
            tool("b"),
            finished("b", json!({"seen": true})),
            edge("b", "done"),
        ]
    );
    assert_eq!(
        ran.report.checkpoint.iterations, 2,
        "routers are not counted"
    );
}

#[tokio::test]
async fn the_run_future_is_send_so_a_launcher_can_spawn_it() {
    fn assert_send<T: Send>(_: &T) {}
    let wf = workflow("tool a:\n  command: `true`\nworkflow w:\n  entry: a\n  a -> done\n");
    let host = Host::new().await;
    let events = std::sync::Arc::new(iterion_engine::MemoryEventSink::new());
    let run = iterion_engine::Execution::new(&wf, RUN_ID, host.sandbox.as_ref(), events).run();
    assert_send(&run);
    assert_eq!(run.await.unwrap().outcome.status, OutcomeStatus::Finished);
}

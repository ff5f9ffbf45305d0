//! Loops (§5.5): caps, exhaustion, counters, `previous_output` and resets (§5.4 step 7).

use iterion_engine::{Event, FailureCode, LoopExhausted, OutcomeStatus};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn a_capped_loop_runs_its_body_n_times_then_takes_the_fallback() {
    let (ran, _host) = run_src(
        r#"
schema tests:
  passed: bool
tool tests:
  command: `echo '{"passed": false}'`
  output: tests
tool fixer:
  command: `printf '{"round": %s, "max": %s, "prev": %s}' {{!loop.fix.iteration}} {{!loop.fix.max}} {{!loop.fix.previous_output.passed}}`
workflow w:
  entry: tests
  tests -> done when passed
  tests -> fixer as fix(3)
  tests -> fail
  fixer -> tests
"#,
    )
    .await;
    let mut want = Vec::new();
    for round in 1..=3u32 {
        want.extend([
            started("tests", iterion_engine::NodeKindLabel::Tool, round),
            finished("tests", json!({"passed": false})),
            edge_loop("tests", "fixer", "fix", round),
            started("fixer", iterion_engine::NodeKindLabel::Tool, round),
            finished("fixer", json!({"round": round, "max": 3, "prev": false})),
            edge("fixer", "tests"),
        ]);
    }
    want.extend([
        started("tests", iterion_engine::NodeKindLabel::Tool, 4),
        finished("tests", json!({"passed": false})),
        Event::LoopExhausted(LoopExhausted {
            from: "tests".into(),
            to: "fixer".into(),
            loop_: "fix".into(),
            max: 3,
        }),
        edge("tests", "fail"),
    ]);
    assert_eq!(ran.events, want);
    assert_eq!(
        (
            ran.report.outcome.status,
            ran.report.outcome.failure_code,
            ran.report.checkpoint.attempts.get("fixer").copied(),
            ran.report.checkpoint.loops["fix"].iteration,
        ),
        (
            OutcomeStatus::Failed,
            Some(FailureCode::WorkflowFailed),
            Some(3),
            3
        )
    );
}

#[tokio::test]
async fn entering_a_loop_from_outside_its_body_resets_its_counter() {
    // `inner` is a self-loop crossed once per round; `outer` re-enters it twice in all. Without
    // the reset on `round -> inner`, the second round could not cross `again` and inner would run
    // 3 times instead of 4.
    let (ran, _host) = run_src(
        r#"
tool round:
  command: `echo '{}'`
tool inner:
  command: `echo '{}'`
tool after:
  command: `echo '{}'`
workflow w:
  entry: round
  round -> inner
  inner -> inner as again(1)
  inner -> after
  after -> round as outer(1)
  after -> done
"#,
    )
    .await;
    let selections: Vec<Event> = ran
        .events
        .iter()
        .filter(|e| matches!(e, Event::EdgeSelected(_) | Event::LoopExhausted(_)))
        .cloned()
        .collect();
    let exhausted = |from: &str, to: &str, l: &str| {
        Event::LoopExhausted(LoopExhausted {
            from: from.into(),
            to: to.into(),
            loop_: l.into(),
            max: 1,
        })
    };
    assert_eq!(
        selections,
        vec![
            edge("round", "inner"),
            edge_loop("inner", "inner", "again", 1),
            exhausted("inner", "inner", "again"),
            edge("inner", "after"),
            edge_loop("after", "round", "outer", 1),
            edge("round", "inner"),
            edge_loop("inner", "inner", "again", 1),
            exhausted("inner", "inner", "again"),
            edge("inner", "after"),
            exhausted("after", "round", "outer"),
            edge("after", "done"),
        ]
    );
    assert_eq!(ran.report.checkpoint.attempts["inner"], 4);
    assert_eq!(ran.report.outcome.status, OutcomeStatus::Finished);
}

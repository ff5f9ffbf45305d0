//! `fan_out_all` and `await` (§5.6).

use iterion_engine::{Event, FailureCode, NodeFailed, NodeKindLabel, OutcomeStatus};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

use super::support::*;

/// The 04_parallel_review shape with tools only: `lint` and `tests` in parallel, `tally` joins.
fn review(await_mode: &str, lint: &str, tests: &str) -> String {
    format!(
        r#"
vars:
  dir: string = "."
schema review:
  approved: bool
  notes: string
router reviews:
  mode: fan_out_all
tool lint:
  command: `{lint}`
  output: review
tool tests:
  command: `{tests}`
  output: review
tool tests2:
  command: `printf '%s' {{{{input}}}}`
tool tally:
  await: {await_mode}
  command: `printf '%s' {{{{input}}}}`
workflow parallel_review:
  entry: reviews
  budget:
    max_iterations: 10
  reviews -> lint
  reviews -> tests
  lint -> tally with {{ lint: "{{{{input.approved}}}}" }}
  tests -> tests2 with {{ approved: "{{{{input.approved}}}}" }}
  tests2 -> tally with {{ tests: "{{{{input.approved}}}}" }}
  tally -> done
"#
    )
}

const APPROVE: &str = r#"echo '{"approved": true, "notes": "fine"}'"#;

fn vars_dir(host: &Host) -> Map<String, Value> {
    let mut vars = Map::new();
    vars.insert(
        "dir".into(),
        Value::String(host.path().to_string_lossy().into_owned()),
    );
    vars
}

#[tokio::test]
async fn wait_all_runs_every_branch_then_the_join_once() {
    let (ran, _host) = run_src(&review("wait_all", APPROVE, APPROVE)).await;
    let review = json!({"approved": true, "notes": "fine"});
    // The main line, and each branch's own sequence (branches interleave freely).
    assert_eq!(
        about(&ran.events, &["reviews", "tally"]),
        vec![
            started("reviews", NodeKindLabel::Router, 1),
            finished("reviews", json!({"dir": "."})),
            edge("reviews", "lint"),
            edge("reviews", "tests"),
            tool("tally"),
            finished("tally", json!({"lint": true, "tests": true})),
            edge("tally", "done"),
        ]
    );
    assert_eq!(
        about(&ran.events, &["lint"]),
        vec![
            in_branch(tool("lint"), "lint"),
            finished("lint", review.clone()),
            edge("lint", "tally"),
        ]
    );
    assert_eq!(
        about(&ran.events, &["tests", "tests2"]),
        vec![
            in_branch(tool("tests"), "tests"),
            finished("tests", review),
            edge("tests", "tests2"),
            in_branch(tool("tests2"), "tests"),
            finished("tests2", json!({"approved": true})),
            edge("tests2", "tally"),
        ]
    );
    assert_eq!(ran.events.len(), 16);
    assert_eq!(ran.report.outcome.status, OutcomeStatus::Finished);
}

#[tokio::test]
async fn wait_all_kills_the_other_branches_at_the_first_failure() {
    // `tests` records its pid and sleeps; `lint` waits for that pid, then fails. The sleeping
    // branch must be killed, not awaited.
    let lint = r#"while [ ! -s {{vars.dir}}/tests.pid ]; do sleep 0.02; done; echo lint broke >&2; exit 2"#;
    let tests = r#"echo $$ > {{vars.dir}}/tests.pid.tmp && mv {{vars.dir}}/tests.pid.tmp {{vars.dir}}/tests.pid && exec sleep 30"#;
    let wf = workflow(&review("wait_all", lint, tests));
    let host = Host::new().await;
    let ran = run_with(&wf, &host, |e| e.vars(vars_dir(&host))).await;
    let pid = read_pid(&host.file("tests.pid")).await;
    assert!(
        process_gone(pid).await,
        "the sleeping branch {pid} was killed"
    );
    assert_eq!(
        about(&ran.events, &["lint"]),
        vec![
            in_branch(tool("lint"), "lint"),
            Event::NodeFailed(NodeFailed {
                node: "lint".into(),
                code: FailureCode::ExecutionFailed,
                message: "command exited with status 2".into(),
                exit_code: Some(2),
                stderr_tail: Some("lint broke\n".into()),
                declared_code: None,
            }),
        ]
    );
    assert_eq!(
        about(&ran.events, &["tests", "tests2", "tally"]),
        vec![
            in_branch(tool("tests"), "tests"),
            failed(
                "tests",
                FailureCode::Cancelled,
                "cancelled: another branch of the fan-out failed"
            ),
        ]
    );
    let o = &ran.report.outcome;
    assert_eq!(
        (o.status, o.failure_code, o.message.as_deref()),
        (
            OutcomeStatus::Failed,
            Some(FailureCode::JoinFailed),
            Some(
                "join \"tally\": branch \"lint\" failed at node \"lint\": EXECUTION_FAILED: command exited with status 2"
            )
        )
    );
    // Resuming re-runs the whole fan-out from its router.
    assert_eq!(
        ran.report.checkpoint.next.as_ref().map(|n| n.node.as_str()),
        Some("reviews")
    );
}

#[tokio::test]
async fn best_effort_runs_the_join_with_the_failed_branches_listed() {
    let (ran, _host) = run_src(&review("best_effort", "echo nope >&2; exit 1", APPROVE)).await;
    assert_eq!(
        ran.report.outcome.final_output,
        Some(json!({
            "lint": null,
            "tests": true,
            "_failed_branches": [{
                "branch": "lint",
                "node": "lint",
                "code": "EXECUTION_FAILED",
                "message": "command exited with status 1",
            }],
        }))
    );
    assert_eq!(ran.report.outcome.status, OutcomeStatus::Finished);
    // The failed branch did not stop the other one.
    assert_eq!(
        about(&ran.events, &["tests2"]),
        vec![
            in_branch(tool("tests2"), "tests"),
            finished("tests2", json!({"approved": true})),
            edge("tests2", "tally"),
        ]
    );
}

#[tokio::test]
async fn best_effort_with_no_arrival_fails_the_join() {
    let (ran, _host) = run_src(&review("best_effort", "exit 1", "exit 3")).await;
    let o = &ran.report.outcome;
    assert_eq!(
        (o.status, o.failure_code, o.message.as_deref()),
        (
            OutcomeStatus::Failed,
            Some(FailureCode::JoinFailed),
            Some(
                "join \"tally\": no branch arrived; branch \"lint\" failed at node \"lint\": EXECUTION_FAILED: command exited with status 1; branch \"tests\" failed at node \"tests\": EXECUTION_FAILED: command exited with status 3"
            )
        )
    );
}

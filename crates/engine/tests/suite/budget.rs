//! Budgets (§5.7), cancellation and resume.

use std::sync::Arc;

use iterion_engine::{
    BudgetDimension, BudgetExceeded, Checkpoint, Event, Execution, ExecutionError, FailureCode,
    MemoryEventSink, NextNode, NodeKindLabel, OutcomeStatus, RunCancelled, RunFailed,
};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::support::*;

fn dir_vars(host: &Host) -> Map<String, Value> {
    let mut vars = Map::new();
    vars.insert(
        "dir".into(),
        Value::String(host.path().to_string_lossy().into_owned()),
    );
    vars
}

#[tokio::test]
async fn max_iterations_fails_before_the_node_that_would_exceed_it() {
    let (ran, _host) = run_src(
        r#"
tool a:
  command: `echo '{}'`
tool b:
  command: `echo '{}'`
workflow w:
  entry: a
  budget:
    max_iterations: 3
  a -> b
  b -> a as again(10)
  b -> done
"#,
    )
    .await;
    assert_eq!(
        ran.events,
        vec![
            tool("a"),
            finished("a", json!({})),
            edge("a", "b"),
            tool("b"),
            finished("b", json!({})),
            edge_loop("b", "a", "again", 1),
            started("a", NodeKindLabel::Tool, 2),
            finished("a", json!({})),
            edge("a", "b"),
            Event::BudgetExceeded(BudgetExceeded {
                dimension: BudgetDimension::MaxIterations
            }),
        ]
    );
    let o = &ran.report.outcome;
    assert_eq!(
        (o.status, o.failure_code, o.message.as_deref()),
        (
            OutcomeStatus::Failed,
            Some(FailureCode::BudgetExceeded),
            Some("node \"b\": budget max_iterations (3) reached")
        )
    );
    assert_eq!(
        o.terminal_event(9),
        Event::RunFailed(RunFailed {
            error: "node \"b\": budget max_iterations (3) reached".into(),
            phase: "execution".into(),
            code: Some(FailureCode::BudgetExceeded),
            resumable: None,
        })
    );
}

const SLOW: &str = r#"
vars:
  dir: string = "."
tool slow:
  command: `echo $$ > {{vars.dir}}/slow.tmp && mv {{vars.dir}}/slow.tmp {{vars.dir}}/slow.pid && exec sleep 30`
workflow w:
  entry: slow
  budget:
    max_duration: "1s"
  slow -> done
"#;

#[tokio::test]
async fn max_duration_cancels_the_running_node_and_fails_the_run() {
    let wf = workflow(SLOW);
    let host = Host::new().await;
    let ran = run_with(&wf, &host, |e| e.vars(dir_vars(&host))).await;
    let pid = read_pid(&host.file("slow.pid")).await;
    assert!(process_gone(pid).await, "the sleep {pid} was killed");
    assert_eq!(
        ran.events,
        vec![
            tool("slow"),
            Event::BudgetExceeded(BudgetExceeded {
                dimension: BudgetDimension::MaxDuration
            }),
            failed(
                "slow",
                FailureCode::BudgetExceeded,
                "budget max_duration (1s) elapsed"
            ),
        ]
    );
    assert_eq!(
        (ran.report.outcome.status, ran.report.outcome.failure_code),
        (OutcomeStatus::Failed, Some(FailureCode::BudgetExceeded))
    );
}

#[tokio::test]
async fn cancelling_the_token_kills_the_command_and_cancels_the_run() {
    let mut src = SLOW.replace("  budget:\n    max_duration: \"1s\"\n", "");
    src.push('\n');
    let wf = workflow(&src);
    let host = Host::new().await;
    let token = CancellationToken::new();
    let cancel = token.clone();
    let pid_file = host.file("slow.pid");
    let (ran, pid) = tokio::join!(
        run_with(&wf, &host, |e| e.vars(dir_vars(&host)).cancel_token(token)),
        async move {
            let pid = read_pid(&pid_file).await;
            cancel.cancel();
            pid
        }
    );
    assert!(process_gone(pid).await, "the sleep {pid} was killed");
    assert_eq!(
        ran.events,
        vec![
            tool("slow"),
            failed("slow", FailureCode::Cancelled, "the run was cancelled"),
        ]
    );
    let o = &ran.report.outcome;
    assert_eq!(
        (o.status, o.failure_code, o.terminal_event(1)),
        (
            OutcomeStatus::Cancelled,
            Some(FailureCode::Cancelled),
            Event::RunCancelled(RunCancelled {
                reason: "node \"slow\": the run was cancelled".into(),
                phase: "execution".into(),
            })
        )
    );
}

const FLAKY: &str = r#"
vars:
  dir: string = "."
tool a:
  command: `echo '{"a": 1}'`
tool b:
  command: `if [ -f {{vars.dir}}/ok ]; then printf '{"b": %s}' {{!input.x}}; else echo not yet >&2; exit 1; fi`
workflow w:
  entry: a
  a -> b with { x: "{{input.a}}" }
  b -> done
"#;

#[tokio::test]
async fn resume_restarts_at_the_failed_node_with_its_input() {
    let wf = workflow(FLAKY);
    let host = Host::new().await;
    let first = run_with(&wf, &host, |e| e.vars(dir_vars(&host))).await;
    assert_eq!(
        (
            first.report.outcome.status,
            first.report.outcome.failure_code,
            first.report.outcome.last_completed_node.as_deref(),
            first.report.checkpoint.next.clone(),
        ),
        (
            OutcomeStatus::FailedResumable,
            Some(FailureCode::ExecutionFailed),
            Some("a"),
            Some(NextNode {
                node: "b".into(),
                input: json!({"x": 1}),
            })
        )
    );
    assert_eq!(
        first.report.outcome.terminal_event(0),
        Event::RunFailed(RunFailed {
            error: "node \"b\": command exited with status 1\n--- stderr (tail) ---\nnot yet\n"
                .into(),
            phase: "execution".into(),
            code: Some(FailureCode::ExecutionFailed),
            resumable: Some(true),
        })
    );
    // The checkpoint survives a trip through the store as JSON.
    let stored = serde_json::to_string(&first.report.checkpoint).unwrap();
    let checkpoint: Checkpoint = serde_json::from_str(&stored).unwrap();

    std::fs::write(host.file("ok"), "").unwrap();
    let second = run_with(&wf, &host, |e| {
        e.vars(dir_vars(&host)).resume_from(checkpoint)
    })
    .await;
    assert_eq!(
        second.events,
        vec![
            started("b", NodeKindLabel::Tool, 2),
            finished("b", json!({"b": 1})),
            edge("b", "done"),
        ]
    );
    assert_eq!(
        (
            second.report.outcome.status,
            second
                .report
                .outcome
                .outputs
                .keys()
                .cloned()
                .collect::<Vec<_>>(),
            second.report.checkpoint.iterations,
        ),
        (
            OutcomeStatus::Finished,
            vec!["a".to_owned(), "b".to_owned()],
            3
        )
    );
}

#[tokio::test]
async fn a_finished_checkpoint_cannot_be_resumed() {
    let wf = workflow(FLAKY);
    let host = Host::new().await;
    let err = Execution::new(
        &wf,
        RUN_ID,
        host.sandbox.as_ref(),
        Arc::new(MemoryEventSink::new()),
    )
    .resume_from(Checkpoint::default())
    .run()
    .await
    .err()
    .map(|e: ExecutionError| (e.code(), e.to_string()));
    assert_eq!(
        err,
        Some((
            "RESUME_INVALID",
            "cannot resume: the run has no node left to run; it already reached done or fail"
                .to_owned()
        ))
    );
}

/// Issue 15 item 17: `max_duration` on a run with no sandbox ends every process the node
/// started — a background job, a grandchild in a subshell, a `setsid` escapee — not only its
/// shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_duration_leaves_no_process_of_the_run_on_the_host() {
    let wf = workflow(
        r#"
vars:
  dir: string = "."
tool slow:
  command: `exec >/dev/null 2>&1; sleep 1000 & a=$!; (sleep 1000 & echo $! > {{vars.dir}}/sub.pid); setsid sleep 1000 & c=$!; echo "$a $(cat {{vars.dir}}/sub.pid) $c $$" > {{vars.dir}}/pids.tmp && mv {{vars.dir}}/pids.tmp {{vars.dir}}/pids; sleep 30`
workflow w:
  entry: slow
  budget:
    max_duration: "1s"
  slow -> done
"#,
    );
    let host = Host::new().await;
    let ran = run_with(&wf, &host, |e| e.vars(dir_vars(&host))).await;
    assert_eq!(
        ran.report.outcome.failure_code,
        Some(FailureCode::BudgetExceeded)
    );
    let pids: Vec<u32> = tokio::fs::read_to_string(host.file("pids"))
        .await
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 4);
    for pid in pids {
        assert!(process_gone(pid).await, "process {pid} of the run is left");
    }
}

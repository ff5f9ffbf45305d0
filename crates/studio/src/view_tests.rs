use iterion_store::{Event, NewRun, RunId, RunStatus, Timestamp};
use serde_json::{Value, json};

use super::*;

fn run(status: RunStatus) -> Run {
    let id = RunId::parse("0190a000-0000-7000-8000-000000000001").unwrap();
    let new = NewRun::new("w", "sha256:00", "/nonexistent/w.iter");
    Run {
        id: id.clone(),
        workflow: new.workflow,
        workflow_hash: new.workflow_hash,
        file_path: new.file_path,
        status,
        trust: new.trust,
        admission: None,
        failure_code: None,
        failure_message: None,
        parent_run_id: None,
        root_run_id: id,
        worktree_path: None,
        vars: serde_json::Map::new(),
        last_completed_node: None,
        checkpoint: None,
        deliveries: 0,
        available_at: None,
        created_at: Timestamp::from_millis(1_000),
        updated_at: Timestamp::from_millis(2_000),
        finished_at: None,
        version: 1,
    }
}

fn events(list: &[(&str, Value)]) -> Vec<Event> {
    list.iter()
        .enumerate()
        .map(|(i, (kind, data))| Event {
            run_id: RunId::parse("0190a000-0000-7000-8000-000000000001").unwrap(),
            seq: i as u64 + 1,
            ts: Timestamp::from_millis(1_000 + i as i64),
            kind: (*kind).to_owned(),
            data: data.clone(),
        })
        .collect()
}

#[test]
fn a_paused_agent_run_shows_its_question_transcript_and_sandbox() {
    let ev = events(&[
        (
            "run_started",
            json!({"workflow": "w", "workflow_hash": "sha256:00", "trust": "trusted", "resumed": false}),
        ),
        (
            "sandbox_started",
            json!({"driver": "podman", "mode": "auto", "source": "global default", "image": "img", "sandbox_id": "c1", "has_post_create": false, "network_mode": "allowlist", "network_source": "workflow sandbox.network", "proxy": true, "tls_inspection": false, "egress_enforced": true}),
        ),
        (
            "node_started",
            json!({"node": "asker", "kind": "agent", "attempt": 1}),
        ),
        (
            "agent_turn",
            json!({"node": "asker", "backend": "claw", "turn": 1, "model": "m", "stop_reason": "tool_use"}),
        ),
        (
            "agent_tool_call",
            json!({"node": "asker", "backend": "claw", "turn": 1, "tool": "bash", "input": "{\"command\":\"ls\"}", "result": "a\nb", "is_error": false, "exit_code": 0}),
        ),
        (
            "network_blocked",
            json!({"host": "evil.test", "reason": "policy denial", "run_id": "x"}),
        ),
        (
            "network_blocked",
            json!({"host": "evil.test", "reason": "policy denial", "run_id": "x"}),
        ),
        (
            "run_paused",
            json!({"node": "asker", "question": "Which?", "options": ["a", "b"]}),
        ),
    ]);
    let chunk = |seq: u64, node: &str, text: &str| iterion_store::NodeLog {
        run_id: RunId::parse("0190a000-0000-7000-8000-000000000001").unwrap(),
        seq,
        ts: Timestamp::from_millis(0),
        node: node.into(),
        stream: iterion_store::LogStream::Stdout,
        text: text.into(),
        truncated: seq == 2,
    };
    let node_logs = [chunk(1, "post_create", "npm ci"), chunk(2, "asker", "a\nb")];
    let v = run_view(
        &run(RunStatus::Paused),
        &ev,
        &[],
        &node_logs,
        Vec::new(),
        Timestamp::from_millis(5_000),
    );
    assert_eq!(v.nodes[0].logs.len(), 1);
    assert_eq!(v.nodes[0].logs[0].text, "a\nb");
    assert!(v.nodes[0].logs[0].truncated);
    assert_eq!(v.setup_logs.len(), 1, "setup output belongs to no node");
    assert_eq!(v.setup_logs[0].0, "post_create");
    assert_eq!(v.run.driver.as_deref(), Some("podman"));
    assert_eq!(
        v.run.duration_ms, 4_000,
        "a live run's duration runs to now"
    );
    let q = v.question.unwrap();
    assert_eq!((q.node.as_str(), q.question.as_str()), ("asker", "Which?"));
    assert_eq!(q.options, ["a", "b"]);
    assert_eq!(v.nodes.len(), 1);
    assert_eq!(v.nodes[0].state, "paused");
    assert_eq!(v.nodes[0].transcript.len(), 2);
    assert_eq!(v.sandbox.state, "started");
    assert_eq!(v.sandbox.mode_source.as_deref(), Some("global default"));
    assert_eq!(
        v.sandbox.blocked,
        [Blocked {
            host: "evil.test".into(),
            reason: "policy denial".into()
        }],
        "one row per host"
    );
    assert!(v.failure.is_none());
    assert!(
        matches!(v.graph.origin, crate::graph::Origin::Events(_)),
        "the file is gone"
    );
}

#[test]
fn a_failed_run_has_its_failure_row_and_a_node_left_running_is_stopped() {
    let mut r = run(RunStatus::Failed);
    r.failure_code = Some("SANDBOX_DRIVER_UNAVAILABLE".into());
    r.failure_message = Some("no runtime".into());
    r.finished_at = Some(Timestamp::from_millis(3_000));
    let ev = events(&[
        (
            "node_started",
            json!({"node": "a", "kind": "tool", "attempt": 1}),
        ),
        (
            "run_failed",
            json!({"error": "no runtime", "phase": "sandbox setup", "code": "SANDBOX_DRIVER_UNAVAILABLE"}),
        ),
    ]);
    let v = run_view(&r, &ev, &[], &[], Vec::new(), Timestamp::from_millis(9_000));
    assert_eq!(
        v.run.duration_ms, 2_000,
        "an ended run's duration stops at its end"
    );
    assert_eq!(v.nodes[0].state, "stopped");
    let f = v.failure.unwrap();
    assert_eq!(f.code.as_deref(), Some("SANDBOX_DRIVER_UNAVAILABLE"));
    assert_eq!(f.phase.as_deref(), Some("sandbox setup"));
    assert!(
        f.remedy.contains("docker or podman") && f.remedy.contains("--force"),
        "{}",
        f.remedy
    );
    assert!(v.question.is_none());
}

#[test]
fn children_nest_under_their_parents_and_short_ids_tell_runs_apart() {
    let mk = |id: &str, parent: Option<&str>| RunRow {
        id: id.into(),
        short_id: id[..8].into(),
        workflow: "w".into(),
        status: "finished".into(),
        failure_code: None,
        trust: "trusted".into(),
        driver: None,
        started: Timestamp::from_millis(0),
        finished: None,
        duration_ms: 0,
        parent_run_id: parent.map(str::to_owned),
        children: Vec::new(),
    };
    let mut rows = vec![
        mk(
            "0190a000-0000-7000-8000-00000000000c",
            Some("0190a000-0000-7000-8000-00000000000b"),
        ),
        mk(
            "0190a000-0000-7000-8000-00000000000b",
            Some("0190a000-0000-7000-8000-00000000000a"),
        ),
        mk("0190a000-0000-7000-8000-00000000000a", None),
        mk(
            "0190a111-0000-7000-8000-00000000000d",
            Some("0190a000-0000-7000-8000-0000000000ff"),
        ),
    ];
    unique_short_ids(&mut rows);
    assert_eq!(rows[3].short_id, "0190a111");
    assert_eq!(rows[0].short_id, "0190a000-0000-7000-8000-00000000000c");
    let top = nest(rows);
    assert_eq!(
        top.len(),
        2,
        "a child whose parent is not listed stays on top"
    );
    assert_eq!(top[0].id, "0190a000-0000-7000-8000-00000000000a");
    assert_eq!(
        top[0].children[0].children[0].id,
        "0190a000-0000-7000-8000-00000000000c"
    );
}

#[test]
fn published_artifacts_are_listed_from_their_events_every_version() {
    let ev = events(&[
        (
            "node_started",
            json!({"node": "plan", "kind": "agent", "attempt": 1}),
        ),
        (
            "node_finished",
            json!({"node": "plan", "output": {"text": "v0"}}),
        ),
        (
            "artifact_published",
            json!({"name": "plan", "node": "plan", "version": 0, "value": {"text": "<b>v0</b>"}}),
        ),
        (
            "artifact_published",
            json!({"name": "plan", "node": "replan", "version": 1, "value": {"text": "v1"}}),
        ),
    ]);
    let v = run_view(
        &run(RunStatus::Finished),
        &ev,
        &[],
        &[],
        Vec::new(),
        Timestamp::from_millis(9_000),
    );
    let published: Vec<(String, Option<String>, Option<u64>, String)> = v
        .artifacts
        .iter()
        .filter(|a| a.kind == "published")
        .map(|a| (a.name.clone(), a.node.clone(), a.version, a.value.clone()))
        .collect();
    assert_eq!(
        published,
        [
            (
                "plan".to_owned(),
                Some("plan".to_owned()),
                Some(0),
                r#"{"text":"<b>v0</b>"}"#.to_owned()
            ),
            (
                "plan".to_owned(),
                Some("replan".to_owned()),
                Some(1),
                r#"{"text":"v1"}"#.to_owned()
            ),
        ]
    );
    // The other kinds carry neither field on the wire.
    let output = v.artifacts.iter().find(|a| a.kind == "output").unwrap();
    let wire = serde_json::to_value(output).unwrap();
    assert_eq!(wire.as_object().unwrap().len(), 3, "{wire}");
}

#[test]
fn a_node_the_cancel_ended_is_stopped_not_failed() {
    let ev = events(&[
        (
            "node_started",
            json!({"node": "nap", "kind": "tool", "attempt": 1}),
        ),
        ("cancel_requested", json!({"by": "studio"})),
        (
            "node_failed",
            json!({"node": "nap", "code": "CANCELLED", "message": "the run was cancelled"}),
        ),
        (
            "run_cancelled",
            json!({"reason": "r", "phase": "execution"}),
        ),
    ]);
    let v = run_view(
        &run(RunStatus::Cancelled),
        &ev,
        &[],
        &[],
        Vec::new(),
        Timestamp::from_millis(9_000),
    );
    assert_eq!(v.nodes[0].state, "stopped");
    assert_eq!(
        v.nodes[0].failure.as_ref().unwrap().code.as_deref(),
        Some("CANCELLED")
    );
    assert_eq!(v.timeline[1].kind, "cancel_requested");
}

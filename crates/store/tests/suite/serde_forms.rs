//! The JSON shapes of the records (`iterion inspect --json`, `iterion events --json`).

use iterion_store::{
    Admission, AdmissionDecision, Event, NewEvent, Run, RunId, RunStatus, Store, Timestamp, Trust,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{T0, memory_store, review};

#[tokio::test]
async fn an_event_serialises_with_type_not_kind() {
    let (store, _clock) = memory_store().await;
    let run = store.create_run(review()).await.unwrap();
    let event = store
        .append_event(
            &run.id,
            NewEvent::new(
                "sandbox_skipped",
                json!({"mode": "auto", "file_secrets_dropped": false}),
            ),
        )
        .await
        .unwrap();
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(
        value,
        json!({
            "run_id": run.id.as_str(),
            "seq": 1,
            "ts": "2026-11-01T09:30:00.000Z",
            "type": "sandbox_skipped",
            "data": {"mode": "auto", "file_secrets_dropped": false},
        })
    );
    assert_eq!(serde_json::from_value::<Event>(value).unwrap(), event);
}

#[tokio::test]
async fn a_run_serialises_with_every_key_and_round_trips() {
    let (store, _clock) = memory_store().await;
    let id = RunId::parse("0190b4c6-1d2e-7f00-8000-0000000000bb").unwrap();
    let mut run = store
        .create_run(review().id(id).trust(Trust::Untrusted))
        .await
        .unwrap();
    run.status = RunStatus::Failed;
    run.failure_code = Some("LAUNCH_FAILED".into());
    run.failure_message = Some("run refused".into());
    run.admission = Some(Admission {
        decision: AdmissionDecision::Denied,
        phase: "pre_model".into(),
        code: "untrusted_without_sandbox".into(),
        reason: "run refused: trust=untrusted requires a per-run sandbox".into(),
        checked_at: Timestamp::from_millis(T0),
    });
    store.save_run(&run, 1).await.unwrap();
    let run: Run = store.get_run(&run.id).await.unwrap().unwrap();

    let value = serde_json::to_value(&run).unwrap();
    assert_eq!(
        value,
        json!({
            "id": "0190b4c6-1d2e-7f00-8000-0000000000bb",
            "workflow": "review",
            "workflow_hash": "sha256:ab12",
            "file_path": "flows/review.iter",
            "status": "failed",
            "trust": "untrusted",
            "admission": {
                "decision": "denied",
                "phase": "pre_model",
                "code": "untrusted_without_sandbox",
                "reason": "run refused: trust=untrusted requires a per-run sandbox",
                "checked_at": "2026-11-01T09:30:00.000Z",
            },
            "failure_code": "LAUNCH_FAILED",
            "failure_message": "run refused",
            "parent_run_id": null,
            "root_run_id": "0190b4c6-1d2e-7f00-8000-0000000000bb",
            "worktree_path": null,
            "vars": {},
            "last_completed_node": null,
            "checkpoint": null,
            "deliveries": 0,
            "available_at": null,
            "created_at": "2026-11-01T09:30:00.000Z",
            "updated_at": "2026-11-01T09:30:00.000Z",
            "finished_at": "2026-11-01T09:30:00.000Z",
            "version": 2,
        })
    );
    assert_eq!(serde_json::from_value::<Run>(value).unwrap(), run);
}

#[test]
fn a_run_id_must_be_a_uuid_and_is_normalised() {
    let id = RunId::parse(" 0190B4C6-1D2E-7F00-8000-0000000000BB ").unwrap();
    assert_eq!(id.as_str(), "0190b4c6-1d2e-7f00-8000-0000000000bb");
    let err = RunId::parse("run-1").unwrap_err();
    assert_eq!(err.code(), "STORE_INVALID_RUN_ID");
    assert!(serde_json::from_value::<RunId>(json!("run-1")).is_err());
}

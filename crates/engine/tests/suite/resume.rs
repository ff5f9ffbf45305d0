//! `Engine::resume` refusals (SANDBOX.md §10, issue 15 item 11): a refused resume leaves the run
//! record exactly as it was — status, failure code and message — and starts nothing.

use std::sync::Arc;

use iterion_engine::{NoObserver, ResumeRequest, RunControl};
use iterion_store::{AdmissionDecision, NewRun, RunStatus, Trust};
use pretty_assertions::assert_eq;

use super::support::sqlite_store;

#[tokio::test]
async fn a_resume_refused_by_admission_leaves_the_record_failed_resumable() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let store = sqlite_store(home.path()).await;
    let engine = iterion_engine::Engine::new(Arc::clone(&store), home.path())
        .with_registry(iterion_sandbox::Registry::with_noop());
    let marker = ws.path().join("ran.txt");
    let source = format!(
        "tool t:\n  command: `echo ran > {}`\n\nworkflow w:\n  entry: t\n  sandbox: none\n  t -> done\n",
        marker.display()
    );
    let file = ws.path().join("w.iter");
    std::fs::write(&file, &source).unwrap();
    let mut new = NewRun::new("w", iterion_engine::workflow_hash(source.as_bytes()), &file);
    new.trust = Trust::Untrusted;
    let created = store.create_run(new).await.unwrap();
    let mut failed = created.clone();
    failed.status = RunStatus::FailedResumable;
    failed.failure_code = Some("SANDBOX_SETUP_TIMEOUT".to_owned());
    failed.failure_message = Some("the pull took too long".to_owned());
    store.save_run(&failed, created.version).await.unwrap();
    let events_before = store.events(&created.id, 0).await.unwrap().len();

    let refused = engine
        .resume(
            ResumeRequest {
                run_id: created.id.to_string(),
                force: false,
                answer: None,
            },
            RunControl::default(),
            Arc::new(NoObserver),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "RESUME_INVALID", "{refused}");
    assert!(
        refused
            .to_string()
            .contains("untrusted requires a per-run sandbox"),
        "{refused}"
    );

    let after = store.get_run(&created.id).await.unwrap().unwrap();
    assert_eq!(
        (
            after.status,
            after.failure_code.as_deref(),
            after.failure_message.as_deref()
        ),
        (
            RunStatus::FailedResumable,
            Some("SANDBOX_SETUP_TIMEOUT"),
            Some("the pull took too long")
        )
    );
    // The record explains itself: the denial is on it.
    let admission = after.admission.expect("the denial is persisted");
    assert_eq!(admission.decision, AdmissionDecision::Denied);
    assert_eq!(admission.code, "untrusted_without_sandbox");
    // Nothing started: no event, no node, and the lease is free for the next resume.
    assert_eq!(
        store.events(&created.id, 0).await.unwrap().len(),
        events_before
    );
    assert!(!marker.exists());
    let again = engine
        .resume(
            ResumeRequest {
                run_id: created.id.to_string(),
                force: false,
                answer: None,
            },
            RunControl::default(),
            Arc::new(NoObserver),
        )
        .await
        .unwrap_err();
    assert_eq!(
        again.code(),
        "RESUME_INVALID",
        "a second refusal, not LEASE_HELD: {again}"
    );
}

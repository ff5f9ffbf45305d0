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
                from: None,
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
                from: None,
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

/// A docker driver that exists for the first question only: the resume's own admission sees
/// it, the attempt's admission a moment later does not (the daemon went away in between).
struct VanishingDocker(std::sync::atomic::AtomicUsize);

struct NeverStarts;

#[async_trait::async_trait]
impl iterion_sandbox::Driver for NeverStarts {
    fn name(&self) -> &str {
        "docker"
    }
    fn capabilities(&self) -> iterion_sandbox::Capabilities {
        iterion_sandbox::Capabilities::NONE
    }
    async fn prepare(
        &self,
        _spec: &iterion_sandbox::Spec,
        _progress: &dyn iterion_sandbox::Progress,
    ) -> Result<iterion_sandbox::PreparedSpec, iterion_sandbox::Error> {
        Err(gone())
    }
    async fn start(
        &self,
        _prepared: iterion_sandbox::PreparedSpec,
        _info: iterion_sandbox::RunInfo,
    ) -> Result<Box<dyn iterion_sandbox::SandboxRun>, iterion_sandbox::Error> {
        Err(gone())
    }
}

fn gone() -> iterion_sandbox::Error {
    iterion_sandbox::Error::Unavailable {
        driver: "docker".to_owned(),
        reason: "the daemon went away".to_owned(),
    }
}

#[async_trait::async_trait]
impl iterion_sandbox::DriverConstructor for VanishingDocker {
    async fn construct(&self) -> Result<Arc<dyn iterion_sandbox::Driver>, iterion_sandbox::Error> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Ok(Arc::new(NeverStarts))
        } else {
            Err(gone())
        }
    }
}

/// The backstop: when the attempt's own admission refuses after the resume's admitted (the
/// answer changed in between), the record still ends as it was before the resume.
#[tokio::test]
async fn a_resume_whose_attempt_is_refused_after_all_restores_the_record() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let store = sqlite_store(home.path()).await;
    let registry = iterion_sandbox::Registry::with_noop().register(
        iterion_sandbox::DriverKind::Docker,
        VanishingDocker(std::sync::atomic::AtomicUsize::new(0)),
    );
    let engine = iterion_engine::Engine::new(Arc::clone(&store), home.path())
        .with_registry(registry)
        .with_factory_options(iterion_sandbox::FactoryOptions {
            host: Some(iterion_sandbox::HostKind::Local),
            preferred_driver: None,
        });
    let source = "tool t:\n  command: `echo ran`\n\nworkflow w:\n  entry: t\n  sandbox:\n    image: \"busybox:1\"\n  t -> done\n";
    let file = ws.path().join("w.iter");
    std::fs::write(&file, source).unwrap();
    let mut new = NewRun::new("w", iterion_engine::workflow_hash(source.as_bytes()), &file);
    new.trust = Trust::Untrusted;
    let created = store.create_run(new).await.unwrap();
    let mut failed = created.clone();
    failed.status = RunStatus::FailedResumable;
    failed.failure_code = Some("SANDBOX_SETUP_TIMEOUT".to_owned());
    failed.failure_message = Some("the pull took too long".to_owned());
    store.save_run(&failed, created.version).await.unwrap();

    let refused = engine
        .resume(
            ResumeRequest {
                from: None,
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
    let after = store.get_run(&created.id).await.unwrap().unwrap();
    assert_eq!(
        (
            after.status,
            after.failure_code.as_deref(),
            after.failure_message.as_deref(),
            after.admission.map(|a| a.decision)
        ),
        (
            RunStatus::FailedResumable,
            Some("SANDBOX_SETUP_TIMEOUT"),
            Some("the pull took too long"),
            Some(AdmissionDecision::Denied)
        )
    );
    // The attempt did start (the first admission allowed it): the backstop is what held.
    let kinds: Vec<String> = store
        .events(&created.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"run_started".to_owned()), "{kinds:?}");
}

//! Runs: create, read, list, save — and every way a save is refused.

use iterion_store::ManualClock;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use iterion_store::{
    Admission, AdmissionDecision, Error, InitialStatus, NewRun, Run, RunId, RunQuery, RunStatus,
    Store, Timestamp, Trust,
};
use pretty_assertions::assert_eq;
use serde_json::{Map, json};

use super::{T0, memory_store, review};

fn vars() -> Map<String, serde_json::Value> {
    match json!({"region": "eu", "retries": 3}) {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

async fn a_created_run_reads_back_whole(store: Arc<dyn Store>, _clock: ManualClock) {
    let id = RunId::parse("0190b4c6-1d2e-7f00-8000-0000000000aa").unwrap();
    let created = store
        .create_run(
            review()
                .id(id.clone())
                .trust(Trust::Untrusted)
                .worktree_path("/home/ada/.iterion/worktrees/x")
                .vars(vars()),
        )
        .await
        .unwrap();
    let want = Run {
        id: id.clone(),
        workflow: "review".into(),
        workflow_hash: "sha256:ab12".into(),
        file_path: PathBuf::from("flows/review.iter"),
        status: RunStatus::Running,
        trust: Trust::Untrusted,
        admission: None,
        failure_code: None,
        failure_message: None,
        parent_run_id: None,
        root_run_id: id.clone(),
        worktree_path: Some(PathBuf::from("/home/ada/.iterion/worktrees/x")),
        vars: vars(),
        last_completed_node: None,
        checkpoint: None,
        deliveries: 0,
        available_at: None,
        created_at: Timestamp::from_millis(T0),
        updated_at: Timestamp::from_millis(T0),
        finished_at: None,
        version: 1,
    };
    assert_eq!(created, want);
    assert_eq!(store.get_run(&id).await.unwrap(), Some(want));
}

async fn generated_ids_are_uuid_v7_and_a_parentless_run_is_its_own_root(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    let uuid = uuid::Uuid::parse_str(run.id.as_str()).unwrap();
    assert_eq!(
        (uuid.get_version_num(), &run.root_run_id, &run.parent_run_id),
        (7, &run.id, &None)
    );
}

async fn a_child_takes_its_parents_root_and_trust(store: Arc<dyn Store>, _clock: ManualClock) {
    let root = store
        .create_run(review().trust(Trust::Untrusted))
        .await
        .unwrap();
    let child = store
        .create_run(NewRun::new("sub", "h2", "sub.iter").child_of(&root))
        .await
        .unwrap();
    let grandchild = store
        .create_run(NewRun::new("subsub", "h3", "subsub.iter").child_of(&child))
        .await
        .unwrap();
    assert_eq!(
        (
            grandchild.parent_run_id,
            grandchild.root_run_id,
            grandchild.trust
        ),
        (Some(child.id), root.id, Trust::Untrusted)
    );
}

async fn a_child_may_be_less_trusted_than_its_parent_but_never_more(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let trusted = store.create_run(review()).await.unwrap();
    let lowered = store
        .create_run(review().child_of(&trusted).trust(Trust::Untrusted))
        .await
        .unwrap();
    assert_eq!(lowered.trust, Trust::Untrusted);

    let err = store
        .create_run(review().child_of(&lowered).trust(Trust::Trusted))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::TrustRaised { parent_run_id, .. } if *parent_run_id == lowered.id),
        "{err:?}"
    );
    assert_eq!(
        store.list_runs(&RunQuery::default()).await.unwrap().len(),
        2
    );
}

async fn an_unknown_parent_or_a_taken_id_is_refused(store: Arc<dyn Store>, _clock: ManualClock) {
    let ghost = RunId::generate();
    let mut orphan = review();
    orphan.parent_run_id = Some(ghost.clone());
    let err = store.create_run(orphan).await.unwrap_err();
    assert!(
        matches!(&err, Error::ParentNotFound { parent_run_id, .. } if *parent_run_id == ghost),
        "{err:?}"
    );

    let run = store.create_run(review()).await.unwrap();
    let err = store
        .create_run(review().id(run.id.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::RunExists { run_id } if *run_id == run.id),
        "{err:?}"
    );
    assert_eq!(
        store.list_runs(&RunQuery::newest(10)).await.unwrap().len(),
        1
    );
}

async fn an_unknown_run_reads_as_none(store: Arc<dyn Store>, _clock: ManualClock) {
    assert_eq!(store.get_run(&RunId::generate()).await.unwrap(), None);
}

async fn list_runs_is_newest_first_limited_and_filtered_by_status(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let mut ids = Vec::new();
    for n in 0..5 {
        let status = if n % 2 == 0 {
            InitialStatus::Queued
        } else {
            InitialStatus::Running
        };
        let run = store.create_run(review().status(status)).await.unwrap();
        ids.push(run.id);
        clock.advance(Duration::from_millis(10));
    }
    // Two runs in the same millisecond still come newest first (v7 ids sort by creation).
    let same_ms = store.create_run(review()).await.unwrap();
    ids.push(same_ms.id);

    let listed: Vec<RunId> = store
        .list_runs(&RunQuery::newest(4))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        listed,
        [&ids[5], &ids[4], &ids[3], &ids[2]].map(Clone::clone)
    );

    let queued: Vec<RunId> = store
        .list_runs(&RunQuery::newest(10).status(RunStatus::Queued))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(queued, [&ids[4], &ids[2], &ids[0]].map(Clone::clone));
}

fn admission() -> Admission {
    Admission {
        decision: AdmissionDecision::Allowed,
        phase: "pre_model".into(),
        code: "trusted".into(),
        reason: "trusted run".into(),
        checked_at: Timestamp::from_millis(T0),
    }
}

async fn a_save_writes_the_state_fields_and_bumps_the_version(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let mut run = store.create_run(review()).await.unwrap();
    clock.advance(Duration::from_secs(2));

    run.admission = Some(admission());
    run.last_completed_node = Some("lint".into());
    run.checkpoint = Some(json!({"outputs": {"lint": {"ok": true}}, "iterations": 1}));
    run.worktree_path = Some(PathBuf::from("/wt/1"));
    run.vars.insert("extra".into(), json!(true));
    run.status = RunStatus::Paused;
    let version = store.save_run(&run, 1).await.unwrap();
    assert_eq!(version, 2);

    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    let want = Run {
        version: 2,
        updated_at: Timestamp::from_millis(T0 + 2_000),
        ..run
    };
    assert_eq!(stored, want);
}

async fn finished_at_is_stamped_entering_a_terminal_status_and_cleared_on_resume(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let mut run = store.create_run(review()).await.unwrap();
    let mut stamps = Vec::new();
    let steps = [
        (RunStatus::FailedResumable, Some("SANDBOX_SETUP_TIMEOUT")),
        (RunStatus::FailedResumable, Some("SANDBOX_SETUP_TIMEOUT")),
        (RunStatus::Running, None),
        (RunStatus::Finished, None),
    ];
    for (status, code) in steps {
        clock.advance(Duration::from_secs(1));
        run.status = status;
        run.failure_code = code.map(str::to_owned);
        store.save_run(&run, run.version).await.unwrap();
        run = store.get_run(&run.id).await.unwrap().unwrap();
        stamps.push((run.status, run.finished_at.map(|t| t.as_millis() - T0)));
    }
    assert_eq!(
        stamps,
        [
            (RunStatus::FailedResumable, Some(1_000)),
            // Saving again in the same terminal status keeps the first stamp.
            (RunStatus::FailedResumable, Some(1_000)),
            (RunStatus::Running, None),
            (RunStatus::Finished, Some(4_000)),
        ]
    );
}

/// A change to one field of a run.
type Edit = Box<dyn Fn(&mut Run)>;

async fn identity_fields_cannot_be_saved_changed(store: Arc<dyn Store>, _clock: ManualClock) {
    let parent = store.create_run(review()).await.unwrap();
    let run = store
        .create_run(NewRun::new("sub", "h", "sub.iter").child_of(&parent))
        .await
        .unwrap();
    let other = RunId::generate();
    let edits: Vec<(&str, Edit)> = vec![
        ("workflow", Box::new(|r| r.workflow = "other".into())),
        (
            "workflow_hash",
            Box::new(|r| r.workflow_hash = "sha256:ff".into()),
        ),
        (
            "file_path",
            Box::new(|r| r.file_path = "elsewhere.iter".into()),
        ),
        ("trust", Box::new(|r| r.trust = Trust::Untrusted)),
        ("parent_run_id", Box::new(|r| r.parent_run_id = None)),
        (
            "root_run_id",
            Box::new(move |r| r.root_run_id = other.clone()),
        ),
    ];
    let mut refused = Vec::new();
    for (name, edit) in &edits {
        let mut changed = run.clone();
        edit(&mut changed);
        match store.save_run(&changed, 1).await.unwrap_err() {
            Error::ImmutableField { run_id, field } => {
                assert_eq!(run_id, run.id);
                refused.push(field);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(refused, edits.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    assert_eq!(store.get_run(&run.id).await.unwrap(), Some(run));
}

async fn a_failure_code_is_refused_on_a_status_that_cannot_carry_one(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let mut run = store.create_run(review()).await.unwrap();
    run.failure_code = Some("INTERRUPTED".into());
    let err = store.save_run(&run, 1).await.unwrap_err();
    assert_eq!(err.code(), "STORE_FAILURE_ON_STATUS");

    run.failure_code = None;
    run.failure_message = Some("stale message".into());
    let err = store.save_run(&run, 1).await.unwrap_err();
    assert_eq!(err.code(), "STORE_FAILURE_ON_STATUS");

    run.status = RunStatus::Cancelled;
    run.failure_code = Some("CANCELLED".into());
    assert_eq!(store.save_run(&run, 1).await.unwrap(), 2);
}

async fn an_illegal_transition_is_refused_and_leaves_the_run_untouched(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let mut run = store.create_run(review()).await.unwrap();
    run.status = RunStatus::Finished;
    store.save_run(&run, 1).await.unwrap();
    let finished = store.get_run(&run.id).await.unwrap().unwrap();

    let mut again = finished.clone();
    again.status = RunStatus::Running;
    let err = store.save_run(&again, 2).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::IllegalTransition {
                from: RunStatus::Finished,
                to: RunStatus::Running,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.get_run(&run.id).await.unwrap(), Some(finished));
}

async fn saving_an_unknown_run_is_not_found(store: Arc<dyn Store>, _clock: ManualClock) {
    let mut run = store.create_run(review()).await.unwrap();
    run.id = RunId::generate();
    let err = store.save_run(&run, 1).await.unwrap_err();
    assert!(
        matches!(&err, Error::RunNotFound { run_id } if *run_id == run.id),
        "{err:?}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_path_that_is_not_utf8_is_refused() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let (store, _clock) = memory_store().await;
    let bad = PathBuf::from(OsStr::from_bytes(b"flows/\xff.iter"));
    let err = store
        .create_run(NewRun::new("review", "h", bad))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::NonUtf8Path {
                field: "file_path",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.list_runs(&RunQuery::default()).await.unwrap(), []);
}

on_both_backends!(
    a_created_run_reads_back_whole,
    generated_ids_are_uuid_v7_and_a_parentless_run_is_its_own_root,
    a_child_takes_its_parents_root_and_trust,
    a_child_may_be_less_trusted_than_its_parent_but_never_more,
    an_unknown_parent_or_a_taken_id_is_refused,
    an_unknown_run_reads_as_none,
    list_runs_is_newest_first_limited_and_filtered_by_status,
    a_save_writes_the_state_fields_and_bumps_the_version,
    finished_at_is_stamped_entering_a_terminal_status_and_cleared_on_resume,
    identity_fields_cannot_be_saved_changed,
    a_failure_code_is_refused_on_a_status_that_cannot_carry_one,
    an_illegal_transition_is_refused_and_leaves_the_run_untouched,
    saving_an_unknown_run_is_not_found,
);

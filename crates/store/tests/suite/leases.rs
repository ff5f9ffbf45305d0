//! Leases and liveness: who is executing a run, and what the reaper may collect
//! (SANDBOX.md §12.1).

use iterion_store::ManualClock;
use std::sync::Arc;
use std::time::Duration;

use iterion_store::{Error, Lease, Liveness, RunId, RunStatus, Store, Timestamp};
use pretty_assertions::assert_eq;

use super::{T0, review};

const TTL: Duration = Duration::from_secs(30);

fn lease(run_id: &RunId, holder: &str, expires_offset_ms: i64) -> Lease {
    Lease {
        run_id: run_id.clone(),
        holder: holder.into(),
        expires_at: Timestamp::from_millis(T0 + expires_offset_ms),
    }
}

async fn a_free_run_can_be_leased_and_is_then_held(store: Arc<dyn Store>, _clock: ManualClock) {
    let run = store.create_run(review()).await.unwrap();
    assert!(!store.lease_held(&run.id).await.unwrap());
    let got = store.acquire_lease(&run.id, "host-a:1", TTL).await.unwrap();
    assert_eq!(got, lease(&run.id, "host-a:1", 30_000));
    assert!(store.lease_held(&run.id).await.unwrap());
}

async fn a_live_lease_refuses_another_holder_but_not_its_own(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    store.acquire_lease(&run.id, "host-a:1", TTL).await.unwrap();
    clock.advance(Duration::from_secs(29));
    let err = store
        .acquire_lease(&run.id, "host-b:2", TTL)
        .await
        .unwrap_err();
    match err {
        Error::LeaseHeld {
            run_id,
            holder,
            expires_at,
        } => assert_eq!(
            (run_id, holder, expires_at),
            (
                run.id.clone(),
                "host-a:1".into(),
                Timestamp::from_millis(T0 + 30_000)
            )
        ),
        other => panic!("{other:?}"),
    }
    // Re-acquiring one's own lease renews it.
    let renewed = store.acquire_lease(&run.id, "host-a:1", TTL).await.unwrap();
    assert_eq!(renewed, lease(&run.id, "host-a:1", 59_000));
}

async fn a_lapsed_lease_is_taken_over_and_its_old_holder_loses_the_heartbeat(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    store.acquire_lease(&run.id, "host-a:1", TTL).await.unwrap();
    clock.advance(TTL);
    // Held means expires_at > now: at exactly the expiry it has lapsed.
    assert!(!store.lease_held(&run.id).await.unwrap());
    let taken = store.acquire_lease(&run.id, "host-b:2", TTL).await.unwrap();
    assert_eq!(taken, lease(&run.id, "host-b:2", 60_000));
    let err = store.heartbeat(&run.id, "host-a:1", TTL).await.unwrap_err();
    assert!(
        matches!(&err, Error::LeaseLost { holder, .. } if holder == "host-a:1"),
        "{err:?}"
    );
}

async fn a_heartbeat_extends_the_lease_even_after_it_lapsed_if_nobody_took_it(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    store.acquire_lease(&run.id, "host-a:1", TTL).await.unwrap();
    clock.advance(Duration::from_secs(10));
    let beat = store.heartbeat(&run.id, "host-a:1", TTL).await.unwrap();
    assert_eq!(beat, lease(&run.id, "host-a:1", 40_000));
    clock.advance(Duration::from_secs(45));
    let late = store.heartbeat(&run.id, "host-a:1", TTL).await.unwrap();
    assert_eq!(late, lease(&run.id, "host-a:1", 85_000));
}

async fn release_frees_only_the_holders_own_lease_and_is_idempotent(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    store.acquire_lease(&run.id, "host-a:1", TTL).await.unwrap();
    assert!(!store.release_lease(&run.id, "host-b:2").await.unwrap());
    assert!(store.lease_held(&run.id).await.unwrap());
    assert!(store.release_lease(&run.id, "host-a:1").await.unwrap());
    assert!(!store.release_lease(&run.id, "host-a:1").await.unwrap());
    assert!(!store.lease_held(&run.id).await.unwrap());
    let err = store.heartbeat(&run.id, "host-a:1", TTL).await.unwrap_err();
    assert_eq!(err.code(), "STORE_LEASE_LOST");
}

async fn leasing_an_unknown_run_or_for_no_time_is_refused(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let ghost = RunId::generate();
    let err = store.acquire_lease(&ghost, "h", TTL).await.unwrap_err();
    assert_eq!(err.code(), "STORE_RUN_NOT_FOUND");
    assert!(!store.lease_held(&ghost).await.unwrap());

    let run = store.create_run(review()).await.unwrap();
    for ttl in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_secs(366 * 86_400),
    ] {
        let err = store.acquire_lease(&run.id, "h", ttl).await.unwrap_err();
        assert!(
            matches!(&err, Error::InvalidLeaseTtl { ttl: t, max_days: 365 } if *t == ttl),
            "{err:?}"
        );
    }
}

async fn a_run_created_with_a_lease_is_leased_from_its_first_instant(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let run = store
        .create_run(review().lease("host-a:1", TTL))
        .await
        .unwrap();
    assert_eq!(
        store.liveness(&run.id).await.unwrap(),
        Liveness::Leased(lease(&run.id, "host-a:1", 30_000))
    );
}

/// Drives a fresh run to `status` through legal saves.
async fn run_in(store: &dyn Store, status: RunStatus) -> RunId {
    use iterion_store::InitialStatus;
    let initial = if status == RunStatus::Queued {
        InitialStatus::Queued
    } else {
        InitialStatus::Running
    };
    let mut run = store.create_run(review().status(initial)).await.unwrap();
    let path: &[RunStatus] = match status {
        RunStatus::Queued | RunStatus::Running => &[],
        RunStatus::Finished
        | RunStatus::Failed
        | RunStatus::FailedResumable
        | RunStatus::Cancelled
        | RunStatus::Paused => &[status][..],
    };
    for next in path {
        run.status = *next;
        store.save_run(&run, run.version).await.unwrap();
        run = store.get_run(&run.id).await.unwrap().unwrap();
    }
    assert_eq!(run.status, status);
    run.id
}

/// The reaper's predicate table (SANDBOX.md §12.1), against real store states.
async fn liveness_answers_the_reapers_question_for_every_state(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let reapable = |l: &Liveness| match l {
        Liveness::Leased(_) => false,
        Liveness::Absent => true,
        Liveness::Unleased { status } => status.is_terminal(),
    };

    let mut table = Vec::new();
    table.push((
        "absent".to_owned(),
        reapable(&store.liveness(&RunId::generate()).await.unwrap()),
    ));
    for status in RunStatus::ALL {
        let id = run_in(store.as_ref(), status).await;
        let unleased = store.liveness(&id).await.unwrap();
        assert_eq!(unleased, Liveness::Unleased { status });
        table.push((format!("{status}, no lease"), reapable(&unleased)));

        store.acquire_lease(&id, "host-a:1", TTL).await.unwrap();
        let leased = store.liveness(&id).await.unwrap();
        table.push((format!("{status}, leased"), reapable(&leased)));
        store.release_lease(&id, "host-a:1").await.unwrap();
    }
    // A lapsed lease counts as no lease.
    let id = run_in(store.as_ref(), RunStatus::Failed).await;
    store.acquire_lease(&id, "host-a:1", TTL).await.unwrap();
    clock.advance(TTL + Duration::from_millis(1));
    table.push((
        "failed, lapsed lease".into(),
        reapable(&store.liveness(&id).await.unwrap()),
    ));

    let want: Vec<(String, bool)> = [
        ("absent", true),
        ("queued, no lease", false),
        ("queued, leased", false),
        ("running, no lease", false),
        ("running, leased", false),
        ("finished, no lease", true),
        ("finished, leased", false),
        ("failed, no lease", true),
        ("failed, leased", false),
        ("failed_resumable, no lease", true),
        ("failed_resumable, leased", false),
        ("cancelled, no lease", true),
        ("cancelled, leased", false),
        ("paused, no lease", false),
        ("paused, leased", false),
        ("failed, lapsed lease", true),
    ]
    .into_iter()
    .map(|(s, b)| (s.to_owned(), b))
    .collect();
    assert_eq!(table, want);
}

on_both_backends!(
    a_free_run_can_be_leased_and_is_then_held,
    a_live_lease_refuses_another_holder_but_not_its_own,
    a_lapsed_lease_is_taken_over_and_its_old_holder_loses_the_heartbeat,
    a_heartbeat_extends_the_lease_even_after_it_lapsed_if_nobody_took_it,
    release_frees_only_the_holders_own_lease_and_is_idempotent,
    leasing_an_unknown_run_or_for_no_time_is_refused,
    a_run_created_with_a_lease_is_leased_from_its_first_instant,
    liveness_answers_the_reapers_question_for_every_state,
);

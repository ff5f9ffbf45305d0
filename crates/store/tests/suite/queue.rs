//! The run queue: `queued` runs claimed by runners, one claimer per run.

use iterion_store::ManualClock;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use iterion_store::{InitialStatus, Lease, RunId, RunStatus, Store, Timestamp};
use pretty_assertions::assert_eq;

use super::{T0, review};

const TTL: Duration = Duration::from_secs(30);

async fn a_claim_takes_the_oldest_queued_run_and_leases_it(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let running = store.create_run(review()).await.unwrap();
    let first = store
        .create_run(review().status(InitialStatus::Queued))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1));
    let second = store
        .create_run(review().status(InitialStatus::Queued))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1));

    let claim = store
        .claim_next_queued("runner-1", TTL)
        .await
        .unwrap()
        .unwrap();
    let mut want = first.clone();
    want.status = RunStatus::Running;
    want.deliveries = 1;
    want.version = 2;
    want.updated_at = Timestamp::from_millis(T0 + 2);
    assert_eq!(claim.run, want);
    assert_eq!(
        claim.lease,
        Lease {
            run_id: first.id.clone(),
            holder: "runner-1".into(),
            expires_at: Timestamp::from_millis(T0 + 2 + 30_000),
        }
    );
    assert_eq!(store.get_run(&first.id).await.unwrap(), Some(want));

    let next = store.claim_next_queued("runner-2", TTL).await.unwrap();
    assert_eq!(next.map(|c| c.run.id), Some(second.id));
    assert_eq!(
        store.claim_next_queued("runner-3", TTL).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .get_run(&running.id)
            .await
            .unwrap()
            .unwrap()
            .deliveries,
        0
    );
}

async fn a_redelivered_run_waits_for_its_delay_and_counts_the_delivery(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .create_run(review().status(InitialStatus::Queued))
        .await
        .unwrap();
    let mut run = store
        .claim_next_queued("runner-1", TTL)
        .await
        .unwrap()
        .unwrap()
        .run;

    // The runner hits a setup timeout: failed_resumable, then back on the queue for 120 s.
    run.status = RunStatus::FailedResumable;
    run.failure_code = Some("SANDBOX_SETUP_TIMEOUT".into());
    run.version = store.save_run(&run, run.version).await.unwrap();
    store.release_lease(&run.id, "runner-1").await.unwrap();
    run.status = RunStatus::Queued;
    run.failure_code = None;
    run.available_at = Some(Timestamp::from_millis(T0 + 120_000));
    store.save_run(&run, run.version).await.unwrap();

    clock.advance(Duration::from_secs(119));
    assert_eq!(
        store.claim_next_queued("runner-2", TTL).await.unwrap(),
        None
    );
    clock.advance(Duration::from_secs(1));
    let claim = store
        .claim_next_queued("runner-2", TTL)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (claim.run.id, claim.run.deliveries, claim.run.available_at),
        (run.id, 2, None)
    );
}

async fn a_queued_run_someone_leased_is_not_offered(store: Arc<dyn Store>, _clock: ManualClock) {
    let run = store
        .create_run(review().status(InitialStatus::Queued))
        .await
        .unwrap();
    store.acquire_lease(&run.id, "operator", TTL).await.unwrap();
    assert_eq!(
        store.claim_next_queued("runner-1", TTL).await.unwrap(),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_never_get_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let clock = super::clock();
    let mut created = BTreeSet::new();
    let first = super::file_store(dir.path(), &clock).await;
    for _ in 0..40 {
        let run = first
            .create_run(review().status(InitialStatus::Queued))
            .await
            .unwrap();
        created.insert(run.id);
    }
    let mut tasks = Vec::new();
    for n in 0..4 {
        let store: Arc<dyn Store> = Arc::new(super::file_store(dir.path(), &clock).await);
        tasks.push(tokio::spawn(async move {
            let mut mine: Vec<RunId> = Vec::new();
            while let Some(claim) = store
                .claim_next_queued(&format!("runner-{n}"), TTL)
                .await
                .unwrap()
            {
                mine.push(claim.run.id);
            }
            mine
        }));
    }
    let mut claimed = Vec::new();
    for task in tasks {
        claimed.extend(task.await.unwrap());
    }
    let unique: BTreeSet<RunId> = claimed.iter().cloned().collect();
    assert_eq!(claimed.len(), unique.len(), "a run was claimed twice");
    assert_eq!(unique, created);
}

on_both_backends!(
    a_claim_takes_the_oldest_queued_run_and_leases_it,
    a_redelivered_run_waits_for_its_delay_and_counts_the_delivery,
    a_queued_run_someone_leased_is_not_offered,
);

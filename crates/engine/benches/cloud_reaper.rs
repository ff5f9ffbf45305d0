//! One cloud reaper pass (SANDBOX.md §12.2) over 1,000 labelled objects in the FAKE Kubernetes
//! API server (`crates/sandbox-kubernetes/tests/support/fake_kube.rs`), judged by the real predicate against
//! a real SQLite file store: half the objects belong to finished runs (deleted), half to leased
//! running runs (kept). Goal (issue 9): one pass under 2 s. BENCHMARKS.md, "Cloud reaper".
//!
//! `cargo bench -p iterion-engine --bench cloud_reaper` (`-- --quick`: one repetition).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iterion_engine::reap_cloud;
use iterion_sandbox_kubernetes::KubeRsApi;
use iterion_store::{NewRun, RunStatus, SqliteOptions, SqliteStore, Store};

#[path = "../../sandbox-kubernetes/tests/support/fake_kube.rs"]
mod fake_kube;

use fake_kube::{FakeKube, Kind};

const OBJECTS: usize = 1_000;

fn labels(store_id: &str, run_id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("iterion.io/managed".to_owned(), "true".to_owned()),
        ("iterion.io/store".to_owned(), store_id.to_owned()),
        ("iterion.io/run-id".to_owned(), run_id.to_owned()),
    ])
}

async fn one_pass(store: &Arc<dyn Store>) -> (Duration, usize, usize) {
    let fake = FakeKube::start("iterion").await;
    let api = KubeRsApi::new(fake.client(), fake.namespace());
    let id = store.store_id().to_owned();
    // One run per (pod, secret, networkpolicy) triple, as the driver creates them.
    let kinds = [Kind::Pod, Kind::Secret, Kind::NetworkPolicy];
    for index in 0..OBJECTS.div_ceil(3) {
        let finished = index % 2 == 0;
        let new = NewRun::new("bench", "sha256:00", "bench.iter");
        let new = if finished {
            new
        } else {
            new.lease("runner-bench", Duration::from_secs(600))
        };
        let run = store.create_run(new).await.unwrap();
        if finished {
            let mut next = run.clone();
            next.status = RunStatus::Finished;
            store.save_run(&next, run.version).await.unwrap();
        }
        for (k, kind) in kinds.iter().enumerate() {
            if index * 3 + k < OBJECTS {
                fake.insert(
                    *kind,
                    &format!("obj-{index}-{k}"),
                    labels(&id, run.id.as_str()),
                );
            }
        }
    }
    let started = Instant::now();
    let report = reap_cloud(store.as_ref(), &api).await.unwrap();
    let elapsed = started.elapsed();
    (elapsed, report.deleted.len(), report.kept)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let repetitions = if quick { 1 } else { 5 };
        let mut times = Vec::new();
        for _ in 0..repetitions {
            let dir = tempfile::tempdir().unwrap();
            let store: Arc<dyn Store> = Arc::new(
                SqliteStore::open(dir.path().join("iterion.db"), SqliteOptions::default())
                    .await
                    .unwrap(),
            );
            let (elapsed, deleted, kept) = one_pass(&store).await;
            assert_eq!(deleted + kept, OBJECTS, "every object judged");
            println!(
                "pass over {OBJECTS} objects: {:>7.1} ms  (deleted {deleted}, kept {kept})",
                elapsed.as_secs_f64() * 1000.0
            );
            times.push(elapsed);
        }
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "median of {repetitions}: {:.1} ms (goal < 2000 ms): {}",
            median.as_secs_f64() * 1000.0,
            if median < Duration::from_secs(2) {
                "met"
            } else {
                "NOT met"
            }
        );
    });
}

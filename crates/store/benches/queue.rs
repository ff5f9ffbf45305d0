//! The run queue on PostgreSQL (ARCHITECTURE.md §5, decision 8): runs claimed per second by 4
//! concurrent runners, in two shapes side by side:
//!
//! - `claim`: claim only (`FOR NO KEY UPDATE SKIP LOCKED`, lease taken in the same transaction) —
//!   the queue's own throughput, the metric;
//! - `cycle`: claim, save the empty run `finished`, release the lease — what a runner does for a
//!   run with no work (three transactions).
//!
//! Goal (issue 9): ≥ 500 runs claimed/s. BENCHMARKS.md, "Run queue".
//!
//! `ITERION_IT_POSTGRES_URL=postgres://… cargo bench -p iterion-store --bench queue`
//! (`-- --quick`: one repetition of 500 runs). Each repetition uses a fresh schema.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use iterion_store::{InitialStatus, NewRun, PgOptions, PgStore, RunId, RunStatus, Store};

const RUNNERS: usize = 4;
const TTL: Duration = Duration::from_secs(30);

async fn one_repetition(url: &str, runs: usize, full_cycle: bool) -> f64 {
    let schema = format!("bench_{}", RunId::generate().as_str().replace('-', ""));
    let options = PgOptions::default().schema(&schema).unwrap().pool_size(8);
    let store: Arc<dyn Store> = Arc::new(PgStore::connect_with(url, options).await.unwrap());
    for _ in 0..runs {
        store
            .create_run(
                NewRun::new("bench", "sha256:00", "bench.iter").status(InitialStatus::Queued),
            )
            .await
            .unwrap();
    }
    let claimed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for runner in 0..RUNNERS {
        let (store, claimed) = (Arc::clone(&store), Arc::clone(&claimed));
        tasks.push(tokio::spawn(async move {
            let holder = format!("runner-{runner}");
            while let Some(claim) = store.claim_next_queued(&holder, TTL).await.unwrap() {
                if !full_cycle {
                    claimed.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let mut done = claim.run.clone();
                done.status = RunStatus::Finished;
                store.save_run(&done, claim.run.version).await.unwrap();
                store.release_lease(&claim.run.id, &holder).await.unwrap();
                claimed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(
        claimed.load(Ordering::Relaxed),
        runs,
        "every run claimed exactly once"
    );
    drop(store);
    drop_schema(url, &schema).await;
    runs as f64 / elapsed.as_secs_f64()
}

/// Drops a repetition's schema, so benchmarks leave nothing behind in the database.
async fn drop_schema(url: &str, schema: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    drop(client);
    let _ = connection.await;
}

fn main() {
    let Ok(url) = std::env::var("ITERION_IT_POSTGRES_URL") else {
        println!("set ITERION_IT_POSTGRES_URL=postgres://… to run the queue benchmark");
        return;
    };
    let quick = std::env::args().any(|a| a == "--quick");
    let (repetitions, runs) = if quick { (1, 500) } else { (5, 2_000) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for (shape, full_cycle) in [("claim", false), ("cycle", true)] {
            let mut rates = Vec::new();
            for _ in 0..repetitions {
                let rate = one_repetition(&url, runs, full_cycle).await;
                println!("{shape}: {RUNNERS} runners, {runs} empty runs: {rate:>7.0} runs/s");
                rates.push(rate);
            }
            rates.sort_by(f64::total_cmp);
            let median = rates[rates.len() / 2];
            println!(
                "{shape}: median of {repetitions}: {median:.0} runs/s (min {:.0}, max {:.0}; goal >= 500 claimed/s)",
                rates[0],
                rates[rates.len() - 1]
            );
        }
    });
}

//! The run queue on PostgreSQL (ARCHITECTURE.md §5, decision 8): runs claimed per second by 4
//! concurrent runners, in three shapes side by side (interleaved, one of each per repetition, so
//! a busy moment hits them alike):
//!
//! - `raw`: the baseline — the textbook queue pop, one
//!   `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id` per run on 4
//!   plain connections, no lease, no run decoding;
//! - `claim`: `Store::claim_next_queued` (one statement: the run picked with `FOR NO KEY UPDATE
//!   SKIP LOCKED`, its lease taken, the run row returned) — the metric;
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

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Raw,
    Claim,
    Cycle,
}

impl Shape {
    const ALL: [Self; 3] = [Self::Raw, Self::Claim, Self::Cycle];

    const fn name(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Claim => "claim",
            Self::Cycle => "cycle",
        }
    }
}

async fn one_repetition(url: &str, runs: usize, shape: Shape) -> f64 {
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
    let elapsed = if shape == Shape::Raw {
        raw_pops(url, &schema, runs).await
    } else {
        store_claims(&store, runs, shape == Shape::Cycle).await
    };
    drop(store);
    drop_schema(url, &schema).await;
    runs as f64 / elapsed.as_secs_f64()
}

/// The baseline: 4 plain connections popping the same table with the textbook statement.
async fn raw_pops(url: &str, schema: &str, runs: usize) -> Duration {
    let mut clients = Vec::new();
    for _ in 0..RUNNERS {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path TO {schema}"))
            .await
            .unwrap();
        clients.push(client);
    }
    let popped = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let popped = Arc::clone(&popped);
        tasks.push(tokio::spawn(async move {
            let pop = client
                .prepare(
                    "UPDATE runs SET status = 'running' WHERE id = (SELECT id FROM runs \
                     WHERE status = 'queued' ORDER BY created_at_ms, id LIMIT 1 \
                     FOR UPDATE SKIP LOCKED) RETURNING id",
                )
                .await
                .unwrap();
            while client.query_opt(&pop, &[]).await.unwrap().is_some() {
                popped.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(
        popped.load(Ordering::Relaxed),
        runs,
        "every run popped once"
    );
    elapsed
}

async fn store_claims(store: &Arc<dyn Store>, runs: usize, full_cycle: bool) -> Duration {
    let claimed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for runner in 0..RUNNERS {
        let (store, claimed) = (Arc::clone(store), Arc::clone(&claimed));
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
    elapsed
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
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); Shape::ALL.len()];
        for _ in 0..repetitions {
            for (i, shape) in Shape::ALL.into_iter().enumerate() {
                let rate = one_repetition(&url, runs, shape).await;
                println!(
                    "{:>5}: {RUNNERS} runners, {runs} empty runs: {rate:>7.0} runs/s",
                    shape.name()
                );
                rates[i].push(rate);
            }
        }
        let mut medians = Vec::new();
        for (i, shape) in Shape::ALL.into_iter().enumerate() {
            let r = &mut rates[i];
            r.sort_by(f64::total_cmp);
            let median = r[r.len() / 2];
            medians.push(median);
            println!(
                "{:>5}: median of {repetitions}: {median:.0} runs/s (min {:.0}, max {:.0})",
                shape.name(),
                r[0],
                r[r.len() - 1]
            );
        }
        println!(
            "claim / raw: {:.2}x  cycle / raw: {:.2}x  (goal: claim >= 500 runs/s)",
            medians[1] / medians[0],
            medians[2] / medians[0]
        );
    });
}

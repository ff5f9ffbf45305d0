//! Store benchmark: events appended per second, batched and unbatched, side by side in one run.
//!
//! `cargo bench -p iterion-store --bench store` (add `-- --quick` for a smoke run). Each case
//! appends to one run of a fresh file store in a temporary directory and reports the median rate
//! over its repetitions. The goal (issue 4) is ≥ 20,000 events/s batched. Results go in
//! BENCHMARKS.md, `## Store`.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iterion_store::{NewEvent, NewRun, SqliteOptions, SqliteStore, Store, Synchronous};
use serde_json::json;

/// One benchmark case.
struct Case {
    name: &'static str,
    /// A file in a temporary directory, or memory (no I/O: the per-call overhead alone).
    in_memory: bool,
    synchronous: Synchronous,
    /// Events per `append_events` call; 0 = one `append_event` call per event.
    batch: usize,
    /// Concurrent appending tasks (each appends `events / writers`).
    writers: usize,
    events: usize,
}

/// A typical `node_finished` payload (~200 bytes of JSON).
fn payload(i: usize) -> serde_json::Value {
    json!({
        "node": format!("node_{}", i % 20),
        "duration_ms": 1234,
        "output": {"ok": true, "summary": "lint passed with 0 warnings and 0 errors", "files": 17},
        "usage": {"input_tokens": 1500, "output_tokens": 320},
    })
}

async fn run_case(case: &Case) -> Result<f64, Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let options = SqliteOptions::default().synchronous(case.synchronous);
    let store = Arc::new(if case.in_memory {
        SqliteStore::in_memory(options).await?
    } else {
        SqliteStore::open(dir.path().join("iterion.db"), options).await?
    });
    let run = store
        .create_run(NewRun::new("bench", "h", "bench.iter"))
        .await?;
    let per_writer = case.events / case.writers;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..case.writers {
        let (store, id, batch) = (Arc::clone(&store), run.id.clone(), case.batch);
        tasks.push(tokio::spawn(async move {
            if batch == 0 {
                for i in 0..per_writer {
                    store
                        .append_event(&id, NewEvent::new("node_finished", payload(i)))
                        .await?;
                }
            } else {
                for chunk in (0..per_writer).collect::<Vec<_>>().chunks(batch) {
                    let events = chunk
                        .iter()
                        .map(|i| NewEvent::new("node_finished", payload(*i)))
                        .collect();
                    store.append_events(&id, events).await?;
                }
            }
            Ok::<(), iterion_store::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let elapsed = started.elapsed();
    let stored = store.events(&run.id, 0).await?.len();
    if stored != per_writer * case.writers {
        return Err(format!("{}: stored {stored} events", case.name).into());
    }
    Ok(stored as f64 / elapsed.max(Duration::from_nanos(1)).as_secs_f64())
}

/// The floor under every unbatched call: one round trip through tokio's blocking pool, with no
/// SQLite work at all.
async fn blocking_round_trips(n: usize) -> Result<f64, Box<dyn Error>> {
    let started = Instant::now();
    for _ in 0..n {
        tokio::task::spawn_blocking(|| ()).await?;
    }
    Ok(n as f64 / started.elapsed().max(Duration::from_nanos(1)).as_secs_f64())
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = |n: usize| if quick { (n / 20).max(50) } else { n };
    let repetitions = if quick { 1 } else { 5 };
    use Synchronous::{Full, Normal};
    // (name, in memory, synchronous, batch size or 0, writers, events)
    let table = [
        ("unbatched, 1 writer, in memory", true, Normal, 0, 1, 20_000),
        (
            "unbatched, 1 writer, synchronous=NORMAL",
            false,
            Normal,
            0,
            1,
            20_000,
        ),
        (
            "unbatched, 4 writers, synchronous=NORMAL",
            false,
            Normal,
            0,
            4,
            20_000,
        ),
        (
            "batch of 10, synchronous=NORMAL",
            false,
            Normal,
            10,
            1,
            100_000,
        ),
        (
            "batch of 100, synchronous=NORMAL",
            false,
            Normal,
            100,
            1,
            200_000,
        ),
        (
            "batch of 1000, synchronous=NORMAL",
            false,
            Normal,
            1000,
            1,
            200_000,
        ),
        (
            "unbatched, 1 writer, synchronous=FULL",
            false,
            Full,
            0,
            1,
            2_000,
        ),
        (
            "batch of 100, synchronous=FULL",
            false,
            Full,
            100,
            1,
            100_000,
        ),
    ];
    let cases = table.map(
        |(name, in_memory, synchronous, batch, writers, events)| Case {
            name,
            in_memory,
            synchronous,
            batch,
            writers,
            events: scale(events),
        },
    );
    println!("iterion-store: events appended per second (median of {repetitions})");
    let mut rates = Vec::new();
    for _ in 0..repetitions {
        rates.push(blocking_round_trips(scale(20_000)).await?);
    }
    println!(
        "{:<45} {:>10.0} calls/s   (baseline: spawn_blocking alone)",
        "blocking-pool round trip, no SQLite",
        median(rates)
    );
    for case in &cases {
        let mut rates = Vec::new();
        for _ in 0..repetitions {
            rates.push(run_case(case).await?);
        }
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(0.0, f64::max);
        println!(
            "{:<45} {:>10.0} events/s  (min {:.0}, max {:.0}; {} events)",
            case.name,
            median(rates),
            min,
            max,
            case.events
        );
    }
    Ok(())
}

//! `iterion run` against the engine's CLI, side by side (BENCHMARKS.md "## iterion run").
//!
//! 1. A one-tool-node sandboxed workflow, `iterion run one.iter`, against
//!    `docker run --rm IMAGE sh -c CMD`, interleaved, `--runs N` times (default 20):
//!    the median of each and their ratio (goal ≤ 1.2×).
//! 2. A 20-node workflow: per-node overhead, `(median(20 nodes) − median(1 node)) / 19`, against
//!    a raw `docker exec CONTAINER sh -c CMD` into one running container; and the same 20-node
//!    run with the exec agent off (`ITERION_SANDBOX_EXEC_AGENT=0`: every node a driver exec),
//!    interleaved with the others.
//!
//! Needs a running engine and the test images (scripts/build-test-images.sh). Not part of the
//! test suite: `cargo bench -p iterion --bench run`.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const IMAGE: &str = "iterion-test/debian:bookworm";
const CMD: &str = "echo ok";

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn timed(cmd: &mut Command) -> Duration {
    let start = Instant::now();
    let out = cmd.output().expect("spawn");
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

fn workflow(nodes: usize) -> String {
    let mut text = String::new();
    for i in 0..nodes {
        text.push_str(&format!("tool n{i}:\n  command: `{CMD}`\n\n"));
    }
    text.push_str(&format!(
        "workflow bench:\n  entry: n0\n  sandbox:\n    image: \"{IMAGE}\"\n"
    ));
    for i in 0..nodes {
        let to = if i + 1 == nodes {
            "done".to_owned()
        } else {
            format!("n{}", i + 1)
        };
        text.push_str(&format!("  n{i} -> {to}\n"));
    }
    text
}

fn iterion(home: &Path, ws: &Path, file: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_iterion"));
    cmd.args(["run", file])
        .env("ITERION_HOME", home)
        .env("RUST_LOG", "error")
        .current_dir(ws);
    cmd
}

fn main() {
    // `cargo bench -p iterion --bench run -- --runs N`; cargo's own `--bench` flag is ignored.
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws.path())
        .status()
        .unwrap();
    std::fs::write(ws.path().join("one.iter"), workflow(1)).unwrap();
    std::fs::write(ws.path().join("twenty.iter"), workflow(20)).unwrap();

    // Warm up both paths (page cache, the store's file, the engine's image cache).
    timed(&mut iterion(home.path(), ws.path(), "one.iter"));
    timed(Command::new("docker").args(["run", "--rm", IMAGE, "sh", "-c", CMD]));

    let (mut ours, mut raw, mut twenty) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_off, mut twenty_off) = (Vec::new(), Vec::new());
    let agent_off = |file: &str| {
        let mut cmd = iterion(home.path(), ws.path(), file);
        cmd.env("ITERION_SANDBOX_EXEC_AGENT", "0");
        cmd
    };
    for _ in 0..runs {
        ours.push(timed(&mut iterion(home.path(), ws.path(), "one.iter")));
        raw.push(timed(
            Command::new("docker").args(["run", "--rm", IMAGE, "sh", "-c", CMD]),
        ));
        twenty.push(timed(&mut iterion(home.path(), ws.path(), "twenty.iter")));
        ours_off.push(timed(&mut agent_off("one.iter")));
        twenty_off.push(timed(&mut agent_off("twenty.iter")));
    }

    // Raw docker exec into one long-lived container.
    let id = String::from_utf8(
        Command::new("docker")
            .args([
                "run",
                "-d",
                "--rm",
                "--entrypoint",
                "sleep",
                IMAGE,
                "infinity",
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    let mut exec = Vec::new();
    for _ in 0..runs {
        exec.push(timed(
            Command::new("docker").args(["exec", &id, "sh", "-c", CMD]),
        ));
    }
    Command::new("docker")
        .args(["rm", "-f", &id])
        .output()
        .unwrap();

    let (ours, raw, twenty, exec) = (median(ours), median(raw), median(twenty), median(exec));
    let (ours_off, twenty_off) = (median(ours_off), median(twenty_off));
    let per_node = twenty.saturating_sub(ours) / 19;
    let per_node_off = twenty_off.saturating_sub(ours_off) / 19;
    println!("runs: {runs} (interleaved)");
    println!(
        "| one tool node, sandboxed | `iterion run` {:.0} ms | `docker run --rm` {:.0} ms | ratio {:.2}× |",
        ms(ours),
        ms(raw),
        ms(ours) / ms(raw)
    );
    println!(
        "| 20 tool nodes | `iterion run` {:.0} ms | per node {:.1} ms | `docker exec` {:.1} ms | ratio {:.2}× |",
        ms(twenty),
        ms(per_node),
        ms(exec),
        ms(per_node) / ms(exec)
    );
    println!(
        "| exec agent off | one node {:.0} ms | 20 nodes {:.0} ms | per node {:.1} ms | agent on / off per node {:.2}× |",
        ms(ours_off),
        ms(twenty_off),
        ms(per_node_off),
        ms(per_node) / ms(per_node_off)
    );
}

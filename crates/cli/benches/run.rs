//! `iterion run` on every local driver against the engine's CLI, side by side in one run,
//! interleaved (BENCHMARKS.md "## iterion run").
//!
//! Each round runs, in a rotating order so that drift on a shared machine hits every series:
//!
//! - a one-tool-node sandboxed workflow on the docker driver, `iterion run one.iter`;
//! - the same workflow without `image:` on the embedded namespace driver (no engine is asked:
//!   `DOCKER_HOST` points at nothing, `ITERION_SANDBOX_DRIVER=namespace`);
//! - `docker run --rm IMAGE sh -c CMD`, the baseline of both (goals ≤ 1.0× docker, ≤ 0.1×
//!   namespace);
//! - a 20-node workflow on each driver: per node `(median(20 nodes) − median(1 node)) / 19`
//!   (goal ≤ 3 ms), against a raw `docker exec CONTAINER sh -c CMD` into one running container;
//! - the docker runs again with the exec agent off (`ITERION_SANDBOX_EXEC_AGENT=0`).
//!
//! Then the memory an idle sandbox holds on the host, per driver, while a node sleeps: docker,
//! the container's cgroup (`docker stats`) plus its `containerd-shim`'s PSS; namespace, the PSS of
//! every process the run keeps besides the node (the sandbox's init, the exec agent, the
//! bridge).
//!
//! - the one-node docker workflow with a warm pool (`ITERION_SANDBOX_WARM=1`,
//!   `ITERION_SANDBOX_HOST_STATE=none`, a store of its own so the other series' reaper passes do
//!   not touch its entries): each run claims the entry the previous one's detached filler left
//!   (goal ≤ 0.3× `docker run --rm`); the bench counts the rounds that claimed.
//!
//! Needs a running engine and the test images (scripts/build-test-images.sh). Not part of the
//! test suite: `cargo bench -p iterion --bench run -- [--runs N] [--driver namespace|docker] [--series KEY,…]`
//! (default 20 rounds, every series). `--driver namespace` runs the namespace series and the
//! `docker run --rm` baseline only (and the namespace memory row); `--driver docker` leaves the namespace
//! series out.
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

fn workflow(nodes: usize, namespace: bool, command: &str) -> String {
    let mut text = String::new();
    for i in 0..nodes {
        text.push_str(&format!("tool n{i}:\n  command: `{command}`\n\n"));
    }
    if namespace {
        text.push_str("workflow bench:\n  entry: n0\n  sandbox: auto\n");
    } else {
        text.push_str(&format!(
            "workflow bench:\n  entry: n0\n  sandbox:\n    image: \"{IMAGE}\"\n"
        ));
    }
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

fn iterion(home: &Path, ws: &Path, file: &str, namespace: bool) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_iterion"));
    cmd.args(["run", file])
        .env("ITERION_HOME", home)
        .env("RUST_LOG", "error")
        .current_dir(ws);
    if namespace {
        // No engine answers: the factory falls through docker and podman to the namespace driver.
        cmd.env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .env("XDG_RUNTIME_DIR", home)
            .env_remove("CONTAINER_HOST")
            .env("ITERION_SANDBOX_DRIVER", "namespace");
    }
    cmd
}

/// `/proc/<pid>/smaps_rollup`'s `Pss:` in KiB (0 when unreadable).
fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("Pss:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// Every live process: `(pid, ppid, comm, cmdline)`.
fn processes() -> Vec<(u32, u32, String, String)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
            .unwrap_or_default();
        all.push((pid, ppid, comm, cmdline));
    }
    all
}

/// The PSS (MiB) of every descendant of `root` but the node's `sleep`.
fn descendants_pss_mib(root: u32) -> f64 {
    let all = processes();
    let mut family = vec![root];
    let mut kib = 0;
    while let Some(parent) = family.pop() {
        for (pid, ppid, comm, _) in &all {
            if *ppid == parent {
                family.push(*pid);
                if comm != "sleep" {
                    kib += pss_kib(*pid);
                }
            }
        }
    }
    kib as f64 / 1024.0
}

/// `docker stats`' memory of `id` in MiB.
fn container_mib(id: &str) -> f64 {
    let out = Command::new("docker")
        .args(["stats", "--no-stream", "--format", "{{.MemUsage}}", id])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let used = text.split('/').next().unwrap_or("").trim().to_owned();
    let (number, unit) = used.split_at(
        used.find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(used.len()),
    );
    let value: f64 = number.trim().parse().unwrap_or(0.0);
    match unit {
        "KiB" | "kB" => value / 1024.0,
        "GiB" | "GB" => value * 1024.0,
        "B" => value / 1024.0 / 1024.0,
        _ => value,
    }
}

/// The memory an idle sandbox holds on the host, in MiB, measured while `idle.iter`'s node sleeps.
fn idle_memory(home: &Path, ws: &Path, namespace: bool) -> String {
    let mut child = iterion(home, ws, "idle.iter", namespace)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The node sleeps 8 s; the sandbox is up well before 4 s.
    std::thread::sleep(Duration::from_secs(4));
    let report = if namespace {
        format!("{:.1} MiB PSS", descendants_pss_mib(child.id()))
    } else {
        let ids = Command::new("docker")
            .args([
                "ps",
                "-q",
                "--no-trunc",
                "--filter",
                "label=iterion.io/managed=true",
            ])
            .output()
            .unwrap();
        let ids = String::from_utf8_lossy(&ids.stdout).into_owned();
        // Ours is the one whose workspace is this bench's.
        let ours = ids.lines().find(|id| {
            let out = Command::new("docker")
                .args(["inspect", "--format", "{{.Config.WorkingDir}}", id])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim() == ws.to_string_lossy()
        });
        match ours {
            None => "no container found".to_owned(),
            Some(id) => {
                let shim: u64 = processes()
                    .iter()
                    .filter(|(_, _, comm, cmdline)| {
                        comm.starts_with("containerd-shim") && cmdline.contains(id)
                    })
                    .map(|(pid, ..)| pss_kib(*pid))
                    .sum();
                format!(
                    "{:.1} MiB cgroup + {:.1} MiB shim PSS",
                    container_mib(id),
                    shim as f64 / 1024.0
                )
            }
        }
    };
    child.wait().unwrap();
    report
}

/// Waits until no `iterion __warm-fill` runs (at most 30 s).
fn settle_fillers() {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let out = Command::new("pgrep")
            .args(["-f", "iterion __warm-fill"])
            .output()
            .unwrap();
        if out.stdout.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many runs of the store under `home` started on a claimed warm entry (their run log says
/// `warm=claimed`).
fn claimed_runs(home: &Path) -> usize {
    use iterion_store::{RunQuery, SqliteOptions, SqliteStore, Store};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&home.join("iterion.db"), SqliteOptions::default())
            .await
            .unwrap();
        let mut claimed = 0;
        for run in store.list_runs(&RunQuery::newest(10_000)).await.unwrap() {
            let logs = store.logs(&run.id, 0).await.unwrap();
            if logs
                .iter()
                .any(|l| l.line.starts_with("sandbox active:") && l.line.ends_with("warm=claimed"))
            {
                claimed += 1;
            }
        }
        claimed
    })
}

/// The `--series` keys, in the order of `SERIES`.
const SERIES_KEYS: [&str; 9] = [
    "one",
    "ns-one",
    "run-rm",
    "twenty",
    "ns-twenty",
    "one-off",
    "twenty-off",
    "exec",
    "warm",
];

fn main() {
    // `cargo bench -p iterion --bench run -- --runs N`; cargo's own `--bench` flag is ignored.
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let only: Option<String> = args
        .iter()
        .position(|a| a == "--driver")
        .and_then(|i| args.get(i + 1))
        .cloned();
    assert!(
        matches!(only.as_deref(), None | Some("namespace" | "docker")),
        "--driver takes namespace or docker"
    );
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    // The workspace is canonical, as the driver binds it.
    let ws_path = ws.path().canonicalize().unwrap();
    Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws_path)
        .status()
        .unwrap();
    let write = |name: &str, text: String| std::fs::write(ws_path.join(name), text).unwrap();
    write("one.iter", workflow(1, false, CMD));
    write("twenty.iter", workflow(20, false, CMD));
    write("one_ns.iter", workflow(1, true, CMD));
    write("twenty_ns.iter", workflow(20, true, CMD));

    let h = home.path();
    let w = ws_path.as_path();
    // `--series KEY,KEY…` keeps only those series (keys: [`SERIES_KEYS`]); the memory rows
    // then run only with their driver's one-node series.
    let picked: Option<Vec<usize>> = args
        .iter()
        .position(|a| a == "--series")
        .and_then(|i| args.get(i + 1))
        .map(|list| {
            list.split(',')
                .map(|key| {
                    SERIES_KEYS
                        .iter()
                        .position(|k| *k == key.trim())
                        .unwrap_or_else(|| {
                            panic!("--series: {key:?} is not one of {SERIES_KEYS:?}")
                        })
                })
                .collect()
        });
    let wanted = |series: usize| {
        let by_driver = match only.as_deref() {
            // The namespace series and their baseline.
            Some("namespace") => matches!(series, 1 | 2 | 4),
            Some(_) => !matches!(series, 1 | 4),
            None => true,
        };
        by_driver && picked.as_ref().is_none_or(|keys| keys.contains(&series))
    };
    // Warm up every path (page cache, the store's file, the engine's image cache).
    if wanted(0) {
        timed(&mut iterion(h, w, "one.iter", false));
    }
    if wanted(1) {
        timed(&mut iterion(h, w, "one_ns.iter", true));
    }
    if wanted(2) {
        timed(Command::new("docker").args(["run", "--rm", IMAGE, "sh", "-c", CMD]));
    }

    // A long-lived container for the raw `docker exec` baseline.
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

    // The warm series' own store; its first run teaches the pool its shape.
    let warm_home = tempfile::tempdir().unwrap();
    let warm = |cmd: &mut Command| {
        cmd.env("ITERION_HOME", warm_home.path())
            .env("ITERION_SANDBOX_WARM", "1")
            .env("ITERION_SANDBOX_HOST_STATE", "none");
    };
    if wanted(8) {
        let mut cmd = iterion(h, w, "one.iter", false);
        warm(&mut cmd);
        timed(&mut cmd);
        settle_fillers();
    }

    const SERIES: [&str; 9] = [
        "docker one",
        "namespace one",
        "docker run --rm",
        "docker twenty",
        "namespace twenty",
        "docker one agent-off",
        "docker twenty agent-off",
        "docker exec",
        "docker one warm",
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); SERIES.len()];
    for round in 0..runs {
        for k in 0..SERIES.len() {
            let series = (k + round) % SERIES.len();
            if !wanted(series) {
                continue;
            }
            let took = match series {
                0 => timed(&mut iterion(h, w, "one.iter", false)),
                1 => timed(&mut iterion(h, w, "one_ns.iter", true)),
                2 => timed(Command::new("docker").args(["run", "--rm", IMAGE, "sh", "-c", CMD])),
                3 => timed(&mut iterion(h, w, "twenty.iter", false)),
                4 => timed(&mut iterion(h, w, "twenty_ns.iter", true)),
                5 => timed(iterion(h, w, "one.iter", false).env("ITERION_SANDBOX_EXEC_AGENT", "0")),
                6 => timed(
                    iterion(h, w, "twenty.iter", false).env("ITERION_SANDBOX_EXEC_AGENT", "0"),
                ),
                7 => timed(Command::new("docker").args(["exec", &id, "sh", "-c", CMD])),
                _ => {
                    let mut cmd = iterion(h, w, "one.iter", false);
                    warm(&mut cmd);
                    let took = timed(&mut cmd);
                    // Its filler (the handed-off removal, the refill) is not timed, and must not
                    // land on the next series either.
                    settle_fillers();
                    took
                }
            };
            samples[series].push(took);
        }
    }
    Command::new("docker")
        .args(["rm", "-f", &id])
        .output()
        .unwrap();

    write("idle.iter", workflow(1, false, "sleep 8"));
    write("idle_ns.iter", workflow(1, true, "sleep 8"));
    let docker_idle = if wanted(0) {
        idle_memory(h, w, false)
    } else {
        "not measured".to_owned()
    };
    std::fs::rename(ws_path.join("idle_ns.iter"), ws_path.join("idle.iter")).unwrap();
    let namespace_idle = if wanted(1) {
        idle_memory(h, w, true)
    } else {
        "not measured".to_owned()
    };

    let warm_claims = claimed_runs(warm_home.path());
    let m: Vec<Duration> = samples
        .into_iter()
        .map(|xs| {
            if xs.is_empty() {
                Duration::ZERO
            } else {
                median(xs)
            }
        })
        .collect();
    let per_node = |twenty: Duration, one: Duration| twenty.saturating_sub(one) / 19;
    let (docker_node, ns_node, off_node) = (
        per_node(m[3], m[0]),
        per_node(m[4], m[1]),
        per_node(m[6], m[5]),
    );
    println!("runs: {runs} per series, interleaved (medians)");
    println!("| what | time | baseline | ratio | goal |");
    println!("|---|---|---|---|---|");
    println!(
        "| one tool node, namespace driver | {:.0} ms | `docker run --rm` {:.0} ms | {:.2}× | ≤ 0.1× |",
        ms(m[1]),
        ms(m[2]),
        ms(m[1]) / ms(m[2])
    );
    println!(
        "| one tool node, docker driver | {:.0} ms | `docker run --rm` {:.0} ms | {:.2}× | ≤ 1.0× |",
        ms(m[0]),
        ms(m[2]),
        ms(m[0]) / ms(m[2])
    );
    println!(
        "| one tool node, docker driver, warm pool ({warm_claims} of {} runs claimed) | {:.0} ms | `docker run --rm` {:.0} ms | {:.2}× | ≤ 0.3× |",
        runs + 1,
        ms(m[8]),
        ms(m[2]),
        ms(m[8]) / ms(m[2])
    );
    println!(
        "| one tool node, docker, exec agent off | {:.0} ms | `docker run --rm` {:.0} ms | {:.2}× | |",
        ms(m[5]),
        ms(m[2]),
        ms(m[5]) / ms(m[2])
    );
    println!(
        "| per node of 20, namespace driver | {:.1} ms | `docker exec` {:.1} ms | {:.2}× | ≤ 3 ms |",
        ms(ns_node),
        ms(m[7]),
        ms(ns_node) / ms(m[7])
    );
    println!(
        "| per node of 20, docker driver | {:.1} ms | `docker exec` {:.1} ms | {:.2}× | ≤ 3 ms |",
        ms(docker_node),
        ms(m[7]),
        ms(docker_node) / ms(m[7])
    );
    println!(
        "| per node of 20, docker, exec agent off | {:.1} ms | `docker exec` {:.1} ms | {:.2}× | |",
        ms(off_node),
        ms(m[7]),
        ms(off_node) / ms(m[7])
    );
    println!(
        "| 20 nodes, whole run | docker {:.0} ms, namespace {:.0} ms, docker agent off {:.0} ms | | | |",
        ms(m[3]),
        ms(m[4]),
        ms(m[6])
    );
    println!(
        "| idle sandbox, host memory | docker: {docker_idle}; namespace: {namespace_idle} | | | reported |"
    );
}

//! `iterion run --submit` and `iterion runner` as binaries (ARCHITECTURE.md §4): submit queues
//! and prints the id (exit 0, nothing runs); a runner takes every queued run and finishes it
//! under `ITERION_SANDBOX_OVERRIDE=none` (no sandbox, no reaper); SIGTERM stops it with exit 0.
//! On the SQLite store of a private home, so no other test's runs are in its queue.

use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use iterion_store::RunStatus;
use pretty_assertions::assert_eq;

use crate::suite::support::{Env, stderr_of};

const FLOW: &str = "tool greet:\n  command: `echo '{\"ok\": true}'`\n\nworkflow fleet:\n  entry: greet\n  greet -> done\n";

#[test]
fn submitted_runs_are_queued_then_a_runner_finishes_them_and_stops_on_sigterm() {
    let env = Env::new();
    env.write("fleet.iter", FLOW);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let out = env
            .cmd()
            .args(["run", "--submit", "--sandbox", "none", "fleet.iter"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        ids.push(String::from_utf8(out.stdout).unwrap().trim().to_owned());
    }
    let queued: Vec<(String, RunStatus)> = env
        .runs()
        .into_iter()
        .rev()
        .map(|r| (r.id.as_str().to_owned(), r.status))
        .collect();
    assert_eq!(
        queued,
        ids.iter()
            .map(|id| (id.clone(), RunStatus::Queued))
            .collect::<Vec<_>>()
    );

    let mut runner = env
        .std_cmd()
        .env("ITERION_SANDBOX_OVERRIDE", "none")
        .arg("runner")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.runs().iter().any(|r| r.status != RunStatus::Finished) {
        assert!(Instant::now() < deadline, "{:#?}", env.runs());
        std::thread::sleep(Duration::from_millis(100));
    }
    let ok = StdCommand::new("kill")
        .args(["-TERM", &runner.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = runner.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "runner ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = runner.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("no sandbox, no reaper"), "{err}");
    assert!(err.contains("stopped after 2 run(s)"), "{err}");
}

#[test]
fn a_cloud_runner_with_a_malformed_scheduling_policy_does_not_start() {
    let env = Env::new();
    let out = env
        .cmd()
        .env("ITERION_MODE", "cloud")
        .env("ITERION_SANDBOX_K8S_SPREAD", "zone")
        .arg("runner")
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ITERION_SANDBOX_K8S_SPREAD=\"zone\""), "{err}");
}

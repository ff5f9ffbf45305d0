//! Faults (issue 4, "Bad input and faults"): the container killed mid-run, Ctrl-C during a node
//! and during setup, and SIGKILL of iterion mid-run (the next `iterion run` recovers the run and
//! reaps its orphan container).
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::suite::support::{Env, IMAGE, containers_of, docker_or_skip, first, kinds};

fn sleeping(extra: &str) -> String {
    format!(
        "tool nap:\n  command: `sleep 60`\n\nworkflow s:\n  entry: nap\n  sandbox:\n    image: \"{IMAGE}\"\n{extra}  nap -> done\n"
    )
}

fn signal(pid: u32, sig: &str) {
    let ok = StdCommand::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn docker_a_container_killed_mid_run_fails_the_node_and_teardown_still_runs() {
    if !docker_or_skip("cli::faults::docker_a_container_killed_mid_run") {
        return;
    }
    let env = Env::new();
    // The tool marks that its process runs: `node_started` comes before the exec starts, and a
    // kill in between is a failed exec (126), not a killed process (137).
    env.write(
        "s.iter",
        &sleeping("").replace("`sleep 60`", "`touch nap.started; sleep 60`"),
    );
    let child = env.spawn(&["run", "s.iter"]);
    let (_, events) = env.wait_for_event("node_started", 60);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !env.path("nap.started").exists() {
        assert!(Instant::now() < deadline, "the tool never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let id = first(&events, "sandbox_started").unwrap()["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    StdCommand::new("docker")
        .args(["kill", &id])
        .output()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let run = env.only_run();
    let events = env.events(&run);
    let failed = first(&events, "node_failed").unwrap();
    assert_eq!(
        (&failed["node"], &failed["code"], &failed["exit_code"]),
        (&json!("nap"), &json!("EXECUTION_FAILED"), &json!(137))
    );
    assert_eq!(
        (run.status.as_str(), run.failure_code.as_deref()),
        ("failed_resumable", Some("EXECUTION_FAILED"))
    );
    assert_eq!(kinds(&events).last(), Some(&"run_failed"));
    let message = run.failure_message.unwrap_or_default();
    assert!(
        message.contains(
            "the sandbox container is no longer running (killed or removed outside iterion)"
        ),
        "{message}"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_ctrl_c_during_a_node_interrupts_the_run_resumably_and_removes_the_container() {
    if !docker_or_skip("cli::faults::docker_ctrl_c_during_a_node") {
        return;
    }
    let env = Env::new();
    env.write("s.iter", &sleeping(""));
    let child = env.spawn(&["run", "s.iter"]);
    env.wait_for_event("node_started", 60);
    let started = Instant::now();
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "teardown took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(1));
    let run = env.only_run();
    // Ctrl-C is an interrupt, as SIGTERM is: the run can be resumed (issue 19).
    assert_eq!(
        (run.status.as_str(), run.failure_code.as_deref()),
        ("failed_resumable", Some("INTERRUPTED"))
    );
    let events = env.events(&run);
    assert_eq!(
        first(&events, "run_failed").map(|d| (d["code"].clone(), d["resumable"].clone())),
        Some((json!("INTERRUPTED"), json!(true)))
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_a_second_ctrl_c_during_post_create_cancels_and_leaves_no_container() {
    if !docker_or_skip("cli::faults::docker_ctrl_c_during_post_create") {
        return;
    }
    let env = Env::new();
    env.write("s.iter", &sleeping("    post_create: \"sleep 60\"\n"));
    let child = env.spawn(&["run", "s.iter"]);
    // The container exists once the run is in post_create.
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.containers().is_empty() {
        assert!(Instant::now() < deadline, "no container appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The first Ctrl-C interrupts; the second, while the first is being handled, cancels.
    signal(child.id(), "-INT");
    std::thread::sleep(Duration::from_millis(100));
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let run = env.only_run();
    assert_eq!(
        (run.status.as_str(), run.failure_code.as_deref()),
        ("cancelled", Some("CANCELLED")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = env.events(&run);
    assert!(!kinds(&events).contains(&"node_started"));
    assert_eq!(
        first(&events, "run_cancelled").map(|d| d["phase"].clone()),
        Some(json!("sandbox setup"))
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_sigkill_mid_run_leaves_an_orphan_that_the_next_run_reaps() {
    if !docker_or_skip("cli::faults::docker_sigkill_mid_run") {
        return;
    }
    let env = Env::new();
    env.write("s.iter", &sleeping(""));
    env.write(
        "quick.iter",
        "tool a:\n  command: `true`\n\nworkflow q:\n  entry: a\n  a -> done\n",
    );
    let mut child = env.spawn(&["run", "s.iter"]);
    let (killed, _) = env.wait_for_event("node_started", 60);
    signal(child.id(), "-KILL");
    child.wait().unwrap();
    let store_id = env.store_id().unwrap();
    assert_eq!(containers_of(&store_id).len(), 1, "the orphan is there");
    // The child inherits this process's XDG_RUNTIME_DIR: its runtime root is computed from it.
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(|dir| ("XDG_RUNTIME_DIR", dir));
    let run_dir = iterion_engine::runtime_root(&iterion_vocab::Environment::from_pairs(xdg))
        .join(killed.id.as_str());
    assert!(run_dir.exists(), "{} exists", run_dir.display());

    // While the dead process's lease is still live, the reaper keeps the container
    // (liveness first) and the run stays `running`.
    env.cmd()
        .args(["run", "quick.iter", "--sandbox", "none"])
        .assert()
        .code(0);
    let old = env.runs().into_iter().find(|r| r.id == killed.id).unwrap();
    if old.status.as_str() == "running" {
        assert_eq!(
            containers_of(&store_id).len(),
            1,
            "a leased run keeps its container"
        );
    }

    // Once the lease lapses (30 s TTL), the next run recovers the run and reaps the orphan.
    std::thread::sleep(Duration::from_secs(31));
    env.cmd()
        .args(["run", "quick.iter", "--sandbox", "none"])
        .assert()
        .code(0);
    let old = env.runs().into_iter().find(|r| r.id == killed.id).unwrap();
    assert_eq!(
        (old.status.as_str(), old.failure_code.as_deref()),
        ("failed_resumable", Some("INTERRUPTED"))
    );
    let events = env.events(&old);
    assert_eq!(
        first(&events, "run_failed").map(|d| (d["code"].clone(), d["resumable"].clone())),
        Some((json!("INTERRUPTED"), json!(true)))
    );
    assert_eq!(containers_of(&store_id), Vec::<String>::new());
    assert!(!run_dir.exists(), "{} was reaped", run_dir.display());
}

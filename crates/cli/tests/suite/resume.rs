//! Resumable setup failures and `iterion resume` (SANDBOX.md §16.4, §9.2).
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

#[test]
fn docker_a_setup_timeout_is_resumable_and_resume_finishes_the_run() {
    if !docker_or_skip("cli::resume::docker_a_setup_timeout_is_resumable") {
        return;
    }
    let env = Env::new();
    env.write(
        "slow.iter",
        &format!(
            "tool probe:\n  command: `echo ok`\n\nworkflow slow:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    post_create: \"sleep 4\"\n  probe -> done\n"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "slow.iter"])
        .env("ITERION_SANDBOX_POST_CREATE_TIMEOUT", "2s")
        .assert()
        .code(1)
        .get_output()
        .clone();
    let run = env.only_run();
    assert_eq!(
        (run.status.as_str(), run.failure_code.as_deref()),
        ("failed_resumable", Some("SANDBOX_SETUP_TIMEOUT")),
        "{}",
        stderr_of(&out)
    );
    let events = env.events(&run);
    let failed = first(&events, "run_failed").unwrap();
    assert_eq!(
        (&failed["code"], &failed["phase"], &failed["resumable"]),
        (
            &json!("SANDBOX_SETUP_TIMEOUT"),
            &json!("post_create"),
            &json!(true)
        )
    );
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("raise ITERION_SANDBOX_POST_CREATE_TIMEOUT")
    );
    assert!(!kinds(&events).contains(&"node_started"));
    assert_eq!(env.containers(), Vec::<String>::new());

    env.cmd()
        .args(["resume", run.id.as_str()])
        .env("ITERION_SANDBOX_POST_CREATE_TIMEOUT", "60s")
        .assert()
        .code(0);
    let run = env.only_run();
    assert_eq!(
        (run.status.as_str(), run.failure_code.as_deref()),
        ("finished", None)
    );
    let events = env.events(&run);
    let started: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _)| k == "run_started")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        started
            .iter()
            .map(|d| d["resumed"].clone())
            .collect::<Vec<_>>(),
        vec![json!(false), json!(true)]
    );
    assert_eq!(kinds(&events).last(), Some(&"run_finished"));
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn resume_continues_after_the_last_completed_node() {
    let env = Env::new();
    // `second` fails until the marker exists; `first` must not run again on resume.
    env.write(
        "two.iter",
        "tool first:\n  command: `echo one >> first.log`\n\ntool second:\n  command: `test -e marker && echo two`\n\nworkflow two:\n  entry: first\n  first -> second\n  second -> done\n",
    );
    env.cmd()
        .args(["run", "two.iter", "--sandbox", "none"])
        .assert()
        .code(1);
    let run = env.only_run();
    assert_eq!(
        (
            run.status.as_str(),
            run.failure_code.as_deref(),
            run.last_completed_node.as_deref()
        ),
        ("failed_resumable", Some("EXECUTION_FAILED"), Some("first"))
    );
    std::fs::write(env.path("marker"), "").unwrap();
    // The launch flags are kept on the run: the resume runs on the host again.
    env.cmd().args(["resume", run.id.as_str()]).assert().code(0);
    let run = env.only_run();
    assert_eq!(run.status.as_str(), "finished");
    assert_eq!(
        std::fs::read_to_string(env.path("first.log")).unwrap(),
        "one\n"
    );
    let events = env.events(&run);
    assert!(!kinds(&events).iter().any(|k| k.starts_with("sandbox_")));
}

#[test]
fn resume_refuses_a_changed_workflow_unless_forced() {
    let env = Env::new();
    let wf = "tool a:\n  command: `test -e marker`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    env.write("w.iter", wf);
    env.cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .assert()
        .code(1);
    let run = env.only_run();
    env.write("w.iter", &format!("{wf}\n# edited\n"));
    std::fs::write(env.path("marker"), "").unwrap();
    let out = env
        .cmd()
        .args(["resume", run.id.as_str()])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(
        stderr_of(&out).contains("changed since run"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(env.only_run().status.as_str(), "failed_resumable");
    env.cmd()
        .args(["resume", run.id.as_str(), "--force"])
        .assert()
        .code(0);
}

/// The operator overlay (`--sandbox-env`, SANDBOX.md §7.8) is part of the run's launch flags: a
/// resumed run's new container gets it again, and a workflow-authored key still wins over it.
#[test]
fn docker_resume_reapplies_the_operator_overlay() {
    if !docker_or_skip("cli::resume::docker_resume_reapplies_the_overlay") {
        return;
    }
    let env = Env::new();
    env.write(
        "ov.iter",
        &format!(
            "tool probe:\n  command: `test -e marker && echo \"op=$OP_KEY wf=$WF_KEY\"`\n\nworkflow ov:\n  entry: probe\n  sandbox:\n    image: \"{}\"\n    env:\n      WF_KEY: \"workflow\"\n  probe -> done\n",
            crate::suite::support::IMAGE
        ),
    );
    env.cmd()
        .args(["run", "ov.iter", "--sandbox-env", "OP_KEY=operator"])
        .args(["--sandbox-env", "WF_KEY=operator"])
        .assert()
        .code(1);
    let run = env.only_run();
    assert_eq!(run.status.as_str(), "failed_resumable");
    std::fs::write(env.path("marker"), "").unwrap();
    let out = env
        .cmd()
        .args(["resume", run.id.as_str(), "--json"])
        .output()
        .unwrap();
    let run = env.only_run();
    let logs = env.logs(&run);
    assert_eq!(out.status.code(), Some(0), "{logs:#?}");
    assert!(
        logs.iter()
            .any(|(s, l)| s == "stdout" && l.ends_with("op=operator wf=workflow")),
        "{logs:#?}"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// A container-local scratch dir (host_state none, SANDBOX.md §8.3) is banked at teardown and
/// restored into the resumed run's new container.
#[test]
fn docker_a_container_local_scratch_is_banked_and_restored_on_resume() {
    if !docker_or_skip("cli::resume::docker_scratch_bank") {
        return;
    }
    let env = Env::new();
    env.write(
        "sc.iter",
        &format!(
            "tool probe:\n  command: `if [ -e marker ]; then echo \"restored=$(cat \"$PROJECT_SCRATCH_DIR/note\")\"; else echo kept > \"$PROJECT_SCRATCH_DIR/note\"; exit 1; fi`\n\nworkflow sc:\n  entry: probe\n  sandbox:\n    image: \"{}\"\n  probe -> done\n",
            crate::suite::support::IMAGE
        ),
    );
    env.cmd()
        .args(["run", "sc.iter", "--sandbox-host-state", "none"])
        .assert()
        .code(1);
    let run = env.only_run();
    assert_eq!(run.status.as_str(), "failed_resumable");
    let events = env.events(&run);
    let banked = crate::suite::support::first(&events, "sandbox_scratch_banked")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(banked["banked"], serde_json::json!(true), "{banked}");
    let bank = env
        .home
        .path()
        .join("runs")
        .join(run.id.as_str())
        .join("scratch-bank.tar");
    assert!(bank.exists());
    std::fs::write(env.path("marker"), "").unwrap();
    let out = env
        .cmd()
        .args(["resume", run.id.as_str()])
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(out.status.code(), Some(0), "{events:#?}\n{logs:#?}");
    let restored: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _)| k == "sandbox_scratch_restored")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(restored.len(), 1, "{events:#?}");
    assert_eq!(restored[0]["restored"], serde_json::json!(true));
    assert!(
        logs.iter()
            .any(|(s, l)| s == "stdout" && l.ends_with("restored=kept")),
        "{logs:#?}"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// A container-local scratch dir that could not be banked (the container died under the run)
/// makes a plain resume refuse with `SCRATCH_NOT_PORTABLE` (SANDBOX.md §8.3), the run left as it
/// was; `--force` resumes without it.
#[test]
fn docker_an_unbanked_scratch_refuses_resume_unless_forced() {
    if !docker_or_skip("cli::resume::docker_scratch_not_portable") {
        return;
    }
    let env = Env::new();
    env.write(
        "np.iter",
        &format!(
            "tool probe:\n  command: `if [ -e marker ]; then echo forced-on; else echo x > \"$PROJECT_SCRATCH_DIR/f\"; touch started; sleep 60; fi`\n\nworkflow np:\n  entry: probe\n  sandbox:\n    image: \"{}\"\n  probe -> done\n",
            crate::suite::support::IMAGE
        ),
    );
    let child = env
        .std_cmd()
        .args(["run", "np.iter", "--sandbox-host-state", "none"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !env.path("started").exists() {
        assert!(std::time::Instant::now() < deadline, "never started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for id in env.containers() {
        let _ = std::process::Command::new("docker")
            .args(["kill", &id])
            .output();
    }
    let out = child.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let run = env.only_run();
    let events = env.events(&run);
    let banked = crate::suite::support::first(&events, "sandbox_scratch_banked")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(
        (&banked["banked"], &banked["empty"]),
        (&serde_json::json!(false), &serde_json::json!(false)),
        "{banked}"
    );
    let status_before = run.status;
    std::fs::write(env.path("marker"), "").unwrap();
    let refused = env
        .cmd()
        .args(["resume", run.id.as_str()])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("SCRATCH_NOT_PORTABLE") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(env.only_run().status, status_before);
    let forced = env
        .cmd()
        .args(["resume", run.id.as_str(), "--force"])
        .output()
        .unwrap();
    assert_eq!(
        forced.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

//! `iterion run`, `inspect` and `events` end to end: records, exit codes, bad input.
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

const HELLO: &str = "vars:\n  name: string = \"world\"\n\ntool greet:\n  command: `echo {{vars.name}}`\n\ntool check:\n  command: `test -n {{input.result}} && echo ok`\n\nworkflow hello:\n  entry: greet\n  greet -> check with { result: \"{{input.result}}\" }\n  check -> done\n";

#[test]
fn a_run_on_the_host_finishes_and_records_its_events() {
    let env = Env::new();
    env.write("hello.iter", HELLO);
    let out = env
        .cmd()
        .args([
            "run",
            "hello.iter",
            "--sandbox",
            "none",
            "--var",
            "name=ada",
            "--json",
        ])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = env.only_run();
    assert_eq!(
        summary,
        json!({"run_id": run.id.as_str(), "status": "finished", "output": {"result": "ok"}})
    );
    assert_eq!(run.status.as_str(), "finished");
    assert_eq!(
        run.vars,
        json!({"name": "ada"}).as_object().unwrap().clone()
    );
    let events = env.events(&run);
    assert_eq!(
        kinds(&events),
        vec![
            "run_started",
            "node_started",
            "node_finished",
            "edge_selected",
            "node_started",
            "node_finished",
            "edge_selected",
            "run_finished"
        ]
    );
    assert_eq!(
        first(&events, "run_started").unwrap(),
        &json!({"workflow": "hello", "workflow_hash": run.workflow_hash, "trust": "trusted", "resumed": false})
    );
    // An explicit opt-out is silent: no sandbox event at all.
    assert!(!kinds(&events).iter().any(|k| k.starts_with("sandbox_")));

    // `events --json`: one object a line with seq, ts, run_id, type, data.
    let lines = env
        .cmd()
        .args(["events", run.id.as_str(), "--json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let lines: Vec<Value> = String::from_utf8(lines)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), events.len());
    let mut keys: Vec<&String> = lines[0].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, vec!["data", "run_id", "seq", "ts", "type"]);
    assert_eq!(
        (&lines[0]["seq"], &lines[0]["type"]),
        (&json!(1), &json!("run_started"))
    );

    // `inspect RUN_ID --json` is the run record; `inspect` lists it.
    let one: Value = serde_json::from_slice(
        &env.cmd()
            .args(["inspect", run.id.as_str(), "--json"])
            .assert()
            .code(0)
            .get_output()
            .stdout,
    )
    .unwrap();
    assert_eq!(
        (
            &one["status"],
            &one["admission"]["code"],
            &one["admission"]["decision"]
        ),
        (&json!("finished"), &json!("trusted"), &json!("allowed"))
    );
    let list = String::from_utf8(
        env.cmd()
            .arg("inspect")
            .assert()
            .code(0)
            .get_output()
            .stdout
            .clone(),
    )
    .unwrap();
    assert!(
        list.contains(run.id.as_str()) && list.contains("finished"),
        "{list}"
    );
}

#[test]
fn bad_input_exits_two_and_creates_no_run() {
    let env = Env::new();
    env.write("hello.iter", HELLO);
    env.write(
        "broken.iter",
        "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  worktree: sometimes\n  a -> done\n",
    );
    env.write(
        "needs.iter",
        "vars:\n  n: int\n\ntool a:\n  command: `echo {{vars.n}}`\n\nworkflow w:\n  entry: a\n  a -> done\n",
    );
    env.write(
        "secret.iter",
        "secrets:\n  token:\n    value: \"${ITERION_TEST_TOKEN_UNSET}\"\n    hosts: [\"api.example.com\"]\n\ntool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done\n",
    );
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec!["run", "missing.iter"],
            vec![],
            "cannot read missing.iter",
        ),
        (
            vec!["run", "broken.iter"],
            vec![],
            "does not compile; nothing was run",
        ),
        (
            vec!["run", "hello.iter", "--var", "nope=1"],
            vec![],
            "the workflow declares no var \"nope\"",
        ),
        (vec!["run", "needs.iter"], vec![], "pass --var n=VALUE"),
        (
            vec!["run", "needs.iter", "--var", "n=x"],
            vec![],
            "n is a int, and \"x\" is not an integer",
        ),
        (
            vec!["run", "secret.iter"],
            vec![],
            "set ITERION_TEST_TOKEN_UNSET",
        ),
        (
            vec!["run", "hello.iter"],
            vec![("ITERION_SANDBOX_DEFAULT", "sometimes")],
            "ITERION_SANDBOX_DEFAULT=\"sometimes\": want auto or none",
        ),
        (
            vec!["run", "hello.iter"],
            vec![("ITERION_SANDBOX_OVERRIDE", "off")],
            "ITERION_SANDBOX_OVERRIDE=\"off\": want auto or none",
        ),
        (
            vec!["run", "hello.iter"],
            vec![("ITERION_SANDBOX_HOST_STATE", "yes")],
            "ITERION_SANDBOX_HOST_STATE=\"yes\": want auto or none",
        ),
        (
            vec!["run", "hello.iter"],
            vec![("ITERION_SANDBOX_UPSTREAM_CA", "/nonexistent/iterion-ca.pem")],
            "ITERION_SANDBOX_UPSTREAM_CA: cannot read /nonexistent/iterion-ca.pem",
        ),
        (
            vec!["run", "hello.iter"],
            vec![("ITERION_SANDBOX_UPSTREAM_CA", "/etc/passwd")],
            "ITERION_SANDBOX_UPSTREAM_CA: /etc/passwd is not a PEM file of CA certificates",
        ),
        (
            vec!["run", "hello.iter", "--sandbox", "maybe"],
            vec![],
            "invalid value 'maybe' for '--sandbox <SANDBOX>'",
        ),
    ];
    for (args, vars, want) in cases {
        let mut cmd = env.cmd();
        cmd.args(&args);
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        let out = cmd.assert().code(2).get_output().clone();
        let stderr = stderr_of(&out);
        assert!(stderr.contains(want), "{args:?} {vars:?}: {stderr}");
        assert_eq!(env.runs().len(), 0, "{args:?} created a run");
    }
}

#[test]
fn a_corrupt_database_is_a_clear_error() {
    let env = Env::new();
    env.write("hello.iter", HELLO);
    std::fs::write(env.db(), b"this is not an sqlite database, not at all, no").unwrap();
    let out = env
        .cmd()
        .args(["run", "hello.iter", "--sandbox", "none"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(&format!("cannot open the run store {}", env.db().display())),
        "{stderr}"
    );
    let inspect = env
        .cmd()
        .arg("inspect")
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(stderr_of(&inspect).contains("cannot open the run store"));
}

#[test]
fn a_refused_resume_and_an_unknown_run_exit_one() {
    let env = Env::new();
    env.write("hello.iter", HELLO);
    env.cmd()
        .args(["run", "hello.iter", "--sandbox", "none"])
        .assert()
        .code(0);
    let run = env.only_run();
    let out = env
        .cmd()
        .args(["resume", run.id.as_str()])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(
        stderr_of(&out).contains("resume refused [RESUME_INVALID]: run ")
            && stderr_of(&out)
                .contains(" is finished; only a failed_resumable or paused run can be resumed"),
        "{}",
        stderr_of(&out)
    );
    let unknown = env
        .cmd()
        .args(["events", "0190b4c6-1d2e-7f00-8000-000000000001"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(stderr_of(&unknown).contains("no run 0190b4c6-1d2e-7f00-8000-000000000001"));
}

#[test]
fn docker_a_sandboxed_run_records_sandbox_started_and_leaves_no_container() {
    if !docker_or_skip("cli::run::docker_a_sandboxed_run") {
        return;
    }
    let env = Env::new();
    env.write("hello.iter", HELLO);
    env.cmd()
        .args(["run", "hello.iter", "--sandbox-default-image", IMAGE])
        .assert()
        .code(0);
    let run = env.only_run();
    let events = env.events(&run);
    let started = first(&events, "sandbox_started").unwrap().clone();
    let id = started["sandbox_id"].as_str().unwrap().to_owned();
    assert_eq!(
        started,
        json!({
            "driver": "docker",
            "mode": "auto",
            "source": format!("global sandbox default (default image: {IMAGE})"),
            "image": IMAGE,
            "sandbox_id": id,
            "has_post_create": false,
            "network_mode": "open",
            "network_source": "default (open)",
            "proxy": false,
            "tls_inspection": false,
            "transparent_egress": false,
            "egress_enforced": null,
        })
    );
    // sandbox events come before any node event.
    let ks = kinds(&events);
    let started_at = ks.iter().position(|k| *k == "sandbox_started").unwrap();
    let first_node = ks.iter().position(|k| *k == "node_started").unwrap();
    assert!(started_at < first_node, "{ks:?}");
    // The driver's operations and the tool output are in the run log.
    let logs = env.logs(&run);
    let has = |stream: &str, prefix: &str| {
        logs.iter()
            .any(|(s, l)| s == stream && l.starts_with(prefix))
    };
    assert!(
        has(
            "system",
            "docker run --detach --interactive --rm --log-driver none --name iterion-"
        ),
        "{logs:#?}"
    );
    assert!(
        has("system", "sandbox active: driver=docker image="),
        "{logs:#?}"
    );
    assert!(
        has("stdout", "[greet] ada") || has("stdout", "[greet] world"),
        "{logs:#?}"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_an_unavailable_default_image_says_how_to_get_one() {
    if !docker_or_skip("cli::run::docker_an_unavailable_default_image") {
        return;
    }
    let env = Env::new();
    env.write("hello.iter", HELLO);
    let out = env
        .cmd()
        .args(["run", "hello.iter"])
        .env("ITERION_SANDBOX_DEFAULT_IMAGE", "iterion-test/absent:1")
        .env("ITERION_SANDBOX_PULL_TIMEOUT", "20s")
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stderr = stderr_of(&out);
    for want in [
        "The default sandbox image iterion-test/absent:1 is neither present locally nor pullable (ITERION_SANDBOX_DEFAULT_IMAGE)",
        "docker pull iterion-test/absent:1",
        "--sandbox-default-image (or ITERION_SANDBOX_DEFAULT_IMAGE)",
        "scripts/build-default-image.sh",
    ] {
        assert!(stderr.contains(want), "missing {want:?} in {stderr}");
    }
    let run = env.only_run();
    assert_eq!(
        (run.status.as_str(), run.failure_code.as_deref()),
        ("failed", Some("SANDBOX_SETUP_FAILED"))
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// C136 no longer fires: `ask_user` reaches the host from inside a sandbox over the runner
/// channel (DSL.md §8.3; the run itself is `agent_docker`'s test).
#[test]
fn interaction_ask_under_a_sandbox_draws_no_c136_now_that_the_channel_exists() {
    let env = Env::new();
    env.write(
        "ask.iter",
        &format!(
            "agent helper:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"help\"\n  interaction: ask\n\nworkflow a:\n  entry: helper\n  sandbox:\n    image: \"{IMAGE}\"\n  helper -> done\n"
        ),
    );
    let out = env.cmd().args(["validate", "ask.iter"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr_of(&out)
    );
    assert!(!text.contains("C136"), "{text}");
}

const FILE_SECRET: &str = "secrets:\n  cert:\n    value: \"${ITERION_TEST_CERT}\"\n    as: file\n    env: CERT_PATH\n    hosts: [\"registry.example.com\"]\n\ntool a:\n  command: `echo ok`\n\nworkflow w:\n  entry: a\n  a -> done\n";

#[test]
fn a_degraded_run_reports_its_file_secrets_dropped() {
    let env = Env::new();
    env.write("s.iter", FILE_SECRET);
    env.cmd()
        .args(["run", "s.iter", "--sandbox-default-image", IMAGE])
        .env("ITERION_TEST_CERT", "very-secret-value")
        .env("DOCKER_HOST", crate::suite::support::DEAD_DOCKER)
        .env("CONTAINER_HOST", crate::suite::support::DEAD_PODMAN)
        // No driver at all (else the namespace driver would sandbox it).
        .env("ITERION_SANDBOX_DRIVER", "docker")
        .assert()
        .code(0);
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        first(&events, "sandbox_skipped").unwrap()["file_secrets_dropped"],
        json!(true)
    );
}

#[test]
fn docker_file_secrets_are_delivered_or_the_run_fails_closed() {
    if !docker_or_skip("cli::run::docker_file_secrets_are_delivered_or_refused") {
        return;
    }
    let env = Env::new();
    env.write(
        "s.iter",
        &FILE_SECRET.replace(
            "`echo ok`",
            "`test -r \"$CERT_PATH\" && cat \"$CERT_PATH\"`",
        ),
    );
    let out = env
        .cmd()
        .args(["run", "s.iter", "--sandbox-default-image", IMAGE])
        .env("ITERION_TEST_CERT", "very-secret-value")
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    match run.status.as_str() {
        // A driver that delivers file secrets: the file is readable at $CERT_PATH, and what the
        // tool printed is recorded redacted.
        "finished" => {
            assert_eq!(out.status.code(), Some(0));
            assert_eq!(
                first(&events, "node_finished").unwrap()["output"],
                json!({"result": "[REDACTED:cert]"})
            );
        }
        // A driver that cannot deliver them refuses the spec: the run never runs without them.
        _ => {
            assert_eq!(
                (
                    out.status.code(),
                    run.status.as_str(),
                    run.failure_code.as_deref()
                ),
                (Some(1), "failed", Some("SANDBOX_SETUP_FAILED"))
            );
            assert!(
                run.failure_message
                    .as_deref()
                    .unwrap_or_default()
                    .contains("file secrets"),
                "{:?}",
                run.failure_message
            );
            assert!(!kinds(&events).contains(&"node_started"));
        }
    }
    let recorded = format!(
        "{events:?}{:?}{}{}",
        env.logs(&run),
        stderr_of(&out),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!recorded.contains("very-secret-value"), "{recorded}");
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// `ITERION_STORE_URL=postgres://…` puts the run in PostgreSQL (issue 9): nothing is written under
/// ITERION_HOME's SQLite file, and `inspect` through the same URL finds the run.
#[test]
fn a_postgres_store_url_records_the_run_in_postgres() {
    let url = match std::env::var("ITERION_IT_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            assert!(
                std::env::var("ITERION_IT_DOCKER").as_deref() != Ok("1"),
                "ITERION_IT_DOCKER=1 but ITERION_IT_POSTGRES_URL is unset (scripts/test.sh sets it)"
            );
            eprintln!("skipped: set ITERION_IT_POSTGRES_URL to run this test");
            return;
        }
    };
    let env = Env::new();
    env.write("hello.iter", HELLO);
    let out = env
        .cmd()
        .env("ITERION_STORE_URL", &url)
        .args(["run", "--sandbox", "none", "--json", "hello.iter"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = doc["run_id"]
        .as_str()
        .or(doc["id"].as_str())
        .unwrap()
        .to_owned();
    assert!(
        !env.db().exists(),
        "the SQLite file was created although ITERION_STORE_URL was set"
    );
    let out = env
        .cmd()
        .env("ITERION_STORE_URL", &url)
        .args(["inspect", "--json", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["status"], "finished", "{run}");
}

#[test]
fn a_store_url_that_is_not_postgres_is_refused_with_the_knob_named() {
    let env = Env::new();
    env.write("hello.iter", HELLO);
    let out = env
        .cmd()
        .env("ITERION_STORE_URL", "mysql://user:hunter2@db/iterion")
        .args(["run", "--sandbox", "none", "hello.iter"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(err.contains("ITERION_STORE_URL"), "{err}");
    assert!(!err.contains("hunter2"), "the password leaked: {err}");
}

/// A container's `true`, replaced by the workload with one printing 1.5 GB, answers the
/// liveness probe the engine makes after a node fails: the engine keeps a bounded part of what
/// it prints (`readback::BoundedRun`), where the driver (or the exec agent's client) would
/// buffer all of it. The engine's peak memory is read from `/proc` while it runs.
#[test]
fn docker_attack_a_probe_answered_with_gigabytes_does_not_swell_the_engine() {
    if !docker_or_skip("cli::run::docker_attack_a_probe_answered_with_gigabytes") {
        return;
    }
    let env = Env::new();
    env.write(
        "w.iter",
        "tool poison:\n  command: `for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do rm -f $d/true; printf '#!/bin/sh\\nhead -c 1500000000 /dev/zero\\n' > $d/true; chmod 755 $d/true; done; exit 1`\n\nworkflow w:\n  entry: poison\n  poison -> done\n",
    );
    let mut child = env
        .std_cmd()
        .args(["run", "w.iter", "--sandbox-default-image", IMAGE])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak_kib = 0u64;
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the run hung"
        );
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        peak_kib < 400 * 1024,
        "the engine's peak memory reached {} MiB",
        peak_kib / 1024
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

//! Agent nodes under an active docker sandbox: the loop runs in the container through
//! `iterion __claw-runner`, the model is the fake on the host reached through the run's proxy,
//! and the key reaches the container only as a gateway placeholder (SANDBOX.md §13).
use std::process::Command as StdCommand;

use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

const KEY: &str = "sk-ant-real-key-0123456789abcdef";

fn host_name() -> String {
    String::from_utf8(StdCommand::new("hostname").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn docker_an_agent_runs_in_the_container_asks_through_the_launcher_and_never_sees_the_key() {
    if !docker_or_skip("cli::agent_docker::runs_in_the_container") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::agent_docker::runs_in_the_container")
    else {
        return;
    };
    let env = Env::new();
    // An allowlist that does not name the model's host: the provider host is added as the last
    // rule (§13.1b).
    env.write(
        "w.iter",
        &format!(
            "prompt task:\n  Do it.\n\nagent worker:\n  model: \"anthropic/claude-test\"\n  user: task\n  tools: [bash, write_file, read_file]\n  interaction: ask\n\nworkflow w:\n  entry: worker\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n  worker -> done\n"
        ),
    );
    let probe = "cat /etc/hostname; pwd; tr '\\0' '\\n' < /proc/$PPID/environ > runner-env.txt; \
                 tr '\\0' ' ' < /proc/$PPID/cmdline > runner-argv.txt; env > bash-env.txt";
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::Tools(vec![
                (
                    "write_file".into(),
                    json!({"path": "made/inside.txt", "content": "from the runner"}),
                ),
                ("bash".into(), json!({"command": probe})),
            ]),
            Reply::tool(
                "ask_user",
                json!({"question": "Ship it?", "options": ["yes", "no"]}),
            ),
            Reply::text("shipped"),
        ],
    );
    let run_cmd = |args: &[&str]| {
        env.cmd()
            .args(args)
            .env("ITERION_BIN", &static_bin)
            .env("ANTHROPIC_API_KEY", KEY)
            .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
            .output()
            .unwrap()
    };
    let out = run_cmd(&["run", "w.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}\n{events:#?}\n{logs:#?}",
        stderr_of(&out)
    );
    // The loop ran in the container: the file is in the (bind-mounted) workspace, and bash saw
    // the container's hostname and workspace folder, not the host's.
    assert_eq!(
        std::fs::read_to_string(env.path("made/inside.txt")).unwrap(),
        "from the runner"
    );
    let requests = fake.requests();
    let bash_result = requests[1].body["messages"][2]["content"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let container_host = bash_result.lines().nth(2).unwrap_or_default().to_owned();
    assert!(!container_host.is_empty(), "{bash_result}");
    assert_ne!(container_host, host_name(), "{bash_result}");
    // The proxy materialised the placeholder toward the provider host only.
    assert_eq!(requests[0].header("x-api-key"), Some(KEY));
    // The ask went through the launcher, which had no terminal: the run paused.
    assert_eq!(run.status.as_str(), "paused");
    assert_eq!(
        first(&events, "run_paused").unwrap(),
        &json!({"node": "worker", "question": "Ship it?", "options": ["yes", "no"]})
    );
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "sandbox_claw_routed_via_runner")
            .count(),
        1
    );
    let started = first(&events, "sandbox_started").unwrap();
    assert_eq!(
        (started["proxy"].clone(), started["tls_inspection"].clone()),
        (json!(true), json!(true))
    );
    // The allowlist did not name the provider's host: it was added as the last rule, with the
    // base URL's port (a rule without one allows 443 and 80 only), and said so.
    let source = started["network_source"].as_str().unwrap_or_default();
    let model_port = fake
        .base_url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        source.ends_with(&format!(" + model provider hosts (127.0.0.1:{model_port})")),
        "{source}"
    );

    // Resume with the answer: a new container, the loop continues where it stopped.
    let out = run_cmd(&["resume", run.id.as_str(), "--answer", "yes"]);
    let run = env.only_run();
    let events_after = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events_after:#?}",
        stderr_of(&out)
    );
    assert_eq!(run.status.as_str(), "finished");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let last = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["content"], json!("yes"));

    // The key is nowhere the container or the records can show it.
    let read = |name: &str| std::fs::read_to_string(env.path(name)).unwrap_or_default();
    let runner_env = read("runner-env.txt");
    assert!(runner_env.contains("HTTPS_PROXY="), "{runner_env}");
    let records = format!(
        "{events_after:?}{:?}{}",
        env.logs(&run),
        String::from_utf8_lossy(&out.stdout)
    );
    for (what, text) in [
        ("the runner's environment", runner_env),
        ("the runner's argv", read("runner-argv.txt")),
        ("bash's environment", read("bash-env.txt")),
        ("events and logs", records),
    ] {
        assert!(!text.contains(KEY), "the key leaked into {what}");
    }
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// The static runner runs in a busybox image (no libc, no bash) and refuses an oversized line
/// there too: a typed `result`, exit 2, no hang.
#[test]
fn docker_the_static_runner_refuses_a_five_mib_line_in_a_busybox_container() {
    if !docker_or_skip("cli::agent_docker::runner_in_busybox") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::agent_docker::runner_in_busybox") else {
        return;
    };
    let mut big = b"{\"type\":\"task\",\"data\":\"".to_vec();
    big.resize(5 * 1024 * 1024, b'x');
    big.extend_from_slice(b"\"}\n");
    let name = format!("iterion-test-runner-{}", std::process::id());
    let out = assert_cmd::Command::new("docker")
        .args([
            "run",
            "-i",
            "--rm",
            "--name",
            &name,
            "--label",
            "iterion.io/test-id=cli::agent_docker::runner_in_busybox",
            "--network",
            "none",
            "-v",
            &format!("{}:/run/iterion/bin/iterion:ro", static_bin.display()),
            iterion_test_support::BUSYBOX_IMAGE,
            "/run/iterion/bin/iterion",
            "__claw-runner",
        ])
        .write_stdin(big)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let _ = StdCommand::new("docker").args(["rm", "-f", &name]).output();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        line,
        json!({"type": "result", "data": {"output": null, "error": "envelope line over 4194304 bytes [RUNNER_LINE_TOO_LONG] before task"}})
    );
}

fn model_params_example() -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/14_model_params.iter");
    std::fs::read_to_string(&path).unwrap()
}

/// What every request of the example's loop carried: `max_tokens`, `output_config` and the
/// `anthropic-beta` header.
fn generation_of(fake: &FakeModel) -> Vec<(serde_json::Value, serde_json::Value, Option<String>)> {
    fake.requests()
        .iter()
        .map(|r| {
            (
                r.body["max_tokens"].clone(),
                r.body["output_config"].clone(),
                r.header("anthropic-beta").map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn max_tokens_and_reasoning_effort_reach_the_request_of_a_claw_node_on_the_host() {
    let env = Env::new();
    env.write("w.iter", &model_params_example());
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![Reply::text("Nobody is there to fix it.")],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .env("EFFORT", "max")
        .output()
        .unwrap();
    env.only_run_ended(&out, 0);
    assert_eq!(
        generation_of(&fake),
        vec![(
            json!(1024),
            json!({"effort": "high"}),
            Some("effort-2025-11-24".to_owned())
        )]
    );
}

#[test]
fn docker_max_tokens_and_reasoning_effort_reach_the_request_from_the_container() {
    if !docker_or_skip("cli::agent_docker::model_params") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::agent_docker::model_params") else {
        return;
    };
    let env = Env::new();
    env.write(
        "w.iter",
        &model_params_example().replace(
            "  sandbox: auto\n",
            &format!(
                "  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n"
            ),
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![Reply::text("Nobody is there to fix it.")],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    // The loop ran in the container's runner (the default effort of the example: high).
    assert!(
        kinds(&ended.events).contains(&"sandbox_started"),
        "{:?}",
        kinds(&ended.events)
    );
    assert_eq!(
        generation_of(&fake),
        vec![(
            json!(1024),
            json!({"effort": "high"}),
            Some("effort-2025-11-24".to_owned())
        )]
    );
}

//! The workflows of `examples/` for cursors, presets and MCP servers, run end to end: cursors
//! against the fake model on the host, presets through `--preset`, and MCP servers inside a
//! docker sandbox (the server's tool called by the fake model's scripted tool call), refused on
//! the host.
use std::path::PathBuf;
use std::process::Command as StdCommand;

use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, stderr_of};

const KEY: &str = "sk-ant-real-key-0123456789abcdef";

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn host_name() -> String {
    String::from_utf8(StdCommand::new("hostname").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn cursors_append_a_sorted_calibration_to_the_system_prompt_with_env_values() {
    let env = Env::new();
    env.write("w.iter", &example("07_cursors.iter"));
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("reviewed")]);
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .env("DEPTH", "0.2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let requests = fake.requests();
    assert_eq!(
        requests[0].body["system"],
        json!(
            "You review changes. Operate within the calibration below.\n\n## Calibration\n\n\
             **ambition:** Surface two adjacent improvements, ranked by leverage.\n\
             **depth:** Skim the surface; cite primary sources only."
        )
    );
    // A value that selects nothing at run time fails the node before any model call.
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("reviewed")]);
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .env("DEPTH", "deepest")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("cursor \"depth\" has no value \"deepest\""),
        "{}",
        stderr_of(&out)
    );
    assert!(fake.requests().is_empty());
}

#[test]
fn a_preset_replaces_the_defaults_and_var_still_wins() {
    let env = Env::new();
    env.write("w.iter", &example("08_presets.iter"));
    let run = |args: &[&str]| {
        let out = env
            .cmd()
            .args(["run", "w.iter", "--sandbox", "none", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let run = env.runs().into_iter().next().unwrap();
        let events = env.events(&run);
        first(&events, "node_finished").unwrap()["output"]["result"].clone()
    };
    assert_eq!(run(&[]), json!("topic= general workflow design depth= 1"));
    assert_eq!(
        run(&["--preset", "deep"]),
        json!("topic= distributed consensus depth= 3")
    );
    assert_eq!(
        run(&["--preset", "quick", "--var", "depth=7"]),
        json!("topic= rate limiting depth= 7")
    );
    // An unknown preset is bad input: exit 2, nothing created.
    let before = env.runs().len();
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--preset", "huge"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("declares no preset \"huge\" (declared: deep, quick)"));
    assert_eq!(env.runs().len(), before);
}

fn mcp_env() -> Env {
    let env = Env::new();
    env.write("w.iter", &example("mcp/main.iter"));
    env.write("tiny-mcp.sh", &example("mcp/tiny-mcp.sh"));
    env
}

#[test]
fn docker_an_mcp_server_runs_in_the_sandbox_and_its_tools_reach_the_agent() {
    if !docker_or_skip("cli::lang_features::mcp_in_the_sandbox") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::lang_features::mcp_in_the_sandbox") else {
        return;
    };
    let env = mcp_env();
    // The example's `sandbox: auto`, pinned to the test image, with an allowlist (the model's
    // host, the fake on this machine, is added as its last rule).
    env.write(
        "w.iter",
        &example("mcp/main.iter").replace(
            "  sandbox: auto\n",
            &format!(
                "  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n"
            ),
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::Tools(vec![
                ("mcp__tiny__greet".into(), json!({"name": "Iterion"})),
                ("mcp__tiny__reverse".into(), json!({"text": "States"})),
            ]),
            Reply::text("{\"greeting\": \"hi\", \"reversed\": \"setatS\"}"),
        ],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}",
        stderr_of(&out)
    );
    let requests = fake.requests();
    // The server's tools were offered, under their prefixed names.
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(offered.contains(&"mcp__tiny__greet"), "{offered:?}");
    assert!(offered.contains(&"mcp__tiny__reverse"), "{offered:?}");
    // Both calls ran in the server, which ran in the container: not this host's name, with the
    // workflow's env.
    let results = &requests[1].body["messages"][2]["content"];
    let greet = results[0]["content"].as_str().unwrap_or_default();
    assert!(
        greet.starts_with("Hello, Iterion! (friendly) from "),
        "{results}"
    );
    assert!(!greet.ends_with(&host_name()), "{greet}");
    assert_eq!(results[1]["content"], json!("setatS"), "{results}");
    // Its start marker is in the (bind-mounted) workspace, named after the container.
    let markers: Vec<String> = std::fs::read_dir(env.path("."))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("mcp-started-on-"))
        .collect();
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert_ne!(markers[0], format!("mcp-started-on-{}", host_name()));
}

#[test]
fn an_mcp_server_never_runs_on_the_host() {
    // Attack: a workflow whose MCP server would run on the engine's host when the run has no
    // sandbox. The node fails before anything starts; no model call, no server process.
    let env = mcp_env();
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("{}")]);
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let run = env.only_run();
    let events = env.events(&run);
    let failed = first(&events, "node_failed").unwrap();
    assert_eq!(failed["code"], json!("CAPABILITY_UNSUPPORTED"), "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap_or_default()
            .contains("MCP servers run only inside the run's sandbox"),
        "{failed}"
    );
    assert!(fake.requests().is_empty());
    let started = std::fs::read_dir(env.path("."))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .any(|n| n.starts_with("mcp-started-on-"));
    assert!(!started, "the MCP server ran on the host");
}

fn attachments_env() -> Env {
    let env = Env::new();
    env.write("w.iter", &example("13_attachments.iter"));
    env.write("notes.txt", "one\ntwo\nthree\n");
    env
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn docker_an_attachment_is_a_read_only_copy_in_the_sandbox() {
    if !docker_or_skip("cli::lang_features::attachments_in_the_sandbox") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::lang_features::attachments_in_the_sandbox")
    else {
        return;
    };
    let env = attachments_env();
    env.write(
        "w.iter",
        &example("13_attachments.iter").replace(
            "  sandbox: auto\n",
            &format!("  sandbox:\n    image: \"{IMAGE}\"\n"),
        ),
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--attach", "notes=notes.txt"])
        .env("ITERION_BIN", &static_bin)
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let sha = sha256_hex(b"one\ntwo\nthree\n");
    let finished = ended
        .events
        .iter()
        .find(|(k, d)| k == "node_finished" && d["node"] == "count")
        .map(|(_, d)| d["output"].clone())
        .unwrap();
    assert_eq!(
        finished,
        json!({
            "lines": 3,
            "sha256": sha,
            "path": "/run/iterion/attachments/notes/notes.txt",
            "mime": "text/plain",
            "writable": false,
        })
    );
    // The event names what was copied, never its content.
    let copied = first(&ended.events, "sandbox_attachments_copied").unwrap();
    assert_eq!(
        copied,
        &json!({
            "target": "/run/iterion/attachments",
            "files": 1,
            "bytes": 14,
            "attachments": [{"name": "notes", "file": "notes.txt", "size": 14, "sha256": sha, "mime": "text/plain"}],
        })
    );
    assert!(first(&ended.events, "sandbox_started").is_some());
    // The operator's file is untouched.
    assert_eq!(
        std::fs::read_to_string(env.path("notes.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
}

#[test]
fn without_a_sandbox_an_attachment_is_read_at_its_copy_on_the_host() {
    let env = attachments_env();
    let out = env
        .cmd()
        .args([
            "run",
            "w.iter",
            "--sandbox",
            "none",
            "--attach",
            "notes=notes.txt",
        ])
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let output = ended
        .events
        .iter()
        .find(|(k, d)| k == "node_finished" && d["node"] == "count")
        .map(|(_, d)| d["output"].clone())
        .unwrap();
    let copy = env
        .home
        .path()
        .join("runs")
        .join(ended.run.id.to_string())
        .join("attachments/notes/notes.txt");
    assert_eq!(output["path"], json!(copy.to_string_lossy()));
    assert_eq!(output["lines"], json!(3));
    // Unsandboxed there is no read-only bind (and root ignores the copy's mode), but whatever the
    // run does, it does to the copy: the operator's file is untouched.
    assert!(
        std::fs::read_to_string(&copy)
            .unwrap()
            .starts_with("one\ntwo\nthree\n")
    );
    assert_eq!(
        std::fs::read_to_string(env.path("notes.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
}

#[test]
fn a_hostile_attachment_is_refused_before_a_run_exists() {
    // Attack: the file the operator names is, in the checkout, a symlink to a host secret. It
    // must not be copied into the run (and so into the sandbox).
    let env = attachments_env();
    env.write("secret.txt", "PRIVATE KEY\n");
    std::os::unix::fs::symlink(env.path("secret.txt"), env.path("linked.txt")).unwrap();
    for (args, says) in [
        (
            vec!["--attach", "notes=linked.txt"],
            "goes through a symbolic link",
        ),
        (
            vec!["--attach", "other=notes.txt"],
            "declares no attachment \"other\"",
        ),
        (vec![], "attachment notes is required"),
        (vec!["--attach", "notes=."], "is not a regular file"),
        (vec!["--attach", "notes"], "expected NAME=PATH"),
    ] {
        let out = env
            .cmd()
            .args(["run", "w.iter", "--sandbox", "none"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(says),
            "{args:?}: {}",
            stderr_of(&out)
        );
    }
    assert_eq!(env.runs().len(), 0);
}

//! The workflow's `mcp_server` declarations given to delegate nodes: the real `claude` and
//! `codex` CLIs in a docker sandbox spawn the bash + jq server of examples/mcp inside the
//! container, call its tool, and the tool's result reaches the model.
use iterion_test_support::fake_model::{Api, FakeModel, Recorded, Reply};
use iterion_test_support::{DELEGATES_IMAGE, static_iterion_or_skip};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, docker_or_skip, stderr_of};

const ANTHROPIC_KEY: &str = "sk-ant-Mc9vT2xW4kP7mN1bQ3yH8cJ5";
const OPENAI_KEY: &str = "sk-oai-Mc3gF6dS9aQ2eR7tY4uI1oP8";
const SERVER: &str = include_str!("../../../../examples/mcp/tiny-mcp.sh");

fn workflow(backend: &str, model: &str) -> String {
    format!(
        "mcp_server tiny:\n  transport: stdio\n  command: \"bash\"\n  args: [\"tiny-mcp.sh\"]\n  env:\n    GREETING_MODE: \"friendly\"\n\n\
         agent caller:\n  model: \"{model}\"\n  backend: {backend}\n  user: \"Greet Iterion.\"\n  mcp:\n    servers: [tiny]\n\n\
         workflow w:\n  entry: caller\n  sandbox:\n    image: \"{DELEGATES_IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n  caller -> done\n"
    )
}

fn of_kind<'a>(events: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, v)| v)
        .collect()
}

/// Runs the workflow; returns the events, the requests and the container's hostname the server
/// left as its marker.
fn run_with_server(
    backend: &str,
    model: &str,
    api: Api,
    tool: &str,
    key: (&str, &str),
    base_var: &str,
) -> (Vec<(String, Value)>, Vec<Recorded>, String) {
    let Some(static_bin) = static_iterion_or_skip(&format!("cli::delegates_mcp::{backend}")) else {
        panic!("the static engine binary is needed");
    };
    let env = Env::new();
    env.write("w.iter", &workflow(backend, model));
    env.write("tiny-mcp.sh", SERVER);
    let fake = FakeModel::start(
        api,
        vec![
            Reply::tool(tool, json!({"name": "Iterion"})),
            Reply::text("The server said hello."),
        ],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env(key.0, key.1)
        .env(base_var, fake.base_url())
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}\n{logs:#?}",
        stderr_of(&out)
    );
    let marker = std::fs::read_dir(env.ws.path())
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("mcp-started-on-")
                .map(str::to_owned)
        })
        .next()
        .unwrap_or_else(|| panic!("the server left no marker: {logs:#?}"));
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    assert_ne!(marker, host.trim(), "the server ran in the container");
    assert_eq!(env.containers(), Vec::<String>::new());
    (events, fake.requests(), marker)
}

#[test]
fn docker_claude_code_calls_a_tool_of_the_workflows_stdio_mcp_server_inside_the_sandbox() {
    if !docker_or_skip("cli::delegates_mcp::docker_claude_code") {
        return;
    }
    let (events, requests, marker) = run_with_server(
        "claude_code",
        "anthropic/claude-test",
        Api::Anthropic,
        "mcp__tiny__greet",
        ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
        "ITERION_ANTHROPIC_BASE_URL",
    );
    assert_eq!(requests.len(), 2);
    // The model was offered the server's tools, and the tool's result reached it.
    let offered = requests[0].body["tools"].to_string();
    assert!(offered.contains("mcp__tiny__greet"), "{offered}");
    let result = requests[1].body["messages"].to_string();
    assert!(
        result.contains(&format!("Hello, Iterion! (friendly) from {marker}")),
        "{result}"
    );
    let calls = of_kind(&events, "agent_tool_call");
    assert!(
        calls.iter().any(|c| c["tool"] == json!("mcp__tiny__greet")),
        "{calls:#?}"
    );
    let finished = of_kind(&events, "node_finished");
    assert_eq!(
        finished[0]["output"]["text"],
        json!("The server said hello.")
    );
}

#[test]
fn docker_codex_calls_a_tool_of_the_workflows_stdio_mcp_server_inside_the_sandbox() {
    if !docker_or_skip("cli::delegates_mcp::docker_codex") {
        return;
    }
    let (events, requests, marker) = run_with_server(
        "codex",
        "openai/gpt-test",
        Api::Responses,
        "mcp__tiny/greet",
        ("OPENAI_API_KEY", OPENAI_KEY),
        "ITERION_OPENAI_BASE_URL",
    );
    assert_eq!(requests.len(), 2);
    let result = requests[1].body["input"].to_string();
    assert!(
        result.contains(&format!("Hello, Iterion! (friendly) from {marker}")),
        "{result}"
    );
    let calls = of_kind(&events, "agent_tool_call");
    assert!(
        calls.iter().any(|c| c["tool"] == json!("mcp:tiny/greet")),
        "{calls:#?}"
    );
    let finished = of_kind(&events, "node_finished");
    assert_eq!(
        finished[0]["output"]["text"],
        json!("The server said hello.")
    );
}

/// Attacks, no container needed: a delegate node's MCP server would run on the engine's host
/// when the run has no sandbox; a workflow server named `iterion` would pose as iterion's own
/// ask-user server. Both fail the node with `CAPABILITY_UNSUPPORTED` before the CLI or the
/// server starts (no model call, no server marker).
#[test]
fn attack_a_delegate_nodes_mcp_server_never_runs_on_the_host_nor_as_iterion() {
    for (name, wf, args, expect) in [
        (
            "on the host",
            workflow("claude_code", "anthropic/claude-test"),
            vec!["run", "w.iter", "--sandbox", "none"],
            "MCP servers run only inside the run's sandbox",
        ),
        (
            "named iterion",
            workflow("claude_code", "anthropic/claude-test")
                .replace("mcp_server tiny:", "mcp_server iterion:")
                .replace("servers: [tiny]", "servers: [iterion]"),
            vec!["run", "w.iter"],
            "the name is reserved for iterion's own server",
        ),
    ] {
        if name == "named iterion" && !docker_or_skip("cli::delegates_mcp::named_iterion") {
            continue;
        }
        let env = Env::new();
        env.write("w.iter", &wf);
        env.write("tiny-mcp.sh", SERVER);
        let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("never")]);
        let mut cmd = env.cmd();
        if let Some(bin) = std::env::var_os("ITERION_STATIC_BIN") {
            cmd.env("ITERION_BIN", bin);
        }
        let out = cmd
            .args(&args)
            .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr_of(&out));
        let run = env.only_run();
        let events = env.events(&run);
        let failed = events
            .iter()
            .find(|(k, _)| k == "node_failed")
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("{name}: {events:#?}"));
        assert_eq!(failed["code"], json!("CAPABILITY_UNSUPPORTED"), "{name}");
        assert!(
            failed["message"]
                .as_str()
                .unwrap_or_default()
                .contains(expect),
            "{name}: {failed}"
        );
        assert!(fake.requests().is_empty(), "{name}");
        let started = std::fs::read_dir(env.ws.path())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .any(|n| n.starts_with("mcp-started-on-"));
        assert!(!started, "{name}: the server ran");
        assert_eq!(env.containers(), Vec::<String>::new(), "{name}");
    }
}

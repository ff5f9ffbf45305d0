//! A delegate node asking the operator (`interaction: ask`), with the real `claude` and `codex`
//! CLIs against the fake model server: the model calls the `iterion` MCP server's `ask_user`,
//! the run pauses (exit 3) with no CLI and no sandbox left, and `iterion resume RUN --answer`
//! resumes the CLI's session with the answer, which the fake then sees.
use std::path::Path;

use iterion_test_support::fake_model::{Api, FakeModel, Recorded, Reply};
use iterion_test_support::{DELEGATES_IMAGE, delegate_clis_or_skip, static_iterion_or_skip};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, docker_or_skip, stderr_of};

const ANTHROPIC_KEY: &str = "sk-ant-Hx3pQ8wM2nR6tV9yB4kL7cJ5";
const OPENAI_KEY: &str = "sk-oai-Tg6hJ2kL9pQ4wE7rY3uI8oP5";
const QUESTION: &str = "Which environment should I deploy to?";

/// `asker` (`interaction: ask`) answers per the schema; with `then`, a second node follows.
fn workflow(backend: &str, model: &str, sandbox: &str, then: &str) -> String {
    let (edge, extra) = if then.is_empty() {
        ("  asker -> done\n".to_owned(), String::new())
    } else {
        (
            "  asker -> prober\n  prober -> done\n".to_owned(),
            format!(
                "agent prober:\n  model: \"{model}\"\n  backend: {backend}\n  user: probe\n  tools: [bash]\n  tool_max_steps: 3\n\nprompt probe:\n  {then}\n\n"
            ),
        )
    };
    format!(
        "schema verdict:\n  answer: string\n\nprompt task:\n  Deploy the service.\n\n{extra}\
         agent asker:\n  model: \"{model}\"\n  backend: {backend}\n  interaction: ask\n  user: task\n  output: verdict\n  tool_max_steps: 4\n\n\
         workflow w:\n  entry: asker\n{sandbox}{edge}"
    )
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn of_kind<'a>(events: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, v)| v)
        .collect()
}

/// What a request shows of the conversation.
fn conversation(request: &Recorded) -> String {
    format!("{}{}", request.body["messages"], request.body["input"])
}

/// The tool names a request offered.
fn offered(request: &Recorded) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().or(t["function"]["name"].as_str()))
        .map(str::to_owned)
        .collect()
}

/// Runs `run` then `resume --answer staging`, asserting the pause and the answer's way back.
/// Returns the events of the whole run.
fn pause_then_resume(
    env: &Env,
    fake: &FakeModel,
    tool: &str,
    cmd: impl Fn(&[&str]) -> std::process::Output,
) -> Vec<(String, Value)> {
    let out = cmd(&["run", "w.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}\n{events:#?}\n{:#?}",
        stderr_of(&out),
        env.logs(&run)
    );
    let paused = of_kind(&events, "run_paused");
    assert_eq!(paused.len(), 1, "{events:#?}");
    assert_eq!(paused[0]["question"], json!(QUESTION), "{paused:#?}");
    // The model was offered the tool, called it once, and was not asked again.
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert!(
        offered(&requests[0]).iter().any(|n| n == tool),
        "{:?}",
        offered(&requests[0])
    );
    let out = cmd(&["resume", run.id.as_str(), "--answer", "staging, not prod"]);
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}\n{:#?}",
        stderr_of(&out),
        env.logs(&run)
    );
    let finished = of_kind(&events, "node_finished");
    assert_eq!(
        crate::suite::delegates::answer_of(&finished[0]["output"]),
        json!({"answer": "deploying to staging"})
    );
    // The resume continued the CLI's session: the fake saw the first prompt again, the
    // question and the answer.
    let requests = fake.requests();
    let last = conversation(&requests[1]);
    assert!(
        last.contains("Deploy the service.")
            && last.contains(QUESTION)
            && last.contains("staging, not prod"),
        "{last}"
    );
    events
}

#[test]
fn claude_code_on_the_host_asks_pauses_and_resume_answers_in_its_session() {
    let Some(clis) = delegate_clis_or_skip("cli::delegates_ask::claude_code_on_the_host") else {
        return;
    };
    let env = Env::new();
    env.write(
        "w.iter",
        &workflow(
            "claude_code",
            "anthropic/claude-test",
            "  sandbox: none\n",
            "",
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("mcp__iterion__ask_user", json!({"question": QUESTION})),
            Reply::text("{\"answer\": \"deploying to staging\"}"),
        ],
    );
    // The host listener's directory goes under TMPDIR: one of this test's own, so a concurrent
    // test's live listener is not mistaken for a leftover.
    let tmp = tempfile::tempdir().unwrap();
    let events = pause_then_resume(&env, &fake, "mcp__iterion__ask_user", |args| {
        env.cmd()
            .args(args)
            .env("TMPDIR", tmp.path())
            .env("PATH", path_with(&clis))
            .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
            .timeout(std::time::Duration::from_secs(180))
            .output()
            .unwrap()
    });
    let calls = of_kind(&events, "agent_tool_call");
    assert!(
        calls
            .iter()
            .any(|c| c["tool"] == json!("mcp__iterion__ask_user")),
        "{calls:#?}"
    );
    // Nothing of the paused attempt's listener is left on the host.
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("iterion-ask-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn codex_on_the_host_asks_pauses_and_resume_answers_in_its_thread() {
    let Some(clis) = delegate_clis_or_skip("cli::delegates_ask::codex_on_the_host") else {
        return;
    };
    let env = Env::new();
    env.write(
        "w.iter",
        &workflow("codex", "openai/gpt-test", "  sandbox: none\n", ""),
    );
    let fake = FakeModel::start(
        Api::Responses,
        vec![
            // codex offers MCP tools inside a `namespace` tool, `mcp__<server>`.
            Reply::tool("mcp__iterion/ask_user", json!({"question": QUESTION})),
            Reply::text("{\"answer\": \"deploying to staging\"}"),
        ],
    );
    pause_then_resume(&env, &fake, "mcp__iterion", |args| {
        env.cmd()
            .args(args)
            .env("PATH", path_with(&clis))
            .env("OPENAI_API_KEY", OPENAI_KEY)
            .env("ITERION_OPENAI_BASE_URL", fake.base_url())
            .timeout(std::time::Duration::from_secs(180))
            .output()
            .unwrap()
    });
}

fn sandbox_block() -> String {
    format!(
        "  sandbox:\n    image: \"{DELEGATES_IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n"
    )
}

/// The prober's command: asks through the ask-user listener from the container with a wrong
/// token, as itself (a node that may not ask) with the run's token read from the asker's MCP
/// config, as the asker (no longer running), and with an oversized question.
const PROBE: &str = "cfg=/tmp/iterion-delegate/claude_code/mcp.json; \
     t=$(sed -n 's/.*\"ITERION_ASK_USER_TOKEN\":\"\\([0-9a-f]*\\)\".*/\\1/p' $cfg); \
     echo \"token-length=${#t}\" > attack.txt; \
     ask() { printf '%s\\n' \"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":1,\\\"method\\\":\\\"tools/call\\\",\\\"params\\\":{\\\"name\\\":\\\"ask_user\\\",\\\"arguments\\\":{\\\"question\\\":\\\"$3\\\"}}}\" \
       | ITERION_ASK_USER_SOCKET=/run/iterion/net/ask-user.sock ITERION_ASK_USER_TOKEN=$1 ITERION_ASK_USER_NODE=$2 /run/iterion/bin/iterion __mcp-ask-user >> attack.txt; echo >> attack.txt; }; \
     ask 0123abcd asker hi; ask \"$t\" prober hi; ask \"$t\" asker hi; \
     ask \"$t\" prober \"$(head -c 9000 /dev/zero | tr '\\0' q)\"";

#[test]
fn docker_claude_code_asks_from_the_container_and_the_listener_refuses_everyone_else() {
    if !docker_or_skip("cli::delegates_ask::docker_claude_code") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::delegates_ask::docker_claude_code") else {
        return;
    };
    let env = Env::new();
    env.write(
        "w.iter",
        &workflow(
            "claude_code",
            "anthropic/claude-test",
            &sandbox_block(),
            "Probe the listener.",
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("mcp__iterion__ask_user", json!({"question": QUESTION})),
            Reply::text("{\"answer\": \"deploying to staging\"}"),
            Reply::tool("Bash", json!({"command": PROBE, "description": "probe"})),
            Reply::text("probed"),
        ],
    );
    let events = pause_then_resume(&env, &fake, "mcp__iterion__ask_user", |args| {
        env.cmd()
            .args(args)
            .env("ITERION_BIN", &static_bin)
            .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap()
    });
    // Two attempts, two containers.
    assert_eq!(of_kind(&events, "sandbox_started").len(), 2, "{events:#?}");
    let attack = std::fs::read_to_string(env.path("attack.txt")).unwrap();
    let replies: Vec<Value> = attack
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(attack.starts_with("token-length=64\n"), "{attack}");
    let texts: Vec<(String, bool)> = replies
        .iter()
        .map(|r| {
            (
                r["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                r["result"]["isError"].as_bool().unwrap(),
            )
        })
        .collect();
    let not_running = |node: &str| {
        format!(
            "ask_user refused: node \"{node}\" may not ask: it is not an interaction: ask delegate node running now"
        )
    };
    assert_eq!(
        texts,
        vec![
            (
                "ask_user refused: the token is not this run's".to_owned(),
                true
            ),
            (not_running("prober"), true),
            (not_running("asker"), true),
            (
                "ask_user refused: the question is over 8192 bytes (9000 bytes)".to_owned(),
                true
            ),
        ]
    );
    // The refusals are in the run log; the token is in no record.
    let run = env.only_run();
    let logs = format!("{:?}", env.logs(&run));
    assert!(logs.contains("ask-user: refused a request"), "{logs}");
    assert!(!format!("{events:?}{logs}").contains(ANTHROPIC_KEY));
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_codex_asks_from_the_container_pauses_and_resume_answers_in_its_thread() {
    if !docker_or_skip("cli::delegates_ask::docker_codex") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::delegates_ask::docker_codex") else {
        return;
    };
    let env = Env::new();
    env.write(
        "w.iter",
        &workflow("codex", "openai/gpt-test", &sandbox_block(), ""),
    );
    let fake = FakeModel::start(
        Api::Responses,
        vec![
            Reply::tool("mcp__iterion/ask_user", json!({"question": QUESTION})),
            Reply::text("{\"answer\": \"deploying to staging\"}"),
        ],
    );
    let events = pause_then_resume(&env, &fake, "mcp__iterion", |args| {
        env.cmd()
            .args(args)
            .env("ITERION_BIN", &static_bin)
            .env("OPENAI_API_KEY", OPENAI_KEY)
            .env("ITERION_OPENAI_BASE_URL", fake.base_url())
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap()
    });
    assert_eq!(of_kind(&events, "sandbox_started").len(), 2, "{events:#?}");
    assert!(!format!("{events:?}").contains(OPENAI_KEY));
    assert_eq!(env.containers(), Vec::<String>::new());
}

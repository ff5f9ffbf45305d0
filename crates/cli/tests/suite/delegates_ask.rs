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
/// token, as itself (a node that may not ask) with the run's token and run id read from the
/// asker's MCP config, as the asker (no longer running), and with an oversized question.
const PROBE: &str = "cfg=/tmp/iterion-delegate/claude_code/mcp.json; \
     t=$(sed -n 's/.*\"ITERION_ASK_USER_TOKEN\":\"\\([0-9a-f]*\\)\".*/\\1/p' $cfg); \
     run=$(sed -n 's/.*\"ITERION_ASK_USER_RUN\":\"\\([0-9a-f-]*\\)\".*/\\1/p' $cfg); \
     echo \"token-length=${#t}\" > attack.txt; \
     ask() { printf '%s\\n' \"{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":1,\\\"method\\\":\\\"tools/call\\\",\\\"params\\\":{\\\"name\\\":\\\"ask_user\\\",\\\"arguments\\\":{\\\"question\\\":\\\"$3\\\"}}}\" \
       | ITERION_ASK_USER_SOCKET=/run/iterion/net/ask-user.sock ITERION_ASK_USER_TOKEN=$1 ITERION_ASK_USER_RUN=$run ITERION_ASK_USER_NODE=$2 /run/iterion/bin/iterion __mcp-ask-user >> attack.txt; echo >> attack.txt; }; \
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
    let run = env.only_run();
    let not_running = |node: &str| {
        format!(
            "ask_user refused: node \"{node}\" of run \"{}\" may not ask: it is not an interaction: ask delegate node running now",
            run.id
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

/// `p.iter` runs `c.iter` (the asker; with no `child_sandbox` block it adopts its parent's
/// sandbox) as subbot `kid`; `then` follows the subbot in the parent (a bash probe node of the
/// same backend), when given.
fn parent_and_child(
    env: &Env,
    (backend, model): (&str, &str),
    (sandbox, child_sandbox): (&str, &str),
    then: &str,
) {
    env.write("c.iter", &workflow(backend, model, child_sandbox, ""));
    let (edge, extra) = if then.is_empty() {
        ("  kid -> done\n".to_owned(), String::new())
    } else {
        (
            "  kid -> prober\n  prober -> done\n".to_owned(),
            format!(
                "agent prober:\n  model: \"{model}\"\n  backend: {backend}\n  user: probe\n  tools: [bash]\n  tool_max_steps: 3\n\nprompt probe:\n  {then}\n\n"
            ),
        )
    };
    env.write(
        "p.iter",
        &format!(
            "schema verdict:\n  answer: string\n\n{extra}subbot kid:\n  source: \"c.iter\"\n  output: verdict\n\nworkflow p:\n  entry: kid\n{sandbox}{edge}"
        ),
    );
}

/// A run's events, kind and body, in order.
type Events = Vec<(String, Value)>;

/// Runs `p.iter` (a parent whose adopted child asks), checks the pause travels up and that only
/// the parent's resume answers the child, in the child's own record; returns the parent's and
/// the child's events.
fn child_pause_then_resume(
    env: &Env,
    fake: &FakeModel,
    cmd: impl Fn(&[&str]) -> std::process::Output,
) -> (Events, Events) {
    let out = cmd(&["run", "p.iter"]);
    let runs = env.runs();
    assert_eq!(runs.len(), 2, "{}\n{runs:#?}", stderr_of(&out));
    let parent = runs
        .iter()
        .find(|r| r.parent_run_id.is_none())
        .unwrap()
        .clone();
    let child = runs
        .iter()
        .find(|r| r.parent_run_id.is_some())
        .unwrap()
        .clone();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}\n{:#?}\n{:#?}\n{:#?}",
        stderr_of(&out),
        env.events(&parent),
        env.events(&child),
        env.logs(&parent)
    );
    // The parent paused on the child's question, at its subbot node; the child paused too.
    let paused = of_kind(&env.events(&parent), "run_paused")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(paused.len(), 1, "{paused:#?}");
    assert_eq!(
        (&paused[0]["node"], &paused[0]["question"]),
        (&json!("kid"), &json!(QUESTION))
    );
    let child_paused = of_kind(&env.events(&child), "run_paused")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(child_paused[0]["node"], json!("asker"), "{child_paused:#?}");
    assert_eq!(
        env.runs()
            .iter()
            .map(|r| r.status.to_string())
            .collect::<Vec<_>>(),
        vec!["paused", "paused"]
    );
    assert_eq!(fake.requests().len(), 1);
    // The child is not answered on its own: its parent is.
    let out = cmd(&["resume", child.id.as_str(), "--answer", "prod"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr_of(&out).contains(&format!(
            "is a subbot child that paused its parent {} with it; `iterion resume {} --answer TEXT` answers it",
            parent.id, parent.id
        )),
        "{}",
        stderr_of(&out)
    );
    let out = cmd(&[
        "resume",
        parent.id.as_str(),
        "--answer",
        "staging, not prod",
    ]);
    let (parent_events, child_events) = (env.events(&parent), env.events(&child));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{parent_events:#?}\n{child_events:#?}\n{:#?}",
        stderr_of(&out),
        env.logs(&parent)
    );
    // The same child record was resumed (no third run), from its asking node, and finished.
    assert_eq!(env.runs().len(), 2, "{:#?}", env.runs());
    let started = of_kind(&child_events, "run_started");
    assert_eq!(
        started
            .iter()
            .map(|s| s["resumed"].clone())
            .collect::<Vec<_>>(),
        vec![json!(false), json!(true)],
        "{started:#?}"
    );
    assert_eq!(
        of_kind(&child_events, "run_finished").len(),
        1,
        "{child_events:#?}"
    );
    let finished = of_kind(&child_events, "node_finished");
    assert_eq!(finished.len(), 1, "{finished:#?}");
    assert_eq!(
        crate::suite::delegates::answer_of(&finished[0]["output"]),
        json!({"answer": "deploying to staging"})
    );
    // The child's CLI session was continued with the answer.
    let requests = fake.requests();
    let resumed = conversation(&requests[1]);
    assert!(
        resumed.contains("Deploy the service.")
            && resumed.contains(QUESTION)
            && resumed.contains("staging, not prod"),
        "{resumed}"
    );
    (parent_events, child_events)
}

/// A claude_code child of a host parent (`sandbox: none`), its own sandbox line
/// `child_sandbox`, paused by its ask_user and answered by the parent's resume: the parent's and
/// the child's events, or `None` when the CLIs are missing (a failure under CI).
fn claude_code_child_on_the_host(test: &str, child_sandbox: &str) -> Option<(Events, Events)> {
    let clis = delegate_clis_or_skip(test)?;
    let env = Env::new();
    parent_and_child(
        &env,
        ("claude_code", "anthropic/claude-test"),
        ("  sandbox: none\n", child_sandbox),
        "",
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("mcp__iterion__ask_user", json!({"question": QUESTION})),
            Reply::text("{\"answer\": \"deploying to staging\"}"),
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    Some(child_pause_then_resume(&env, &fake, |args| {
        env.cmd()
            .args(args)
            .env("TMPDIR", tmp.path())
            .env("PATH", path_with(&clis))
            .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
            .timeout(std::time::Duration::from_secs(180))
            .output()
            .unwrap()
    }))
}

#[test]
fn claude_code_in_an_adopted_child_on_the_host_pauses_its_parent_and_the_parents_resume_answers() {
    let Some((parent, _)) =
        claude_code_child_on_the_host("cli::delegates_ask::claude_code_child_on_the_host", "")
    else {
        return;
    };
    assert_eq!(of_kind(&parent, "run_finished").len(), 1, "{parent:#?}");
}

#[test]
fn claude_code_in_a_declaring_child_on_the_host_pauses_its_parent_and_the_parents_resume_answers() {
    // `sandbox: none` in the child is a declaration (mode=none): a launch of its own, with its
    // own listener.
    let Some((parent, child)) = claude_code_child_on_the_host(
        "cli::delegates_ask::claude_code_declaring_child_on_the_host",
        "  sandbox: none\n",
    ) else {
        return;
    };
    assert_eq!(of_kind(&parent, "run_finished").len(), 1, "{parent:#?}");
    let shared = of_kind(&child, "sandbox_shared");
    assert!(
        !shared.is_empty() && shared.iter().all(|s| s["adopted"] == json!(false)),
        "{shared:#?}"
    );
}

/// The prober (a parent node, after the child ended) asks through the listener, with the token
/// and the child's run id read from the child asker's MCP config, as the child's asker (no
/// longer running) and as itself under the child's run id: both refused.
const CHILD_PROBE: &str = "cfg=/tmp/iterion-delegate/claude_code/mcp.json; \
     t=$(sed -n 's/.*\"ITERION_ASK_USER_TOKEN\":\"\\([0-9a-f]*\\)\".*/\\1/p' $cfg); \
     kid=$(sed -n 's/.*\"ITERION_ASK_USER_RUN\":\"\\([0-9a-f-]*\\)\".*/\\1/p' $cfg); \
     echo \"kid=${#kid}\" > attack.txt; \
     ask() { printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"ask_user\",\"arguments\":{\"question\":\"hi\"}}}' \
       | ITERION_ASK_USER_SOCKET=/run/iterion/net/ask-user.sock ITERION_ASK_USER_TOKEN=$t ITERION_ASK_USER_RUN=$1 ITERION_ASK_USER_NODE=$2 /run/iterion/bin/iterion __mcp-ask-user >> attack.txt; echo >> attack.txt; }; \
     ask \"$kid\" asker; ask \"$kid\" prober";

#[test]
fn docker_claude_code_in_an_adopted_child_asks_through_its_parents_listener() {
    if !docker_or_skip("cli::delegates_ask::docker_claude_code_child") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::delegates_ask::docker_claude_code_child")
    else {
        return;
    };
    let env = Env::new();
    parent_and_child(
        &env,
        ("claude_code", "anthropic/claude-test"),
        (&sandbox_block(), ""),
        "Probe the listener.",
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("mcp__iterion__ask_user", json!({"question": QUESTION})),
            Reply::text("{\"answer\": \"deploying to staging\"}"),
            Reply::tool(
                "Bash",
                json!({"command": CHILD_PROBE, "description": "probe"}),
            ),
            Reply::text("probed"),
        ],
    );
    let (parent, child) = child_pause_then_resume(&env, &fake, |args| {
        env.cmd()
            .args(args)
            .env("ITERION_BIN", &static_bin)
            .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap()
    });
    // One container per attempt of the parent; the child adopted it (no container of its own).
    assert_eq!(of_kind(&parent, "sandbox_started").len(), 2, "{parent:#?}");
    assert_eq!(of_kind(&child, "sandbox_started").len(), 0, "{child:#?}");
    let shared = of_kind(&child, "sandbox_shared");
    assert!(
        shared
            .iter()
            .all(|s| s["adopted"] == json!(true) && s["ask_user_inherited"] == json!(true)),
        "{shared:#?}"
    );
    // No adoption warning about a missing listener.
    let run = env
        .runs()
        .into_iter()
        .find(|r| r.parent_run_id.is_none())
        .unwrap();
    let logs = format!("{:?}", env.logs(&run));
    assert!(!logs.contains("no ask-user listener"), "{logs}");
    let attack = std::fs::read_to_string(env.path("attack.txt")).unwrap();
    let mut lines = attack.lines().filter(|l| !l.trim().is_empty());
    assert_eq!(lines.next(), Some("kid=36"), "{attack}");
    let texts: Vec<String> = lines
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["result"]["isError"], json!(true), "{v}");
            v["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(texts.len(), 2, "{attack}");
    assert!(
        texts
            .iter()
            .all(|t| t
                .contains("may not ask: it is not an interaction: ask delegate node running now")),
        "{texts:#?}"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

//! Agent nodes on the host (`--sandbox none`), driven by the fake model server: the loop, the
//! tools, structured output, retries, the launch check and `ask_user`'s pause and resume.
use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, first, kinds, stderr_of};

const KEY: &str = "sk-test-0123456789abcdef";

fn agent_workflow(model: &str, extra: &str) -> String {
    format!(
        "prompt sys:\n  You are careful.\n\nprompt task:\n  Write hello.txt for {{{{vars.who}}}}.\n\nvars:\n  who: string = \"ada\"\n\n{extra}agent writer:\n  model: \"{model}\"\n  system: sys\n  user: task\n  tools: [write_file, read_file]\n  tool_max_steps: 3\n\nworkflow w:\n  entry: writer\n  writer -> done\n"
    )
}

fn run_with(env: &Env, fake: &FakeModel, provider_env: &[(&str, String)]) -> std::process::Output {
    let mut cmd = env.cmd();
    cmd.args(["run", "w.iter", "--sandbox", "none", "--json"]);
    for (k, v) in provider_env {
        cmd.env(k, v);
    }
    let _ = fake;
    cmd.output().unwrap()
}

fn anthropic_env(fake: &FakeModel) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_API_KEY", KEY.to_owned()),
        ("ITERION_ANTHROPIC_BASE_URL", fake.base_url()),
    ]
}

#[test]
fn an_agent_writes_a_file_with_its_tool_and_finishes_with_its_text_and_usage() {
    let env = Env::new();
    env.write("w.iter", &agent_workflow("anthropic/claude-test", ""));
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool(
                "write_file",
                json!({"path": "out/hello.txt", "content": "hello ada\n"}),
            ),
            Reply::text("all done"),
        ],
    );
    let out = run_with(&env, &fake, &anthropic_env(&fake));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(env.path("out/hello.txt")).unwrap(),
        "hello ada\n"
    );
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        first(&events, "node_finished").unwrap()["output"],
        json!({"text": "all done"})
    );
    assert_eq!(
        first(&events, "node_finished").unwrap()["usage"],
        json!({"input_tokens": 20, "output_tokens": 10})
    );
    assert_eq!(
        first(&events, "node_started").unwrap()["kind"],
        json!("agent")
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some(KEY));
    assert_eq!(requests[0].body["model"], json!("claude-test"));
    assert_eq!(requests[0].body["system"], json!("You are careful."));
    assert_eq!(
        requests[0].body["messages"][0],
        json!({"role": "user", "content": "Write hello.txt for ada."})
    );
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, vec!["write_file", "read_file"]);
    assert_eq!(
        requests[1].body["messages"][2]["content"][0]["content"],
        json!("wrote 10 bytes to out/hello.txt")
    );
    // The loop's notes are in the run log, not in events (SANDBOX.md §9.1 lists none).
    let notes: Vec<String> = env
        .logs(&run)
        .into_iter()
        .filter_map(|(_, line)| {
            line.strip_prefix("[writer] claw: ")
                .map(|l| l.split(' ').next().unwrap_or_default().to_owned())
        })
        .collect();
    assert_eq!(
        notes,
        vec![
            "llm_request",
            "llm_step_finished",
            "tool_started",
            "tool_called",
            "llm_request",
            "llm_step_finished"
        ]
    );
    // The key is in no event and no log line.
    assert!(!serde_json::to_string(&events).unwrap().contains(KEY));
    assert!(!format!("{:?}", env.logs(&run)).contains(KEY));
}

#[test]
fn a_missing_key_refuses_the_launch_naming_the_variable() {
    let env = Env::new();
    env.write("w.iter", &agent_workflow("anthropic/claude-test", ""));
    let out = env
        .cmd()
        .env_remove("ANTHROPIC_API_KEY")
        .args(["run", "w.iter", "--sandbox", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains(
            "node \"writer\" uses model anthropic/claude-test; set ANTHROPIC_API_KEY in the environment"
        ),
        "{}",
        stderr_of(&out)
    );
    assert!(env.runs().is_empty());
}

#[test]
fn structured_output_gets_one_correction_then_conforms() {
    let env = Env::new();
    env.write(
        "w.iter",
        &agent_workflow(
            "openai/gpt-test",
            "schema verdict:\n  ok: bool\n  n: int\n\n",
        )
        .replace(
            "  tool_max_steps: 3\n",
            "  tool_max_steps: 3\n  output: verdict\n",
        ),
    );
    let fake = FakeModel::start(
        Api::OpenAi,
        vec![
            Reply::text("I think it is fine."),
            Reply::text("```json\n{\"ok\": true, \"n\": 2.0}\n```"),
        ],
    );
    let out = run_with(
        &env,
        &fake,
        &[
            ("OPENAI_API_KEY", KEY.to_owned()),
            ("ITERION_OPENAI_BASE_URL", fake.base_url()),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], json!({"ok": true, "n": 2}));
    let requests = fake.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let correction = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        correction,
        json!({"role": "user", "content": "Your answer does not conform to the output schema \"verdict\": the answer holds no JSON object. Answer again with only a JSON object with the fields ok: bool, n: int."})
    );
    assert_eq!(requests[1].body["tool_choice"], json!("none"));
}

#[test]
fn structured_output_that_never_conforms_fails_with_schema_validation() {
    let env = Env::new();
    env.write(
        "w.iter",
        &agent_workflow("anthropic/claude-test", "schema verdict:\n  ok: bool\n\n").replace(
            "  tool_max_steps: 3\n",
            "  tool_max_steps: 3\n  output: verdict\n",
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![Reply::text("{\"ok\": 1}"), Reply::text("{\"ok\": \"yes\"}")],
    );
    let out = run_with(&env, &fake, &anthropic_env(&fake));
    assert_eq!(out.status.code(), Some(1));
    let run = env.only_run();
    assert_eq!(run.status.as_str(), "failed_resumable");
    assert_eq!(run.failure_code.as_deref(), Some("SCHEMA_VALIDATION"));
    assert_eq!(
        first(&env.events(&run), "node_failed").unwrap()["message"],
        json!(
            "the final answer does not conform to schema \"verdict\" after one correction: field \"ok\" must be bool, found string"
        )
    );
}

#[test]
fn a_429_is_retried_after_its_retry_after_and_a_400_is_not() {
    let env = Env::new();
    env.write("w.iter", &agent_workflow("anthropic/claude-test", ""));
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::Status(429, Some(0)),
            Reply::Status(503, Some(0)),
            Reply::text("ok"),
        ],
    );
    let out = run_with(&env, &fake, &anthropic_env(&fake));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(fake.requests().len(), 3);

    let env = Env::new();
    env.write("w.iter", &agent_workflow("anthropic/claude-test", ""));
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::Status(400, None)]);
    let out = run_with(&env, &fake, &anthropic_env(&fake));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(fake.requests().len(), 1);
    let run = env.only_run();
    assert_eq!(run.failure_code.as_deref(), Some("EXECUTION_FAILED"));
}

#[test]
fn a_tool_outside_the_allowlist_is_refused_and_tool_max_steps_withdraws_tools() {
    let env = Env::new();
    env.write("w.iter", &agent_workflow("anthropic/claude-test", ""));
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("bash", json!({"command": "touch pwned"})),
            Reply::tool("read_file", json!({"path": "../../etc/passwd"})),
            Reply::tool("read_file", json!({"path": "w.iter"})),
            // The fourth request has tools withdrawn; a call in its answer is ignored.
            Reply::tool("write_file", json!({"path": "late", "content": "x"})),
        ],
    );
    let out = run_with(&env, &fake, &anthropic_env(&fake));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(!env.path("pwned").exists());
    assert!(!env.path("late").exists());
    let requests = fake.requests();
    assert_eq!(requests.len(), 4);
    let result = |i: usize| requests[i].body["messages"][2 * i]["content"][0].clone();
    assert_eq!(
        (result(1)["content"].clone(), result(1)["is_error"].clone()),
        (
            json!("tool \"bash\" is not available to this node"),
            json!(true)
        )
    );
    assert_eq!(
        result(2)["content"],
        json!("path \"../../etc/passwd\" resolves outside the workspace")
    );
    assert_eq!(requests[3].body["tool_choice"], json!({"type": "none"}));
    assert_eq!(requests[2].body.get("tool_choice"), None);
}

#[test]
fn a_tool_this_release_lacks_compiles_with_a_warning_and_fails_the_node_before_any_model_call() {
    // Upstream resolves tool names only when a node runs, so its files name claw tools this
    // release does not have; they compile (C922), and the node fails before the model is asked.
    let env = Env::new();
    let wf = agent_workflow("anthropic/claude-test", "").replace(
        "tools: [write_file, read_file]",
        "tools: [read_file, web_search, agent]",
    );
    env.write("w.iter", &wf);
    let checked = env
        .cmd()
        .args(["validate", "w.iter", "--json"])
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(0), "{}", stderr_of(&checked));
    let report: Value = serde_json::from_slice(&checked.stdout).unwrap();
    let codes: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, vec!["C922", "C922"], "{report}");
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("never asked")]);
    let out = run_with(&env, &fake, &anthropic_env(&fake));
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["failure_code"],
        json!("CAPABILITY_UNSUPPORTED"),
        "{summary}"
    );
    let message = summary["message"].as_str().unwrap();
    assert!(
        message.contains("\"web_search\", \"agent\"") && message.contains("tools:"),
        "{message}"
    );
    assert_eq!(fake.requests().len(), 0);
}

#[test]
fn ask_user_pauses_the_run_and_resume_answers_it() {
    let env = Env::new();
    env.write(
        "w.iter",
        &agent_workflow("anthropic/claude-test", "").replace(
            "  tool_max_steps: 3\n",
            "  tool_max_steps: 3\n  interaction: ask\n",
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool(
                "ask_user",
                json!({"question": "Which greeting?", "options": ["hello", "hi"]}),
            ),
            Reply::text("used hi"),
        ],
    );
    let out = run_with(&env, &fake, &anthropic_env(&fake));
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let run = env.only_run();
    assert_eq!(run.status.as_str(), "paused");
    let events = env.events(&run);
    assert_eq!(kinds(&events).last(), Some(&"run_paused"));
    assert_eq!(
        first(&events, "run_paused").unwrap(),
        &json!({"node": "writer", "question": "Which greeting?", "options": ["hello", "hi"]})
    );
    assert!(first(&events, "node_failed").is_none());

    let out = env
        .cmd()
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .args(["resume", run.id.as_str(), "--answer", "hi", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], json!({"text": "used hi"}));
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let answer = &requests[1].body["messages"][2]["content"][0];
    assert_eq!(answer["tool_use_id"], json!("toolu_1_0"));
    assert_eq!(answer["content"], json!("hi"));
    assert_eq!(env.only_run().status.as_str(), "finished");
}

/// The hidden runner itself: a 5 MiB line, a malformed envelope and an unknown envelope before
/// `task` each end it with a typed `result` and exit 2, never a hang (SANDBOX.md §13.1–§13.2).
#[test]
fn the_claw_runner_ends_with_a_typed_error_on_bad_input_without_hanging() {
    let mut big = b"{\"type\":\"task\",\"data\":\"".to_vec();
    big.resize(5 * 1024 * 1024, b'x');
    big.extend_from_slice(b"\"}\n");
    let cases: [(Vec<u8>, &str); 3] = [
        (
            big,
            "envelope line over 4194304 bytes [RUNNER_LINE_TOO_LONG] before task",
        ),
        (
            b"{\"type\": \"task\", \"data\": {\n".to_vec(),
            "malformed envelope: EOF while parsing an object at line 1 column 26 [RUNNER_ENVELOPE_MALFORMED] before task",
        ),
        (
            b"{\"type\":\"result\"}\n".to_vec(),
            "unexpected envelope \"result\" before task",
        ),
    ];
    for (input, expected) in cases {
        let out = assert_cmd::Command::cargo_bin("iterion")
            .unwrap()
            .arg("__claw-runner")
            .write_stdin(input)
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let line: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            line,
            json!({"type": "result", "data": {"output": null, "error": expected}})
        );
    }
}

/// On an interactive terminal `ask_user` asks there and the run goes on (DSL.md §6.2). The
/// terminal is a pty from util-linux `script`.
#[test]
fn on_an_interactive_terminal_ask_user_asks_there_and_the_run_goes_on() {
    use std::io::{Read as _, Write as _};
    let env = Env::new();
    env.write(
        "w.iter",
        "prompt task:\n  Ask.\n\nagent asker:\n  model: \"anthropic/claude-test\"\n  user: task\n  interaction: ask\n\nworkflow w:\n  entry: asker\n  asker -> done\n",
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("ask_user", json!({"question": "Which colour?"})),
            Reply::text("painted"),
        ],
    );
    let bin = assert_cmd::cargo::cargo_bin("iterion");
    let mut child = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{} run w.iter --sandbox none", bin.display()),
            "/dev/null",
        ])
        .env("ITERION_HOME", env.home.path())
        .env("RUST_LOG", "error")
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .env_remove("ITERION_SANDBOX_DEFAULT")
        .current_dir(env.ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux script (a pty for the test)");
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !String::from_utf8_lossy(&seen).contains("Which colour?") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => panic!(
                "no question on the terminal: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    child.stdin.as_mut().unwrap().write_all(b"green\n").unwrap();
    let status = child.wait().unwrap();
    while let Ok(chunk) = rx.recv_timeout(std::time::Duration::from_secs(2)) {
        seen.extend(chunk);
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(text.contains("[asker] Which colour?"), "{text}");
    assert_eq!(env.only_run().status.as_str(), "finished");
    let requests = fake.requests();
    assert_eq!(
        requests[1].body["messages"][2]["content"][0]["content"],
        json!("green")
    );
}

//! The claw tools of issue 20 (`web_fetch`, `read_image`, `sleep`, `todo_write`,
//! `structured_output`, `send_user_message`) run by a claw agent against the fake model server:
//! on the host from `examples/17_claw_tools.iter`, and inside a docker sandbox, where `web_fetch`
//! leaves only through the run's proxy and its allowlist holds.
use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::egress::{runtime_dir, upstream};
use crate::suite::support::{Env, IMAGE, docker_or_skip, first, stderr_of};

const KEY: &str = "sk-ant-real-key-0123456789abcdef";

/// A 1×1 PNG.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\0\x05\0\x01\xff\x89\x99=\x1d\0\0\0\0IEND\xaeB`\x82";

/// The text of `examples/NAME`.
fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The tool results of the request the fake got at `index`, as `(content, is_error)`.
fn tool_results(body: &Value) -> Vec<(Value, bool)> {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| {
                    (
                        b["content"].clone(),
                        b["is_error"].as_bool().unwrap_or(false),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn docker_web_fetch_leaves_through_the_proxy_and_the_allowlist_holds_read_image_reaches_the_model()
{
    if !docker_or_skip("cli::claw_tools::docker_web_fetch") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::claw_tools::docker_web_fetch") else {
        return;
    };
    let env = Env::new();
    let port = upstream();
    let xdg = runtime_dir(&env);
    std::fs::write(env.path("shot.png"), PNG).unwrap();
    env.write(
        "w.iter",
        &format!(
            "agent worker:\n  model: \"anthropic/claude-test\"\n  user: \"Fetch.\"\n  tools: [web_fetch, read_image, todo_write, sleep]\n\nworkflow w:\n  entry: worker\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"allowed.test:{port}\", \"127.0.0.1/32:{port}\"]\n  worker -> done\n"
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::Tools(vec![
                (
                    "web_fetch".into(),
                    json!({"url": format!("http://allowed.test:{port}/hello")}),
                ),
                // Same address, a name the policy does not allow: refused by the proxy.
                (
                    "web_fetch".into(),
                    json!({"url": format!("http://denied.test:{port}/secret")}),
                ),
                // The cloud metadata address: never allowed.
                (
                    "web_fetch".into(),
                    json!({"url": "http://169.254.169.254/latest/meta-data/"}),
                ),
                ("read_image".into(), json!({"path": "shot.png"})),
                (
                    "todo_write".into(),
                    json!({"action": "write", "todos": [{"content": "fetch", "status": "completed"}]}),
                ),
                ("sleep".into(), json!({"duration_ms": 5})),
            ]),
            Reply::text("fetched"),
        ],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env(
            "ITERION_SANDBOX_PROXY_HOSTS",
            "allowed.test=127.0.0.1,denied.test=127.0.0.1",
        )
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}\n{:#?}",
        stderr_of(&out),
        env.logs(&run)
    );
    assert!(first(&events, "sandbox_claw_routed_via_runner").is_some());
    let requests = fake.requests();
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 6, "{:#}", requests[1].body);
    // The allowed name reached the upstream through the proxy (absolute-form request line).
    assert_eq!(
        results[0],
        (
            json!("status: 200\ncontent-type: \n\nupstream:GET_/hello_HTTP/1.1\n"),
            false
        )
    );
    // The other two were refused by the proxy's policy, and the model was told.
    for (content, is_error) in &results[1..3] {
        let text = content.as_str().unwrap_or_default();
        assert!(*is_error, "{text}");
        assert!(!text.contains("upstream:"), "{text}");
    }
    let denied = results[1].0.as_str().unwrap_or_default();
    assert!(denied.starts_with("status: 403"), "{denied}");
    let blocked: Vec<&Value> = events
        .iter()
        .filter(|(k, _)| k == "network_blocked")
        .map(|(_, d)| &d["host"])
        .collect();
    assert!(blocked.contains(&&json!("denied.test")), "{blocked:?}");
    // The image went to the model as an image block, from inside the container.
    assert_eq!(
        results[3].0[1]["source"]["media_type"],
        json!("image/png"),
        "{:#}",
        results[3].0
    );
    assert_eq!(
        results[4],
        (
            json!(r#"[{"content":"fetch","id":"1","status":"completed"}]"#),
            false
        )
    );
    assert!(!results[5].1, "{:?}", results[5]);
}

#[test]
fn the_claw_tools_example_runs_on_the_host_against_the_fake_model() {
    let env = Env::new();
    env.write("w.iter", &example("17_claw_tools.iter"));
    std::fs::write(env.path("diagram.png"), PNG).unwrap();
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            // planner: no user prompt, so its input is the user message.
            Reply::Tools(vec![
                (
                    "todo_write".into(),
                    json!({"action": "write", "todos": [
                        {"content": "read the notes", "status": "completed"},
                        {"content": "look at the diagram", "status": "in_progress"}]}),
                ),
                ("read_image".into(), json!({"path": "diagram.png"})),
                ("sleep".into(), json!({"duration_ms": 1})),
                (
                    "send_user_message".into(),
                    json!({"message": "diagram checked", "attachments": ["diagram.png"]}),
                ),
                ("structured_output".into(), json!({"payload": {"steps": 2}})),
            ]),
            Reply::text(r#"{"steps": 2, "summary": "notes read, diagram checked"}"#),
        ],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
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
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The compute node's arithmetic and its published artifact, read by the tool node.
    assert_eq!(
        summary["output"],
        json!({"line": "plan: 2 steps, 3 with review; notes read, diagram checked"})
    );
    let published: Vec<&Value> = events
        .iter()
        .filter(|(k, _)| k == "artifact_published")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        published
            .iter()
            .map(|d| (d["name"].clone(), d["node"].clone()))
            .collect::<Vec<_>>(),
        [
            (json!("estimate"), json!("estimate")),
            (json!("report"), json!("report"))
        ]
    );
    let requests = fake.requests();
    // No user prompt: the planner's user message is its input, as JSON.
    assert_eq!(
        requests[0].body["messages"][0]["content"],
        json!(r#"{"topic":"the Friday release"}"#)
    );
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 5, "{:#}", requests[1].body);
    assert!(results.iter().all(|(_, e)| !e), "{results:#?}");
    assert_eq!(results[1].0[1]["type"], json!("image"));
    assert_eq!(
        serde_json::from_str::<Value>(results[4].0.as_str().unwrap()).unwrap(),
        json!({"data": "Structured output provided successfully", "structured_output": {"payload": {"steps": 2}}})
    );
    // Nothing was written to the workspace by todo_write.
    assert!(!env.path(".claude").exists());
}

/// The calls the gate example's fake model makes: one allowed, three refused.
fn gate_script() -> Vec<Reply> {
    vec![
        Reply::Tools(vec![
            ("bash".into(), json!({"command": "echo hello"})),
            ("bash".into(), json!({"command": "echo hi; touch pwned"})),
            ("read_file".into(), json!({"path": "sub/../.env"})),
            (
                "write_file".into(),
                json!({"path": "x.txt", "content": "x"}),
            ),
        ]),
        Reply::text("looked"),
    ]
}

/// What the gate example's run must show: the allowed call ran, the others were refused with
/// the reason and left nothing behind.
fn assert_gated(env: &Env, fake: &FakeModel) {
    let requests = fake.requests();
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 4, "{:#}", requests[1].body);
    assert!(!results[0].1, "{:?}", results[0]);
    assert!(
        results[0].0.to_string().contains("hello"),
        "{:?}",
        results[0]
    );
    for (content, is_error) in &results[1..] {
        let text = content.as_str().unwrap_or_default();
        assert!(*is_error, "{text}");
        assert!(text.starts_with("permission denied: "), "{text}");
        assert!(!text.contains("TOPSECRET"), "{text}");
    }
    assert!(!env.path("pwned").exists(), "a refused command ran");
    assert!(!env.path("x.txt").exists(), "a refused write ran");
}

#[test]
fn attack_the_permission_gate_refuses_what_its_rules_do_not_allow_on_the_host() {
    let env = Env::new();
    env.write("w.iter", &example("23_permission_gate.iter"));
    env.write(".env", "API_TOKEN=TOPSECRET\n");
    let fake = FakeModel::start(Api::Anthropic, gate_script());
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_gated(&env, &fake);
}

#[test]
fn docker_attack_the_permission_gate_holds_inside_the_sandboxs_runner() {
    if !docker_or_skip("cli::claw_tools::docker_attack_the_permission_gate") {
        return;
    }
    let Some(static_bin) =
        static_iterion_or_skip("cli::claw_tools::docker_attack_the_permission_gate")
    else {
        return;
    };
    let env = Env::new();
    let port_rule = |fake: &FakeModel| format!("127.0.0.1/32:{}", fake.port());
    let fake = FakeModel::start(Api::Anthropic, gate_script());
    let xdg = runtime_dir(&env);
    let wf = example("23_permission_gate.iter").replace(
        "  permission: deny\n",
        &format!(
            "  permission: deny\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"{}\"]\n",
            port_rule(&fake)
        ),
    );
    env.write("w.iter", &wf);
    env.write(".env", "API_TOKEN=TOPSECRET\n");
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
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
    assert!(first(&events, "sandbox_claw_routed_via_runner").is_some());
    assert_gated(&env, &fake);
}

//! The runner driven in process over duplex pipes, against the fake model server.
use std::time::Duration;

use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader, DuplexStream};

use super::*;
use crate::envelope::MAX_LINE;

struct Harness {
    to_runner: DuplexStream,
    from_runner: EnvelopeReader<BufReader<DuplexStream>>,
    runner: tokio::task::JoinHandle<i32>,
}

fn start() -> Harness {
    // The runner must dial the fake directly, not through a proxy from the developer's
    // environment: it is given an empty one.
    let (to_runner, runner_in) = tokio::io::duplex(1024 * 1024);
    let (runner_out, from_runner) = tokio::io::duplex(1024 * 1024);
    let runner = tokio::spawn(async move {
        serve(
            BufReader::new(runner_in),
            runner_out,
            &crate::test_shell::ProcessShell,
            &iterion_vocab::Environment::empty(),
        )
        .await
    });
    Harness {
        to_runner,
        from_runner: EnvelopeReader::new(BufReader::new(from_runner)),
        runner,
    }
}

impl Harness {
    async fn send(&mut self, kind: &str, data: Option<Value>) {
        let line = encode_line(&Envelope {
            kind: kind.to_owned(),
            id: None,
            data,
        })
        .unwrap();
        self.to_runner.write_all(&line).await.unwrap();
    }

    async fn next(&mut self) -> Envelope {
        tokio::time::timeout(Duration::from_secs(10), self.from_runner.next())
            .await
            .expect("the runner answers within 10 s")
            .unwrap()
    }

    async fn exit(self) -> i32 {
        tokio::time::timeout(Duration::from_secs(10), self.runner)
            .await
            .expect("the runner exits within 10 s")
            .unwrap()
    }
}

use crate::envelope::encode_line;

fn task(base_url: &str, workdir: &str, tools: Vec<ToolSpec>) -> Value {
    serde_json::to_value(TaskData {
        node_id: "n".into(),
        model: "anthropic/claude-test".into(),
        system: None,
        prompt: "go".into(),
        tools,
        max_turns: Some(5),
        workdir: workdir.into(),
        interaction: "ask".into(),
        base_url: base_url.into(),
        api_key: "__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__".into(),
        output: None,
        run_id: "r".into(),
        mcp_servers: vec![],
        generation: Default::default(),
        tool_gate: None,
    })
    .unwrap()
}

async fn fatal_result(mut h: Harness) -> (String, i32) {
    let result = h.next().await;
    assert_eq!(result.kind, "result");
    let error = result.data.unwrap()["error"].as_str().unwrap().to_owned();
    (error, h.exit().await)
}

#[tokio::test]
async fn an_unknown_envelope_before_task_is_fatal_and_no_model_is_called() {
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("never")]);
    let mut h = start();
    h.send("gateway_v1", None).await;
    h.send("tool_result", Some(json!({"output": "x"}))).await;
    h.send("task", Some(task(&fake.base_url(), "/tmp", vec![])))
        .await;
    assert_eq!(
        fatal_result(h).await,
        (
            "unexpected envelope \"tool_result\" before task".to_owned(),
            FATAL_EXIT
        )
    );
    assert_eq!(fake.requests().len(), 0);
}

#[tokio::test]
async fn bootstrap_refusals_are_fatal() {
    type Case = (Vec<(&'static str, Option<Value>)>, &'static str);
    let cases: Vec<Case> = vec![
        (
            vec![("permission_policy", Some(json!("allow everything")))],
            "permission policy: expected an array of rule strings",
        ),
        (vec![("gateway_v1", None), ("task", None)], "empty task"),
        (
            vec![("gateway_v1", None), ("task", Some(json!({})))],
            "empty task",
        ),
        (
            vec![("task", Some(task("http://127.0.0.1:9", "/tmp", vec![])))],
            "gateway task without the gateway capability marker (launcher/runner version skew)",
        ),
    ];
    for (envelopes, expected) in cases {
        let mut h = start();
        for (kind, data) in envelopes {
            h.send(kind, data).await;
        }
        assert_eq!(fatal_result(h).await, (expected.to_owned(), FATAL_EXIT));
    }
}

#[tokio::test]
async fn a_five_mib_line_ends_the_runner_with_a_typed_error_not_a_hang() {
    let mut h = start();
    let mut line = b"{\"type\":\"task\",\"data\":\"".to_vec();
    line.resize(5 * 1024 * 1024, b'x');
    line.extend_from_slice(b"\"}\n");
    let writer = tokio::spawn(async move {
        // The runner stops reading at the cap: the write may not complete, which is fine.
        let _ = h.to_runner.write_all(&line).await;
        h.to_runner
    });
    let result = tokio::time::timeout(Duration::from_secs(10), h.from_runner.next())
        .await
        .expect("no hang")
        .unwrap();
    assert_eq!(
        result.data.unwrap()["error"],
        json!(format!(
            "envelope line over {MAX_LINE} bytes [RUNNER_LINE_TOO_LONG] before task"
        ))
    );
    let code = tokio::time::timeout(Duration::from_secs(10), h.runner)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, FATAL_EXIT);
    writer.abort();
}

#[tokio::test]
async fn the_loop_runs_workspace_tools_locally_and_forwards_ask_user() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::Tools(vec![
                (
                    "write_file".into(),
                    json!({"path": "a.txt", "content": "A"}),
                ),
                ("ask_user".into(), json!({"question": "ok?"})),
            ]),
            Reply::text("finished"),
        ],
    );
    let tools = vec![
        crate::tools::spec_of(Tool::WriteFile),
        crate::tools::ask_user_spec(),
    ];
    let mut h = start();
    h.send(
        "permission_policy",
        Some(json!(["allow write_file", "allow ask_user"])),
    )
    .await;
    h.send("gateway_v1", None).await;
    h.send(
        "task",
        Some(task(&fake.base_url(), dir.path().to_str().unwrap(), tools)),
    )
    .await;
    let call = loop {
        let e = h.next().await;
        if e.kind == "tool_call" {
            break e;
        }
        assert!(matches!(e.kind.as_str(), "event" | "transcript"), "{e:?}");
    };
    assert_eq!(call.id.as_deref(), Some("call-1"));
    assert_eq!(
        call.data.unwrap(),
        json!({"name": "ask_user", "input": {"question": "ok?"}})
    );
    // The local tool already ran, in the workdir.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "A"
    );
    h.send("unknown_after_bootstrap", Some(json!(1))).await;
    let line =
        encode_line(&Envelope::new("tool_result", json!({"output": "yes"})).with_id("call-1"))
            .unwrap();
    h.to_runner.write_all(&line).await.unwrap();
    let result = loop {
        let e = h.next().await;
        if e.kind == "result" {
            break e;
        }
    };
    assert_eq!(
        result.data.unwrap(),
        json!({"output": {"text": "finished"}, "usage": {"input_tokens": 20, "output_tokens": 10}})
    );
    assert_eq!(h.exit().await, 0);
    let requests = fake.requests();
    assert_eq!(
        requests[0].header("x-api-key"),
        Some("__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__")
    );
    assert_eq!(
        requests[1].body["messages"][2]["content"][1]["content"],
        json!("yes")
    );
}

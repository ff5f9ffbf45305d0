use iterion_agent::wire::ToolSpec;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::executor::agent::env::AgentEnv;

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: String::new(),
        input_schema: json!({}),
    }
}

#[test]
fn a_refused_tool_is_refused_before_the_runner_starts() {
    assert_eq!(check_placement(&[spec("bash"), spec("ask_user")]), Ok(()));
    assert_eq!(
        check_placement(&[spec("bash"), spec("computer_use"), spec("lsp")]),
        Err(PlacementRefused {
            tool: "computer_use".to_owned()
        })
    );
    assert_eq!(
        check_placement(&[spec("mcp_bash")]).map_err(|e| e.to_string()),
        Err("PlacementRefused: tool \"mcp_bash\" cannot run in the sandbox (SANDBOX.md §13.3); remove it from the node's tools or run --sandbox none".to_owned())
    );
}

#[test]
fn results_become_outputs_pauses_or_typed_failures() {
    let done = result_of(
        "n",
        json!({"output": {"text": "hi"}, "usage": {"input_tokens": 3, "output_tokens": 4}}),
        None,
    );
    assert!(matches!(
        done,
        Ok(AgentResult::Done(ref v, Usage { input_tokens: 3, output_tokens: 4, .. })) if v == &json!({"text": "hi"})
    ));
    let schema = result_of(
        "n",
        json!({"output": null, "error": "bad", "error_kind": "schema"}),
        None,
    );
    assert_eq!(
        schema.err().map(|f| f.code),
        Some(FailureCode::SchemaValidation)
    );
    let paused = result_of(
        "n",
        json!({"output": null, "paused": {"question": "q?"}}),
        None,
    );
    assert_eq!(
        paused.err().map(|f| f.message),
        Some("the runner paused on ask_user without a session snapshot; the question cannot be resumed".to_owned())
    );
}

const ENGINE_BIN: &str = crate::sandbox::mounts::ENGINE_BIN_TARGET;

type Pipe = tokio::io::BufReader<iterion_sandbox::ExecInput>;

/// A sandbox whose exec runs a scripted runner on the exec's pipes.
struct FakeRun<F>(F);

#[async_trait::async_trait]
impl<F, Fut> SandboxRun for FakeRun<F>
where
    F: Fn(tokio::io::BufReader<iterion_sandbox::ExecInput>, iterion_sandbox::ExecOutput) -> Fut
        + Send
        + Sync,
    Fut: std::future::Future<Output = i64> + Send,
{
    fn driver(&self) -> &str {
        "fake"
    }
    fn id(&self) -> &str {
        "fake-1"
    }
    async fn exec(
        &self,
        argv: &[String],
        opts: ExecOpts,
    ) -> Result<iterion_sandbox::ExecResult, iterion_sandbox::Error> {
        assert_eq!(argv, runner_argv(ENGINE_BIN).as_slice());
        assert!(opts.keep_stdin_open);
        let (Some(stdin), Some(stdout)) = (opts.stdin, opts.stdout) else {
            panic!("the runner exec has both pipes");
        };
        let exit_code = (self.0)(tokio::io::BufReader::new(stdin), stdout).await;
        Ok(iterion_sandbox::ExecResult {
            exit_code,
            ..Default::default()
        })
    }
    async fn cleanup(&self) -> Result<(), iterion_sandbox::Error> {
        Ok(())
    }
}

struct Answering;

#[async_trait::async_trait]
impl crate::executor::agent::operator::Operator for Answering {
    async fn ask(&self, _node: &str, question: &str, _options: &[String]) -> Option<String> {
        Some(format!("answer to {question}"))
    }
}

fn env_with(operator: Option<Arc<dyn crate::executor::agent::operator::Operator>>) -> AgentEnv {
    AgentEnv {
        forfaits: Default::default(),
        routes: Default::default(),
        place: crate::executor::agent::env::AgentPlace::InProcess {
            workspace: std::env::temp_dir(),
            path: None,
        },
        operator,
        answer: None,
        delegates: Default::default(),
        ask_user: None,
    }
}

fn loop_spec(base_url: &str, tools: Vec<ToolSpec>) -> LoopSpec {
    LoopSpec {
        endpoint: iterion_agent::provider::Endpoint {
            provider: Provider::Anthropic,
            base_url: base_url.to_owned(),
            api_key: "__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__".to_owned(),
        },
        model: "claude-test".to_owned(),
        system: None,
        prompt: "go".to_owned(),
        tools,
        max_turns: 5,
        output: None,
        generation: Default::default(),
        tool_gate: None,
    }
}

fn bootstrap(spec: &LoopSpec) -> Vec<Envelope> {
    let task = TaskData {
        node_id: "n".into(),
        model: "anthropic/claude-test".into(),
        system: None,
        prompt: spec.prompt.clone(),
        tools: spec.tools.clone(),
        max_turns: Some(spec.max_turns),
        workdir: std::env::temp_dir().display().to_string(),
        interaction: "ask".into(),
        base_url: spec.endpoint.base_url.clone(),
        api_key: spec.endpoint.api_key.clone(),
        output: None,
        run_id: "r".into(),
        mcp_servers: vec![],
        generation: Default::default(),
        tool_gate: None,
    };
    vec![
        Envelope::new(
            "permission_policy",
            PermissionPolicy::allowing(spec.tools.iter().map(|t| t.name.as_str())).to_raw(),
        ),
        Envelope {
            kind: "gateway_v1".into(),
            id: None,
            data: None,
        },
        Envelope::new("task", serde_json::to_value(task).unwrap()),
    ]
}

async fn serve_with(
    run: Arc<dyn SandboxRun>,
    env: &AgentEnv,
    spec: &LoopSpec,
) -> Result<AgentResult, Failure> {
    serve_recording(
        run,
        env,
        spec,
        &crate::records::sink::MemoryEventSink::new(),
    )
    .await
}

async fn serve_recording(
    run: Arc<dyn SandboxRun>,
    env: &AgentEnv,
    spec: &LoopSpec,
    events: &crate::records::sink::MemoryEventSink,
) -> Result<AgentResult, Failure> {
    let launcher = Launcher::new(
        Arc::clone(&run),
        ENGINE_BIN,
        Arc::new(crate::records::sink::NullRunLog),
        BTreeMap::new(),
    );
    let policy = PermissionPolicy::allowing(spec.tools.iter().map(|t| t.name.as_str()));
    let stderr = Capture::stderr(
        "n",
        Arc::new(crate::records::sink::NullRunLog),
        Arc::new(crate::records::secrets::Redactor::new(&[])),
    );
    let channel = Channel::open(run, ENGINE_BIN, ("r", "n"), stderr);
    tokio::time::timeout(
        Duration::from_secs(20),
        launcher.serve(
            channel,
            bootstrap(spec),
            ServeCtx {
                redactor: &crate::records::secrets::Redactor::new(&[]),
                operator: env.operator.as_ref(),
                events,
                id: "n",
                spec,
                policy: &policy,
                todos: &iterion_agent::claw_tools::TodoList::default(),
            },
        ),
    )
    .await
    .expect("the launcher never hangs")
}

#[tokio::test]
async fn ask_user_round_trips_between_the_launcher_and_the_real_runner() {
    use iterion_test_support::fake_model::{Api, FakeModel, Reply};
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("ask_user", json!({"question": "which?"})),
            Reply::text("done"),
        ],
    );
    let run: Arc<dyn SandboxRun> = Arc::new(FakeRun(|input, output| async move {
        i64::from(
            iterion_agent::runner::serve(
                input,
                output,
                &crate::sandbox::host::HostShells,
                &iterion_vocab::Environment::empty(),
            )
            .await,
        )
    }));
    let spec = loop_spec(
        &fake.base_url(),
        vec![iterion_agent::tools::ask_user_spec()],
    );
    let got = serve_with(run, &env_with(Some(Arc::new(Answering))), &spec).await;
    assert!(
        matches!(&got, Ok(AgentResult::Done(v, _)) if v == &json!({"text": "done"})),
        "{:?}",
        got.err()
    );
    assert_eq!(
        fake.requests()[1].body["messages"][2]["content"][0]["content"],
        json!("answer to which?")
    );
}

#[tokio::test]
async fn the_runners_turns_and_bash_calls_become_transcript_events() {
    use iterion_test_support::fake_model::{Api, FakeModel, Reply};
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("bash", json!({"command": "echo transcript-probe; exit 3"})),
            Reply::text("done"),
        ],
    );
    let run: Arc<dyn SandboxRun> = Arc::new(FakeRun(|input, output| async move {
        i64::from(
            iterion_agent::runner::serve(
                input,
                output,
                &crate::sandbox::host::HostShells,
                &iterion_vocab::Environment::empty(),
            )
            .await,
        )
    }));
    let spec = loop_spec(
        &fake.base_url(),
        vec![iterion_agent::tools::spec_of(iterion_dsl::ir::Tool::Bash)],
    );
    let events = crate::records::sink::MemoryEventSink::new();
    let got = serve_recording(run, &env_with(None), &spec, &events).await;
    assert!(got.is_ok(), "{:?}", got.err());
    let transcript: Vec<Event> = events
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::AgentTurn(_) | Event::AgentToolCall(_)))
        .collect();
    let [
        Event::AgentTurn(first),
        Event::AgentToolCall(call),
        Event::AgentTurn(second),
    ] = transcript.as_slice()
    else {
        panic!("{transcript:?}");
    };
    assert_eq!(
        (
            first.turn,
            first.node.as_str(),
            first.backend.as_str(),
            second.turn
        ),
        (1, "n", "claw", 2)
    );
    assert_eq!(
        (
            call.tool.as_str(),
            call.turn,
            call.exit_code,
            call.is_error,
            serde_json::from_str::<Value>(&call.input).unwrap()
        ),
        (
            "bash",
            1,
            Some(3),
            false,
            json!({"command": "echo transcript-probe; exit 3"})
        )
    );
    assert!(
        call.result
            .as_deref()
            .is_some_and(|r| r.contains("transcript-probe")),
        "{call:?}"
    );
}

#[tokio::test]
async fn attack_a_runner_flooding_transcript_records_is_cut_and_cannot_name_another_node() {
    let record = r#"{"type":"transcript","data":{"type":"agent_tool_call","record":{"turn":1,"tool":"bash","input":"{}","result":"x","is_error":false,"duration_ms":1,"node":"other"}}}"#;
    let mut script = String::new();
    for _ in 0..TRANSCRIPT_RECORDS_MAX + 50 {
        script.push_str(record);
        script.push('\n');
    }
    script.push_str(r#"{"type":"result","data":{"output":{"text":"x"}}}"#);
    script.push('\n');
    let spec = loop_spec("http://127.0.0.1:9", vec![]);
    let events = crate::records::sink::MemoryEventSink::new();
    let got = serve_recording(
        scripted(script.into_bytes(), 0),
        &env_with(None),
        &spec,
        &events,
    )
    .await;
    assert!(got.is_ok(), "{:?}", got.err());
    let calls: Vec<Event> = events
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::AgentToolCall(_)))
        .collect();
    assert_eq!(calls.len(), TRANSCRIPT_RECORDS_MAX);
    assert!(
        calls
            .iter()
            .all(|e| matches!(e, Event::AgentToolCall(c) if c.node == "n" && c.backend == "claw"))
    );
}

/// A runner that writes `bytes` on stdout and then stays silent until stdin closes.
fn scripted(bytes: Vec<u8>, exit: i64) -> Arc<dyn SandboxRun> {
    Arc::new(FakeRun(
        move |mut input: Pipe, mut output: iterion_sandbox::ExecOutput| {
            let bytes = bytes.clone();
            async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let _ = output.write_all(&bytes).await;
                let _ = output.flush().await;
                if exit != 0 {
                    drop(output);
                    return exit;
                }
                let mut sink = Vec::new();
                let _ = input.read_to_end(&mut sink).await;
                exit
            }
        },
    ))
}

#[tokio::test]
async fn a_malformed_or_oversized_envelope_fails_the_node_with_a_typed_error() {
    let spec = loop_spec("http://127.0.0.1:9", vec![]);
    let env = env_with(None);
    let malformed = serve_with(scripted(b"this is not json\n".to_vec(), 0), &env, &spec).await;
    let message = malformed.err().map(|f| f.message).unwrap_or_default();
    assert!(
        message.starts_with("runner channel: malformed envelope: ")
            && message.ends_with("[RUNNER_ENVELOPE_MALFORMED]"),
        "{message}"
    );
    let mut big = b"{\"type\":\"event\",\"data\":\"".to_vec();
    big.resize(5 * 1024 * 1024, b'x');
    big.extend_from_slice(b"\"}\n");
    let oversized = serve_with(scripted(big, 0), &env, &spec).await;
    assert_eq!(
        oversized.err().map(|f| (f.code, f.message)),
        Some((
            FailureCode::ExecutionFailed,
            "runner channel: envelope line over 4194304 bytes [RUNNER_LINE_TOO_LONG]".to_owned()
        ))
    );
    let died = serve_with(scripted(Vec::new(), 7), &env, &spec).await;
    assert_eq!(
        died.err().map(|f| (f.message, f.exit_code)),
        Some((
            "the runner exited with status 7 without a result".to_owned(),
            Some(7)
        ))
    );
}

#[tokio::test]
async fn a_forwarded_call_the_node_was_not_given_or_that_runs_in_the_sandbox_is_refused() {
    let calls = [
        r#"{"type":"tool_call","id":"call-1","data":{"name":"bash","input":{"command":"id"}}}"#,
        r#"{"type":"tool_call","id":"call-2","data":{"name":"web_search","input":{}}}"#,
        r#"{"type":"result","data":{"output":{"text":"x"}}}"#,
    ];
    let script = format!("{}\n", calls.join("\n")).into_bytes();
    let replies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&replies);
    let run: Arc<dyn SandboxRun> = Arc::new(FakeRun(
        move |input: Pipe, mut output: iterion_sandbox::ExecOutput| {
            let script = script.clone();
            let seen = Arc::clone(&seen);
            async move {
                use tokio::io::AsyncWriteExt;
                let mut reader = EnvelopeReader::new(input);
                // Bootstrap first, then the calls; record the launcher's replies.
                for _ in 0..3 {
                    let _ = reader.next().await;
                }
                let mut lines = script.split(|b| *b == b'\n');
                for _ in 0..2 {
                    let line = lines.next().unwrap_or_default();
                    let _ = output.write_all(line).await;
                    let _ = output.write_all(b"\n").await;
                    let _ = output.flush().await;
                    if let Ok(reply) = reader.next().await {
                        seen.lock().unwrap().push(reply);
                    }
                }
                let _ = output.write_all(lines.next().unwrap_or_default()).await;
                let _ = output.write_all(b"\n").await;
                let _ = output.flush().await;
                0
            }
        },
    ));
    let spec = loop_spec(
        "http://127.0.0.1:9",
        vec![iterion_agent::tools::spec_of(iterion_dsl::ir::Tool::Bash)],
    );
    let got = serve_with(run, &env_with(None), &spec).await;
    assert!(got.is_ok(), "{:?}", got.err());
    let replies = replies.lock().unwrap().clone();
    let errors: Vec<(Option<String>, Value)> = replies
        .into_iter()
        .map(|e| (e.id, e.data.unwrap_or(Value::Null)))
        .collect();
    assert_eq!(
        errors,
        vec![
            (
                Some("call-1".to_owned()),
                json!({"error": "tool_call \"bash\" refused: advertised=true, launcher-placed=false, permitted=true"})
            ),
            (
                Some("call-2".to_owned()),
                json!({"error": "tool_call \"web_search\" refused: advertised=false, launcher-placed=true, permitted=false"})
            ),
        ]
    );
}

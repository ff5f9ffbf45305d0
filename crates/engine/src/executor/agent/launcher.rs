//! The launcher side of the runner channel (SANDBOX.md §13.1, §13.3):
//! `ClawBackend::execute_via_sandbox_runner` in the seed's words.
//!
//! For one agent node: refuse a task carrying a refused tool before anything starts
//! (`PlacementRefused`), emit `sandbox_claw_routed_via_runner` once per run, exec the runner in
//! the container with stdin attached, send the bootstrap (`permission_policy`, `gateway_v1`, an
//! optional `session_replay`, then `task`), and serve the channel until `result`: forwarded
//! `tool_call`s run here only when advertised to the node under that exact name, launcher-placed
//! and allowed by the policy; `event`s go to the run log; `transcript`s become `agent_turn` /
//! `agent_tool_call` events (decoded strictly, named, redacted and bounded by the engine, at most
//! 4096 per node); the runner's stderr is the node's output. A channel error (a line over 4 MiB,
//! a malformed envelope, the runner dying without a `result`) fails the node with a typed message
//! and ends the exec — never a hang.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iterion_agent::envelope::{
    ChannelError, Envelope, EnvelopeReader, EnvelopeWriter, SNAPSHOT_MAX, TOOL_RESULT_MAX,
    clamp_text,
};
use iterion_agent::placement::{PermissionPolicy, Placement, sandbox_placement_of};
use iterion_agent::provider::Provider;
use iterion_agent::runner::{Replay, TaskData};
use iterion_agent::session::{LoopSpec, Snapshot, ToolOutcome};
use iterion_agent::tools::ASK_USER;
use iterion_agent::wire::Usage;
use iterion_dsl::ir::{AgentNode, Interaction};
use iterion_sandbox::{ExecOpts, SandboxRun};
use serde_json::{Value, json};

use crate::executor::agent::operator::{AgentResult, Operator, PausedAgent, ask_operator};
use crate::executor::capture::Capture;
use crate::executor::outcome::{Failure, TAIL_BYTES};
use crate::records::events::Event;
use crate::records::sandbox_events::SandboxClawRoutedViaRunner;
use crate::records::secrets::Redactor;
use crate::records::sink::{EventSink, LogLine, RunLogSink};
use iterion_vocab::FailureCode;
use iterion_vocab::LogStream;

/// The runner's argv in the container: `[$ITERION_ENGINE_BIN, "__claw-runner"]`.
pub(crate) fn runner_argv(engine_bin: &str) -> Vec<String> {
    vec![engine_bin.to_owned(), "__claw-runner".to_owned()]
}

/// The most transcript records one node's runner may report: the container's word, so a
/// flood is cut (a real loop is bounded by `tool_max_steps` far below this).
const TRANSCRIPT_RECORDS_MAX: usize = 4096;

/// How long to wait for the runner's exit status once its stdout ended.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// A refused tool in a sandboxed task.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "PlacementRefused: tool {tool:?} cannot run in the sandbox (SANDBOX.md §13.3); remove it from the node's tools or run --sandbox none"
)]
pub(crate) struct PlacementRefused {
    pub tool: String,
}

/// §13.3: the first advertised tool that is refused.
pub(crate) fn check_placement(
    tools: &[iterion_agent::wire::ToolSpec],
) -> Result<(), PlacementRefused> {
    match tools
        .iter()
        .find(|t| sandbox_placement_of(&t.name) == Placement::Refused)
    {
        Some(t) => Err(PlacementRefused {
            tool: t.name.clone(),
        }),
        None => Ok(()),
    }
}

/// Runs agent nodes inside the run's container.
pub(crate) struct Launcher {
    run: Arc<dyn SandboxRun>,
    engine_bin: &'static str,
    logs: Arc<dyn RunLogSink>,
    routed: AtomicBool,
    /// Provider → the placeholder standing for its key.
    placeholders: BTreeMap<Provider, String>,
}

impl Launcher {
    /// A launcher for the run in `run`, with each provider's key replaced by its gateway
    /// placeholder.
    pub(crate) fn new(
        run: Arc<dyn SandboxRun>,
        engine_bin: &'static str,
        logs: Arc<dyn RunLogSink>,
        placeholders: BTreeMap<Provider, String>,
    ) -> Launcher {
        Launcher {
            run,
            engine_bin,
            logs,
            routed: AtomicBool::new(false),
            placeholders,
        }
    }

    /// The placeholder standing for `provider`'s key in the container, if the run has one.
    pub(crate) fn placeholder(&self, provider: Provider) -> Option<String> {
        self.placeholders.get(&provider).cloned()
    }

    fn log(&self, sc: &ServeCtx<'_>, text: String) {
        self.logs.line(LogLine {
            node: sc.id.to_owned(),
            stream: LogStream::System,
            text: sc.redactor.redact(&text),
        });
    }

    /// Runs one node through the runner.
    pub(crate) async fn run_node(&self, node: RunnerNode<'_>) -> Result<AgentResult, Failure> {
        let RunnerNode {
            run_id,
            id,
            agent,
            spec,
            mcp_servers,
            resume,
            events,
            redactor,
            operator,
        } = node;
        check_placement(&spec.tools)
            .map_err(|e| Failure::new(FailureCode::CapabilityUnsupported, e.to_string()))?;
        if !self.routed.swap(true, Ordering::SeqCst) {
            events
                .emit(Event::SandboxClawRoutedViaRunner(
                    SandboxClawRoutedViaRunner::default(),
                ))
                .await;
        }
        let provider = spec.endpoint.provider;
        let Some(placeholder) = self.placeholders.get(&provider) else {
            return Err(Failure::new(
                FailureCode::ExecutionFailed,
                format!(
                    "no gateway credential for provider {}; the key cannot reach the sandbox",
                    provider.as_str()
                ),
            ));
        };
        let task = TaskData {
            node_id: id.to_owned(),
            model: format!("{}/{}", provider.as_str(), spec.model),
            system: spec.system.clone(),
            prompt: spec.prompt.clone(),
            tools: spec.tools.clone(),
            max_turns: Some(spec.max_turns),
            workdir: String::new(),
            interaction: match agent.interaction {
                Interaction::None => "none".to_owned(),
                Interaction::Ask => "ask".to_owned(),
            },
            base_url: spec.endpoint.base_url.clone(),
            api_key: placeholder.clone(),
            output: spec.output.clone(),
            run_id: run_id.to_owned(),
            mcp_servers,
            generation: spec.generation.clone(),
            tool_gate: spec.tool_gate.clone(),
        };
        let policy = PermissionPolicy::allowing(spec.tools.iter().map(|t| t.name.as_str()));
        let mut bootstrap = vec![
            Envelope::new("permission_policy", policy.to_raw()),
            Envelope {
                kind: "gateway_v1".to_owned(),
                id: None,
                data: None,
            },
        ];
        if let Some((snapshot, answer)) = resume {
            let replay = serde_json::to_value(Replay { snapshot, answer }).unwrap_or(Value::Null);
            bootstrap.push(Envelope::new("session_replay", replay));
        }
        bootstrap.push(Envelope::new(
            "task",
            serde_json::to_value(&task).unwrap_or(Value::Null),
        ));
        let stderr = Capture::stderr(id, Arc::clone(&self.logs), Arc::clone(redactor));
        let channel = Channel::open(Arc::clone(&self.run), self.engine_bin, (run_id, id), stderr);
        let served = self
            .serve(
                channel,
                bootstrap,
                ServeCtx {
                    redactor,
                    operator,
                    events,
                    id,
                    spec,
                    policy: &policy,
                    todos: &iterion_agent::claw_tools::TodoList::default(),
                },
            )
            .await;
        served.map_err(|f| f.at(id))
    }

    async fn serve(
        &self,
        mut channel: Channel,
        bootstrap: Vec<Envelope>,
        sc: ServeCtx<'_>,
    ) -> Result<AgentResult, Failure> {
        for envelope in &bootstrap {
            if let Err(e) = channel.writer.send(envelope).await {
                return Err(channel.fail(&e).await);
            }
        }
        let mut snapshot: Option<Snapshot> = None;
        let mut transcripts: usize = 0;
        loop {
            let envelope = match channel.reader.next().await {
                Ok(e) => e,
                Err(e) => return Err(channel.fail(&e).await),
            };
            match envelope.kind.as_str() {
                "tool_call" => {
                    let reply = self.tool_call(&sc, &envelope).await;
                    let id = envelope.id.clone().unwrap_or_default();
                    let answer = Envelope::new("tool_result", reply).with_id(id);
                    if let Err(e) = channel.writer.send(&answer).await {
                        return Err(channel.fail(&e).await);
                    }
                }
                "event" => {
                    let data = envelope.data.unwrap_or(Value::Null);
                    let kind = data.get("type").and_then(Value::as_str).unwrap_or("?");
                    self.log(
                        &sc,
                        format!(
                            "claw: {kind} {}",
                            data.get("payload").cloned().unwrap_or(Value::Null)
                        ),
                    );
                }
                iterion_agent::runner::TRANSCRIPT_ENVELOPE => {
                    transcripts += 1;
                    if transcripts > TRANSCRIPT_RECORDS_MAX {
                        if transcripts == TRANSCRIPT_RECORDS_MAX + 1 {
                            self.log(
                                &sc,
                                format!(
                                    "claw: more than {TRANSCRIPT_RECORDS_MAX} transcript records; the rest are dropped"
                                ),
                            );
                        }
                        continue;
                    }
                    let data = envelope.data.unwrap_or(Value::Null);
                    match crate::executor::agent::transcript::from_runner(sc.id, &data, sc.redactor)
                    {
                        Some(event) => sc.events.emit(event).await,
                        None => self.log(&sc, "claw: unreadable transcript record dropped".into()),
                    }
                }
                "session_capture" => {
                    let data = envelope.data.unwrap_or(Value::Null);
                    if serde_json::to_vec(&data).map_or(0, |v| v.len()) > SNAPSHOT_MAX {
                        self.log(&sc, "claw: session snapshot over 2 MiB dropped".to_owned());
                    } else {
                        snapshot = serde_json::from_value(data).ok().or(snapshot);
                    }
                }
                "result" => {
                    channel.finish().await;
                    return result_of(sc.id, envelope.data.unwrap_or(Value::Null), snapshot);
                }
                other => {
                    tracing::warn!("claw runner: ignoring envelope {other:?}");
                }
            }
        }
    }

    /// A forwarded call: run only when advertised under that exact name, launcher-placed and
    /// permitted; a refusal is logged and returned as a failed call.
    async fn tool_call(&self, sc: &ServeCtx<'_>, envelope: &Envelope) -> Value {
        let data = envelope.data.clone().unwrap_or(Value::Null);
        let name = data.get("name").and_then(Value::as_str).unwrap_or_default();
        let input = data.get("input").cloned().unwrap_or(Value::Null);
        let advertised = sc.spec.tools.iter().any(|t| t.name == name);
        let placed = sandbox_placement_of(name) == Placement::Launcher;
        if !advertised || !placed || !sc.policy.allows(name) {
            let why = format!(
                "tool_call {name:?} refused: advertised={advertised}, launcher-placed={placed}, permitted={}",
                sc.policy.allows(name)
            );
            self.log(sc, format!("claw: {why}"));
            return json!({"error": why});
        }
        if name == iterion_dsl::ir::Tool::TodoWrite.as_str() {
            return match sc.todos.call(&input) {
                Ok(text) => json!({"output": clamp_text(&text, TOOL_RESULT_MAX)}),
                Err(text) => json!({"error": text}),
            };
        }
        if name != ASK_USER {
            return json!({"error": format!("tool {name:?} has no launcher implementation")});
        }
        match ask_operator(sc.operator, sc.id, &input).await {
            ToolOutcome::Output(text) | ToolOutcome::Image(text, _) => {
                json!({"output": clamp_text(&text, TOOL_RESULT_MAX)})
            }
            ToolOutcome::Error(text) | ToolOutcome::Fatal(text) => json!({"error": text}),
            ToolOutcome::Ask(q) => json!({"ask_user": {
                "question": q.question,
                "pending_tool_use_id": envelope.id,
                "conversation": null,
                "options": q.options,
                "allow_free_text": true,
            }}),
        }
    }
}

/// One agent node for the runner: what [`Launcher::run_node`] needs from the execution.
pub(crate) struct RunnerNode<'a> {
    /// The run (`ITERION_RUN_ID` in the container).
    pub run_id: &'a str,
    /// The node.
    pub id: &'a str,
    /// Its declaration.
    pub agent: &'a AgentNode,
    /// Its loop.
    pub spec: &'a LoopSpec,
    /// The MCP servers the runner starts for it, in the container.
    pub mcp_servers: Vec<iterion_agent::mcp::McpServerSpec>,
    /// The paused loop and the operator's answer, when resuming it.
    pub resume: Option<(Snapshot, String)>,
    /// Where `sandbox_claw_routed_via_runner` and the transcript go.
    pub events: &'a dyn EventSink,
    /// The run's redactor, for the run-log lines, the runner's stderr and the transcript.
    pub redactor: &'a Arc<Redactor>,
    /// Who answers `ask_user` at once, if anyone.
    pub operator: Option<&'a Arc<dyn Operator>>,
}

struct ServeCtx<'a> {
    redactor: &'a Redactor,
    operator: Option<&'a Arc<dyn Operator>>,
    events: &'a dyn EventSink,
    id: &'a str,
    spec: &'a LoopSpec,
    policy: &'a PermissionPolicy,
    /// `todo_write`'s list for this node's loop (the tool is launcher-placed, §13.3).
    todos: &'a iterion_agent::claw_tools::TodoList,
}

/// The runner's `result` as the node's outcome.
fn result_of(node: &str, data: Value, snapshot: Option<Snapshot>) -> Result<AgentResult, Failure> {
    if let Some(paused) = data.get("paused").filter(|p| !p.is_null()) {
        let question = serde_json::from_value(paused.clone()).map_err(|e| {
            Failure::new(
                FailureCode::ExecutionFailed,
                format!("the runner paused with an unreadable question: {e}"),
            )
        })?;
        let Some(snapshot) = snapshot else {
            return Err(Failure::new(
                FailureCode::ExecutionFailed,
                "the runner paused on ask_user without a session snapshot; the question cannot be resumed",
            ));
        };
        return Ok(AgentResult::Paused(Box::new(PausedAgent {
            node: node.to_owned(),
            question,
            snapshot: Some(snapshot),
            delegate: None,
            child: None,
        })));
    }
    if let Some(error) = data.get("error").and_then(Value::as_str) {
        let code = match data.get("error_kind").and_then(Value::as_str) {
            Some("schema") => FailureCode::SchemaValidation,
            _ => FailureCode::ExecutionFailed,
        };
        return Err(Failure::new(code, error.to_owned()));
    }
    let usage = data.get("usage").map_or(
        Usage {
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
        },
        |u| Usage {
            input_tokens: u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
            cost_usd: None,
        },
    );
    match data.get("output") {
        Some(output) if !output.is_null() => Ok(AgentResult::Done(output.clone(), usage)),
        _ => Err(Failure::new(
            FailureCode::ExecutionFailed,
            "the runner's result holds no output",
        )),
    }
}

/// The exec and its two pipes.
struct Channel {
    reader: EnvelopeReader<tokio::io::BufReader<tokio::io::DuplexStream>>,
    writer: EnvelopeWriter<tokio::io::DuplexStream>,
    exec: tokio::task::JoinHandle<Result<iterion_sandbox::ExecResult, iterion_sandbox::Error>>,
    /// The runner's stderr: the node's output (console, `node_logs`) and the failure's tail.
    stderr: Capture,
}

impl Channel {
    fn open(
        run: Arc<dyn SandboxRun>,
        engine_bin: &str,
        (run_id, node): (&str, &str),
        stderr: Capture,
    ) -> Channel {
        let (stdin_ours, stdin_theirs) = tokio::io::duplex(64 * 1024);
        let (stdout_theirs, stdout_ours) = tokio::io::duplex(64 * 1024);
        let opts = ExecOpts {
            env: vec![
                ("ITERION_RUN_ID".to_owned(), run_id.to_owned()),
                ("ITERION_NODE_ID".to_owned(), node.to_owned()),
            ],
            workdir: None,
            stdin: Some(Box::new(stdin_theirs)),
            stdout: Some(Box::new(stdout_theirs)),
            stderr: Some(stderr.writer()),
            keep_stdin_open: true,
            user: None,
        };
        let argv = runner_argv(engine_bin);
        let exec = tokio::spawn(async move { run.exec(&argv, opts).await });
        Channel {
            reader: EnvelopeReader::new(tokio::io::BufReader::new(stdout_ours)),
            writer: EnvelopeWriter::new(stdin_ours),
            exec,
            stderr,
        }
    }

    /// Ends the exec after a `result` (the runner exits on its own; this bounds the wait).
    async fn finish(self) {
        let Channel {
            writer,
            exec,
            stderr,
            ..
        } = self;
        drop(writer);
        let mut exec = exec;
        if tokio::time::timeout(EXIT_WAIT, &mut exec).await.is_err() {
            exec.abort();
        }
        stderr.finish();
    }

    /// The node's failure for a broken channel; ends the exec.
    async fn fail(self, error: &ChannelError) -> Failure {
        let Channel {
            writer,
            exec,
            stderr,
            ..
        } = self;
        drop(writer);
        let mut exec = exec;
        let exit = match error {
            ChannelError::Closed => match tokio::time::timeout(EXIT_WAIT, &mut exec).await {
                Ok(Ok(Ok(result))) => Some(result.exit_code),
                _ => None,
            },
            _ => None,
        };
        exec.abort();
        let tail = String::from_utf8_lossy(&stderr.finish().bytes).into_owned();
        let tail = iterion_agent::text::tail_bytes(tail.trim(), TAIL_BYTES).to_owned();
        let message = match (error, exit) {
            (ChannelError::Closed, Some(code)) => {
                format!("the runner exited with status {code} without a result")
            }
            (ChannelError::Closed, None) => "the runner ended without a result".to_owned(),
            (other, _) => format!("runner channel: {other} [{}]", other.code()),
        };
        Failure {
            exit_code: exit,
            stderr_tail: (!tail.is_empty()).then_some(tail),
            ..Failure::new(FailureCode::ExecutionFailed, message)
        }
    }
}

#[cfg(test)]
#[path = "launcher_tests.rs"]
mod tests;

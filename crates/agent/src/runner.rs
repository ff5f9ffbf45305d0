//! The runner side of the channel: `iterion __claw-runner` inside the container (SANDBOX.md
//! §13.1–§13.2).
//!
//! Bootstrap reads envelopes until `task` — storing a `session_replay`, recording the
//! `gateway_v1` marker, decoding the `permission_policy` — and refuses anything else. Every
//! bootstrap failure is fatal before any model call: a `result` carrying `error`, the error on
//! stderr, a non-zero exit. Then the loop runs with the session id `sandbox-runner`: workspace
//! tools locally (the runner *is* the sandbox), launcher-placed tools over `tool_call`, model
//! traffic through the run's proxy (`HTTPS_PROXY`/`HTTP_PROXY`), progress as `event`s, each model
//! turn and tool call as a `transcript` envelope, and one `result` at the end.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use iterion_dsl::ir::Tool;
use iterion_vocab::Environment;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{Mutex, mpsc};

use crate::envelope::{
    ChannelError, Envelope, EnvelopeReader, EnvelopeWriter, RELAY_JSON_MAX, RELAY_TEXT_MAX,
    SNAPSHOT_MAX, clamp_json, clamp_text,
};
use crate::http::{HttpClient, HttpError, Route};
use crate::mcp::{McpClients, McpError, McpServerSpec, Spawn};
use crate::placement::{PermissionPolicy, Placement, PolicyError, sandbox_placement_of};
use crate::provider::{Endpoint, Provider};
use crate::session::{
    self, LoopEnd, LoopError, LoopObserver, LoopSpec, Question, Snapshot, ToolHost, ToolOutcome,
};
use crate::shell::{OpenShell, ShellError};
use crate::tools::LocalTools;
use crate::wire::{ToolCall, ToolSpec};

/// The session id of the runner's loop (§13.2).
pub const RUNNER_SESSION_ID: &str = "sandbox-runner";
/// The exit code of a fatal bootstrap or channel error.
pub const FATAL_EXIT: i32 = 2;

/// The `task` envelope's data (§13.1; the fields after `interaction` are defined here). A field
/// this runner does not know refuses the task: a runner older than its engine fails closed
/// rather than run a node without, say, its permission gate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskData {
    /// The node.
    pub node_id: String,
    /// `provider/model`.
    pub model: String,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The user prompt, rendered.
    pub prompt: String,
    /// The advertised tools.
    pub tools: Vec<ToolSpec>,
    /// `tool_max_steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The workspace folder in the container.
    pub workdir: String,
    /// `none` or `ask`.
    pub interaction: String,
    /// The provider's base URL.
    pub base_url: String,
    /// The gateway-credential placeholder standing for the key (never the key).
    pub api_key: String,
    /// The output schema, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<(String, iterion_dsl::ir::Schema)>,
    /// The run (for `ITERION_RUN_ID` in `bash`).
    #[serde(default)]
    pub run_id: String,
    /// The node's MCP servers, started by the runner inside the sandbox (defined here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServerSpec>,
    /// `max_tokens` and `reasoning_effort` (defined here).
    #[serde(default, skip_serializing_if = "crate::wire::Generation::is_unset")]
    pub generation: crate::wire::Generation,
    /// The tool-permission gate, applied by the runner's loop to every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_gate: Option<iterion_dsl::permission::Permission>,
}

/// The `session_replay` data the launcher sends to resume a paused loop (defined here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    /// Where the loop stood.
    pub snapshot: Snapshot,
    /// The operator's answer to its pending `ask_user`.
    pub answer: String,
}

/// Runs the runner over the process's stdin/stdout, its `bash` in the shell `shells` opens, the
/// node's MCP servers through `spawner`, reading the container's environment `env` (the
/// process's, snapshotted once at its entry point: the model client's proxy and CA); returns the
/// exit code.
pub async fn claw_runner_main(
    shells: &dyn OpenShell,
    spawner: &dyn Spawn,
    env: &Environment,
) -> i32 {
    serve_with(
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
        shells,
        Some(spawner),
        env,
    )
    .await
}

/// The outgoing half: a task that writes queued envelopes in order.
struct Outbox {
    tx: mpsc::UnboundedSender<Envelope>,
    task: tokio::task::JoinHandle<()>,
}

impl Outbox {
    fn start<W: AsyncWrite + Unpin + Send + 'static>(output: W) -> Outbox {
        let (tx, mut rx) = mpsc::unbounded_channel::<Envelope>();
        let task = tokio::spawn(async move {
            let mut writer = EnvelopeWriter::new(output);
            while let Some(envelope) = rx.recv().await {
                if let Err(error) = writer.send(&envelope).await {
                    tracing::error!("claw runner: cannot write {}: {error}", envelope.kind);
                    if matches!(error, ChannelError::Io { .. }) {
                        return;
                    }
                }
            }
        });
        Outbox { tx, task }
    }

    fn send(&self, envelope: Envelope) {
        let _ = self.tx.send(envelope);
    }

    async fn close(self) {
        drop(self.tx);
        let _ = self.task.await;
    }
}

/// The runner over any byte streams (tests drive it in process), reading `env`; it cannot start
/// MCP servers (a task naming one fails).
pub async fn serve<R, W>(input: R, output: W, shells: &dyn OpenShell, env: &Environment) -> i32
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_with(input, output, shells, None, env).await
}

/// [`serve`], starting the task's MCP servers through `spawner`.
pub async fn serve_with<R, W>(
    input: R,
    output: W,
    shells: &dyn OpenShell,
    spawner: Option<&dyn Spawn>,
    env: &Environment,
) -> i32
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let outbox = Outbox::start(output);
    let mut reader = EnvelopeReader::new(input);
    let (task, replay, policy) = match bootstrap(&mut reader).await {
        Ok(parts) => parts,
        Err(error) => return fatal(outbox, &error.to_string()).await,
    };
    let code = match run_task(
        task,
        replay,
        policy,
        reader,
        &outbox,
        (shells, spawner),
        env,
    )
    .await
    {
        Ok(()) => 0,
        Err(error) => return fatal(outbox, &error.to_string()).await,
    };
    outbox.close().await;
    code
}

async fn fatal(outbox: Outbox, error: &str) -> i32 {
    tracing::error!("claw runner: {error}");
    outbox.send(Envelope::new(
        "result",
        json!({"output": null, "error": clamp_text(error, RELAY_TEXT_MAX)}),
    ));
    outbox.close().await;
    FATAL_EXIT
}

type Boot = (TaskData, Option<Replay>, Option<PermissionPolicy>);

/// Why the runner stops before or while setting up its task (its text is the `result` error).
#[derive(Debug, thiserror::Error)]
enum RunnerError {
    #[error("{0} [{code}] before task", code = .0.code())]
    Channel(ChannelError),
    #[error("session_replay does not decode: {0}")]
    Replay(#[source] serde_json::Error),
    #[error(transparent)]
    Policy(PolicyError),
    #[error("unexpected envelope {0:?} before task")]
    Unexpected(String),
    #[error("empty task")]
    EmptyTask,
    #[error("task does not decode: {0}")]
    Task(#[source] serde_json::Error),
    #[error("task model {0:?} names no known provider")]
    UnknownProvider(String),
    #[error("gateway task without the gateway capability marker (launcher/runner version skew)")]
    GatewaySkew,
    #[error("tool {0:?} executes in the sandbox but the runner has no registration for it")]
    UnregisteredTool(String),
    #[error("the runner has no working directory: {0}")]
    NoWorkdir(#[source] std::io::Error),
    #[error("the runner's shell could not be set up: {0}")]
    Shell(ShellError),
    #[error("{0}")]
    Client(HttpError),
    #[error(transparent)]
    Mcp(McpError),
}

/// §13.2 steps 1–2: envelopes until `task`.
async fn bootstrap<R: AsyncBufRead + Unpin>(
    reader: &mut EnvelopeReader<R>,
) -> Result<Boot, RunnerError> {
    let mut replay = None;
    let mut gateway = false;
    let mut policy = None;
    let data = loop {
        let envelope = reader.next().await.map_err(RunnerError::Channel)?;
        match envelope.kind.as_str() {
            "session_replay" => {
                let data = envelope.data.unwrap_or(Value::Null);
                replay = Some(serde_json::from_value::<Replay>(data).map_err(RunnerError::Replay)?);
            }
            "gateway_v1" => gateway = true,
            "permission_policy" => {
                let raw = envelope.data.unwrap_or(Value::Null);
                policy = Some(PermissionPolicy::parse(&raw).map_err(RunnerError::Policy)?);
            }
            "task" => break envelope.data,
            other => return Err(RunnerError::Unexpected(other.to_owned())),
        }
    };
    let data = data
        .filter(|d| !d.is_null() && d.as_object().is_none_or(|o| !o.is_empty()))
        .ok_or(RunnerError::EmptyTask)?;
    let task: TaskData = serde_json::from_value(data).map_err(RunnerError::Task)?;
    // Step 3: every route's key is a gateway credential under a sandbox.
    let provider = task
        .model
        .split_once('/')
        .and_then(|(p, _)| Provider::parse(p))
        .ok_or_else(|| RunnerError::UnknownProvider(task.model.clone()))?;
    if provider.is_gateway_route() && !gateway {
        return Err(RunnerError::GatewaySkew);
    }
    // A sandbox-placed tool must be registered here.
    for spec in &task.tools {
        if sandbox_placement_of(&spec.name) == Placement::Sandbox
            && Tool::from_name(&spec.name).is_none()
        {
            return Err(RunnerError::UnregisteredTool(spec.name.clone()));
        }
    }
    Ok((task, replay, policy))
}

async fn run_task<R: AsyncBufRead + Unpin + Send + 'static>(
    task: TaskData,
    replay: Option<Replay>,
    policy: Option<PermissionPolicy>,
    reader: EnvelopeReader<R>,
    outbox: &Outbox,
    (shells, spawner): (&dyn OpenShell, Option<&dyn Spawn>),
    env: &Environment,
) -> Result<(), RunnerError> {
    let provider = task
        .model
        .split_once('/')
        .and_then(|(p, _)| Provider::parse(p))
        .ok_or_else(|| RunnerError::UnknownProvider(task.model.clone()))?;
    let model = task
        .model
        .split_once('/')
        .map(|(_, m)| m.to_owned())
        .unwrap_or_default();
    let policy = policy
        .unwrap_or_else(|| PermissionPolicy::allowing(task.tools.iter().map(|t| t.name.as_str())));
    // An empty workdir is the exec's own: the container's workspace folder.
    let workdir = if task.workdir.is_empty() {
        std::env::current_dir().map_err(RunnerError::NoWorkdir)?
    } else {
        PathBuf::from(&task.workdir)
    };
    let shell = shells
        .open(RUNNER_SESSION_ID, &workdir)
        .await
        .map_err(RunnerError::Shell)?;
    // The node's MCP servers start here, inside the sandbox; `${VAR}` in their command, args
    // and env is the container's variable, never the host's.
    let lookup = env.lookup();
    let expand =
        |v: &str| iterion_dsl::template::expand_host(v, &lookup).unwrap_or_else(|_| v.to_owned());
    let mcp = McpClients::start(&task.mcp_servers, spawner, &workdir, &expand)
        .await
        .map_err(RunnerError::Mcp)?;
    let mut tools = task.tools.clone();
    tools.extend(mcp.specs().iter().cloned());
    // `web_fetch` leaves like the model calls: through the run's proxy, which applies the
    // network policy (its `HTTPS_PROXY`/`HTTP_PROXY`; `NO_PROXY` is never consulted here).
    let web = HttpClient::new(Route::EnvProxy, crate::claw_tools::FETCH_TIMEOUT, env)
        .map_err(RunnerError::Client)?;
    let host = RunnerTools {
        local: LocalTools::new(
            &workdir,
            shell,
            vec![
                ("ITERION_RUN_ID".to_owned(), task.run_id.clone()),
                ("ITERION_NODE_ID".to_owned(), task.node_id.clone()),
            ],
        )
        .with_web(web),
        advertised: tools.iter().map(|t| t.name.clone()).collect(),
        mcp,
        policy,
        reader: Mutex::new(reader),
        outbox: outbox.tx.clone(),
        next_id: AtomicU64::new(1),
    };
    let spec = LoopSpec {
        endpoint: Endpoint {
            provider,
            base_url: task.base_url.trim_end_matches('/').to_owned(),
            api_key: task.api_key.clone(),
        },
        model,
        system: task.system.clone(),
        prompt: task.prompt.clone(),
        tools,
        max_turns: task
            .max_turns
            .unwrap_or(iterion_dsl::ir::DEFAULT_TOOL_MAX_STEPS),
        output: task.output.clone(),
        generation: task.generation.clone(),
        tool_gate: task.tool_gate.clone(),
    };
    let client = HttpClient::new(Route::EnvProxy, crate::http::MODEL_TIMEOUT, env)
        .map_err(RunnerError::Client)?;
    let observer = EventObserver {
        outbox: outbox.tx.clone(),
    };
    let resume = replay.map(|r| (r.snapshot, r.answer));
    let result = match session::run_loop(&spec, &client, &host, &observer, resume).await {
        Ok(LoopEnd::Done { output, usage }) => json!({
            "output": clamp_json(output, RELAY_JSON_MAX),
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        }),
        Ok(LoopEnd::Paused { question, snapshot }) => {
            let snapshot = serde_json::to_value(&*snapshot).unwrap_or(Value::Null);
            let size = serde_json::to_vec(&snapshot).map_or(0, |v| v.len());
            if size > SNAPSHOT_MAX {
                tracing::warn!(
                    "claw runner: session snapshot of {size} bytes is over {SNAPSHOT_MAX}; dropped"
                );
            } else {
                outbox.send(Envelope::new("session_capture", snapshot));
            }
            json!({"output": null, "paused": question})
        }
        Err(LoopError::Model(m)) => {
            json!({"output": null, "error": clamp_text(&m, RELAY_TEXT_MAX), "error_kind": "model"})
        }
        Err(LoopError::Schema(m)) => {
            json!({"output": null, "error": clamp_text(&m, RELAY_TEXT_MAX), "error_kind": "schema"})
        }
    };
    outbox.send(Envelope::new("result", result));
    Ok(())
}

struct EventObserver {
    outbox: mpsc::UnboundedSender<Envelope>,
}

/// The envelope kind carrying one transcript record to the launcher: `data` is
/// `{"type": "agent_turn" | "agent_tool_call", "record": TurnRecord | ToolCallRecord}`. The
/// launcher trusts none of it: it decodes the record strictly, names the node and the backend
/// itself, redacts and bounds the texts.
pub const TRANSCRIPT_ENVELOPE: &str = "transcript";

impl EventObserver {
    fn transcript(&self, kind: &str, record: Value) {
        let _ = self.outbox.send(Envelope::new(
            TRANSCRIPT_ENVELOPE,
            json!({"type": kind, "record": record}),
        ));
    }
}

impl LoopObserver for EventObserver {
    fn note(&self, kind: &'static str, payload: Value) {
        let _ = self.outbox.send(Envelope::new(
            "event",
            json!({"type": kind, "payload": clamp_json(payload, RELAY_JSON_MAX)}),
        ));
    }

    fn turn(&self, turn: &session::TurnRecord) {
        self.transcript("agent_turn", json!(turn));
    }

    fn tool_call(&self, call: &session::ToolCallRecord) {
        self.transcript("agent_tool_call", json!(call));
    }
}

struct RunnerTools<R> {
    local: LocalTools,
    advertised: BTreeSet<String>,
    /// The node's MCP servers (in the sandbox, like the runner); their tools run here.
    mcp: McpClients,
    policy: PermissionPolicy,
    reader: Mutex<EnvelopeReader<R>>,
    outbox: mpsc::UnboundedSender<Envelope>,
    next_id: AtomicU64,
}

#[async_trait]
impl<R: AsyncBufRead + Unpin + Send> ToolHost for RunnerTools<R> {
    async fn call(&self, call: &ToolCall) -> ToolOutcome {
        if self.mcp.owns(&call.name) {
            return match self.mcp.call(&call.name, &call.input).await {
                Ok(text) => ToolOutcome::Output(text),
                Err(error) => ToolOutcome::Error(error),
            };
        }
        if !self.advertised.contains(&call.name) || !self.policy.allows(&call.name) {
            return ToolOutcome::Error(format!(
                "tool {:?} is not available to this node",
                call.name
            ));
        }
        match sandbox_placement_of(&call.name) {
            Placement::Sandbox => match self.local.call_reply(&call.name, &call.input).await {
                Ok(reply) => match reply.image {
                    Some(image) => ToolOutcome::Image(reply.text, image),
                    None => ToolOutcome::Output(reply.text),
                },
                Err(error) => ToolOutcome::Error(error.to_string()),
            },
            Placement::Launcher => self.forward(call).await,
            Placement::Refused => {
                ToolOutcome::Error(format!("tool {:?} is refused in the sandbox", call.name))
            }
        }
    }
}

impl<R: AsyncBufRead + Unpin + Send> RunnerTools<R> {
    /// `tool_call` to the launcher, then its `tool_result` (other envelopes are logged).
    async fn forward(&self, call: &ToolCall) -> ToolOutcome {
        let id = format!("call-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let sent = self.outbox.send(
            Envelope::new(
                "tool_call",
                json!({"name": call.name, "input": clamp_json(call.input.clone(), RELAY_JSON_MAX)}),
            )
            .with_id(id.clone()),
        );
        if sent.is_err() {
            return ToolOutcome::Fatal("the runner channel closed".to_owned());
        }
        let mut reader = self.reader.lock().await;
        loop {
            let envelope = match reader.next().await {
                Ok(e) => e,
                Err(e) => {
                    return ToolOutcome::Fatal(format!(
                        "runner channel: {e} [{}] while waiting for tool_result {id}",
                        e.code()
                    ));
                }
            };
            if envelope.kind != "tool_result" || envelope.id.as_deref() != Some(id.as_str()) {
                tracing::warn!(
                    "claw runner: ignoring envelope {:?} (id {:?}) while waiting for {id}",
                    envelope.kind,
                    envelope.id
                );
                continue;
            }
            let data = envelope.data.unwrap_or(Value::Null);
            if let Some(text) = data.get("output") {
                return ToolOutcome::Output(text_of(text));
            }
            if let Some(text) = data.get("error") {
                return ToolOutcome::Error(text_of(text));
            }
            if let Some(ask) = data.get("ask_user") {
                let question = Question {
                    question: ask
                        .get("question")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    options: ask
                        .get("options")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|v| v.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                };
                return ToolOutcome::Ask(question);
            }
            return ToolOutcome::Error(format!(
                "tool_result {id} holds no output, error or ask_user"
            ));
        }
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;

//! The agent node kind (DSL.md §6.2): the node's prompts and tools rendered into the loop's
//! spec, a paused loop resumed once the operator answered, and the loop run where the launcher
//! placed it ([`AgentPlace`]): in this process with the workspace on the host (no sandbox), or
//! inside the run's container through the runner ([`launcher`](super::launcher)).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use iterion_agent::http::{HttpClient, MODEL_TIMEOUT, Route};
use iterion_agent::session::{
    LoopEnd, LoopError, LoopObserver, LoopSpec, Snapshot, ToolCallRecord, ToolHost, ToolOutcome,
    TurnRecord,
};
use iterion_agent::tools::{ASK_USER, LocalTools};
use iterion_agent::wire::{ToolCall, ToolSpec};
use iterion_dsl::ir::{AgentNode, Interaction};
use iterion_dsl::template;
use serde_json::{Value, json};

use crate::executor::agent::env::{AgentEnv, AgentPlace};
use crate::executor::agent::launcher::RunnerNode;
use crate::executor::agent::operator::{AgentResult, Operator, PausedAgent, ask_operator};
use crate::executor::agent::transcript::{self, Transcript};
use crate::executor::ctx::{BranchCtx, Ctx};
use crate::executor::outcome::Failure;
use crate::records::sink::LogLine;
use iterion_vocab::FailureCode;
use iterion_vocab::LogStream;

/// The tools offered to a node: its `tools:` list, plus `ask_user` for `interaction: ask`.
pub(crate) fn offered_tools(agent: &AgentNode) -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = agent
        .tools
        .iter()
        .map(|t| iterion_agent::tools::spec_of(*t))
        .collect();
    if agent.interaction == Interaction::Ask {
        specs.push(iterion_agent::tools::ask_user_spec());
    }
    specs
}

/// The node's rendered prompts (text form; an unresolvable reference stays as written).
pub(crate) fn render_prompts(
    ctx: &Ctx<'_>,
    agent: &AgentNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> (Option<String>, String) {
    let render = |text: &str| ctx.render_text(text, input, branch);
    (agent.system.as_deref().map(render), render(&agent.user))
}

/// The loop's spec for node `id`.
pub(crate) fn loop_spec(
    ctx: &Ctx<'_>,
    env: &AgentEnv,
    id: &str,
    agent: &AgentNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> Result<LoopSpec, Failure> {
    let Some(route) = env.routes.get(id) else {
        return Err(Failure::new(
            FailureCode::ExecutionFailed,
            format!("no model route was resolved for node \"{id}\""),
        ));
    };
    let output = match &agent.output {
        Some(name) => Some((
            name.clone(),
            crate::executor::schema::declared(ctx.wf, name)?.clone(),
        )),
        None => None,
    };
    let (system, prompt) = render_prompts(ctx, agent, input, branch);
    let system = with_calibration(ctx, id, agent, system)?;
    Ok(LoopSpec {
        endpoint: route.endpoint.clone(),
        model: route.model.clone(),
        system,
        prompt,
        tools: offered_tools(agent),
        max_turns: agent.tool_max_steps,
        output,
        generation: iterion_agent::wire::Generation {
            max_tokens: agent.max_tokens,
            reasoning_effort: match &agent.reasoning_effort {
                None => None,
                Some(text) => crate::executor::agent::effort::effort(ctx, id, text)?,
            },
        },
        tool_gate: agent.permission.clone(),
    })
}

/// The system prompt with the node's cursor calibration appended (docs/language.md "Cursors"):
/// each setting's `${VAR}` expanded from the run's environment, a value that then selects no
/// fragment failing the node.
fn with_calibration(
    ctx: &Ctx<'_>,
    id: &str,
    agent: &AgentNode,
    system: Option<String>,
) -> Result<Option<String>, Failure> {
    let lookup = ctx.environment.lookup();
    let expand = |v: &str| template::expand_host(v, &lookup).unwrap_or_else(|_| v.to_owned());
    let section = iterion_dsl::ir::calibration(&ctx.wf.cursors, &agent.cursors, expand)
        .map_err(|e| Failure::new(FailureCode::ExecutionFailed, format!("node \"{id}\": {e}")))?;
    Ok(match (system, section) {
        (s, None) => s,
        (None, Some(c)) => Some(c),
        (Some(s), Some(c)) => Some(format!("{}\n\n{c}", s.trim_end())),
    })
}

/// Maps a loop error to the node's failure.
pub(crate) fn loop_failure(error: LoopError) -> Failure {
    match error {
        LoopError::Model(m) => Failure::new(FailureCode::ExecutionFailed, m),
        LoopError::Schema(m) => Failure::new(FailureCode::SchemaValidation, m),
    }
}

/// Runs agent node `id` (DSL.md §6.2), resuming its paused loop when the checkpoint holds one
/// for it and the operator answered.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    id: &str,
    agent: &AgentNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> Result<AgentResult, Failure> {
    let Some(env) = ctx.agents.clone() else {
        return Err(Failure::new(
            FailureCode::CapabilityUnsupported,
            format!("agent node \"{id}\" cannot run: this execution has no agent environment"),
        ));
    };
    if !agent.unavailable_tools.is_empty() {
        return Err(unavailable_tools(id, &agent.unavailable_tools));
    }
    let spec = loop_spec(ctx, &env, id, agent, input, branch)?;
    let mcp_servers = mcp_server_specs(ctx.wf, id, agent, &env.place)?;
    if agent.backend.is_delegate() && agent.permission.is_some() {
        // The gate is applied by the claw loop; a delegate CLI's own tools would run past it.
        return Err(Failure::new(
            FailureCode::CapabilityUnsupported,
            format!(
                "node \"{id}\" has a permission gate, which this release enforces on the claw backend only; a {} node would run its tools ungated (give it a model and backend: claw, or permission: off)",
                agent.backend.as_str()
            ),
        ));
    }
    if agent.backend.is_delegate() {
        return crate::executor::agent::delegate::run(
            ctx,
            &env,
            id,
            agent,
            &spec,
            input,
            mcp_servers,
        )
        .await
        .map_err(|f| f.at(id));
    }
    let resume = take_resume(ctx, &env, id);
    match &env.place {
        AgentPlace::InProcess { workspace, path } => {
            run_in_process(
                ctx,
                &env,
                (workspace, path.as_ref()),
                id,
                agent,
                &spec,
                resume,
            )
            .await
        }
        AgentPlace::Runner(launcher) => {
            launcher
                .run_node(RunnerNode {
                    run_id: &ctx.run_id,
                    id,
                    agent,
                    spec: &spec,
                    mcp_servers,
                    resume,
                    events: ctx.events.as_ref(),
                    redactor: &ctx.redactor,
                    operator: env.operator.as_ref(),
                })
                .await
        }
    }
}

/// A node whose `tools:` names tools this release lacks (C922) fails before anything runs,
/// as upstream's fails when a tool name does not resolve; the message names the knob.
fn unavailable_tools(id: &str, names: &[String]) -> Failure {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    Failure::new(
        FailureCode::CapabilityUnsupported,
        format!(
            "node \"{id}\" asks for tool {}, which this release does not have (C922); \
             remove it from the node's tools: or give it through an mcp_server",
            quoted.join(", ")
        ),
    )
}

/// What the runner starts for node `id`'s MCP servers (docs/language.md "MCP servers"). The one
/// owner of where a workflow's MCP server may run: **only inside the run's sandbox**, through the
/// runner (a claw node's loop) or the delegate CLI (which spawns them where it runs: in the
/// container). A node that gets servers fails with `CAPABILITY_UNSUPPORTED`, before anything
/// starts, when it would run on the engine's host (an unsandboxed run), when a server is not a
/// plain stdio one (`http`/`sse`, `auth`), or when a delegate node's server is named `iterion`.
pub(crate) fn mcp_server_specs(
    wf: &iterion_dsl::ir::Workflow,
    id: &str,
    agent: &AgentNode,
    place: &AgentPlace,
) -> Result<Vec<iterion_agent::mcp::McpServerSpec>, Failure> {
    if agent.mcp_servers.is_empty() {
        return Ok(Vec::new());
    }
    let refuse = |why: String| {
        Failure::new(
            FailureCode::CapabilityUnsupported,
            format!("node \"{id}\": {why}"),
        )
    };
    if matches!(place, AgentPlace::InProcess { .. }) {
        return Err(refuse(
            "MCP servers run only inside the run's sandbox, and this run has none (no MCP server ever runs on the engine's host)"
                .to_owned(),
        ));
    }
    let mut out = Vec::new();
    for name in &agent.mcp_servers {
        let Some(server) = wf.mcp_servers.get(name) else {
            return Err(refuse(format!("mcp server \"{name}\" is not declared")));
        };
        // A delegate CLI's `iterion` server is the ask-user one; a workflow's may not pose as it.
        if agent.backend.is_delegate() && name == crate::sandbox::ask_user::MCP_SERVER_NAME {
            return Err(refuse(format!(
                "mcp server \"{name}\": the name is reserved for iterion's own server on a {} node",
                agent.backend.as_str()
            )));
        }
        if server.transport != iterion_dsl::ir::McpTransport::Stdio || server.auth {
            return Err(refuse(format!(
                "mcp server \"{name}\": only stdio servers without auth run in the sandbox (transport {})",
                server.transport.as_str()
            )));
        }
        // Of a server the node names tools of (`mcp.SERVER.TOOL`), only those are offered;
        // `mcp.SERVER.*` offers them all.
        let named: Vec<&iterion_dsl::ir::McpToolRef> = agent
            .mcp_tools
            .iter()
            .filter(|r| &r.server == name)
            .collect();
        let only: Vec<String> = if named.iter().any(|r| r.is_all()) {
            Vec::new()
        } else {
            named.iter().map(|r| r.tool.clone()).collect()
        };
        out.push(iterion_agent::mcp::McpServerSpec {
            name: name.clone(),
            command: server.command.clone().unwrap_or_default(),
            args: server.args.clone(),
            env: server.env.clone(),
            only: (!only.is_empty()).then_some(only),
        });
    }
    Ok(out)
}

/// The paused loop of node `id` with the operator's answer, when there is one to resume.
fn take_resume(ctx: &Ctx<'_>, env: &AgentEnv, id: &str) -> Option<(Snapshot, String)> {
    let mut state = ctx.lock_state();
    let paused = state.paused.take_if(|p| p.node == id)?;
    match &env.answer {
        Some(answer) => paused.snapshot.map(|s| (s, answer.clone())),
        None => {
            // No answer: ask again from the start of the node's turn.
            state.paused = None;
            None
        }
    }
}

async fn run_in_process(
    ctx: &Ctx<'_>,
    env: &AgentEnv,
    (workspace, path): (&std::path::Path, Option<&crate::sandbox::host::HostPath>),
    id: &str,
    agent: &AgentNode,
    spec: &LoopSpec,
    resume: Option<(Snapshot, String)>,
) -> Result<AgentResult, Failure> {
    let client = HttpClient::new(Route::HostEnv, MODEL_TIMEOUT, &ctx.environment)
        .map_err(|e| Failure::new(FailureCode::ExecutionFailed, e.to_string()))?;
    let shell = crate::sandbox::host::host_sandbox_with_path(&ctx.run_id, workspace, path)
        .await
        .map_err(|e| {
            Failure::new(
                FailureCode::ExecutionFailed,
                format!("the host shell could not be set up: {e}"),
            )
        })?;
    // Without a sandbox `web_fetch` leaves as the model calls do: by the host's proxy
    // variables, if any (there is no network policy to apply).
    let web = HttpClient::new(
        Route::HostEnv,
        iterion_agent::claw_tools::FETCH_TIMEOUT,
        &ctx.environment,
    )
    .map_err(|e| Failure::new(FailureCode::ExecutionFailed, e.to_string()))?;
    let host = InProcessTools {
        local: LocalTools::new(
            workspace,
            Arc::new(crate::sandbox::host::SandboxShell(Arc::from(shell))),
            vec![
                ("ITERION_RUN_ID".to_owned(), ctx.run_id.clone()),
                ("ITERION_NODE_ID".to_owned(), id.to_owned()),
            ],
        )
        .with_web(web),
        allowed: spec.tools.iter().map(|t| t.name.clone()).collect(),
        node: id.to_owned(),
        operator: env.operator.clone(),
    };
    let observer = RunLogObserver {
        ctx_log: ctx.logs.clone(),
        node: id.to_owned(),
        redactor: Arc::clone(&ctx.redactor),
        transcript: Transcript::start(Arc::clone(&ctx.events)),
    };
    let _ = agent;
    let ended = iterion_agent::session::run_loop(spec, &client, &host, &observer, resume).await;
    // Every turn and call is recorded before the node's own end.
    observer.transcript.finish().await;
    match ended {
        Ok(LoopEnd::Done { output, usage }) => Ok(AgentResult::Done(output, usage)),
        Ok(LoopEnd::Paused { question, snapshot }) => {
            Ok(AgentResult::Paused(Box::new(PausedAgent {
                node: id.to_owned(),
                question,
                snapshot: Some(*snapshot),
                delegate: None,
                child: None,
            })))
        }
        Err(error) => Err(loop_failure(error)),
    }
}

struct InProcessTools {
    local: LocalTools,
    allowed: BTreeSet<String>,
    node: String,
    operator: Option<Arc<dyn Operator>>,
}

#[async_trait]
impl ToolHost for InProcessTools {
    async fn call(&self, call: &ToolCall) -> ToolOutcome {
        if !self.allowed.contains(&call.name) {
            return ToolOutcome::Error(format!(
                "tool {:?} is not available to this node",
                call.name
            ));
        }
        if call.name == ASK_USER {
            return ask_operator(self.operator.as_ref(), &self.node, &call.input).await;
        }
        match self.local.call_reply(&call.name, &call.input).await {
            Ok(reply) => match reply.image {
                Some(image) => ToolOutcome::Image(reply.text, image),
                None => ToolOutcome::Output(reply.text),
            },
            Err(error) => ToolOutcome::Error(error.to_string()),
        }
    }
}

/// Writes the loop's notes to the run log (they are not events: SANDBOX.md §9.1 lists none),
/// and its transcript as `agent_turn` / `agent_tool_call` events.
struct RunLogObserver {
    ctx_log: Arc<dyn crate::records::sink::RunLogSink>,
    node: String,
    redactor: Arc<crate::records::secrets::Redactor>,
    transcript: Transcript,
}

impl LoopObserver for RunLogObserver {
    fn note(&self, kind: &'static str, payload: Value) {
        self.ctx_log.line(LogLine {
            node: self.node.clone(),
            stream: LogStream::System,
            text: self
                .redactor
                .redact(&format!("claw: {kind} {}", json!(payload))),
        });
    }

    fn turn(&self, turn: &TurnRecord) {
        self.transcript
            .emit(transcript::turn_event(&self.node, turn, &self.redactor));
    }

    fn tool_call(&self, call: &ToolCallRecord) {
        self.transcript.emit(transcript::tool_call_event(
            &self.node,
            call,
            &self.redactor,
        ));
    }
}

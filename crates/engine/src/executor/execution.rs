//! The executor: runs a compiled workflow's graph to an outcome (DSL.md §5–§6).
//!
//! [`Execution`] collects the inputs (builder), [`Execution::run`] drives the graph. Inside, one
//! [`Ctx`] is shared by the main line and every fan-out branch; they run as futures of the same
//! task (no spawning), so a cancelled branch is simply dropped and its exec with it — the noop
//! driver kills the process on drop, a container driver ends its exec.
//!
//! Stopping has one mechanism: the `stop` token, a child of the caller's cancellation token.
//! A budget cap records why it stopped the run (first cause wins) and cancels it; every running
//! tool races its exec against the token. A fan-out has its own child token so that `wait_all`
//! can cancel the siblings of a failed branch without stopping the run.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures_util::future::BoxFuture;
use iterion_dsl::ir::{AgentNode, NodeBody, RouterMode, SubbotNode, Target, Workflow};
use iterion_sandbox::SandboxRun;
use iterion_vocab::Environment;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::executor::agent::env::AgentEnv;
use crate::executor::agent::operator::{AgentResult, PausedAgent};
use crate::executor::budget::RunBudget;
use crate::executor::checkpoint::{Checkpoint, NextNode};
use crate::executor::child_runs::{ChildRuns, InlineChildRuns};
use crate::executor::ctx::{BranchCtx, Ctx, LineEnd};
use crate::executor::error::ExecutionError;
use crate::executor::graph::Graph;
use crate::executor::input::InputCtx;
use crate::executor::outcome::{Failure, RunOutcome, RunReport};
use crate::executor::select::{self, WalkInput};
use crate::executor::subbot::{self, ChildGraph, Prepared};
use crate::executor::{agent, fanout, tool};
use crate::records::events::{
    ArtifactPublished, BudgetDimension, Event, NodeFailed, NodeFinished, NodeStarted, RunPaused,
};
use crate::records::secrets::{Redactor, ResolvedSecret};
use crate::records::sink::{EventSink, NullRunLog, RunLogSink};
use crate::sandbox::active::SharedSandbox;
use iterion_vocab::{FailureCode, OutcomeStatus};

/// The largest `node_finished.output` recorded whole: 64 KiB of compact JSON.
pub(crate) const EVENT_OUTPUT_MAX_BYTES: usize = 64 * 1024;

/// One run of a workflow's graph: the inputs, then [`Execution::run`].
///
/// ```no_run
/// # async fn demo(wf: &iterion_dsl::ir::Workflow, sandbox: &dyn iterion_sandbox::SandboxRun) {
/// use std::sync::Arc;
/// use iterion_engine::{Execution, MemoryEventSink};
/// let events = MemoryEventSink::new();
/// let report = Execution::new(wf, "run-1", sandbox, Arc::new(events.clone()))
///     .vars(serde_json::Map::new())
///     .run()
///     .await;
/// # }
/// ```
pub struct Execution<'a> {
    workflow: &'a Workflow,
    run_id: String,
    sandbox: &'a dyn SandboxRun,
    events: Arc<dyn EventSink>,
    vars: Map<String, Value>,
    secrets: Vec<ResolvedSecret>,
    workdir: Option<String>,
    logs: Arc<dyn RunLogSink>,
    cancel: CancellationToken,
    resume: Option<Checkpoint>,
    budget: Option<RunBudget>,
    environment: Environment,
    agents: Option<Arc<AgentEnv>>,
    depth: u32,
    redactor: Option<Arc<Redactor>>,
    children: Option<Arc<dyn ChildRuns + 'a>>,
    shared: SharedSandbox,
    attachments: Value,
}

impl<'a> Execution<'a> {
    /// A run of `workflow` with id `run_id`, executing tools through `sandbox` (the noop driver's
    /// run when unsandboxed) and emitting to `events`.
    pub fn new(
        workflow: &'a Workflow,
        run_id: impl Into<String>,
        sandbox: &'a dyn SandboxRun,
        events: Arc<dyn EventSink>,
    ) -> Self {
        Execution {
            workflow,
            run_id: run_id.into(),
            sandbox,
            events,
            vars: Map::new(),
            secrets: Vec::new(),
            workdir: None,
            logs: Arc::new(NullRunLog),
            cancel: CancellationToken::new(),
            resume: None,
            budget: None,
            environment: Environment::empty(),
            agents: None,
            depth: 0,
            redactor: None,
            children: None,
            shared: SharedSandbox::default(),
            attachments: Value::Object(Map::new()),
        }
    }

    /// The run's attachments as `{{attachments.NAME…}}` reads them
    /// ([`crate::sandbox::attachments::scope`]). Default: none.
    pub(crate) fn attachments(mut self, attachments: Value) -> Self {
        self.attachments = attachments;
        self
    }

    /// The resolved vars (`{{vars.X}}`, and the entry node's default input). Default: none.
    /// The launcher has already applied defaults and `--var` values.
    pub fn vars(mut self, vars: Map<String, Value>) -> Self {
        self.vars = vars;
        self
    }

    /// The secrets' resolved values, used only to redact recorded text. Default: none.
    pub fn secrets(mut self, secrets: Vec<ResolvedSecret>) -> Self {
        self.secrets = secrets;
        self
    }

    /// The working directory of every exec. Default: the sandbox's own (the workspace folder,
    /// or the noop run's workspace).
    pub fn workdir(mut self, workdir: impl Into<String>) -> Self {
        self.workdir = Some(workdir.into());
        self
    }

    /// Where tool output lines go. Default: dropped.
    pub fn run_log(mut self, logs: Arc<dyn RunLogSink>) -> Self {
        self.logs = logs;
        self
    }

    /// Cancelling this token stops the run: running commands are killed and the run ends
    /// `cancelled` / `CANCELLED` (the launcher maps an interruption to `INTERRUPTED`). Default:
    /// a token nobody cancels.
    pub fn cancel_token(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Resumes from a checkpoint of an earlier attempt: its outputs, loop counters, attempt and
    /// iteration counts are kept and the run starts at its `next` node. Default: a fresh run
    /// from the entry node.
    pub fn resume_from(mut self, checkpoint: Checkpoint) -> Self {
        self.resume = Some(checkpoint);
        self
    }

    /// The run's caps. Default: the workflow's `budget:`, its `${…}` expanded from the
    /// execution's environment ([`RunBudget::resolve`], [`Execution::environment`]).
    pub fn budget(mut self, budget: RunBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The environment the run reads: the default budget's `${…}`, the host agents' proxy
    /// variables, and a nested subbot's own. Default: empty (the engine passes its own).
    pub fn environment(mut self, environment: Environment) -> Self {
        self.environment = environment;
        self
    }

    /// How agent and judge nodes run: their models, where the loop runs, who answers
    /// `ask_user`. Default: none, and an agent node fails with `CAPABILITY_UNSUPPORTED`.
    pub(crate) fn agents(mut self, env: AgentEnv) -> Self {
        self.agents = Some(Arc::new(env));
        self
    }

    /// The agent environment, shared with the parent run (a subbot's child run).
    pub(crate) fn shared_agents(mut self, env: Arc<AgentEnv>) -> Self {
        self.agents = Some(env);
        self
    }

    /// Where subbot child runs are recorded, and what this run's sandbox hands the children
    /// that adopt it (SANDBOX.md §14). Default: [`InlineChildRuns`] over this run's events, no
    /// container workspace, scratch on the host.
    pub(crate) fn child_runs(
        mut self,
        children: Arc<dyn ChildRuns + 'a>,
        shared: SharedSandbox,
    ) -> Self {
        self.children = Some(children);
        self.shared = shared;
        self
    }

    /// Redacts with the run's own redactor (shared with its record, so a value it learns later,
    /// the proxy token, is redacted here too) instead of one built from the secrets.
    pub(crate) fn redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = Some(redactor);
        self
    }

    /// Makes this a child run at nesting `depth` (DSL.md §3.9), redacting with the parent's
    /// redactor.
    pub(crate) fn nested(mut self, depth: u32, redactor: Arc<Redactor>) -> Self {
        self.depth = depth;
        self.redactor = Some(redactor);
        self
    }

    /// Runs the graph to an outcome. Never fails once started: every failure is an outcome.
    ///
    /// # Errors
    ///
    /// [`ExecutionError`] before anything runs: a checkpoint that cannot be resumed, or a budget
    /// that cannot be resolved.
    pub async fn run(self) -> Result<RunReport, ExecutionError> {
        let wf = self.workflow;
        let budget = match self.budget {
            Some(b) => b,
            None => RunBudget::resolve(&wf.budget, |k| self.environment.get(k))?,
        };
        let graph = Graph::new(wf);
        let vars = Value::Object(self.vars);
        let (state, start) = match self.resume {
            Some(cp) => {
                let start = cp.resume_point(wf)?.clone();
                (cp, start)
            }
            None => {
                let state = Checkpoint::default();
                let input = InputCtx {
                    wf,
                    graph: &graph,
                    vars: &vars,
                    run: serde_json::json!({"id": self.run_id}),
                    attachments: &self.attachments,
                }
                .node_input(&state, &wf.entry, None);
                let start = NextNode {
                    node: wf.entry.clone(),
                    input,
                };
                (state, start)
            }
        };
        let redactor = self
            .redactor
            .unwrap_or_else(|| Arc::new(Redactor::new(&self.secrets)));
        let children = self
            .children
            .unwrap_or_else(|| Arc::new(InlineChildRuns::new(self.events.clone())));
        let iterations = std::sync::atomic::AtomicU64::new(state.iterations);
        let ctx = Ctx {
            wf,
            graph,
            run_id: self.run_id,
            vars,
            attachments: self.attachments,
            redactor,
            depth: self.depth,
            children,
            shared: self.shared,
            sandbox: self.sandbox,
            workdir: self.workdir,
            events: self.events,
            logs: self.logs,
            stop: self.cancel.child_token(),
            stop_reason: Mutex::new(None),
            state: Mutex::new(state),
            budget,
            environment: self.environment,
            agents: self.agents,
            started: Instant::now(),
            iterations,
            tokens: std::sync::atomic::AtomicU64::new(0),
        };
        let end = ctx.drive(start).await;
        Ok(ctx.report(end))
    }
}

impl Ctx<'_> {
    /// Runs the main line, with the `max_duration` watch beside it.
    async fn drive(&self, start: NextNode) -> LineEnd {
        let watch = async {
            if let Some(limit) = self.budget.max_duration {
                tokio::time::sleep(limit).await;
                self.stop_for_budget(BudgetDimension::MaxDuration).await;
            }
            std::future::pending::<std::convert::Infallible>().await
        };
        tokio::select! {
            end = self.run_line(start, None) => end,
            never = watch => match never {},
        }
    }

    /// Runs nodes from `start` until `done`, `fail`, a failure, or (in a branch) the join.
    pub(crate) fn run_line<'b>(
        &'b self,
        start: NextNode,
        branch: Option<&'b BranchCtx>,
    ) -> BoxFuture<'b, LineEnd> {
        Box::pin(async move {
            let mut pending = start;
            // The node that routed to `pending`: a resumable `fail` node resumes there.
            let mut previous: Option<NextNode> = None;
            loop {
                if branch.is_none() {
                    let mut state = self.lock_state();
                    state.record_start(&pending);
                    state.next = Some(pending.clone());
                }
                let Some(node) = self.wf.node(&pending.node) else {
                    return LineEnd::Failed(Failure::new(
                        FailureCode::NoOutgoingEdge,
                        format!("node \"{}\" is not declared", pending.node),
                    ));
                };
                let output = match self.run_node(&node.id, &pending.input, branch).await {
                    Ok(output) => output,
                    Err(failure) => {
                        if failure.code == FailureCode::DeclaredFailureResumable && branch.is_none()
                        {
                            self.lock_state().next = previous;
                        }
                        return LineEnd::Failed(failure.at(&node.id));
                    }
                };
                if let NodeBody::Router(r) = &node.body
                    && r.mode.fans_out()
                {
                    let fanned = if r.mode == RouterMode::FanOutEach {
                        crate::executor::each::fan_out_each(self, &node.id, r, self).await
                    } else {
                        fanout::fan_out(self, &node.id, self).await
                    };
                    match fanned {
                        Ok(next) => {
                            pending = next;
                            continue;
                        }
                        Err(failure) => return LineEnd::Failed(failure),
                    }
                }
                match self.choose(&node.id, &output, branch).await {
                    Ok(Choice::Next(next)) => {
                        previous = Some(std::mem::replace(&mut pending, next));
                    }
                    Ok(Choice::End(end)) => return end,
                    Err(failure) => return LineEnd::Failed(failure.at(&node.id)),
                }
            }
        })
    }

    /// Edge selection after `node` finished with `output` (§5.4), and what follows from it.
    async fn choose(
        &self,
        node: &str,
        output: &Value,
        branch: Option<&BranchCtx>,
    ) -> Result<Choice, Failure> {
        let picker = match self.wf.node(node).map(|n| &n.body) {
            Some(NodeBody::Router(r)) => r.mode,
            _ => RouterMode::Condition,
        };
        let (selected, events) = if picker == RouterMode::RoundRobin {
            (crate::executor::pick::round_robin(self, node), Vec::new())
        } else if picker == RouterMode::Llm {
            (
                crate::executor::pick::selected_edge(self, node, output),
                Vec::new(),
            )
        } else {
            let state = self.state_for(branch);
            select::walk(
                &WalkInput {
                    wf: self.wf,
                    graph: &self.graph,
                    state: &state,
                    vars: &self.vars,
                    run: self.run_scope(),
                },
                node,
                output,
            )
            .map_err(|crate::executor::input::CapInvalid(why)| {
                Failure::new(FailureCode::LoopCapInvalid, why)
            })?
        };
        for event in events {
            self.emit(event).await;
        }
        let Some((index, edge)) = selected.and_then(|i| self.wf.edges.get(i).map(|e| (i, e)))
        else {
            return Err(Failure::new(
                FailureCode::NoOutgoingEdge,
                "no outgoing edge can be taken",
            ));
        };
        // A templated cap as resolved for this crossing: `loop.L.max` inside the loop.
        let resolved_cap = edge
            .loop_
            .as_ref()
            .filter(|l| l.cap_template.is_some())
            .and_then(|l| {
                let state = self.state_for(branch);
                let w = WalkInput {
                    wf: self.wf,
                    graph: &self.graph,
                    state: &state,
                    vars: &self.vars,
                    run: self.run_scope(),
                };
                select::cap_of(&w, l, output).ok()
            });
        let selected_event = select::take(&self.graph, &mut self.lock_state(), edge, output);
        if let (Some(l), Some(cap)) = (&edge.loop_, resolved_cap)
            && let Some(counter) = self.lock_state().loops.get_mut(&l.name)
        {
            counter.max = Some(cap);
        }
        self.emit(selected_event).await;
        match &edge.to {
            Target::Done => {
                if branch.is_none() {
                    self.lock_state().next = None;
                }
                Ok(Choice::End(LineEnd::Done {
                    node: node.to_owned(),
                }))
            }
            Target::Fail => {
                if branch.is_none() {
                    self.lock_state().next = None;
                }
                Err(Failure::new(
                    FailureCode::WorkflowFailed,
                    "the edge to fail was taken",
                ))
            }
            Target::Node(target) => {
                let state = self.state_for(branch);
                if let Some(b) = branch
                    && *target == b.join
                {
                    let loops = crate::executor::input::loop_scope(&self.graph, &state, &self.vars);
                    let mapping = self
                        .inputs()
                        .edge_mapping(&state, &loops, index)
                        .unwrap_or_default();
                    return Ok(Choice::End(LineEnd::Arrived { mapping }));
                }
                let input = self.inputs().node_input(&state, target, Some(index));
                Ok(Choice::Next(NextNode {
                    node: target.clone(),
                    input,
                }))
            }
        }
    }

    /// Runs one node: budget check, `node_started`, the work, then `node_finished` or
    /// `node_failed` (nothing when an agent paused on `ask_user`).
    async fn run_node(
        &self,
        id: &str,
        input: &Value,
        branch: Option<&BranchCtx>,
    ) -> Result<Value, Failure> {
        let token = branch.map_or(&self.stop, |b| &b.token);
        let Some(node) = self.wf.node(id) else {
            return Err(Failure::new(
                FailureCode::NoOutgoingEdge,
                format!("node \"{id}\" is not declared"),
            ));
        };
        if token.is_cancelled() {
            return Err(self.stopped());
        }
        let counted = !matches!(node.body, NodeBody::Router(_));
        let attempt = {
            let mut state = self.lock_state();
            let over = counted
                && self
                    .budget
                    .max_iterations
                    .is_some_and(|max| state.iterations >= max);
            if over {
                None
            } else {
                if counted {
                    state.iterations += 1;
                    self.iterations
                        .store(state.iterations, std::sync::atomic::Ordering::Relaxed);
                }
                let attempt = state.attempts.entry(id.to_owned()).or_default();
                *attempt = attempt.saturating_add(1);
                Some(*attempt)
            }
        };
        let Some(attempt) = attempt else {
            self.stop_for_budget(BudgetDimension::MaxIterations).await;
            return Err(self.stopped());
        };
        self.emit(Event::NodeStarted(NodeStarted {
            node: id.to_owned(),
            kind: node.kind,
            attempt,
            branch: branch.map(|b| b.first.clone()),
        }))
        .await;
        let started = Instant::now();
        let mut usage = None;
        let result = match &node.body {
            NodeBody::Router(r) if r.mode == RouterMode::Llm => {
                match crate::executor::pick::llm(self, id, r, input, branch).await {
                    Ok((output, used)) => {
                        usage = used;
                        Ok(output)
                    }
                    Err(failure) => Err(failure),
                }
            }
            NodeBody::Router(_) => Ok(input.clone()),
            NodeBody::Fail(f) => Err(self.declared_failure(f, input, branch)),
            NodeBody::Compute(c) => crate::executor::compute::run(self, c, input, branch),
            NodeBody::Human(h) => {
                let outcome = tokio::select! {
                    biased;
                    () = token.cancelled() => Err(self.stopped()),
                    outcome = crate::executor::human::run(self, id, h, input, branch) => outcome,
                };
                match outcome {
                    Ok(AgentResult::Done(output, used)) => {
                        if h.mode != iterion_dsl::ir::HumanMode::Human {
                            usage = Some(used);
                        }
                        Ok(output)
                    }
                    Ok(AgentResult::Paused(paused)) => return Err(self.pause(*paused)),
                    Err(failure) => Err(failure),
                }
            }
            NodeBody::Tool(t) => tool::run(self, id, t, input, branch, token).await,
            NodeBody::Subbot(b) => {
                match Box::pin(self.run_subbot(id, b, input, branch, token)).await {
                    // Its child paused on a question: so does this run (no `node_failed`).
                    Err(failure) if failure.paused => return Err(failure),
                    result => result,
                }
            }
            NodeBody::Agent(a) => {
                let outcome = tokio::select! {
                    biased;
                    () = token.cancelled() => Err(self.stopped()),
                    outcome = agent::node::run(self, id, a, input, branch) => outcome,
                };
                match outcome {
                    Ok(AgentResult::Done(output, used)) => {
                        usage = Some(used);
                        Ok(output)
                    }
                    Ok(AgentResult::Paused(paused)) => return Err(self.pause(*paused)),
                    Err(failure) => Err(failure),
                }
            }
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(used) = &usage {
            self.tokens.fetch_add(
                used.input_tokens.saturating_add(used.output_tokens),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        match result {
            Ok(output) => {
                self.record_output(branch, id, &output);
                self.emit(Event::NodeFinished(NodeFinished {
                    node: id.to_owned(),
                    duration_ms,
                    output: self.recorded_output(&output),
                    usage,
                }))
                .await;
                let published = match &node.body {
                    NodeBody::Agent(AgentNode { publish, .. }) => publish.as_ref(),
                    NodeBody::Human(h) => h.publish.as_ref(),
                    NodeBody::Tool(t) => t.publish.as_ref(),
                    NodeBody::Compute(c) => c.publish.as_ref(),
                    _ => None,
                };
                if let Some(name) = published {
                    self.publish(id, name, &output).await;
                }
                Ok(output)
            }
            Err(failure) => {
                self.emit(Event::NodeFailed(NodeFailed {
                    node: id.to_owned(),
                    code: failure.code,
                    message: self.redactor.redact(&failure.message),
                    exit_code: failure.exit_code,
                    stderr_tail: failure.stderr_tail.clone(),
                    declared_code: failure.declared_code(),
                }))
                .await;
                Err(failure)
            }
        }
    }

    /// The failure a `fail NAME:` node ends its line with: its own code beside the engine's
    /// `DECLARED_FAILURE[_RESUMABLE]`, and its message rendered (a reference that does not
    /// resolve stays as written).
    fn declared_failure(
        &self,
        node: &iterion_dsl::ir::FailNode,
        input: &Value,
        branch: Option<&BranchCtx>,
    ) -> Failure {
        let message = match &node.message {
            Some(text) => self.render_text(text, input, branch),
            None => "the workflow reached this fail node".to_owned(),
        };
        Failure::declared(node.resumable, &node.code, &message)
    }

    /// Stores `output` as artifact `name` (`publish:`): in the run state, where
    /// `{{artifacts.NAME}}` reads it, and as an `artifact_published` event.
    async fn publish(&self, id: &str, name: &str, output: &Value) {
        let version = {
            let mut state = self.lock_state();
            state.artifacts.insert(name.to_owned(), output.clone());
            let next = state.artifact_versions.entry(name.to_owned()).or_default();
            let version = *next;
            *next = next.saturating_add(1);
            version
        };
        self.emit(Event::ArtifactPublished(ArtifactPublished {
            name: name.to_owned(),
            node: id.to_owned(),
            version,
            value: self.recorded_output(output),
        }))
        .await;
    }

    /// The one place a node pauses the run for the operator (an agent's `ask_user`, a `human`
    /// node): the question goes into the checkpoint and the node ends with the paused failure,
    /// which ends the run `paused` (exit 3) until `iterion resume RUN --answer TEXT`.
    pub(crate) fn pause(&self, paused: PausedAgent) -> Failure {
        let question = self.redactor.redact(&paused.question.question);
        self.lock_state().paused = Some(paused);
        Failure {
            paused: true,
            ..Failure::new(FailureCode::Cancelled, question)
        }
    }

    /// Runs subbot node `id` (DSL.md §3.9): [`subbot::prepare`], the adopted child's graph as a
    /// nested [`Execution`] in this run's sandbox, then [`subbot::finish`].
    async fn run_subbot(
        &self,
        id: &str,
        node: &SubbotNode,
        input: &Value,
        branch: Option<&BranchCtx>,
        token: &CancellationToken,
    ) -> Result<Value, Failure> {
        let input = &self.with_node_mappings(&node.with, input, branch);
        let ChildGraph {
            workflow,
            resume,
            opened,
            vars,
            depth,
        } = match subbot::prepare(self, id, node, input, token).await? {
            Prepared::Done(output) => return Ok(output),
            Prepared::Child(child) => *child,
        };
        // The child stops with its parent, and on a cancel request of its own.
        let stop = token.child_token();
        let relay = {
            let (stop, requested) = (stop.clone(), opened.cancel.clone());
            tokio::spawn(async move {
                requested.cancelled().await;
                stop.cancel();
            })
        };
        let mut execution = Execution::new(
            workflow,
            opened.run_id.clone(),
            self.sandbox,
            opened.events.clone(),
        )
        .vars(vars.clone())
        .environment(self.environment.clone())
        .run_log(self.logs.clone())
        .cancel_token(stop.clone())
        .nested(depth, self.redactor.clone())
        .child_runs(self.children.clone(), self.shared.clone());
        if let Some(workdir) = &self.workdir {
            execution = execution.workdir(workdir.clone());
        }
        if let Some(checkpoint) = resume {
            execution = execution.resume_from(checkpoint);
        }
        if let Some(agents) = &self.agents {
            // The child's agent nodes get their own model routes; everything else (where they
            // run, the operator, the delegate CLIs' config dirs and the subscription logins the
            // parent loaded and seeded, its ask-user channel) is the parent's: an adopted child
            // gets no credential the parent did not have.
            // A route that does not resolve leaves that node without one (it then fails, naming
            // itself); the reason is in the run log. The child's run is closed as usual.
            let routes = iterion_agent::provider::resolve_routes(workflow, &vars, |k| {
                self.environment.get(k)
            })
            .unwrap_or_else(|error| {
                self.logs.line(crate::records::sink::LogLine {
                    node: id.to_owned(),
                    stream: iterion_vocab::LogStream::System,
                    text: format!("subbot {id}: the child's model routes: {error}"),
                });
                iterion_agent::provider::Routes::new()
            });
            let mut child = (**agents).clone();
            child.routes = routes;
            execution = execution.shared_agents(Arc::new(child));
        }
        let started = Instant::now();
        let report = execution.run().await;
        relay.abort();
        subbot::finish(self, id, node, opened, report, started).await
    }

    /// An output as events record it: redacted, and clamped to [`EVENT_OUTPUT_MAX_BYTES`] (a
    /// longer one becomes a string holding the start of its compact JSON and a note).
    fn recorded_output(&self, output: &Value) -> Value {
        let redacted = self.redactor.redact_json(output);
        let text = iterion_dsl::template::compact_json(&redacted);
        if text.len() <= EVENT_OUTPUT_MAX_BYTES {
            return redacted;
        }
        let head = iterion_agent::text::truncate_bytes(&text, EVENT_OUTPUT_MAX_BYTES);
        Value::String(format!(
            "{head}… [truncated: {} bytes of compact JSON]",
            text.len()
        ))
    }

    /// The report: the outcome and the redacted checkpoint.
    fn report(self, end: LineEnd) -> RunReport {
        let redactor = self.redactor;
        let mut checkpoint = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        for value in checkpoint.outputs.values_mut() {
            *value = redactor.redact_json(value);
        }
        for value in checkpoint.history.values_mut().flatten() {
            *value = redactor.redact_json(value);
        }
        for counter in checkpoint.loops.values_mut() {
            counter.previous_output = redactor.redact_json(&counter.previous_output);
        }
        if let Some(next) = &mut checkpoint.next {
            next.input = redactor.redact_json(&next.input);
        }
        for start in checkpoint.starts.values_mut() {
            start.input = redactor.redact_json(&start.input);
        }
        // The paused loop's conversation is recorded too: a tool may have printed a secret.
        if let Some(paused) = &mut checkpoint.paused
            && let Ok(value) = serde_json::to_value(&paused.snapshot)
            && let Ok(redacted) = serde_json::from_value(redactor.redact_json(&value))
        {
            paused.snapshot = redacted;
        }
        let paused = checkpoint.paused.as_ref().map(|p| RunPaused {
            node: p.node.clone(),
            question: redactor.redact(&p.question.question),
            options: (!p.question.options.is_empty()).then(|| p.question.options.clone()),
        });
        let outcome = match end {
            LineEnd::Failed(failure) if failure.paused => RunOutcome {
                status: OutcomeStatus::Paused,
                failure_code: None,
                message: Some(redactor.redact(&failure.message)),
                last_completed_node: checkpoint.last_completed_node.clone(),
                final_output: None,
                outputs: checkpoint.outputs.clone(),
                declared_code: None,
                paused,
            },
            LineEnd::Done { node } => RunOutcome {
                status: OutcomeStatus::Finished,
                failure_code: None,
                message: None,
                last_completed_node: checkpoint.last_completed_node.clone(),
                final_output: checkpoint.outputs.get(&node).cloned(),
                outputs: checkpoint.outputs.clone(),
                declared_code: None,
                paused: None,
            },
            LineEnd::Failed(failure) => RunOutcome {
                status: failure.code.status().unwrap_or(OutcomeStatus::Failed),
                failure_code: Some(failure.code),
                message: Some(redactor.redact(&failure.describe())),
                last_completed_node: checkpoint.last_completed_node.clone(),
                final_output: None,
                outputs: checkpoint.outputs.clone(),
                declared_code: failure.declared_code(),
                paused: None,
            },
            LineEnd::Arrived { .. } => RunOutcome {
                status: OutcomeStatus::Failed,
                failure_code: Some(FailureCode::JoinFailed),
                message: Some("a join was reached outside its fan-out".to_owned()),
                last_completed_node: checkpoint.last_completed_node.clone(),
                final_output: None,
                outputs: checkpoint.outputs.clone(),
                declared_code: None,
                paused: None,
            },
        };
        RunReport {
            outcome,
            checkpoint,
        }
    }
}

/// What edge selection leads to.
enum Choice {
    /// Run this node next.
    Next(NextNode),
    /// The line ends.
    End(LineEnd),
}

impl fanout::Lines for Ctx<'_> {
    fn branch<'b>(&'b self, start: NextNode, branch: &'b BranchCtx) -> BoxFuture<'b, LineEnd> {
        self.run_line(start, Some(branch))
    }
}

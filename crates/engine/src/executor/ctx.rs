//! The state every line of one run shares ([`Ctx`]): the workflow, the run's sandbox, sinks and
//! redactor, the checkpoint being built, the budget and the stop token. It sits below every node
//! kind: they read it and record through it; the driver (`execution`) is the only one that
//! builds it and runs lines over it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use iterion_dsl::ir::Workflow;
use iterion_sandbox::SandboxRun;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::executor::agent::env::AgentEnv;
use crate::executor::budget::RunBudget;
use crate::executor::checkpoint::Checkpoint;
use crate::executor::child_runs::ChildRuns;
use crate::executor::graph::Graph;
use crate::executor::input::InputCtx;
use crate::executor::outcome::Failure;
use crate::records::events::{BudgetDimension, BudgetExceeded, Event};
use crate::records::secrets::Redactor;
use crate::records::sink::{EventSink, RunLogSink};
use crate::sandbox::active::SharedSandbox;
use iterion_vocab::FailureCode;

/// How a line of execution (the main line, or one fan-out branch) ended.
pub(crate) enum LineEnd {
    /// An edge into `done` was taken from this node.
    Done { node: String },
    /// A node failed, `fail` was reached, or no edge could be taken.
    Failed(Failure),
    /// A branch took an edge into its join; the edge's mapping, rendered.
    Arrived { mapping: Map<String, Value> },
}

/// A fan-out branch's identity.
pub(crate) struct BranchCtx {
    /// The branch's first node (`node_started.branch`, `_failed_branches[].branch`).
    pub first: String,
    /// The join it runs to.
    pub join: String,
    /// The fan-out's token: cancelled by the run's stop, or by a failed sibling under
    /// `wait_all`.
    pub token: CancellationToken,
    /// A `fan_out_each` branch's own outputs, over the run's: the router's (with the item) and
    /// those of the branch's nodes for this item.
    pub item: Option<Mutex<std::collections::BTreeMap<String, Value>>>,
}

/// The run state as one line sees it ([`Ctx::state_for`]): the shared checkpoint, or for a
/// `fan_out_each` branch a copy with the item's outputs over it.
pub(crate) enum StateRef<'a> {
    Shared(MutexGuard<'a, Checkpoint>),
    Item(Box<Checkpoint>),
}

impl std::ops::Deref for StateRef<'_> {
    type Target = Checkpoint;
    fn deref(&self) -> &Checkpoint {
        match self {
            StateRef::Shared(guard) => guard,
            StateRef::Item(state) => state,
        }
    }
}

/// The state shared by every line of one run.
pub(crate) struct Ctx<'a> {
    pub wf: &'a Workflow,
    pub graph: Graph,
    pub run_id: String,
    pub vars: Value,
    /// The `attachments` namespace ([`crate::sandbox::attachments::scope`]).
    pub attachments: Value,
    pub redactor: Arc<Redactor>,
    /// Subbot nesting: 0 for a top-level run (DSL.md §3.9).
    pub depth: u32,
    /// Where child runs are recorded.
    pub children: Arc<dyn ChildRuns + 'a>,
    /// What this run's sandbox hands adopting children (SANDBOX.md §14).
    pub shared: SharedSandbox,
    pub sandbox: &'a dyn SandboxRun,
    pub workdir: Option<String>,
    pub events: Arc<dyn EventSink>,
    pub logs: Arc<dyn RunLogSink>,
    pub stop: CancellationToken,
    pub stop_reason: Mutex<Option<BudgetDimension>>,
    pub state: Mutex<Checkpoint>,
    pub budget: RunBudget,
    /// What the run reads of its host's environment ([`Execution::environment`](crate::Execution::environment)).
    pub environment: iterion_vocab::Environment,
    pub agents: Option<Arc<AgentEnv>>,
    /// When the executor started (`run.elapsed_seconds`).
    pub started: std::time::Instant,
    /// Counted node executions so far, as `state.iterations` (`run.iterations`, read without
    /// the state's lock).
    pub iterations: AtomicU64,
    /// Model tokens (input and output) used so far by this attempt (`run.tokens`).
    pub tokens: AtomicU64,
}

impl Ctx<'_> {
    pub(crate) fn lock_state(&self) -> MutexGuard<'_, Checkpoint> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `run` namespace: the id, and where the run stands against its budget — seconds since
    /// the executor started, counted node executions, model tokens (this attempt's), each
    /// beside its cap (`null` without one); `cost_usd` is `null` (there is no price table) and
    /// `max_cost_usd` is the budget's literal. Reads no lock, so it may be built anywhere.
    pub(crate) fn run_scope(&self) -> Value {
        serde_json::json!({
            "id": self.run_id,
            "elapsed_seconds": self.started.elapsed().as_secs(),
            "max_duration_seconds": self.budget.max_duration.map(|d| d.as_secs()),
            "iterations": self.iterations.load(Ordering::Relaxed),
            "max_iterations": self.budget.max_iterations,
            "tokens": self.tokens.load(Ordering::Relaxed),
            "max_tokens": self.wf.budget.max_tokens,
            "cost_usd": Value::Null,
            "max_cost_usd": self.wf.budget.max_cost_usd,
        })
    }

    /// The state `branch` reads (the only way a line reads outputs).
    pub(crate) fn state_for(&self, branch: Option<&BranchCtx>) -> StateRef<'_> {
        let guard = self.lock_state();
        let Some(item) = branch.and_then(|b| b.item.as_ref()) else {
            return StateRef::Shared(guard);
        };
        let mut state = guard.clone();
        drop(guard);
        let own = item.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .outputs
            .extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        StateRef::Item(Box::new(state))
    }

    /// Records node `id`'s output where `branch` keeps it (an item's own, or the run's), with
    /// its history when it is in a loop.
    pub(crate) fn record_output(&self, branch: Option<&BranchCtx>, id: &str, output: &Value) {
        if let Some(item) = branch.and_then(|b| b.item.as_ref()) {
            item.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.to_owned(), output.clone());
            self.lock_state().last_completed_node = Some(id.to_owned());
            return;
        }
        let mut state = self.lock_state();
        state.outputs.insert(id.to_owned(), output.clone());
        if self.graph.in_loop(id) {
            state
                .history
                .entry(id.to_owned())
                .or_default()
                .push(output.clone());
        }
        state.last_completed_node = Some(id.to_owned());
    }

    pub(crate) fn inputs(&self) -> InputCtx<'_> {
        InputCtx {
            wf: self.wf,
            graph: &self.graph,
            vars: &self.vars,
            run: self.run_scope(),
            attachments: &self.attachments,
        }
    }

    /// Runs `f` over a [`View`](crate::executor::input::View) of the run state `branch` reads,
    /// with `input` as `input`: the one place a line's references are resolved from.
    pub(crate) fn with_view<R>(
        &self,
        input: &Value,
        branch: Option<&BranchCtx>,
        f: impl FnOnce(&crate::executor::input::View<'_>) -> R,
    ) -> R {
        let run = self.run_scope();
        let state = self.state_for(branch);
        let loops = crate::executor::input::loop_scope(&self.graph, &state, &self.vars);
        f(&crate::executor::input::View {
            vars: &self.vars,
            input,
            outputs: &state.outputs,
            artifacts: &state.artifacts,
            attachments: &self.attachments,
            history: &state.history,
            loops: &loops,
            run: &run,
            secrets: &self.wf.secrets,
        })
    }

    /// `text` rendered as prompt text against the run state and `input` (a reference that does
    /// not resolve stays as written).
    pub(crate) fn render_text(
        &self,
        text: &str,
        input: &Value,
        branch: Option<&BranchCtx>,
    ) -> String {
        let parsed = iterion_dsl::template::parse(text);
        self.with_view(input, branch, |view| {
            parsed.render_text(|r| view.resolve(r))
        })
    }

    /// `input` with a subbot's own `with { … }` values rendered over it (against the state
    /// `branch` reads, `input` as `input`).
    pub(crate) fn with_node_mappings(
        &self,
        with: &[iterion_dsl::ir::Mapping],
        input: &Value,
        branch: Option<&BranchCtx>,
    ) -> Value {
        if with.is_empty() {
            return input.clone();
        }
        let mut out = input.as_object().cloned().unwrap_or_default();
        self.with_view(input, branch, |view| {
            for m in with {
                out.insert(
                    m.key.clone(),
                    crate::executor::input::render_mapping(m, view),
                );
            }
        });
        Value::Object(out)
    }

    /// The value of `text`'s one `{{…}}` reference against the run state and `input`; `None`
    /// when it is not one reference or does not resolve.
    pub(crate) fn resolve_one(&self, text: &str, input: &Value) -> Option<Value> {
        let parsed = iterion_dsl::template::parse(text);
        let reference = parsed.single_reference()?;
        self.with_view(input, None, |view| view.resolve(reference))
    }

    pub(crate) async fn emit(&self, event: Event) {
        self.events.emit(event).await;
    }

    /// Stops the run for a budget cap, unless it is already stopping: the first cause wins and
    /// emits the one `budget_exceeded`.
    pub(crate) async fn stop_for_budget(&self, dimension: BudgetDimension) {
        let first = {
            let mut reason = self
                .stop_reason
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let first = reason.is_none() && !self.stop.is_cancelled();
            if first {
                *reason = Some(dimension);
            }
            first
        };
        if first {
            self.emit(Event::BudgetExceeded(BudgetExceeded { dimension }))
                .await;
            self.stop.cancel();
        }
    }

    /// The failure of work stopped by a token: the run's stop reason, or a failed sibling.
    pub(crate) fn stopped(&self) -> Failure {
        if !self.stop.is_cancelled() {
            return Failure::new(
                FailureCode::Cancelled,
                "cancelled: another branch of the fan-out failed",
            );
        }
        let reason = *self
            .stop_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match reason {
            Some(BudgetDimension::MaxIterations) => Failure::new(
                FailureCode::BudgetExceeded,
                format!(
                    "budget max_iterations ({}) reached",
                    self.budget.max_iterations.unwrap_or_default()
                ),
            ),
            Some(BudgetDimension::MaxDuration) => Failure::new(
                FailureCode::BudgetExceeded,
                format!(
                    "budget max_duration ({}) elapsed",
                    iterion_sandbox::format_duration(self.budget.max_duration.unwrap_or_default())
                ),
            ),
            None => Failure::new(FailureCode::Cancelled, "the run was cancelled"),
        }
    }
}

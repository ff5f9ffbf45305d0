//! Subbot nodes (DSL.md §3.9) and shared-sandbox adoption (SANDBOX.md §14).
//!
//! A subbot node runs its compiled child workflow as a **child run**: a nested [`Execution`] of
//! the same task, with its own run id, its own events (through [`ChildRuns`]), the parent's trust,
//! and the parent's sandbox when it adopts. Its output is the child's `final_output`, checked
//! against the node's `output` schema; a child that fails fails the node with the child's code.
//!
//! What is decided here, purely: [`should_adopt`] (the three rules
//! of §14, in order) and [`adopted_in_copy_based_parent`] (resume). A child that declares a
//! sandbox of its own under a bind-mount parent is not run here: [`ChildRuns::run_own`] hands it
//! to the launcher (`record::StoreChildRuns`), which gives it a whole attempt of its own.
//! The declared fields are read from the compiled child (`Workflow::declared_sandbox_fields`,
//! computed from what was written). Open points: `docs/subbots-status.md`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::BoxFuture;
use iterion_dsl::ir::{self, Interaction, NodeBody, SubbotNode, ValueType, Workflow};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::events::{Event, RunStarted};
use crate::executor::{Ctx, Execution};
use crate::failure::{FailureCode, OutcomeStatus};
use crate::outcome::{Failure, RunOutcome};
use crate::sandbox_events::{Adoption, SandboxShared};
use crate::schema;
use crate::sink::EventSink;

/// Where a child run's record and events go.
pub(crate) trait ChildRuns: Send + Sync {
    /// Opens the child run of subbot `node` in `parent_run`: its id and its event sink.
    fn open<'a>(
        &'a self,
        parent_run: &'a str,
        node: &'a str,
        subbot: &'a SubbotNode,
        child: &'a Workflow,
    ) -> BoxFuture<'a, Result<ChildRun, Failure>>;

    /// Records how the child run ended.
    fn close<'a>(&'a self, child: &'a ChildRun, outcome: &'a RunOutcome) -> BoxFuture<'a, ()>;

    /// Runs the child as a run with a sandbox of its own: a declaring child honoured under a
    /// bind-mount parent (SANDBOX.md §14 rule 1). Returns the child's final output.
    fn run_own<'a>(&'a self, own: OwnRun<'a>) -> BoxFuture<'a, Result<Value, Failure>>;
}

/// What [`ChildRuns::run_own`] needs.
pub(crate) struct OwnRun<'a> {
    /// The subbot node.
    pub node: &'a str,
    /// Its declaration.
    pub subbot: &'a SubbotNode,
    /// The compiled child.
    pub child: &'a Workflow,
    /// The child's vars, typed.
    pub vars: Map<String, Value>,
    /// The sandbox fields it declares.
    pub fields: Vec<String>,
    /// The parent's driver.
    pub driver: String,
    /// Cancelling it stops the child.
    pub cancel: CancellationToken,
}

/// An open child run.
pub(crate) struct ChildRun {
    /// Its run id.
    pub run_id: String,
    /// Where its events go.
    pub events: Arc<dyn EventSink>,
    /// Its `run_started`: the child's first event, naming the parent and the root run.
    pub started: RunStarted,
}

/// The executor's default [`ChildRuns`] when no store is wired: child ids are
/// `<parent>.<node>.<n>` and child events go to the parent's sink (so a bare [`Execution`] with a
/// memory sink still sees them).
pub(crate) struct InlineChildRuns {
    events: Arc<dyn EventSink>,
    next: AtomicU64,
}

impl InlineChildRuns {
    pub(crate) fn new(events: Arc<dyn EventSink>) -> InlineChildRuns {
        InlineChildRuns {
            events,
            next: AtomicU64::new(1),
        }
    }
}

impl ChildRuns for InlineChildRuns {
    fn open<'a>(
        &'a self,
        parent_run: &'a str,
        node: &'a str,
        _subbot: &'a SubbotNode,
        child: &'a Workflow,
    ) -> BoxFuture<'a, Result<ChildRun, Failure>> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let run = ChildRun {
            run_id: format!("{parent_run}.{node}.{n}"),
            events: self.events.clone(),
            started: RunStarted {
                workflow: child.name.clone(),
                workflow_hash: String::new(),
                trust: "trusted".to_owned(),
                resumed: false,
                parent_run: Some(parent_run.to_owned()),
                root_run: Some(parent_run.to_owned()),
            },
        };
        Box::pin(async move { Ok(run) })
    }

    fn close<'a>(&'a self, _child: &'a ChildRun, _outcome: &'a RunOutcome) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn run_own<'a>(&'a self, own: OwnRun<'a>) -> BoxFuture<'a, Result<Value, Failure>> {
        let failure = Failure::new(
            FailureCode::CapabilityUnsupported,
            format!(
                "subbot {} declares sandbox fields [{}]; a sandbox of its own needs the launcher \
                 (Engine::run)",
                own.node,
                own.fields.join(", ")
            ),
        );
        Box::pin(async move { Err(failure) })
    }
}

/// What [`should_adopt`] decided (SANDBOX.md §14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AdoptionDecision {
    /// Rule 3: the child runs in the parent's sandbox.
    Adopt,
    /// Rule 1 under a bind-mount parent: the child resolves its own sandbox.
    Declined {
        /// The declared fields.
        fields: Vec<String>,
    },
    /// Rule 1 under a copy-based parent, or rule 2: `SANDBOX_ADOPTION_REFUSED`.
    Refused {
        /// The message.
        message: String,
    },
}

/// The first node of `child` that can pause: an agent or judge whose `interaction` is not
/// `none` (this subset has no human nodes).
pub(crate) fn pausing_node(child: &Workflow) -> Option<&str> {
    child.nodes.iter().find_map(|n| match &n.body {
        NodeBody::Agent(a) if a.interaction != Interaction::None => Some(n.id.as_str()),
        _ => None,
    })
}

/// SANDBOX.md §14's `should_adopt_shared_sandbox`, its rules in order.
pub(crate) fn should_adopt(
    subbot: &str,
    child: &Workflow,
    driver: &str,
    copy_based: bool,
    scratch_in_container: bool,
) -> AdoptionDecision {
    let fields = child.declared_sandbox_fields.clone();
    if !fields.is_empty() {
        if copy_based {
            return AdoptionDecision::Refused {
                message: format!(
                    "subbot {subbot} declares sandbox fields [{}] but its parent's {driver} \
                     sandbox is copy-based",
                    fields.join(", ")
                ),
            };
        }
        return AdoptionDecision::Declined { fields };
    }
    if let Some(node) = pausing_node(child)
        && (copy_based || scratch_in_container)
    {
        let why = if copy_based {
            format!("its parent's {driver} sandbox is copy-based")
        } else {
            "its parent's scratch lives in the container".to_owned()
        };
        return AdoptionDecision::Refused {
            message: format!("subbot {subbot} can pause at node \"{node}\" but {why}"),
        };
    }
    AdoptionDecision::Adopt
}

/// The parent run of a child whose last `sandbox_shared` says it adopted a copy-based parent's
/// sandbox (SANDBOX.md §14, resume): such a child cannot be resumed where it ran.
pub(crate) fn adopted_in_copy_based_parent<'a>(
    events: impl DoubleEndedIterator<Item = (&'a str, &'a Value)>,
) -> Option<String> {
    let (_, last) = events.rev().find(|(kind, _)| *kind == "sandbox_shared")?;
    let flag = |key: &str| last.get(key).and_then(Value::as_bool);
    if flag("adopted") == Some(true) && flag("copy_based") == Some(true) {
        let parent = last.get("parent_run").and_then(Value::as_str).unwrap_or("");
        return Some(parent.to_owned());
    }
    None
}

/// The child's vars: its defaults, then every input key naming a child var, typed as the child
/// declares it (DSL.md §3.9). A required var left unset, or a value of the wrong type, fails the
/// node (`TEMPLATE_UNRESOLVED` is not it: `SCHEMA_VALIDATION` names the bad input).
fn child_vars(child: &Workflow, input: &Value) -> Result<Map<String, Value>, Failure> {
    let given = input.as_object();
    let mut vars = Map::new();
    for var in &child.vars {
        let value = match (given.and_then(|m| m.get(&var.name)), &var.default) {
            (Some(v), _) => typed(var.ty, v).ok_or_else(|| {
                Failure::new(
                    FailureCode::SchemaValidation,
                    format!(
                        "input \"{}\" is not a valid {} for the child",
                        var.name,
                        var.ty.as_str()
                    ),
                )
            })?,
            (None, Some(default)) => default.clone(),
            (None, None) => {
                return Err(Failure::new(
                    FailureCode::SchemaValidation,
                    format!("child var \"{}\" has no default and no input", var.name),
                ));
            }
        };
        vars.insert(var.name.clone(), value);
    }
    Ok(vars)
}

/// `v` as a value of type `ty`: already of the type, or a string that parses as a `--var` would.
fn typed(ty: ValueType, v: &Value) -> Option<Value> {
    let fits = match (ty, v) {
        (ValueType::String, Value::String(_))
        | (ValueType::Bool, Value::Bool(_))
        | (ValueType::Float, Value::Number(_))
        | (ValueType::Json, _) => true,
        (ValueType::Int, Value::Number(n)) => n.is_i64(),
        (ValueType::StringList, Value::Array(items)) => items.iter().all(Value::is_string),
        _ => false,
    };
    if fits {
        return Some(v.clone());
    }
    match v {
        Value::String(raw) => crate::launch::parse_var(ty, raw).ok(),
        _ => None,
    }
}

/// Runs subbot node `node` (DSL.md §3.9) as a child run in the parent's sandbox.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    node: &str,
    subbot: &SubbotNode,
    input: &Value,
    token: &CancellationToken,
) -> Result<Value, Failure> {
    let Some(child) = subbot.child.as_deref() else {
        return Err(Failure::new(
            FailureCode::ExecutionFailed,
            format!(
                "the child \"{}\" was not compiled with the workflow",
                subbot.source
            ),
        ));
    };
    let depth = ctx.depth.saturating_add(1);
    if depth > ir::MAX_SUBBOT_DEPTH {
        return Err(Failure::new(
            FailureCode::SubbotDepthExceeded,
            format!(
                "subbot nesting is limited to {} levels",
                ir::MAX_SUBBOT_DEPTH
            ),
        ));
    }
    let driver = ctx.sandbox.driver().to_owned();
    let copy_based = ctx.sandbox.workspace_file_refresher().is_some();
    match should_adopt(node, child, &driver, copy_based, ctx.scratch_in_container) {
        AdoptionDecision::Refused { message } => {
            return Err(Failure::new(FailureCode::SandboxAdoptionRefused, message));
        }
        AdoptionDecision::Declined { fields } => {
            let vars = child_vars(child, input)?;
            let output = ctx
                .children
                .run_own(OwnRun {
                    node,
                    subbot,
                    child,
                    vars,
                    fields,
                    driver,
                    cancel: token.child_token(),
                })
                .await?;
            return conform_output(ctx, subbot, output);
        }
        AdoptionDecision::Adopt => {}
    }
    let vars = child_vars(child, input)?;
    let opened = ctx.children.open(&ctx.run_id, node, subbot, child).await?;
    let workspace = ctx.workdir.clone().unwrap_or_default();
    opened
        .events
        .emit(Event::RunStarted(opened.started.clone()))
        .await;
    opened
        .events
        .emit(Event::SandboxShared(SandboxShared::adopted(Adoption {
            driver,
            workspace,
            parent_run: ctx.run_id.clone(),
            copy_based,
            files_written_through: false,
            file_secrets_declared: crate::launch::workflow_has_file_secrets(child),
            devbox_declared: false,
            ask_user_inherited: ctx.agents.is_some(),
        })))
        .await;
    let mut execution = Execution::new(
        child,
        opened.run_id.clone(),
        ctx.sandbox,
        opened.events.clone(),
    )
    .vars(vars)
    .run_log(ctx.logs.clone())
    .cancel_token(token.clone())
    .nested(depth, ctx.redactor.clone())
    .child_runs(ctx.children.clone(), ctx.scratch_in_container);
    if let Some(workdir) = &ctx.workdir {
        execution = execution.workdir(workdir.clone());
    }
    if let Some(agents) = &ctx.agents {
        execution = execution.shared_agents(agents.clone());
    }
    let started = std::time::Instant::now();
    let report = execution.run().await.map_err(|e| {
        Failure::new(
            FailureCode::ExecutionFailed,
            format!("the child run could not start: {e}"),
        )
    })?;
    let outcome = report.outcome;
    opened
        .events
        .emit(
            outcome
                .terminal_event(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
        )
        .await;
    ctx.children.close(&opened, &outcome).await;
    if outcome.status != OutcomeStatus::Finished {
        let code = outcome.failure_code.unwrap_or(FailureCode::ExecutionFailed);
        return Err(Failure::new(
            code,
            format!(
                "child run {} ended {}: {}",
                opened.run_id,
                outcome.status,
                outcome.message.unwrap_or_default()
            ),
        ));
    }
    let output = outcome
        .final_output
        .unwrap_or_else(|| Value::Object(Map::new()));
    conform_output(ctx, subbot, output)
}

/// The child's result checked against the node's `output` schema (DSL.md §3.9).
fn conform_output(ctx: &Ctx<'_>, subbot: &SubbotNode, output: Value) -> Result<Value, Failure> {
    let Some(name) = &subbot.output else {
        return Ok(output);
    };
    let Some(schema) = ctx.wf.schemas.get(name) else {
        return Err(Failure::new(
            FailureCode::SchemaValidation,
            format!("output schema \"{name}\" is not declared"),
        ));
    };
    schema::conform(schema, output).map_err(|violation| {
        Failure::new(
            FailureCode::SchemaValidation,
            format!("the child's result does not conform to schema \"{name}\": {violation}"),
        )
    })
}

#[cfg(test)]
#[path = "subbot_tests.rs"]
mod tests;

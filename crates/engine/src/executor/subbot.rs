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
//! to the launcher (`launcher::children::StoreChildRuns`), which gives it a whole attempt of its own.
//! The declared fields are read from the compiled child (`Workflow::declared_sandbox_fields`,
//! computed from what was written). How it all fits: `docs/subbots.md`.

use iterion_dsl::ir::{self, Interaction, NodeBody, SubbotNode, ValueType, Workflow};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::executor::agent::operator::{PausedAgent, PausedChild};
use crate::executor::child_runs::{ChildRun, OwnEnd, OwnRun};
use crate::executor::ctx::Ctx;
use crate::executor::error::ExecutionError;
use crate::executor::outcome::{Failure, RunReport};
use crate::executor::schema;
use crate::records::events::Event;
use crate::records::sandbox_events::{Adoption, SandboxShared};
use iterion_vocab::{FailureCode, OutcomeStatus};

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
        NodeBody::Human(h) if h.mode != iterion_dsl::ir::HumanMode::Llm => Some(n.id.as_str()),
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
        Value::String(raw) => ty.parse_value(raw).ok(),
        _ => None,
    }
}

/// What [`prepare`] came to.
pub(crate) enum Prepared<'w> {
    /// The node is done: its child ran as a run of its own ([`ChildRuns::run_own`]).
    Done(Value),
    /// An adopted child, opened and announced: the executor runs its graph in the parent's
    /// sandbox, then hands the report to [`finish`].
    Child(Box<ChildGraph<'w>>),
}

/// The graph of an adopted child run, ready to run.
pub(crate) struct ChildGraph<'w> {
    /// The compiled child.
    pub workflow: &'w Workflow,
    /// The checkpoint it resumes from: it paused on a question when its parent paused, and the
    /// parent is resumed now.
    pub resume: Option<crate::executor::checkpoint::Checkpoint>,
    /// Its run: id, event sink, first event.
    pub opened: ChildRun,
    /// Its vars, typed.
    pub vars: Map<String, Value>,
    /// Its nesting (DSL.md §3.9).
    pub depth: u32,
}

/// Subbot node `node` (DSL.md §3.9) up to its child's graph: the depth and adoption checks
/// (SANDBOX.md §14), the child's vars, and either the child run of its own or the opened,
/// announced child run that adopts the parent's sandbox.
pub(crate) async fn prepare<'w>(
    ctx: &Ctx<'_>,
    node: &str,
    subbot: &'w SubbotNode,
    input: &Value,
    token: &CancellationToken,
) -> Result<Prepared<'w>, Failure> {
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
    let shared = &ctx.shared;
    match should_adopt(
        node,
        child,
        &driver,
        copy_based,
        shared.scratch_in_container,
    ) {
        AdoptionDecision::Refused { message } => {
            return Err(Failure::new(FailureCode::SandboxAdoptionRefused, message));
        }
        AdoptionDecision::Declined { fields } => {
            let vars = child_vars(child, input)?;
            let paused = take_paused_child(ctx, node);
            let answer = ctx.agents.as_ref().and_then(|a| a.answer.clone());
            let end = ctx
                .children
                .run_own(OwnRun {
                    node,
                    subbot,
                    child,
                    vars,
                    fields,
                    driver,
                    cancel: token.child_token(),
                    resumed: paused.as_ref().map(|p| p.run_id.as_str()),
                    answer,
                })
                .await?;
            return match end {
                OwnEnd::Done(output) => conform_output(ctx, subbot, output).map(Prepared::Done),
                // Its own record keeps its checkpoint: the parent keeps only which run it is.
                OwnEnd::Paused { run_id, question } => Err(Paused {
                    subbot: node.to_owned(),
                    question: iterion_agent::session::Question {
                        question,
                        options: Vec::new(),
                    },
                    child: PausedChild {
                        run_id,
                        checkpoint: None,
                    },
                }
                .into_pause(ctx)),
            };
        }
        AdoptionDecision::Adopt => {}
    }
    let vars = child_vars(child, input)?;
    // A child that paused when this run paused continues where it asked, in its own record.
    let paused = take_paused_child(ctx, node);
    let opened = ctx
        .children
        .open(
            &ctx.run_id,
            node,
            subbot,
            child,
            &vars,
            paused.as_ref().map(|p| p.run_id.as_str()),
        )
        .await?;
    opened
        .events
        .emit(Event::RunStarted(opened.started.clone()))
        .await;
    let adoption = Adoption {
        driver,
        // The container's workspace is the parent's (§14); on the host, the executor's.
        workspace: shared
            .workspace_folder
            .clone()
            .or_else(|| ctx.workdir.clone())
            .unwrap_or_default(),
        parent_run: ctx.run_id.clone(),
        copy_based,
        // No file is prepared on the host for a child before it runs (no attachments, no prompt
        // files in this subset), so there is nothing to write through to a copy-based sandbox.
        files_written_through: false,
        file_secrets_declared: child.has_file_secrets(),
        devbox_declared: opened.bundle_devbox.is_some(),
        // A claw node asks over the runner channel (always there with agents); a delegate
        // node needs the parent's listener, planned for the children before the sandbox started.
        ask_user_inherited: ctx.agents.as_ref().is_some_and(|agents| {
            agents.ask_user.is_some() || !crate::sandbox::ask_user::wanted(child)
        }),
    };
    for warning in adoption_warnings(
        node,
        ctx.wf,
        child,
        &adoption,
        opened.bundle_devbox.as_deref(),
    ) {
        tracing::warn!("{warning}");
        ctx.logs.line(crate::records::sink::LogLine {
            node: node.to_owned(),
            stream: iterion_vocab::LogStream::System,
            text: format!("warning: {warning}"),
        });
    }
    opened
        .events
        .emit(Event::SandboxShared(SandboxShared::adopted(adoption)))
        .await;
    Ok(Prepared::Child(Box::new(ChildGraph {
        workflow: child,
        resume: paused
            .and_then(|p| p.checkpoint)
            .and_then(|c| serde_json::from_value(c).ok()),
        opened,
        vars,
        depth,
    })))
}

/// The rest of subbot node `node` once its child's graph ran (`report`, or why it could not
/// start; it ran for `elapsed`): the child's terminal event and record, then the node's output —
/// the child's `final_output`, checked against the node's `output` schema. A child that paused
/// on a question pauses this run with it ([`Paused`]): the question is the child's, and the
/// child's checkpoint goes into this run's, for the resume.
pub(crate) async fn finish(
    ctx: &Ctx<'_>,
    node: &str,
    subbot: &SubbotNode,
    opened: ChildRun,
    report: Result<RunReport, ExecutionError>,
    started: std::time::Instant,
) -> Result<Value, Failure> {
    let report = report.map_err(|e| {
        Failure::new(
            FailureCode::ExecutionFailed,
            format!("the child run could not start: {e}"),
        )
    })?;
    let mut outcome = report.outcome.clone();
    if outcome.failure_code == Some(FailureCode::Cancelled) && ctx.children.parent_interrupted() {
        outcome.failure_code = Some(FailureCode::Interrupted);
        outcome.status = FailureCode::Interrupted.status().unwrap_or(outcome.status);
    }
    opened
        .events
        .emit(
            outcome
                .terminal_event(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
        )
        .await;
    ctx.children.close(&opened, &outcome).await;
    if outcome.status == OutcomeStatus::Paused
        && let Some(asked) = report.checkpoint.paused.as_ref()
    {
        return Err(Paused {
            subbot: node.to_owned(),
            question: asked.question.clone(),
            child: PausedChild {
                run_id: opened.run_id.clone(),
                checkpoint: serde_json::to_value(&report.checkpoint).ok(),
            },
        }
        .into_pause(ctx));
    }
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

/// The child run subbot node `node` paused with when this run paused, taken from the resumed
/// checkpoint (a resume continues it, in its own record, with the answer).
fn take_paused_child(ctx: &Ctx<'_>, node: &str) -> Option<PausedChild> {
    ctx.lock_state()
        .paused
        .take_if(|p| p.node == node && p.child.is_some())
        .and_then(|p| p.child)
        .map(|c| *c)
}

/// A child run paused on a question: its subbot node pauses the parent.
struct Paused {
    subbot: String,
    question: iterion_agent::session::Question,
    child: PausedChild,
}

impl Paused {
    /// The parent's pause ([`Ctx::pause`]): the subbot node waits, holding the child.
    fn into_pause(self, ctx: &Ctx<'_>) -> Failure {
        ctx.pause(PausedAgent {
            node: self.subbot,
            question: self.question,
            snapshot: None,
            delegate: None,
            child: Some(Box::new(self.child)),
        })
    }
}

/// What adoption does not give the child, said before it runs (SANDBOX.md §14): its file
/// secrets (not materialised at adoption), its value secrets the parent's proxy does not deliver,
/// an ask-user path for a child that can pause, and its bundle's `devbox.json`.
pub(crate) fn adoption_warnings(
    node: &str,
    parent: &Workflow,
    child: &Workflow,
    adoption: &Adoption,
    bundle_devbox: Option<&std::path::Path>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let named = |file: bool| -> Vec<&str> {
        child
            .secrets
            .iter()
            .filter(|s| matches!(s.delivery, ir::Delivery::File { .. }) == file)
            .filter(|s| {
                !parent
                    .secrets
                    .iter()
                    .any(|p| p.name == s.name && p.delivery == s.delivery)
            })
            .map(|s| s.name.as_str())
            .collect()
    };
    let files = named(true);
    if !files.is_empty() {
        warnings.push(format!(
            "subbot {node}: file secrets [{}] are not materialised in the adopted sandbox (only \
             the parent's own are); declare them in the parent",
            files.join(", ")
        ));
    }
    let values = named(false);
    if !values.is_empty() {
        warnings.push(format!(
            "subbot {node}: secrets [{}] are not the parent's, so the parent's proxy does not \
             deliver them; their placeholders stay as they are",
            values.join(", ")
        ));
    }
    if !adoption.ask_user_inherited
        && let Some(asker) = pausing_node(child)
    {
        warnings.push(format!(
            "subbot {node}: node \"{asker}\" can ask the operator, but the parent's sandbox has \
             no ask-user listener to inherit"
        ));
    }
    if let Some(config) = bundle_devbox {
        warnings.push(format!(
            "subbot {node}: {} is not provisioned in the adopted sandbox (the parent's sandbox was \
             provisioned before the child ran)",
            config.display()
        ));
    }
    warnings
}

/// The child's result checked against the node's `output` schema (DSL.md §3.9).
fn conform_output(ctx: &Ctx<'_>, subbot: &SubbotNode, output: Value) -> Result<Value, Failure> {
    match &subbot.output {
        Some(name) => schema::conform_output(ctx.wf, name, output, "the child's result"),
        None => Ok(output),
    }
}

#[cfg(test)]
#[path = "subbot_tests.rs"]
mod tests;

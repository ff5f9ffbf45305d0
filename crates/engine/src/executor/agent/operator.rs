//! The operator of an agent node: who answers `ask_user` at once ([`Operator`], the CLI's
//! terminal), how a call is answered or turned into a pause ([`ask_operator`]), and what a node
//! that is still waiting keeps in the checkpoint ([`PausedAgent`]) — the node's result is then
//! [`AgentResult::Paused`].

use std::sync::Arc;

use async_trait::async_trait;
use iterion_agent::session::{Question, Snapshot, ToolOutcome};
use iterion_agent::wire::Usage;
use serde_json::Value;

/// Asks the operator a question on behalf of an `interaction: ask` node. The CLI installs one
/// for an interactive terminal; without one (or when it returns `None`) the run pauses.
#[async_trait]
pub trait Operator: Send + Sync {
    /// The operator's answer, or `None` when nobody can be asked here.
    async fn ask(&self, node: &str, question: &str, options: &[String]) -> Option<String>;
}

/// A paused `ask_user`, kept in the checkpoint.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PausedAgent {
    /// The asking node.
    pub node: String,
    /// The question.
    pub question: Question,
    /// Where its loop stood; `None` for a `human` node, which has no loop.
    pub snapshot: Option<Snapshot>,
    /// A delegate node's CLI session, ended at the pause and resumed with the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<PausedDelegate>,
    /// A subbot node (`node`) whose child run paused: the child's run and checkpoint (its own
    /// `paused` is the node that asked), resumed with the answer when the parent is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<Box<PausedChild>>,
}

/// A subbot's child run paused on a question of its own (SANDBOX.md §14, an adopted child):
/// the parent pauses with it, and `iterion resume PARENT --answer` resumes that child run from
/// this checkpoint, in the parent's new sandbox.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PausedChild {
    /// The child's run id (its record, reopened on resume).
    pub run_id: String,
    /// The child's checkpoint at its pause, for a child in the parent's sandbox; `None` for a
    /// child run of its own (a sandbox of its own), whose record keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// (Kept as JSON: the checkpoint module holds this type, not the reverse.)
    pub checkpoint: Option<serde_json::Value>,
}

/// A delegate CLI's session at a pause: its id and the CLI's own session files (relative to
/// its config dir), restored into the next attempt's config dir so `--resume` / `exec resume`
/// finds them in a new sandbox.
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PausedDelegate {
    /// The session (claude's `session_id`, codex's `thread_id`).
    pub session: String,
    /// `(path relative to the config dir, text)`.
    pub files: Vec<(String, String)>,
}

impl std::fmt::Debug for PausedDelegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.files.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("PausedDelegate")
            .field("session", &self.session)
            .field("files", &names)
            .finish()
    }
}

/// What an agent node came to.
pub(crate) enum AgentResult {
    /// The output and tokens used.
    Done(Value, Usage),
    /// Waiting for the operator.
    Paused(Box<PausedAgent>),
}

/// An `ask_user` call whose input holds no question.
#[derive(Debug, thiserror::Error)]
#[error("input field \"question\" (a non-empty string) is required")]
pub(crate) struct NoQuestion;

/// The question of an `ask_user` call's input.
pub(crate) fn question_of(input: &Value) -> Result<Question, NoQuestion> {
    let question = input
        .get("question")
        .and_then(Value::as_str)
        .filter(|q| !q.trim().is_empty())
        .ok_or(NoQuestion)?;
    let options = input
        .get("options")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(Question {
        question: question.to_owned(),
        options,
    })
}

/// Answers `ask_user` through the operator when there is one, else pauses.
pub(crate) async fn ask_operator(
    operator: Option<&Arc<dyn Operator>>,
    node: &str,
    input: &Value,
) -> ToolOutcome {
    let question = match question_of(input) {
        Ok(q) => q,
        Err(e) => return ToolOutcome::Error(e.to_string()),
    };
    if let Some(op) = operator
        && let Some(answer) = op.ask(node, &question.question, &question.options).await
    {
        return ToolOutcome::Output(answer);
    }
    ToolOutcome::Ask(question)
}

//! The run state the executor keeps, which is also what `iterion resume` restarts from.
//!
//! The executor updates one [`Checkpoint`] as it goes: before a node on the main line starts,
//! `next` names it with its input; when a node finishes, its output is recorded and it becomes
//! `last_completed_node`; edge selection updates the loop counters. So whenever a run stops, the
//! checkpoint says what already happened and which node to run next: the node that failed or was
//! interrupted. A fan-out resumes from its router (the branches run afresh, as DSL.md §5.6 does
//! for a fan-out inside a loop). After `done` or `fail`, `next` is `None` and there is nothing to
//! resume.
//!
//! The checkpoint handed back in a [`crate::RunReport`] is redacted like every recorded text: a
//! secret value that a tool printed is `[REDACTED:<NAME>]` there, too.

use std::collections::BTreeMap;

use iterion_dsl::ir::Workflow;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use iterion_vocab::FailureCode;

/// The checkpoint format's version; a different one is refused on resume.
pub const CHECKPOINT_VERSION: u32 = 1;

/// One loop's state (DSL.md §5.5).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopCounter {
    /// `counter(L)`: crossings since the last reset.
    pub iteration: u32,
    /// The source's output at the most recent crossing; `null` before the first.
    pub previous_output: Value,
}

/// The node to run next, with the input it was given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NextNode {
    /// The node id.
    pub node: String,
    /// Its input map (DSL.md §5.3), already built.
    pub input: Value,
}

/// A serialisable snapshot of a run's progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// [`CHECKPOINT_VERSION`].
    pub version: u32,
    /// The latest output of every node that produced one.
    pub outputs: BTreeMap<String, Value>,
    /// Loop states; a loop absent here has counter 0.
    pub loops: BTreeMap<String, LoopCounter>,
    /// How many times each node has started (`node_started.attempt`).
    pub attempts: BTreeMap<String, u32>,
    /// Counted node executions so far (`max_iterations`).
    pub iterations: u64,
    /// The node that most recently finished.
    pub last_completed_node: Option<String>,
    /// The node to run on resume; `None` once the run reached `done` or `fail`.
    pub next: Option<NextNode>,
    /// The `ask_user` the run paused on (its node is `next`), with where its loop stood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<crate::executor::agent::operator::PausedAgent>,
}

impl Default for Checkpoint {
    fn default() -> Self {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            outputs: BTreeMap::new(),
            loops: BTreeMap::new(),
            attempts: BTreeMap::new(),
            iterations: 0,
            last_completed_node: None,
            next: None,
            paused: None,
        }
    }
}

/// Why a checkpoint cannot be resumed (`RESUME_INVALID`; the run keeps its status).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// Another checkpoint format.
    #[error("checkpoint version {found} is not supported (expected {CHECKPOINT_VERSION})")]
    Version {
        /// The version found.
        found: u32,
    },
    /// The run already reached `done` or `fail`.
    #[error("the run has no node left to run; it already reached done or fail")]
    NothingToResume,
    /// The checkpoint names a node the workflow does not declare (the file changed).
    #[error("the checkpoint resumes at node \"{node}\", which the workflow does not declare")]
    UnknownNode {
        /// The node.
        node: String,
    },
}

impl ResumeError {
    /// Always [`FailureCode::ResumeInvalid`].
    pub fn code(&self) -> FailureCode {
        match self {
            ResumeError::Version { .. }
            | ResumeError::NothingToResume
            | ResumeError::UnknownNode { .. } => FailureCode::ResumeInvalid,
        }
    }
}

impl Checkpoint {
    /// Checks that this checkpoint can resume `wf`, and returns the node to run.
    ///
    /// # Errors
    ///
    /// [`ResumeError`] when the version differs, there is nothing left to run, or the node is
    /// not declared.
    pub fn resume_point(&self, wf: &Workflow) -> Result<&NextNode, ResumeError> {
        if self.version != CHECKPOINT_VERSION {
            return Err(ResumeError::Version {
                found: self.version,
            });
        }
        let next = self.next.as_ref().ok_or(ResumeError::NothingToResume)?;
        if wf.node(&next.node).is_none() {
            return Err(ResumeError::UnknownNode {
                node: next.node.clone(),
            });
        }
        Ok(next)
    }
}

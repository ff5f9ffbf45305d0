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
    /// A templated cap as its edge last resolved it (`loop.L.max`); `None` for a literal cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
}

/// The node to run next, with the input it was given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NextNode {
    /// The node id.
    pub node: String,
    /// Its input map (DSL.md §5.3), already built.
    pub input: Value,
}

/// When a main-line node last started, and with what input: what `iterion resume --from` starts
/// it again with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeStart {
    /// The start's place among the run's main-line starts (1, 2, …): the nodes started after
    /// it are those with a larger one.
    pub order: u64,
    /// Its input map, as it was built.
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
    /// The latest start of every main-line node (fan-out branches are not on it: they resume
    /// from their router). Absent in checkpoints written before `resume --from` existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub starts: BTreeMap<String, NodeStart>,
    /// Published artifacts (`publish:`), by name: the latest output published under it, and
    /// how many times it was published. Kept when a rewind drops outputs, as upstream does.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub artifacts: BTreeMap<String, Value>,
    /// Publications per artifact name (the next `artifact_published.version`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub artifact_versions: BTreeMap<String, u32>,
    /// Visits of every `round_robin` router so far: the next visit takes edge `count % edges`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub round_robin: BTreeMap<String, u64>,
    /// Every output of each node in a loop's body, oldest first: `{{outputs.N.history}}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub history: BTreeMap<String, Vec<Value>>,
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
            starts: BTreeMap::new(),
            artifacts: BTreeMap::new(),
            artifact_versions: BTreeMap::new(),
            round_robin: BTreeMap::new(),
            history: BTreeMap::new(),
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

/// Why `iterion resume --from NODE` cannot start at `NODE` (`RESUME_INVALID`; the run keeps its
/// status and checkpoint).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RewindError {
    /// The workflow declares no such node.
    #[error("--from {node}: the workflow declares no node \"{node}\"")]
    UnknownNode {
        /// The node asked for.
        node: String,
    },
    /// The node exists but this run never started it on its main line (a fan-out branch
    /// resumes from its router).
    #[error(
        "--from {node}: run never reached node \"{node}\" on its main line; it can start again only from a node it reached: {reached}"
    )]
    NeverReached {
        /// The node asked for.
        node: String,
        /// The nodes it did reach, in the order they last started (`none` when none).
        reached: String,
    },
}

impl RewindError {
    /// Always [`FailureCode::ResumeInvalid`].
    pub fn code(&self) -> FailureCode {
        match self {
            RewindError::UnknownNode { .. } | RewindError::NeverReached { .. } => {
                FailureCode::ResumeInvalid
            }
        }
    }
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
    /// Records that main-line node `next` starts now with its input (see [`NodeStart`]).
    pub(crate) fn record_start(&mut self, next: &NextNode) {
        let order = self.starts.values().map(|s| s.order).max().unwrap_or(0) + 1;
        self.starts.insert(
            next.node.clone(),
            NodeStart {
                order,
                input: next.input.clone(),
            },
        );
    }

    /// Rewinds the checkpoint so the run starts again at `node` (`iterion resume --from`), with
    /// the input it last started with. `node` and every node started after it lose their
    /// outputs and start records (they run again, so a condition or template reading them sees
    /// the new value, or none until they ran); nodes started before it keep theirs. Loop
    /// counters, attempt counts and the iteration count are kept: the run's caps still count
    /// what already ran. A pending `ask_user` is dropped. Returns the nodes whose outputs were
    /// dropped, in start order.
    ///
    /// # Errors
    ///
    /// [`RewindError`] when the workflow does not declare `node`, or the run never started it.
    pub fn rewind_to(&mut self, wf: &Workflow, node: &str) -> Result<Vec<String>, RewindError> {
        if wf.node(node).is_none() {
            return Err(RewindError::UnknownNode {
                node: node.to_owned(),
            });
        }
        let Some(start) = self.starts.get(node).cloned() else {
            let mut reached: Vec<(&u64, &String)> =
                self.starts.iter().map(|(n, s)| (&s.order, n)).collect();
            reached.sort();
            let reached = reached
                .into_iter()
                .map(|(_, n)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(RewindError::NeverReached {
                node: node.to_owned(),
                reached: if reached.is_empty() {
                    "none".to_owned()
                } else {
                    reached
                },
            });
        };
        let mut later: Vec<(u64, String)> = self
            .starts
            .iter()
            .filter(|(_, s)| s.order >= start.order)
            .map(|(n, s)| (s.order, n.clone()))
            .collect();
        later.sort();
        let later: Vec<String> = later.into_iter().map(|(_, n)| n).collect();
        let mut dropped = Vec::new();
        for name in &later {
            self.starts.remove(name);
            if self.outputs.remove(name).is_some() {
                dropped.push(name.clone());
            }
        }
        if self
            .last_completed_node
            .as_ref()
            .is_some_and(|n| later.contains(n))
        {
            self.last_completed_node = None;
        }
        self.next = Some(NextNode {
            node: node.to_owned(),
            input: start.input,
        });
        self.paused = None;
        Ok(dropped)
    }

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

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;

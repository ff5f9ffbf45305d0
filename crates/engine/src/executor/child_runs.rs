//! Where a subbot's child run is recorded ([`ChildRuns`]). The executor's own [`InlineChildRuns`]
//! records children into the parent's sink; the launcher plugs in the store
//! (`launcher::children::StoreChildRuns`), which also gives a declaring child a whole attempt of
//! its own ([`ChildRuns::run_own`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::BoxFuture;
use iterion_dsl::ir::{SubbotNode, Workflow};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::executor::outcome::{Failure, RunOutcome};
use crate::records::events::RunStarted;
use crate::records::sink::EventSink;
use iterion_vocab::FailureCode;

/// Where a child run's record and events go.
pub(crate) trait ChildRuns: Send + Sync {
    /// Opens the child run of subbot `node` in `parent_run`, with the child's typed `vars`: its
    /// id and its event sink. With `resumed`, the child run of that id, paused on a question
    /// of its own when its parent paused, is reopened instead (its `run_started` says
    /// `resumed`); a record that is not that parent's paused child is `RESUME_INVALID`.
    fn open<'a>(
        &'a self,
        parent_run: &'a str,
        node: &'a str,
        subbot: &'a SubbotNode,
        child: &'a Workflow,
        vars: &'a Map<String, Value>,
        resumed: Option<&'a str>,
    ) -> BoxFuture<'a, Result<ChildRun, Failure>>;

    /// Records how the child run ended.
    fn close<'a>(&'a self, child: &'a ChildRun, outcome: &'a RunOutcome) -> BoxFuture<'a, ()>;

    /// Runs the child as a run with a sandbox of its own: a declaring child honoured under a
    /// bind-mount parent (SANDBOX.md §14 rule 1). Returns the child's final output, or its
    /// pause on a question (the parent then pauses with it).
    fn run_own<'a>(&'a self, own: OwnRun<'a>) -> BoxFuture<'a, Result<OwnEnd, Failure>>;

    /// Whether the parent was interrupted (not cancelled): a child it stopped then ends
    /// `INTERRUPTED`, as resumable as its parent.
    fn parent_interrupted(&self) -> bool {
        false
    }
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
    /// The child run of its own that paused when its parent paused: resumed (its record and
    /// checkpoint) instead of a new one, with `answer`.
    pub resumed: Option<&'a str>,
    /// The operator's answer the parent's resume brings.
    pub answer: Option<String>,
}

/// How a child run of its own ended, when it did not fail.
pub(crate) enum OwnEnd {
    /// Finished, with its final output.
    Done(Value),
    /// Paused on a question of its own.
    Paused {
        /// Its run id.
        run_id: String,
        /// The question (redacted).
        question: String,
    },
}

/// An open child run.
pub(crate) struct ChildRun {
    /// Its run id.
    pub run_id: String,
    /// Where its events go.
    pub events: Arc<dyn EventSink>,
    /// Its `run_started`: the child's first event, naming the parent and the root run.
    pub started: RunStarted,
    /// The child bundle's `devbox.json` (its file's directory, when that is not the workspace
    /// root: SANDBOX.md §15's bot source), which adoption does not provision.
    pub bundle_devbox: Option<std::path::PathBuf>,
    /// Cancelled when someone asks for this child run to be cancelled (a cancel request
    /// recorded in the store, `launcher::cancel`): the child stops as if its parent's stop
    /// had come, and its parent's subbot node fails with it. Never fired for an inline child.
    pub cancel: CancellationToken,
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
        _vars: &'a Map<String, Value>,
        resumed: Option<&'a str>,
    ) -> BoxFuture<'a, Result<ChildRun, Failure>> {
        let run_id = resumed.map_or_else(
            || {
                let n = self.next.fetch_add(1, Ordering::Relaxed);
                format!("{parent_run}.{node}.{n}")
            },
            str::to_owned,
        );
        let run = ChildRun {
            run_id,
            events: self.events.clone(),
            started: RunStarted {
                workflow: child.name.clone(),
                workflow_hash: String::new(),
                trust: "trusted".to_owned(),
                resumed: resumed.is_some(),
                parent_run: Some(parent_run.to_owned()),
                root_run: Some(parent_run.to_owned()),
            },
            bundle_devbox: None,
            cancel: CancellationToken::new(),
        };
        Box::pin(async move { Ok(run) })
    }

    fn close<'a>(&'a self, _child: &'a ChildRun, _outcome: &'a RunOutcome) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn run_own<'a>(&'a self, own: OwnRun<'a>) -> BoxFuture<'a, Result<OwnEnd, Failure>> {
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

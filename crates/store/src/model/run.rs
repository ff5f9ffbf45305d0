//! The run record and the request that creates one.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::id::RunId;
use iterion_vocab::Trust;

use super::status::{AdmissionDecision, RunStatus};
use crate::time::Timestamp;

/// One execution of a workflow, as stored in `runs`.
///
/// Fields fall in three groups, and [`Store::save_run`](crate::Store::save_run) treats each
/// differently:
///
/// - **identity**, fixed at creation: `id`, `workflow`, `workflow_hash`, `file_path`, `trust`,
///   `parent_run_id`, `root_run_id`. A save that changes one fails with
///   [`Error::ImmutableField`](crate::Error::ImmutableField) (trust in particular can never be
///   raised after the fact).
/// - **state**, written by the engine under compare-and-swap: `status` (a state machine),
///   `admission`, `failure_code`/`failure_message`, `worktree_path`, `vars`,
///   `last_completed_node`, `checkpoint`, `available_at`.
/// - **bookkeeping**, kept by the store and ignored on save: `created_at`, `updated_at`,
///   `finished_at` (set when the run enters a terminal status, cleared when it leaves one),
///   `deliveries`, `version`.
///
/// Serialised (for `iterion inspect --json`) with every key present; absent values are `null`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The run's id (UUIDv7).
    pub id: RunId,
    /// The workflow's name.
    pub workflow: String,
    /// A hash of the compiled workflow, so a resume can tell the file changed.
    pub workflow_hash: String,
    /// The `.iter` file the run was started from.
    pub file_path: PathBuf,
    /// Where the run is in its life.
    pub status: RunStatus,
    /// Trusted or untrusted; fixed at creation, inherited by children and resumes.
    pub trust: Trust,
    /// The admission gate's last verdict (SANDBOX.md §10), `None` before the gate ran.
    pub admission: Option<Admission>,
    /// Stable failure code (`SANDBOX_SETUP_TIMEOUT`, `LAUNCH_FAILED`, …). Only `failed`,
    /// `failed_resumable` and `cancelled` runs may carry one (SANDBOX.md §9.2).
    pub failure_code: Option<String>,
    /// Human-readable failure message; the same statuses as `failure_code`.
    pub failure_message: Option<String>,
    /// The run that started this one as a subbot, if any.
    pub parent_run_id: Option<RunId>,
    /// The top of the run tree; a run with no parent is its own root.
    pub root_run_id: RunId,
    /// The git worktree the run works in (`worktree: auto`), kept on failure.
    pub worktree_path: Option<PathBuf>,
    /// The run's variables, as resolved at launch.
    pub vars: Map<String, Value>,
    /// The last node that completed, where `iterion resume` picks up.
    pub last_completed_node: Option<String>,
    /// Engine-defined resume state (outputs so far, loop counters, …).
    pub checkpoint: Option<Value>,
    /// How many times a runner has claimed this run from the queue (store-kept).
    pub deliveries: u32,
    /// A queued run is not offered to runners before this instant (a redelivery delay).
    pub available_at: Option<Timestamp>,
    /// When the run was created (store-kept).
    pub created_at: Timestamp,
    /// When the run record was last saved (store-kept).
    pub updated_at: Timestamp,
    /// When the run entered its terminal status (store-kept).
    pub finished_at: Option<Timestamp>,
    /// Compare-and-swap version: 1 at creation, +1 on every save or claim (store-kept).
    pub version: u64,
}

/// The admission gate's verdict, persisted on the run (SANDBOX.md §10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admission {
    /// Allowed or denied.
    pub decision: AdmissionDecision,
    /// When in the launch it was decided (`pre_model`).
    pub phase: String,
    /// Why, as a stable code (`trusted`, `untrusted_sandboxed`, `untrusted_without_sandbox`).
    pub code: String,
    /// Why, for a human; a denial names the tier that decided.
    pub reason: String,
    /// When the gate ran.
    pub checked_at: Timestamp,
}

/// The status a run is created in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialStatus {
    /// Executed right away by the creating process (`iterion run`); the default.
    #[default]
    Running,
    /// Left for a runner to claim (`iterion run --submit`).
    Queued,
}

impl InitialStatus {
    /// The run status this becomes.
    pub const fn status(self) -> RunStatus {
        match self {
            Self::Running => RunStatus::Running,
            Self::Queued => RunStatus::Queued,
        }
    }
}

/// A lease to take in the same transaction that creates the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRequest {
    /// Who holds it (a stable name for the process, e.g. `host:pid` or a runner pod name).
    pub holder: String,
    /// How long it lasts without a heartbeat.
    pub ttl: Duration,
}

/// What [`Store::create_run`](crate::Store::create_run) needs; a builder over the optional parts.
///
/// ```
/// use iterion_store::{InitialStatus, NewRun, Trust};
/// use std::time::Duration;
/// let new = NewRun::new("review", "sha256:ab12", "flows/review.iter")
///     .trust(Trust::Untrusted)
///     .status(InitialStatus::Running)
///     .lease("host-a:4242", Duration::from_secs(30));
/// assert_eq!(new.workflow, "review");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// The id to use; by default the store generates a UUIDv7.
    pub id: Option<RunId>,
    /// The workflow's name.
    pub workflow: String,
    /// A hash of the compiled workflow.
    pub workflow_hash: String,
    /// The `.iter` file.
    pub file_path: PathBuf,
    /// Initial status; by default `running`.
    pub status: InitialStatus,
    /// Trust; by default `trusted`.
    pub trust: Trust,
    /// Parent run; by default none.
    pub parent_run_id: Option<RunId>,
    /// Root run; by default the parent's root as given by [`NewRun::child_of`], else the run
    /// itself.
    pub root_run_id: Option<RunId>,
    /// Worktree; by default none.
    pub worktree_path: Option<PathBuf>,
    /// Variables; by default none.
    pub vars: Map<String, Value>,
    /// A lease taken atomically with the creation; by default none. A run created `running`
    /// should take one, so crash recovery never sees it unleased (SANDBOX.md §12.1).
    pub lease: Option<LeaseRequest>,
}

impl NewRun {
    /// A run of `workflow` (its `workflow_hash`) from `file_path`, with every default.
    pub fn new(
        workflow: impl Into<String>,
        workflow_hash: impl Into<String>,
        file_path: impl Into<PathBuf>,
    ) -> Self {
        Self {
            id: None,
            workflow: workflow.into(),
            workflow_hash: workflow_hash.into(),
            file_path: file_path.into(),
            status: InitialStatus::default(),
            trust: Trust::default(),
            parent_run_id: None,
            root_run_id: None,
            worktree_path: None,
            vars: Map::new(),
            lease: None,
        }
    }

    /// Uses `id` instead of a generated one.
    pub fn id(mut self, id: RunId) -> Self {
        self.id = Some(id);
        self
    }

    /// Sets the initial status (default `running`).
    pub fn status(mut self, status: InitialStatus) -> Self {
        self.status = status;
        self
    }

    /// Sets the trust (default `trusted`).
    pub fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// Makes this a child of `parent`: parent id, the parent's root, and the parent's trust
    /// (trust propagates to children, SANDBOX.md §10). A later [`NewRun::trust`] may lower it;
    /// raising it is refused by `create_run` ([`Error::TrustRaised`](crate::Error::TrustRaised)).
    pub fn child_of(mut self, parent: &Run) -> Self {
        self.parent_run_id = Some(parent.id.clone());
        self.root_run_id = Some(parent.root_run_id.clone());
        self.trust = parent.trust;
        self
    }

    /// Sets the worktree path (default none).
    pub fn worktree_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.worktree_path = Some(path.into());
        self
    }

    /// Sets the variables (default none).
    pub fn vars(mut self, vars: Map<String, Value>) -> Self {
        self.vars = vars;
        self
    }

    /// Takes a lease for `holder` lasting `ttl` in the creating transaction (default: no lease).
    pub fn lease(mut self, holder: impl Into<String>, ttl: Duration) -> Self {
        self.lease = Some(LeaseRequest {
            holder: holder.into(),
            ttl,
        });
        self
    }
}

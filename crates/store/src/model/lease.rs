//! Leases: how the store knows a run is still being executed (SANDBOX.md §12.1).

use serde::{Deserialize, Serialize};

use super::id::RunId;
use super::run::Run;
use super::status::RunStatus;
use crate::time::Timestamp;

/// The right to execute a run, held by one process until `expires_at` unless renewed.
///
/// The process executing a run takes its lease before admission, renews it every 10 s with a
/// 30 s TTL (SANDBOX.md §12.1), and releases it when the run ends. A lease is *held* while
/// `expires_at > now` by the store's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The leased run.
    pub run_id: RunId,
    /// Who holds it.
    pub holder: String,
    /// When it lapses without a heartbeat.
    pub expires_at: Timestamp,
}

/// What the reaper needs to know about a run, read in one consistent snapshot
/// ([`Store::liveness`](crate::Store::liveness)).
///
/// The reaper's predicate (SANDBOX.md §12.1) is: `Leased` → keep; `Absent` → reap;
/// `Unleased { status }` → reap when `status.is_terminal()`, else keep. Any error → keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// A process holds an unexpired lease on the run (whatever its status).
    Leased(Lease),
    /// No such run in the store.
    Absent,
    /// The run exists and nobody holds a live lease on it.
    Unleased {
        /// Its status.
        status: RunStatus,
    },
}

/// A queued run a runner has just claimed: now `running`, leased to the claimer.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The run, as saved by the claim (status `running`, `deliveries` incremented).
    pub run: Run,
    /// The claimer's lease.
    pub lease: Lease,
}

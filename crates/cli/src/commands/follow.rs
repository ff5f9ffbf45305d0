//! When a follower (`events --follow`, `logs --follow`) has seen everything: the run is over —
//! finished, failed, cancelled or paused — *and* no process holds its lease any more. The engine
//! records the terminal event and flushes the node output before it releases the lease, so a
//! last read after that sees all there is.
//!
//! A run left `running` with no lease (its process died) is over too once that has held for
//! [`ORPHAN_POLLS`] polls in a row; the follower says so.
use std::sync::Arc;
use std::time::Duration;

use iterion_store::{RunId, RunStatus, Store};

use crate::commands::Failure;

/// How often a follower reads again.
pub const POLL: Duration = Duration::from_millis(200);

/// Polls in a row a `running` run may show no lease before it counts as abandoned (2 s).
const ORPHAN_POLLS: u32 = 10;

/// Whether the run can still record anything.
#[derive(Default)]
pub struct Watch {
    unleased: u32,
}

impl Watch {
    /// `true` once the run is over (see the module doc). Check it *before* the read that may be
    /// the last.
    pub async fn over(&mut self, store: &Arc<dyn Store>, run_id: &RunId) -> Result<bool, Failure> {
        let Some(run) = store.get_run(run_id).await.map_err(Failure::failed)? else {
            return Ok(true);
        };
        let leased = store.lease_held(run_id).await.map_err(Failure::failed)?;
        Ok(match run.status {
            RunStatus::Queued => false,
            RunStatus::Running if leased => {
                self.unleased = 0;
                false
            }
            RunStatus::Running => {
                self.unleased += 1;
                if self.unleased >= ORPHAN_POLLS {
                    crate::output::errln!(
                        "run {run_id} is marked running but no process holds it (its process is gone); stopping"
                    );
                    return Ok(true);
                }
                false
            }
            RunStatus::Finished
            | RunStatus::Failed
            | RunStatus::FailedResumable
            | RunStatus::Cancelled
            | RunStatus::Paused => !leased,
        })
    }
}

/// The run `run_id`, which must exist.
pub async fn existing(store: &Arc<dyn Store>, run_id: &RunId) -> Result<(), Failure> {
    match store.get_run(run_id).await.map_err(Failure::failed)? {
        Some(_) => Ok(()),
        None => Err(Failure::failed(iterion_store::Error::RunNotFound {
            run_id: run_id.clone(),
        })),
    }
}

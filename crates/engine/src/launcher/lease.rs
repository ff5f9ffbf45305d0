//! The lease a running run holds (SANDBOX.md §12.1): taken when the run is created (or resumed),
//! renewed every [`LEASE_RENEW`] for [`LEASE_TTL`], released at the end. While it is held the
//! reaper keeps the run's container; once the process is gone it lapses within the TTL, and the
//! next boot's crash recovery marks the run `failed_resumable` / `INTERRUPTED`.

use std::sync::Arc;
use std::time::Duration;

use iterion_store::{RunId, Store};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a lease lasts without renewal.
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(30);
/// How often it is renewed.
pub(crate) const LEASE_RENEW: Duration = Duration::from_secs(10);

/// Renews a run's lease in the background until [`LeaseKeeper::release`].
pub(crate) struct LeaseKeeper {
    store: Arc<dyn Store>,
    run_id: RunId,
    holder: String,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl LeaseKeeper {
    /// Starts renewing `holder`'s lease on `run_id`. A lost lease (another process took the run)
    /// cancels `on_lost`: this process must stop executing the run.
    pub(crate) fn start(
        store: Arc<dyn Store>,
        run_id: RunId,
        holder: String,
        on_lost: CancellationToken,
    ) -> LeaseKeeper {
        let stop = CancellationToken::new();
        let task = {
            let (store, run_id, holder, stop) = (
                Arc::clone(&store),
                run_id.clone(),
                holder.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(LEASE_RENEW) => {}
                    }
                    match store.heartbeat(&run_id, &holder, LEASE_TTL).await {
                        Ok(_) => {}
                        Err(iterion_store::Error::LeaseLost { .. }) => {
                            tracing::warn!("run {run_id}: lease lost; stopping the run");
                            on_lost.cancel();
                            return;
                        }
                        Err(error) => tracing::warn!("run {run_id}: lease heartbeat: {error}"),
                    }
                }
            })
        };
        LeaseKeeper {
            store,
            run_id,
            holder,
            stop,
            task,
        }
    }

    /// Stops renewing and releases the lease.
    pub(crate) async fn release(self) {
        self.stop.cancel();
        let _ = self.task.await;
        if let Err(error) = self.store.release_lease(&self.run_id, &self.holder).await {
            tracing::warn!("run {}: releasing the lease: {error}", self.run_id);
        }
    }
}

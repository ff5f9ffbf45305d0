//! The records the store keeps, independent of any backend.

mod event;
mod id;
mod lease;
mod run;
mod run_ref;
mod status;

pub use event::{Event, LogLine, NewEvent, NewLogLine};
pub use id::{InvalidRunId, RunId};
pub use iterion_vocab::{LogStream, Trust};
pub use lease::{Claim, Lease, Liveness};
pub use run::{Admission, InitialStatus, LeaseRequest, NewRun, Run};
pub use run_ref::{AMBIGUOUS_SHOWN, RunRef, resolve_run};
pub use status::{AdmissionDecision, RunStatus};

//! The records the store keeps, independent of any backend.

mod event;
mod id;
mod lease;
mod run;
mod status;

pub use event::{Event, LogLine, NewEvent, NewLogLine, NewNodeLog, NodeLog, NodeLogQuery};
pub use id::{InvalidRunId, RunId};
pub use iterion_vocab::{LogStream, Trust};
pub use lease::{Claim, Lease, Liveness};
pub use run::{Admission, InitialStatus, LeaseRequest, NewRun, Run};
pub use status::{AdmissionDecision, RunStatus};

//! Exit codes (ARCHITECTURE.md §4). Scripts and tests rely on them.

/// The process outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Success,
    /// 1: the run or the check failed (`validate`: the workflow has errors; a run ending
    /// `failed`, `failed_resumable` or `cancelled`; a refused `resume`).
    Failed,
    /// 2: bad input — a file that cannot be read, a bad flag or variable, a workflow that does
    /// not compile, a launch refused before a run exists.
    BadInput,
    /// 3: the run is `paused`, waiting for an answer (`iterion resume RUN_ID --answer …`).
    Paused,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        match e {
            Exit::Success => 0.into(),
            Exit::Failed => 1.into(),
            Exit::BadInput => 2.into(),
            Exit::Paused => 3.into(),
        }
    }
}

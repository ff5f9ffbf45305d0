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

impl Exit {
    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::BadInput => 2,
            Exit::Paused => 3,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        e.code().into()
    }
}

//! The channel to an exec agent a driver started as the sandbox's own command: a plain
//! value, so the driver contract ([`SandboxRun`](crate::SandboxRun)) can name it without
//! depending on the client that drives it.

use tokio::io::{AsyncRead, AsyncWrite};

/// An exec agent the driver started as the sandbox's own command and already greeted (its
/// hello read and checked): the frames to it, the frames from it (stdout only; its stderr is
/// the driver's), and how it ended once the driver knows (`None` when it cannot say).
pub struct AttachedAgent {
    /// The agent's stdin.
    pub to_agent: std::pin::Pin<Box<dyn AsyncWrite + Send>>,
    /// The agent's stdout, after the hello.
    pub from_agent: std::pin::Pin<Box<dyn AsyncRead + Send>>,
    /// Resolves with the agent's exit code when the sandbox's command ended (`None`: unknown).
    pub exited: std::pin::Pin<Box<dyn std::future::Future<Output = Option<i64>> + Send>>,
}

impl std::fmt::Debug for AttachedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachedAgent").finish_non_exhaustive()
    }
}

//! The in-sandbox exec agent (issue 18 item 3): one long-lived helper per sandbox, the static
//! iterion binary already mounted read-only (`iterion __exec-agent`), started once through the
//! driver's own exec and then asked over that exec's stdin/stdout to spawn each node command.
//! A driver exec costs a round of engine API calls (create, start, attach, inspect: ~50 ms on
//! docker); a frame over an open stream costs well under a millisecond.
//!
//! The contract is the driver exec's ([`SandboxRun::exec`](crate::SandboxRun::exec)): argv,
//! appended env, working directory, stdin (kept open on request), streamed or buffered output,
//! the exit code (128 + signal when killed by one); and, better than a dropped docker exec, a
//! dropped exec (a cancelled or timed-out node) kills the process group it started. An exec that
//! names a user runs through the driver (the agent runs as the sandbox's default user and
//! cannot become another), and so does every exec once the agent is gone.
//!
//! Trust: the agent is inside the sandbox, so everything it sends is as hostile as the sandbox.
//! The engine bounds each frame ([`frame::MAX_PAYLOAD`]) and ends the channel on anything
//! malformed; a sandbox that kills or confuses its agent only loses the speed-up. Within the
//! sandbox, the agent is non-dumpable, so the commands it starts cannot reach its channel
//! through `/proc/<pid>/fd`.
//!
//! Where the driver can attach to its sandbox's own command (docker, podman), the agent *is*
//! that command ([`Spec::exec_agent`](crate::Spec::exec_agent)): the driver attaches, greets it
//! ([`handshake`]) and hands the channel over ([`AttachedAgent`]); no exec is made to start it.
//! The engine speaks first, so the agent can wait unattached (a warm pool entry, made before any
//! run) and take the claiming run's env in the greeting. As PID 1 it outlives a lost channel (it
//! then only idles and reaps), so the driver's exec still answers, and signals from inside the
//! sandbox cannot end it.

mod attached;
mod client;
pub mod frame;
mod server;

pub use attached::AttachedAgent;
pub use client::{AgentRun, attach_exec_agent, handshake, start_exec_agent};
pub use server::{idle_as_init, serve};

/// The hidden subcommand that runs the agent.
pub const EXEC_AGENT_SUBCOMMAND: &str = "__exec-agent";

#[cfg(test)]
mod tests;

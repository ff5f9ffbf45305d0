//! Agent and judge nodes (DSL.md §6.2), the `claw` backend: the engine's glue around the loop of
//! [`iterion_agent`].
//!
//! - [`node`]: the node kind — prompts, the loop's spec, resuming a paused loop, and where it
//!   runs.
//! - [`env`]: what agent nodes need from the launcher ([`env::AgentEnv`]): the models, the place
//!   ([`env::AgentPlace`]: in this process on the host, or in the run's container), the operator.
//! - [`operator`]: who answers `ask_user`, and what a node that is still waiting keeps.
//! - [`launcher`]: the engine side of the runner channel (SANDBOX.md §13): the loop in the
//!   container through `iterion __claw-runner`, the key replaced by its gateway placeholder.
//!
//! - [`effort`]: `reasoning_effort` read as a node starts, for both backends.
//! - [`delegate`]: the `claude_code` and `codex` backends — the vendor's CLI run through the
//!   run's sandbox (or on the host), its transcript recorded as events.
//!
//! Either way the node gets the same tools, the same output rules and the same events.

pub(crate) mod delegate;
pub(crate) mod delegate_state;
pub(crate) mod effort;
pub(crate) mod env;
pub(crate) mod launcher;
pub(crate) mod node;
pub(crate) mod operator;
pub(crate) mod transcript;

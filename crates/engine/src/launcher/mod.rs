//! The launcher: runs whole attempts of a run, the seed's flow end to end.
//!
//! - [`engine`]: [`Engine`](engine::Engine), its settings and the requests it takes.
//! - [`run`]: one attempt (`Engine::run`, `Engine::attempt`): the run record, admission, workspace,
//!   sandbox, the executor, teardown, the final record.
//! - [`resume`], [`fleet`]: a `failed_resumable` run taken again; a worker draining queued runs.
//! - [`children`]: subbot children that need an attempt of their own, recorded in the store.
//! - [`cancel`]: a cancel asked for from any process (`iterion cancel`, the studio), and the
//!   watch an attempt keeps for it.
//! - [`launch`] (vars and secrets), [`lease`], [`admission`] (SANDBOX.md §10), [`reaper`] (§12).
//!
//! Every `impl Engine` block lives in this room.

pub(crate) mod admission;
pub(crate) mod attempt;
pub(crate) mod cancel;
pub(crate) mod children;
pub(crate) mod engine;
pub(crate) mod fleet;
pub(crate) mod launch;
pub(crate) mod lease;
pub(crate) mod reaper;
pub(crate) mod resume;
pub(crate) mod run;
pub(crate) mod setup;

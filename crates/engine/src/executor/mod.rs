//! The executor: runs a compiled workflow's graph to an outcome (DSL.md §5–§6).
//!
//! - [`execution`]: [`Execution`](execution::Execution), the builder and the graph driver (a line
//!   of nodes, edge selection, the node dispatch), and the one place a child graph is run.
//! - [`ctx`]: the state every line of one run shares, below every node kind.
//! - Node kinds, which see only [`ctx`]: [`tool`] (DSL.md §6.1), [`agent`] (§6.2, in process or
//!   through the runner in the container), [`subbot`] (§3.9) and [`fanout`] (§5.6).
//! - Pure decisions over values: [`graph`], [`select`] (edges, §5.4), [`input`] (§5.3),
//!   [`budget`] (§5.7), [`schema`] (§3.4), [`capture`] (a tool's output), [`outcome`] and
//!   [`checkpoint`] (what a run came to and where it resumes).
//! - [`child_runs`]: where a subbot's child run is recorded (the launcher plugs in the store).

pub(crate) mod agent;
pub(crate) mod budget;
pub(crate) mod capture;
pub(crate) mod checkpoint;
pub(crate) mod child_runs;
pub(crate) mod compute;
pub(crate) mod ctx;
pub(crate) mod each;
pub(crate) mod error;
pub(crate) mod execution;
pub(crate) mod fanout;
pub(crate) mod graph;
pub(crate) mod human;
pub(crate) mod input;
pub(crate) mod outcome;
pub(crate) mod pick;
pub(crate) mod schema;
pub(crate) mod select;
pub(crate) mod subbot;
pub(crate) mod tool;

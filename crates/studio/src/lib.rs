//! iterion-studio: the run viewer behind `iterion studio`.
//!
//! An HTTP server over the run store the CLI uses. It renders the runs list and one run's page
//! (its workflow graph laid out as a layered DAG and drawn as SVG here, the event timeline, node
//! logs and agent transcripts, the sandbox panel, the failure with its remedy, a paused run's
//! question) as server-side HTML, keeps them live with server-sent events, and serves the same
//! data as JSON under `/api/`.
//!
//! Everything shown is attacker-controlled (node output, hostnames, workflow names): pages are
//! built with `maud`, where every interpolation is escaped, the embedded script only ever writes
//! text nodes or server-rendered fragments, and a strict Content-Security-Policy forbids inline
//! script. Access rules live in [`access`]: loopback reads are open, any other listener needs the
//! token, and the two writes (answering a paused run, cancelling a run) need the token and a
//! same-origin request.
//!
//! The crate reads no environment: the caller (the CLI) passes the token in [`StudioOptions`].
#![deny(missing_docs)]

pub mod access;
mod answer;
mod api;
mod assets;
mod cancel;
pub mod graph;
mod handlers;
pub mod layout;
mod load;
mod pages;
mod remedy;
mod server;
mod state;
pub mod view;

pub use access::{Access, generate_token};
pub use server::{StudioOptions, router, serve};
pub use state::{ActionError, Actions};

//! iterion-agent: the claw tool-use loop and the runner protocol — what runs *inside* the
//! sandbox.
//!
//! One job: given a task (a model route, prompts, the advertised tools, an optional output
//! schema), talk to the model until it answers, running the workspace tools where the loop lives.
//! The engine runs this loop in its own process for an unsandboxed run, and inside the run's
//! container through `iterion __claw-runner` otherwise ([`runner`], SANDBOX.md §13).
//!
//! **Trust boundary.** Inside a container this code runs next to the untrusted workload, so it
//! is kept small and its dependencies auditable (Cargo.toml says why each is there): no store,
//! no sandbox driver, no container-engine client, no engine. It holds no provider key — the task
//! carries a gateway placeholder the run's egress proxy materialises (§13.1b) — and the only
//! commands it runs go through the [`shell::Shell`] its embedder gives it.
//!
//! - [`provider`]: `provider/model`, keys and base URLs, resolved at launch (§13.1b).
//! - [`http`]: the small HTTP/1.1 client model calls use (direct, or through the run's proxy).
//! - [`wire`]: the provider-neutral conversation, [`wire::Usage`], the two API encodings.
//! - [`session`]: the loop with retries, `tool_max_steps`, schema repair, pausing on `ask_user`.
//! - [`tools`]: the workspace tools and `ask_user`'s spec; [`shell`]: where `bash` runs;
//!   [`claw_tools`]: `web_fetch`, `read_image`, `sleep`, `todo_write`, `structured_output`,
//!   `send_user_message`.
//! - [`schema`]: output conformance (DSL.md §3.4), shared with the engine's nodes.
//! - [`envelope`], [`placement`], [`runner`]: the NDJSON channel between the engine (launcher)
//!   and the runner, where each tool runs, and the runner's side of the channel.
//! - [`delegate`]: the `claude_code` and `codex` backends' invocations and output streams.
//! - [`forfait`]: subscription credential files checked and copied without their real tokens.
//! - [`mcp`]: the stdio MCP client the runner offers a node's declared servers' tools through.
//! - [`text`]: byte-bounded slices of text.
#![deny(missing_docs)]

pub mod claw_tools;
pub mod delegate;
pub mod envelope;
pub mod forfait;
mod glob;
pub mod http;
pub mod mcp;
pub mod placement;
pub mod provider;
pub mod runner;
pub mod schema;
pub mod session;
pub mod shell;
pub mod text;
pub mod tools;
pub mod wire;

#[cfg(test)]
mod test_shell;

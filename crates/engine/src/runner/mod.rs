//! The in-container runner (SANDBOX.md §13; ARCHITECTURE.md §2 step 20).
//!
//! Under an active sandbox an agent node's loop runs *inside* the run's container: the launcher
//! ([`launcher::Launcher`]) execs `[/run/iterion/bin/iterion, "__claw-runner"]` there — the
//! engine's own static binary, bind-mounted read-only (§8.4) — and speaks NDJSON envelopes over
//! the exec's stdin and stdout ([`envelope`]). The runner ([`side`]) executes the workspace tools
//! where they must act (in the container), proxies the launcher-held ones (`ask_user`) back over
//! `tool_call`, and reaches the model through the run's egress proxy with a gateway-credential
//! placeholder instead of the key (§13.1b): the key never enters the container.
//!
//! [`placement::sandbox_placement_of`] decides where each tool runs; an unclassified or refused
//! tool fails the node before the runner starts (`PlacementRefused`).

pub(crate) mod launcher;

pub(crate) use launcher::Launcher;

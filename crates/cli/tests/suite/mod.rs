mod admission;
mod agent;
mod agent_docker;
mod cancel;
mod claw_tools;
mod delegates;
mod delegates_ask;
mod delegates_login;
mod delegates_mcp;
mod devbox;
mod devcontainer;
mod docs;
mod doctor;
mod egress;
mod egress_attacks;
mod egress_bridge;
mod egress_inspect;
mod egress_matrix;
mod egress_transparent;
mod exec_agent;
mod execfix;
mod faults;
mod fleet;
mod imports;
mod lang_features;
pub mod lang_nodes;
mod language;
mod limits;
mod logs;
mod matrix;
mod mount_race;
mod namespace;
mod record_secrets;
mod resume;
mod run;
mod runs;
mod studio;
mod subbots;
pub mod support;
mod trust;
mod validate;
mod warm_pool;

/// The binary's argument grammar (`src/args.rs`), compiled in so that `docs` can walk clap's
/// `Command` (the crate has no library target). Only `docs` uses it.
#[allow(dead_code, unreachable_pub)]
#[path = "../../src"]
mod cli_src {
    pub mod args;
}

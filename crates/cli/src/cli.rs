//! The argument grammar (ARCHITECTURE.md §4). Parsing only; the commands act.
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// iterion runs declarative AI-agent workflows (`.iter` files), each run inside an isolated
/// sandbox.
#[derive(Debug, Parser)]
#[command(name = "iterion", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a workflow file and print its diagnostics (exit 0 clean or warnings only, 1 errors,
    /// 2 unreadable file).
    Validate(ValidateArgs),
}

/// `iterion validate FILE [--json]`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The `.iter` file.
    pub file: PathBuf,
    /// Print one JSON document `{file, errors, warnings, diagnostics}` instead of the human form.
    #[arg(long)]
    pub json: bool,
}

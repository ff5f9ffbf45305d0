//! The `iterion` binary: clap commands over the engine. The only crate that prints for humans
//! (ARCHITECTURE.md §1): human output goes to stdout, logs to stderr, `--json` prints one JSON
//! document.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cli;
mod commands;
mod exit;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let code = match cli.command {
        cli::Command::Validate(args) => commands::validate::run(&args),
    };
    code.into()
}

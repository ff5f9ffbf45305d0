//! `iterion completions bash|zsh|fish`: the completion script, generated from the same clap
//! grammar the binary parses with, so it cannot drift from the commands.
use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::{Cli, CompletionsArgs, ShellArg};
use crate::exit::Exit;

/// Prints the script for `args.shell` on stdout.
pub fn run(args: &CompletionsArgs) -> Exit {
    let shell = match args.shell {
        ShellArg::Bash => Shell::Bash,
        ShellArg::Zsh => Shell::Zsh,
        ShellArg::Fish => Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "iterion", &mut script);
    crate::output::out!("{}", String::from_utf8_lossy(&script));
    Exit::Success
}

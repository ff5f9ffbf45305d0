//! The exec request the engine sends the init (with the command's stdin, stdout, stderr and a
//! status socket as `SCM_RIGHTS`), and the status line it answers.

use serde::{Deserialize, Serialize};

/// One command to run in the sandbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ExecRequest {
    /// The command; `argv[0]` is looked up on the env's `PATH` unless it holds a `/`.
    pub argv: Vec<String>,
    /// The whole environment, in order (a later pair wins).
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: String,
}

/// Parses the init's `exit N` line.
pub(crate) fn parse_exit(text: &str) -> Option<i64> {
    text.lines()
        .find_map(|line| line.strip_prefix("exit "))
        .and_then(|code| code.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_line_carries_the_code_and_nothing_else_counts() {
        assert_eq!(
            [
                parse_exit("exit 0\n"),
                parse_exit("exit 137\n"),
                parse_exit(""),
                parse_exit("exit x\n")
            ],
            [Some(0), Some(137), None, None]
        );
    }
}

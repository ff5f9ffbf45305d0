//! Writing a command's stream of lines to stdout when the reader may go away: `iterion events
//! RUN | head -1` must end quietly with exit 0, not panic on the broken pipe (Rust ignores
//! SIGPIPE, so `println!` would).
//!
//! [`print_line`] is the one way the streaming commands (`events`, `logs`) write a line;
//! [`Closed`] says the reader is gone, and [`Closed::exit`] is the exit code it ends with.
use std::io::Write as _;

use crate::exit::Exit;

/// stdout can take no more: the reader closed it (exit 0), or writing failed otherwise (exit 1,
/// with the error shown).
#[derive(Debug)]
pub struct Closed(std::io::Error);

impl Closed {
    /// The exit code: success when the reader simply stopped reading.
    pub fn exit(self) -> Exit {
        if self.0.kind() == std::io::ErrorKind::BrokenPipe {
            return Exit::Success;
        }
        eprintln!("error: cannot write to stdout: {}", self.0);
        Exit::Failed
    }
}

/// Writes `line` and a newline to stdout, flushed (a follower's reader sees each line as it
/// comes).
pub fn print_line(line: &str) -> Result<(), Closed> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(Closed)
}

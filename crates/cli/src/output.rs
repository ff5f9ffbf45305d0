//! Where the CLI writes, and what a closed reader means.
//!
//! `iterion events RUN | head` closes the pipe after ten lines; `println!` would then panic (exit
//! 101, "failed printing to stdout: Broken pipe"). Every write to stdout goes through
//! [`outln!`]/[`out!`] instead: a reader that went away (`EPIPE`) ends the process at once, quietly,
//! with exit 0 — the reader got what it wanted. Any other write error (a full disk behind `>`) is
//! reported on stderr and exits 1. Writes to stderr ([`errln!`]/[`err!`]) are best-effort: losing
//! a progress line must never stop a run, so their errors are dropped.

use std::fmt;
use std::io::{self, Write};

/// Writes `args` to stdout and flushes; see the module doc for what a failure does.
pub fn write_stdout(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    if let Err(error) = out.write_fmt(args).and_then(|()| out.flush()) {
        stdout_failed(&error);
    }
}

/// Writes `args` to stderr, best-effort.
pub fn write_stderr(args: fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.flush());
}

/// What a failed write to stdout does: a broken pipe exits 0 without a word, anything else is
/// reported and exits 1.
fn stdout_failed(error: &io::Error) -> ! {
    let code = stdout_failure_exit(error);
    if code != 0 {
        write_stderr(format_args!("error: cannot write to stdout: {error}\n"));
    }
    std::process::exit(code)
}

/// The exit code of a failed write to stdout: 0 when the reader went away, else 1.
fn stdout_failure_exit(error: &io::Error) -> i32 {
    if error.kind() == io::ErrorKind::BrokenPipe {
        0
    } else {
        1
    }
}

/// `println!` for stdout through [`write_stdout`].
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for stdout through [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` through [`write_stderr`].
macro_rules! errln {
    () => {
        $crate::output::write_stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` through [`write_stderr`].
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(format_args!($($arg)*))
    };
}

pub(crate) use {err, errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_exits_zero_and_any_other_write_error_exits_one() {
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        let full = io::Error::from_raw_os_error(28); // ENOSPC
        assert_eq!(
            (stdout_failure_exit(&pipe), stdout_failure_exit(&full)),
            (0, 1)
        );
    }
}

//! Where a run-log line came from.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which stream a run-log line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    /// A command's standard output.
    Stdout,
    /// A command's standard error.
    Stderr,
    /// iterion itself: the rendered command, truncation notes, driver operations in `docker …`
    /// form, `sandbox active` (SANDBOX.md §4.9).
    System,
}

impl LogStream {
    /// Every stream.
    pub const ALL: [Self; 3] = [Self::Stdout, Self::Stderr, Self::System];

    /// The wire and storage spelling: `stdout`, `stderr` or `system`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::System => "system",
        }
    }

    /// Parses the storage spelling; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl fmt::Display for LogStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_round_trip_and_nothing_else_parses() {
        for s in LogStream::ALL {
            assert_eq!(LogStream::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(LogStream::parse("STDOUT"), None);
    }
}

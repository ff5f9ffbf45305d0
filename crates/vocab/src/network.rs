//! `network.mode` (SANDBOX.md §6.5).

use serde::{Deserialize, Serialize};

use crate::word::word_conversions;

/// How a run's egress is filtered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum NetworkMode {
    /// No filtering: everything passes unless a rule denies it.
    Open,
    /// Only what a rule allows passes; no match denies (fails closed).
    Allowlist,
    /// Everything passes unless a rule denies it.
    Denylist,
}

impl NetworkMode {
    /// The wire spelling: `open`, `allowlist` or `denylist`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Allowlist => "allowlist",
            Self::Denylist => "denylist",
        }
    }

    /// The mode a word names exactly; `None` for any other word.
    pub fn from_word(word: &str) -> Option<Self> {
        [Self::Open, Self::Allowlist, Self::Denylist]
            .into_iter()
            .find(|m| m.as_str() == word)
    }
}

word_conversions!(NetworkMode, "network.mode", "open, allowlist or denylist");

/// The header on a `502` the egress proxy made because it could not reach the upstream: the
/// innermost error (e.g. `Connection refused (os error 111)`). The agent's model client turns it
/// back into the connect error it would have had without the proxy, so a model server that is
/// down reads the same sandboxed and unsandboxed (issue 19).
pub const UPSTREAM_ERROR_HEADER: &str = "x-iterion-upstream-error";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_words_and_nothing_else_parses() {
        for mode in [
            NetworkMode::Open,
            NetworkMode::Allowlist,
            NetworkMode::Denylist,
        ] {
            assert_eq!(mode.as_str().parse::<NetworkMode>(), Ok(mode));
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
        }
        let err = "Open".parse::<NetworkMode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"Open\": want open, allowlist or denylist"
        );
        assert!(serde_json::from_str::<NetworkMode>("\"strict\"").is_err());
    }
}

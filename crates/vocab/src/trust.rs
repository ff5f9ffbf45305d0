//! How far a run's workflow is trusted (SANDBOX.md §10).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// How far a run's workflow is trusted. An untrusted run must be sandboxed.
///
/// Reading fails closed: any stored or deserialised value other than `trusted` is
/// [`Trust::Untrusted`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// The default: the operator's own working tree.
    #[default]
    Trusted,
    /// `--trust untrusted`, a fork lane, or a child or resume of an untrusted run: a copy of the
    /// working tree, no host state, no shared nix store, no build egress.
    Untrusted,
}

impl Trust {
    /// The wire and storage spelling: `trusted` or `untrusted`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Trusted => "trusted",
            Self::Untrusted => "untrusted",
        }
    }

    /// Reads a stored value, failing closed: exactly `trusted` is trusted.
    pub fn from_stored(text: &str) -> Self {
        if text == Self::Trusted.as_str() {
            Self::Trusted
        } else {
            Self::Untrusted
        }
    }
}

impl<'de> Deserialize<'de> for Trust {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(|s| Self::from_stored(&s))
    }
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_fails_closed_on_anything_but_trusted() {
        let read: Vec<_> = ["trusted", "untrusted", "Trusted", "", "yes", "trusted "]
            .into_iter()
            .map(|s| (s, Trust::from_stored(s)))
            .collect();
        assert_eq!(
            read,
            [
                ("trusted", Trust::Trusted),
                ("untrusted", Trust::Untrusted),
                ("Trusted", Trust::Untrusted),
                ("", Trust::Untrusted),
                ("yes", Trust::Untrusted),
                ("trusted ", Trust::Untrusted),
            ]
        );
        let parsed: Trust = serde_json::from_str("\"admin\"").unwrap();
        assert_eq!(parsed, Trust::Untrusted);
        assert_eq!(
            serde_json::to_string(&Trust::Trusted).unwrap(),
            "\"trusted\""
        );
    }
}

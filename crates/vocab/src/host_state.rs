//! `host_state` (SANDBOX.md §2.2): whether the host's caches and tool state are bound in.

use serde::{Deserialize, Serialize};

use crate::word::word_conversions;

/// The `host_state` setting of one tier. Unset lets the next tier decide.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(try_from = "String", into = "&'static str")]
pub enum HostState {
    /// Not written: the tiers decide. Spelled as the empty string.
    #[default]
    Unset,
    /// Bind host caches and tool state.
    Auto,
    /// Bind nothing from the host's state.
    None,
}

impl HostState {
    /// The wire spelling: `""`, `auto` or `none`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::Auto => "auto",
            Self::None => "none",
        }
    }

    /// The setting a word names exactly (`""` is unset); `None` for any other word.
    pub fn from_word(word: &str) -> Option<Self> {
        [Self::Unset, Self::Auto, Self::None]
            .into_iter()
            .find(|h| h.as_str() == word)
    }

    /// Whether a tier wrote it.
    pub fn is_set(self) -> bool {
        self != Self::Unset
    }
}

word_conversions!(HostState, "host_state", "auto or none");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_the_empty_word_and_only_the_three_words_parse() {
        assert_eq!("".parse::<HostState>(), Ok(HostState::Unset));
        assert_eq!(serde_json::to_value(HostState::Unset).unwrap(), "");
        assert_eq!("auto".parse::<HostState>(), Ok(HostState::Auto));
        assert!(!HostState::Unset.is_set() && HostState::None.is_set());
        let err = "shared".parse::<HostState>().unwrap_err();
        assert_eq!(err.to_string(), "\"shared\": want auto or none");
        assert_eq!(err.field, "host_state");
    }
}

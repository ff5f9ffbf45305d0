//! The node kinds (DSL.md §3.5).

use serde::{Deserialize, Serialize};

use crate::word::word_conversions;

/// A node's kind: its keyword in a `.iter` file and its label in `node_started` events. Agent and
/// judge run the same way; the kind labels them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum NodeKind {
    /// `agent`.
    Agent,
    /// `judge`.
    Judge,
    /// `tool`.
    Tool,
    /// `router`.
    Router,
    /// `subbot` (DSL.md §3.9).
    Subbot,
    /// `compute`: outputs computed from expressions, no model.
    Compute,
    /// `human`: waits for a person's answer (or lets a model answer).
    Human,
    /// `fail NAME:`: a named failure with its own code and message; reaching it ends the run.
    Fail,
}

impl NodeKind {
    /// Every kind.
    pub const ALL: [Self; 8] = [
        Self::Agent,
        Self::Judge,
        Self::Tool,
        Self::Router,
        Self::Subbot,
        Self::Compute,
        Self::Human,
        Self::Fail,
    ];

    /// The keyword.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Judge => "judge",
            Self::Tool => "tool",
            Self::Router => "router",
            Self::Subbot => "subbot",
            Self::Compute => "compute",
            Self::Human => "human",
            Self::Fail => "fail",
        }
    }

    /// The kind a keyword names; `None` for any other word.
    pub fn from_word(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == word)
    }
}

word_conversions!(
    NodeKind,
    "node kind",
    "agent, judge, tool, router, subbot, compute, human or fail"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_keyword() {
        for kind in NodeKind::ALL {
            assert_eq!(NodeKind::from_word(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        assert_eq!(NodeKind::from_word("supervisor"), None);
    }
}

//! The small vocabulary enums of SANDBOX.md §1: what a run wants ([`Mode`]), whether the
//! operator's host state is bound ([`HostState`]), the egress stance ([`NetworkMode`],
//! [`Inherit`]), the two-word knobs ([`SandboxFlag`]) and the run's [`Trust`].
//!
//! [`HostState`], [`NetworkMode`] and [`Trust`] are the shared words of `iterion-vocab`, the same
//! types the workflow and the store use. Each parses from its wire spelling at the boundary
//! (`parse`, `FromStr`, serde) and prints with `as_str`. An unknown word is an [`Error::InvalidSpec`] or [`Error::InvalidSetting`] that names
//! what is accepted, so nothing downstream ever holds a string it has to re-check.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use iterion_vocab::{HostState, NetworkMode, Trust};

use crate::error::Error;

/// Whether a sandbox is wanted (SANDBOX.md §1.1). The mode alone decides behaviour: auto degrades
/// to the host when no container runtime answers, inline refuses (our decision 1).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Mode {
    /// `""`: the enclosing scope's mode; at workflow level, "nothing configured". Unsandboxed,
    /// silently.
    #[default]
    Inherit,
    /// `none`: the explicit opt-out. Final: no lower tier, devcontainer or fallback re-enables it.
    None,
    /// `auto`: the repository's devcontainer, else the default image.
    Auto,
    /// `inline`: the workflow block's own fields (image or build, …).
    Inline,
}

impl Mode {
    /// Every mode, in declaration order.
    pub const ALL: [Mode; 4] = [Mode::Inherit, Mode::None, Mode::Auto, Mode::Inline];

    /// Whether this mode wants a container. Only the active modes (`auto`, `inline`) reach driver
    /// selection; every caller keys on this, never on the source label.
    pub fn is_active(self) -> bool {
        matches!(self, Mode::Auto | Mode::Inline)
    }

    /// The wire spelling: `""`, `none`, `auto` or `inline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Inherit => "",
            Mode::None => "none",
            Mode::Auto => "auto",
            Mode::Inline => "inline",
        }
    }

    /// Whether `word` is one of the four mode spellings, exactly (case-sensitive, untrimmed).
    ///
    /// Its only runtime use is [`Spec::validate`](crate::Spec::validate); compile time is the DSL's
    /// C044. In Rust a [`Mode`] value is always valid, so this is the check for a string about to
    /// become one.
    pub fn is_valid(word: &str) -> bool {
        Mode::ALL.iter().any(|mode| mode.as_str() == word)
    }

    /// Parses a mode spelling.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`] on field `mode`, reading `want "", none, auto, or inline`, for any
    /// other word.
    ///
    /// ```
    /// use iterion_sandbox::Mode;
    /// assert_eq!(Mode::parse("inline")?, Mode::Inline);
    /// assert!(Mode::parse("docker").is_err());
    /// # Ok::<(), iterion_sandbox::Error>(())
    /// ```
    pub fn parse(word: &str) -> Result<Mode, Error> {
        Mode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == word)
            .ok_or_else(|| Error::InvalidSpec {
                field: "mode".to_owned(),
                reason: format!(
                    "\"{}\": want \"\", none, auto, or inline",
                    crate::text::escape_controls(word)
                ),
            })
    }
}

/// How a node-level network block combines with the workflow's (SANDBOX.md §1.2). Omitted means
/// merge; the word `merge` itself is invalid. Node blocks are not honoured at run time, so this is
/// carried for validation only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Inherit {
    /// The node's rules replace the workflow's.
    Replace,
    /// The node's rules are appended to the workflow's.
    Append,
}

impl Inherit {
    /// The wire spelling: `replace` or `append`.
    pub fn as_str(self) -> &'static str {
        match self {
            Inherit::Replace => "replace",
            Inherit::Append => "append",
        }
    }

    /// Parses `replace` or `append`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`] on field `network.inherit`, reading `want replace or append; omit it
    /// to merge`, for any other word (including `merge`).
    pub fn parse(word: &str) -> Result<Inherit, Error> {
        match word {
            "replace" => Ok(Inherit::Replace),
            "append" => Ok(Inherit::Append),
            other => Err(Error::InvalidSpec {
                field: "network.inherit".to_owned(),
                reason: format!(
                    "\"{}\": want replace or append; omit it to merge",
                    crate::text::escape_controls(other)
                ),
            }),
        }
    }
}

/// A two-word knob: `--sandbox auto|none`, `ITERION_SANDBOX_OVERRIDE` and
/// `ITERION_SANDBOX_DEFAULT` accept exactly these (SANDBOX.md §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum SandboxFlag {
    /// `auto`: sandbox when a runtime answers, degrade visibly when none does.
    Auto,
    /// `none`: no sandbox. From the CLI tier it wins everywhere.
    None,
}

impl SandboxFlag {
    /// The wire spelling: `auto` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxFlag::Auto => "auto",
            SandboxFlag::None => "none",
        }
    }

    /// The [`Mode`] this flag asks for.
    pub fn mode(self) -> Mode {
        match self {
            SandboxFlag::Auto => Mode::Auto,
            SandboxFlag::None => Mode::None,
        }
    }

    /// Parses `auto` or `none`, trimmed and case-insensitive (the spelling of a flag or variable).
    /// `None` for anything else; the caller names its knob in the error.
    pub fn parse(word: &str) -> Option<SandboxFlag> {
        match word.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(SandboxFlag::Auto),
            "none" => Some(SandboxFlag::None),
            _ => None,
        }
    }
}

macro_rules! wire_conversions {
    ($($ty:ident),*) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl From<$ty> for &'static str {
            fn from(value: $ty) -> &'static str {
                value.as_str()
            }
        }
    )*};
}
wire_conversions!(Mode, Inherit, SandboxFlag);

macro_rules! parse_conversions {
    ($($ty:ident),*) => {$(
        impl FromStr for $ty {
            type Err = Error;
            fn from_str(word: &str) -> Result<Self, Error> {
                $ty::parse(word)
            }
        }
        impl TryFrom<String> for $ty {
            type Error = Error;
            fn try_from(word: String) -> Result<Self, Error> {
                $ty::parse(&word)
            }
        }
    )*};
}
parse_conversions!(Mode, Inherit);

impl TryFrom<String> for SandboxFlag {
    type Error = Error;
    fn try_from(word: String) -> Result<Self, Error> {
        SandboxFlag::parse(&word).ok_or_else(|| Error::InvalidSpec {
            field: "sandbox".to_owned(),
            reason: format!(
                "\"{}\": want auto or none",
                crate::text::escape_controls(&word)
            ),
        })
    }
}

#[cfg(test)]
#[path = "mode_tests.rs"]
mod tests;

//! `RunId`: the one identifier every other record hangs off.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A run's id: a UUID in lowercase hyphenated form, version 7 when the store made it (so ids
/// sort by creation time).
///
/// Parsing accepts any UUID spelling (`Uuid::parse_str`) and normalises it, so an id read back
/// from a container label or typed by a user compares equal to the stored one.
///
/// ```
/// use iterion_store::RunId;
/// let id: RunId = "0190B4C6-1D2E-7F00-8000-000000000001".parse()?;
/// assert_eq!(id.as_str(), "0190b4c6-1d2e-7f00-8000-000000000001");
/// # Ok::<(), iterion_store::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl RunId {
    /// A fresh time-ordered id (UUIDv7).
    pub fn generate() -> Self {
        Self(Uuid::now_v7().hyphenated().to_string())
    }

    /// Parses and normalises `text`.
    ///
    /// # Errors
    /// [`InvalidRunId`] when `text` is not a UUID (it converts into the store's
    /// `Error::InvalidRunId`).
    pub fn parse(text: &str) -> Result<Self, InvalidRunId> {
        Uuid::parse_str(text.trim())
            .map(|u| Self(u.hyphenated().to_string()))
            .map_err(|_| InvalidRunId {
                value: text.to_owned(),
            })
    }

    /// The id as text (lowercase, hyphenated).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Text that should have been a run id is not a UUID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a run id (expected a UUID such as 0190b4c6-1d2e-7f00-8000-000000000001)")]
pub struct InvalidRunId {
    /// What was given.
    pub value: String,
}

impl InvalidRunId {
    /// The stable code, the same as the store error it converts into.
    pub const CODE: &'static str = "STORE_INVALID_RUN_ID";

    /// [`InvalidRunId::CODE`].
    pub fn code(&self) -> &'static str {
        Self::CODE
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RunId {
    type Err = InvalidRunId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for RunId {
    type Error = InvalidRunId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> Self {
        id.0
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

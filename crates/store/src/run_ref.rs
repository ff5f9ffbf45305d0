//! `RunRef`: how a person names a run on the command line — a whole id, a prefix of one, or
//! `last` — and [`resolve_run`], the one function every command resolves it with.

use std::fmt;

use crate::error::{Error, Result};
use crate::model::RunId;
use crate::store::{RunQuery, Store};

/// How many candidates an ambiguous prefix lists before "and N more".
pub const AMBIGUOUS_SHOWN: usize = 10;

/// How many matches of an ambiguous prefix are counted at most.
const COUNT_BOUND: usize = 1000;

/// A run as a person names it.
///
/// ```
/// use iterion_store::RunRef;
/// assert_eq!(RunRef::parse("last")?, RunRef::Last);
/// assert_eq!(RunRef::parse("019AD8")?, RunRef::Prefix("019ad8".into()));
/// assert!(RunRef::parse("../etc").is_err());
/// # Ok::<(), iterion_store::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunRef {
    /// A whole run id.
    Id(RunId),
    /// The start of a run id: lowercase hex digits and `-`, at least one character, shorter
    /// than a whole id.
    Prefix(String),
    /// The newest top-level run (by creation; subbot children are never `last`).
    Last,
}

impl RunRef {
    /// The word that names the newest run.
    pub const LAST: &'static str = "last";

    /// Parses what a person typed. Only `last`, a UUID, or a run of hex digits and `-` (case
    /// does not matter) are accepted; anything else is refused before the store is asked.
    ///
    /// # Errors
    /// [`Error::InvalidRunRef`] for anything else (the empty string too).
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        if text == Self::LAST {
            return Ok(Self::Last);
        }
        // Any spelling of a whole UUID (hyphenated, 32 hex digits, braces) is that id.
        if let Ok(id) = RunId::parse(text) {
            return Ok(Self::Id(id));
        }
        let well_formed = !text.is_empty()
            && text.len() < 36
            && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
        if !well_formed {
            return Err(Error::InvalidRunRef {
                value: text.to_owned(),
            });
        }
        Ok(Self::Prefix(text.to_ascii_lowercase()))
    }
}

impl fmt::Display for RunRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id(id) => f.write_str(id.as_str()),
            Self::Prefix(prefix) => f.write_str(prefix),
            Self::Last => f.write_str(Self::LAST),
        }
    }
}

/// The run `text` names: a whole id (which must exist), a prefix matching exactly one run, or
/// `last`, the newest top-level run. Every command that takes a run id calls this.
///
/// # Errors
/// - [`Error::InvalidRunRef`] when `text` cannot name a run;
/// - [`Error::RunNotFound`] for a whole id the store does not hold;
/// - [`Error::NoRunMatches`] for a prefix no run has, or `last` in an empty store;
/// - [`Error::AmbiguousRunRef`] for a prefix several runs share, with the newest
///   [`AMBIGUOUS_SHOWN`] of them;
/// - backend errors.
pub async fn resolve_run<S: Store + ?Sized>(store: &S, text: &str) -> Result<RunId> {
    match RunRef::parse(text)? {
        RunRef::Id(id) => match store.get_run(&id).await? {
            Some(run) => Ok(run.id),
            None => Err(Error::RunNotFound { run_id: id }),
        },
        RunRef::Last => store
            .list_runs(&RunQuery::newest(1).top_level())
            .await?
            .into_iter()
            .next()
            .map(|run| run.id)
            .ok_or_else(|| Error::NoRunMatches {
                reference: RunRef::LAST.to_owned(),
            }),
        RunRef::Prefix(prefix) => {
            let mut found = store
                .runs_by_id_prefix(&prefix, AMBIGUOUS_SHOWN + 1)
                .await?;
            match found.len() {
                0 => Err(Error::NoRunMatches { reference: prefix }),
                1 => Ok(found.remove(0).id),
                _ => {
                    // Counted up to a bound: the message only needs an order of size.
                    let total = store.runs_by_id_prefix(&prefix, COUNT_BOUND).await?.len();
                    found.truncate(AMBIGUOUS_SHOWN);
                    Err(Error::AmbiguousRunRef {
                        more: total.saturating_sub(found.len()),
                        candidates: found.into_iter().map(|run| run.id).collect(),
                        prefix,
                    })
                }
            }
        }
    }
}

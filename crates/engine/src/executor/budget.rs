//! Run caps (DSL.md §3.8, §5.7): the launcher resolves `budget:` once ([`RunBudget::resolve`]),
//! the executor enforces it.
//!
//! - `max_iterations` counts node executions (tools, agents, judges; never routers). It is checked
//!   before each counted node starts; when the count has reached the cap the run fails. Routers are
//!   not checked: they execute nothing, so a router between the last allowed node and `done` does
//!   not fail a run that did all its work.
//! - `max_duration` runs from the moment the executor starts its first node (the entry node, or the
//!   resumed node), so sandbox setup is not counted (D20). When it elapses, running nodes are
//!   cancelled (their processes killed) and the run fails.
//!
//! Both emit `budget_exceeded {dimension}` and fail the run with `BUDGET_EXCEEDED`. Concurrent
//! fan-out branches share both.

use std::time::Duration;

use iterion_dsl::ir;
use iterion_dsl::template::{HostRefError, expand_host};

/// The caps of one run, resolved. `Default` caps nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunBudget {
    /// The wall-clock limit from the first node's start.
    pub max_duration: Option<Duration>,
    /// The most counted node executions.
    pub max_iterations: Option<u64>,
    /// The most branches of one fan-out running at once (`max_parallel_branches`).
    pub max_parallel_branches: Option<u32>,
}

/// Why `budget.max_duration` could not be resolved at launch (exit 2: no run is created).
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// A `${…}` in the value is malformed (the compiler reports C004 for literal text, so this
    /// only happens for text that came from the environment).
    #[error("budget.max_duration: {0}")]
    HostReference(#[from] HostRefError),
    /// The value (after `${…}` expansion) is not a duration.
    #[error(
        "budget.max_duration {value:?} is not a duration: write INT+unit pairs with units h, m, s, ms, such as \"90s\" or \"1h30m\", totalling more than zero"
    )]
    Malformed {
        /// The expanded value.
        value: String,
    },
}

impl BudgetError {
    /// A stable code: the launch is refused before a run exists.
    pub fn code(&self) -> &'static str {
        match self {
            BudgetError::HostReference(_) | BudgetError::Malformed { .. } => "BUDGET_INVALID",
        }
    }
}

impl RunBudget {
    /// Resolves a workflow's `budget:`: expands `${…}` in `max_duration` with `lookup` (the
    /// iterion process's environment, DSL.md §4.3) and parses it.
    ///
    /// # Errors
    ///
    /// [`BudgetError`] when the expanded value is not a duration.
    ///
    /// ```
    /// use iterion_engine::RunBudget;
    /// let budget = iterion_dsl::ir::Budget { max_duration: Some("${T:-1m30s}".into()), max_iterations: Some(8), ..Default::default() };
    /// let got = RunBudget::resolve(&budget, |_| None)?;
    /// assert_eq!(got.max_duration, Some(std::time::Duration::from_secs(90)));
    /// assert_eq!(got.max_iterations, Some(8));
    /// # Ok::<(), iterion_engine::BudgetError>(())
    /// ```
    pub fn resolve(
        budget: &ir::Budget,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<RunBudget, BudgetError> {
        let max_duration = match &budget.max_duration {
            None => None,
            Some(text) => {
                let value = expand_host(text, lookup)?;
                Some(parse_budget_duration(&value).ok_or(BudgetError::Malformed {
                    value: value.clone(),
                })?)
            }
        };
        Ok(RunBudget {
            max_duration,
            max_iterations: budget.max_iterations,
            max_parallel_branches: budget.max_parallel_branches,
        })
    }
}

/// Parses a budget duration: one or more `INT unit` pairs, units `h`, `m`, `s`, `ms`, with a total
/// above zero (`"90s"`, `"1h30m"`, `"250ms"`). Surrounding whitespace is ignored; nothing else is.
pub(crate) fn parse_budget_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut total = Duration::ZERO;
    if bytes.is_empty() {
        return None;
    }
    while i < bytes.len() {
        let start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let n: u64 = text.get(start..i)?.parse().ok()?;
        let unit_start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_alphabetic) {
            i += 1;
        }
        let part = match text.get(unit_start..i)? {
            "h" => Duration::from_secs(n.checked_mul(3600)?),
            "m" => Duration::from_secs(n.checked_mul(60)?),
            "s" => Duration::from_secs(n),
            "ms" => Duration::from_millis(n),
            _ => return None,
        };
        total = total.checked_add(part)?;
    }
    (total > Duration::ZERO).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn durations_are_int_unit_pairs() {
        let cases = [
            ("90s", Some(90_000)),
            ("1h30m", Some(5_400_000)),
            ("250ms", Some(250)),
            (" 1m1s ", Some(61_000)),
            ("1s500ms", Some(1_500)),
            ("0s", None),
            ("5", None),
            ("1.5s", None),
            ("1d", None),
            ("s", None),
            ("", None),
            ("-1s", None),
            ("1 s", None),
        ];
        let got: Vec<(&str, Option<u128>)> = cases
            .iter()
            .map(|(t, _)| (*t, parse_budget_duration(t).map(|d| d.as_millis())))
            .collect();
        let want: Vec<(&str, Option<u128>)> = cases.to_vec();
        assert_eq!(got, want);
    }

    #[test]
    fn a_malformed_expanded_value_names_the_knob() {
        let budget = ir::Budget {
            max_duration: Some("${T}".to_owned()),
            max_iterations: None,
            ..Default::default()
        };
        let err = RunBudget::resolve(&budget, |_| Some("soon".to_owned())).unwrap_err();
        assert_eq!(
            (
                err.code(),
                err.to_string().starts_with("budget.max_duration \"soon\"")
            ),
            ("BUDGET_INVALID", true)
        );
    }
}

//! Running a setup phase under its budget (SANDBOX.md §16.1): [`run_with_phase_timeout`] bounds
//! a future and turns an overrun into [`Error::PhaseTimeout`].
//!
//! Cancellation is Rust's: dropping the future returned by `run_with_phase_timeout` (the run was
//! cancelled) drops the phase with it, so "a cancelled parent keeps its own error" holds by
//! construction: nothing here reports it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::phase::{Phase, format_duration};

/// Runs `phase` under `budget` (SANDBOX.md §16.1).
///
/// At half the budget a warning names the phase and its knob. When the deadline fires the phase
/// is dropped and the result is [`Error::PhaseTimeout`] with the elapsed time. An error of the
/// phase itself is returned as it is; a success at or after the deadline is kept and warned about.
///
/// # Errors
///
/// [`Error::PhaseTimeout`], or the phase's own error.
pub async fn run_with_phase_timeout<T, F>(phase: Phase, budget: Duration, work: F) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let started = Instant::now();
    let deadline = started + budget;
    let halfway = started + budget / 2;
    let mut work = std::pin::pin!(work);
    let mut warned = false;
    loop {
        tokio::select! {
            biased;
            outcome = &mut work => {
                let elapsed = started.elapsed();
                if outcome.is_ok() && elapsed >= budget {
                    tracing::warn!(
                        "sandbox: {phase} phase finished after its deadline ({} > {})",
                        format_duration(elapsed),
                        format_duration(budget)
                    );
                }
                return outcome;
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(Error::PhaseTimeout { phase, elapsed: started.elapsed(), budget });
            }
            () = tokio::time::sleep_until(halfway), if !warned => {
                warned = true;
                tracing::warn!(
                    "sandbox: {phase} phase still running at half its budget of {}; raise {} if it needs longer",
                    format_duration(budget),
                    phase.env_var().unwrap_or("nothing (the budget is fixed)")
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[tokio::test]
    async fn an_overrun_phase_is_a_typed_timeout_naming_the_phase_and_budget() {
        let budget = Duration::from_millis(50);
        let error = run_with_phase_timeout(Phase::ImagePull, budget, async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        })
        .await
        .unwrap_err();
        let Error::PhaseTimeout {
            phase,
            elapsed,
            budget: reported,
        } = &error
        else {
            panic!("not a PhaseTimeout: {error}");
        };
        assert_eq!(
            (
                *phase,
                *reported,
                *elapsed >= budget,
                *elapsed < Duration::from_secs(5),
                error.code()
            ),
            (
                Phase::ImagePull,
                budget,
                true,
                true,
                "SANDBOX_SETUP_TIMEOUT"
            )
        );
        assert!(
            error
                .to_string()
                .starts_with("sandbox: image pull phase timed out after "),
            "{error}"
        );
        assert!(
            error.to_string().ends_with(" (deadline 50ms exceeded)"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_phase_that_finishes_in_time_returns_its_own_result() {
        let ok = run_with_phase_timeout(Phase::PostCreate, Duration::from_secs(5), async {
            Ok::<_, Error>(7)
        })
        .await;
        let failed = run_with_phase_timeout(Phase::PostCreate, Duration::from_secs(5), async {
            Err::<(), _>(Error::Capacity {
                why: "full".to_owned(),
            })
        })
        .await;
        assert_eq!(
            (ok.ok(), failed.map_err(|e| e.code())),
            (Some(7), Err("SANDBOX_CAPACITY"))
        );
    }
}

//! The admission gate (SANDBOX.md §10; the seed's steps 3–4): once per launch and once per
//! resume, after the run record exists and before workspace setup or any node.
//!
//! A trusted run is allowed. An untrusted run is asked `run_will_be_sandboxed` — the same
//! resolution and driver selection its start will do — and refused with
//! `untrusted_without_sandbox` when the answer is no; the reason names the tier that spoke. The
//! decision is persisted on the run under compare-and-swap ([`persist_admission`], 3 attempts)
//! **before** a refusal returns, so the run record explains itself.

use iterion_sandbox::{
    Factory, Mode, NotSandboxedCause, SandboxFlag, SandboxVerdict, Trust, run_will_be_sandboxed,
};
use iterion_store::{Admission, AdmissionDecision, Run, RunId, Store, Timestamp};

use crate::sandbox::resolve::{Resolved, SandboxSettings};

/// The admission phase recorded on the run.
pub(crate) const ADMISSION_PHASE: &str = "pre_model";

/// How many times a conflicted admission save is retried in all.
pub(crate) const ADMISSION_CAS_ATTEMPTS: u32 = 3;

/// The admission record of a trusted run.
pub(crate) fn allowed_trusted(now: Timestamp) -> Admission {
    Admission {
        decision: AdmissionDecision::Allowed,
        phase: ADMISSION_PHASE.to_owned(),
        code: "trusted".to_owned(),
        reason: "trusted run".to_owned(),
        checked_at: now,
    }
}

/// The admission decision of one attempt (SANDBOX.md §10), from the same resolution and driver
/// selection its start will use. The one place that decides; a launch asks it inside the attempt,
/// a resume asks it before it reopens the record (so a refusal leaves the record as it was).
pub(crate) async fn decide(
    trust: Trust,
    resolved: &Resolved,
    settings: &SandboxSettings,
    factory: &Factory,
    override_env: Option<SandboxFlag>,
) -> Admission {
    match trust {
        Trust::Trusted => allowed_trusted(Timestamp::now()),
        Trust::Untrusted => {
            let verdict = run_will_be_sandboxed(
                &resolved.mode_inputs(settings),
                resolved.spec_resolution(),
                factory,
            )
            .await;
            decide_untrusted(&verdict, override_env, Timestamp::now())
        }
    }
}

/// The admission record of an untrusted run, from the sandbox verdict (SANDBOX.md §10).
pub(crate) fn decide_untrusted(
    verdict: &SandboxVerdict,
    override_env: Option<SandboxFlag>,
    now: Timestamp,
) -> Admission {
    if verdict.is_sandboxed() {
        return Admission {
            decision: AdmissionDecision::Allowed,
            phase: ADMISSION_PHASE.to_owned(),
            code: "untrusted_sandboxed".to_owned(),
            reason: format!(
                "untrusted run gets a per-run sandbox (mode {} from {})",
                verdict.mode.as_str(),
                verdict.source.label()
            ),
            checked_at: now,
        };
    }
    Admission {
        decision: AdmissionDecision::Denied,
        phase: ADMISSION_PHASE.to_owned(),
        code: "untrusted_without_sandbox".to_owned(),
        reason: refusal_reason(verdict, override_env),
        checked_at: now,
    }
}

/// `run refused: trust=untrusted requires a per-run sandbox, but this run resolves to no
/// container: <cause> (mode <mode> from <source label>; <override state>)`, then the three ways
/// to get a container.
pub(crate) fn refusal_reason(
    verdict: &SandboxVerdict,
    override_env: Option<SandboxFlag>,
) -> String {
    let cause = verdict
        .cause()
        .map_or("no container runtime", |c| c.label());
    let mode = match verdict.mode {
        Mode::Inherit => "\"\"",
        other => other.as_str(),
    };
    let override_state = match override_env {
        Some(flag) => format!(
            "the ITERION_SANDBOX_OVERRIDE=\"{}\" override is set",
            flag.as_str()
        ),
        None => "no ITERION_SANDBOX_OVERRIDE is set".to_owned(),
    };
    // Only the fix that applies to this cause is suggested (issue 19).
    let fix = match verdict.cause() {
        Some(NotSandboxedCause::OverrideNone) => {
            "unset ITERION_SANDBOX_OVERRIDE, or pass --sandbox auto"
        }
        Some(NotSandboxedCause::OptedOut) => {
            "remove the none (--sandbox none, sandbox: none, ITERION_SANDBOX_DEFAULT=none), or pass --sandbox auto"
        }
        Some(NotSandboxedCause::NoSandboxConfiguration) => {
            "add a sandbox: block (sandbox: auto or an inline image), pass --sandbox auto, or set ITERION_SANDBOX_DEFAULT=auto"
        }
        Some(NotSandboxedCause::AutoWithoutRepositoryRoot) => {
            "run from the directory the run should work on"
        }
        Some(NotSandboxedCause::NoContainerRuntime) | None => {
            "install and start Docker or Podman (iterion sandbox doctor says which endpoint it asked)"
        }
    };
    format!(
        "run refused: trust=untrusted requires a per-run sandbox, but this run resolves to no container: {cause} (mode {mode} from {}; {override_state}). To get a container: {fix}",
        verdict.source.label()
    )
}

/// Why an admission could not be persisted.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// Every attempt lost its compare-and-swap.
    #[error("admission CAS conflicted after {attempts} attempts")]
    Conflicted {
        /// How many saves were tried.
        attempts: u32,
    },
    /// Any other store error (returned at once).
    #[error(transparent)]
    Store(#[from] iterion_store::Error),
}

/// Sets `run.admission` (and whatever `also` sets) and saves under compare-and-swap; on a version conflict, reloads the run
/// and applies the decision again, [`ADMISSION_CAS_ATTEMPTS`] times in all. Returns the saved run.
///
/// The save is never abandoned half-way by the caller's cancellation: callers await it to the end
/// (the run's cancellation token is not consulted here).
///
/// # Errors
///
/// [`AdmissionError::Conflicted`] after the last conflict; any other store error at once.
pub(crate) async fn persist_admission(
    store: &dyn Store,
    run: &Run,
    admission: &Admission,
    also: &(dyn Fn(&mut Run) + Send + Sync),
) -> Result<Run, AdmissionError> {
    let mut current = run.clone();
    for attempt in 1..=ADMISSION_CAS_ATTEMPTS {
        let mut next = current.clone();
        next.admission = Some(admission.clone());
        also(&mut next);
        match store.save_run(&next, current.version).await {
            Ok(version) => {
                next.version = version;
                return Ok(next);
            }
            Err(iterion_store::Error::Conflict { .. }) if attempt < ADMISSION_CAS_ATTEMPTS => {
                current = reload(store, &run.id).await?;
            }
            Err(iterion_store::Error::Conflict { .. }) => {
                return Err(AdmissionError::Conflicted {
                    attempts: ADMISSION_CAS_ATTEMPTS,
                });
            }
            Err(other) => return Err(other.into()),
        }
    }
    Err(AdmissionError::Conflicted {
        attempts: ADMISSION_CAS_ATTEMPTS,
    })
}

async fn reload(store: &dyn Store, id: &RunId) -> Result<Run, AdmissionError> {
    store.get_run(id).await?.ok_or_else(|| {
        AdmissionError::Store(iterion_store::Error::RunNotFound { run_id: id.clone() })
    })
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;

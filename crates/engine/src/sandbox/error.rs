//! A sandbox setup failure, classified (SANDBOX.md §16.4): what every setup step returns.

use iterion_sandbox::Error as SandboxError;

use iterion_vocab::FailureCode;

/// The `phase` of a setup failure that is not one of §16.1's bounded phases.
pub(crate) const PHASE_SANDBOX_SETUP: &str = "sandbox setup";

/// A setup failure, classified (SANDBOX.md §16.4): the code decides the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SetupError {
    pub code: FailureCode,
    pub message: String,
    pub phase: String,
}

impl SetupError {
    /// `SANDBOX_SETUP_FAILED` in phase `sandbox setup`.
    pub(crate) fn failed(message: String) -> SetupError {
        SetupError {
            code: FailureCode::SandboxSetupFailed,
            message,
            phase: PHASE_SANDBOX_SETUP.to_owned(),
        }
    }

    /// §16.4 rules 1–3 (the context is alive here; cancellation is the caller's): a phase
    /// timeout is `SANDBOX_SETUP_TIMEOUT` in that phase, a capacity error `SANDBOX_CAPACITY`,
    /// anything else the error's own code.
    pub(crate) fn classify(error: &SandboxError) -> SetupError {
        let root = match error {
            SandboxError::CleanupFailed { error, .. } => error.as_ref(),
            other => other.root(),
        };
        let (code, phase) = match root {
            SandboxError::PhaseTimeout { phase, .. } => {
                (FailureCode::SandboxSetupTimeout, phase.label().to_owned())
            }
            SandboxError::Capacity { .. } => {
                (FailureCode::SandboxCapacity, PHASE_SANDBOX_SETUP.to_owned())
            }
            other => (
                FailureCode::from_str_exact(other.code())
                    .unwrap_or(FailureCode::SandboxSetupFailed),
                PHASE_SANDBOX_SETUP.to_owned(),
            ),
        };
        let mut message = error.to_string();
        if let (SandboxError::PhaseTimeout { phase, .. }, Some(var)) = (root, root_phase_var(root))
        {
            message.push_str(&format!("; raise {var} if {} needs longer", phase.label()));
        }
        SetupError {
            code,
            message,
            phase,
        }
    }
}

fn root_phase_var(error: &SandboxError) -> Option<&'static str> {
    match error {
        SandboxError::PhaseTimeout { phase, .. } => phase.env_var(),
        _ => None,
    }
}

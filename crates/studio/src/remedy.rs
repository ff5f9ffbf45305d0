//! What to do about a failed run: one sentence per failure code, then how to pick it up again.

use iterion_vocab::FailureCode;

/// The remedy shown beside a failure code, for a run whose status is `status`.
pub(crate) fn remedy(code: Option<&str>, status: &str, run_id: &str) -> String {
    let what = match code.and_then(FailureCode::from_str_exact) {
        Some(FailureCode::WorkflowFailed) => {
            "The workflow took an edge into `fail`: read the failed node's output and logs."
        }
        Some(FailureCode::DeclaredFailure) => {
            "The workflow reached one of its own `fail` nodes: its code and message say why."
        }
        Some(FailureCode::DeclaredFailureResumable) => {
            "The workflow reached one of its own resumable `fail` nodes: do what its message asks, then resume — the node that routed there runs again."
        }
        Some(FailureCode::NoOutgoingEdge) => {
            "No edge of the last node matched its output: add an `else` edge or fix the condition."
        }
        Some(FailureCode::ExecutionFailed) => {
            "A node failed: its exit code, stderr and logs are on the node below."
        }
        Some(FailureCode::SchemaValidation) => {
            "A node's output did not match its schema: see the node's output and the schema."
        }
        Some(FailureCode::TemplateUnresolved) => {
            "A template named a value that does not exist: check the `{{…}}` names in the workflow."
        }
        Some(FailureCode::JoinFailed) => "A fan-out branch failed, so its join could not run.",
        Some(FailureCode::LoopCapInvalid) => {
            "A loop cap written as a template did not resolve to an integer from 1 to 100000: check the value it reads."
        }
        Some(FailureCode::BudgetExceeded) => {
            "A budget cap was hit: raise `budget.max_iterations` or `budget.max_duration`."
        }
        Some(FailureCode::CapabilityUnsupported) => {
            "The workflow asks for something this engine or driver cannot do here."
        }
        Some(FailureCode::SubbotDepthExceeded) => "Subbots nest deeper than allowed.",
        Some(FailureCode::SandboxDriverUnavailable) => {
            "No container runtime answered: start docker or podman (`iterion sandbox doctor` says which), or run with `--sandbox none` where that is acceptable."
        }
        Some(FailureCode::SandboxSetupTimeout) => {
            "The sandbox took too long to start: a slow pull or post_create; raise ITERION_SANDBOX_PULL_TIMEOUT or ITERION_SANDBOX_POST_CREATE_TIMEOUT."
        }
        Some(FailureCode::SandboxCapacity) => {
            "The container engine had no room: free resources, then resume."
        }
        Some(FailureCode::SandboxSetupFailed) => {
            "The sandbox could not be set up: the message says which step; `iterion sandbox doctor --strict` checks the host."
        }
        Some(FailureCode::SandboxAdoptionRefused) => {
            "A subbot child could not share its parent's sandbox: see the child's sandbox panel."
        }
        Some(FailureCode::LaunchFailed) => {
            "The run could not be launched: a variable, secret or model did not resolve."
        }
        Some(FailureCode::ScratchNotPortable) => {
            "The scratch banked by this run cannot move to this host."
        }
        Some(FailureCode::ResumeInvalid) => "The resume was refused: the message says why.",
        Some(FailureCode::Interrupted) => "The run's process stopped (SIGTERM, or it died).",
        Some(FailureCode::Cancelled) => "The run was cancelled.",
        None => "",
    };
    let next = match status {
        "failed_resumable" => format!("Resume it: `iterion resume {run_id}`."),
        "failed" => {
            format!("After fixing the cause, `iterion resume {run_id} --force` retries it.")
        }
        _ => String::new(),
    };
    match (what.is_empty(), next.is_empty()) {
        (true, _) => next,
        (false, true) => what.to_owned(),
        (false, false) => format!("{what} {next}"),
    }
}

//! The host "sandbox" of an unsandboxed run: the noop driver's run, so tool nodes keep one code
//! path (DSL.md §6.1, "Otherwise: a host process in the run workspace").

use std::path::Path;

use iterion_sandbox::{Driver, NoProgress, NoopDriver, RunInfo, SandboxRun, Spec};

/// A noop-driver run whose execs start in `workspace` with the iterion process's environment
/// (plus `ITERION_RUN_ID` / `ITERION_NODE_ID`, which the executor adds). It isolates nothing:
/// use it only when the run settled *unsandboxed* (opt-out or a degraded `auto`).
///
/// # Errors
///
/// The noop driver's own, which an empty spec never triggers.
pub async fn host_sandbox(
    run_id: &str,
    workspace: &Path,
) -> Result<Box<dyn SandboxRun>, iterion_sandbox::Error> {
    let prepared = NoopDriver.prepare(&Spec::default(), &NoProgress).await?;
    NoopDriver
        .start(prepared, RunInfo::new(run_id, "", workspace, workspace))
        .await
}

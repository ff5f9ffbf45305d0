//! A running sandbox ([`ActiveSandbox`]) and its teardown (L15–L16), which every outcome goes
//! through: the egress bridge stopped, the scratch banked, a copy-based workspace exported and
//! its run files drained, the container removed, the proxy shut down, an untrusted copy landed,
//! the per-run host dir removed.

use std::path::PathBuf;
use std::sync::Arc;

use iterion_sandbox::{RunLog, SandboxRun};

use crate::records::events::Event;
use crate::records::sink::EventSink;
use crate::sandbox::{ask_user, copy, egress, mounts, rundir, scratch};

/// What a run hands the children that adopt its sandbox besides the run itself (SANDBOX.md
/// §14's `SharedSandbox`; the run, its driver and the parent id travel in the executor).
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedSandbox {
    /// The container's workspace folder; `None` without a container.
    pub workspace_folder: Option<String>,
    /// The parent's scratch lives in the container (§14 rule 2).
    pub scratch_in_container: bool,
}

/// A running sandbox and what tears it down.
pub(crate) struct ActiveSandbox {
    pub run: Arc<dyn SandboxRun>,
    /// `$ITERION_ENGINE_BIN` in the container (§8.4): the bound binary, or the image's own on
    /// drivers without host binds. The claw runner is exec'd from it (§13.1).
    pub engine_bin: &'static str,
    pub run_dir: PathBuf,
    pub proxy: Option<Box<egress::EngineProxy>>,
    pub bridge: Option<egress::EgressBridge>,
    pub run_log: Arc<dyn RunLog>,
    /// The container-local scratch dir to bank at teardown (§8.3), and where to say so.
    pub scratch: Option<Box<(scratch::ScratchBank, Arc<dyn EventSink>)>>,
    /// A sandbox without host binds (kubernetes, §5.11): what is copied back at teardown.
    pub copy_back: Option<Box<CopyBack>>,
    /// The container's workspace folder (the spec's, after the mount plan).
    pub workspace_folder: Option<String>,
    /// An untrusted run's copy, landed back as a branch and a patch at teardown (issue 15).
    pub landing: Option<Box<copy::UntrustedLanding>>,
    /// The ask-user listener (seed step 18), when a delegate node may ask.
    pub ask_user: Option<Arc<ask_user::AskUserListener>>,
}

/// Where a sandbox without host binds is copied back to at teardown (SANDBOX.md §5.11), and
/// where a failure is reported.
pub(crate) struct CopyBack {
    /// The host workspace: the export's destination.
    pub workspace: PathBuf,
    /// The host run-files dir: the drain's destination.
    pub run_files: PathBuf,
    pub events: Arc<dyn EventSink>,
}

impl ActiveSandbox {
    /// What this sandbox hands the subbot children that adopt it (SANDBOX.md §14).
    pub(crate) fn shared(&self) -> SharedSandbox {
        SharedSandbox {
            workspace_folder: self.workspace_folder.clone(),
            // §14 rule 2: the run's scratch lives in the container.
            scratch_in_container: self.scratch.is_some(),
        }
    }

    /// L16: removes the container (bounded by the cleanup budget) and the per-run host dir.
    /// Errors are logged: teardown is best-effort, and the reaper collects what it leaves.
    pub(crate) async fn shutdown(self) {
        if let Some(bridge) = self.bridge {
            bridge.stop();
        }
        // L15: bank the container-local scratch before the container goes.
        if let Some(pair) = self.scratch {
            let (bank, events) = *pair;
            let banked = scratch::bank(self.run.as_ref(), &bank).await;
            events.emit(Event::SandboxScratchBanked(banked)).await;
        }
        // A copy-based sandbox: log its HEAD, export its workspace back, then drain its run
        // files (§5.11), before the pod goes. Each is bounded by the driver (30 s, 5 min, 2 min);
        // a failure is reported, not fatal.
        if let Some(copy_back) = self.copy_back {
            export_copy_based(
                self.run.as_ref(),
                &copy_back.workspace,
                self.run_log.as_ref(),
                copy_back.events.as_ref(),
            )
            .await;
            drain_run_files(
                self.run.as_ref(),
                &copy_back.run_files,
                self.run_log.as_ref(),
                copy_back.events.as_ref(),
            )
            .await;
        }
        match tokio::time::timeout(iterion_sandbox::CLEANUP_TIMEOUT, self.run.cleanup()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!("sandbox cleanup: {error}"),
            Err(_) => tracing::warn!(
                "sandbox cleanup did not finish within {:?}; the reaper will remove it",
                iterion_sandbox::CLEANUP_TIMEOUT
            ),
        }
        if let Some(proxy) = self.proxy {
            proxy.shutdown(self.run_log.as_ref()).await;
        }
        if let Some(listener) = self.ask_user {
            listener.shutdown().await;
        }
        // The container is gone: nothing writes the copy any more while it is read.
        if let Some(landing) = self.landing {
            landing.land(self.run_log.as_ref()).await;
        }
        rundir::remove(&self.run_dir).await;
    }
}

/// The teardown of a copy-based sandbox (SANDBOX.md §5.11): the workspace's HEAD to the run log,
/// then the workspace exported into the host `workspace`; a failed export is logged and emitted
/// as `sandbox_workspace_export_failed`.
async fn export_copy_based(
    run: &dyn SandboxRun,
    workspace: &std::path::Path,
    run_log: &dyn RunLog,
    events: &dyn EventSink,
) {
    if let Some(capturer) = run.workspace_head_capturer() {
        match capturer.capture_workspace_head().await {
            Ok(Some(head)) => run_log.line(
                iterion_sandbox::LogLevel::Info,
                &format!("sandbox: workspace HEAD {head}"),
            ),
            Ok(None) => {}
            Err(error) => run_log.line(
                iterion_sandbox::LogLevel::Warn,
                &format!("sandbox: capturing the workspace HEAD: {error}"),
            ),
        }
    }
    let Some(exporter) = run.workspace_exporter() else {
        return;
    };
    if let Err(error) = exporter.export_workspace(workspace).await {
        run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!("sandbox: exporting the workspace: {error}"),
        );
        events
            .emit(Event::SandboxWorkspaceExportFailed(
                crate::records::sandbox_events::SandboxWorkspaceExportFailed {
                    driver: run.driver().to_owned(),
                    error: error.to_string(),
                },
            ))
            .await;
    }
}

/// The run-files drain of a sandbox without host binds (SANDBOX.md §5.11): the sandbox's
/// [`mounts::ARTIFACT_FILES_TARGET`] into the host run-files dir, screened member by member by the
/// driver. What was drained goes to the run log; a declined member or a failure is
/// `sandbox_runfiles_drain_failed`, naming the declined members and whether the host dir kept an
/// earlier attempt's files (`stale`).
async fn drain_run_files(
    run: &dyn SandboxRun,
    run_files: &std::path::Path,
    run_log: &dyn RunLog,
    events: &dyn EventSink,
) {
    let Some(drainer) = run.run_files_drainer() else {
        return;
    };
    let report = drainer
        .drain_run_files(mounts::ARTIFACT_FILES_TARGET, run_files)
        .await;
    if report.found {
        run_log.line(
            iterion_sandbox::LogLevel::Info,
            &format!(
                "sandbox: drained {} run files ({} bytes) from {} into {}",
                report.files,
                report.bytes,
                mounts::ARTIFACT_FILES_TARGET,
                run_files.display()
            ),
        );
    }
    let Some(reason) = report.reason() else {
        return;
    };
    for member in &report.declined {
        run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!(
                "sandbox: run file {:?} not drained ({})",
                member.name,
                member.why.as_str()
            ),
        );
    }
    if let Some(error) = &report.error {
        run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!("sandbox: draining the run files: {}", error.message),
        );
    }
    events
        .emit(Event::SandboxRunfilesDrainFailed(
            crate::records::sandbox_events::SandboxRunfilesDrainFailed {
                reason: drain_failure(reason),
                declined: report.declined.iter().map(|m| m.name.clone()).collect(),
                stale: report.stale,
                error: report.error.map(|e| e.message),
            },
        ))
        .await;
}

/// The event's reason for a drain's.
fn drain_failure(
    reason: iterion_sandbox::DrainReason,
) -> crate::records::sandbox_events::DrainFailure {
    use crate::records::sandbox_events::DrainFailure;
    use iterion_sandbox::DrainReason;
    match reason {
        DrainReason::UnsafeMembers => DrainFailure::UnsafeMembers,
        DrainReason::ArchiveTooLarge => DrainFailure::ArchiveTooLarge,
        DrainReason::WriteFailed => DrainFailure::WriteFailed,
        DrainReason::ExecFailed => DrainFailure::ExecFailed,
    }
}

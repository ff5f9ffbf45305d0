//! Payloads of the sandbox events (SANDBOX.md §9.1). The executor emits none of these; the
//! launcher (`resolve_and_start_sandbox`, teardown, the proxy) builds them and sends them through
//! the same [`crate::EventSink`]. Keys and their optionality follow the table exactly; the
//! constructors fill the keys whose value the table fixes.

use iterion_agent::text::truncate_bytes;
use serde::{Deserialize, Serialize};

use iterion_vocab::FailureCode;

/// `sandbox_skipped`: three shapes share the type (degrade, refusal, pinned noop). Build it with
/// [`SandboxSkipped::degrade`], [`SandboxSkipped::refusal`] or [`SandboxSkipped::pinned_noop`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSkipped {
    /// Pinned noop only: `noop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// `auto` (degrade), `inline` (refusal), or the resolved mode (pinned noop).
    pub mode: String,
    /// The source label of the tier that chose the mode.
    pub source: String,
    /// The obstacle, e.g. `no container-runtime driver available (tried: docker: …)`.
    pub reason: String,
    /// Degrade only, always present there: the workflow declared file secrets, now dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_secrets_dropped: Option<bool>,
    /// Refusal only: `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<bool>,
    /// Refusal only: `SANDBOX_DRIVER_UNAVAILABLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<FailureCode>,
}

/// The reason of a pinned noop's `sandbox_skipped` (SANDBOX.md §3.5).
pub const PINNED_NOOP_REASON: &str =
    "operator opted into the noop driver; the run is NOT actually sandboxed";

impl SandboxSkipped {
    /// A degraded `auto` (`auto_degrade_payload`): `{mode: "auto", source, reason,
    /// file_secrets_dropped}`.
    pub fn degrade(source: &str, reason: &str, file_secrets_dropped: bool) -> Self {
        SandboxSkipped {
            driver: None,
            mode: "auto".to_owned(),
            source: source.to_owned(),
            reason: reason.to_owned(),
            file_secrets_dropped: Some(file_secrets_dropped),
            refused: None,
            error_code: None,
        }
    }

    /// A refused `inline`: `{mode: "inline", source, reason, refused: true, error_code:
    /// "SANDBOX_DRIVER_UNAVAILABLE"}`.
    pub fn refusal(source: &str, reason: &str) -> Self {
        SandboxSkipped {
            driver: None,
            mode: "inline".to_owned(),
            source: source.to_owned(),
            reason: reason.to_owned(),
            file_secrets_dropped: None,
            refused: Some(true),
            error_code: Some(FailureCode::SandboxDriverUnavailable),
        }
    }

    /// The pinned noop driver: `{driver: "noop", mode, source, reason}` with the reason of
    /// [`PINNED_NOOP_REASON`].
    pub fn pinned_noop(mode: &str, source: &str) -> Self {
        SandboxSkipped {
            driver: Some("noop".to_owned()),
            mode: mode.to_owned(),
            source: source.to_owned(),
            reason: PINNED_NOOP_REASON.to_owned(),
            file_secrets_dropped: None,
            refused: None,
            error_code: None,
        }
    }
}

/// `sandbox_started`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStarted {
    /// `docker`, `podman`, `kubernetes` or `noop`.
    pub driver: String,
    /// The resolved mode.
    pub mode: String,
    /// The mode's source label.
    pub source: String,
    /// The image run, after any build or fallback.
    pub image: String,
    /// The container id or pod name.
    pub sandbox_id: String,
    /// Whether a `post_create` ran.
    pub has_post_create: bool,
    /// `open`, `allowlist` or `denylist`.
    pub network_mode: String,
    /// The network policy's source label.
    pub network_source: String,
    /// Whether the egress proxy runs.
    pub proxy: bool,
    /// Whether TLS inspection is on.
    pub tls_inspection: bool,
    /// Whether egress is enforced (no route but the proxy); `null` when unknown. Always present.
    pub egress_enforced: Option<bool>,
    /// Whether transparent egress is on (issue 22): the sandbox's resolver is the egress
    /// bridge's DNS stub, and connections to the synthetic addresses it hands out go through
    /// the proxy, so clients that ignore the proxy variables are enforced (and served) too.
    #[serde(default)]
    pub transparent_egress: bool,
    /// The kubernetes scheduling policy summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<String>,
}

/// `sandbox_shared`: adopted, own declaration honoured, or forced resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxShared {
    /// Whether the child runs in the parent's sandbox.
    pub adopted: bool,
    /// Forced resume only: `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<bool>,
    /// The parent's driver (adopted, declined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The shared workspace (adopted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The parent run.
    pub parent_run: String,
    /// Adopted: whether the parent's sandbox is copy-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_based: Option<bool>,
    /// Adopted: whether files are written through to the parent's workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_written_through: Option<bool>,
    /// Adopted: whether the child declared file secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_secrets_declared: Option<bool>,
    /// Adopted: whether the child declared devbox tooling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devbox_declared: Option<bool>,
    /// Adopted: whether the ask-user channel is inherited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_user_inherited: Option<bool>,
    /// Adopted: always `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments_mounted: Option<bool>,
    /// Declined: the child's own sandbox fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<Vec<String>>,
    /// Declined or forced: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What an adopting child reports (the `adopted: true` shape of `sandbox_shared`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adoption {
    /// The parent's driver.
    pub driver: String,
    /// The shared workspace.
    pub workspace: String,
    /// The parent run.
    pub parent_run: String,
    /// Whether the parent's sandbox is copy-based.
    pub copy_based: bool,
    /// Whether files are written through.
    pub files_written_through: bool,
    /// Whether the child declared file secrets.
    pub file_secrets_declared: bool,
    /// Whether the child declared devbox tooling.
    pub devbox_declared: bool,
    /// Whether the ask-user channel is inherited.
    pub ask_user_inherited: bool,
}

impl SandboxShared {
    /// Adopted: `{adopted: true, driver, workspace, parent_run, copy_based,
    /// files_written_through, file_secrets_declared, devbox_declared, ask_user_inherited,
    /// attachments_mounted: false}`.
    pub fn adopted(a: Adoption) -> Self {
        SandboxShared {
            adopted: true,
            forced: None,
            driver: Some(a.driver),
            workspace: Some(a.workspace),
            parent_run: a.parent_run,
            copy_based: Some(a.copy_based),
            files_written_through: Some(a.files_written_through),
            file_secrets_declared: Some(a.file_secrets_declared),
            devbox_declared: Some(a.devbox_declared),
            ask_user_inherited: Some(a.ask_user_inherited),
            attachments_mounted: Some(false),
            declared: None,
            reason: None,
        }
    }

    /// Own declaration honoured: `{adopted: false, driver, parent_run, declared, reason}`.
    pub fn declined(driver: &str, parent_run: &str, declared: Vec<String>, reason: &str) -> Self {
        SandboxShared {
            driver: Some(driver.to_owned()),
            declared: Some(declared),
            reason: Some(reason.to_owned()),
            ..SandboxShared::bare(parent_run)
        }
    }

    /// Forced resume: `{adopted: false, forced: true, parent_run, reason}`.
    pub fn forced(parent_run: &str, reason: &str) -> Self {
        SandboxShared {
            forced: Some(true),
            reason: Some(reason.to_owned()),
            ..SandboxShared::bare(parent_run)
        }
    }

    fn bare(parent_run: &str) -> Self {
        SandboxShared {
            adopted: false,
            forced: None,
            driver: None,
            workspace: None,
            parent_run: parent_run.to_owned(),
            copy_based: None,
            files_written_through: None,
            file_secrets_declared: None,
            devbox_declared: None,
            ask_user_inherited: None,
            attachments_mounted: None,
            declared: None,
            reason: None,
        }
    }
}

/// A host_state candidate that was not mounted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedMount {
    /// The host path.
    pub path: String,
    /// Why it was skipped.
    pub reason: String,
}

/// `sandbox_host_state_mounted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxHostStateMounted {
    /// Whether host state is bound.
    pub enabled: bool,
    /// The host_state setting's source label.
    pub source: String,
    /// The workspace folder in the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_folder: Option<String>,
    /// The binds, as `host:container`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mounts: Option<Vec<String>>,
    /// Candidates not mounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Vec<SkippedMount>>,
    /// The scratch bind, as `host:container`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch: Option<String>,
}

/// `sandbox_host_binds_dropped`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxHostBindsDropped {
    /// The driver that cannot honour host binds.
    pub driver: String,
    /// The dropped targets.
    pub dropped: Vec<String>,
    /// Env keys withdrawn with them.
    pub withdrawn_env: Vec<String>,
    /// Whether the attachments dir was cleared.
    pub attachments_dir_cleared: bool,
}

/// `sandbox_limits_not_applied` (issue 18): the operator set resource limits the driver cannot
/// apply; the run goes on without them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxLimitsNotApplied {
    /// The driver.
    pub driver: String,
    /// The limits set and not applied: `memory`, `cpus`, `pids`.
    pub limits: Vec<String>,
    /// Why.
    pub reason: String,
}

/// `sandbox_attachments_copied`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxAttachmentsCopied {
    /// The directory in the sandbox.
    pub target: String,
    /// Files copied.
    pub files: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// The copy error, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What was copied, one entry an attachment: names, sizes, hashes, never contents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentRecord>,
}

/// One attachment a run was given (`iterion run --attach`), as its manifest and
/// `sandbox_attachments_copied` record it: never its content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentRecord {
    /// The declared name.
    pub name: String,
    /// The file name in `NAME/` (the source's, with anything but `[A-Za-z0-9._-]` replaced).
    pub file: String,
    /// Its size in bytes.
    pub size: u64,
    /// The hex SHA-256 of its bytes.
    pub sha256: String,
    /// The type sniffed from its first bytes.
    pub mime: String,
}

/// `sandbox_user_remap`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxUserRemap {
    /// The uid used.
    pub uid: u32,
    /// The gid used.
    pub gid: u32,
    /// Why.
    pub reason: String,
}

/// `sandbox_uid_mismatch_warning`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxUidMismatchWarning {
    /// The spec's user.
    pub spec_user: String,
    /// The host uid.
    pub host_uid: u32,
}

/// Where devbox tooling was provisioned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DevboxTarget {
    /// In the sandbox.
    Sandbox,
    /// On the host (a degraded run).
    Host,
}

/// `sandbox_devbox_provisioned`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxDevboxProvisioned {
    /// Sandbox or host.
    pub target: DevboxTarget,
    /// `repo`, `bot`.
    pub sources: Vec<String>,
    /// The config files read.
    pub configs: Vec<String>,
    /// Directories added to `PATH`.
    pub bin_dirs: Vec<String>,
    /// The resulting `PATH`.
    pub path: String,
    /// Sources skipped.
    pub skipped_sources: Vec<String>,
    /// Why, one per skipped source.
    pub skipped_reasons: Vec<String>,
    /// Host only: errors met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
    /// Whether the provisioning lock was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_kept: Option<bool>,
}

/// `sandbox_env_denied`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxEnvDenied {
    /// The refused keys, sorted.
    pub keys: Vec<String>,
    /// Where they came from.
    pub source: String,
    /// The run.
    pub run_id: String,
}

/// `sandbox_image_env_planted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxImageEnvPlanted {
    /// The image.
    pub image: String,
    /// The planted keys.
    pub keys: Vec<String>,
}

/// `sandbox_network_defaulted`: `{mode: "allowlist", preset: "iterion-default", source, run_id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxNetworkDefaulted {
    /// `allowlist`.
    pub mode: String,
    /// `iterion-default`.
    pub preset: String,
    /// The spec's source.
    pub source: String,
    /// The run.
    pub run_id: String,
}

impl SandboxNetworkDefaulted {
    /// The payload, with the fixed mode and preset.
    pub fn new(source: &str, run_id: &str) -> Self {
        SandboxNetworkDefaulted {
            mode: "allowlist".to_owned(),
            preset: "iterion-default".to_owned(),
            source: source.to_owned(),
            run_id: run_id.to_owned(),
        }
    }
}

/// `sandbox_claw_routed_via_runner`; [`Default`] holds the fixed texts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxClawRoutedViaRunner {
    /// The fixed reason.
    pub reason: String,
    /// The fixed list of v1 limitations.
    pub limitations_v1: Vec<String>,
}

impl Default for SandboxClawRoutedViaRunner {
    fn default() -> Self {
        SandboxClawRoutedViaRunner {
            reason: "claw routes execute inside the sandbox through iterion __claw-runner"
                .to_owned(),
            limitations_v1: vec![
                "refused tools fail the node before the runner starts".to_owned(),
                "launcher-placed tools execute on the host over tool_call".to_owned(),
                "interaction: async is refused (CAPABILITY_UNSUPPORTED)".to_owned(),
            ],
        }
    }
}

/// `sandbox_build_started`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxBuildStarted {
    /// The driver.
    pub driver: String,
    /// The Dockerfile.
    pub dockerfile: String,
    /// The build context.
    pub context: String,
    /// The build's network.
    pub network: String,
}

/// `sandbox_build_finished`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxBuildFinished {
    /// The driver.
    pub driver: String,
    /// The built tag.
    pub target: String,
    /// How long the build took.
    pub duration_ms: u64,
}

/// `sandbox_build_failed`: the error is clamped to 4096 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxBuildFailed {
    /// The driver.
    pub driver: String,
    /// The error, at most [`BUILD_ERROR_MAX_BYTES`].
    pub error: String,
}

/// The longest `sandbox_build_failed.error`.
pub const BUILD_ERROR_MAX_BYTES: usize = 4096;

impl SandboxBuildFailed {
    /// The payload, with `error` clamped to [`BUILD_ERROR_MAX_BYTES`] on a char boundary.
    pub fn new(driver: &str, error: &str) -> Self {
        SandboxBuildFailed {
            driver: driver.to_owned(),
            error: truncate_bytes(error, BUILD_ERROR_MAX_BYTES).to_owned(),
        }
    }
}

/// `sandbox_scratch_banked`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxScratchBanked {
    /// Whether the scratch was banked.
    pub banked: bool,
    /// Whether it was empty.
    pub empty: bool,
    /// Its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// `true` when the container could not be asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<bool>,
    /// Why it was not banked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `sandbox_scratch_restored`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxScratchRestored {
    /// Whether it was restored.
    pub restored: bool,
    /// Its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Whether the resume was forced.
    pub forced: bool,
    /// The bank predates the checkpoint being resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<bool>,
    /// Why it was not restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `sandbox_workspace_copied`: an untrusted run works on a copy of the workspace (issue 15).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxWorkspaceCopied {
    /// The host workspace that was copied (never bound).
    pub source: String,
    /// Regular files copied.
    pub files: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Special files (fifos, sockets, devices) left out.
    pub skipped: u64,
}

/// `sandbox_workspace_landed`: what an untrusted run's copy came back as — a branch in the host
/// repository and a patch file, made without running anything of the copy's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxWorkspaceLanded {
    /// Whether the run changed anything.
    pub changed: bool,
    /// The branch created (none without a repository, or when nothing changed).
    pub branch: Option<String>,
    /// The result's commit.
    pub commit: Option<String>,
    /// The commit the patch is against.
    pub base: Option<String>,
    /// The patch file.
    pub patch: Option<String>,
    /// Why the landing failed (the result is then lost; the run's status is unchanged).
    pub error: Option<String>,
}

/// `sandbox_workspace_export_failed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxWorkspaceExportFailed {
    /// The driver.
    pub driver: String,
    /// The error.
    pub error: String,
}

/// Why the run files could not be drained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainFailure {
    /// The exec reading them failed.
    ExecFailed,
    /// The archive was too large.
    ArchiveTooLarge,
    /// The archive held unsafe members.
    UnsafeMembers,
    /// Writing them on the host failed.
    WriteFailed,
}

/// `sandbox_runfiles_drain_failed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRunfilesDrainFailed {
    /// Why.
    pub reason: DrainFailure,
    /// Members declined.
    pub declined: Vec<String>,
    /// The host copy kept an earlier attempt's files, which may now be stale.
    pub stale: bool,
    /// The error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `network_blocked {host, reason, run_id}` (SANDBOX.md §6.8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkBlocked {
    /// The refused host.
    pub host: String,
    /// One of the reasons of SANDBOX.md §6.8 (`policy denial`, …).
    pub reason: String,
    /// The run.
    pub run_id: String,
}

//! The doctor's values (SANDBOX.md §11.2–§11.3, our decision 10): a check is a row
//! `{id, status, summary, remediation, duration_ms}`, a strict report is a versioned list of rows
//! with its counts, a basic report is the host's sandbox facts. Serialisable as the JSON the
//! doctor prints; rendering for humans is the CLI's.

use iterion_sandbox::Capabilities;
use serde::Serialize;

/// The strict report's `schema_version`.
pub const SCHEMA_VERSION: u32 = 1;

/// What `--target` asks the battery about (SANDBOX.md §11.1). The words (`local`, `docker`,
/// `podman`; `cloud`, `kubernetes`, `k8s`) are the CLI's to parse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Target {
    /// Follow the selected driver (the host's class when none is selected).
    #[default]
    Auto,
    /// docker/podman (`local`, `docker`, `podman`): the docker battery.
    Local,
    /// kubernetes (`cloud`, `kubernetes`, `k8s`): the kubernetes battery.
    Cloud,
}

/// Which battery runs: the host class a target names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HostClass {
    /// docker/podman.
    Local,
    /// kubernetes.
    Cloud,
}

impl HostClass {
    /// `local` or `cloud`.
    pub fn as_str(self) -> &'static str {
        match self {
            HostClass::Local => "local",
            HostClass::Cloud => "cloud",
        }
    }
}

/// A check's verdict. Declaration order is strictness: `max()` of a battery is its worst row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Nothing to fix.
    Pass,
    /// Worth knowing; never changes the exit code.
    Warn,
    /// The run would fail or be refused for this reason.
    Fail,
}

impl CheckStatus {
    /// `pass`, `warn` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "fail",
        }
    }
}

/// The strict battery's checks, in the order they run (SANDBOX.md §11.3). The wire id is
/// [`CheckId::as_str`]; the order of this enum is the order of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum CheckId {
    /// The spec resolves as `iterion run` resolves it; an error stops the battery.
    SpecResolution,
    /// The mode is active; otherwise the battery stops with a warning.
    SandboxConfigured,
    /// `driver_for_spec` gives a driver.
    DriverAvailable,
    /// `Spec::validate`.
    SpecValid,
    /// docker battery: `/version` answers.
    DockerDaemon,
    /// docker battery: the spec passes the mount, argument and env screening.
    SpecSafety,
    /// docker battery: the image is present, built, or known to its registry.
    ImageResolvable,
    /// docker battery: the engine binary can run in the image.
    EngineBinary,
    /// docker battery: the image holds what the run execs in it (bash, the binary's loader).
    ImageContents,
    /// kubernetes battery: `validate_spec`, with no user default.
    K8sSpecCompatible,
    /// kubernetes battery: the API server answers.
    K8sContext,
    /// kubernetes battery: the scheduling variables parse.
    K8sSchedulingPolicy,
    /// A named preset exists.
    NetworkPreset,
    /// The network rules compile.
    NetworkAllowlistSyntax,
    /// The driver can do what the spec asks.
    DriverCapabilities,
}

impl CheckId {
    /// The id on the wire (`spec-resolution`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckId::SpecResolution => "spec-resolution",
            CheckId::SandboxConfigured => "sandbox-configured",
            CheckId::DriverAvailable => "driver-available",
            CheckId::SpecValid => "spec-valid",
            CheckId::DockerDaemon => "docker-daemon",
            CheckId::SpecSafety => "spec-safety",
            CheckId::ImageResolvable => "image-resolvable",
            CheckId::EngineBinary => "engine-binary",
            CheckId::ImageContents => "image-contents",
            CheckId::K8sSpecCompatible => "k8s-spec-compatible",
            CheckId::K8sContext => "k8s-context",
            CheckId::K8sSchedulingPolicy => "k8s-scheduling-policy",
            CheckId::NetworkPreset => "network-preset",
            CheckId::NetworkAllowlistSyntax => "network-allowlist-syntax",
            CheckId::DriverCapabilities => "driver-capabilities",
        }
    }
}

impl From<CheckId> for &'static str {
    fn from(id: CheckId) -> &'static str {
        id.as_str()
    }
}

impl std::fmt::Display for CheckId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the battery (our decision 10). `remediation` is empty on a pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Which check.
    pub id: CheckId,
    /// Its verdict.
    pub status: CheckStatus,
    /// What was found, in one line.
    pub summary: String,
    /// What to do about it (`""` on a pass).
    pub remediation: String,
    /// How long the check took.
    pub duration_ms: u64,
}

impl Check {
    /// A pass.
    pub fn pass(id: CheckId, summary: impl Into<String>) -> Check {
        Check {
            id,
            status: CheckStatus::Pass,
            summary: summary.into(),
            remediation: String::new(),
            duration_ms: 0,
        }
    }

    /// A warning and what to do about it.
    pub fn warn(id: CheckId, summary: impl Into<String>, remediation: impl Into<String>) -> Check {
        Check {
            id,
            status: CheckStatus::Warn,
            summary: summary.into(),
            remediation: remediation.into(),
            duration_ms: 0,
        }
    }

    /// A failure and what to do about it.
    pub fn fail(id: CheckId, summary: impl Into<String>, remediation: impl Into<String>) -> Check {
        Check {
            id,
            status: CheckStatus::Fail,
            summary: summary.into(),
            remediation: remediation.into(),
            duration_ms: 0,
        }
    }

    /// The same row with `status` (a failure turned into a warning by a target this host does
    /// not serve).
    #[must_use]
    pub fn with_status(mut self, status: CheckStatus) -> Check {
        self.status = status;
        self
    }
}

/// How many rows ended in each status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Rows that passed.
    pub pass: usize,
    /// Rows that warned.
    pub warn: usize,
    /// Rows that failed.
    pub fail: usize,
}

impl Counts {
    /// Counts `checks`.
    pub fn of(checks: &[Check]) -> Counts {
        let mut counts = Counts::default();
        for check in checks {
            match check.status {
                CheckStatus::Pass => counts.pass += 1,
                CheckStatus::Warn => counts.warn += 1,
                CheckStatus::Fail => counts.fail += 1,
            }
        }
        counts
    }
}

/// `iterion sandbox doctor --strict --json` (SANDBOX.md §11.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StrictReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The host kind (`local`, `desktop`, `cloud`).
    pub host: String,
    /// The battery that ran: `local` (docker/podman) or `cloud` (kubernetes).
    pub target: HostClass,
    /// The selected driver, or `<none>`.
    pub driver: String,
    /// The resolved mode; `none` when no sandbox is active.
    pub mode: String,
    /// The tier that chose the mode, with auto's detail.
    pub source: String,
    /// The image the sandbox would run (`build: <dockerfile>` for a build), if any.
    pub image: Option<String>,
    /// The rows, in order; a check that does not apply is omitted.
    pub checks: Vec<Check>,
    /// How many rows ended in each status.
    pub counts: Counts,
}

impl StrictReport {
    /// Whether any row failed (exit 1; the pre-flight refuses the run).
    pub fn has_failures(&self) -> bool {
        self.counts.fail > 0
    }
}

/// `iterion sandbox doctor [--json]` without `--strict` (SANDBOX.md §11.2). Optional keys are
/// omitted when they do not apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BasicReport {
    /// The host kind.
    pub host: String,
    /// `std::env::consts::OS`.
    pub os: String,
    /// `std::env::consts::ARCH`.
    pub arch: String,
    /// `docker`, `podman` or `<none>`.
    pub container_runtime: String,
    /// The engine's version, when one answered.
    pub engine_version: Option<String>,
    /// The engine's API version, when one answered.
    pub api_version: Option<String>,
    /// The installed global default (`auto` or `none`).
    pub sandbox_default: String,
    /// `ITERION_SANDBOX_DEFAULT` or `built-in sandbox-by-default`.
    pub sandbox_default_source: String,
    /// What the factory selects (`noop` when no engine answers).
    pub selected_driver: String,
    /// Every driver that constructs on this host, sorted.
    pub available_drivers: Vec<String>,
    /// The selected driver's capabilities.
    pub capabilities: Capabilities,
    /// The kubernetes scheduling policy, or `INVALID: …` (cloud hosts only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<String>,
    /// The engine binary a sandbox gets.
    pub engine_binary: Option<String>,
    /// `static`, `dynamic` or `unknown`.
    pub engine_binary_link: String,
    /// auto's default image.
    pub default_image: String,
    /// Whether it is in the engine's local cache; `null` when no engine answered.
    pub default_image_present: Option<bool>,
    /// Why no container driver is available, when none is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_error: Option<String>,
    /// Whether the embedded namespace driver can start here (issue 18): the user-namespace
    /// sysctls, AppArmor's restriction, `max_user_namespaces`, a trial `unshare`, and the remedy
    /// when it cannot. `null` on a cloud host (the driver is not tried there) or when the probe
    /// did not finish in the budget.
    pub user_namespaces: Option<iterion_sandbox_namespace::UsernsReport>,
    /// Facts for people (libc, degrade or park), in order; not part of the JSON.
    #[serde(skip)]
    pub notes: Vec<String>,
}

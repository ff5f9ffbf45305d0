//! iterion-sandbox: what a run's sandbox is and how a container engine provides one.
//!
//! This crate owns the sandbox vocabulary of SANDBOX.md — `Mode`, `Spec`, the precedence
//! functions, the host-kind factory, mount screening and the drivers (docker/podman, kubernetes,
//! noop). It reports *capability* (`DriverUnavailable`) and never *policy*: whether an absent
//! runtime degrades or refuses is the engine's decision (ARCHITECTURE.md §2, invariant I1).
//!
//! It deliberately depends on none of the other iterion crates: the engine translates the
//! workflow's IR into a `Spec`, so this crate can be tested and benchmarked alone.
//!
//! How it is built, and why:
//!
//! - **A pure core inside a thin I/O shell** (STYLE.md §5.3). Precedence ([`pick_mode`],
//!   [`pick_host_state`], [`resolve_network_policy`], the default image), host detection
//!   ([`detect_host`]), [`Spec::validate`], the mount grammar and the sensitive-path judgement take
//!   their inputs as values; the `*_from_env` readers and [`ScreenContext::new`] fetch them.
//! - **Probing is a seam.** The [`Factory`] constructs drivers through [`DriverConstructor`]s in
//!   a [`Registry`], so selection is tested with fakes and the engines are probed only there.
//! - **One error type** ([`Error`]) whose [`Error::code`] is the stable failure code of
//!   SANDBOX.md §9.2, chosen by an exhaustive match.
//! - **Secrets stay out of text.** [`SecretBytes`] has no `Display` or `Serialize` and a
//!   redacting `Debug`; errors name keys and mounts, never values; proxy URLs print as `***`.
//!
//! - **The repository's devcontainer is untrusted input** ([`resolve_sandbox_spec_with_fallback`]):
//!   read, expanded with allow-listed host variables only, screened, fused with the workflow
//!   block; the facts the engine reports (denied env keys, network defaulted, the source-label
//!   detail) come back as values.
//!
//! What it does not do: decide degrade versus refuse, emit events, write the run record, or start
//! the egress proxy. Those belong to the engine and the proxy crate, which call in here.
#![deny(missing_docs)]

mod capabilities;
mod devcontainer;
mod driver;
mod elf;
mod env;
mod error;
mod factory;
mod host;
mod kubernetes;
mod labels;
mod mode;
mod mounts;
mod noop;
mod noop_procs;
mod phase;
mod post_create;
mod precedence;
mod reap;
mod rules;
mod runfiles;
mod spec;
mod text;
mod timeout;
mod vars;

pub use capabilities::Capabilities;
pub use devcontainer::{
    ALLOWED_ENV_EXCEPTIONS, AUTO_WITHOUT_REPOSITORY_ROOT, AutoInputs, CommandForm, DENIED_ENV,
    DEVBOX_BASE_PATH, DEVBOX_BOT_STAGE_DIR, DEVBOX_BUNDLE_DIR, DEVBOX_INLINE_LIMIT_BYTES,
    DEVCONTAINER_CANDIDATES, DevboxConfig, DevboxInputs, DevboxPlan, DevboxRead, DevboxSource,
    Devcontainer, DevcontainerBuild, DevcontainerText, EnvDenyRule, EnvMatch, EnvOverlay,
    FusedSpec, ITERION_REPO_DEVBOX, ITERION_SANDBOX_ENV_FILE, LOCAL_ENV_ALLOW_LIST,
    LifecycleCommand, LocalVars, MAX_DEVCONTAINER_BYTES, NO_DEVCONTAINER_NO_DEFAULT_IMAGE,
    RepoDevbox, RepoSpec, ResolvedSpec, apply_devbox_plan, default_network, denied_env_rule,
    expand_local_vars, expand_sandbox_spec, fuse_devcontainer_spec, is_allowed_local_env,
    is_denied_env_key, merge_environment_overlay, parse_devcontainer, parse_env_file,
    parse_env_pairs, plan_devbox, posix_quote, read_devbox_config, read_from_repo,
    resolve_repo_devbox, resolve_sandbox_spec_with_fallback, screen_run_args, to_sandbox_spec,
};
pub use driver::{
    AdvertisedPort, Builder, Driver, DriverConstructor, ExecInput, ExecOpts, ExecOutput,
    ExecResult, ImageConfig, LogLevel, NoProgress, NullRunLog, PreparedSpec, Progress,
    ProxyAddresses, ProxyAttachment, ProxyBind, ProxyConfigurer, PullProgress, RunFilesDrainer,
    RunInfo, RunLog, SandboxRun, SecretFileRefresher, WorkspaceExporter, WorkspaceFileRefresher,
    WorkspaceHeadCapturer, proxy_addresses_for_driver, redact_proxy_url,
};
pub use elf::{LinkKind, link_kind, link_kind_of};
pub use env::{
    default_image_from_env, global_sandbox_default_from_env, host_state_from_env,
    sandbox_override_from_env,
};
pub use error::{
    DRIVER_UNAVAILABLE_HINT, DevcontainerError, DriverAttempt, EngineError, Error, Result,
    SANDBOX_CAPACITY, SANDBOX_DRIVER_UNAVAILABLE, SANDBOX_SETUP_FAILED, SANDBOX_SETUP_TIMEOUT,
};
pub use factory::{
    Factory, FactoryOptions, Registry, run_will_be_sandboxed, select_sandbox_driver,
};
pub use host::{DriverKind, HostKind, HostSignals, detect_host, preference_order};
pub use kubernetes::{
    DEFAULT_GID, DEFAULT_USER, NumericUser, apply_engine_user_default, parse_numeric_user,
    validate_spec as kubernetes_validate_spec,
};
pub use labels::{
    LABEL_IMAGE, LABEL_MANAGED, LABEL_PURPOSE, LABEL_RUN_ID, LABEL_RUN_NAME, LABEL_STORE,
    ListedResource, ManagedResource, build_image_tag, container_name, filter_managed,
    managed_filters, managed_labels, nix_volume_name, run_name_label,
};
pub use mode::{HostState, Inherit, Mode, NetworkMode, SandboxFlag, Trust};
pub use mounts::{
    BindPropagation, CREDENTIAL_COMPONENTS, ENGINE_SOCKET_NAMES, MountRequest, MountScope,
    MountSpec, RESERVED_TARGET_ROOT, RESERVED_VOLUME_PREFIX, SENSITIVE_SYSTEM_ENTRIES,
    SHELL_STARTUP_FILES, STAGE_DIR, SYSTEM_TREES, ScreenContext, ScreenedMount, Stager,
    is_reserved_volume, mount_is_host_bind, parse_mount, release_staged, remove_run_dir,
    validate_contains_workspace, validate_engine_mount, validate_env_pair, validate_mount,
    validate_plain_arg, validate_spec_mounts,
};
pub use noop::{NoopConstructor, NoopDriver, noop_file_secret_gate};
pub use noop_procs::{HOST_RUN_MARKER, ProcessGroupGuard};
pub use phase::{
    CLEANUP_TIMEOUT, DurationError, Phase, PhaseBudget, format_duration, parse_go_duration,
    phase_timeout_from_env, resolve_phase_timeout,
};
pub use post_create::{OUTPUT_TAIL_BYTES, POST_CREATE_LOG_PREFIX, run_post_create};
pub use precedence::{
    DEFAULT_IMAGE_FALLBACK, DEFAULT_IMAGE_REPOSITORY, DefaultImage, DefaultImageSource,
    HostStateSource, ImageVariant, ModeInputs, NETWORK_NO_MODE_WARNING, NetworkOrigin,
    NetworkPolicy, NetworkSource, NotSandboxedCause, SANDBOX_DEFAULT_SOURCE, SandboxVerdict,
    Sandboxing, Source, SpecResolution, built_in_image, cli_tier, image_tag, pick_host_state,
    pick_mode, resolve_default_sandbox_image_with_fallback, resolve_global_sandbox_default,
    resolve_host_state_setting, resolve_network_policy, resolve_sandbox_override,
    verdict_before_driver, workflow_sandbox_active,
};
pub use reap::{ReapError, ReapJudge, ReapReport, Reaper, ReaperConstructor, ResourceKind};
pub use rules::{
    ArgRule, EnvRule, KubernetesRule, MountKind, MountRule, Protected, RunArgRule, Sensitivity,
};
pub use runfiles::{
    Decline, DeclinedMember, DrainError, DrainReason, DrainReport, MemberKind,
    RUN_FILES_DRAIN_CAP_BYTES, RUN_FILES_DRAIN_TIMEOUT, Screened, member_display_name,
    screen_member, unpack_screened,
};
pub use spec::{
    Build, DEFAULT_PRESET, EngineMount, EngineMountKind, KNOWN_PRESETS, Network, SecretBytes,
    SecretFileMount, Spec,
};
pub use text::{escape_controls, is_clean_absolute};
pub use timeout::run_with_phase_timeout;
pub use vars::{
    ITERION_DESKTOP, ITERION_MODE, ITERION_SANDBOX_BUILD_TIMEOUT, ITERION_SANDBOX_DEFAULT,
    ITERION_SANDBOX_DEFAULT_IMAGE, ITERION_SANDBOX_HOST_STATE, ITERION_SANDBOX_K8S_APPLY_TIMEOUT,
    ITERION_SANDBOX_K8S_POD_READY_TIMEOUT, ITERION_SANDBOX_OVERRIDE, ITERION_SANDBOX_PERSIST_NIX,
    ITERION_SANDBOX_POST_CREATE_TIMEOUT, ITERION_SANDBOX_PULL_TIMEOUT,
    ITERION_SANDBOX_WORKSPACE_COPY_TIMEOUT, KUBERNETES_SERVICE_HOST, is_falsy, is_truthy,
    parse_switch, var as env_var,
};

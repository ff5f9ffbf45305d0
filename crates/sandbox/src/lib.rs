//! iterion-sandbox: what a run's sandbox is, and the contract a driver fulfils to provide one.
//!
//! This is the sandbox core. It owns the vocabulary of SANDBOX.md — `Mode`, `Spec`, the
//! precedence functions, host detection, the [`Driver`] traits and the host-kind [`Factory`],
//! mount screening and staging, the devcontainer fusion, labels, phases, `post_create`, the
//! run-files screen, the kubernetes spec policy ([`kubernetes_validate_spec`]), the [`Reaper`]
//! capability, and the noop driver. The container drivers live in their own crates and depend on
//! this one, never the reverse: `iterion-sandbox-docker` (docker and podman, bollard) and
//! `iterion-sandbox-kubernetes` (kube-rs); the engine registers them ([`Registry`]). This crate
//! names no container-engine client.
//!
//! It reports *capability* (`DriverUnavailable`) and never *policy*: whether an absent runtime
//! degrades or refuses is the engine's decision (ARCHITECTURE.md §2, invariant I1). Of the other
//! iterion crates it depends only on `iterion-repofile`: the engine translates the workflow's IR
//! into a `Spec`, so this crate can be tested alone.
//!
//! How it is built, and why:
//!
//! - **A pure core inside a thin I/O shell** (STYLE.md §5.3). Precedence ([`pick_mode`],
//!   [`pick_host_state`], [`resolve_network_policy`], the default image), host detection
//!   ([`detect_host`]), [`Spec::validate`], the mount grammar and the sensitive-path judgement take
//!   their inputs as values; the `*_from_env` readers take them from the caller's
//!   [`Environment`](iterion_vocab::Environment) (the crate never reads the process's) and
//!   [`ScreenContext::new`] fetches the rest.
//! - **Probing is a seam.** The [`Factory`] constructs drivers through [`DriverConstructor`]s in
//!   a [`Registry`], so selection is tested with fakes and the engines are probed only there.
//! - **One error type** ([`Error`]) whose [`Error::code`] is the stable failure code of
//!   SANDBOX.md §9.2, chosen by an exhaustive match.
//! - **Secrets stay out of text.** [`SecretBytes`] has no `Display` or `Serialize` and a
//!   redacting `Debug`; errors name keys and mounts, never values; proxy URLs print as `***`.
//! - **The repository's devcontainer is untrusted input** ([`resolve_sandbox_spec_with_fallback`]):
//!   read, expanded with allow-listed host variables only, screened, fused with the workflow
//!   block; the facts the engine reports (denied env keys, network defaulted, the source-label
//!   detail) come back as values.
//!
//! What a container driver takes from the core rather than re-deciding:
//!
//! - `prepare` starts with [`Spec::validate`] and bounds slow I/O with
//!   [`run_with_phase_timeout`] and [`phase_timeout_from_env`];
//! - `start` checks [`PreparedSpec::check_driver`], screens the spec with
//!   [`validate_spec_mounts`] over a [`ScreenContext`] and binds each
//!   [`ScreenedMount::host_source`] (the canonical path, never the written one), pinned by a
//!   [`Stager`]; names and labels come from [`container_name`] and [`managed_labels`];
//!   `post_create` goes through [`run_post_create`];
//! - a `Builder` checks its context and Dockerfile with [`validate_contains_workspace`] and tags
//!   with [`build_image_tag`];
//! - its [`Reaper`] lists through [`filter_managed`] with [`managed_filters`] and asks the
//!   engine's [`ReapJudge`] about each run;
//! - "engine not reachable" is [`Error::Unavailable`] from the constructor, never a policy
//!   decision.
//!
//! What it does not do: decide degrade versus refuse, emit events, write the run record, or start
//! the egress proxy. Those belong to the engine and the proxy crate, which call in here.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod capabilities;
mod devcontainer;
mod driver;
mod elf;
mod env;
mod error;
pub mod exec_agent;
mod factory;
mod host;
mod kubernetes;
mod labels;
mod limits;
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
    AutoInputs, CommandForm, DEVBOX_BASE_PATH, DEVBOX_BOT_STAGE_DIR, DEVBOX_BUNDLE_DIR,
    DevboxConfig, DevboxInputs, DevboxPlan, DevboxRead, DevboxSource, Devcontainer,
    DevcontainerBuild, DevcontainerText, EnvOverlay, ITERION_REPO_DEVBOX, ITERION_SANDBOX_ENV_FILE,
    LifecycleCommand, LocalVars, NO_DEVCONTAINER_NO_DEFAULT_IMAGE, RepoDevbox, ResolvedSpec,
    apply_devbox_plan, expand_local_vars, parse_devcontainer, parse_env_file, parse_env_pairs,
    plan_devbox, read_devbox_config, read_from_repo, resolve_repo_devbox,
    resolve_sandbox_spec_with_fallback,
};
pub use driver::{
    AdvertisedPort, Builder, Driver, DriverConstructor, ExecInput, ExecOpts, ExecOutput,
    ExecResult, ImageConfig, LogLevel, NoProgress, NullRunLog, PROXY_CA_TARGET, PreparedSpec,
    Progress, ProxyAddresses, ProxyAttachment, ProxyBind, ProxyConfigurer, PullProgress,
    RESOLV_CONF, RESOLV_CONF_RUN_DIR_FILE, RESOLV_CONF_TARGET, RunFilesDrainer, RunInfo, RunLog,
    SandboxRun, SecretFileRefresher, UNPRIVILEGED_PORT_SYSCTL, WorkspaceExporter,
    WorkspaceFileRefresher, WorkspaceHeadCapturer, plant_proxy_env, plant_proxy_env_with,
    proxy_addresses_for_driver, redact_proxy_url,
};
pub use elf::{LinkKind, interpreter, link_kind, link_kind_of};
pub use env::{
    default_image_from_env, global_sandbox_default_from_env, host_state_from_env,
    parse_sandbox_driver, sandbox_driver_from_env, sandbox_override_from_env,
};
pub use error::{DevcontainerError, DriverAttempt, EngineError, Error, Result};
pub use factory::{
    Factory, FactoryOptions, Registry, run_will_be_sandboxed, select_sandbox_driver,
};
pub use host::{DriverKind, HostKind, HostSignals, detect_host};
pub use kubernetes::{
    DEFAULT_USER, NumericUser, apply_engine_user_default, parse_numeric_user,
    validate_spec as kubernetes_validate_spec,
};
pub use labels::{
    LABEL_IMAGE, LABEL_MANAGED, LABEL_PURPOSE, LABEL_RUN_ID, LABEL_STORE, ListedResource,
    ManagedResource, build_image_tag, container_name, filter_managed, managed_filters,
    managed_labels, nix_volume_name,
};
pub use limits::{
    ITERION_SANDBOX_CPUS, ITERION_SANDBOX_MEMORY, ITERION_SANDBOX_PIDS, Limits, MIN_MEMORY_BYTES,
    MIN_NANO_CPUS, UNTRUSTED_PIDS_LIMIT,
};
pub use mode::{HostState, Inherit, Mode, NetworkMode, SandboxFlag, Trust};
pub use mounts::{
    BindPropagation, MountRequest, MountScope, MountSpec, STAGE_DIR, ScreenContext, ScreenedMount,
    Stager, mount_is_host_bind, parse_mount, remove_run_dir, validate_contains_workspace,
    validate_mount, validate_plain_arg, validate_spec_mounts,
};
pub use noop::{NoopConstructor, NoopDriver};
pub use noop_procs::ProcessGroupGuard;
pub use phase::{
    CLEANUP_TIMEOUT, DurationError, Phase, format_duration, parse_go_duration,
    phase_timeout_from_env,
};
pub use post_create::{OUTPUT_TAIL_BYTES, run_post_create};
pub use precedence::{
    DefaultImage, DefaultImageSource, HostStateSource, ImageVariant, ModeInputs, NetworkOrigin,
    NetworkPolicy, NetworkSource, NotSandboxedCause, SandboxVerdict, Sandboxing, Source,
    SpecResolution, built_in_image, pick_host_state, pick_mode, resolve_network_policy,
    workflow_sandbox_active,
};
pub use reap::{ReapError, ReapJudge, ReapReport, Reaper, ReaperConstructor, ResourceKind};
pub use rules::{
    ArgRule, EnvRule, KubernetesRule, MountKind, MountRule, Protected, RunArgRule, Sensitivity,
};
pub use runfiles::{
    Decline, DeclinedMember, DrainError, DrainReason, DrainReport, RUN_FILES_DRAIN_TIMEOUT,
    unpack_screened,
};
pub use spec::{
    Build, DEFAULT_PRESET, EngineMount, EngineMountKind, Network, SecretBytes, SecretFileMount,
    Spec,
};
pub use text::is_clean_absolute;
pub use timeout::run_with_phase_timeout;
pub use vars::{
    ITERION_SANDBOX_DEFAULT, ITERION_SANDBOX_DRIVER, ITERION_SANDBOX_PERSIST_NIX,
    ITERION_SANDBOX_WARM, KUBERNETES_SERVICE_HOST, is_falsy, is_truthy, parse_switch,
};

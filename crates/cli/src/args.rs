//! The argument grammar (ARCHITECTURE.md §4): every clap type and value parser of every command.
//! Parsing only; the commands (`commands/`) act, and no command defines an argument type.
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod listen;

pub use listen::{ListenSpec, parse_listen};

/// iterion runs declarative AI-agent workflows (`.iter` files), each run inside an isolated
/// sandbox.
#[derive(Debug, Parser)]
#[command(name = "iterion", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a workflow file and print its diagnostics (exit 0 clean or warnings only, 1 errors,
    /// 2 unreadable file).
    Validate(ValidateArgs),
    /// Run a workflow (exit 0 finished; 1 failed, failed_resumable or cancelled; 2 bad input or
    /// a launch refused before the run exists). Progress goes to stderr.
    Run(RunArgs),
    /// Resume a failed_resumable run from its last checkpoint (admission and sandbox again).
    Resume(ResumeArgs),
    /// List runs, or show one: status, failure code, admission.
    Inspect(InspectArgs),
    /// Print a run's events.
    Events(EventsArgs),
    /// Sandbox diagnostics: `iterion sandbox doctor [--strict] [--json] …`.
    Sandbox(SandboxArgs),
    /// Cloud worker: takes queued runs (`run --submit`) from the store's queue, executes them
    /// under a lease, redelivers infrastructure failures, reaps orphaned sandboxes. Runs until
    /// SIGTERM.
    Runner,
    /// In-container egress bridge (SANDBOX.md §4.6); the engine runs it, people don't.
    #[command(name = "__egress-bridge", hide = true)]
    EgressBridge(EgressBridgeArgs),
    /// In-pod egress enforcement probe (SANDBOX.md §5.7): exit 0 if a direct TCP connection to
    /// HOST:PORT succeeds (egress NOT enforced), 1 if it is blocked; the driver runs it.
    #[command(name = "__egress-probe", hide = true)]
    EgressProbe {
        /// `host:port` to dial directly (e.g. `1.1.1.1:443`).
        target: String,
    },
    /// In-container agent runner (SANDBOX.md §13): NDJSON envelopes on stdin/stdout; the engine
    /// runs it, people don't.
    #[command(name = "__claw-runner", hide = true)]
    ClawRunner,
    /// Run viewer: a web page of this store's runs (graph, sandbox, logs, transcripts, live),
    /// with a JSON API under /api/ (docs/studio.md). Runs until Ctrl-C.
    Studio(StudioArgs),
}

/// `iterion validate FILE [--json]`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The `.iter` file.
    pub file: PathBuf,
    /// Print one JSON document `{file, errors, warnings, diagnostics}` instead of the human form.
    #[arg(long)]
    pub json: bool,
}

/// `auto` or `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AutoOrNone {
    /// Sandbox (auto: the default image; degrades visibly without a container runtime).
    Auto,
    /// No sandbox.
    None,
}

/// `trusted` or `untrusted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TrustArg {
    /// The default.
    Trusted,
    /// Refused unless the run gets a per-run container.
    Untrusted,
}

/// The sandbox flags `iterion run` and `iterion sandbox doctor` share (SANDBOX.md §11.1: the
/// doctor's mirror the run's, so that it resolves the same spec).
#[derive(Debug, Args)]
pub struct SandboxFlags {
    /// Override the sandbox mode: `none` runs on the host whatever the workflow says; `auto`
    /// sandboxes unless the workflow names its own image or build.
    #[arg(long, value_enum)]
    pub sandbox: Option<AutoOrNone>,
    /// Whether host caches and tool state are bound into the sandbox.
    #[arg(long = "sandbox-host-state", value_enum)]
    pub sandbox_host_state: Option<AutoOrNone>,
    /// The image `sandbox: auto` uses (instead of ITERION_SANDBOX_DEFAULT_IMAGE or the built-in
    /// default).
    #[arg(long = "sandbox-default-image", value_name = "REF")]
    pub sandbox_default_image: Option<String>,
}

/// `iterion run FILE …`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The `.iter` file.
    pub file: PathBuf,
    /// A workflow var, typed as declared (repeatable): `--var name=ada`.
    #[arg(long = "var", value_name = "K=V")]
    pub vars: Vec<String>,
    /// The sandbox flags (`iterion sandbox doctor` takes the same).
    #[command(flatten)]
    pub sandbox: SandboxFlags,
    /// An operator variable for the sandbox (repeatable): `--sandbox-env K=V`. It overrides the
    /// file named by ITERION_SANDBOX_ENV_FILE key by key, fills gaps and overrides what the
    /// repository's devcontainer set, but never a key the workflow wrote.
    #[arg(long = "sandbox-env", value_name = "K=V")]
    pub sandbox_env: Vec<String>,
    /// The run's trust; an untrusted run is refused unless it gets a container.
    #[arg(long, value_enum, default_value = "trusted")]
    pub trust: TrustArg,
    /// Print one JSON document `{run_id, status, failure_code?, message?, output?}` on stdout.
    #[arg(long)]
    pub json: bool,
    /// Queue the run for `iterion runner` instead of running it here: prints the run id and
    /// exits 0 once the run is `queued`.
    #[arg(long)]
    pub submit: bool,
}

/// `iterion resume RUN_ID [--force]`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run to resume.
    pub run_id: String,
    /// Resume even though the workflow file changed since the run started.
    #[arg(long)]
    pub force: bool,
    /// The answer to the question a paused run waits on (`ask_user`).
    #[arg(long, value_name = "TEXT")]
    pub answer: Option<String>,
    /// Print one JSON document on stdout, as `run --json`.
    #[arg(long)]
    pub json: bool,
}

/// `iterion inspect [RUN_ID] [--json]`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The run; without it, the newest runs are listed.
    pub run_id: Option<String>,
    /// Print JSON (the run record, or an array of them).
    #[arg(long)]
    pub json: bool,
}

/// `iterion events RUN_ID [--json]`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The run.
    pub run_id: String,
    /// One JSON object a line: `{run_id, seq, ts, type, data}`.
    #[arg(long)]
    pub json: bool,
}

/// `iterion studio [--listen ADDR] [--json]`.
#[derive(Debug, Args)]
pub struct StudioArgs {
    /// Where to listen. Loopback serves reads without a token; any other address requires the
    /// token for every request (ITERION_STUDIO_TOKEN, or one generated and printed once). Port 0
    /// picks a free port.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: std::net::SocketAddr,
    /// Print the startup line as one JSON object `{url, listen, token_required, token}` (`token`
    /// only when it was generated off loopback).
    #[arg(long)]
    pub json: bool,
}

/// `iterion __egress-bridge --listen ADDR=SOCKET…` (hidden; SANDBOX.md §4.6).
#[derive(Debug, Args)]
pub struct EgressBridgeArgs {
    /// A loopback TCP listener and the Unix socket its connections are spliced to (repeatable),
    /// e.g. `127.0.0.1:3128=/run/iterion/net/proxy.sock`.
    #[arg(long = "listen", value_name = "ADDR=SOCKET", required = true,
          value_parser = parse_listen)]
    pub listen: Vec<ListenSpec>,
}

/// `iterion sandbox …`.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: SandboxCommand,
}

/// The `sandbox` subcommands.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Report what this host offers a sandbox; with --strict, check the exact spec a workflow
    /// would run with (exit 1 when a check fails, 2 on bad input).
    Doctor(DoctorArgs),
}

/// `--target`: which battery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TargetArg {
    /// Follow the selected driver.
    #[default]
    Auto,
    /// docker/podman.
    #[value(alias = "docker", alias = "podman")]
    Local,
    /// kubernetes.
    #[value(alias = "kubernetes", alias = "k8s")]
    Cloud,
}

/// `iterion sandbox doctor …`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Run the check battery on the spec FILE (or a workflow without sandbox: block) resolves to.
    #[arg(long)]
    pub strict: bool,
    /// Print one JSON document instead of the human form.
    #[arg(long)]
    pub json: bool,
    /// The battery: auto follows the selected driver; local|docker|podman, cloud|kubernetes|k8s.
    #[arg(long, value_enum, default_value = "auto")]
    pub target: TargetArg,
    /// As `iterion run`'s.
    #[command(flatten)]
    pub flags: SandboxFlags,
    /// The workflow; without it, the spec of a workflow with no sandbox: block in this
    /// directory's repository.
    pub file: Option<std::path::PathBuf>,
}

//! The argument grammar (ARCHITECTURE.md §4): every clap type and value parser of every command.
//! Parsing only; the commands (`commands/`) act, and no command defines an argument type.
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod listen;

pub use listen::{ListenSpec, parse_listen};

/// The exit codes, as `--help` shows them (README's table says the same).
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success (a run finished; a check passed)
  1  failed: a run ended failed, failed_resumable or cancelled; a refused resume or rm; a failed
     check; a RUN that matches no run, or several
  2  bad input: an unreadable file, a bad flag, variable or config file, a workflow that does not
     compile, a launch refused before the run exists, text that cannot name a run
  3  paused: the run waits for an answer (`iterion resume RUN --answer TEXT`)

A RUN is a run id, the start of one (any unambiguous prefix), or `last` (the newest run).";

/// iterion runs declarative AI-agent workflows (`.iter` files), each run inside an isolated
/// sandbox.
#[derive(Debug, Parser)]
#[command(name = "iterion", version, about, long_about = None, after_help = EXIT_CODES_HELP)]
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
    /// a launch refused before the run exists; 3 paused). Progress goes to stderr.
    #[command(after_help = EXIT_CODES_HELP)]
    Run(RunArgs),
    /// Resume a failed_resumable or paused run from its last checkpoint (admission and sandbox
    /// again); exit codes as `run`'s.
    #[command(after_help = EXIT_CODES_HELP)]
    Resume(ResumeArgs),
    /// Cancel a run, wherever it executes: it stops, its sandbox is torn down, it ends
    /// cancelled (exit 0; 1 when it is over already or ended otherwise).
    #[command(after_help = EXIT_CODES_HELP)]
    Cancel(CancelArgs),
    /// List runs, or show one: status, failure code, admission.
    Inspect(InspectArgs),
    /// Print a run's events (`--follow`: as they are recorded, until the run ends).
    Events(EventsArgs),
    /// List the runs that are running, paused or queued (`--all`: every run).
    Ps(PsArgs),
    /// Remove finished runs: their records, events, logs and `runs/<id>` dirs (never a run
    /// that is running or queued).
    Rm(RmArgs),
    /// Remove finished runs older than a bound, and the images and volumes iterion built that
    /// no run needs any more (`--dry-run` lists and removes nothing).
    Prune(PruneArgs),
    /// The config file (`$ITERION_HOME/config.toml`, else `~/.config/iterion/config.toml`).
    Config(ConfigArgs),
    /// Print a shell completion script: `iterion completions bash > /etc/bash_completion.d/iterion`.
    Completions(CompletionsArgs),
    /// Print what a run's nodes printed, per node and stream (`--follow`: as they print).
    Logs(LogsArgs),
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
    /// In-sandbox exec agent (issue 18): spawns node commands asked for over stdin/stdout; the
    /// engine runs it, people don't.
    #[command(name = "__exec-agent", hide = true)]
    ExecAgent,
    /// The stdio MCP server (`ask_user`) a delegate CLI of an `interaction: ask` node runs; the
    /// engine configures it, people don't.
    #[command(name = "__mcp-ask-user", hide = true)]
    McpAskUser,
    /// Docker warm pool filler (issue 18): makes pre-started sandboxes of the shape on stdin and
    /// exits; the engine starts it, detached, people don't.
    #[command(name = "__warm-fill", hide = true)]
    WarmFill,
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

/// `--sandbox auto|none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AutoOrNone {
    /// Sandbox (auto: the default image; degrades visibly without a container runtime).
    Auto,
    /// No sandbox.
    None,
}

/// `--sandbox-host-state auto|none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HostStateArg {
    /// Bind the host's agent state and caches (`~/.claude*`, `~/.codex`, caches, `~/.gitconfig`
    /// read-only) into the sandbox.
    Auto,
    /// Bind nothing of the host's home; the git identity travels as variables.
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
    /// Whether host caches and tool state are bound into the sandbox (instead of the
    /// workflow's `host_state:`, ITERION_SANDBOX_HOST_STATE or the config file's `host_state`).
    #[arg(long = "sandbox-host-state", value_enum)]
    pub sandbox_host_state: Option<HostStateArg>,
    /// The image `sandbox: auto` uses (instead of ITERION_SANDBOX_DEFAULT_IMAGE, the config
    /// file's `default_image`, or the built-in default).
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
    /// A preset of the workflow's `presets:` block: its values replace the vars' defaults
    /// (`--var` still overrides them).
    #[arg(long = "preset", value_name = "NAME")]
    pub preset: Option<String>,
    /// A file for one of the workflow's `attachments:` (repeatable): `--attach spec=./spec.pdf`.
    /// It is copied into the run (read-only in the sandbox, at `/run/iterion/attachments`).
    #[arg(long = "attach", value_name = "NAME=PATH")]
    pub attach: Vec<String>,
    /// The sandbox flags (`iterion sandbox doctor` takes the same).
    #[command(flatten)]
    pub sandbox: SandboxFlags,
    /// An operator variable for the sandbox (repeatable): `--sandbox-env K=V`. It overrides the
    /// file named by ITERION_SANDBOX_ENV_FILE key by key, fills gaps and overrides what the
    /// repository's devcontainer set, but never a key the workflow wrote.
    #[arg(long = "sandbox-env", value_name = "K=V")]
    pub sandbox_env: Vec<String>,
    /// A service on this machine the sandbox may reach through its egress proxy (repeatable):
    /// `--allow-host NAME[:PORT]`. In the sandbox, NAME:PORT is this machine's 127.0.0.1:PORT
    /// (e.g. `--allow-host host.docker.internal:11434` for a local model server); nothing else
    /// of the host opens. Needs a network that goes through the proxy (allowlist, denylist, or
    /// an untrusted run).
    #[arg(long = "allow-host", value_name = "NAME[:PORT]")]
    pub allow_hosts: Vec<String>,
    /// Let an untrusted run have its --allow-host services too (refused without it).
    #[arg(long = "dangerously-allow-host-untrusted")]
    pub dangerously_allow_host_untrusted: bool,
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
    /// Do not show what nodes print (`node │ line` on stderr); it is stored all the same
    /// (`iterion logs RUN`).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `iterion resume RUN [--force]`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run to resume: its id, the start of it, or `last`.
    #[arg(value_name = "RUN")]
    pub run_id: String,
    /// Resume even though the workflow file changed since the run started.
    #[arg(long)]
    pub force: bool,
    /// The answer to the question a paused run waits on (`ask_user`).
    #[arg(long, value_name = "TEXT")]
    pub answer: Option<String>,
    /// Start again at NODE, a node the run already reached, with the input it had then: NODE
    /// and the nodes that ran after it run again (their outputs are dropped); the nodes before
    /// it keep theirs.
    #[arg(long, value_name = "NODE")]
    pub from: Option<String>,
    /// Print one JSON document on stdout, as `run --json`.
    #[arg(long)]
    pub json: bool,
    /// Do not show what nodes print, as `run --quiet`.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `iterion cancel RUN [--no-wait] [--json]`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run to cancel: its id, the start of it, or `last`.
    #[arg(value_name = "RUN")]
    pub run_id: String,
    /// Return once the request is recorded; do not wait for the run to stop.
    #[arg(long = "no-wait")]
    pub no_wait: bool,
    /// How long to wait for the run to stop, in seconds.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub timeout: u64,
    /// Print one JSON document `{run_id, status, failure_code, requested, stopped}`.
    #[arg(long)]
    pub json: bool,
}

/// `iterion inspect [RUN_ID] [--json]`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The run (its id, the start of it, or `last`); without it, the newest runs are listed.
    #[arg(value_name = "RUN")]
    pub run_id: Option<String>,
    /// Print JSON (the run record, or an array of them).
    #[arg(long)]
    pub json: bool,
}

/// `iterion events RUN [--json] [--follow]`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The run: its id, the start of it, or `last`.
    #[arg(value_name = "RUN")]
    pub run_id: String,
    /// One JSON object a line: `{run_id, seq, ts, type, data}`.
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events as the run records them, until it ends (finished, failed,
    /// cancelled or paused, and its process let go of it).
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// `stdout` or `stderr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StreamArg {
    /// What nodes wrote to standard output.
    Stdout,
    /// What nodes wrote to standard error.
    Stderr,
}

/// `iterion logs RUN [--node N] [--stream S] [--follow] [--json]`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The run: its id, the start of it, or `last`.
    #[arg(value_name = "RUN")]
    pub run_id: String,
    /// Only this node's output (`sandbox.post_create` and `sandbox.build` name the sandbox's
    /// setup).
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Only this stream.
    #[arg(long, value_enum)]
    pub stream: Option<StreamArg>,
    /// Keep printing new output as the run records it, until it ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// One JSON object a line: `{run_id, seq, ts, node, stream, line}` (and `truncated: true`
    /// on the last line stored before a node's bound).
    #[arg(long)]
    pub json: bool,
}

/// `iterion ps [--all] [--json]`.
#[derive(Debug, Args)]
pub struct PsArgs {
    /// Every run, whatever its status (newest first, at most `--limit`).
    #[arg(long, short = 'a')]
    pub all: bool,
    /// At most this many runs.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub limit: usize,
    /// Print one JSON array of `{run_id, status, workflow, created_at, updated_at,
    /// failure_code, parent_run_id}`.
    #[arg(long)]
    pub json: bool,
}

/// `iterion rm RUN… [--json]`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The runs to remove: ids, starts of ids, or `last`. Subbot children go with their parent.
    #[arg(value_name = "RUN", required = true)]
    pub runs: Vec<String>,
    /// Print one JSON document `{removed: [...], refused: [...]}`.
    #[arg(long)]
    pub json: bool,
}

/// `iterion prune [--older-than 7d] [--dry-run] [--json]`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Finished runs (finished, failed, failed_resumable, cancelled) that ended longer ago than
    /// this: `30m`, `12h`, `7d`, `2w`.
    #[arg(long = "older-than", value_name = "AGE", default_value = "7d", value_parser = parse_age)]
    pub older_than: std::time::Duration,
    /// List what would be removed; remove nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Print one JSON document `{dry_run, runs, images, volumes, containers, run_dirs}`.
    #[arg(long)]
    pub json: bool,
}

/// An age: a whole number and a unit, `s`, `m`, `h`, `d` or `w` (`7d`).
pub fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let bad = || format!("{text:?} is not an age such as 30m, 12h, 7d or 2w");
    let number: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    number
        .checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(bad)
}

/// `iterion config …`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// The `config` subcommands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print each effective setting, its value and where it came from (flag, environment,
    /// config file, default).
    Show(ConfigShowArgs),
    /// Print the path of the config file iterion reads (whether or not it exists).
    Path,
}

/// `iterion config show [--json]`.
#[derive(Debug, Args)]
pub struct ConfigShowArgs {
    /// Print one JSON document `{file, settings: [{key, value, source}]}`.
    #[arg(long)]
    pub json: bool,
}

/// `iterion completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: ShellArg,
}

/// The shells completions are generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShellArg {
    /// bash.
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
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
    /// Transparent egress (issue 22): a DNS stub on this loopback address (UDP and TCP) that asks
    /// the proxy behind SOCKET about each name, answers allowed ones with synthetic loopback
    /// addresses and forwards connections to them as CONNECTs. The run's proxy token is read
    /// from the first line of stdin. E.g. `127.0.0.1:53=/run/iterion/net/proxy.sock`.
    #[arg(long = "dns", value_name = "ADDR=SOCKET", value_parser = parse_listen)]
    pub dns: Option<ListenSpec>,
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

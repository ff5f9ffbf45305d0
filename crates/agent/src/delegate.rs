//! The delegate backends: an agent node run by a vendor's CLI (`claude` for `claude_code`,
//! `codex` for `codex`) instead of the built-in loop.
//!
//! This module is pure: [`invocation`] turns a [`DelegateTask`] into the argv, environment,
//! stdin and config files of one CLI run, and [`StreamParser`] turns the CLI's JSON-lines stdout
//! into [`DelegateEvent`]s (turns, tool calls, the session id, the final answer). The engine
//! runs the invocation through the run's sandbox (the container, or the host when the run has
//! none) and records the events.
//!
//! **What the CLI is given.** Only what the node declares: its model, its prompts, its tools
//! mapped to the CLI's own names (`claude --tools`, nothing else exists), a turn limit, and a
//! credential that is, under a sandbox, a gateway placeholder the run's proxy swaps toward the
//! provider's host. Its config lives in a per-run directory ([`DelegateTask::config_dir`]), never
//! the operator's `~/.claude` or `~/.codex`; project settings, hooks and MCP servers a repository
//! carries are not loaded (`--setting-sources user`, `--strict-mcp-config`), so a hostile
//! working tree cannot make the CLI run its hooks on the host of an unsandboxed run.
//! Non-essential traffic (telemetry, error reports, auto-update) is turned off.

use iterion_dsl::ir::Tool;
use serde_json::{Value, json};

/// Which CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cli {
    /// `claude` (`backend: claude_code`).
    ClaudeCode,
    /// `codex` (`backend: codex`).
    Codex,
}

impl Cli {
    /// The backend word (`claude_code`, `codex`), as events carry it.
    pub fn backend(self) -> &'static str {
        match self {
            Cli::ClaudeCode => "claude_code",
            Cli::Codex => "codex",
        }
    }

    /// The executable looked up on the `PATH` of the sandbox (or the host).
    pub fn program(self) -> &'static str {
        match self {
            Cli::ClaudeCode => "claude",
            Cli::Codex => "codex",
        }
    }

    /// The name of the CLI's subscription login file in its config directory
    /// (see the `forfait` module).
    pub fn login_file(self) -> &'static str {
        match self {
            Cli::ClaudeCode => ".credentials.json",
            Cli::Codex => "auth.json",
        }
    }

    /// The variable naming the CLI's config directory.
    pub fn config_var(self) -> &'static str {
        match self {
            Cli::ClaudeCode => "CLAUDE_CONFIG_DIR",
            Cli::Codex => "CODEX_HOME",
        }
    }
}

/// The variable carrying codex's credential: the provider iterion writes into the per-run
/// `config.toml` reads its key from it (`env_key`).
pub const CODEX_KEY_VAR: &str = "OPENAI_API_KEY";

/// How the CLI session starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// A new session.
    Fresh,
    /// Continue session `id`.
    Resume(String),
    /// Continue a copy of session `id`.
    Fork(String),
}

/// One run of a delegate CLI.
#[derive(Clone, Debug)]
pub struct DelegateTask {
    /// The CLI.
    pub cli: Cli,
    /// The model, without its `provider/` prefix.
    pub model: String,
    /// The node's rendered system prompt.
    pub system: Option<String>,
    /// The node's rendered user prompt (or a correction request on a schema retry).
    pub prompt: String,
    /// The node's tools (empty: the CLI gets none).
    pub tools: Vec<Tool>,
    /// The most agent turns (`tool_max_steps`).
    pub max_turns: u32,
    /// `reasoning_effort`, as written.
    pub reasoning_effort: Option<String>,
    /// `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Where the session starts.
    pub start: Start,
    /// The provider's base URL (`https://api.anthropic.com`, `…/v1` for codex).
    pub base_url: String,
    /// The credential.
    pub credential: Credential,
    /// The per-run config directory (`CLAUDE_CONFIG_DIR` / `CODEX_HOME`), already made, with
    /// a `tmp` directory inside it.
    pub config_dir: String,
    /// Whether the CLI runs inside the run's sandbox (codex's own sandbox is then off: ours is
    /// the boundary) rather than on the host.
    pub sandboxed: bool,
    /// The MCP servers the CLI is given (none: it gets none; a repository's are never loaded).
    pub mcp_servers: Vec<McpServer>,
}

/// One stdio MCP server a delegate CLI is given: a command, its arguments and environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServer {
    /// The server's name, as the CLI shows its tools (`mcp__<name>__<tool>`).
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it.
    pub env: Vec<(String, String)>,
    /// Only these of its tools are allowed (the node's `mcp.SERVER.TOOL` entries); `None`: all.
    pub only: Option<Vec<String>>,
}

/// The file the CLI's MCP servers are written to, in its config dir: claude's `--mcp-config`
/// JSON (`mcp.json`), or the `[mcp_servers.*]` tables of codex's `config.toml`. The one place
/// a delegate's MCP configuration is written; `None` when there are no servers.
pub fn mcp_config(cli: Cli, servers: &[McpServer]) -> Option<String> {
    if servers.is_empty() {
        return None;
    }
    Some(match cli {
        Cli::ClaudeCode => {
            let mut all = serde_json::Map::new();
            for s in servers {
                let env: serde_json::Map<String, Value> = s
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                all.insert(
                    s.name.clone(),
                    json!({"type": "stdio", "command": s.command, "args": s.args, "env": env}),
                );
            }
            json!({ "mcpServers": all }).to_string()
        }
        Cli::Codex => {
            let mut out = String::new();
            for s in servers {
                let args: Vec<String> = s.args.iter().map(|a| toml_str(a)).collect();
                // Its tools run without an approval: `approval_policy = "never"` would otherwise
                // refuse every call ("MCP tool call requires approval").
                out.push_str(&format!(
                    "\n[mcp_servers.{}]\ncommand = {}\nargs = [{}]\ndefault_tools_approval_mode = \"approve\"\n",
                    toml_str(&s.name),
                    toml_str(&s.command),
                    args.join(", ")
                ));
                if let Some(only) = &s.only {
                    let tools: Vec<String> = only.iter().map(|t| toml_str(t)).collect();
                    out.push_str(&format!("enabled_tools = [{}]\n", tools.join(", ")));
                }
                if !s.env.is_empty() {
                    out.push_str(&format!("[mcp_servers.{}.env]\n", toml_str(&s.name)));
                    for (k, v) in &s.env {
                        out.push_str(&format!("{} = {}\n", toml_str(k), toml_str(v)));
                    }
                }
            }
            out
        }
    })
}

/// How the CLI authenticates.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// An API key: a gateway placeholder under a sandbox, the key on the host.
    Key(String),
    /// The operator's subscription login (the `forfait` module): the CLI reads its credential file
    /// from its config directory. `file` is that file's text, written there before the CLI
    /// starts (a host run); `None` when the sandbox's setup seeded it already.
    Login {
        /// The credential file's text to write, if any.
        file: Option<String>,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credential::Key(_) => "Key(..)",
            Credential::Login { .. } => "Login(..)",
        })
    }
}

/// What to execute for a [`DelegateTask`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// The argv.
    pub argv: Vec<String>,
    /// Variables added to the sandbox's (or host's) environment.
    pub env: Vec<(String, String)>,
    /// Fed to stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Files written into [`DelegateTask::config_dir`] before the CLI starts: `(name, text)`.
    pub config_files: Vec<(String, String)>,
}

/// The CLI's own name for one of the node's tools, as `claude --tools` takes it; `None` for
/// the claw loop's own tools that Claude Code has no counterpart of (`sleep`,
/// `structured_output`, `send_user_message`): a `claude_code` node is not given them.
pub fn claude_tool_name(tool: Tool) -> Option<&'static str> {
    Some(match tool {
        Tool::Bash => "Bash",
        // Claude Code's Read shows images too.
        Tool::ReadFile | Tool::ReadImage => "Read",
        Tool::WriteFile => "Write",
        Tool::FileEdit => "Edit",
        Tool::Glob => "Glob",
        Tool::Grep => "Grep",
        // Claude Code's shell, allowed only for these commands (see `claude_allowed`).
        Tool::GitDiff | Tool::GitStatus | Tool::GitLog => "Bash",
        Tool::WebFetch => "WebFetch",
        Tool::TodoWrite => "TodoWrite",
        Tool::Sleep | Tool::StructuredOutput | Tool::SendUserMessage => return None,
    })
}

/// The `--allowedTools` rule for one of the node's tools: the tool itself, or for the git tools
/// the one command they stand for.
pub fn claude_allowed(tool: Tool) -> Option<&'static str> {
    match tool {
        Tool::GitDiff => Some("Bash(git diff:*)"),
        Tool::GitStatus => Some("Bash(git status:*)"),
        Tool::GitLog => Some("Bash(git log:*)"),
        other => claude_tool_name(other),
    }
}

/// The environment every delegate CLI gets to keep it quiet: no telemetry, no error reports, no
/// auto-update, no non-essential traffic (the egress preset names only the model's host).
const QUIET_ENV: [(&str, &str); 5] = [
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "1"),
];

/// The argv, environment, stdin and config files of one CLI run.
pub fn invocation(task: &DelegateTask) -> Invocation {
    let mut env: Vec<(String, String)> = QUIET_ENV
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.push((task.cli.config_var().to_owned(), task.config_dir.clone()));
    if task.sandboxed && is_loopback_url(&task.base_url) {
        // A model server on the host's loopback: the sandbox's NO_PROXY names loopback, which
        // inside the container is the container itself, so the CLI would bypass the proxy and
        // miss. Its requests must go through the run's proxy (which swaps the placeholder and
        // reaches the host's loopback). Only then: the CLI's commands inherit this environment,
        // and a service the workload runs on the container's loopback should stay direct.
        env.push(("NO_PROXY".to_owned(), String::new()));
        env.push(("no_proxy".to_owned(), String::new()));
    }
    match task.cli {
        Cli::ClaudeCode => claude(task, env),
        Cli::Codex => codex(task, env),
    }
}

/// Whether a base URL names a loopback host (`localhost`, `127.0.0.0/8`, `::1`).
fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    let host = host.trim_matches(['[', ']']);
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn claude(task: &DelegateTask, mut env: Vec<(String, String)>) -> Invocation {
    env.push(("ANTHROPIC_BASE_URL".to_owned(), task.base_url.clone()));
    let mut config_files = Vec::new();
    match &task.credential {
        Credential::Key(key) => env.push(("ANTHROPIC_API_KEY".to_owned(), key.clone())),
        Credential::Login { file } => {
            if let Some(text) = file {
                config_files.push((Cli::ClaudeCode.login_file().to_owned(), text.clone()));
            }
        }
    }
    if let Some(max) = task.max_tokens {
        env.push(("CLAUDE_CODE_MAX_OUTPUT_TOKENS".to_owned(), max.to_string()));
    }
    if task.sandboxed {
        env.push(("IS_SANDBOX".to_owned(), "1".to_owned()));
    }
    let mut tools: Vec<&str> = Vec::new();
    for name in task.tools.iter().filter_map(|t| claude_tool_name(*t)) {
        if !tools.contains(&name) {
            tools.push(name);
        }
    }
    let tools = tools.join(",");
    // With full `bash` the git rules add nothing; without it they allow only their command.
    let full_bash = task.tools.contains(&Tool::Bash);
    let mut allowed: Vec<&str> = Vec::new();
    for rule in task
        .tools
        .iter()
        .filter(|t| !(full_bash && matches!(t, Tool::GitDiff | Tool::GitStatus | Tool::GitLog)))
        .filter_map(|t| claude_allowed(*t))
    {
        if !allowed.contains(&rule) {
            allowed.push(rule);
        }
    }
    // The MCP servers iterion gives the CLI run without a prompt too (`mcp__<server>`: all of
    // that server's tools); a repository's are never loaded (`--strict-mcp-config`).
    // A name that is not one plain word gets no rule: `,` or `(` in it would write other rules.
    let mcp_rules: Vec<String> = task
        .mcp_servers
        .iter()
        .filter(|s| {
            !s.name.is_empty()
                && s.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
        .flat_map(|s| match &s.only {
            None => vec![format!("mcp__{}", s.name)],
            // One rule per named tool, each one plain word as well.
            Some(only) => only
                .iter()
                .filter(|t| {
                    !t.is_empty()
                        && t.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                })
                .map(|t| format!("mcp__{}__{t}", s.name))
                .collect(),
        })
        .collect();
    allowed.extend(mcp_rules.iter().map(String::as_str));
    let allowed = allowed.join(",");
    let mut argv: Vec<String> = [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--input-format",
        "stream-json",
        "--verbose",
        "--setting-sources",
        "user",
        "--strict-mcp-config",
        "--model",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    argv.push(task.model.clone());
    argv.push("--max-turns".to_owned());
    argv.push(task.max_turns.to_string());
    // `--tools` is what exists, `--allowedTools` what runs without a prompt: the same list, so
    // nothing outside it can be called and nothing inside it waits for an approval.
    argv.push("--tools".to_owned());
    argv.push(tools);
    if !allowed.is_empty() {
        argv.push("--allowedTools".to_owned());
        argv.push(allowed);
    }
    if let Some(effort) = &task.reasoning_effort {
        argv.push("--effort".to_owned());
        argv.push(effort.clone());
    }
    if let Some(system) = &task.system {
        argv.push("--append-system-prompt".to_owned());
        argv.push(system.clone());
    }
    match &task.start {
        Start::Fresh => {}
        Start::Resume(id) => {
            argv.push("--resume".to_owned());
            argv.push(id.clone());
        }
        Start::Fork(id) => {
            argv.push("--resume".to_owned());
            argv.push(id.clone());
            argv.push("--fork-session".to_owned());
        }
    }
    if let Some(mcp) = mcp_config(Cli::ClaudeCode, &task.mcp_servers) {
        // With --strict-mcp-config, these servers and no other.
        argv.push("--mcp-config".to_owned());
        argv.push(format!("{}/mcp.json", task.config_dir));
        config_files.push(("mcp.json".to_owned(), mcp));
    }
    let line = json!({"type": "user", "message": {"role": "user", "content": task.prompt}});
    let mut stdin = line.to_string().into_bytes();
    stdin.push(b'\n');
    Invocation {
        argv,
        env,
        stdin,
        config_files,
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// codex's per-run `config.toml`: one provider, `iterion`, at the node's base URL, reading its
/// key from [`CODEX_KEY_VAR`] (or, with `login`, using the ChatGPT login of its `auth.json`); no
/// update check.
pub fn codex_config(base_url: &str, login: bool) -> String {
    let auth = if login {
        "requires_openai_auth = true".to_owned()
    } else {
        format!("env_key = \"{CODEX_KEY_VAR}\"")
    };
    format!(
        "# Written by iterion for this run; removed with it.\n\
         model_provider = \"iterion\"\n\
         check_for_update_on_startup = false\n\
         \n\
         [model_providers.iterion]\n\
         name = \"iterion\"\n\
         base_url = {}\n\
         {auth}\n\
         wire_api = \"responses\"\n\
         supports_websockets = false\n\
         \n\
         # No apps (connectors) server, no plugins, no analytics.\n\
         [features]\n\
         apps = false\n\
         plugins = false\n\
         \n\
         [analytics]\n\
         enabled = false\n",
        toml_str(base_url)
    )
}

fn codex(task: &DelegateTask, mut env: Vec<(String, String)>) -> Invocation {
    let mut config_files = Vec::new();
    let login = match &task.credential {
        Credential::Key(key) => {
            env.push((CODEX_KEY_VAR.to_owned(), key.clone()));
            false
        }
        Credential::Login { file } => {
            if let Some(text) = file {
                config_files.push((Cli::Codex.login_file().to_owned(), text.clone()));
            }
            true
        }
    };
    // codex refuses to set up its sandbox helpers when CODEX_HOME lies under the temp dir;
    // its temp dir is its own, inside the config dir (made with it).
    env.push(("TMPDIR".to_owned(), format!("{}/tmp", task.config_dir)));
    let mut argv = vec!["codex".to_owned(), "exec".to_owned()];
    match &task.start {
        Start::Fresh => {}
        Start::Resume(_) => argv.push("resume".to_owned()),
        Start::Fork(_) => argv.push("fork".to_owned()),
    }
    argv.extend(["--json", "--skip-git-repo-check"].map(str::to_owned));
    if task.sandboxed {
        // Inside the run's sandbox, ours is the boundary: codex's own (landlock, seccomp)
        // cannot nest in a container and would only break its commands.
        argv.push("--dangerously-bypass-approvals-and-sandbox".to_owned());
    } else {
        // On the host codex's own sandbox is the only boundary: the workspace is writable when
        // the node has tools, nothing is otherwise. (`-c`, not `--sandbox`: `exec resume`
        // takes no `--sandbox`.)
        let mode = if task.tools.is_empty() {
            "read-only"
        } else {
            "workspace-write"
        };
        argv.extend([
            "-c".to_owned(),
            format!("sandbox_mode=\"{mode}\""),
            "-c".to_owned(),
            "approval_policy=\"never\"".to_owned(),
        ]);
    }
    argv.push("-m".to_owned());
    argv.push(task.model.clone());
    if let Some(effort) = &task.reasoning_effort {
        argv.push("-c".to_owned());
        argv.push(format!("model_reasoning_effort={}", toml_str(effort)));
    }
    if let Some(max) = task.max_tokens {
        argv.push("-c".to_owned());
        argv.push(format!("model_max_output_tokens={max}"));
    }
    match &task.start {
        Start::Fresh => {}
        Start::Resume(id) | Start::Fork(id) => argv.push(id.clone()),
    }
    // The prompt comes on stdin, never in argv (where `ps` shows it).
    argv.push("-".to_owned());
    let stdin = match &task.system {
        Some(system) => format!("{system}\n\n{}", task.prompt),
        None => task.prompt.clone(),
    };
    Invocation {
        argv,
        env,
        stdin: stdin.into_bytes(),
        config_files: {
            let mut config = codex_config(&task.base_url, login);
            if let Some(mcp) = mcp_config(Cli::Codex, &task.mcp_servers) {
                config.push_str(&mcp);
            }
            config_files.push(("config.toml".to_owned(), config));
            config_files
        },
    }
}

/// What the CLI reported.
#[derive(Clone, Debug, PartialEq)]
pub enum DelegateEvent {
    /// The CLI's session (claude's `session_id`, codex's `thread_id`).
    Session(String),
    /// The model answered once.
    Turn {
        /// 1 for the first.
        turn: u32,
        /// The model that answered, when said.
        model: Option<String>,
        /// Why it stopped, when said.
        stop_reason: Option<String>,
        /// Input tokens, when said.
        input_tokens: Option<u64>,
        /// Output tokens, when said.
        output_tokens: Option<u64>,
    },
    /// A tool call, with its result when the CLI reported one.
    ToolCall {
        /// The turn that asked for it.
        turn: u32,
        /// The tool's name as the CLI spells it.
        tool: String,
        /// Its input (JSON text).
        input: String,
        /// Its result, when reported.
        result: Option<String>,
        /// Whether the result was an error.
        is_error: bool,
        /// A command's exit code, when it ran one.
        exit_code: Option<i64>,
    },
    /// The run ended with this answer.
    Final(Final),
}

/// The end of a CLI run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Final {
    /// The final answer's text.
    pub text: String,
    /// Whether the CLI reported an error instead of an answer.
    pub is_error: bool,
    /// The CLI's word for how it ended (`success`, `error_max_turns`, …), when said.
    pub subtype: Option<String>,
    /// Input tokens of the whole run.
    pub input_tokens: u64,
    /// Output tokens of the whole run.
    pub output_tokens: u64,
    /// What the CLI says the run cost, when it says.
    pub cost_usd: Option<f64>,
}

/// A tool call waiting for its result.
#[derive(Clone, Debug)]
struct Pending {
    id: String,
    turn: u32,
    tool: String,
    input: String,
}

/// Reads a CLI's JSON-lines stdout, one line at a time.
#[derive(Debug)]
pub struct StreamParser {
    cli: Cli,
    turn: u32,
    message: Option<String>,
    pending: Vec<Pending>,
    /// codex: the last agent message, the answer when the turn completes.
    last_text: String,
    usage: (u64, u64),
    ended: bool,
}

impl StreamParser {
    /// A parser for `cli`'s output.
    pub fn new(cli: Cli) -> StreamParser {
        StreamParser {
            cli,
            turn: 0,
            message: None,
            pending: Vec::new(),
            last_text: String::new(),
            usage: (0, 0),
            ended: false,
        }
    }

    /// The events of one stdout line (a line that is not a JSON object gives none).
    pub fn line(&mut self, line: &str) -> Vec<DelegateEvent> {
        let Ok(value) = serde_json::from_str::<Value>(line.trim()) else {
            return Vec::new();
        };
        if !value.is_object() {
            return Vec::new();
        }
        match self.cli {
            Cli::ClaudeCode => self.claude_line(&value),
            Cli::Codex => self.codex_line(&value),
        }
    }

    /// The calls still waiting for a result when the stream ended, as events without one, then
    /// a [`Final`] marked as an error when the CLI never said how it ended.
    pub fn finish(&mut self) -> Vec<DelegateEvent> {
        let mut out: Vec<DelegateEvent> = self
            .pending
            .drain(..)
            .map(|p| DelegateEvent::ToolCall {
                turn: p.turn,
                tool: p.tool,
                input: p.input,
                result: None,
                is_error: false,
                exit_code: None,
            })
            .collect();
        if !self.ended && self.cli == Cli::Codex && !self.last_text.is_empty() {
            // codex without turn.completed: keep the answer it gave, flagged.
            out.push(DelegateEvent::Final(Final {
                text: std::mem::take(&mut self.last_text),
                is_error: true,
                subtype: Some("incomplete".to_owned()),
                input_tokens: self.usage.0,
                output_tokens: self.usage.1,
                cost_usd: None,
            }));
        }
        out
    }

    fn claude_line(&mut self, v: &Value) -> Vec<DelegateEvent> {
        let mut out = Vec::new();
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "system" => {
                if let Some(id) = v.get("session_id").and_then(Value::as_str) {
                    out.push(DelegateEvent::Session(id.to_owned()));
                }
            }
            "assistant" => {
                if v.get("parent_tool_use_id").is_some_and(|p| !p.is_null()) {
                    // A sub-agent's message: its calls are reported through the parent's.
                    return out;
                }
                let message = &v["message"];
                let id = message.get("id").and_then(Value::as_str).map(str::to_owned);
                if id.is_none() || id != self.message {
                    self.turn += 1;
                    self.message = id;
                    let usage = &message["usage"];
                    out.push(DelegateEvent::Turn {
                        turn: self.turn,
                        model: message
                            .get("model")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        stop_reason: message
                            .get("stop_reason")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        input_tokens: usage.get("input_tokens").and_then(Value::as_u64),
                        output_tokens: usage.get("output_tokens").and_then(Value::as_u64),
                    });
                }
                for block in message["content"].as_array().into_iter().flatten() {
                    if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                        self.pending.push(Pending {
                            id: block["id"].as_str().unwrap_or_default().to_owned(),
                            turn: self.turn,
                            tool: block["name"].as_str().unwrap_or_default().to_owned(),
                            input: block
                                .get("input")
                                .map_or_else(String::new, Value::to_string),
                        });
                    }
                }
            }
            "user" => {
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                        continue;
                    }
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    let Some(at) = self.pending.iter().position(|p| p.id == id) else {
                        continue;
                    };
                    let p = self.pending.remove(at);
                    out.push(DelegateEvent::ToolCall {
                        turn: p.turn,
                        tool: p.tool,
                        input: p.input,
                        result: Some(content_text(&block["content"])),
                        is_error: block["is_error"].as_bool().unwrap_or(false),
                        exit_code: None,
                    });
                }
            }
            "result" => {
                self.ended = true;
                if let Some(id) = v.get("session_id").and_then(Value::as_str) {
                    out.push(DelegateEvent::Session(id.to_owned()));
                }
                let usage = &v["usage"];
                let text = match v.get("result").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => v.get("errors").map(content_text).unwrap_or_default(),
                };
                out.push(DelegateEvent::Final(Final {
                    text,
                    is_error: v["is_error"].as_bool().unwrap_or(false),
                    subtype: v.get("subtype").and_then(Value::as_str).map(str::to_owned),
                    input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
                    output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
                    cost_usd: v.get("total_cost_usd").and_then(Value::as_f64),
                }));
            }
            _ => {}
        }
        out
    }

    fn codex_line(&mut self, v: &Value) -> Vec<DelegateEvent> {
        let mut out = Vec::new();
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "thread.started" => {
                if let Some(id) = v.get("thread_id").and_then(Value::as_str) {
                    out.push(DelegateEvent::Session(id.to_owned()));
                }
            }
            "turn.started" => {
                self.turn += 1;
            }
            "item.started" => {
                let item = &v["item"];
                if let Some((tool, input)) = codex_call(item) {
                    self.pending.push(Pending {
                        id: item["id"].as_str().unwrap_or_default().to_owned(),
                        turn: self.turn.max(1),
                        tool,
                        input,
                    });
                }
            }
            "item.completed" => {
                let item = &v["item"];
                let id = item["id"].as_str().unwrap_or_default();
                match item["type"].as_str().unwrap_or_default() {
                    "agent_message" => {
                        self.last_text = item["text"].as_str().unwrap_or_default().to_owned();
                    }
                    _ => {
                        let Some((tool, input)) = codex_call(item) else {
                            return out;
                        };
                        let started = self.pending.iter().position(|p| p.id == id);
                        let turn = started
                            .map(|at| self.pending.remove(at).turn)
                            .unwrap_or(self.turn.max(1));
                        let exit_code = item.get("exit_code").and_then(Value::as_i64);
                        let status = item["status"].as_str().unwrap_or_default();
                        let result = item
                            .get("aggregated_output")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| item.get("result").map(content_text))
                            .or_else(|| item.get("error").map(content_text));
                        out.push(DelegateEvent::ToolCall {
                            turn,
                            tool,
                            input,
                            result,
                            is_error: status == "failed"
                                || exit_code.is_some_and(|c| c != 0)
                                || item.get("error").is_some_and(|e| !e.is_null()),
                            exit_code,
                        });
                    }
                }
            }
            "turn.completed" => {
                self.ended = true;
                let usage = &v["usage"];
                let (input, output) = (
                    usage["input_tokens"].as_u64().unwrap_or(0),
                    usage["output_tokens"].as_u64().unwrap_or(0),
                );
                self.usage = (
                    self.usage.0.saturating_add(input),
                    self.usage.1.saturating_add(output),
                );
                out.push(DelegateEvent::Turn {
                    turn: self.turn.max(1),
                    model: None,
                    stop_reason: Some("completed".to_owned()),
                    input_tokens: Some(input),
                    output_tokens: Some(output),
                });
                out.push(DelegateEvent::Final(Final {
                    text: std::mem::take(&mut self.last_text),
                    is_error: false,
                    subtype: Some("success".to_owned()),
                    input_tokens: self.usage.0,
                    output_tokens: self.usage.1,
                    cost_usd: None,
                }));
            }
            "turn.failed" | "error" => {
                self.ended = true;
                let message = v
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .or_else(|| v.get("message"))
                    .map(content_text)
                    .unwrap_or_else(|| "codex reported an error".to_owned());
                out.push(DelegateEvent::Final(Final {
                    text: message,
                    is_error: true,
                    subtype: Some(kind.to_owned()),
                    input_tokens: self.usage.0,
                    output_tokens: self.usage.1,
                    cost_usd: None,
                }));
            }
            _ => {}
        }
        out
    }
}

/// A codex item that is a tool call: its tool name and input.
fn codex_call(item: &Value) -> Option<(String, String)> {
    match item["type"].as_str()? {
        "command_execution" => Some((
            "command_execution".to_owned(),
            json!({"command": item["command"]}).to_string(),
        )),
        "file_change" => Some((
            "file_change".to_owned(),
            json!({"changes": item["changes"]}).to_string(),
        )),
        "mcp_tool_call" => Some((
            format!(
                "mcp:{}/{}",
                item["server"].as_str().unwrap_or("?"),
                item["tool"].as_str().unwrap_or("?")
            ),
            item.get("arguments")
                .map_or_else(String::new, Value::to_string),
        )),
        "web_search" => Some((
            "web_search".to_owned(),
            json!({"query": item["query"]}).to_string(),
        )),
        _ => None,
    }
}

/// A tool result's content as text: a string as it is, text blocks joined, anything else as
/// JSON.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|b| match b.get("text").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => match b {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "delegate_tests.rs"]
mod tests;

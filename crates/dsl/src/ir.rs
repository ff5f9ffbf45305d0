//! The compiled workflow the engine executes (DSL.md §3–§7).
//!
//! [`lower`] turns a tree that passed every check into a [`Workflow`]: names are resolved (a named
//! prompt becomes its body, duplicate declarations are gone), defaults are applied
//! (`tool_max_steps` 50, `worktree: none`, a secret's `value` `${NAME}` and its mount path), and
//! every enumeration is a typed enum.
//!
//! What the IR deliberately keeps as text, for the engine to handle at launch or at run time:
//! - `${…}` host references in `model`, `budget.max_duration` and secret values (DSL.md §4.3): the
//!   validator never reads the environment;
//! - `{{…}}` templates in prompts, commands and `with` values (DSL.md §4.2): rendering needs run
//!   state;
//! - `when "…"` expressions, as source text (parsed again by [`crate::expr`]);
//! - sandbox fields, whose devcontainer-style `${localEnv:…}` references the sandbox resolver
//!   expands (SANDBOX.md §7.4).
//!
//! Node-level `sandbox:` blocks are not lowered: they are never honoured (DSL.md §7.4).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ast;

mod resources;

pub(crate) use resources::node_mcp_servers;
pub use resources::{
    Attachment, Band, CALIBRATION_HEADING, Cursor, CursorError, CursorSetting, McpServer,
    McpTransport, calibration, parse_band,
};

pub use iterion_vocab::{
    HostState, NetworkMode, NodeKind, SECRETS_DIR, default_secret_mount_path, secret_file_name,
};

/// The model a delegate node that names none runs, per backend (`provider/model`).
pub fn default_delegate_model(backend: Backend) -> &'static str {
    match backend {
        Backend::Codex => "openai/gpt-5",
        Backend::Claw | Backend::ClaudeCode => "anthropic/claude-sonnet-4-5",
    }
}

/// The default of `tool_max_steps` (DSL.md §3.5, decision D15).
pub const DEFAULT_TOOL_MAX_STEPS: u32 = 50;

/// The output field a delegate node's CLI session id is added under: `{{outputs.N._session_id}}`
/// in a `with` mapping hands it to a later `session: inherit | fork` node, which continues that
/// session rather than the last one its backend left.
pub const SESSION_ID_FIELD: &str = "_session_id";

/// The output field beside [`SESSION_ID_FIELD`] naming the provider route that built the
/// session (backend, provider, API host; never a credential). A `session: fork` node given a
/// session whose fingerprint is missing or not its own starts fresh instead: a session built
/// on another provider cannot be continued there.
pub const SESSION_FINGERPRINT_FIELD: &str = "_session_fingerprint";

/// The output field `{{outputs.N.history}}` of a node at an end of a loop edge: the list of its
/// outputs so far in the run, oldest first (unless its schema declares `history` itself).
pub const HISTORY_FIELD: &str = "history";

/// The deepest nesting of subbot children: a run's child has depth 1 (DSL.md §3.9). Deeper is
/// C910 at compile time and `SUBBOT_DEPTH_EXCEEDED` at run time.
pub const MAX_SUBBOT_DEPTH: u32 = 8;

/// The most child runs one workflow's subbot tree may expand to, all levels counted (a node
/// naming a child that has two subbots is three runs). Past it, C910: the compiled tree nests a
/// copy of each child per node that names it, so without a bound a hostile workflow of a few
/// lines (ten subbots per file, eight levels deep) would expand to 10^8 copies.
pub const MAX_SUBBOT_RUNS: u64 = 1_000;

/// A compiled workflow: everything the engine needs to run one `.iter` file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    /// The workflow's name (used in the worktree branch `iterion/<name>/<run-id>`).
    pub name: String,
    /// The first node to run; always a declared node.
    pub entry: String,
    /// Vars in declaration order: top-level and workflow blocks merged (DSL.md §3.1).
    pub vars: Vec<Var>,
    /// Secrets in declaration order (DSL.md §3.2).
    pub secrets: Vec<Secret>,
    /// Schemas by name (DSL.md §3.4).
    pub schemas: BTreeMap<String, Schema>,
    /// Nodes in declaration order; ids are unique.
    pub nodes: Vec<Node>,
    /// Edges in declaration order: the order of §5.4's walk.
    pub edges: Vec<Edge>,
    /// Loop name → cap N (DSL.md §5.5); every edge of a loop carries the same cap. 0: the cap is
    /// a template ([`LoopRef::cap_template`]).
    pub loops: BTreeMap<String, u32>,
    /// Where the run works (DSL.md §7.6).
    pub worktree: Worktree,
    /// `repo_devbox`: whether the target repository's `devbox.json` is provisioned (`None`:
    /// the workflow does not say; `ITERION_REPO_DEVBOX`, then on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_devbox: Option<bool>,
    /// Run caps (DSL.md §3.8); all `None` when there is no `budget:` block.
    pub budget: Budget,
    /// The workflow's sandbox request; [`SandboxMode::Inherit`] when absent (DSL.md §7.1).
    pub sandbox: Sandbox,
    /// The sandbox fields this workflow declares, as written, in SANDBOX.md §14's form: the
    /// workflow block's (`mode=none`, `image`, …) then each agent or judge node's
    /// (`<node>.<field>`). Empty when it declares none (`sandbox: auto` alone is not a
    /// declaration). Read when the workflow runs as a subbot child.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared_sandbox_fields: Vec<String>,
    /// How many child runs this workflow's subbot tree expands to, all levels counted (at most
    /// [`MAX_SUBBOT_RUNS`]); 0 without subbots.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subbot_runs: u64,
    /// `mcp_server` declarations by name; they run inside the run's sandbox.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// `cursor` declarations by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cursors: BTreeMap<String, Cursor>,
    /// `presets:`: preset name → var name → value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub presets: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    /// `attachments:` (top level and the workflow's), in declaration order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// A bundle's `skills/NAME.md`, by name: written to the workspace's `.claude/skills/` when
    /// the run starts, unless the workspace has that entry already.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<Skill>,
    /// A bundle's `manifest.yaml` metadata, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Manifest>,
}

/// One bundle skill: `skills/NAME.md`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    /// The file name without `.md`.
    pub name: String,
    /// Its text, as the file holds it.
    pub text: String,
}

/// A bundle's `manifest.yaml`: metadata only (upstream's runtime does not read it either).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `version`, free-form.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// `description`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `author`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub author: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Workflow {
    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The outgoing edges of a node, in declaration order (the walk order of DSL.md §5.4).
    pub fn outgoing<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges.iter().filter(move |e| e.from == id)
    }

    /// The var with this name.
    pub fn var(&self, name: &str) -> Option<&Var> {
        self.vars.iter().find(|v| v.name == name)
    }

    /// Whether the workflow declares any `as: file` secret.
    pub fn has_file_secrets(&self) -> bool {
        self.secrets
            .iter()
            .any(|s| matches!(s.delivery, Delivery::File { .. }))
    }

    /// The secret with this name.
    pub fn secret(&self, name: &str) -> Option<&Secret> {
        self.secrets.iter().find(|s| s.name == name)
    }

    /// Whether some agent or judge node gets an MCP server.
    pub fn uses_mcp(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| matches!(&n.body, NodeBody::Agent(a) if !a.mcp_servers.is_empty()))
    }

    /// Whether some node may ask the operator (`interaction: ask`): the engine refuses such a run
    /// in an active sandbox without the ask-user channel (DSL.md §6.2).
    pub fn has_ask_interaction(&self) -> bool {
        self.nodes.iter().any(|n| match &n.body {
            NodeBody::Agent(a) => a.interaction == Interaction::Ask,
            NodeBody::Human(h) => h.mode == HumanMode::LlmOrHuman,
            NodeBody::Tool(_)
            | NodeBody::Router(_)
            | NodeBody::Subbot(_)
            | NodeBody::Compute(_)
            | NodeBody::Fail(_) => false,
        })
    }
}

/// The value types of vars and schema fields (DSL.md §3.1, §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ValueType {
    /// `string`.
    #[serde(rename = "string")]
    String,
    /// `bool`.
    #[serde(rename = "bool")]
    Bool,
    /// `int` (i64).
    #[serde(rename = "int")]
    Int,
    /// `float`.
    #[serde(rename = "float")]
    Float,
    /// `json`: any JSON value, `null` included.
    #[serde(rename = "json")]
    Json,
    /// `string[]`.
    #[serde(rename = "string[]")]
    StringList,
}

impl ValueType {
    /// The spelling in source.
    pub fn as_str(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Bool => "bool",
            ValueType::Int => "int",
            ValueType::Float => "float",
            ValueType::Json => "json",
            ValueType::StringList => "string[]",
        }
    }

    /// Parses one `--var` value as this type (DSL.md §3.1's last column); the error completes
    /// "value ... {why}".
    pub fn parse_value(self, raw: &str) -> Result<serde_json::Value, &'static str> {
        use serde_json::Value;
        match self {
            ValueType::String => Ok(Value::String(raw.to_owned())),
            ValueType::Bool => match raw {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err("is not true or false"),
            },
            ValueType::Int => {
                let digits = raw.strip_prefix('-').unwrap_or(raw);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("is not an integer (an optional -, then digits)");
                }
                raw.parse::<i64>()
                    .map(Value::from)
                    .map_err(|_| "does not fit in 64 bits")
            }
            ValueType::Float => {
                let ok = !raw.is_empty()
                    && raw
                        .bytes()
                        .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
                    && raw.bytes().any(|b| b.is_ascii_digit());
                match raw.parse::<f64>() {
                    Ok(f) if ok && f.is_finite() => serde_json::Number::from_f64(f)
                        .map(Value::Number)
                        .ok_or("is not a finite number"),
                    _ => Err("is not a decimal number"),
                }
            }
            ValueType::StringList => match serde_json::from_str::<Value>(raw) {
                Ok(Value::Array(items)) if items.iter().all(Value::is_string) => {
                    Ok(Value::Array(items))
                }
                _ => Err("is not a JSON array of strings"),
            },
            ValueType::Json => serde_json::from_str(raw).map_err(|_| "is not JSON text"),
        }
    }
}

impl From<ast::VarType> for ValueType {
    fn from(t: ast::VarType) -> Self {
        match t {
            ast::VarType::String => ValueType::String,
            ast::VarType::Bool => ValueType::Bool,
            ast::VarType::Int => ValueType::Int,
            ast::VarType::Float => ValueType::Float,
            ast::VarType::Json => ValueType::Json,
            ast::VarType::StringList => ValueType::StringList,
        }
    }
}

/// One var (DSL.md §3.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Var {
    /// The name.
    pub name: String,
    /// The type `--var` values are parsed as.
    #[serde(rename = "type")]
    pub ty: ValueType,
    /// The default, already of the var's type: a string, a bool, an i64, an f64 (an INT default
    /// of a `float` var included), a list of strings, or any JSON for `json`. `None` means the
    /// var is required at launch.
    pub default: Option<serde_json::Value>,
    /// `[enum: …]`: the only strings the var may take (its default, a preset, `--var`).
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<String>>,
}

impl Var {
    /// A var without a default must be supplied with `--var` (decision D17).
    pub fn is_required(&self) -> bool {
        self.default.is_none()
    }
}

/// One secret (DSL.md §3.2, §7.5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Secret {
    /// The name (`{{secrets.NAME}}`).
    pub name: String,
    /// The value as written, `${NAME}` by default: expanded at launch (DSL.md §4.3); an empty
    /// result means unresolved. This is never the secret itself.
    pub value: String,
    /// How the secret reaches the sandbox.
    pub delivery: Delivery,
    /// Hosts the secret may travel to; an entry also covers its subdomains.
    pub hosts: Vec<String>,
    /// An unresolved optional secret is not delivered; a required one refuses the launch.
    pub optional: bool,
}

/// How a secret is delivered (DSL.md §7.5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "as")]
pub enum Delivery {
    /// Rendered as a placeholder; the egress proxy swaps in the value toward the secret's hosts.
    Value,
    /// Written to a read-only file in the container.
    File {
        /// Absolute, clean path in the container; `/run/iterion/secrets/<sanitised name>` by
        /// default ([`default_secret_mount_path`]).
        mount_path: String,
        /// A container variable set to `mount_path`.
        env: Option<String>,
    },
}

/// A schema: the fields a conforming JSON object must hold (DSL.md §3.4). Extra keys are allowed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// Fields in declaration order.
    pub fields: Vec<SchemaField>,
}

/// One schema field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaField {
    /// The key.
    pub name: String,
    /// The accepted JSON (DSL.md §3.4 table).
    #[serde(rename = "type")]
    pub ty: ValueType,
    /// `[enum: …]`: the only strings the field may hold; `None` when unconstrained.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<String>>,
}

/// One node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The node's name.
    pub id: String,
    /// The declared kind; [`NodeBody`] matches it (agent and judge share [`NodeBody::Agent`]).
    pub kind: NodeKind,
    /// `await`: set only on a fan-out join (C908 warns elsewhere, and it then has no effect).
    #[serde(rename = "await")]
    pub await_mode: Option<AwaitMode>,
    /// What the node does.
    pub body: NodeBody,
}

/// Per-kind execution settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeBody {
    /// An agent or a judge (DSL.md §6.2).
    Agent(AgentNode),
    /// A shell step (DSL.md §6.1).
    Tool(ToolNode),
    /// A router (DSL.md §3.7).
    Router(RouterNode),
    /// A child workflow run (DSL.md §3.9).
    Subbot(SubbotNode),
    /// `compute`.
    Compute(ComputeNode),
    /// `human`.
    Human(HumanNode),
    /// `fail NAME:`: reaching it ends the run with the node's own code and message.
    Fail(FailNode),
}

/// A declared failure (`fail NAME:`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailNode {
    /// The workflow's own code (`UPPER_SNAKE`, never one of the engine's, C045).
    pub code: String,
    /// The message template, rendered when the node is reached; `None` gives a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `resumable: true`: the run ends `failed_resumable` and `iterion resume` runs the node
    /// that routed here again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumable: bool,
}

/// An agent or judge node (DSL.md §3.5, §6.2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentNode {
    /// `provider/model` or a bare model name, possibly holding `${…}` (expanded at launch) or
    /// `{{vars.X}}`; a delegate node that names none gets [`default_delegate_model`].
    pub model: String,
    /// `provider`: the provider of a bare model name, as written (may hold `${…}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// `publish`: the artifact name the node's conformed output is stored under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<String>,
    /// `readonly`: the writing tools were removed from [`AgentNode::tools`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub readonly: bool,
    /// The system prompt's template text (a named prompt already replaced by its body).
    pub system: Option<String>,
    /// The user prompt's template text; [`INPUT_ONLY_PROMPT`] when the node names none.
    pub user: String,
    /// The input schema's name (static checks only).
    pub input: Option<String>,
    /// The output schema's name: the final answer must conform.
    pub output: Option<String>,
    /// The exact tool allowlist, each tool once, in the order written; empty means no tools.
    pub tools: Vec<Tool>,
    /// The most model turns that may request tools.
    pub tool_max_steps: u32,
    /// Whether the node may ask the operator.
    pub interaction: Interaction,
    /// Who runs the node: the built-in loop, or a delegate CLI.
    #[serde(default, skip_serializing_if = "Backend::is_claw")]
    pub backend: Backend,
    /// Which CLI session a delegate node starts from.
    #[serde(default, skip_serializing_if = "Session::is_fresh")]
    pub session: Session,
    /// `reasoning_effort`, passed to a delegate CLI as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// `max_tokens`: the most output tokens per model answer, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The MCP servers the node gets (its `mcp:` block and the workflow's), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// `mcp.SERVER.TOOL` entries of `tools:`: of a server named here, only these tools are
    /// offered (a server with none named here offers all of its tools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_tools: Vec<McpToolRef>,
    /// Names in `tools:` this release has no tool for ([C922](crate::Code::C922)): the node
    /// fails with `CAPABILITY_UNSUPPORTED` when it starts, before any model call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable_tools: Vec<String>,
    /// The tool-permission gate ([`crate::permission`]); `None` when it is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<crate::permission::Permission>,
    /// The node's activated cursors (`cursors:` with `enabled: true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cursors: Vec<CursorSetting>,
}

/// `backend` (DSL.md §3.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// The built-in loop (the default).
    #[default]
    Claw,
    /// The `claude` CLI.
    ClaudeCode,
    /// The `codex` CLI.
    Codex,
}

impl Backend {
    /// The word as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Claw => "claw",
            Backend::ClaudeCode => "claude_code",
            Backend::Codex => "codex",
        }
    }

    /// Whether the node runs a delegate CLI.
    pub fn is_delegate(self) -> bool {
        !self.is_claw()
    }

    /// Whether this is the built-in loop (the serialized default).
    pub fn is_claw(&self) -> bool {
        matches!(self, Backend::Claw)
    }
}

/// `session` of a delegate node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Session {
    /// A new session (the default).
    #[default]
    Fresh,
    /// Continue the session the last finished node of the same backend left.
    Inherit,
    /// Continue a copy of that session.
    Fork,
    /// `inherit` when there is an earlier session, `fresh` (without a warning) otherwise.
    InheritIfAvailable,
}

impl Session {
    /// Whether this is `fresh` (the serialized default).
    pub fn is_fresh(&self) -> bool {
        matches!(self, Session::Fresh)
    }
}

impl NodeBody {
    /// The backend through which this node calls its model: an agent's, an `llm` router's;
    /// `claw` for every other node (a `human` node's model modes run the claw loop).
    pub fn backend(&self) -> Backend {
        match self {
            NodeBody::Agent(a) => a.backend,
            NodeBody::Router(r) if r.mode == RouterMode::Llm => r.backend,
            _ => Backend::Claw,
        }
    }

    /// The `provider:` of a bare model name: an agent's or an `llm` router's.
    pub fn provider(&self) -> Option<&str> {
        match self {
            NodeBody::Agent(a) => a.provider.as_deref(),
            NodeBody::Router(r) if r.mode == RouterMode::Llm => r.provider.as_deref(),
            _ => None,
        }
    }

    /// The model this node calls, when it calls one: an agent's, an `llm` router's, a `human`
    /// node's in its model modes. The launch resolves a route for each.
    pub fn model(&self) -> Option<&str> {
        match self {
            NodeBody::Agent(a) => Some(&a.model),
            NodeBody::Router(r) if r.mode == RouterMode::Llm => r.model.as_deref(),
            NodeBody::Human(h) if h.mode != HumanMode::Human => h.model.as_deref(),
            NodeBody::Router(_)
            | NodeBody::Human(_)
            | NodeBody::Tool(_)
            | NodeBody::Subbot(_)
            | NodeBody::Compute(_)
            | NodeBody::Fail(_) => None,
        }
    }
}

/// A tool node (DSL.md §3.6, §6.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolNode {
    /// The command's template text, run with `bash -c` after rendering; for a script tool, the
    /// script's template text.
    pub command: String,
    /// `Some` for a `script:` tool: the interpreter it runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptLanguage>,
    /// `publish`: the artifact name the node's output is stored under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<String>,
    /// The input schema's name (static checks only).
    pub input: Option<String>,
    /// The output schema's name: stdout must produce a conforming object.
    pub output: Option<String>,
}

/// A router node (DSL.md §3.7): its output is its input.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterNode {
    /// How it picks outgoing edges.
    pub mode: RouterMode,
    /// `llm` routers: the model that picks (`provider/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `llm` routers: the system prompt's template text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// `llm` routers: the user prompt's template text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `llm` routers: the backend that asks the model (`claw` when absent).
    #[serde(default, skip_serializing_if = "Backend::is_claw")]
    pub backend: Backend,
    /// `llm` routers: the provider of a bare model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// `llm` routers: `reasoning_effort` as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// `fan_out_each`: the template of the list (one reference, C113).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    /// `fan_out_each`: the item's name on the router's output in each branch (`item`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_: Option<String>,
    /// `fan_out_each`: the field naming each item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `fan_out_each`: the field listing the keys of the items an item waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<String>,
}

impl RouterNode {
    /// A `fan_out_each` router's item name: `as`, or `item`.
    pub fn item_name(&self) -> &str {
        self.as_.as_deref().unwrap_or("item")
    }
}

/// A script tool's interpreter (upstream's `language:` words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptLanguage {
    /// `sh`.
    Sh,
    /// `bash`.
    Bash,
    /// `node` (`js`).
    Node,
    /// `python3` (`py`, `python`).
    Python,
}

impl ScriptLanguage {
    /// The line comment that starts a comment line of the language (`parse_script`).
    pub fn line_comment(self) -> &'static str {
        match self {
            ScriptLanguage::Node => "//",
            ScriptLanguage::Sh | ScriptLanguage::Bash | ScriptLanguage::Python => "#",
        }
    }

    /// The interpreter's program name, looked up on the sandbox's `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            ScriptLanguage::Sh => "sh",
            ScriptLanguage::Bash => "bash",
            ScriptLanguage::Node => "node",
            ScriptLanguage::Python => "python3",
        }
    }
}

/// A compute node: each entry's expression, evaluated in order, gives one output field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeNode {
    /// `(field, expression text)` in declaration order.
    pub expr: Vec<(String, String)>,
    /// `publish`: the artifact name the node's output is stored under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<String>,
    /// The input schema's name (static checks only).
    pub input: Option<String>,
    /// The output schema's name: the computed map must conform.
    pub output: Option<String>,
}

/// A human node's `interaction`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HumanMode {
    /// Pause the run for the operator's answer (the default).
    #[default]
    Human,
    /// A model answers; the run never pauses.
    Llm,
    /// A model answers, or asks the operator through `ask_user` (which pauses).
    LlmOrHuman,
}

/// A human node: a question for the operator, answered with `iterion resume --answer`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanNode {
    /// Who answers.
    pub mode: HumanMode,
    /// The instructions' template text (the question shown to the operator).
    pub instructions: Option<String>,
    /// The model of the model modes.
    pub model: Option<String>,
    /// The system prompt of the model modes.
    pub system: Option<String>,
    /// The input schema's name (static checks only).
    pub input: Option<String>,
    /// The output schema's name: the answer must conform.
    pub output: Option<String>,
    /// `publish`: the artifact name the answer is stored under.
    #[serde(default)]
    pub publish: Option<String>,
}

/// A subbot node (DSL.md §3.9): runs the compiled child workflow as a child run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubbotNode {
    /// `source` as written: the child file, relative to the parent file's directory.
    pub source: String,
    /// The output schema's name: the child's result must conform.
    pub output: Option<String>,
    /// `with { … }`: added to the child's input when the node starts (its vars).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<Mapping>,
    /// The compiled child, loaded with the parent (its own children included). `None` only in a
    /// workflow lowered from a tree that did not pass the checks (C910 when it cannot be loaded).
    pub child: Option<Box<Workflow>>,
}

/// One `mcp.SERVER.TOOL` entry of an agent's `tools:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolRef {
    /// The server's declared name.
    pub server: String,
    /// The tool's name as the server lists it.
    pub tool: String,
}

impl McpToolRef {
    /// The `tool` of `mcp.SERVER.*`: every tool the server lists.
    pub const ALL_TOOLS: &'static str = "*";

    /// `mcp.SERVER.TOOL` (or `mcp.SERVER.*`, every tool of the server, as upstream writes it)
    /// read from a `tools:` entry: both parts one word of ASCII letters, digits, `_` or `-`
    /// (at most 64 bytes each); anything else is `None` (C135).
    pub fn parse(text: &str) -> Option<McpToolRef> {
        let (server, tool) = text.strip_prefix("mcp.")?.split_once('.')?;
        let word = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        (word(server) && (word(tool) || tool == Self::ALL_TOOLS)).then(|| McpToolRef {
            server: server.to_owned(),
            tool: tool.to_owned(),
        })
    }

    /// Whether this is `mcp.SERVER.*`.
    pub fn is_all(&self) -> bool {
        self.tool == Self::ALL_TOOLS
    }
}

/// The user prompt of an agent or judge that names none: its input as JSON (upstream's
/// fallback when a node has no `user:`).
pub const INPUT_ONLY_PROMPT: &str = "{{input}}";

/// The tools an agent may be given (DSL.md §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// `bash`.
    Bash,
    /// `read_file`.
    ReadFile,
    /// `write_file`.
    WriteFile,
    /// `file_edit`.
    FileEdit,
    /// `glob`.
    Glob,
    /// `grep`.
    Grep,
    /// `git_diff`: `git diff` of the workspace, read-only.
    GitDiff,
    /// `git_status`: `git status --porcelain` of the workspace, read-only.
    GitStatus,
    /// `git_log`: `git log` of the workspace's history, read-only.
    GitLog,
    /// `web_fetch`: `GET` one `http(s)://` URL, through the run's egress proxy under a sandbox.
    WebFetch,
    /// `read_image`: a PNG, JPEG, GIF or WebP file of the workspace, given to the model as an
    /// image.
    ReadImage,
    /// `sleep`: wait up to 300 000 ms.
    Sleep,
    /// `todo_write`: read or replace the node's task list (kept for the node's loop).
    TodoWrite,
    /// `structured_output`: echo an object back (upstream's `payload` convention).
    StructuredOutput,
    /// `send_user_message`: a message to the operator, recorded in the run log.
    SendUserMessage,
}

impl Tool {
    /// The roster, in the order the C135 hint lists it.
    pub const ALL: [Tool; 15] = [
        Tool::Bash,
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::FileEdit,
        Tool::Glob,
        Tool::Grep,
        Tool::GitDiff,
        Tool::GitStatus,
        Tool::GitLog,
        Tool::WebFetch,
        Tool::ReadImage,
        Tool::Sleep,
        Tool::TodoWrite,
        Tool::StructuredOutput,
        Tool::SendUserMessage,
    ];

    /// The tool's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Tool::Bash => "bash",
            Tool::ReadFile => "read_file",
            Tool::WriteFile => "write_file",
            Tool::FileEdit => "file_edit",
            Tool::Glob => "glob",
            Tool::Grep => "grep",
            Tool::GitDiff => "git_diff",
            Tool::GitStatus => "git_status",
            Tool::GitLog => "git_log",
            Tool::WebFetch => "web_fetch",
            Tool::ReadImage => "read_image",
            Tool::Sleep => "sleep",
            Tool::TodoWrite => "todo_write",
            Tool::StructuredOutput => "structured_output",
            Tool::SendUserMessage => "send_user_message",
        }
    }

    /// The tool with this name; `None` outside the roster (C135). Upstream's names for the
    /// same powers are accepted too ([`Tool::UPSTREAM_ALIASES`]).
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL
            .into_iter()
            .find(|t| t.as_str() == name)
            .or_else(|| {
                Tool::UPSTREAM_ALIASES
                    .iter()
                    .find(|(alias, _)| *alias == name)
                    .map(|(_, t)| *t)
            })
    }

    /// Upstream tool names that mean one of ours, with no more power: listing and tree views
    /// are `glob`, code search is `grep`, `run_command` is `bash`, `patch` is `file_edit`; and
    /// Claude Code's own names (`Read`, `Write`, `Edit`, `Bash`, `Glob`, `Grep`), which upstream's
    /// `claude_code` nodes list and which a delegate is given back under the same names.
    pub const UPSTREAM_ALIASES: [(&'static str, Tool); 11] = [
        ("list_files", Tool::Glob),
        ("tree", Tool::Glob),
        ("search_codebase", Tool::Grep),
        ("run_command", Tool::Bash),
        ("patch", Tool::FileEdit),
        ("Read", Tool::ReadFile),
        ("Write", Tool::WriteFile),
        ("Edit", Tool::FileEdit),
        ("Bash", Tool::Bash),
        ("Glob", Tool::Glob),
        ("Grep", Tool::Grep),
    ];

    /// Whether the tool exists to change files (`readonly` nodes do not get it).
    pub fn writes(self) -> bool {
        matches!(self, Tool::WriteFile | Tool::FileEdit)
    }
}

/// `interaction` (DSL.md §3.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interaction {
    /// The node never asks (the default).
    #[default]
    None,
    /// The node is offered the host-side `ask_user` tool.
    Ask,
}

/// `await` on a fan-out join (DSL.md §5.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AwaitMode {
    /// The first branch failure cancels the others and fails the run.
    WaitAll,
    /// Branches run to completion; the join runs if at least one arrived.
    BestEffort,
}

/// Router `mode` (DSL.md §3.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterMode {
    /// Picks one edge with the rule of §5.4.
    Condition,
    /// Takes every outgoing edge in parallel (the default).
    #[default]
    FanOutAll,
    /// Takes the next outgoing edge, in declaration order, at each visit.
    RoundRobin,
    /// A model picks one outgoing edge.
    Llm,
    /// Runs its one outgoing edge's branch once per item of [`RouterNode::over`], in parallel.
    FanOutEach,
}

impl RouterMode {
    /// Whether the router starts parallel branches that meet at a join.
    pub fn fans_out(self) -> bool {
        matches!(self, RouterMode::FanOutAll | RouterMode::FanOutEach)
    }
}

/// One edge (DSL.md §5.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// The source node.
    pub from: String,
    /// The target.
    pub to: Target,
    /// When the edge may be taken (§5.4).
    pub condition: Condition,
    /// `as L(N)`: the edge is a back-edge of a loop.
    #[serde(rename = "loop")]
    pub loop_: Option<LoopRef>,
    /// `with { … }` entries in the order written.
    pub with: Vec<Mapping>,
    /// The source line of the edge, to name it in events and errors.
    pub line: u32,
}

/// An edge's target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A declared node.
    Node(String),
    /// The run finishes.
    Done,
    /// The run fails with `WORKFLOW_FAILED`.
    Fail,
}

/// An edge's condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// No `when` and no `else`: a pure unconditional edge, or a live loop edge.
    None,
    /// `when [not] F`: the bool field F of the source's output.
    Field {
        /// The field.
        name: String,
        /// `not` was written.
        negated: bool,
    },
    /// `when "expr"`: the expression's source text (DSL.md §5.2).
    Expr(String),
    /// `else`: the explicit fallback.
    Else,
}

/// `as L(N)` or `as L("{{…}}")` on an edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopRef {
    /// The loop's name.
    pub name: String,
    /// Its cap N ≥ 1; 0 when the cap is [`Self::cap_template`].
    pub cap: u32,
    /// A cap resolved at run time: one `{{…}}` reference, resolved each time the edge is
    /// checked, whose value must be an integer in `1..=`[`MAX_LOOP_CAP`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_template: Option<String>,
}

/// The largest cap a templated loop cap may resolve to.
pub const MAX_LOOP_CAP: u32 = 100_000;

/// One `with` entry (DSL.md §5.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mapping {
    /// The input key it sets.
    pub key: String,
    /// The value.
    pub value: MappingValue,
}

/// A `with` value: numbers and booleans keep their type (decision D13).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MappingValue {
    /// Template text: exactly one reference keeps the value's JSON type, anything else renders as
    /// text (DSL.md §4.2).
    Template(String),
    /// An INT.
    Int(i64),
    /// A FLOAT.
    Float(f64),
    /// A BOOL.
    Bool(bool),
}

/// `worktree` (DSL.md §7.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Worktree {
    /// The run works in place (the default, decision D18).
    #[default]
    None,
    /// The run works in a throwaway git worktree; success lands on a branch.
    Auto,
}

/// `budget:` (DSL.md §3.8, §5.7).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The wall-clock limit as written (`"1h30m"`, or a `${…}` to expand at launch), measured
    /// from the entry node's start.
    pub max_duration: Option<String>,
    /// The most node executions (agents, judges, tools; not routers).
    pub max_iterations: Option<u64>,
    /// The most fan-out branches that run at once; the others wait for a free slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel_branches: Option<u32>,
    /// The most model tokens (input plus output, every agent node) the run may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `max_cost_usd` as written: read by `run.max_cost_usd`, not enforced (no price table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<serde_json::Number>,
}

/// The workflow's sandbox request (DSL.md §7.1–§7.3); maps onto `sandbox::Spec` (SANDBOX.md §1.2)
/// in the engine, which applies the tiers of SANDBOX.md §2.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// The mode as written: `Inherit` when the workflow has no `sandbox:`.
    pub mode: SandboxMode,
    /// `image`: a pre-built image reference (inline only).
    pub image: Option<String>,
    /// `build`: an image built for the run (inline only).
    pub build: Option<Build>,
    /// `user`: `uid`, `uid:gid` or a name; the image's default when `None`.
    pub user: Option<String>,
    /// `workspace_folder`: where the workspace appears in the container.
    pub workspace_folder: Option<String>,
    /// `host_state`.
    pub host_state: HostState,
    /// `post_create`: run once with `sh -c` after the container starts.
    pub post_create: Option<String>,
    /// `env`: the container environment.
    pub env: BTreeMap<String, String>,
    /// `mounts`: devcontainer-style specs, screened at run time.
    pub mounts: Vec<String>,
    /// `network`: `None` means no block, which is `open` (DSL.md §7.3).
    pub network: Option<Network>,
}

/// The sandbox modes (SANDBOX.md §1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Nothing written: the run-time tiers decide.
    #[default]
    Inherit,
    /// Explicit opt-out: every node runs on the host.
    None,
    /// The repository's devcontainer or the default image; degrades without a runtime.
    Auto,
    /// The block's own container; refused without a runtime.
    Inline,
}

impl SandboxMode {
    /// The mode a `sandbox:` word names; `None` for any word outside `none auto inline` (C044).
    pub fn from_word(word: &str) -> Option<SandboxMode> {
        match word {
            "none" => Some(SandboxMode::None),
            "auto" => Some(SandboxMode::Auto),
            "inline" => Some(SandboxMode::Inline),
            _ => None,
        }
    }

    /// Whether the mode asks for a container (`auto`, `inline`).
    pub fn is_active(self) -> bool {
        matches!(self, SandboxMode::Auto | SandboxMode::Inline)
    }
}

/// `build:` (DSL.md §7.2). Paths are relative to the workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// The Dockerfile, `"Dockerfile"` by default.
    pub dockerfile: String,
    /// The build context; the Dockerfile's directory when `None`.
    pub context: Option<String>,
    /// Build arguments.
    pub args: BTreeMap<String, String>,
}

/// `network:` (DSL.md §7.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// The egress mode. A block without `mode:` is an allowlist (decision D2, fail closed).
    pub mode: NetworkMode,
    /// `mode:` was not written and [`NetworkMode::Allowlist`] was assumed (C902).
    pub mode_defaulted: bool,
    /// Named rules placed before `rules`.
    pub preset: Option<NetworkPreset>,
    /// Patterns, last match wins (SANDBOX.md §6.5).
    pub rules: Vec<String>,
    /// Parsed for compatibility; it has no effect.
    pub inherit: Option<NetworkInherit>,
}

/// Known presets (SANDBOX.md §6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetworkPreset {
    /// `iterion-default`.
    #[serde(rename = "iterion-default")]
    IterionDefault,
}

impl NetworkPreset {
    /// The preset with this name; `None` for an unknown one (C044).
    pub fn from_name(name: &str) -> Option<NetworkPreset> {
        (name == "iterion-default").then_some(NetworkPreset::IterionDefault)
    }
}

/// `network.inherit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkInherit {
    /// `replace`.
    Replace,
    /// `append`.
    Append,
}

impl NetworkInherit {
    /// The value an `inherit` word names; `None` outside `replace append` (C044).
    pub fn from_word(word: &str) -> Option<NetworkInherit> {
        match word {
            "replace" => Some(NetworkInherit::Replace),
            "append" => Some(NetworkInherit::Append),
            _ => None,
        }
    }
}

pub(crate) mod lower;

#[cfg(test)]
#[path = "ir_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "test_builders.rs"]
pub(crate) mod test_builders;

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
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::ast;

/// The default of `tool_max_steps` (DSL.md §3.5, decision D15).
pub const DEFAULT_TOOL_MAX_STEPS: u32 = 50;

/// The directory file secrets are mounted under by default (SANDBOX.md §8.7).
pub const SECRETS_DIR: &str = "/run/iterion/secrets";

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
    /// Loop name → cap N (DSL.md §5.5); every edge of a loop carries the same cap.
    pub loops: BTreeMap<String, u32>,
    /// Where the run works (DSL.md §7.6).
    pub worktree: Worktree,
    /// Run caps (DSL.md §3.8); all `None` when there is no `budget:` block.
    pub budget: Budget,
    /// The workflow's sandbox request; [`SandboxMode::Inherit`] when absent (DSL.md §7.1).
    pub sandbox: Sandbox,
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

    /// The secret with this name.
    pub fn secret(&self, name: &str) -> Option<&Secret> {
        self.secrets.iter().find(|s| s.name == name)
    }

    /// Whether some node may ask the operator (`interaction: ask`): the engine refuses such a run
    /// in an active sandbox without the ask-user channel (DSL.md §6.2).
    pub fn has_ask_interaction(&self) -> bool {
        self.nodes.iter().any(|n| match &n.body {
            NodeBody::Agent(a) => a.interaction == Interaction::Ask,
            NodeBody::Tool(_) | NodeBody::Router(_) => false,
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

/// The file name a secret gets under [`SECRETS_DIR`] (SANDBOX.md §8.7): every character outside
/// `[A-Za-z0-9_.-]` becomes `_`, leading and trailing `._-` are trimmed, and an empty result
/// becomes `secret`.
pub fn sanitise_secret_name(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches(|c| matches!(c, '_' | '.' | '-'));
    if trimmed.is_empty() {
        "secret".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The default mount path of a file secret: `/run/iterion/secrets/<sanitised name>`.
pub fn default_secret_mount_path(name: &str) -> String {
    format!("{SECRETS_DIR}/{}", sanitise_secret_name(name))
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
}

/// The node kinds. Agent and judge run the same way; the kind labels events (DSL.md §3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// `agent`.
    Agent,
    /// `judge`.
    Judge,
    /// `tool`.
    Tool,
    /// `router`.
    Router,
}

impl NodeKind {
    /// The keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Agent => "agent",
            NodeKind::Judge => "judge",
            NodeKind::Tool => "tool",
            NodeKind::Router => "router",
        }
    }
}

impl From<ast::NodeKind> for NodeKind {
    fn from(k: ast::NodeKind) -> Self {
        match k {
            ast::NodeKind::Agent => NodeKind::Agent,
            ast::NodeKind::Judge => NodeKind::Judge,
            ast::NodeKind::Tool => NodeKind::Tool,
            ast::NodeKind::Router => NodeKind::Router,
        }
    }
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
}

/// An agent or judge node (DSL.md §3.5, §6.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentNode {
    /// `provider/model`, possibly holding `${…}` (expanded at launch) or `{{vars.X}}`.
    pub model: String,
    /// The system prompt's template text (a named prompt already replaced by its body).
    pub system: Option<String>,
    /// The user prompt's template text.
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
}

/// A tool node (DSL.md §3.6, §6.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolNode {
    /// The command's template text, run with `bash -c` after rendering.
    pub command: String,
    /// The input schema's name (static checks only).
    pub input: Option<String>,
    /// The output schema's name: stdout must produce a conforming object.
    pub output: Option<String>,
}

/// A router node (DSL.md §3.7): its output is its input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterNode {
    /// How it picks outgoing edges.
    pub mode: RouterMode,
}

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
}

impl Tool {
    /// The roster, in the order the C135 hint lists it.
    pub const ALL: [Tool; 6] = [
        Tool::Bash,
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::FileEdit,
        Tool::Glob,
        Tool::Grep,
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
        }
    }

    /// The tool with this name; `None` outside the roster (C135).
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.as_str() == name)
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

/// `as L(N)` on an edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopRef {
    /// The loop's name.
    pub name: String,
    /// Its cap N ≥ 1.
    pub cap: u32,
}

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

/// `host_state` (SANDBOX.md §2.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostState {
    /// Not written: the tiers decide.
    #[default]
    Unset,
    /// Bind host caches and tool state.
    Auto,
    /// Bind nothing from the host's state.
    None,
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

/// Network modes (SANDBOX.md §6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// No filtering.
    Open,
    /// A host no rule allows is refused.
    Allowlist,
    /// A host no rule denies is allowed.
    Denylist,
}

impl NetworkMode {
    /// The mode a `network.mode` word names; `None` outside `open allowlist denylist` (C044).
    pub fn from_word(word: &str) -> Option<NetworkMode> {
        match word {
            "open" => Some(NetworkMode::Open),
            "allowlist" => Some(NetworkMode::Allowlist),
            "denylist" => Some(NetworkMode::Denylist),
            _ => None,
        }
    }
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

/// Lowers a tree that passed every check. `None` only when the file declares no workflow.
///
/// Defensive on trees that did not pass the checks (it never panics): the first declaration of a
/// name wins, unknown names and words are skipped or take their default.
pub(crate) fn lower(file: &ast::File) -> Option<Workflow> {
    let wf = file.decls.iter().find_map(|d| match d {
        ast::Decl::Workflow(w) => Some(w),
        _ => None,
    })?;
    let mut vars = Vec::new();
    let mut secrets = Vec::new();
    let mut schemas = BTreeMap::new();
    let mut prompts: HashMap<&str, &str> = HashMap::new();
    let mut nodes: Vec<&ast::Node> = Vec::new();
    let mut var_names = HashSet::new();
    let mut lower_vars = |block: &ast::VarsBlock, vars: &mut Vec<Var>| {
        for v in &block.vars {
            if var_names.insert(v.name.name.clone()) {
                vars.push(lower_var(v));
            }
        }
    };
    for decl in &file.decls {
        match decl {
            ast::Decl::Vars(b) => lower_vars(b, &mut vars),
            ast::Decl::Secrets(b) => {
                for s in &b.secrets {
                    if !secrets.iter().any(|x: &Secret| x.name == s.name.name) {
                        secrets.push(lower_secret(s));
                    }
                }
            }
            ast::Decl::Prompt(p) => {
                prompts
                    .entry(p.name.name.as_str())
                    .or_insert(p.body.value.as_str());
            }
            ast::Decl::Schema(s) => {
                schemas
                    .entry(s.name.name.clone())
                    .or_insert_with(|| Schema {
                        fields: s
                            .fields
                            .iter()
                            .map(|f| SchemaField {
                                name: f.name.name.clone(),
                                ty: f.ty.into(),
                            })
                            .collect(),
                    });
            }
            ast::Decl::Node(n) => {
                if !nodes.iter().any(|x| x.name.name == n.name.name) {
                    nodes.push(n);
                }
            }
            ast::Decl::Workflow(w) => {
                if std::ptr::eq(w, wf)
                    && let Some(b) = &w.vars
                {
                    lower_vars(b, &mut vars);
                }
            }
        }
    }
    let nodes = nodes.into_iter().map(|n| lower_node(n, &prompts)).collect();
    let edges: Vec<Edge> = wf.edges.iter().map(lower_edge).collect();
    let mut loops = BTreeMap::new();
    for e in &edges {
        if let Some(l) = &e.loop_ {
            loops.entry(l.name.clone()).or_insert(l.cap);
        }
    }
    let worktree = match wf.worktree.as_ref().map(|w| w.text.as_str()) {
        Some("auto") => Worktree::Auto,
        _ => Worktree::None,
    };
    let budget = wf.budget.as_ref().map_or_else(Budget::default, |b| Budget {
        max_duration: b.max_duration.as_ref().map(|s| s.value.clone()),
        max_iterations: b.max_iterations.and_then(|i| u64::try_from(i.value).ok()),
    });
    Some(Workflow {
        name: wf.name.name.clone(),
        entry: wf
            .entry
            .as_ref()
            .map(|w| w.text.clone())
            .unwrap_or_default(),
        vars,
        secrets,
        schemas,
        nodes,
        edges,
        loops,
        worktree,
        budget,
        sandbox: wf
            .sandbox
            .as_ref()
            .map_or_else(Sandbox::default, lower_sandbox),
    })
}

/// A var default converted to its type; see [`default_json`].
fn lower_var(v: &ast::VarDef) -> Var {
    Var {
        name: v.name.name.clone(),
        ty: v.ty.into(),
        default: v.default.as_ref().and_then(|d| default_json(v.ty, d)),
    }
}

/// The JSON value of a var default of type `ty`, or `None` when the literal is not of that type
/// (C109). Shared with the C109 check so the two cannot disagree.
pub(crate) fn default_json(ty: ast::VarType, value: &ast::Value) -> Option<serde_json::Value> {
    use ast::Value as V;
    use serde_json::Value as J;
    match (ty, value) {
        (ast::VarType::String, V::Str(s)) => Some(J::String(s.value.clone())),
        (ast::VarType::String, V::Ident(i)) => Some(J::String(i.name.clone())),
        (ast::VarType::Bool, V::Bool(b, _)) => Some(J::Bool(*b)),
        (ast::VarType::Int, V::Int(i, _)) => Some(J::from(*i)),
        // An INT default of a float var is a float (DSL.md §3.1).
        (ast::VarType::Float, V::Int(i, _)) => {
            serde_json::Number::from_f64(*i as f64).map(J::Number)
        }
        (ast::VarType::Float, V::Float(f, _)) => serde_json::Number::from_f64(*f).map(J::Number),
        (ast::VarType::StringList, V::List(items, _)) => items
            .iter()
            .map(|item| match item {
                V::Str(s) => Some(J::String(s.value.clone())),
                V::Ident(i) => Some(J::String(i.name.clone())),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(J::Array),
        (ast::VarType::StringList, V::Str(s)) => match serde_json::from_str::<J>(&s.value).ok()? {
            J::Array(items) if items.iter().all(J::is_string) => Some(J::Array(items)),
            _ => None,
        },
        (ast::VarType::Json, V::Str(s)) => serde_json::from_str::<J>(&s.value).ok(),
        _ => None,
    }
}

/// The delivery a secret's `as` names: `Some(true)` for `file`, `Some(false)` for `value` or
/// absent, `None` for any other word (C094).
pub(crate) fn secret_is_file(s: &ast::SecretDef) -> Option<bool> {
    match s.as_.as_ref().map(|w| w.text.as_str()) {
        None | Some("value") => Some(false),
        Some("file") => Some(true),
        Some(_) => None,
    }
}

fn lower_secret(s: &ast::SecretDef) -> Secret {
    let name = s.name.name.clone();
    let delivery = if secret_is_file(s) == Some(true) {
        Delivery::File {
            mount_path: s
                .mount_path
                .as_ref()
                .map_or_else(|| default_secret_mount_path(&name), |p| p.value.clone()),
            env: s.env.as_ref().map(|e| e.value.clone()),
        }
    } else {
        Delivery::Value
    };
    Secret {
        value: s
            .value
            .as_ref()
            .map_or_else(|| format!("${{{name}}}"), |v| v.value.clone()),
        delivery,
        hosts: s
            .hosts
            .as_ref()
            .map(|h| h.items.iter().map(|i| i.value.clone()).collect())
            .unwrap_or_default(),
        optional: s.optional.is_some_and(|o| o.value),
        name,
    }
}

fn prompt_text(p: &ast::PromptRef, prompts: &HashMap<&str, &str>) -> String {
    match p {
        ast::PromptRef::Named(id) => prompts
            .get(id.name.as_str())
            .map(|s| (*s).to_owned())
            .unwrap_or_default(),
        ast::PromptRef::Inline(s) => s.value.clone(),
    }
}

fn lower_await(a: Option<&(ast::AwaitMode, ast::Span)>) -> Option<AwaitMode> {
    a.map(|(m, _)| match m {
        ast::AwaitMode::WaitAll => AwaitMode::WaitAll,
        ast::AwaitMode::BestEffort => AwaitMode::BestEffort,
    })
}

fn lower_node(n: &ast::Node, prompts: &HashMap<&str, &str>) -> Node {
    let ident = |i: &Option<ast::Ident>| i.as_ref().map(|i| i.name.clone());
    let (await_mode, body) = match &n.body {
        ast::NodeBody::Agent(a) => {
            let mut tools = Vec::new();
            for w in a.tools.iter().flat_map(|l| &l.items) {
                if let Some(t) = Tool::from_name(&w.text)
                    && !tools.contains(&t)
                {
                    tools.push(t);
                }
            }
            let body = NodeBody::Agent(AgentNode {
                model: a.model.value.clone(),
                system: a.system.as_ref().map(|p| prompt_text(p, prompts)),
                user: prompt_text(&a.user, prompts),
                input: ident(&a.input),
                output: ident(&a.output),
                tools,
                tool_max_steps: a
                    .tool_max_steps
                    .and_then(|i| u32::try_from(i.value).ok())
                    .unwrap_or(DEFAULT_TOOL_MAX_STEPS),
                interaction: match a.interaction {
                    Some((ast::Interaction::Ask, _)) => Interaction::Ask,
                    Some((ast::Interaction::None, _)) | None => Interaction::None,
                },
            });
            (lower_await(a.await_.as_ref()), body)
        }
        ast::NodeBody::Tool(t) => (
            lower_await(t.await_.as_ref()),
            NodeBody::Tool(ToolNode {
                command: t.command.value.clone(),
                input: ident(&t.input),
                output: ident(&t.output),
            }),
        ),
        ast::NodeBody::Router(r) => (
            None,
            NodeBody::Router(RouterNode {
                mode: match r.mode {
                    ast::RouterMode::Condition => RouterMode::Condition,
                    ast::RouterMode::FanOutAll => RouterMode::FanOutAll,
                },
            }),
        ),
    };
    Node {
        id: n.name.name.clone(),
        kind: n.kind.into(),
        await_mode,
        body,
    }
}

fn lower_edge(e: &ast::Edge) -> Edge {
    let to = match e.to.name.as_str() {
        "done" => Target::Done,
        "fail" => Target::Fail,
        other => Target::Node(other.to_owned()),
    };
    let condition = match (&e.when, e.else_) {
        (Some(ast::When::Field { negated, field, .. }), _) => Condition::Field {
            name: field.name.clone(),
            negated: *negated,
        },
        (Some(ast::When::Expr { text, .. }), _) => Condition::Expr(text.value.clone()),
        (None, Some(_)) => Condition::Else,
        (None, None) => Condition::None,
    };
    let with = e
        .with
        .iter()
        .flat_map(|w| &w.entries)
        .filter_map(|(k, v)| {
            let value = match v {
                ast::Value::Str(s) => MappingValue::Template(s.value.clone()),
                ast::Value::Ident(i) => MappingValue::Template(i.name.clone()),
                ast::Value::Int(i, _) => MappingValue::Int(*i),
                ast::Value::Float(f, _) => MappingValue::Float(*f),
                ast::Value::Bool(b, _) => MappingValue::Bool(*b),
                ast::Value::List(..) | ast::Value::Map(..) => return None,
            };
            Some(Mapping {
                key: k.name.clone(),
                value,
            })
        })
        .collect();
    Edge {
        from: e.from.name.clone(),
        to,
        condition,
        loop_: e.loop_.as_ref().map(|l| LoopRef {
            name: l.name.name.clone(),
            cap: u32::try_from(l.cap.max(1)).unwrap_or(u32::MAX),
        }),
        with,
        line: e.from.span.line,
    }
}

fn map_entries(m: &ast::MapValue) -> BTreeMap<String, String> {
    m.entries
        .iter()
        .map(|e| (e.key.name.clone(), e.value.value.clone()))
        .collect()
}

/// The typed form of a workflow `sandbox:` that passed C044.
pub(crate) fn lower_sandbox(decl: &ast::SandboxDecl) -> Sandbox {
    let b = match decl {
        ast::SandboxDecl::Short(w) => {
            return Sandbox {
                mode: SandboxMode::from_word(&w.text).unwrap_or(SandboxMode::Inline),
                ..Sandbox::default()
            };
        }
        ast::SandboxDecl::Block(b) => b,
    };
    let text = |s: &Option<ast::StrLit>| s.as_ref().map(|s| s.value.clone());
    Sandbox {
        mode: b
            .mode
            .as_ref()
            .and_then(|w| SandboxMode::from_word(&w.text))
            .unwrap_or(SandboxMode::Inline),
        image: text(&b.image),
        build: b.build.as_ref().map(|build| Build {
            dockerfile: build
                .dockerfile
                .as_ref()
                .map_or_else(|| "Dockerfile".to_owned(), |d| d.value.clone()),
            context: text(&build.context),
            args: build.args.as_ref().map(map_entries).unwrap_or_default(),
        }),
        user: text(&b.user),
        workspace_folder: text(&b.workspace_folder),
        host_state: match b.host_state.as_ref().map(|w| w.text.as_str()) {
            Some("auto") => HostState::Auto,
            Some("none") => HostState::None,
            _ => HostState::Unset,
        },
        post_create: text(&b.post_create),
        env: b.env.as_ref().map(map_entries).unwrap_or_default(),
        mounts: b
            .mounts
            .as_ref()
            .map(|m| m.items.iter().map(|i| i.value.clone()).collect())
            .unwrap_or_default(),
        network: b.network.as_ref().map(|n| {
            let mode = n
                .mode
                .as_ref()
                .and_then(|w| NetworkMode::from_word(&w.text));
            Network {
                mode: mode.unwrap_or(NetworkMode::Allowlist),
                mode_defaulted: n.mode.is_none(),
                preset: n
                    .preset
                    .as_ref()
                    .and_then(|p| NetworkPreset::from_name(&p.value)),
                rules: n
                    .rules
                    .as_ref()
                    .map(|r| r.items.iter().map(|i| i.value.clone()).collect())
                    .unwrap_or_default(),
                inherit: n
                    .inherit
                    .as_ref()
                    .and_then(|w| NetworkInherit::from_word(&w.text)),
            }
        }),
    }
}

#[cfg(test)]
#[path = "ir_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "test_builders.rs"]
pub(crate) mod test_builders;

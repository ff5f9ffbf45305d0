//! The typed syntax tree of one `.iter` file (DSL.md §2–§3).
//!
//! The parser (`parser.rs`) produces it and reports every parse-stage E-code; the checks
//! (`check/`) read it and report C-codes; `ir.rs` lowers a clean tree into `ir::Workflow`.
//!
//! Invariants the parser guarantees when it reported **no** E-code:
//! - every required property is present (the fields below are not `Option`): `model`, `user`,
//!   `command`;
//! - every enumerated word checked at parse stage (E020: `backend`, router `mode`, `await`,
//!   `interaction`) is already an enum here; words whose check is a C-code (sandbox `mode`,
//!   `host_state`, network `mode`/`inherit`, `worktree`, a secret's `as`) stay [`Word`]s;
//! - ints are in range, `tool_max_steps` ≥ 0, `max_iterations` ≥ 1, a literal `max_duration` parses;
//! - no property appears twice in one block (E010) and every property is known (E012).
//!
//! When an E-code was reported, the tree may be partial: declarations that failed are dropped.

pub use iterion_vocab::NodeKind;

/// A position in the normalised source: 1-based line, 1-based column counted in Unicode scalar
/// values (a tab counts as one), and the width of the anchored token in columns (at least 1; for
/// a token spanning lines, the width of its part on the first line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// Width in columns on `line`, at least 1.
    pub width: u32,
}

impl Span {
    /// A span at `line:col` covering `width` columns (clamped to at least 1).
    pub fn new(line: u32, col: u32, width: u32) -> Self {
        Self {
            line,
            col,
            width: width.max(1),
        }
    }
}

/// An identifier with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    /// The spelling.
    pub name: String,
    /// Where it was written.
    pub span: Span,
}

/// A word (DSL.md §3): an IDENT, or a quoted string holding one. Enumerations checked by a C-code
/// keep the author's spelling here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// The word as written (without quotes).
    pub text: String,
    /// Where it was written.
    pub span: Span,
}

/// How a string literal was written (DSL.md §1.5–§1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrKind {
    /// `"…"`.
    Quoted,
    /// `` `…` ``.
    Raw,
    /// `key: |` block scalar.
    Block,
    /// A `prompt NAME:` body.
    PromptBody,
    /// A bare IDENT standing for its own spelling where a string was expected.
    Ident,
}

/// Where one source line of a string's value starts: value character offset → source position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineStart {
    /// Offset in the value, counted in chars, of the first char of this line's content.
    pub value_offset: usize,
    /// 1-based source line.
    pub line: u32,
    /// 1-based source column of that first char.
    pub col: u32,
}

/// A string value with the map back to its source text.
#[derive(Clone, Debug, PartialEq)]
pub struct StrLit {
    /// The value (after escapes / block rules).
    pub value: String,
    /// How it was written.
    pub kind: StrKind,
    /// The token: the opening quote, or the first content char of a block / prompt body.
    pub span: Span,
    /// One entry per source line the value comes from, in order; never empty.
    pub lines: Vec<LineStart>,
}

impl StrLit {
    /// The source position of the value's char at `offset` (chars), `width` columns wide.
    /// Positions inside a line assume one value char per source column, which holds for every
    /// kind except decoded escapes under `strict-escape: on` (off by the escapes before it).
    pub fn span_at(&self, offset: usize, width: u32) -> Span {
        let start = self
            .lines
            .iter()
            .rev()
            .find(|l| l.value_offset <= offset)
            .or(self.lines.first());
        match start {
            Some(l) => {
                let delta =
                    u32::try_from(offset.saturating_sub(l.value_offset)).unwrap_or(u32::MAX);
                Span::new(l.line, l.col.saturating_add(delta), width)
            }
            None => self.span,
        }
    }
}

/// Any property value (DSL.md §2.1 `value`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string of any form (a bare IDENT is [`Value::Ident`]).
    Str(StrLit),
    /// A bare identifier.
    Ident(Ident),
    /// An INT token.
    Int(i64, Span),
    /// A FLOAT token.
    Float(f64, Span),
    /// `true` / `false`.
    Bool(bool, Span),
    /// `[ … ]`; the span is the `[`.
    List(Vec<Value>, Span),
    /// `{ K: V, … }`; the span is the `{`.
    Map(Vec<(Ident, Value)>, Span),
}

impl Value {
    /// The position of the value's first token.
    pub fn span(&self) -> Span {
        match self {
            Value::Str(s) => s.span,
            Value::Ident(i) => i.span,
            Value::Int(_, s) | Value::Float(_, s) | Value::Bool(_, s) => *s,
            Value::List(_, s) | Value::Map(_, s) => *s,
        }
    }
}

/// A `map` property (DSL.md §3): IDENT → string, numbers and bools taken as their spelling,
/// written inline or as a nested block.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MapValue {
    /// Entries in source order (keys are unique: E010).
    pub entries: Vec<MapEntry>,
    /// The `{`, or the key of the nested block.
    pub span: Span,
}

/// One entry of a [`MapValue`].
#[derive(Clone, Debug, PartialEq)]
pub struct MapEntry {
    /// The key.
    pub key: Ident,
    /// The value as text (a number or bool as its spelling).
    pub value: StrLit,
}

/// A list of strings with the position of its `[`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct StrList {
    /// The items.
    pub items: Vec<StrLit>,
    /// The `[`.
    pub span: Span,
}

/// A list of words with the position of its `[`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct WordList {
    /// The items.
    pub items: Vec<Word>,
    /// The `[`.
    pub span: Span,
}

/// An int value with its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntLit {
    /// The value.
    pub value: i64,
    /// Where it was written.
    pub span: Span,
}

/// A bool value with its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoolLit {
    /// The value.
    pub value: bool,
    /// Where it was written.
    pub span: Span,
}

/// One parsed file.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct File {
    /// `## strict-escape: on` was given (DSL.md §1.3).
    pub strict_escape: bool,
    /// Declarations in source order.
    pub decls: Vec<Decl>,
    /// Every quoted string whose value contains `\"` in the default profile (C143), by position
    /// of its opening quote. Collected by the parser so no check walks every string.
    pub backslash_quote_strings: Vec<Span>,
}

/// A top-level declaration.
#[derive(Clone, Debug, PartialEq)]
pub enum Decl {
    /// `vars:`.
    Vars(VarsBlock),
    /// `secrets:`.
    Secrets(SecretsBlock),
    /// `prompt NAME:`.
    Prompt(Prompt),
    /// `schema NAME:`.
    Schema(Schema),
    /// `agent|judge|tool|router NAME:`.
    Node(Node),
    /// `workflow NAME:`.
    Workflow(Workflow),
    /// `cursor NAME:`.
    Cursor(CursorDecl),
    /// `mcp_server NAME:`.
    McpServer(McpServerDecl),
    /// `presets:`.
    Presets(PresetsBlock),
    /// `attachments:` at top level.
    Attachments(AttachmentsBlock),
}

/// `cursor NAME:` (a prompt-calibration dial): `values:` (named fragments) or `bands:` (fragments
/// over sub-ranges of `[0, 1]`), checked by C085/C086.
#[derive(Clone, Debug, PartialEq)]
pub struct CursorDecl {
    /// The name.
    pub name: Ident,
    /// `description`.
    pub description: Option<StrLit>,
    /// `values:` entries in source order.
    pub values: Option<Vec<(Ident, StrLit)>>,
    /// `bands:` entries: the range as written (`"0.0..0.33"`) and its fragment.
    pub bands: Option<Vec<(StrLit, StrLit)>>,
}

/// A node's `cursors:` block: `enabled` and one setting per cursor.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CursorsBlock {
    /// The `cursors` key.
    pub key: Span,
    /// `enabled` (absent: false, as upstream).
    pub enabled: Option<BoolLit>,
    /// `NAME: value` settings; the value as written (a word, a number's spelling, or a string
    /// that may hold `${VAR}`).
    pub settings: Vec<(Ident, StrLit)>,
}

/// `mcp_server NAME:`.
#[derive(Clone, Debug, PartialEq)]
pub struct McpServerDecl {
    /// The name.
    pub name: Ident,
    /// `transport` (C025 outside stdio / http / sse; absent: stdio).
    pub transport: Option<Word>,
    /// `command` (stdio).
    pub command: Option<StrLit>,
    /// `args` (stdio).
    pub args: Option<StrList>,
    /// `env` (stdio): set in the server's environment.
    pub env: Option<MapValue>,
    /// `url` (http / sse).
    pub url: Option<StrLit>,
    /// `auth:` block, by its key (C038 / not honoured).
    pub auth: Option<McpAuth>,
}

/// `auth:` of an `mcp_server`.
#[derive(Clone, Debug, PartialEq)]
pub struct McpAuth {
    /// The `auth` key.
    pub key: Span,
    /// `type`.
    pub type_: Option<StrLit>,
}

/// A node's or the workflow's `mcp:` block.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct McpBlock {
    /// The `mcp` key.
    pub key: Span,
    /// `servers`.
    pub servers: Option<WordList>,
    /// `disable` (node: drop these of the workflow's).
    pub disable: Option<WordList>,
    /// `inherit` (node: take the workflow's servers; absent: true).
    pub inherit: Option<BoolLit>,
}

/// `presets:` — named bundles of var values.
#[derive(Clone, Debug, PartialEq)]
pub struct PresetsBlock {
    /// The `presets` keyword.
    pub keyword: Span,
    /// Each preset: its name and `VAR: value` entries.
    pub presets: Vec<(Ident, Vec<(Ident, Value)>)>,
}

/// `attachments:` (top level or in the workflow).
#[derive(Clone, Debug, PartialEq)]
pub struct AttachmentsBlock {
    /// The `attachments` keyword.
    pub keyword: Span,
    /// The declared attachments.
    pub items: Vec<AttachmentDef>,
}

/// One attachment: `NAME: file|image` with optional properties.
#[derive(Clone, Debug, PartialEq)]
pub struct AttachmentDef {
    /// The name.
    pub name: Ident,
    /// `file` or `image`.
    pub kind: Word,
    /// `description`.
    pub description: Option<StrLit>,
    /// `accept_mime`.
    pub accept_mime: Option<StrList>,
    /// `required`.
    pub required: Option<BoolLit>,
}

/// The var types (DSL.md §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VarType {
    /// `string`.
    String,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `float`.
    Float,
    /// `json`.
    Json,
    /// `string[]`.
    StringList,
}

impl VarType {
    /// The spelling in source.
    pub fn as_str(self) -> &'static str {
        match self {
            VarType::String => "string",
            VarType::Bool => "bool",
            VarType::Int => "int",
            VarType::Float => "float",
            VarType::Json => "json",
            VarType::StringList => "string[]",
        }
    }
}

/// A `vars:` block.
#[derive(Clone, Debug, PartialEq)]
pub struct VarsBlock {
    /// The `vars` keyword.
    pub keyword: Span,
    /// Definitions in order.
    pub vars: Vec<VarDef>,
}

/// `NAME: TYPE [= default]`.
#[derive(Clone, Debug, PartialEq)]
pub struct VarDef {
    /// The name.
    pub name: Ident,
    /// The type.
    pub ty: VarType,
    /// The type token.
    pub ty_span: Span,
    /// `[enum: "a", "b"]` after a `string` type: the only values the var may take.
    pub enum_values: Option<StrList>,
    /// The default literal, unchecked against the type (that is C109).
    pub default: Option<Value>,
}

/// A `secrets:` block.
#[derive(Clone, Debug, PartialEq)]
pub struct SecretsBlock {
    /// The `secrets` keyword.
    pub keyword: Span,
    /// Definitions in order (duplicates kept: C090 is a compile check).
    pub secrets: Vec<SecretDef>,
}

/// One secret, short form or block (DSL.md §3.2). Values are as written; C09x checks them.
#[derive(Clone, Debug, PartialEq)]
pub struct SecretDef {
    /// The name.
    pub name: Ident,
    /// `value` (or the short form's string).
    pub value: Option<StrLit>,
    /// `as`.
    pub as_: Option<Word>,
    /// `mount_path`.
    pub mount_path: Option<StrLit>,
    /// `env`.
    pub env: Option<StrLit>,
    /// `hosts`.
    pub hosts: Option<StrList>,
    /// `optional`.
    pub optional: Option<BoolLit>,
    /// `description`.
    pub description: Option<StrLit>,
}

/// `prompt NAME:` and its body.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    /// The name.
    pub name: Ident,
    /// The body (kind [`StrKind::PromptBody`]); template text.
    pub body: StrLit,
}

/// `schema NAME:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// The name.
    pub name: Ident,
    /// Fields in order (unique: E010).
    pub fields: Vec<Field>,
}

/// A schema field.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The name.
    pub name: Ident,
    /// The type.
    pub ty: VarType,
    /// The type token.
    pub ty_span: Span,
    /// `[enum: "a", "b"]` after a `string` type: the values the field may hold.
    pub enum_values: Option<StrList>,
}

/// A node declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Which kind.
    pub kind: NodeKind,
    /// The kind keyword.
    pub kind_span: Span,
    /// The name.
    pub name: Ident,
    /// The kind's properties.
    pub body: NodeBody,
}

/// Per-kind properties.
#[derive(Clone, Debug, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "built once per declaration and read in place; boxing buys nothing here"
)]
pub enum NodeBody {
    /// `agent` and `judge`.
    Agent(AgentProps),
    /// `tool`.
    Tool(ToolProps),
    /// `router`.
    Router(RouterProps),
    /// `subbot`.
    Subbot(SubbotProps),
    /// `compute`.
    Compute(ComputeProps),
    /// `human`.
    Human(HumanProps),
    /// `fail NAME:`.
    Fail(FailProps),
}

/// A prompt property: a declared prompt's name, or inline text.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptRef {
    /// An IDENT naming a `prompt` (C003 if none).
    Named(Ident),
    /// Inline prompt text (any string form).
    Inline(StrLit),
}

/// `interaction` (E020 outside the list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interaction {
    /// `none`.
    None,
    /// `ask`.
    Ask,
}

/// `await` (E020 outside the list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AwaitMode {
    /// `wait_all`.
    WaitAll,
    /// `best_effort`.
    BestEffort,
}

/// Router `mode` (E020 outside the list).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RouterMode {
    /// `condition`.
    Condition,
    /// `fan_out_all` (the default).
    #[default]
    FanOutAll,
    /// `round_robin`: the next outgoing edge, in declaration order, at each visit.
    RoundRobin,
    /// `llm`: a model picks the outgoing edge.
    Llm,
    /// `fan_out_each`: the one outgoing edge's branch, once per item of `over`.
    FanOutEach,
}

/// `backend` (E020 outside the list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `claw`, the built-in loop (the default).
    Claw,
    /// `claude_code`: the `claude` CLI.
    ClaudeCode,
    /// `codex`: the `codex` CLI.
    Codex,
}

/// `session` of a delegate node (E020 outside the list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Session {
    /// A new CLI session (the default).
    Fresh,
    /// Resume the session the previous delegate node of the same backend left.
    Inherit,
    /// Resume a copy of it, leaving the original as it was.
    Fork,
    /// `artifacts_only`: a new session that sees only published artifacts (as `fresh` here).
    ArtifactsOnly,
    /// `inherit_if_available`: `inherit`, or `fresh` without an earlier session.
    InheritIfAvailable,
}

/// The properties a delegate backend reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DelegateProps {
    /// `backend`, with the value's span.
    pub backend: Option<(Backend, Span)>,
    /// `session` (delegates), with the value's span.
    pub session: Option<(Session, Span)>,
    /// `reasoning_effort` (delegates): a word passed to the CLI.
    pub reasoning_effort: Option<Word>,
    /// `max_tokens` (≥ 1).
    pub max_tokens: Option<IntLit>,
    /// `provider`: which provider serves a `model` written without `provider/`.
    pub provider: Option<StrLit>,
    /// `skills`: the bundle skills the node relies on (C923 for one the bundle lacks).
    pub skills: Option<StrList>,
}

/// `agent` / `judge` properties (DSL.md §3.5). `backend` is checked (E020 outside `claw`,
/// `claude_code`, `codex`).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentProps {
    /// `model`; required unless the node (or the workflow's `default_backend`) names a delegate
    /// backend, which then runs its CLI's default model.
    pub model: Option<StrLit>,
    /// `backend`, `session`, `reasoning_effort`, `max_tokens` (boxed: most nodes have none).
    pub delegate: Box<DelegateProps>,
    /// `system`.
    pub system: Option<PromptRef>,
    /// `user`; without it the user message is the node's input as JSON (upstream's fallback).
    pub user: Option<PromptRef>,
    /// `input` schema name.
    pub input: Option<Ident>,
    /// `output` schema name.
    pub output: Option<Ident>,
    /// `tools`.
    pub tools: Option<WordList>,
    /// `tool_max_steps` (≥ 0; `0` is upstream's "not set", the default).
    pub tool_max_steps: Option<IntLit>,
    /// `interaction`, with the value's span.
    pub interaction: Option<(Interaction, Span)>,
    /// `await`, with the value's span.
    pub await_: Option<(AwaitMode, Span)>,
    /// `sandbox` (parsed, checked, never honoured).
    pub sandbox: Option<SandboxDecl>,
    /// `publish`: the artifact name the node's output is stored under.
    pub publish: Option<Ident>,
    /// `readonly`: the node gets no tool that writes (`write_file`, `file_edit`).
    pub readonly: Option<BoolLit>,
    /// `cursors` and `mcp` (boxed: most nodes have neither).
    pub extras: Box<AgentExtras>,
}

/// The agent properties of cursors and MCP servers.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AgentExtras {
    /// `cursors:`.
    pub cursors: Option<CursorsBlock>,
    /// `mcp:`.
    pub mcp: Option<McpBlock>,
    /// Upstream properties accepted but not enforced (`capabilities`, `compaction`, `memory`):
    /// their keys, for C943.
    pub unenforced: Vec<Ident>,
    /// `permission` / `allow` / `ask` / `deny`.
    pub permission: PermissionProps,
}

/// The tool-permission gate's properties, on a workflow or an agent ([`crate::permission`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PermissionProps {
    /// `permission: off | ask | deny`.
    pub mode: Option<(crate::permission::PermissionMode, Span)>,
    /// `allow: [RULE, …]`.
    pub allow: Option<StrList>,
    /// `ask: [RULE, …]`.
    pub ask: Option<StrList>,
    /// `deny: [RULE, …]`.
    pub deny: Option<StrList>,
}

/// A script tool's `language` (E020 outside the allow-list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptLanguage {
    /// `sh` (the default for `script:`).
    Sh,
    /// `bash`.
    Bash,
    /// `js` / `node`.
    Node,
    /// `py` / `python` / `python3`.
    Python,
}

impl ScriptLanguage {
    /// The line comment that starts a comment line of the language (`template::parse_script`).
    pub fn line_comment(self) -> &'static str {
        match self {
            ScriptLanguage::Node => "//",
            ScriptLanguage::Sh | ScriptLanguage::Bash | ScriptLanguage::Python => "#",
        }
    }
}

/// `tool` properties (DSL.md §3.6).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolProps {
    /// `command` (required unless `script` is given); template text. For a script tool this
    /// holds the `script` text.
    pub command: StrLit,
    /// `Some` for a `script:` tool: its `language` (`sh` when absent), with the span of the
    /// `script` key.
    pub script: Option<(ScriptLanguage, Span)>,
    /// `publish`: the artifact name the node's output is stored under.
    pub publish: Option<Ident>,
    /// `input` schema name.
    pub input: Option<Ident>,
    /// `output` schema name.
    pub output: Option<Ident>,
    /// `await`, with the value's span.
    pub await_: Option<(AwaitMode, Span)>,
    /// `sandbox` (parsed, checked, never honoured).
    pub sandbox: Option<SandboxDecl>,
}

/// `router` properties (DSL.md §3.7).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RouterProps {
    /// `mode`; `fan_out_all` when absent.
    pub mode: RouterMode,
    /// `model` (`llm` routers only).
    pub model: Option<StrLit>,
    /// `system` (`llm` routers only).
    pub system: Option<PromptRef>,
    /// `user` (`llm` routers only).
    pub user: Option<PromptRef>,
    /// `multi` (`llm` routers only).
    pub multi: Option<BoolLit>,
    /// `backend` (`llm` routers only): the backend that asks the model, with the value's span.
    pub backend: Option<(Backend, Span)>,
    /// `provider` (`llm` routers only).
    pub provider: Option<StrLit>,
    /// `reasoning_effort` (`llm` routers only).
    pub reasoning_effort: Option<Word>,
    /// `over` (`fan_out_each` only): the template of the list to fan out over.
    pub over: Option<StrLit>,
    /// `as` (`fan_out_each` only): the item's name on the router's output (`item` when absent).
    pub as_: Option<Word>,
    /// `key` (`fan_out_each` only): the field naming each item, for `depends_on`.
    pub key: Option<Word>,
    /// `depends_on` (`fan_out_each` only): the field listing the keys an item waits for.
    pub depends_on: Option<Word>,
}

/// `fail NAME:` properties: a named failure (upstream's typed fail node).
#[derive(Clone, Debug, PartialEq)]
pub struct FailProps {
    /// `code`: the workflow's own failure code, `UPPER_SNAKE` (required).
    pub code: Option<Word>,
    /// `message`: the failure message, a template rendered when the node is reached.
    pub message: Option<StrLit>,
    /// `description`: for readers; not shown at run time.
    pub description: Option<StrLit>,
    /// `resumable`: `iterion resume` runs the node that routed here again.
    pub resumable: Option<BoolLit>,
}

/// `compute` properties: each `expr` entry is one output field.
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeProps {
    /// `publish`: the artifact name the node's output is stored under.
    pub publish: Option<Ident>,
    /// `input` schema name.
    pub input: Option<Ident>,
    /// `output` schema name.
    pub output: Option<Ident>,
    /// A legacy `join` declaration's `output:`: checked to name a schema, never applied.
    pub join_output: Option<Ident>,
    /// `await`, with the value's span.
    pub await_: Option<(AwaitMode, Span)>,
    /// `expr:` entries in order: output field → expression string (required, non-empty).
    pub expr: Vec<(Ident, StrLit)>,
}

/// A `human` node's `interaction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HumanMode {
    /// `human` (the default): always pause for the operator.
    Human,
    /// `llm`: a model answers; never pauses.
    Llm,
    /// `llm_or_human`: a model answers, or asks the operator (pausing).
    LlmOrHuman,
}

/// `human` properties.
#[derive(Clone, Debug, PartialEq)]
pub struct HumanProps {
    /// `input` schema name.
    /// `publish`: the artifact name the answer is stored under.
    pub publish: Option<Ident>,
    /// `input`.
    pub input: Option<Ident>,
    /// `output` schema name.
    pub output: Option<Ident>,
    /// `instructions`: what the operator (or the model) is asked.
    pub instructions: Option<PromptRef>,
    /// `interaction`, with the value's span.
    pub interaction: Option<(HumanMode, Span)>,
    /// `model` (required for `llm` / `llm_or_human`).
    pub model: Option<StrLit>,
    /// `system` (model modes).
    pub system: Option<PromptRef>,
    /// `min_answers` (≥ 0; documentation of the form: one answer is always required).
    pub min_answers: Option<IntLit>,
    /// `await`, with the value's span.
    pub await_: Option<(AwaitMode, Span)>,
}

/// `subbot` properties (DSL.md §3.9).
#[derive(Clone, Debug, PartialEq)]
pub struct SubbotProps {
    /// `source` (required): the child `.iter` file, relative to the parent file's directory.
    pub source: StrLit,
    /// `output` schema name.
    pub output: Option<Ident>,
    /// `await`, with the value's span.
    pub await_: Option<(AwaitMode, Span)>,
    /// `with { … }`: values added to the child's input (and so its vars), rendered when the
    /// node starts.
    pub with: Option<WithMap>,
    /// `isolated`: accepted (every child here runs in its parent's sandbox; see docs).
    pub isolated: Option<BoolLit>,
}

/// A `sandbox:` property, short or block (DSL.md §7.1).
#[derive(Clone, Debug, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "built once per declaration and read in place; boxing buys nothing here"
)]
pub enum SandboxDecl {
    /// `sandbox: WORD`.
    Short(Word),
    /// `sandbox:` with a nested block (possibly empty).
    Block(SandboxBlock),
}

/// The fields of a sandbox block (DSL.md §7.2), as written.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SandboxBlock {
    /// The `sandbox` key.
    pub key: Span,
    /// `mode`.
    pub mode: Option<Word>,
    /// `image`.
    pub image: Option<StrLit>,
    /// `build`.
    pub build: Option<BuildBlock>,
    /// `user`.
    pub user: Option<StrLit>,
    /// `workspace_folder`.
    pub workspace_folder: Option<StrLit>,
    /// `host_state`.
    pub host_state: Option<Word>,
    /// `post_create`.
    pub post_create: Option<StrLit>,
    /// `env`.
    pub env: Option<MapValue>,
    /// `mounts`.
    pub mounts: Option<StrList>,
    /// `network`.
    pub network: Option<NetworkBlock>,
}

/// `build:` inside a sandbox block.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct BuildBlock {
    /// The `build` key.
    pub key: Span,
    /// `dockerfile`.
    pub dockerfile: Option<StrLit>,
    /// `context`.
    pub context: Option<StrLit>,
    /// `args`.
    pub args: Option<MapValue>,
}

/// `network:` inside a sandbox block (DSL.md §7.3).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NetworkBlock {
    /// The `network` key.
    pub key: Span,
    /// `mode`.
    pub mode: Option<Word>,
    /// `preset`.
    pub preset: Option<StrLit>,
    /// `rules`.
    pub rules: Option<StrList>,
    /// `inherit`.
    pub inherit: Option<Word>,
}

/// `workflow NAME:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Workflow {
    /// The name.
    pub name: Ident,
    /// `entry` (C008 when absent).
    pub entry: Option<Word>,
    /// A `vars:` block inside the workflow.
    pub vars: Option<VarsBlock>,
    /// `sandbox`.
    pub sandbox: Option<SandboxDecl>,
    /// `worktree` (C142 outside none/auto).
    pub worktree: Option<Word>,
    /// `repo_devbox` (C134 outside on/off).
    pub repo_devbox: Option<Word>,
    /// `workspace_checkpoint` (C139 outside on/off; `on` is C141: nothing here pushes a run's
    /// workspace mid-run, `off` is what every run does).
    pub workspace_checkpoint: Option<Word>,
    /// `budget`.
    pub budget: Option<Budget>,
    /// `default_backend`: the backend of agent and judge nodes that name none.
    pub default_backend: Option<(Backend, Span)>,
    /// `permission` / `allow` / `ask` / `deny`: every agent's, unless it says otherwise (boxed:
    /// most workflows have none).
    pub permission: Box<PermissionProps>,
    /// `mcp:` (the servers every agent gets unless it opts out).
    pub mcp: Option<McpBlock>,
    /// `attachments:` inside the workflow.
    pub attachments: Option<AttachmentsBlock>,
    /// Upstream members accepted but not enforced (`compaction`, `interaction`): their keys,
    /// for C943.
    pub unenforced: Vec<Ident>,
    /// Edges in declaration order.
    pub edges: Vec<Edge>,
}

/// `budget:`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Budget {
    /// The `budget` key.
    pub key: Span,
    /// `max_duration` as written (a literal one already parsed fine; `${…}` is expanded at launch).
    pub max_duration: Option<StrLit>,
    /// `max_iterations` (≥ 1).
    pub max_iterations: Option<IntLit>,
    /// `max_parallel_branches` (≥ 1): the most fan-out branches running at once.
    pub max_parallel_branches: Option<IntLit>,
    /// `max_tokens` (≥ 1): the most model tokens (input and output) the run may use.
    pub max_tokens: Option<IntLit>,
    /// `max_cost_usd`: parsed, not enforced (there is no price table).
    pub max_cost_usd: Option<Value>,
}

/// `FROM -> TO {clause}` (DSL.md §5.1).
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    /// Source node name.
    pub from: Ident,
    /// Target node name (may be `done` / `fail`).
    pub to: Ident,
    /// `when …`.
    pub when: Option<When>,
    /// The `else` keyword.
    pub else_: Option<Span>,
    /// `as L(N)`.
    pub loop_: Option<LoopClause>,
    /// `with { … }`.
    pub with: Option<WithMap>,
}

/// A `when` clause.
#[derive(Clone, Debug, PartialEq)]
pub enum When {
    /// `when [not] F`.
    Field {
        /// `not` was written.
        negated: bool,
        /// The field.
        field: Ident,
        /// The `when` keyword.
        span: Span,
    },
    /// `when "expr"` / `` when `expr` ``.
    Expr {
        /// The expression's string (diagnostics point at its opening quote).
        text: StrLit,
        /// The `when` keyword.
        span: Span,
    },
}

impl When {
    /// The `when` keyword's position.
    pub fn span(&self) -> Span {
        match self {
            When::Field { span, .. } | When::Expr { span, .. } => *span,
        }
    }
}

/// `as L(N)`, or `as L("{{…}}")`: a cap resolved at run time.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopClause {
    /// The loop name.
    pub name: Ident,
    /// The cap N (may be < 1: that is C026); 0 when the cap is a template.
    pub cap: i64,
    /// `as L("{{outputs.N.cap}}")`: the cap is this template's value when the edge is checked.
    pub cap_template: Option<StrLit>,
    /// The `as` keyword.
    pub span: Span,
}

/// `with { key: value, … }`: values are strings (template text), ints, floats or bools.
#[derive(Clone, Debug, PartialEq)]
pub struct WithMap {
    /// Entries in order.
    pub entries: Vec<(Ident, Value)>,
    /// The `with` keyword.
    pub span: Span,
}

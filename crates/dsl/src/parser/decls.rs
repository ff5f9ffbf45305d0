//! Declarations (DSL.md §3.1–§3.7, §3.9) and sandbox blocks (§7.2–§7.3).

use std::collections::HashMap;

use super::values::{Prop, to_str, to_word};
use super::{PResult, Parser, diag};
use crate::ast::{self, Span, VarType};
use crate::diag::{Code, Diagnostic};
use crate::lexer::Tok;

/// `secrets:` entries (§3.2), in table order.
const SECRET_PROPS: &[&str] = &[
    "value",
    "as",
    "mount_path",
    "env",
    "hosts",
    "optional",
    "description",
];

/// `agent` / `judge` (§3.5).
const AGENT_PROPS: &[&str] = &[
    "model",
    "backend",
    // Upstream's name for `backend` before it was renamed (the same words).
    "delegate",
    "system",
    "user",
    "input",
    "output",
    "tools",
    "tool_max_steps",
    "interaction",
    "await",
    "sandbox",
    "session",
    "reasoning_effort",
    "max_tokens",
    "provider",
    "publish",
    "readonly",
    "cursors",
    "mcp",
    "capabilities",
    "compaction",
    "memory",
    "permission",
    "allow",
    "ask",
    "deny",
    "description",
    "skills",
];

/// `tool` (§3.6).
const TOOL_PROPS: &[&str] = &[
    "command",
    "script",
    "language",
    "input",
    "output",
    "await",
    "sandbox",
    "publish",
    "parallel_safe",
    "description",
];

/// A script tool's `language` words (upstream's list); anything else is E020.
const SCRIPT_LANGUAGES: &[(&str, ast::ScriptLanguage)] = &[
    ("sh", ast::ScriptLanguage::Sh),
    ("bash", ast::ScriptLanguage::Bash),
    ("js", ast::ScriptLanguage::Node),
    ("node", ast::ScriptLanguage::Node),
    ("py", ast::ScriptLanguage::Python),
    ("python", ast::ScriptLanguage::Python),
    ("python3", ast::ScriptLanguage::Python),
];

/// `compute`.
const COMPUTE_PROPS: &[&str] = &["input", "output", "await", "expr", "publish", "description"];
const FAIL_PROPS: &[&str] = &["code", "message", "description", "resumable"];

/// Upstream's former `join` declaration.
const JOIN_PROPS: &[&str] = &["strategy", "require", "output"];

/// `human`.
const HUMAN_PROPS: &[&str] = &[
    "input",
    "output",
    "instructions",
    "interaction",
    "mode",
    "model",
    "system",
    "min_answers",
    "await",
    "publish",
    "description",
];

/// `subbot` (§3.9).
const SUBBOT_PROPS: &[&str] = &[
    "source",
    "output",
    "await",
    "with",
    "isolated",
    "description",
];

/// `router` (§3.7).
const ROUTER_PROPS: &[&str] = &[
    "mode",
    "model",
    "system",
    "user",
    "multi",
    "backend",
    "delegate",
    "provider",
    "reasoning_effort",
    "over",
    "as",
    "key",
    "depends_on",
    "description",
];

/// A sandbox block (§7.2).
const SANDBOX_PROPS: &[&str] = &[
    "mode",
    "image",
    "build",
    "user",
    "workspace_folder",
    "host_state",
    "post_create",
    "env",
    "mounts",
    "network",
];

/// `build:` inside a sandbox block (§7.2).
const BUILD_PROPS: &[&str] = &["dockerfile", "context", "args"];

/// `network:` inside a sandbox block (§7.3).
const NETWORK_PROPS: &[&str] = &["mode", "preset", "rules", "inherit"];

/// `await` (§3.5).
const AWAIT_MODES: &[(&str, ast::AwaitMode)] = &[
    ("wait_all", ast::AwaitMode::WaitAll),
    ("best_effort", ast::AwaitMode::BestEffort),
];

/// E013.
fn missing(kind: &str, name: &ast::Ident, key: &str) -> Box<Diagnostic> {
    diag(
        Code::E013,
        name.span,
        format!("{kind} \"{}\" needs \"{key}\"", name.name),
    )
}

/// E010 for a second declaration of `name` in `table`; records the first one.
fn first_declaration(
    table: &mut HashMap<String, u32>,
    what: &str,
    name: &ast::Ident,
) -> PResult<()> {
    if let Some(line) = table.get(&name.name) {
        return Err(diag(
            Code::E010,
            name.span,
            format!("{what} \"{}\" already declared at line {line}", name.name),
        ));
    }
    table.insert(name.name.clone(), name.span.line);
    Ok(())
}

impl Parser<'_> {
    /// The end of a declaration header `… NAME:`: the end of the line.
    fn header_end(&mut self) -> PResult<()> {
        self.end_line()
    }

    /// A var type (§3.1); `key` names the var or field in messages.
    pub(super) fn var_type(&mut self, key: &str) -> PResult<(VarType, Span)> {
        let t = self.peek();
        let span = t.span;
        let ty = match &t.tok {
            Tok::TypeList => Some(VarType::StringList),
            Tok::Ident(s) => match s.as_str() {
                "string" => Some(VarType::String),
                "bool" => Some(VarType::Bool),
                "int" => Some(VarType::Int),
                "float" => Some(VarType::Float),
                "json" => Some(VarType::Json),
                _ => None,
            },
            Tok::Newline | Tok::Eof | Tok::Indent | Tok::Error(_) => {
                return Err(self.unexpected(Some("a type")));
            }
            _ => None,
        };
        let Some(ty) = ty else {
            let found = super::describe(self.peek());
            return Err(super::values::kind_error(
                key,
                "a type (string, bool, int, float, json or string[])",
                span,
                &found,
            ));
        };
        self.bump();
        Ok((ty, span))
    }

    /// `vars:` at top level (E014 for a second one).
    pub(super) fn top_vars(&mut self) -> PResult<ast::VarsBlock> {
        let keyword = self.bump().span;
        if self.top_vars {
            return Err(diag(
                Code::E014,
                keyword,
                "only one vars block is allowed here",
            ));
        }
        self.top_vars = true;
        let mut table = std::mem::take(&mut self.vars);
        let block = self.vars_body(keyword, &mut table);
        self.vars = table;
        block
    }

    /// After the `vars` keyword: `:` and at least one `NAME: TYPE [= default]` line; `table`
    /// holds the names already declared in this block (E010).
    pub(super) fn vars_body(
        &mut self,
        keyword: Span,
        table: &mut HashMap<String, u32>,
    ) -> PResult<ast::VarsBlock> {
        self.expect_colon()?;
        self.require_block("vars:")?;
        let mut vars = Vec::new();
        self.block_lines(|p| {
            vars.push(p.var_def(table)?);
            Ok(())
        })?;
        Ok(ast::VarsBlock { keyword, vars })
    }

    fn var_def(&mut self, table: &mut HashMap<String, u32>) -> PResult<ast::VarDef> {
        let name = self.name("a var name")?;
        first_declaration(table, "var", &name)?;
        self.expect_colon()?;
        let (ty, ty_span) = self.var_type(&name.name)?;
        let enum_values = if matches!(self.peek().tok, Tok::LBracket) {
            Some(self.field_enum(&name, ty)?)
        } else {
            None
        };
        let default = if matches!(self.peek().tok, Tok::Eq) {
            self.bump();
            Some(self.value(&name.name, 0)?.into_value())
        } else {
            None
        };
        self.end_line()?;
        Ok(ast::VarDef {
            name,
            ty,
            ty_span,
            enum_values,
            default,
        })
    }

    /// `secrets:` (§3.2; E014 for a second one).
    pub(super) fn secrets(&mut self) -> PResult<ast::SecretsBlock> {
        let keyword = self.bump().span;
        if self.top_secrets {
            return Err(diag(
                Code::E014,
                keyword,
                "only one secrets block is allowed here",
            ));
        }
        self.top_secrets = true;
        self.expect_colon()?;
        self.require_block("secrets:")?;
        let mut secrets = Vec::new();
        self.block_lines(|p| {
            secrets.push(p.secret_def()?);
            Ok(())
        })?;
        Ok(ast::SecretsBlock { keyword, secrets })
    }

    fn secret_def(&mut self) -> PResult<ast::SecretDef> {
        let name = self.name("a secret name")?;
        let mut def = ast::SecretDef {
            name: name.clone(),
            value: None,
            as_: None,
            mount_path: None,
            env: None,
            hosts: None,
            optional: None,
            description: None,
        };
        match self.prop(&name)? {
            Prop::Value(v) => {
                def.value = Some(to_str(&name.name, v)?);
                self.end_line()?;
            }
            Prop::Empty(_) => {}
            Prop::Nested(_) => self.props("secret", SECRET_PROPS, |p, key| {
                match key.name.as_str() {
                    "value" => def.value = Some(p.str_prop(&key)?),
                    "as" => def.as_ = Some(p.word_prop(&key, "a word")?),
                    "mount_path" => def.mount_path = Some(p.str_prop(&key)?),
                    "env" => def.env = Some(p.str_prop(&key)?),
                    "hosts" => def.hosts = Some(p.str_list_prop(&key)?),
                    "optional" => def.optional = Some(p.bool_prop(&key)?),
                    _ => def.description = Some(p.str_prop(&key)?),
                }
                Ok(())
            })?,
        }
        Ok(def)
    }

    /// `prompt NAME:` and its body (§3.3).
    pub(super) fn prompt(&mut self) -> PResult<ast::Prompt> {
        self.bump();
        let name = self.name("a prompt name")?;
        first_declaration(&mut self.prompts, "prompt", &name)?;
        self.expect_colon()?;
        if !matches!(self.peek().tok, Tok::PromptBody(_)) {
            let d = self.unexpected(None);
            return Err(Box::new(d.with_hint(
                "a prompt's text goes on the indented lines below \"prompt NAME:\"",
            )));
        }
        let Tok::PromptBody(body) = self.bump().tok else {
            return Err(diag(Code::E001, name.span, "expected a prompt body"));
        };
        self.end_line()?;
        Ok(ast::Prompt { name, body })
    }

    /// `schema NAME:` and its fields (§3.4).
    pub(super) fn schema(&mut self) -> PResult<ast::Schema> {
        self.bump();
        let name = self.name("a schema name")?;
        first_declaration(&mut self.schemas, "schema", &name)?;
        self.expect_colon()?;
        self.header_end()?;
        let mut fields = Vec::new();
        let mut seen = HashMap::new();
        self.block_lines(|p| {
            let field = p.field_name("a field name")?;
            first_declaration(&mut seen, "field", &field)?;
            p.expect_colon()?;
            let (ty, ty_span) = p.var_type(&field.name)?;
            let enum_values = if matches!(p.peek().tok, Tok::LBracket) {
                Some(p.field_enum(&field, ty)?)
            } else {
                None
            };
            p.end_line()?;
            fields.push(ast::Field {
                name: field,
                ty,
                ty_span,
                enum_values,
            });
            Ok(())
        })?;
        Ok(ast::Schema { name, fields })
    }

    /// `[enum: "a", "b"]` after a field's type (only `string` fields; E021 otherwise, E001 for
    /// any other constraint word, E010 for a value listed twice).
    fn field_enum(&mut self, field: &ast::Ident, ty: VarType) -> PResult<ast::StrList> {
        let open = self.bump().span;
        let word = self.name("\"enum\"")?;
        if word.name != "enum" {
            return Err(diag(
                Code::E001,
                word.span,
                format!(
                    "unexpected \"{}\": a field constraint is [enum: ...]",
                    word.name
                ),
            ));
        }
        if ty != VarType::String {
            return Err(super::values::kind_error(
                &field.name,
                "a string type for an enum",
                open,
                ty.as_str(),
            ));
        }
        self.expect_colon()?;
        let mut items: Vec<ast::StrLit> = Vec::new();
        loop {
            let t = self.peek();
            match &t.tok {
                Tok::RBracket if !items.is_empty() => {
                    self.bump();
                    break;
                }
                Tok::Str(_) => {
                    let Tok::Str(s) = self.bump().tok else {
                        return Err(diag(Code::E001, open, "expected a string"));
                    };
                    if items.iter().any(|i| i.value == s.value) {
                        return Err(diag(
                            Code::E010,
                            s.span,
                            format!("enum value \"{}\" listed twice", s.value),
                        ));
                    }
                    items.push(s);
                    match self.peek().tok {
                        Tok::Comma => {
                            self.bump();
                        }
                        Tok::RBracket => {}
                        _ => return Err(self.unexpected(Some("\",\" or \"]\""))),
                    }
                }
                _ => return Err(self.unexpected(Some("a quoted enum value"))),
            }
        }
        Ok(ast::StrList { items, span: open })
    }

    /// `agent|judge|tool|router NAME:` and its properties (§3.5–§3.7).
    pub(super) fn node(&mut self, kind: ast::NodeKind) -> PResult<ast::Node> {
        let kind_span = self.bump().span;
        let name = self.name("a node name")?;
        self.expect_colon()?;
        self.header_end()?;
        let body = match kind {
            ast::NodeKind::Agent | ast::NodeKind::Judge => {
                ast::NodeBody::Agent(self.agent_props(kind)?)
            }
            ast::NodeKind::Tool => ast::NodeBody::Tool(self.tool_props(&name)?),
            ast::NodeKind::Router => ast::NodeBody::Router(self.router_props(&name)?),
            ast::NodeKind::Compute => ast::NodeBody::Compute(self.compute_props()?),
            ast::NodeKind::Human => ast::NodeBody::Human(self.human_props(&name)?),
            ast::NodeKind::Subbot => ast::NodeBody::Subbot(self.subbot_props(&name)?),
            ast::NodeKind::Fail => ast::NodeBody::Fail(self.fail_props()?),
        };
        Ok(ast::Node {
            kind,
            kind_span,
            name,
            body,
        })
    }

    fn agent_props(&mut self, kind: ast::NodeKind) -> PResult<ast::AgentProps> {
        let (mut model, mut system, mut user, mut input, mut output) =
            (None, None, None, None, None);
        let (mut tools, mut tool_max_steps, mut interaction, mut await_, mut sandbox) =
            (None, None, None, None, None);
        let (mut backend, mut session, mut reasoning_effort, mut max_tokens) =
            (None, None, None, None);
        let (mut provider, mut publish, mut readonly, mut skills) = (None, None, None, None);
        let mut extras = ast::AgentExtras::default();
        self.props(kind.as_str(), AGENT_PROPS, |p, key| {
            match key.name.as_str() {
                // A sentence for readers (upstream's studio shows it): read, not kept.
                "description" => {
                    p.str_prop(&key)?;
                }
                "model" => model = Some(p.model_prop(&key)?),
                "backend" | "delegate" => {
                    if backend.is_some() {
                        return Err(diag(
                            Code::E012,
                            key.span,
                            "\"delegate\" is upstream's former name for \"backend\"; give one of them",
                        ));
                    }
                    backend = Some(p.backend_prop(&key)?);
                }
                "session" => {
                    session = Some(p.enum_prop(
                        &key,
                        &[
                            ("fresh", ast::Session::Fresh),
                            ("inherit", ast::Session::Inherit),
                            ("fork", ast::Session::Fork),
                            ("artifacts_only", ast::Session::ArtifactsOnly),
                            ("inherit_if_available", ast::Session::InheritIfAvailable),
                        ],
                    )?);
                }
                "reasoning_effort" => reasoning_effort = Some(p.effort_prop(&key)?),
                "provider" => provider = Some(p.str_prop(&key)?),
                "publish" => publish = Some(p.ref_prop(&key, "an artifact name")?),
                "readonly" => readonly = Some(p.bool_prop(&key)?),
                "max_tokens" => max_tokens = Some(p.int_prop(&key, Some(1))?),
                "system" => system = Some(p.prompt_prop(&key)?),
                "user" => user = Some(p.prompt_prop(&key)?),
                "input" => input = Some(p.ref_prop(&key, "a schema name")?),
                "output" => output = Some(p.ref_prop(&key, "a schema name")?),
                "tools" => tools = Some(p.word_list_prop(&key)?),
                "skills" => skills = Some(p.str_list_prop(&key)?),
                // `0` is upstream's "not set": the default applies (lowering maps it).
                "tool_max_steps" => tool_max_steps = Some(p.int_prop(&key, Some(0))?),
                "interaction" => {
                    interaction = Some(p.enum_prop(
                        &key,
                        &[
                            ("none", ast::Interaction::None),
                            ("ask", ast::Interaction::Ask),
                            // Upstream's word for the same thing: the agent's questions go to
                            // the operator.
                            ("human", ast::Interaction::Ask),
                        ],
                    )?);
                }
                "await" => await_ = Some(p.enum_prop(&key, AWAIT_MODES)?),
                "cursors" => extras.cursors = Some(p.cursors_prop(&key)?),
                "mcp" => extras.mcp = Some(p.mcp_prop(&key)?),
                "capabilities" | "compaction" | "memory" => {
                    p.unenforced_prop(&key)?;
                    extras.unenforced.push(key);
                }
                "permission" | "allow" | "ask" | "deny" => {
                    p.permission_prop(&key, &mut extras.permission)?;
                }
                _ => sandbox = Some(p.sandbox_prop(&key)?),
            }
            Ok(())
        })?;
        Ok(ast::AgentProps {
            model,
            delegate: Box::new(ast::DelegateProps {
                backend,
                session,
                reasoning_effort,
                max_tokens,
                provider,
                skills,
            }),
            system,
            user,
            input,
            output,
            tools,
            tool_max_steps,
            interaction,
            await_,
            sandbox,
            publish,
            readonly,
            extras: Box::new(extras),
        })
    }

    /// `model`: a string; a literal one (no `${`, no `{{`) must look like `provider/model` or a
    /// bare model name (the provider then comes from `provider`, the backend or the name).
    fn model_prop(&mut self, key: &ast::Ident) -> PResult<ast::StrLit> {
        let s = self.str_prop(key)?;
        let templated = s.value.contains("${") || s.value.contains("{{");
        if !templated && !super::values::is_model_shape(&s.value) {
            return Err(super::values::kind_error(
                &key.name,
                "\"provider/model\" or a model name",
                s.span,
                &super::preview(&s),
            ));
        }
        Ok(s)
    }

    /// `reasoning_effort`: a word (`low` … `max`), or a string holding `${…}` / `{{vars.X}}`
    /// that is expanded at launch; a literal string must be one word.
    fn effort_prop(&mut self, key: &ast::Ident) -> PResult<ast::Word> {
        let s = self.str_prop(key)?;
        let templated = s.value.contains("${") || s.value.contains("{{");
        let word_like = !s.value.is_empty()
            && s.value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !templated && !word_like {
            return Err(super::values::kind_error(
                &key.name,
                "a word",
                s.span,
                &super::preview(&s),
            ));
        }
        Ok(ast::Word {
            text: s.value,
            span: s.span,
        })
    }

    /// `backend`: `claw`, `claude_code` or `codex` (E020 otherwise; quoted, as upstream
    /// workflows write it, or not).
    pub(super) fn backend_prop(&mut self, key: &ast::Ident) -> PResult<(ast::Backend, Span)> {
        let w = self.word_prop(key, "a word")?;
        let backend = match w.text.as_str() {
            "claw" => ast::Backend::Claw,
            "claude_code" => ast::Backend::ClaudeCode,
            "codex" => ast::Backend::Codex,
            other => {
                return Err(Box::new(
                    Diagnostic::new(
                        Code::E020,
                        w.span,
                        format!("backend \"{other}\" is not supported"),
                    )
                    .with_hint("expected claw, claude_code or codex"),
                ));
            }
        };
        Ok((backend, w.span))
    }

    fn tool_props(&mut self, name: &ast::Ident) -> PResult<ast::ToolProps> {
        let (mut command, mut input, mut output, mut await_, mut sandbox) =
            (None, None, None, None, None);
        let (mut script, mut language): (Option<(ast::StrLit, Span)>, _) = (None, None);
        let mut publish = None;
        self.props("tool", TOOL_PROPS, |p, key| {
            match key.name.as_str() {
                // A sentence for readers (upstream's studio shows it): read, not kept.
                "description" => {
                    p.str_prop(&key)?;
                }
                "publish" => publish = Some(p.ref_prop(&key, "an artifact name")?),
                // Upstream's assertion that concurrent items write disjoint files: read, and not
                // needed here (branches are not serialised by what they write; docs).
                "parallel_safe" => {
                    p.bool_prop(&key)?;
                }
                "command" => command = Some(p.str_prop(&key)?),
                "script" => script = Some((p.str_prop(&key)?, key.span)),
                "language" => language = Some((p.enum_prop(&key, SCRIPT_LANGUAGES)?.0, key.span)),
                "input" => input = Some(p.ref_prop(&key, "a schema name")?),
                "output" => output = Some(p.ref_prop(&key, "a schema name")?),
                "await" => await_ = Some(p.enum_prop(&key, AWAIT_MODES)?),
                _ => sandbox = Some(p.sandbox_prop(&key)?),
            }
            Ok(())
        })?;
        let (command, script) = match (command, script, language) {
            (Some(_), Some((_, span)), _) => {
                return Err(diag(
                    Code::E012,
                    span,
                    format!(
                        "tool \"{}\" has both \"command\" and \"script\"; give one",
                        name.name
                    ),
                ));
            }
            (Some(_), None, Some((_, span))) => {
                return Err(diag(
                    Code::E012,
                    span,
                    "\"language\" is only valid with \"script\"",
                ));
            }
            (Some(command), None, None) => (command, None),
            (None, Some((text, span)), language) => (
                text,
                Some((language.map_or(ast::ScriptLanguage::Sh, |(l, _)| l), span)),
            ),
            (None, None, _) => return Err(missing("tool", name, "command\" or \"script")),
        };
        Ok(ast::ToolProps {
            command,
            script,
            publish,
            input,
            output,
            await_,
            sandbox,
        })
    }

    /// Upstream's `join NAME:` declaration (removed upstream in April 2026 for `await` on the
    /// node where branches meet), read as the `compute` node it amounts to: `strategy` is its
    /// `await`, and its output maps each `require`d node to that node's output (upstream's
    /// join output), plus `_failed_branches` under `best_effort`. Upstream never conformed a
    /// join's output to its `output:` schema, so the schema is checked to exist and not applied.
    pub(super) fn join_decl(&mut self) -> PResult<ast::Node> {
        let kind_span = self.bump().span;
        let name = self.name("a join name")?;
        self.expect_colon()?;
        self.header_end()?;
        let (mut strategy, mut require, mut output) = (None, None, None);
        self.props("join", JOIN_PROPS, |p, key| {
            match key.name.as_str() {
                "strategy" => strategy = Some(p.enum_prop(&key, AWAIT_MODES)?),
                "require" => require = Some(p.word_list_prop(&key)?),
                _ => output = Some(p.ref_prop(&key, "a schema name")?),
            }
            Ok(())
        })?;
        let await_ = strategy.unwrap_or((ast::AwaitMode::WaitAll, kind_span));
        let expr_for = |field: &str, value: String, span: Span| {
            (
                ast::Ident {
                    name: field.to_owned(),
                    span,
                },
                ast::StrLit {
                    value,
                    kind: ast::StrKind::Ident,
                    span,
                    lines: vec![ast::LineStart {
                        value_offset: 0,
                        line: span.line,
                        col: span.col,
                    }],
                },
            )
        };
        let mut expr: Vec<(ast::Ident, ast::StrLit)> = require
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .map(|w| expr_for(&w.text, format!("outputs.{}", w.text), w.span))
            .collect();
        if await_.0 == ast::AwaitMode::BestEffort || expr.is_empty() {
            expr.push(expr_for(
                "_failed_branches",
                "concat(input._failed_branches)".to_owned(),
                await_.1,
            ));
        }
        Ok(ast::Node {
            kind: ast::NodeKind::Compute,
            kind_span,
            name,
            body: ast::NodeBody::Compute(ast::ComputeProps {
                publish: None,
                input: None,
                output: None,
                join_output: output,
                await_: Some(await_),
                expr,
            }),
        })
    }

    fn fail_props(&mut self) -> PResult<ast::FailProps> {
        let mut f = ast::FailProps {
            code: None,
            message: None,
            description: None,
            resumable: None,
        };
        self.props("fail", FAIL_PROPS, |p, key| {
            match key.name.as_str() {
                "code" => f.code = Some(p.word_prop(&key, "a failure code")?),
                "message" => f.message = Some(p.str_prop(&key)?),
                "description" => f.description = Some(p.str_prop(&key)?),
                _ => f.resumable = Some(p.bool_prop(&key)?),
            }
            Ok(())
        })?;
        Ok(f)
    }

    fn compute_props(&mut self) -> PResult<ast::ComputeProps> {
        let (mut input, mut output, mut await_, mut expr) = (None, None, None, Vec::new());
        let mut publish = None;
        self.props("compute", COMPUTE_PROPS, |p, key| {
            match key.name.as_str() {
                // A sentence for readers (upstream's studio shows it): read, not kept.
                "description" => {
                    p.str_prop(&key)?;
                }
                "publish" => publish = Some(p.ref_prop(&key, "an artifact name")?),
                "input" => input = Some(p.ref_prop(&key, "a schema name")?),
                "output" => output = Some(p.ref_prop(&key, "a schema name")?),
                "await" => await_ = Some(p.enum_prop(&key, AWAIT_MODES)?),
                _ => {
                    expr = p
                        .map_prop(&key)?
                        .entries
                        .into_iter()
                        .map(|e| (e.key, e.value))
                        .collect();
                }
            }
            Ok(())
        })?;
        Ok(ast::ComputeProps {
            publish,
            input,
            output,
            join_output: None,
            await_,
            expr,
        })
    }

    fn human_props(&mut self, name: &ast::Ident) -> PResult<ast::HumanProps> {
        let mut h = ast::HumanProps {
            publish: None,
            input: None,
            output: None,
            instructions: None,
            interaction: None,
            model: None,
            system: None,
            min_answers: None,
            await_: None,
        };
        self.props("human", HUMAN_PROPS, |p, key| {
            match key.name.as_str() {
                // A sentence for readers (upstream's studio shows it): read, not kept.
                "description" => {
                    p.str_prop(&key)?;
                }
                "input" => h.input = Some(p.ref_prop(&key, "a schema name")?),
                "output" => h.output = Some(p.ref_prop(&key, "a schema name")?),
                "publish" => h.publish = Some(p.ref_prop(&key, "an artifact name")?),
                "instructions" => h.instructions = Some(p.prompt_prop(&key)?),
                // `mode` is upstream's name for `interaction` before it was unified across node
                // kinds (April 2026), with its own words; old files still use it.
                "interaction" | "mode" => {
                    if h.interaction.is_some() {
                        return Err(diag(
                            Code::E012,
                            key.span,
                            "\"mode\" is upstream's former name for a human node's \"interaction\"; give one of them",
                        ));
                    }
                    let words: &[(&str, ast::HumanMode)] = if key.name == "mode" {
                        &[
                            ("pause_until_answers", ast::HumanMode::Human),
                            ("auto_answer", ast::HumanMode::Llm),
                            ("auto_or_pause", ast::HumanMode::LlmOrHuman),
                        ]
                    } else {
                        &[
                            ("human", ast::HumanMode::Human),
                            ("llm", ast::HumanMode::Llm),
                            ("llm_or_human", ast::HumanMode::LlmOrHuman),
                        ]
                    };
                    h.interaction = Some(p.enum_prop(&key, words)?);
                }
                "model" => h.model = Some(p.model_prop(&key)?),
                "system" => h.system = Some(p.prompt_prop(&key)?),
                "min_answers" => h.min_answers = Some(p.int_prop(&key, Some(0))?),
                _ => h.await_ = Some(p.enum_prop(&key, AWAIT_MODES)?),
            }
            Ok(())
        })?;
        let _ = name;
        Ok(h)
    }

    fn subbot_props(&mut self, name: &ast::Ident) -> PResult<ast::SubbotProps> {
        let (mut source, mut output, mut await_) = (None, None, None);
        let (mut with, mut isolated) = (None, None);
        self.props("subbot", SUBBOT_PROPS, |p, key| {
            match key.name.as_str() {
                // A sentence for readers (upstream's studio shows it): read, not kept.
                "description" => {
                    p.str_prop(&key)?;
                }
                "source" => source = Some(p.str_prop(&key)?),
                "output" => output = Some(p.ref_prop(&key, "a schema name")?),
                "isolated" => isolated = Some(p.bool_prop(&key)?),
                "with" => {
                    with = Some(p.with_clause(key.span)?);
                    p.end_line()?;
                }
                _ => await_ = Some(p.enum_prop(&key, AWAIT_MODES)?),
            }
            Ok(())
        })?;
        let Some(source) = source else {
            return Err(missing("subbot", name, "source"));
        };
        Ok(ast::SubbotProps {
            source,
            output,
            await_,
            with,
            isolated,
        })
    }

    fn router_props(&mut self, name: &ast::Ident) -> PResult<ast::RouterProps> {
        let mut r = ast::RouterProps::default();
        self.props("router", ROUTER_PROPS, |p, key| {
            match key.name.as_str() {
                // A sentence for readers (upstream's studio shows it): read, not kept.
                "description" => {
                    p.str_prop(&key)?;
                }
                "mode" => {
                    let (mode, _) = p.enum_prop(
                        &key,
                        &[
                            ("condition", ast::RouterMode::Condition),
                            ("fan_out_all", ast::RouterMode::FanOutAll),
                            ("round_robin", ast::RouterMode::RoundRobin),
                            ("llm", ast::RouterMode::Llm),
                            ("fan_out_each", ast::RouterMode::FanOutEach),
                        ],
                    )?;
                    r.mode = mode;
                }
                "model" => r.model = Some(p.model_prop(&key)?),
                "system" => r.system = Some(p.prompt_prop(&key)?),
                "user" => r.user = Some(p.prompt_prop(&key)?),
                "backend" | "delegate" => {
                    if r.backend.is_some() {
                        return Err(diag(
                            Code::E012,
                            key.span,
                            "\"delegate\" is upstream's former name for \"backend\"; give one of them",
                        ));
                    }
                    r.backend = Some(p.backend_prop(&key)?);
                }
                "provider" => r.provider = Some(p.str_prop(&key)?),
                "reasoning_effort" => r.reasoning_effort = Some(p.effort_prop(&key)?),
                "over" => r.over = Some(p.str_prop(&key)?),
                "as" => r.as_ = Some(p.word_prop(&key, "a name")?),
                "key" => r.key = Some(p.word_prop(&key, "a field name")?),
                "depends_on" => r.depends_on = Some(p.word_prop(&key, "a field name")?),
                _ => {
                    let multi = p.bool_prop(&key)?;
                    if multi.value {
                        return Err(diag(
                            Code::E012,
                            multi.span,
                            "\"multi: true\" is not supported yet (an llm router picks one edge)",
                        ));
                    }
                    r.multi = Some(multi);
                }
            }
            Ok(())
        })?;
        let _ = name;
        Ok(r)
    }

    /// One of `permission` / `allow` / `ask` / `deny` into `into`.
    pub(super) fn permission_prop(
        &mut self,
        key: &ast::Ident,
        into: &mut ast::PermissionProps,
    ) -> PResult<()> {
        use crate::permission::PermissionMode;
        match key.name.as_str() {
            "permission" => {
                into.mode = Some(self.enum_prop(
                    key,
                    &[
                        ("off", PermissionMode::Off),
                        ("ask", PermissionMode::Ask),
                        ("deny", PermissionMode::Deny),
                    ],
                )?);
            }
            "allow" => into.allow = Some(self.str_list_prop(key)?),
            "ask" => into.ask = Some(self.str_list_prop(key)?),
            _ => into.deny = Some(self.str_list_prop(key)?),
        }
        Ok(())
    }

    /// `sandbox: WORD` or a sandbox block (§7.1–§7.3).
    pub(super) fn sandbox_prop(&mut self, key: &ast::Ident) -> PResult<ast::SandboxDecl> {
        let mut block = ast::SandboxBlock {
            key: key.span,
            ..Default::default()
        };
        match self.prop(key)? {
            Prop::Value(v) => {
                let w = to_word(&key.name, "a word or a block", &v)?;
                self.end_line()?;
                return Ok(ast::SandboxDecl::Short(w));
            }
            Prop::Empty(_) => {}
            Prop::Nested(_) => self.props("sandbox", SANDBOX_PROPS, |p, k| {
                let b = &mut block;
                match k.name.as_str() {
                    "mode" => b.mode = Some(p.word_prop(&k, "a word")?),
                    "image" => b.image = Some(p.str_prop(&k)?),
                    "build" => b.build = Some(p.build_prop(&k)?),
                    "user" => b.user = Some(p.str_prop(&k)?),
                    "workspace_folder" => b.workspace_folder = Some(p.str_prop(&k)?),
                    "host_state" => b.host_state = Some(p.word_prop(&k, "a word")?),
                    "post_create" => b.post_create = Some(p.str_prop(&k)?),
                    "env" => b.env = Some(p.map_prop(&k)?),
                    "mounts" => b.mounts = Some(p.str_list_prop(&k)?),
                    _ => b.network = Some(p.network_prop(&k)?),
                }
                Ok(())
            })?,
        }
        Ok(ast::SandboxDecl::Block(block))
    }

    fn build_prop(&mut self, key: &ast::Ident) -> PResult<ast::BuildBlock> {
        let mut b = ast::BuildBlock {
            key: key.span,
            ..Default::default()
        };
        self.block_prop(key, BUILD_PROPS, |p, k| {
            match k.name.as_str() {
                "dockerfile" => b.dockerfile = Some(p.str_prop(&k)?),
                "context" => b.context = Some(p.str_prop(&k)?),
                _ => b.args = Some(p.map_prop(&k)?),
            }
            Ok(())
        })?;
        Ok(b)
    }

    fn network_prop(&mut self, key: &ast::Ident) -> PResult<ast::NetworkBlock> {
        let mut n = ast::NetworkBlock {
            key: key.span,
            ..Default::default()
        };
        self.block_prop(key, NETWORK_PROPS, |p, k| {
            match k.name.as_str() {
                "mode" => n.mode = Some(p.word_prop(&k, "a word")?),
                "preset" => n.preset = Some(p.str_prop(&k)?),
                "rules" => n.rules = Some(p.str_list_prop(&k)?),
                _ => n.inherit = Some(p.word_prop(&k, "a word")?),
            }
            Ok(())
        })?;
        Ok(n)
    }
}

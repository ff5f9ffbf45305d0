//! Declaration-level checks: vars, secrets, schemas, prompts, node properties, sandbox and
//! network blocks, worktree (DSL.md §3, §7; codes of §8.5).
//!
//! Codes: C002, C003, C041, C044, C090–C092, C094, C109, C128, C135, C136, C140, C142, C143,
//! C902, C909, C914. Template, graph and expression codes are `graph.rs`'s.
//!
//! Sandbox blocks are checked first, because a block that drew C044 is **dropped**: C128, C136 and
//! C909 then treat it as absent (DSL.md §7.2).
use std::collections::HashMap;

use super::symbols::Symbols;
use crate::{
    Code, CompileOptions,
    ast::{self, NodeBody, PromptRef, SandboxDecl, Span},
    diag::Diagnostic,
    ir::{self, SandboxMode},
};

mod netrule;
mod sandbox;
mod secrets;

use sandbox::Checked;

/// The providers a literal `model` may name (SANDBOX.md §13.1b).
const PROVIDERS: [&str; 3] = ["anthropic", "openai", "openai_compatible"];

pub(super) fn check(
    file: &ast::File,
    syms: &Symbols<'_>,
    opts: &CompileOptions,
    out: &mut Vec<Diagnostic>,
) {
    check_vars(file, out);
    secrets::check(syms, out);
    for decl in &file.decls {
        if let ast::Decl::Schema(s) = decl
            && s.fields.is_empty()
        {
            out.push(Diagnostic::new(
                Code::C140,
                s.name.span,
                format!("schema \"{}\" has no fields", s.name.name),
            ));
        }
    }

    // The workflow's sandbox, as later checks see it. Every workflow is checked; the first one
    // is the workflow (DSL.md §8.3).
    let mut workflow_sandbox = None;
    for (i, w) in syms.workflows.iter().enumerate() {
        let checked = w.sandbox.as_ref().map(|s| sandbox::check(s, None, out));
        // The workflow's two-word switches.
        let switches = [
            (&w.worktree, "worktree", ["none", "auto"], Code::C142),
            (&w.repo_devbox, "repo_devbox", ["on", "off"], Code::C134),
            (
                &w.workspace_checkpoint,
                "workspace_checkpoint",
                ["on", "off"],
                Code::C139,
            ),
        ];
        for (word, key, [a, b], code) in switches {
            if let Some(word) = word
                && word.text != a
                && word.text != b
            {
                out.push(Diagnostic::new(
                    code,
                    word.span,
                    format!("invalid {key} \"{}\"; expected {a} or {b}", word.text),
                ));
            }
        }
        if let Some(word) = w.workspace_checkpoint.as_ref().filter(|w| w.text == "on") {
            out.push(
                Diagnostic::new(
                    Code::C141,
                    word.span,
                    "workspace_checkpoint: on has no effect: a run's workspace is never pushed \
                     mid-run here",
                )
                .with_hint("remove it, or write off (what every run does)"),
            );
        }
        if let Some(b) = &w.budget {
            let unenforced = [
                b.max_cost_usd.as_ref().map(|v| ("max_cost_usd", v.span())),
                b.max_tokens.map(|n| ("max_tokens", n.span)),
            ];
            for (field, span) in unenforced.into_iter().flatten() {
                out.push(
                    Diagnostic::new(
                        Code::C940,
                        span,
                        format!("budget {field} is not enforced yet"),
                    )
                    .with_hint("cap the run with max_iterations or max_duration"),
                );
            }
        }
        permission_rules(&w.permission, None, out);
        for key in &w.unenforced {
            out.push(
                Diagnostic::new(
                    Code::C943,
                    key.span,
                    format!(
                        "workflow {} is accepted but not enforced yet; it has no effect",
                        key.name
                    ),
                )
                .with_hint(format!("remove {} to silence this warning", key.name)),
            );
        }
        if i == 0 {
            workflow_sandbox = checked;
            if let (Some(Checked::Valid(SandboxMode::None)), Some(decl)) = (checked, &w.sandbox) {
                out.push(Diagnostic::new(
                    Code::C128,
                    sandbox::anchor(decl),
                    "workflow opts out of the sandbox: every node runs on the host",
                ));
            }
        }
    }
    let opted_out = workflow_sandbox == Some(Checked::Valid(SandboxMode::None));

    check_nodes(syms, opts, opted_out, out);
    secrets::check_delivered(syms, opted_out, out);
    check_backslash_quotes(file, syms, out);
}

/// C109 on every var default, in both blocks.
fn check_vars(file: &ast::File, out: &mut Vec<Diagnostic>) {
    let blocks = file.decls.iter().filter_map(|d| match d {
        ast::Decl::Vars(b) => Some(b),
        ast::Decl::Workflow(w) => w.vars.as_ref(),
        _ => None,
    });
    for v in blocks.flat_map(|b| &b.vars) {
        let Some(default) = &v.default else { continue };
        if let (Some(allowed), Some(serde_json::Value::String(value))) =
            (&v.enum_values, ir::lower::default_json(v.ty, default))
            && !allowed.items.iter().any(|a| a.value == value)
        {
            let words: Vec<&str> = allowed.items.iter().map(|a| a.value.as_str()).collect();
            out.push(
                Diagnostic::new(
                    Code::C109,
                    default.span(),
                    format!(
                        "default \"{value}\" of \"{}\" is not one of its enum values",
                        v.name.name
                    ),
                )
                .with_hint(format!("use one of: {}", words.join(", "))),
            );
            continue;
        }
        if ir::lower::default_json(v.ty, default).is_none() {
            let mut d = Diagnostic::new(
                Code::C109,
                default.span(),
                format!("default of \"{}\" is not a {}", v.name.name, v.ty.as_str()),
            );
            d.hint = match v.ty {
                ast::VarType::Json => Some("write the JSON text in a string".to_owned()),
                ast::VarType::StringList => Some(
                    "write a list of strings, or a string holding a JSON array of strings"
                        .to_owned(),
                ),
                _ => None,
            };
            out.push(d);
        }
    }
}

/// Per-node checks: C041, C002, C003, C135, C914, node-level C044/C902 and C128, C136.
fn check_nodes(
    syms: &Symbols<'_>,
    opts: &CompileOptions,
    opted_out: bool,
    out: &mut Vec<Diagnostic>,
) {
    let mut first_line: HashMap<&str, u32> = HashMap::new();
    for n in &syms.node_list {
        let name = n.name.name.as_str();
        let node_diag = |code: Code, span: Span, message: String| {
            Diagnostic::new(code, span, message).with_node(name)
        };
        match first_line.get(name) {
            Some(line) => out.push(node_diag(
                Code::C041,
                n.name.span,
                format!("node \"{name}\" is already declared at line {line}"),
            )),
            None => {
                first_line.insert(name, n.name.span.line);
            }
        }
        let (input, output, sandbox) = match &n.body {
            NodeBody::Agent(a) => (&a.input, &a.output, &a.sandbox),
            NodeBody::Tool(t) => (&t.input, &t.output, &t.sandbox),
            NodeBody::Subbot(b) => (&None, &b.output, &None),
            NodeBody::Router(_) | NodeBody::Fail(_) => (&None, &None, &None),
            NodeBody::Compute(c) => (&c.input, &c.output, &None),
            NodeBody::Human(h) => (&h.input, &h.output, &None),
        };
        let join_output = match &n.body {
            NodeBody::Compute(c) => &c.join_output,
            _ => &None,
        };
        for schema in [input, output, join_output].into_iter().flatten() {
            if !syms.schemas.contains_key(schema.name.as_str()) {
                out.push(node_diag(
                    Code::C002,
                    schema.span,
                    format!("unknown schema \"{}\"", schema.name),
                ));
            }
        }
        if let NodeBody::Agent(a) = &n.body {
            for prompt in a.system.iter().chain(a.user.iter()) {
                if let PromptRef::Named(p) = prompt
                    && !syms.prompts.contains_key(p.name.as_str())
                {
                    out.push(
                        node_diag(Code::C003, p.span, format!("unknown prompt \"{}\"", p.name))
                            .with_hint("write text in quotes for an inline prompt"),
                    );
                }
            }
            let mut servers = None;
            for tool in a.tools.iter().flat_map(|l| &l.items) {
                if ir::Tool::from_name(&tool.text).is_some() {
                    continue;
                }
                // `mcp.SERVER.TOOL`: one tool of a server the node gets.
                if let Some(r) = ir::McpToolRef::parse(&tool.text) {
                    let servers = servers.get_or_insert_with(|| {
                        ir::node_mcp_servers(
                            a.extras.mcp.as_ref(),
                            syms.workflow().and_then(|w| w.mcp.as_ref()),
                        )
                    });
                    if !servers.contains(&r.server) {
                        out.push(
                            node_diag(
                                Code::C135,
                                tool.span,
                                format!(
                                    "tool \"{}\" names MCP server \"{}\", which this node does not get",
                                    tool.text, r.server
                                ),
                            )
                            .with_hint(format!(
                                "add {} to the node's mcp.servers (or the workflow's)",
                                r.server
                            )),
                        );
                    }
                    continue;
                }
                let roster: Vec<&str> = ir::Tool::ALL.iter().map(|t| t.as_str()).collect();
                let hint = format!(
                    "available: {}, or mcp.SERVER.TOOL for a tool of an MCP server the node gets",
                    roster.join(", ")
                );
                // A malformed `mcp.` entry is a mistake in the file; any other name may be a
                // tool of upstream's that this release lacks: the file compiles, as upstream's
                // does, and the node fails when it starts (`ir::AgentNode::unavailable_tools`).
                if tool.text.starts_with("mcp.") {
                    out.push(
                        node_diag(
                            Code::C135,
                            tool.span,
                            format!("unknown tool \"{}\"", tool.text),
                        )
                        .with_hint(hint),
                    );
                } else {
                    out.push(
                        node_diag(
                            Code::C922,
                            tool.span,
                            format!(
                                "unknown tool \"{}\": node \"{name}\" fails when it starts",
                                tool.text
                            ),
                        )
                        .with_hint(hint),
                    );
                }
            }
            if let Some(model) = &a.model
                && let Some(provider) = literal_provider(&model.value)
                && !PROVIDERS.contains(&provider)
            {
                out.push(
                    node_diag(
                        Code::C914,
                        model.span,
                        format!("unknown model provider \"{provider}\""),
                    )
                    .with_hint("expected anthropic/…, openai/… or openai_compatible/…"),
                );
            }
            let backend = a
                .delegate
                .backend
                .or(syms.workflow().and_then(|w| w.default_backend))
                .or(a
                    .model
                    .is_none()
                    .then_some((ast::Backend::ClaudeCode, n.name.span)));
            // Neither model nor backend runs on claude_code (lowering); only an explicit claw
            // backend needs a model.
            if a.model.is_none() && backend.is_some_and(|(b, _)| b == ast::Backend::Claw) {
                out.push(
                    node_diag(
                        Code::E013,
                        n.name.span,
                        format!("{} \"{name}\" needs \"model\"", n.kind.as_str()),
                    )
                    .with_hint(
                        "the claw backend calls a model directly: give it model: \"provider/name\", \
                         or use a delegate backend (claude_code or codex)",
                    ),
                );
            }
            check_delegate(a, backend.map(|(b, _)| b), name, out);
            check_readonly(a, name, out);
            check_unenforced(a, name, out);
            permission_rules(&a.extras.permission, Some(name), out);
            // A delegate node's `ask_user` reaches the engine like a claw node's (its CLI's
            // `iterion` MCP server, docs/delegates.md): the same rule for both.
            if let (Some((ast::Interaction::Ask, span)), false, false) =
                (a.interaction, opted_out, opts.ask_user_in_sandbox)
            {
                out.push(
                    node_diag(
                        Code::C136,
                        span,
                        format!(
                            "node \"{name}\" asks the operator but runs in the sandbox, \
                             which has no ask-user channel"
                        ),
                    )
                    .with_hint(
                        "set interaction: none, or sandbox: none on the workflow; \
                         run --sandbox none",
                    ),
                );
            }
        }
        check_model_kinds(syms, n, (opted_out, opts.ask_user_in_sandbox), out);
        if let Some(decl) = sandbox {
            check_node_sandbox(decl, name, opted_out, out);
        }
    }
}

/// `compute`, `human` and router properties: C003 (their prompts), C018 (a model mode without
/// a model), C023 (an `llm`-only property on another router), C039 (no expressions), C136 (an
/// `llm_or_human` node in a sandbox without the ask-user channel).
fn check_model_kinds(
    syms: &Symbols<'_>,
    n: &ast::Node,
    (opted_out, ask_in_sandbox): (bool, bool),
    out: &mut Vec<Diagnostic>,
) {
    let name = n.name.name.as_str();
    let node_diag = |code: Code, span: Span, message: String| {
        Diagnostic::new(code, span, message).with_node(name)
    };
    let (prompts, model, needs_model): (Vec<&PromptRef>, _, _) = match &n.body {
        NodeBody::Router(r) => {
            each_props(name, n.name.span, r, out);
            let llm = r.mode == ast::RouterMode::Llm;
            if !llm {
                let extra = [
                    r.model.as_ref().map(|m| ("model", m.span)),
                    r.system.as_ref().map(|p| ("system", prompt_span(p))),
                    r.user.as_ref().map(|p| ("user", prompt_span(p))),
                    r.multi.map(|m| ("multi", m.span)),
                    r.backend.map(|(_, s)| ("backend", s)),
                    r.provider.as_ref().map(|p| ("provider", p.span)),
                    r.reasoning_effort
                        .as_ref()
                        .map(|w| ("reasoning_effort", w.span)),
                ];
                for (key, span) in extra.into_iter().flatten() {
                    out.push(
                        node_diag(
                            Code::C023,
                            span,
                            format!("\"{key}\" is only valid on an llm router"),
                        )
                        .with_hint("set mode: llm, or remove it"),
                    );
                }
            }
            // A delegate backend has a default model (as an agent's does).
            let delegate = r.backend.is_some_and(|(b, _)| b != ast::Backend::Claw);
            (
                r.system.iter().chain(&r.user).collect(),
                r.model.as_ref(),
                llm && !delegate,
            )
        }
        NodeBody::Human(h) => {
            let mode = h.interaction.map_or(ast::HumanMode::Human, |(m, _)| m);
            if let (ast::HumanMode::LlmOrHuman, Some((_, span)), false, false) =
                (mode, h.interaction, opted_out, ask_in_sandbox)
            {
                out.push(
                    node_diag(
                        Code::C136,
                        span,
                        format!(
                            "node \"{name}\" may ask the operator but runs in the sandbox, \
                             which has no ask-user channel"
                        ),
                    )
                    .with_hint("use interaction: human or llm, or sandbox: none on the workflow"),
                );
            }
            (
                h.system.iter().chain(&h.instructions).collect(),
                h.model.as_ref(),
                mode != ast::HumanMode::Human,
            )
        }
        NodeBody::Compute(c) => {
            if c.expr.is_empty() {
                out.push(
                    node_diag(
                        Code::C039,
                        n.name.span,
                        format!("compute \"{name}\" has no expressions"),
                    )
                    .with_hint("add an expr: block, one FIELD: \"expression\" per line"),
                );
            }
            return;
        }
        NodeBody::Fail(f) => {
            fail_code(name, n.name.span, f, out);
            return;
        }
        NodeBody::Agent(_) | NodeBody::Tool(_) | NodeBody::Subbot(_) => return,
    };
    for prompt in prompts {
        if let PromptRef::Named(p) = prompt
            && !syms.prompts.contains_key(p.name.as_str())
        {
            out.push(
                node_diag(Code::C003, p.span, format!("unknown prompt \"{}\"", p.name))
                    .with_hint("write text in quotes for an inline prompt"),
            );
        }
    }
    if needs_model && model.is_none() {
        out.push(
            node_diag(
                Code::C018,
                n.name.span,
                format!("{} \"{name}\" needs a model to answer", n.kind.as_str()),
            )
            .with_hint("add model: \"provider/model\""),
        );
    }
    if let Some(m) = model
        && let Some(provider) = literal_provider(&m.value)
        && !PROVIDERS.contains(&provider)
    {
        out.push(
            node_diag(
                Code::C914,
                m.span,
                format!("unknown model provider \"{provider}\""),
            )
            .with_hint("expected anthropic/…, openai/… or openai_compatible/…"),
        );
    }
}

fn prompt_span(p: &PromptRef) -> Span {
    match p {
        PromptRef::Named(i) => i.span,
        PromptRef::Inline(s) => s.span,
    }
}

fn backend_word(backend: ast::Backend) -> &'static str {
    match backend {
        ast::Backend::Claw => "claw",
        ast::Backend::ClaudeCode => "claude_code",
        ast::Backend::Codex => "codex",
    }
}

/// A delegate node's model must name the provider its CLI speaks (C914): `claude_code` talks
/// to Anthropic, `codex` to an OpenAI Responses server. A carried `session` on a claw node is
/// the warning C941, since the built-in loop has no conversation to carry between nodes.
fn check_delegate(
    a: &ast::AgentProps,
    backend: Option<ast::Backend>,
    name: &str,
    out: &mut Vec<Diagnostic>,
) {
    let backend = backend.unwrap_or(ast::Backend::Claw);
    let node_diag =
        |span: Span, message: String| Diagnostic::new(Code::C914, span, message).with_node(name);
    let speaks: &[&str] = match backend {
        ast::Backend::Claw => {
            // Upstream workflows set `session` on claw nodes; the built-in loop does not carry
            // a conversation between nodes yet, which is said (C941) rather than refused.
            // `reasoning_effort` and `max_tokens` reach the provider's request.
            let unused = [a.delegate.session.and_then(|(s, span)| {
                (!matches!(s, ast::Session::Fresh | ast::Session::ArtifactsOnly))
                    .then_some(("session", span))
            })];
            for (prop, span) in unused.into_iter().flatten() {
                out.push(
                    Diagnostic::new(
                        Code::C941,
                        span,
                        format!("{prop} is not carried by the claw backend yet; it has no effect"),
                    )
                    .with_node(name)
                    .with_hint(format!(
                        "set backend: claude_code or codex, or remove {prop}"
                    )),
                );
            }
            return;
        }
        ast::Backend::ClaudeCode => &["anthropic"],
        ast::Backend::Codex => &["openai", "openai_compatible"],
    };
    if let Some(model) = &a.model
        && let Some(provider) = literal_provider(&model.value)
        && PROVIDERS.contains(&provider)
        && !speaks.contains(&provider)
    {
        out.push(
            node_diag(
                model.span,
                format!(
                    "backend {} cannot use provider \"{provider}\"",
                    backend_word(backend)
                ),
            )
            .with_hint(format!("expected {}/…", speaks.join("/… or "))),
        );
    }
}

/// C942 (warning): `readonly: true` with a writing tool in `tools`, which the node then does
/// not get.
fn check_readonly(a: &ast::AgentProps, name: &str, out: &mut Vec<Diagnostic>) {
    if !a.readonly.is_some_and(|b| b.value) {
        return;
    }
    for tool in a.tools.iter().flat_map(|l| &l.items) {
        if ir::Tool::from_name(&tool.text).is_some_and(ir::Tool::writes) {
            out.push(
                Diagnostic::new(
                    Code::C942,
                    tool.span,
                    format!("\"{}\" is removed from a readonly node", tool.text),
                )
                .with_node(name)
                .with_hint("remove it from tools, or set readonly: false"),
            );
        }
    }
}

/// C055: a permission rule that cannot be read (`Tool` or `Tool(pattern)`).
fn permission_rules(p: &ast::PermissionProps, node: Option<&str>, out: &mut Vec<Diagnostic>) {
    let lists = [("allow", &p.allow), ("ask", &p.ask), ("deny", &p.deny)];
    for (kind, list) in lists {
        for rule in list.iter().flat_map(|l| &l.items) {
            if let Some(why) = crate::permission::rule_problem(&rule.value) {
                let mut d = Diagnostic::new(
                    Code::C055,
                    rule.span,
                    format!("{kind} rule \"{}\": {why}", rule.value),
                )
                .with_hint("write Bash, Read(src/**), Bash(git status:*), WebFetch(domain:HOST)");
                if let Some(n) = node {
                    d = d.with_node(n);
                }
                out.push(d);
            }
        }
    }
}

/// C943 (warning): `capabilities`, `compaction` or `memory` on an agent is accepted for
/// upstream workflows but has no effect.
fn check_unenforced(a: &ast::AgentProps, name: &str, out: &mut Vec<Diagnostic>) {
    for key in &a.extras.unenforced {
        out.push(
            Diagnostic::new(
                Code::C943,
                key.span,
                format!(
                    "{} is accepted but not enforced yet; it has no effect",
                    key.name
                ),
            )
            .with_node(name)
            .with_hint(format!("remove {} to silence this warning", key.name)),
        );
    }
}

/// C044/C902 on a node-level `sandbox:`, then C128 when it passed (DSL.md §7.4): it is never
/// honoured, except that a node-level `none` under a workflow `none` says nothing new.
fn check_node_sandbox(decl: &SandboxDecl, node: &str, opted_out: bool, out: &mut Vec<Diagnostic>) {
    if let Checked::Valid(mode) = sandbox::check(decl, Some(node), out)
        && !(opted_out && mode == SandboxMode::None)
    {
        out.push(
            Diagnostic::new(
                Code::C128,
                sandbox::anchor(decl),
                format!("node sandbox is not honoured: \"{node}\" runs in the workflow's sandbox"),
            )
            .with_node(node),
        );
    }
}

/// The provider of a literal model (`provider/…`): `None` when the value holds `${` or `{{`
/// (checked at launch) or has no `/` (E021's business).
fn literal_provider(model: &str) -> Option<&str> {
    if model.contains("${") || model.contains("{{") {
        return None;
    }
    model.split_once('/').map(|(p, _)| p)
}

/// C143 at every quoted string holding `\"` (collected by the parser), with the node whose
/// property it is, when there is one.
fn check_backslash_quotes(file: &ast::File, syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    if file.strict_escape || file.backslash_quote_strings.is_empty() {
        return;
    }
    let mut owner: HashMap<Span, &str> = HashMap::new();
    for n in &syms.node_list {
        node_strings(n, &mut |s| {
            owner.entry(s.span).or_insert(n.name.name.as_str());
        });
    }
    for span in &file.backslash_quote_strings {
        let mut d = Diagnostic::new(
            Code::C143,
            *span,
            "the backslash in \\\" is kept in this string's value",
        )
        .with_hint("use a backtick string or ## strict-escape: on");
        d.node = owner.get(span).map(|n| (*n).to_owned());
        out.push(d);
    }
}

/// C047 / C048: `fan_out_each`'s own properties — `over` (exactly one `{{…}}` reference, the
/// list), `depends_on` only with `key` — and only on a `fan_out_each` router.
fn each_props(name: &str, at: Span, r: &ast::RouterProps, out: &mut Vec<Diagnostic>) {
    let diag = |code: Code, span: Span, message: String, hint: &str| {
        Diagnostic::new(code, span, message)
            .with_node(name)
            .with_hint(hint.to_owned())
    };
    if r.mode != ast::RouterMode::FanOutEach {
        let extra = [
            r.over.as_ref().map(|s| ("over", s.span)),
            r.as_.as_ref().map(|w| ("as", w.span)),
            r.key.as_ref().map(|w| ("key", w.span)),
            r.depends_on.as_ref().map(|w| ("depends_on", w.span)),
        ];
        for (key, span) in extra.into_iter().flatten() {
            out.push(diag(
                Code::C048,
                span,
                format!("\"{key}\" is only valid on a fan_out_each router"),
                "set mode: fan_out_each, or remove it",
            ));
        }
        return;
    }
    match &r.over {
        None => out.push(diag(
            Code::C047,
            at,
            format!("fan_out_each router \"{name}\" has no over"),
            "add over: \"{{outputs.NODE.FIELD}}\", the list to run the branch for",
        )),
        Some(s)
            if crate::template::parse(&s.value)
                .single_reference()
                .is_none() =>
        {
            out.push(diag(
                Code::C047,
                s.span,
                format!("over of \"{name}\" must be exactly one {{{{…}}}} reference"),
                "write over: \"{{outputs.NODE.FIELD}}\"",
            ));
        }
        Some(_) => {}
    }
    if let (Some(d), None) = (&r.depends_on, &r.key) {
        out.push(diag(
            Code::C047,
            d.span,
            format!("depends_on of \"{name}\" needs key"),
            "add key: FIELD, the field naming each item",
        ));
    }
}

/// C045: a `fail` node's `code` is required, `UPPER_SNAKE` (a letter first, at most 64 bytes),
/// and none of the engine's own failure codes (a run's `failure_code` is the engine's closed
/// vocabulary; the declared code is reported beside it, so it must never pass for one).
fn fail_code(name: &str, at: Span, f: &ast::FailProps, out: &mut Vec<Diagnostic>) {
    let problem = match &f.code {
        None => Some((at, format!("fail node \"{name}\" has no code"))),
        Some(w) => {
            let shaped = w.text.len() <= 64
                && w.text.starts_with(|c: char| c.is_ascii_uppercase())
                && w.text
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !shaped {
                Some((
                    w.span,
                    format!("fail code \"{}\" is not UPPER_SNAKE", w.text),
                ))
            } else if iterion_vocab::FailureCode::from_str_exact(&w.text).is_some() {
                Some((
                    w.span,
                    format!(
                        "fail code \"{}\" is one of the engine's own failure codes",
                        w.text
                    ),
                ))
            } else {
                None
            }
        }
    };
    if let Some((span, message)) = problem {
        out.push(
            Diagnostic::new(Code::C045, span, message)
                .with_node(name)
                .with_hint("write code: YOUR_CODE (A–Z, 0–9 and _, a letter first, at most 64)"),
        );
    }
}

/// Calls `f` on every string literal that is a node's own property.
fn node_strings(n: &ast::Node, f: &mut dyn FnMut(&ast::StrLit)) {
    let sandbox = match &n.body {
        NodeBody::Agent(a) => {
            if let Some(m) = &a.model {
                f(m);
            }
            for p in a.system.iter().chain(a.user.iter()) {
                if let PromptRef::Inline(s) = p {
                    f(s);
                }
            }
            &a.sandbox
        }
        NodeBody::Tool(t) => {
            f(&t.command);
            &t.sandbox
        }
        NodeBody::Subbot(b) => {
            f(&b.source);
            &None
        }
        NodeBody::Router(r) => {
            r.model.iter().for_each(&mut *f);
            for p in r.system.iter().chain(&r.user) {
                if let PromptRef::Inline(s) = p {
                    f(s);
                }
            }
            &None
        }
        NodeBody::Compute(c) => {
            c.expr.iter().for_each(|(_, s)| f(s));
            &None
        }
        NodeBody::Fail(fail) => {
            fail.message
                .iter()
                .chain(&fail.description)
                .for_each(&mut *f);
            &None
        }
        NodeBody::Human(h) => {
            h.model.iter().for_each(&mut *f);
            for p in h.system.iter().chain(&h.instructions) {
                if let PromptRef::Inline(s) = p {
                    f(s);
                }
            }
            &None
        }
    };
    let Some(SandboxDecl::Block(b)) = sandbox else {
        return;
    };
    let opt = [&b.image, &b.user, &b.workspace_folder, &b.post_create];
    opt.into_iter().flatten().for_each(&mut *f);
    let maps = [
        b.env.as_ref(),
        b.build.as_ref().and_then(|x| x.args.as_ref()),
    ];
    for m in maps.into_iter().flatten() {
        m.entries.iter().for_each(|e| f(&e.value));
    }
    if let Some(build) = &b.build {
        [&build.dockerfile, &build.context]
            .into_iter()
            .flatten()
            .for_each(&mut *f);
    }
    b.mounts.iter().flat_map(|l| &l.items).for_each(&mut *f);
    if let Some(net) = &b.network {
        net.preset.iter().for_each(&mut *f);
        net.rules.iter().flat_map(|l| &l.items).for_each(&mut *f);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod e2e_tests;

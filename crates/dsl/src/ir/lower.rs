//! Tree → [`Workflow`]: names resolved, defaults applied, words typed (see the module above).
use std::collections::{BTreeMap, HashMap, HashSet};

use super::resources;
use super::*;
use crate::ast;

/// Lowers a tree that passed every check. `None` only when the file declares no workflow.
///
/// Defensive on trees that did not pass the checks (it never panics): the first declaration of a
/// name wins, unknown names and words are skipped or take their default. Subbot nodes get no
/// child; see [`lower_with`].
#[cfg(test)]
pub(crate) fn lower(file: &ast::File) -> Option<Workflow> {
    lower_with(file, &HashMap::new())
}

/// [`lower`], with the compiled child of each subbot node by node name (DSL.md §3.9).
pub(crate) fn lower_with(
    file: &ast::File,
    children: &HashMap<String, Workflow>,
) -> Option<Workflow> {
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
    // The first declaration in a block wins; a workflow's var replaces a top-level one (§3.1).
    let mut lower_vars = |block: &ast::VarsBlock, vars: &mut Vec<Var>, overrides: bool| {
        let mut own = HashSet::new();
        for v in &block.vars {
            if !own.insert(v.name.name.as_str()) {
                continue;
            }
            if var_names.insert(v.name.name.clone()) {
                vars.push(lower_var(v));
            } else if overrides && let Some(slot) = vars.iter_mut().find(|x| x.name == v.name.name)
            {
                *slot = lower_var(v);
            }
        }
    };
    for decl in &file.decls {
        match decl {
            ast::Decl::Vars(b) => lower_vars(b, &mut vars, false),
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
                                enum_values: f
                                    .enum_values
                                    .as_ref()
                                    .map(|l| l.items.iter().map(|i| i.value.clone()).collect()),
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
                    lower_vars(b, &mut vars, true);
                }
            }
            ast::Decl::Cursor(_)
            | ast::Decl::McpServer(_)
            | ast::Decl::Presets(_)
            | ast::Decl::Attachments(_) => {}
        }
    }
    let declared_sandbox_fields = declared_sandbox_fields(wf, &nodes);
    let default_backend = wf.default_backend.map(|(b, _)| b);
    let mut extras = Extras::default();
    for decl in &file.decls {
        extras.add(decl);
    }
    if let Some(b) = &wf.attachments {
        extras.add_attachments(b);
    }
    let nodes: Vec<Node> = nodes
        .into_iter()
        .map(|n| {
            let mut node = lower_node(n, &prompts, children, default_backend);
            if let (NodeBody::Agent(a), ast::NodeBody::Agent(props)) = (&mut node.body, &n.body) {
                a.mcp_servers =
                    resources::node_mcp_servers(props.extras.mcp.as_ref(), wf.mcp.as_ref());
                a.cursors = resources::node_cursors(props.extras.cursors.as_ref());
                a.permission = effective_permission(&props.extras.permission, &wf.permission);
            }
            node
        })
        .collect();
    let subbot_runs = nodes
        .iter()
        .filter_map(|n| match &n.body {
            NodeBody::Subbot(SubbotNode {
                child: Some(child), ..
            }) => Some(1 + child.subbot_runs),
            _ => None,
        })
        .sum();
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
        max_parallel_branches: b
            .max_parallel_branches
            .and_then(|i| u32::try_from(i.value).ok()),
        max_tokens: b.max_tokens.and_then(|i| u64::try_from(i.value).ok()),
        max_cost_usd: match &b.max_cost_usd {
            Some(ast::Value::Int(i, _)) => Some(serde_json::Number::from(*i)),
            Some(ast::Value::Float(f, _)) => serde_json::Number::from_f64(*f),
            _ => None,
        },
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
        repo_devbox: wf.repo_devbox.as_ref().map(|w| w.text == "on"),
        budget,
        sandbox: wf
            .sandbox
            .as_ref()
            .map_or_else(Sandbox::default, lower_sandbox),
        declared_sandbox_fields,
        subbot_runs,
        mcp_servers: extras.mcp_servers,
        cursors: extras.cursors,
        presets: extras.presets,
        attachments: extras.attachments,
        skills: Vec::new(),
        manifest: None,
    })
}

/// The declarations of cursors, MCP servers, presets and attachments; the first of a name wins.
#[derive(Default)]
struct Extras {
    mcp_servers: BTreeMap<String, McpServer>,
    cursors: BTreeMap<String, Cursor>,
    presets: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    attachments: Vec<Attachment>,
}

impl Extras {
    fn add(&mut self, decl: &ast::Decl) {
        match decl {
            ast::Decl::Cursor(c) => {
                self.cursors
                    .entry(c.name.name.clone())
                    .or_insert_with(|| resources::lower_cursor(c));
            }
            ast::Decl::McpServer(m) => {
                self.mcp_servers
                    .entry(m.name.name.clone())
                    .or_insert_with(|| resources::lower_mcp_server(m));
            }
            ast::Decl::Presets(p) => {
                for (name, entries) in &p.presets {
                    self.presets.entry(name.name.clone()).or_insert_with(|| {
                        entries
                            .iter()
                            .map(|(k, v)| (k.name.clone(), resources::preset_json(v)))
                            .collect()
                    });
                }
            }
            ast::Decl::Attachments(b) => self.add_attachments(b),
            _ => {}
        }
    }

    fn add_attachments(&mut self, b: &ast::AttachmentsBlock) {
        for a in &b.items {
            if !self.attachments.iter().any(|x| x.name == a.name.name) {
                self.attachments.push(resources::lower_attachment(a));
            }
        }
    }
}

/// SANDBOX.md §14's `declared_sandbox_fields`: the workflow block's fields, then each agent or
/// judge node's as `<node>.<field>`. Read from the tree, so `image:` alone is `image` (the IR
/// would also say `mode=inline`, its default for a block).
fn declared_sandbox_fields(wf: &ast::Workflow, nodes: &[&ast::Node]) -> Vec<String> {
    let mut fields: Vec<String> = wf
        .sandbox
        .as_ref()
        .map(fields_declared_by)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_owned)
        .collect();
    for node in nodes {
        if let ast::NodeBody::Agent(props) = &node.body
            && let Some(decl) = &props.sandbox
        {
            let name = &node.name.name;
            fields.extend(
                fields_declared_by(decl)
                    .into_iter()
                    .map(|f| format!("{name}.{f}")),
            );
        }
    }
    fields
}

/// The fields one `sandbox:` declares (SANDBOX.md §14 rule 1): `mode=none|inline`, `image`,
/// `build`, `mounts`, `env`, `user`, `post_create`, `workspace_folder`, `host_state` when set
/// and not `auto`, `network` when it has any content.
fn fields_declared_by(decl: &ast::SandboxDecl) -> Vec<&'static str> {
    let mode = |word: &str| match SandboxMode::from_word(word) {
        Some(SandboxMode::None) => Some("mode=none"),
        Some(SandboxMode::Inline) => Some("mode=inline"),
        Some(SandboxMode::Auto | SandboxMode::Inherit) | None => None,
    };
    let b = match decl {
        ast::SandboxDecl::Short(w) => return mode(&w.text).into_iter().collect(),
        ast::SandboxDecl::Block(b) => b,
    };
    let network_content = b.network.as_ref().is_some_and(|n| {
        n.mode.is_some() || n.preset.is_some() || n.rules.is_some() || n.inherit.is_some()
    });
    let host_state = b.host_state.as_ref().is_some_and(|w| w.text != "auto");
    [
        (b.mode.as_ref().and_then(|w| mode(&w.text)), true),
        (Some("image"), b.image.is_some()),
        (Some("build"), b.build.is_some()),
        (Some("mounts"), b.mounts.is_some()),
        (Some("env"), b.env.is_some()),
        (Some("user"), b.user.is_some()),
        (Some("post_create"), b.post_create.is_some()),
        (Some("workspace_folder"), b.workspace_folder.is_some()),
        (Some("host_state"), host_state),
        (Some("network"), network_content),
    ]
    .into_iter()
    .filter_map(|(field, written)| field.filter(|_| written))
    .collect()
}

/// A var default converted to its type; see [`default_json`].
fn lower_var(v: &ast::VarDef) -> Var {
    Var {
        name: v.name.name.clone(),
        ty: v.ty.into(),
        default: v.default.as_ref().and_then(|d| default_json(v.ty, d)),
        enum_values: v
            .enum_values
            .as_ref()
            .map(|l| l.items.iter().map(|s| s.value.clone()).collect()),
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

/// A node's gate: its mode, else the workflow's; each rule list its own when it declares a
/// non-empty one, else the workflow's (a node's list replaces, never widens, the workflow's).
/// `None` when the mode is `off`.
fn effective_permission(
    node: &ast::PermissionProps,
    wf: &ast::PermissionProps,
) -> Option<crate::permission::Permission> {
    use crate::permission::{Permission, PermissionMode};
    let mode = node
        .mode
        .or(wf.mode)
        .map_or(PermissionMode::Off, |(m, _)| m);
    if mode == PermissionMode::Off {
        return None;
    }
    let list = |own: &Option<ast::StrList>, inherited: &Option<ast::StrList>| {
        own.as_ref()
            .filter(|l| !l.items.is_empty())
            .or(inherited.as_ref())
            .map(|l| l.items.iter().map(|s| s.value.clone()).collect())
            .unwrap_or_default()
    };
    Some(Permission {
        mode,
        allow: list(&node.allow, &wf.allow),
        ask: list(&node.ask, &wf.ask),
        deny: list(&node.deny, &wf.deny),
    })
}

fn lower_await(a: Option<&(ast::AwaitMode, ast::Span)>) -> Option<AwaitMode> {
    a.map(|(m, _)| match m {
        ast::AwaitMode::WaitAll => AwaitMode::WaitAll,
        ast::AwaitMode::BestEffort => AwaitMode::BestEffort,
    })
}

fn lower_node(
    n: &ast::Node,
    prompts: &HashMap<&str, &str>,
    children: &HashMap<String, Workflow>,
    default_backend: Option<ast::Backend>,
) -> Node {
    let ident = |i: &Option<ast::Ident>| i.as_ref().map(|i| i.name.clone());
    let (await_mode, body) = match &n.body {
        ast::NodeBody::Agent(a) => {
            let readonly = a.readonly.is_some_and(|b| b.value);
            let mut tools = Vec::new();
            let mut mcp_tools = Vec::new();
            let mut unavailable_tools = Vec::new();
            for w in a.tools.iter().flat_map(|l| &l.items) {
                if let Some(t) = Tool::from_name(&w.text) {
                    let dropped = tools.contains(&t) || (readonly && t.writes());
                    if !dropped {
                        tools.push(t);
                    }
                } else if let Some(r) = McpToolRef::parse(&w.text) {
                    if !mcp_tools.contains(&r) {
                        mcp_tools.push(r);
                    }
                } else if !unavailable_tools.contains(&w.text) {
                    unavailable_tools.push(w.text.clone());
                }
            }
            // Neither model nor backend: upstream picks a backend from what the host has; here
            // that is always its first choice, `claude_code` (docs/language.md).
            let backend = match (
                a.delegate.backend.map(|(b, _)| b).or(default_backend),
                &a.model,
            ) {
                (None, None) => Backend::ClaudeCode,
                (chosen, _) => lower_backend(chosen),
            };
            let body = NodeBody::Agent(AgentNode {
                model: a.model.as_ref().map_or_else(
                    || default_delegate_model(backend).to_owned(),
                    |m| m.value.clone(),
                ),
                provider: a.delegate.provider.as_ref().map(|p| p.value.clone()),
                publish: a.publish.as_ref().map(|p| p.name.clone()),
                readonly,
                system: a.system.as_ref().map(|p| prompt_text(p, prompts)),
                user: a
                    .user
                    .as_ref()
                    .map_or_else(|| INPUT_ONLY_PROMPT.to_owned(), |p| prompt_text(p, prompts)),
                input: ident(&a.input),
                output: ident(&a.output),
                tools,
                tool_max_steps: a
                    .tool_max_steps
                    .and_then(|i| u32::try_from(i.value).ok())
                    .filter(|&n| n > 0)
                    .unwrap_or(DEFAULT_TOOL_MAX_STEPS),
                interaction: match a.interaction {
                    Some((ast::Interaction::Ask, _)) => Interaction::Ask,
                    Some((ast::Interaction::None, _)) | None => Interaction::None,
                },
                backend,
                session: match a.delegate.session {
                    Some((ast::Session::Inherit, _)) => Session::Inherit,
                    Some((ast::Session::Fork, _)) => Session::Fork,
                    Some((ast::Session::InheritIfAvailable, _)) => Session::InheritIfAvailable,
                    Some((ast::Session::Fresh | ast::Session::ArtifactsOnly, _)) | None => {
                        Session::Fresh
                    }
                },
                reasoning_effort: a.delegate.reasoning_effort.as_ref().map(|w| w.text.clone()),
                max_tokens: a
                    .delegate
                    .max_tokens
                    .and_then(|i| u32::try_from(i.value).ok()),
                mcp_servers: Vec::new(),
                mcp_tools,
                unavailable_tools,
                permission: None,
                cursors: Vec::new(),
            });
            (lower_await(a.await_.as_ref()), body)
        }
        ast::NodeBody::Tool(t) => (
            lower_await(t.await_.as_ref()),
            NodeBody::Tool(ToolNode {
                command: t.command.value.clone(),
                publish: t.publish.as_ref().map(|p| p.name.clone()),
                script: t.script.map(|(l, _)| match l {
                    ast::ScriptLanguage::Sh => ScriptLanguage::Sh,
                    ast::ScriptLanguage::Bash => ScriptLanguage::Bash,
                    ast::ScriptLanguage::Node => ScriptLanguage::Node,
                    ast::ScriptLanguage::Python => ScriptLanguage::Python,
                }),
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
                    ast::RouterMode::RoundRobin => RouterMode::RoundRobin,
                    ast::RouterMode::Llm => RouterMode::Llm,
                    ast::RouterMode::FanOutEach => RouterMode::FanOutEach,
                },
                over: r.over.as_ref().map(|s| s.value.clone()),
                as_: r.as_.as_ref().map(|w| w.text.clone()),
                key: r.key.as_ref().map(|w| w.text.clone()),
                depends_on: r.depends_on.as_ref().map(|w| w.text.clone()),
                model: match (&r.model, lower_backend(r.backend.map(|(b, _)| b))) {
                    (Some(m), _) => Some(m.value.clone()),
                    (None, Backend::Claw) => None,
                    (None, b) => Some(default_delegate_model(b).to_owned()),
                },
                system: r.system.as_ref().map(|p| prompt_text(p, prompts)),
                user: r.user.as_ref().map(|p| prompt_text(p, prompts)),
                backend: lower_backend(r.backend.map(|(b, _)| b)),
                provider: r.provider.as_ref().map(|p| p.value.clone()),
                reasoning_effort: r.reasoning_effort.as_ref().map(|w| w.text.clone()),
            }),
        ),
        ast::NodeBody::Fail(f) => (
            None,
            NodeBody::Fail(FailNode {
                code: f.code.as_ref().map(|w| w.text.clone()).unwrap_or_default(),
                message: f.message.as_ref().map(|m| m.value.clone()),
                resumable: f.resumable.is_some_and(|b| b.value),
            }),
        ),
        ast::NodeBody::Compute(c) => (
            lower_await(c.await_.as_ref()),
            NodeBody::Compute(ComputeNode {
                expr: c
                    .expr
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.value.clone()))
                    .collect(),
                publish: c.publish.as_ref().map(|p| p.name.clone()),
                input: ident(&c.input),
                output: ident(&c.output),
            }),
        ),
        ast::NodeBody::Human(h) => (
            lower_await(h.await_.as_ref()),
            NodeBody::Human(HumanNode {
                mode: match h.interaction {
                    Some((ast::HumanMode::Llm, _)) => HumanMode::Llm,
                    Some((ast::HumanMode::LlmOrHuman, _)) => HumanMode::LlmOrHuman,
                    Some((ast::HumanMode::Human, _)) | None => HumanMode::Human,
                },
                instructions: h.instructions.as_ref().map(|p| prompt_text(p, prompts)),
                model: h.model.as_ref().map(|m| m.value.clone()),
                system: h.system.as_ref().map(|p| prompt_text(p, prompts)),
                input: ident(&h.input),
                output: ident(&h.output),
                publish: h.publish.as_ref().map(|p| p.name.clone()),
            }),
        ),
        ast::NodeBody::Subbot(b) => (
            lower_await(b.await_.as_ref()),
            NodeBody::Subbot(SubbotNode {
                source: b.source.value.clone(),
                output: ident(&b.output),
                with: b.with.as_ref().map(lower_mappings).unwrap_or_default(),
                child: children.get(&n.name.name).cloned().map(Box::new),
            }),
        ),
    };
    Node {
        id: n.name.name.clone(),
        kind: n.kind,
        await_mode,
        body,
    }
}

/// A `with { … }` map's entries as mappings (lists and maps are refused by the parser).
fn lower_mappings(w: &ast::WithMap) -> Vec<Mapping> {
    w.entries
        .iter()
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
        .collect()
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
    let with = e.with.as_ref().map(lower_mappings).unwrap_or_default();
    Edge {
        from: e.from.name.clone(),
        to,
        condition,
        loop_: e.loop_.as_ref().map(|l| match &l.cap_template {
            Some(lit) => LoopRef {
                name: l.name.name.clone(),
                cap: 0,
                cap_template: Some(lit.value.clone()),
            },
            None => LoopRef {
                name: l.name.name.clone(),
                cap: u32::try_from(l.cap.max(1)).unwrap_or(u32::MAX),
                cap_template: None,
            },
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
fn lower_sandbox(decl: &ast::SandboxDecl) -> Sandbox {
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

/// The IR backend of a written one (`claw` when absent).
fn lower_backend(b: Option<ast::Backend>) -> Backend {
    match b {
        Some(ast::Backend::ClaudeCode) => Backend::ClaudeCode,
        Some(ast::Backend::Codex) => Backend::Codex,
        Some(ast::Backend::Claw) | None => Backend::Claw,
    }
}

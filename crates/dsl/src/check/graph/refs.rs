//! Template and expression references (DSL.md §4.1–§4.3, §5.2, §6.1): C004, C014 (expression
//! fields), C029, C031, C032, C033, C034, C036, C040, C093, C095, C137, C138, C147, C148, C904.
use std::collections::{HashMap, HashSet};

use super::model::{Graph, OutputSchema, did_you_mean, field, output_schema, router_input_lacks};
use crate::ast::{self, Decl, NodeBody, PromptRef, Span, StrLit, When};
use crate::check::symbols::Symbols;
use crate::diag::{Code, Diagnostic};
use crate::expr;
use crate::ir::{HISTORY_FIELD, SESSION_FINGERPRINT_FIELD, SESSION_ID_FIELD};
use crate::template::{self, Namespace};

/// Which of a template's checks to run. A named prompt is checked once for what does not
/// depend on the node using it, and once per using node for what does (C034, C036).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    All,
    ContextFree,
    NodeOnly,
}

/// Who reads a template, which decides what `input` is and who must run after `outputs.N`.
#[derive(Clone, Copy, Debug)]
enum Consumer<'a> {
    /// Secret values, `max_duration`, a prompt no node uses.
    Nobody,
    /// A prompt or a command of this node: `input` is its input map, checked against its
    /// `input` schema; `outputs.N` needs N to run strictly before it.
    Node(&'a str),
    /// A `with` value or `when` expression of an edge from this node: `input` is its output;
    /// `outputs.N` needs N to run before it or to be it.
    EdgeSource(&'a str),
}

/// Where a reference was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Template,
    Expression,
    /// A compute entry: an expression, but a field missing from a schema is C921, not C031.
    Compute,
}

#[derive(Clone, Copy, Debug)]
struct Place<'a> {
    /// The diagnostic's `node`.
    node: Option<&'a str>,
    consumer: Consumer<'a>,
    part: Part,
}

impl Place<'_> {
    fn context_free(&self) -> bool {
        self.part != Part::NodeOnly
    }

    fn node_dependent(&self) -> bool {
        self.part != Part::ContextFree
    }
}

/// An `outputs.N` whose C036 check waits for the batched reachability of the graph.
struct RunsBefore<'a> {
    producer: &'a str,
    consumer: &'a str,
    /// In a `with` or `when`, N may be the edge's source itself.
    may_be_consumer: bool,
    span: Span,
    node: Option<&'a str>,
}

struct Refs<'s, 'a> {
    syms: &'s Symbols<'a>,
    graph: Option<&'s Graph<'a>>,
    out: &'s mut Vec<Diagnostic>,
    runs_before: Vec<RunsBefore<'a>>,
    /// While a named prompt is checked for one of its nodes: every node that uses it (C149).
    prompt_users: &'s [&'a str],
}

pub(super) fn check<'a>(
    file: &'a ast::File,
    syms: &Symbols<'a>,
    graph: Option<&Graph<'a>>,
    out: &mut Vec<Diagnostic>,
) {
    let mut r = Refs {
        syms,
        graph,
        out,
        runs_before: Vec::new(),
        prompt_users: &[],
    };
    // Named prompts and the nodes that use them, in declaration order.
    let mut users: HashMap<&str, Vec<&'a str>> = HashMap::new();
    let mut seen_use: HashSet<(&str, &str)> = HashSet::new();
    for node in &syms.node_list {
        let name = node.name.name.as_str();
        let place = Place {
            node: Some(name),
            consumer: Consumer::Node(name),
            part: Part::All,
        };
        match &node.body {
            NodeBody::Agent(a) => {
                if let Some(m) = &a.model {
                    r.model(m, name);
                }
                for p in a.system.iter().chain(a.user.iter()) {
                    match p {
                        PromptRef::Inline(text) => {
                            r.template(text, &template::parse(&text.value), place, Kind::Text);
                        }
                        PromptRef::Named(id) => {
                            if seen_use.insert((id.name.as_str(), name)) {
                                users.entry(id.name.as_str()).or_default().push(name);
                            }
                        }
                    }
                }
            }
            NodeBody::Tool(t) => {
                // A node / python script's references are rendered as JSON literals, not shell
                // words: the quoting rule of C137 is for commands and shell scripts only.
                let kind = match t.script {
                    Some((ast::ScriptLanguage::Node | ast::ScriptLanguage::Python, _)) => {
                        Kind::Text
                    }
                    _ => Kind::Command,
                };
                let parsed = match t.script {
                    Some((lang, _)) => {
                        template::parse_script(&t.command.value, lang.line_comment())
                    }
                    None => template::parse(&t.command.value),
                };
                r.template(&t.command, &parsed, place, kind);
            }
            NodeBody::Compute(c) => {
                for (_, text) in &c.expr {
                    r.expression(text, place, Origin::Compute);
                }
            }
            NodeBody::Router(_) | NodeBody::Human(_) => {
                if let NodeBody::Router(x) = &node.body
                    && let Some(over) = &x.over
                {
                    r.template(over, &template::parse(&over.value), place, Kind::Text);
                }
                let prompts: Vec<&PromptRef> = match &node.body {
                    NodeBody::Router(x) => x.system.iter().chain(&x.user).collect(),
                    NodeBody::Human(h) => h.system.iter().chain(&h.instructions).collect(),
                    _ => Vec::new(),
                };
                for p in prompts {
                    match p {
                        PromptRef::Inline(text) => {
                            r.template(text, &template::parse(&text.value), place, Kind::Text);
                        }
                        PromptRef::Named(id) => {
                            if seen_use.insert((id.name.as_str(), name)) {
                                users.entry(id.name.as_str()).or_default().push(name);
                            }
                        }
                    }
                }
                let model = match &node.body {
                    NodeBody::Router(x) => x.model.as_ref(),
                    NodeBody::Human(h) => h.model.as_ref(),
                    _ => None,
                };
                if let Some(m) = model {
                    r.model(m, name);
                }
            }
            NodeBody::Fail(f) => {
                if let Some(text) = &f.message {
                    r.template(text, &template::parse(&text.value), place, Kind::Text);
                }
            }
            NodeBody::Subbot(b) => {
                for (_, v) in b.with.iter().flat_map(|w| &w.entries) {
                    if let ast::Value::Str(text) = v {
                        r.template(text, &template::parse(&text.value), place, Kind::Text);
                    }
                }
            }
        }
    }
    for decl in &file.decls {
        match decl {
            Decl::Prompt(p) => {
                let parsed = template::parse(&p.body.value);
                let list = users.get(p.name.name.as_str());
                let free = Place {
                    node: list.and_then(|l| l.first().copied()),
                    consumer: Consumer::Nobody,
                    part: Part::ContextFree,
                };
                r.template(&p.body, &parsed, free, Kind::Text);
                let node_refs = template::Template {
                    segments: parsed
                        .segments
                        .into_iter()
                        .filter(|s| {
                            matches!(s, template::Segment::Ref(r)
                                if matches!(r.namespace, Namespace::Input | Namespace::Outputs))
                        })
                        .collect(),
                    issues: Vec::new(),
                };
                let all_users = list.map_or(&[][..], Vec::as_slice);
                for &user in all_users {
                    let place = Place {
                        node: Some(user),
                        consumer: Consumer::Node(user),
                        part: Part::NodeOnly,
                    };
                    r.prompt_users = all_users;
                    r.template(&p.body, &node_refs, place, Kind::Text);
                    r.prompt_users = &[];
                }
            }
            Decl::Secrets(block) => {
                for s in &block.secrets {
                    if let Some(v) = &s.value {
                        r.host(v, None);
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(g) = graph {
        if let Some(d) = g.wf.budget.as_ref().and_then(|b| b.max_duration.as_ref()) {
            r.host(d, None);
        }
        for e in &g.wf.edges {
            r.edge(e);
        }
        r.finish_runs_before(g);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Command,
}

/// The span of `len` chars at `offset` of a string's value: [`StrLit::span_at`], with a binary
/// search over the value's lines so a long prompt with many references stays linear.
fn span_in(lit: &StrLit, offset: usize, len: usize) -> Span {
    let width = u32::try_from(len).unwrap_or(u32::MAX);
    let after = lit.lines.partition_point(|l| l.value_offset <= offset);
    match lit.lines.get(after.saturating_sub(1)) {
        Some(l) => {
            let delta = u32::try_from(offset.saturating_sub(l.value_offset)).unwrap_or(u32::MAX);
            Span::new(l.line, l.col.saturating_add(delta), width)
        }
        None => lit.span_at(offset, width),
    }
}

impl<'a> Refs<'_, 'a> {
    fn push(
        &mut self,
        code: Code,
        span: Span,
        msg: String,
        node: Option<&str>,
        hint: Option<String>,
    ) {
        let mut d = Diagnostic::new(code, span, msg);
        if let Some(n) = node {
            d = d.with_node(n);
        }
        if let Some(h) = hint {
            d = d.with_hint(h);
        }
        self.out.push(d);
    }

    /// C004 for a malformed `${…}` (model, `max_duration`, secret values).
    fn host(&mut self, lit: &StrLit, node: Option<&str>) {
        if let Err(e) = template::parse_host(&lit.value) {
            let span = span_in(lit, e.offset, e.len);
            self.push(e.code(), span, e.to_string(), node, None);
        }
    }

    /// `model`: `${…}` is expanded at launch; the only template is `{{vars.X}}` (C148). A
    /// template rejected by C148 is not checked further (§8.3).
    fn model(&mut self, lit: &StrLit, node: &'a str) {
        self.host(lit, Some(node));
        let t = template::parse(&lit.value);
        self.issues(lit, &t, Some(node));
        let bad: Vec<&template::Reference> = t
            .references()
            .filter(|r| !(r.namespace == Namespace::Vars && r.path.len() == 1))
            .collect();
        for r in &bad {
            self.push(
                Code::C148,
                span_in(lit, r.offset, r.len),
                "model may only use {{vars.…}} templates".to_string(),
                Some(node),
                None,
            );
        }
        if bad.is_empty() {
            let place = Place {
                node: Some(node),
                consumer: Consumer::Node(node),
                part: Part::ContextFree,
            };
            for r in t.references() {
                let span = span_in(lit, r.offset, r.len);
                self.reference(r.namespace, &r.path, span, place, Origin::Template);
            }
        }
    }

    /// C004 / C904 issues of a scanned template.
    fn issues(&mut self, lit: &StrLit, t: &template::Template, node: Option<&str>) {
        for issue in &t.issues {
            let span = span_in(lit, issue.offset, issue.len);
            self.push(issue.code(), span, issue.message(), node, None);
        }
    }

    fn template(&mut self, lit: &StrLit, t: &template::Template, place: Place<'a>, kind: Kind) {
        if place.context_free() {
            self.issues(lit, t, place.node);
        }
        for r in t.references() {
            let span = span_in(lit, r.offset, r.len);
            self.reference(r.namespace, &r.path, span, place, Origin::Template);
        }
        if kind == Kind::Command && place.context_free() {
            for r in template::quoted_references(t) {
                self.push(
                    Code::C137,
                    span_in(lit, r.offset, r.len),
                    format!("{} is inside quotes: its value is not protected", r.text),
                    place.node,
                    Some("remove the quotes; the value is quoted for you".to_string()),
                );
            }
        }
    }

    /// `with` values and `when` expressions of one edge.
    fn edge(&mut self, e: &'a ast::Edge) {
        let src = e.from.name.as_str();
        let declared = self.syms.nodes.contains_key(src);
        let place = Place {
            node: declared.then_some(src),
            consumer: if declared {
                Consumer::EdgeSource(src)
            } else {
                Consumer::Nobody
            },
            part: Part::All,
        };
        if let Some(with) = &e.with {
            for (_, v) in &with.entries {
                if let ast::Value::Str(lit) = v {
                    self.template(lit, &template::parse(&lit.value), place, Kind::Text);
                }
            }
        }
        if let Some(When::Expr { text, .. }) = &e.when {
            self.expression(text, place, Origin::Expression);
        }
        // A templated loop cap is resolved like a `with` value of this edge.
        if let Some(lit) = e.loop_.as_ref().and_then(|l| l.cap_template.as_ref()) {
            self.template(lit, &template::parse(&lit.value), place, Kind::Text);
        }
    }

    /// An expression string (a `when "…"` or a compute `expr` entry): C040 / C138, then its paths.
    fn expression(&mut self, text: &StrLit, place: Place<'a>, origin: Origin) {
        match expr::parse(&text.value) {
            Err(err) => self.push(err.code(), text.span, err.to_string(), place.node, None),
            Ok(parsed) => {
                for p in parsed.paths() {
                    let ns = p.namespace();
                    if !p.is_bare()
                        && let Err(reason) = template::check_shape(ns, p.rest())
                    {
                        self.push(
                            Code::C004,
                            text.span,
                            format!("malformed reference {}: {reason}", p.dotted()),
                            place.node,
                            None,
                        );
                        continue;
                    }
                    self.reference(ns, p.rest(), text.span, place, origin);
                }
            }
        }
    }

    /// C036 for every `outputs.N` collected, answered in one batch (§4.1 "runs before").
    fn finish_runs_before(&mut self, g: &Graph<'a>) {
        let pending = std::mem::take(&mut self.runs_before);
        let pairs: Vec<(&str, &str)> = pending.iter().map(|p| (p.producer, p.consumer)).collect();
        let answers = g.reach_many(self.syms, &pairs);
        for (p, runs) in pending.iter().zip(answers) {
            if runs || (p.may_be_consumer && p.producer == p.consumer) {
                continue;
            }
            self.push(
                Code::C036,
                p.span,
                format!("\"{}\" never runs before \"{}\"", p.producer, p.consumer),
                p.node,
                None,
            );
        }
    }

    /// The static checks of one reference (the table of §4.1).
    fn reference(
        &mut self,
        ns: Namespace,
        path: &[String],
        span: Span,
        place: Place<'a>,
        origin: Origin,
    ) {
        let syms = self.syms;
        let first = path.first().map(String::as_str);
        match ns {
            Namespace::Vars => {
                if let (Some(x), true) = (first, place.context_free())
                    && !syms.vars.contains_key(x)
                {
                    let hint = did_you_mean(x, syms.vars.keys().copied());
                    self.push(
                        Code::C033,
                        span,
                        format!("unknown var \"{x}\""),
                        place.node,
                        hint,
                    );
                }
            }
            Namespace::Input => {
                let Some(f) = first else { return };
                match place.consumer {
                    Consumer::Node(n) if place.node_dependent() => {
                        if let Some(s) = input_schema(syms, n)
                            && field(s, f).is_none()
                            && !mapped_in(self.graph, n, f)
                        {
                            // A prompt several nodes share may read a field only some of them
                            // get: for the others it renders empty (a warning, not an error).
                            let other = self
                                .prompt_users
                                .iter()
                                .copied()
                                .find(|&u| u != n && input_has(syms, self.graph, u, f));
                            let (code, message) = match other {
                                Some(other) => (
                                    Code::C149,
                                    format!(
                                        "input schema \"{}\" of \"{n}\" has no field \"{f}\" (node \"{other}\", which shares this prompt, has it): it renders empty for \"{n}\"",
                                        s.name.name
                                    ),
                                ),
                                None => (
                                    Code::C034,
                                    format!(
                                        "input schema \"{}\" of \"{n}\" has no field \"{f}\"",
                                        s.name.name
                                    ),
                                ),
                            };
                            self.push(code, span, message, place.node, None);
                        }
                    }
                    Consumer::EdgeSource(src) => match output_schema(syms, src) {
                        OutputSchema::Known(s) if field(s, f).is_none() => {
                            let code = match origin {
                                Origin::Template => Code::C034,
                                Origin::Expression | Origin::Compute => Code::C014,
                            };
                            self.push(
                                code,
                                span,
                                format!(
                                    "output schema \"{}\" of \"{src}\" has no field \"{f}\"",
                                    s.name.name
                                ),
                                place.node,
                                None,
                            );
                        }
                        OutputSchema::Missing if origin != Origin::Template => {
                            // A router: its input is its predecessor's output (C920).
                            router_input_lacks(self.syms, src, f, span, self.out);
                        }
                        OutputSchema::Missing if origin == Origin::Template => self.push(
                            Code::C032,
                            span,
                            format!("cannot check \"{f}\": \"{src}\" has no output schema"),
                            place.node,
                            None,
                        ),
                        _ => {}
                    },
                    _ => {}
                }
            }
            Namespace::Outputs => {
                let Some(n) = first else { return };
                if !syms.nodes.contains_key(n) {
                    if place.context_free() {
                        let hint = did_you_mean(n, syms.nodes.keys().copied());
                        self.push(
                            Code::C029,
                            span,
                            format!("outputs.{n}: no node \"{n}\""),
                            place.node,
                            hint,
                        );
                    }
                    return;
                }
                if let (Some(f), true) = (path.get(1), place.context_free()) {
                    match output_schema(syms, n) {
                        OutputSchema::Known(s)
                            if field(s, f).is_none() && !runtime_field(syms, self.graph, n, f) =>
                        {
                            self.push(
                                if origin == Origin::Compute {
                                    Code::C921
                                } else {
                                    Code::C031
                                },
                                span,
                                format!(
                                    "output schema \"{}\" of \"{n}\" has no field \"{f}\"",
                                    s.name.name
                                ),
                                place.node,
                                None,
                            );
                        }
                        // A `fan_out_each` router's output holds its item, by its `as` name.
                        OutputSchema::Missing if !super::model::is_each_item(syms, n, f) => self
                            .push(
                                Code::C032,
                                span,
                                format!("cannot check \"{f}\": \"{n}\" has no output schema"),
                                place.node,
                                None,
                            ),
                        _ => {}
                    }
                }
                if self.graph.is_none() || !place.node_dependent() {
                    return;
                }
                let (consumer, may_be_consumer) = match place.consumer {
                    Consumer::Node(c) => (c, false),
                    Consumer::EdgeSource(c) => (c, true),
                    Consumer::Nobody => return,
                };
                if let Some((&producer, _)) = syms.nodes.get_key_value(n) {
                    self.runs_before.push(RunsBefore {
                        producer,
                        consumer,
                        may_be_consumer,
                        span,
                        node: place.node,
                    });
                }
            }
            Namespace::Loop => {
                if let (Some(l), Some(g), true) = (first, self.graph, place.context_free())
                    && !g.loops.contains(l)
                {
                    let hint = did_you_mean(l, g.loops.iter().copied());
                    self.push(
                        Code::C147,
                        span,
                        format!("unknown loop \"{l}\""),
                        place.node,
                        hint,
                    );
                }
            }
            Namespace::Run => {}
            Namespace::Artifacts => {
                let Some(a) = first else { return };
                // The artifact is its publisher's output: checked as outputs.PUBLISHER.…
                let publisher = syms.node_list.iter().find_map(|n| match &n.body {
                    NodeBody::Agent(p) if p.publish.as_ref().is_some_and(|i| i.name == a) => {
                        Some(n.name.name.clone())
                    }
                    NodeBody::Tool(t) if t.publish.as_ref().is_some_and(|i| i.name == a) => {
                        Some(n.name.name.clone())
                    }
                    NodeBody::Compute(c) if c.publish.as_ref().is_some_and(|i| i.name == a) => {
                        Some(n.name.name.clone())
                    }
                    NodeBody::Human(h) if h.publish.as_ref().is_some_and(|i| i.name == a) => {
                        Some(n.name.name.clone())
                    }
                    _ => None,
                });
                match publisher {
                    Some(p) => {
                        let mut as_output = vec![p];
                        as_output.extend(path[1..].iter().cloned());
                        self.reference(Namespace::Outputs, &as_output, span, place, origin);
                    }
                    None if place.context_free() => {
                        self.push(
                            Code::C035,
                            span,
                            format!("no node publishes artifact \"{a}\""),
                            place.node,
                            None,
                        );
                    }
                    None => {}
                }
            }
            Namespace::Attachments => {
                let (Some(a), true) = (first, place.context_free()) else {
                    return;
                };
                if !syms.has_attachment(a) {
                    let hint = did_you_mean(a, syms.attachment_names());
                    self.push(
                        Code::C053,
                        span,
                        format!("unknown attachment \"{a}\""),
                        place.node,
                        hint,
                    );
                    return;
                }
                let rest = &path[1..];
                let known = match rest {
                    [] => true,
                    [f] => template::ATTACHMENT_FIELDS.contains(&f.as_str()),
                    _ => false,
                };
                if !known {
                    self.push(
                        Code::C054,
                        span,
                        format!(
                            "attachments.{a}.{}: no such field; use path, mime, size or sha256",
                            rest.join(".")
                        ),
                        place.node,
                        None,
                    );
                }
            }
            Namespace::Secrets => {
                let (Some(s), true) = (first, place.context_free()) else {
                    return;
                };
                let Some(def) = syms.secrets.get(s) else {
                    let hint = did_you_mean(s, syms.secrets.keys().copied());
                    self.push(
                        Code::C093,
                        span,
                        format!("unknown secret \"{s}\""),
                        place.node,
                        hint,
                    );
                    return;
                };
                let Some(rest) = path.get(1..).filter(|r| !r.is_empty()) else {
                    return;
                };
                let f = rest.join(".");
                let is_file = def.as_.as_ref().is_some_and(|w| w.text == "file");
                let why = match (f.as_str(), is_file) {
                    ("path", true) => return,
                    ("path", false) => {
                        format!("\"{s}\" is a value secret; only a file secret has a path")
                    }
                    _ => format!(
                        "no such field; use secrets.{s}, or secrets.{s}.path for a file secret"
                    ),
                };
                self.push(
                    Code::C095,
                    span,
                    format!("secrets.{s}.{f}: {why}"),
                    place.node,
                    None,
                );
            }
        }
    }
}

/// The input schema of a node, when it names a declared schema.
fn input_schema<'a>(syms: &Symbols<'a>, node: &str) -> Option<&'a ast::Schema> {
    let id = match &syms.nodes.get(node)?.body {
        NodeBody::Agent(a) => a.input.as_ref()?,
        NodeBody::Tool(t) => t.input.as_ref()?,
        NodeBody::Compute(c) => c.input.as_ref()?,
        NodeBody::Human(h) => h.input.as_ref()?,
        NodeBody::Router(_) | NodeBody::Subbot(_) | NodeBody::Fail(_) => return None,
    };
    syms.schemas.get(id.name.as_str()).copied()
}

/// Whether node `n`'s input has field `f`: its input schema declares it, or an edge into it maps it.
fn input_has(syms: &Symbols<'_>, graph: Option<&Graph<'_>>, n: &str, f: &str) -> bool {
    input_schema(syms, n).is_some_and(|s| field(s, f).is_some()) || mapped_in(graph, n, f)
}

/// Whether an edge into `node` maps key `f` in its `with`: the engine builds a node's input
/// from those keys (the input schema is not enforced at run time), so `{{input.f}}` has a value
/// there even when the schema forgot the field (as upstream's own templates do).
fn mapped_in(graph: Option<&Graph<'_>>, node: &str, f: &str) -> bool {
    graph.is_some_and(|g| {
        g.incoming.get(node).is_some_and(|edges| {
            edges.iter().any(|&i| {
                g.edges[i]
                    .with
                    .as_ref()
                    .is_some_and(|w| w.entries.iter().any(|(k, _)| k.name == f))
            })
        })
    })
}

/// Fields the engine adds to a node's output beyond its schema (DSL.md §4.1, as upstream's
/// workflows use them): `_session_id` and `_session_fingerprint` on an agent node (the delegate
/// CLI's session and the provider route that built it, for a later `session: inherit | fork`
/// node's `with`), and `history` on a node at an end of a loop edge
/// (its outputs so far in the run, oldest first), unless its schema declares a field of that
/// name, which then wins.
fn runtime_field(syms: &Symbols<'_>, graph: Option<&Graph<'_>>, node: &str, f: &str) -> bool {
    match f {
        SESSION_ID_FIELD | SESSION_FINGERPRINT_FIELD => syms
            .nodes
            .get(node)
            .is_some_and(|n| matches!(n.body, NodeBody::Agent(_))),
        HISTORY_FIELD => graph.is_some_and(|g| {
            g.edges
                .iter()
                .any(|e| e.loop_.is_some() && (e.from.name == node || e.to.name == node))
        }),
        _ => false,
    }
}

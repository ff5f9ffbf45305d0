//! Per-source edge rules and loop clauses (DSL.md §5.1, §5.6): C005, C010, C011, C012, C013,
//! C014, C015, C026, C123, C124, C145, C901, C903, C905, C920 (a router's `when F`).
use std::collections::{HashMap, HashSet};

use super::model::{
    Graph, OutputSchema, field, first_nodes, is_fan_out, is_pure, output_schema, router_input_lacks,
};
use crate::ast::{self, VarType, When};
use crate::check::symbols::Symbols;
use crate::diag::{Code, Diagnostic};

pub(super) fn check<'a>(g: &Graph<'a>, syms: &Symbols<'a>, out: &mut Vec<Diagnostic>) {
    loop_clauses(g, out);
    for node in first_nodes(syms) {
        let name = node.name.name.as_str();
        let edges: Vec<&ast::Edge> = g.out_edges(name).collect();
        if is_fan_out(syms, name) {
            fan_out_clauses(name, &edges, out);
            if let ast::NodeBody::Router(r) = &node.body
                && r.mode == ast::RouterMode::FanOutEach
            {
                each_template_edge((name, node.name.span), &edges, out);
            }
            continue;
        }
        if matches!(node.body, ast::NodeBody::Fail(_)) {
            // Reaching a `fail` node ends the run: it has no edges of its own.
            if let Some(e) = edges.first() {
                out.push(
                    Diagnostic::new(
                        Code::C046,
                        e.from.span,
                        format!("fail node \"{name}\" ends the run: no edge may leave it"),
                    )
                    .with_node(name)
                    .with_hint("remove the edge, or route to it from another node"),
                );
            }
            continue;
        }
        if let Some(mode) = picker_mode(syms, name) {
            picker_clauses((name, node.name.span), mode, &edges, out);
            continue;
        }
        if !g.written_sources.contains(name) {
            out.push(
                Diagnostic::new(
                    Code::C901,
                    node.name.span,
                    format!("node \"{name}\" has no outgoing edge"),
                )
                .with_node(name),
            );
        }
        Source {
            name,
            edges: &edges,
            out: &mut *out,
        }
        .check(syms);
    }
}

/// A loop's cap as written: `3`, or the template quoted.
fn cap_text(l: &ast::LoopClause) -> String {
    match &l.cap_template {
        Some(lit) => format!("{:?}", lit.value),
        None => l.cap.to_string(),
    }
}

/// Why a cap template cannot be a cap: it must be exactly one reference, to `vars`, `input`,
/// `outputs` or `artifacts` (a `loop` reference would read the cap being decided; a secret is
/// never a number the engine may see).
fn cap_template_problem(text: &str) -> Option<&'static str> {
    use crate::template::Namespace;
    let t = crate::template::parse(text);
    let Some(r) = t.single_reference() else {
        return Some("must be exactly one {{…}} reference");
    };
    match r.namespace {
        Namespace::Vars | Namespace::Input | Namespace::Outputs | Namespace::Artifacts => None,
        _ => Some("may only read vars, input, outputs or artifacts"),
    }
}

/// C026 (cap below 1, or a cap template that is not one reference) and C005 (one loop, two
/// caps), over every edge as written.
fn loop_clauses(g: &Graph<'_>, out: &mut Vec<Diagnostic>) {
    let mut caps: HashMap<&str, &ast::LoopClause> = HashMap::new();
    for e in &g.wf.edges {
        let Some(l) = &e.loop_ else { continue };
        let node = e.from.name.as_str();
        let name = l.name.name.as_str();
        if let Some(lit) = &l.cap_template {
            if let Some(why) = cap_template_problem(&lit.value) {
                out.push(
                    Diagnostic::new(
                        Code::C026,
                        lit.span,
                        format!("loop \"{name}\" cap template {why}"),
                    )
                    .with_node(node)
                    .with_hint(
                        "write one reference to a var, an output or an artifact, like \"{{outputs.plan.max_rounds}}\"",
                    ),
                );
            }
        } else if l.cap < 1 {
            out.push(
                Diagnostic::new(
                    Code::C026,
                    l.span,
                    format!("loop \"{name}\" cap must be at least 1"),
                )
                .with_node(node),
            );
        }
        match caps.get(name) {
            None => {
                caps.insert(name, l);
            }
            Some(first) if cap_text(first) != cap_text(l) => out.push(
                Diagnostic::new(
                    Code::C005,
                    l.span,
                    format!(
                        "loop \"{name}\" has cap {} here but {} at line {}",
                        cap_text(l),
                        cap_text(first),
                        first.span.line
                    ),
                )
                .with_node(node),
            ),
            Some(_) => {}
        }
    }
}

/// The mode of a `round_robin` or `llm` router: one that picks one of its edges itself.
fn picker_mode(syms: &Symbols<'_>, node: &str) -> Option<ast::RouterMode> {
    match syms.nodes.get(node).map(|n| &n.body) {
        Some(ast::NodeBody::Router(r))
            if matches!(r.mode, ast::RouterMode::RoundRobin | ast::RouterMode::Llm) =>
        {
            Some(r.mode)
        }
        _ => None,
    }
}

/// C022: a router that picks its edge takes no clause on them; C020 / C021: it needs two edges.
fn picker_clauses(
    (name, name_span): (&str, ast::Span),
    mode: ast::RouterMode,
    edges: &[&ast::Edge],
    out: &mut Vec<Diagnostic>,
) {
    let word = if mode == ast::RouterMode::Llm {
        "llm"
    } else {
        "round_robin"
    };
    for e in edges {
        let clauses = [
            e.when.as_ref().map(|w| ("when", w.span())),
            e.else_.map(|s| ("else", s)),
            e.loop_.as_ref().map(|l| ("as", l.span)),
        ];
        for (clause, span) in clauses.into_iter().flatten() {
            out.push(
                Diagnostic::new(
                    Code::C022,
                    span,
                    format!(
                        "{word} router \"{name}\" picks its edge itself; {clause} is not allowed"
                    ),
                )
                .with_node(name)
                .with_hint("put the condition or the loop on the edge into the router"),
            );
        }
    }
    if edges.len() < 2 {
        let code = if mode == ast::RouterMode::Llm {
            Code::C021
        } else {
            Code::C020
        };
        let span = edges.first().map_or(name_span, |e| e.from.span);
        out.push(
            Diagnostic::new(
                code,
                span,
                format!(
                    "{word} router \"{name}\" has {} outgoing edge(s); it needs at least 2",
                    edges.len()
                ),
            )
            .with_node(name),
        );
    }
}

/// C905: a `fan_out_all` router starts a branch per edge; `else` and `as` cannot choose among
/// them. `when` may: a branch whose condition does not hold on the router's input is skipped
/// (the join sees its keys as `null`), as upstream's workflows gate per-ecosystem branches.
fn fan_out_clauses(name: &str, edges: &[&ast::Edge], out: &mut Vec<Diagnostic>) {
    for e in edges {
        let clauses = [
            e.else_.map(|s| ("else", s)),
            e.loop_.as_ref().map(|l| ("as", l.span)),
        ];
        for (clause, span) in clauses.into_iter().flatten() {
            out.push(
                Diagnostic::new(
                    Code::C905,
                    span,
                    format!(
                        "fan-out router \"{name}\" takes its edges unconditionally; {clause} is not allowed"
                    ),
                )
                .with_node(name),
            );
        }
    }
}

/// C049: a `fan_out_each` router has exactly one outgoing edge, without `when`: the branch
/// replayed for every item.
fn each_template_edge(
    (name, at): (&str, ast::Span),
    edges: &[&ast::Edge],
    out: &mut Vec<Diagnostic>,
) {
    let problem = match edges {
        [] => Some((at, "has no outgoing edge".to_owned())),
        [e] => e.when.as_ref().map(|_| {
            (
                e.from.span,
                "takes its edge for every item; when is not allowed".to_owned(),
            )
        }),
        [_, second, ..] => Some((
            second.from.span,
            format!("has {} outgoing edges; it replays exactly one", edges.len()),
        )),
    };
    if let Some((span, why)) = problem {
        out.push(
            Diagnostic::new(
                Code::C049,
                span,
                format!("fan_out_each router \"{name}\" {why}"),
            )
            .with_node(name)
            .with_hint(
                "give the router one unconditional edge: the head of the branch run per item",
            ),
        );
    }
}

/// A condition's identity for C011.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Cond<'a> {
    Field { name: &'a str, negated: bool },
    Expr(&'a str),
}

impl Cond<'_> {
    fn of<'a>(w: &'a When) -> Cond<'a> {
        match w {
            When::Field { negated, field, .. } => Cond::Field {
                name: field.name.as_str(),
                negated: *negated,
            },
            When::Expr { text, .. } => Cond::Expr(text.value.trim()),
        }
    }

    fn show(&self) -> String {
        match self {
            Cond::Field {
                name,
                negated: false,
            } => name.to_string(),
            Cond::Field {
                name,
                negated: true,
            } => format!("not {name}"),
            Cond::Expr(text) => format!("\"{text}\""),
        }
    }
}

/// A field used both as `when F` and `when not F` among these edges (the exhaustive form of
/// C012), or `None`.
fn exhaustive_field<'a>(edges: impl Iterator<Item = &'a ast::Edge> + Clone) -> Option<&'a str> {
    let fields = edges.filter_map(|e| match &e.when {
        Some(When::Field { negated, field, .. }) => Some((field.name.as_str(), *negated)),
        _ => None,
    });
    let list: Vec<(&str, bool)> = fields.collect();
    let set: HashSet<(&str, bool)> = list.iter().copied().collect();
    list.iter()
        .find(|(f, neg)| set.contains(&(*f, !*neg)))
        .map(|(f, _)| *f)
}

struct Source<'e, 'o> {
    name: &'e str,
    edges: &'e [&'e ast::Edge],
    out: &'o mut Vec<Diagnostic>,
}

impl Source<'_, '_> {
    fn push(&mut self, code: Code, span: ast::Span, msg: String, hint: Option<String>) {
        let mut d = Diagnostic::new(code, span, msg).with_node(self.name);
        if let Some(h) = hint {
            d = d.with_hint(h);
        }
        self.out.push(d);
    }

    fn check(mut self, syms: &Symbols<'_>) {
        let n = self.name;
        let edges = self.edges;
        // C010: at most one pure unconditional edge.
        let mut first_pure: Option<&ast::Edge> = None;
        for e in edges.iter().copied().filter(|e| is_pure(e)) {
            match first_pure {
                None => first_pure = Some(e),
                Some(f) => self.push(
                    Code::C010,
                    e.from.span,
                    format!(
                        "node \"{n}\" already has an unconditional edge (to \"{}\")",
                        f.to.name
                    ),
                    Some("use when/else".to_string()),
                ),
            }
        }
        // C011: the same condition twice.
        let mut seen: HashMap<Cond<'_>, &ast::Edge> = HashMap::new();
        for e in edges.iter().copied() {
            let Some(w) = &e.when else { continue };
            let c = Cond::of(w);
            if let Some(first) = seen.get(&c) {
                let msg = format!(
                    "node \"{n}\": condition {} is already used by the edge to \"{}\"",
                    c.show(),
                    first.to.name
                );
                self.push(Code::C011, w.span(), msg, None);
            } else {
                seen.insert(c, e);
            }
        }
        // C920: a router's `when F` against its predecessors' outputs.
        for e in edges.iter().copied() {
            if let Some(When::Field { field: f, span, .. }) = &e.when {
                router_input_lacks(syms, n, &f.name, *span, self.out);
            }
        }
        // C013 / C014: a `when F` field of the source's output schema, of type bool.
        if let OutputSchema::Known(schema) = output_schema(syms, n) {
            for e in edges.iter().copied() {
                let Some(When::Field { field: f, span, .. }) = &e.when else {
                    continue;
                };
                let s = &schema.name.name;
                match field(schema, &f.name) {
                    None => self.push(
                        Code::C014,
                        *span,
                        format!(
                            "output schema \"{s}\" of \"{n}\" has no field \"{}\"",
                            f.name
                        ),
                        None,
                    ),
                    Some(fd) if fd.ty != VarType::Bool => self.push(
                        Code::C013,
                        *span,
                        format!(
                            "condition field \"{}\" of \"{n}\" is {}, not bool",
                            f.name,
                            fd.ty.as_str()
                        ),
                        None,
                    ),
                    Some(_) => {}
                }
            }
        }
        // C012: conditional edges need a fallback or an exhaustive field.
        let has_when = edges.iter().any(|e| e.when.is_some());
        let has_fallback = edges.iter().any(|e| e.when.is_none());
        if has_when
            && !has_fallback
            && exhaustive_field(edges.iter().copied()).is_none()
            && let Some(last) = edges.last()
        {
            let hint = match edges.iter().find_map(|e| match &e.when {
                Some(When::Field { negated, field, .. }) => Some((*negated, &field.name)),
                _ => None,
            }) {
                Some((false, f)) => format!("add else or when not {f}"),
                Some((true, f)) => format!("add else or when {f}"),
                None => "add an else edge".to_string(),
            };
            self.push(
                Code::C012,
                last.from.span,
                format!("node \"{n}\" has conditional edges but no fallback"),
                Some(hint),
            );
        }
        // C015, C123, C124: `else` edges.
        for (i, e) in edges.iter().filter(|e| e.else_.is_some()).enumerate() {
            if !has_when {
                self.push(
                    Code::C015,
                    e.from.span,
                    format!("else edge from \"{n}\" has no when sibling"),
                    Some("use a plain edge".to_string()),
                );
            }
            if i > 0 {
                self.push(
                    Code::C123,
                    e.from.span,
                    format!("node \"{n}\" already has an else edge"),
                    None,
                );
            }
            if first_pure.is_some() {
                self.push(
                    Code::C124,
                    e.from.span,
                    format!("node \"{n}\" has both an else and an unconditional edge"),
                    None,
                );
            }
        }
        // C903: an unconditional loop edge after the fallback is never taken (§5.4 step 5).
        let mut fallback_seen = false;
        for e in edges.iter().copied() {
            if e.loop_.is_some() && e.when.is_none() && fallback_seen {
                self.push(
                    Code::C903,
                    e.from.span,
                    format!(
                        "loop edge \"{} -> {}\" follows an unconditional edge and is never taken",
                        e.from.name, e.to.name
                    ),
                    Some("declare it first".to_string()),
                );
            }
            if is_pure(e) || e.else_.is_some() {
                fallback_seen = true;
            }
        }
        // C145: once the loops are spent, the node still needs an exit.
        let last_loop = edges
            .iter()
            .rev()
            .find_map(|e| e.loop_.as_ref().map(|l| (e, l)));
        if let Some((last, l)) = last_loop {
            let rest = edges.iter().copied().filter(|e| e.loop_.is_none());
            let fallback = rest.clone().any(|e| e.when.is_none());
            if !fallback && exhaustive_field(rest).is_none() {
                self.push(
                    Code::C145,
                    last.from.span,
                    format!(
                        "when loop \"{}\" is spent, \"{n}\" has no edge to take",
                        l.name.name
                    ),
                    None,
                );
            }
        }
    }
}

//! The HTML pages, written with `maud`: every `(…)` splice is escaped, text and attributes alike,
//! and nothing here marks run data as pre-escaped. Live parts are served again as fragments,
//! rendered by the same functions.

use std::collections::HashSet;

use maud::{DOCTYPE, Markup, html};

use crate::layout::{NODE_H, NODE_W, layout};
use crate::view::{NodeView, RunRow, RunView, TranscriptItem};

/// The statuses the filter offers.
pub(crate) const STATUSES: [&str; 7] = [
    "queued",
    "running",
    "paused",
    "finished",
    "failed",
    "failed_resumable",
    "cancelled",
];

/// `1.2 s`, `3 m 04 s`, `250 ms`.
pub(crate) fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} m {:02} s", ms / 60_000, ms / 1000 % 60)
    }
}

fn base(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · iterion studio" }
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/static/studio.css";
                script src="/static/studio.js" defer {}
            }
            body {
                header.top { a href="/" { "iterion studio" } span.muted { "runs from this store" } }
                (body)
            }
        }
    }
}

/// An error page.
pub(crate) fn error_page(message: &str) -> Markup {
    base(
        "error",
        html! { main { h1 { "Not here" } p.card { (message) } p { a href="/" { "All runs" } } } },
    )
}

fn status_badge(status: &str) -> Markup {
    html! { span class={ "badge status-" (status) } data-status=(status) { (status) } }
}

/// The filter as the list's query string (for the live fragment's URL).
pub(crate) struct Filter {
    pub status: Option<String>,
    pub workflow: Option<String>,
}

impl Filter {
    fn query(&self) -> String {
        let mut parts = vec!["fragment=1".to_owned()];
        if let Some(s) = &self.status {
            parts.push(format!("status={}", urlencode(s)));
        }
        if let Some(w) = &self.workflow {
            parts.push(format!("workflow={}", urlencode(w)));
        }
        parts.join("&")
    }
}

/// Percent-encodes everything but unreserved characters.
pub(crate) fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The runs list.
pub(crate) fn runs_page(
    rows: &[RunRow],
    filter: &Filter,
    workflows: &[String],
    signature: &str,
) -> Markup {
    let body = html! {
        main {
            h1 { "Runs" }
            form.filters method="get" action="/" {
                label { "status"
                    select name="status" {
                        option value="" { "any" }
                        @for s in STATUSES {
                            option value=(s) selected[filter.status.as_deref() == Some(s)] { (s) }
                        }
                    }
                }
                label { "workflow"
                    select name="workflow" {
                        option value="" { "any" }
                        @for w in workflows {
                            option value=(w) selected[filter.workflow.as_deref() == Some(w.as_str())] { (w) }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            table #runs {
                thead { tr { th { "run" } th { "workflow" } th { "status" } th { "trust" } th { "driver" } th { "started" } th { "duration" } } }
                tbody #runs-body data-live={ "/live/runs?since=" (signature) } data-fragment={ "/?" (filter.query()) } {
                    (runs_rows(rows))
                }
            }
        }
    };
    base("runs", body)
}

/// The list's rows (the live fragment).
pub(crate) fn runs_rows(rows: &[RunRow]) -> Markup {
    fn one(r: &RunRow, depth: usize, out: &mut Vec<Markup>) {
        out.push(html! {
            tr.run.child[depth > 0] data-run=(r.id) data-status=(r.status) data-depth=(depth) {
                td { a.mono href={ "/runs/" (r.id) } title=(r.id) { (r.short_id) } }
                td.workflow { (r.workflow) }
                td {
                    (status_badge(&r.status))
                    @if let Some(code) = &r.failure_code { " " span.code { (code) } }
                }
                td { (r.trust) }
                td { (r.driver.as_deref().unwrap_or("—")) }
                td.mono { (r.started.to_rfc3339()) }
                td { (duration(r.duration_ms)) }
            }
        });
        for c in &r.children {
            one(c, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    for r in rows {
        one(r, 0, &mut out);
    }
    html! {
        @if out.is_empty() { tr { td colspan="7" .muted { "No runs yet. " code { "iterion run FILE" } " records one here." } } }
        @for m in out { (m) }
    }
}

/// One run's page.
pub(crate) fn run_page(view: &RunView, token: &str) -> Markup {
    let id = &view.run.id;
    let body = html! {
        main #run data-live={ "/runs/" (id) "/live?after=" (view.last_seq) } data-fragment={ "/runs/" (id) "?fragment=1" } data-after=(view.last_seq) {
            (run_fragment(view, token))
        }
    };
    base(
        &format!("{} {}", view.run.workflow, view.run.short_id),
        body,
    )
}

/// The run page's live part.
pub(crate) fn run_fragment(view: &RunView, token: &str) -> Markup {
    let r = &view.run;
    html! {
        p { a href="/" { "← all runs" } }
        h1 {
            span.workflow { (r.workflow) } " "
            span.mono.muted title=(r.id) { (r.short_id) } " "
            (status_badge(&r.status))
            @if let Some(code) = &r.failure_code { " " span.code #failure-code { (code) } }
            @if iterion_store::RunStatus::parse(&r.status).is_some_and(iterion_engine::cancellable) {
                " "
                form.inline method="post" action={ "/runs/" (r.id) "/cancel" } #cancel-form {
                    input type="hidden" name="token" value=(token);
                    button.danger type="submit" { "Cancel run" }
                }
            }
        }
        p.muted {
            "trust " (r.trust) " · driver " (r.driver.as_deref().unwrap_or("—"))
            " · started " (r.started.to_rfc3339()) " · " (duration(r.duration_ms))
            @if let Some(p) = &r.parent_run_id { " · child of " a.mono href={ "/runs/" (p) } { (p) } }
        }
        @if let Some(f) = &view.failure {
            div.card.failure #failure {
                strong { "Failure " }
                @if let Some(code) = &f.code { span.code { (code) } " " }
                span.muted { (f.status) @if let Some(p) = &f.phase { " · phase " (p) } }
                @if let Some(m) = &f.message { pre.message { (m) } }
                @if !f.remedy.is_empty() { p.remedy { (f.remedy) } }
            }
        }
        @if let Some(q) = &view.question {
            div.card.question #question {
                strong { "Waiting for an answer" } " " span.muted { "(node " (q.node) ")" }
                p.text { (q.question) }
                form method="post" action={ "/runs/" (r.id) "/answer" } #answer-form {
                    input type="hidden" name="token" value=(token);
                    @if q.options.is_empty() {
                        input type="text" name="answer" required autocomplete="off" placeholder="your answer";
                    } @else {
                        select name="answer" {
                            @for o in &q.options { option value=(o) { (o) } }
                        }
                    }
                    " " button type="submit" { "Answer and resume" }
                }
            }
        }
        div.grid {
            section {
                h2 { "Graph" }
                (graph_svg(view))
                @if let crate::graph::Origin::Events(note) = &view.graph.origin { p.muted #graph-note { (note) } }
                h2 { "Nodes" }
                @for n in &view.nodes { (node_block(n, view)) }
            }
            section {
                h2 { "Sandbox" }
                (sandbox_panel(view))
                @if !view.children.is_empty() {
                    h2 { "Subbot runs" }
                    table #children { tbody { (runs_rows(&view.children)) } }
                }
                h2 { "Artifacts" }
                @if view.artifacts.is_empty() { p.muted { "None." } }
                dl.kv #artifacts {
                    @for a in &view.artifacts {
                        dt data-kind=(a.kind) {
                            (a.kind) " " (a.name)
                            @if let Some(v) = a.version { " v" (v) }
                            @if let Some(n) = &a.node { " " span.muted { "from " (n) } }
                        }
                        dd { code { (a.value) } }
                    }
                }
            }
        }
        @if !view.setup_logs.is_empty() {
            h2 { "Sandbox setup output" }
            pre #setup-logs { @for (who, c) in &view.setup_logs { span.muted { "[" (who) "] " } span class={ "log-" (c.stream) } { (c.text) } "\n" } }
        }
        h2 { "Run log" }
        @if view.logs.is_empty() { p.muted { "No log lines." } }
        @else {
            pre #logs { @for l in &view.logs { span class={ "log-" (l.stream) } { (l.line) } "\n" } }
        }
        h2 { "Timeline" }
        table #timeline {
            thead { tr { th { "#" } th { "time" } th { "event" } th { "data" } } }
            tbody {
                @for t in &view.timeline {
                    tr data-type=(t.kind) { td { (t.seq) } td.mono { (t.ts.to_rfc3339()) } td.mono { (t.kind) } td { code { (t.summary) } } }
                }
            }
        }
    }
}

fn node_block(n: &NodeView, view: &RunView) -> Markup {
    let open = n.state == "failed" || n.state == "paused" || view.nodes.len() == 1;
    html! {
        details.node id={ "node-" (n.id) } data-node=(n.id) data-state=(n.state) open[open] {
            summary {
                strong { (n.id) } " " span.muted { (n.kind) } " " (status_badge(&n.state))
                @if let Some(ms) = n.duration_ms { " " span.muted { (duration(ms)) } }
                @if n.attempts > 1 { " " span.muted { "× " (n.attempts) } }
            }
            @if let Some(f) = &n.failure {
                div.card.failure {
                    @if let Some(c) = &f.code { span.code { (c) } " " }
                    (f.message)
                    @if let Some(x) = f.exit_code { " " span.muted { "(exit " (x) ")" } }
                    @if let Some(t) = &f.stderr_tail { pre.stderr { (t) } }
                }
            }
            @if !n.transcript.is_empty() {
                div.transcript {
                    @for item in &n.transcript {
                        @match item {
                            TranscriptItem::Turn { turn, backend, model, stop_reason, input_tokens, output_tokens } => {
                                div.turn { "turn " (turn) " · " (backend)
                                    @if let Some(m) = model { " · " (m) }
                                    @if let Some(s) = stop_reason { " · " (s) }
                                    @if let (Some(i), Some(o)) = (input_tokens, output_tokens) { " · " (i) "/" (o) " tokens" }
                                }
                            }
                            TranscriptItem::ToolCall { tool, input, result, is_error, exit_code, duration_ms, .. } => {
                                div.tool-call {
                                    strong.tool-error[*is_error] { (tool) }
                                    @if let Some(x) = exit_code { " " span.muted { "exit " (x) } }
                                    @if let Some(d) = duration_ms { " " span.muted { (duration(*d)) } }
                                    pre.input { (input) }
                                    @if let Some(r) = result { pre.result { (r) } }
                                }
                            }
                        }
                    }
                }
            }
            @if !n.logs.is_empty() {
                div { span.muted { "logs" }
                    pre.node-logs {
                        @for c in &n.logs {
                            span class={ "log-" (c.stream) } { (c.text) } "\n"
                            @if c.truncated { span.muted { "[" (c.stream) " cut here: the node printed more than is kept]" } "\n" }
                        }
                    }
                }
            }
            @if let Some(out) = &n.output {
                div { span.muted { "output" } pre.output { (serde_json::to_string_pretty(out).unwrap_or_default()) } }
            }
        }
    }
}

fn sandbox_panel(view: &RunView) -> Markup {
    let s = &view.sandbox;
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "—",
    };
    html! {
        div.card #sandbox data-state=(s.state) {
            dl.kv {
                dt { "state" } dd { (s.state) }
                @if let Some(m) = &s.mode { dt { "mode" } dd { (m) @if let Some(t) = &s.mode_source { " " span.muted { "(chosen by " (t) ")" } } } }
                @if let Some(d) = &s.driver { dt { "driver" } dd { (d) } }
                @if let Some(i) = &s.image { dt { "image" } dd.mono { (i) } }
                @if let Some(i) = &s.sandbox_id { dt { "container" } dd.mono { (i) } }
                @if let Some(p) = &s.parent_run { dt { "parent" } dd { a.mono href={ "/runs/" (p) } { (p) } } }
                @if let Some(r) = &s.reason { dt { "reason" } dd { (r) } }
                @if let Some(h) = &s.host_state { dt { "host_state" } dd { (h) } }
                @if !s.mounts.is_empty() { dt { "mounts" } dd { @for m in &s.mounts { code { (m) } br; } } }
                @if !s.dropped.is_empty() { dt { "dropped binds" } dd { @for m in &s.dropped { code { (m) } br; } } }
                @if let Some(n) = &s.network_mode {
                    dt { "egress" } dd { (n) @if let Some(t) = &s.network_source { " " span.muted { "(chosen by " (t) ")" } } }
                    dt { "proxy" } dd { (yes_no(s.proxy)) " · TLS inspection " (yes_no(s.tls_inspection)) " · enforced " (yes_no(s.egress_enforced)) }
                }
                dt { "blocked hosts" } dd #blocked {
                    @if s.blocked.is_empty() { span.muted { "none" } }
                    @for b in &s.blocked { span.blocked.host { (b.host) } " " span.muted { (b.reason) } br; }
                }
                dt { "secrets" } dd #secrets {
                    @if s.secrets.is_empty() { span.muted { "none declared" } }
                    @for name in &s.secrets { code.secret { (name) } " " }
                }
                dt { "admission" } dd #admission {
                    @if let Some(a) = &s.admission { (a.decision.as_str()) " · " code { (a.code) } " · " (a.reason) }
                    @else { span.muted { "not run" } }
                }
            }
        }
    }
}

fn graph_svg(view: &RunView) -> Markup {
    let l = layout(&view.graph);
    let taken: HashSet<(&str, &str)> = view
        .taken
        .iter()
        .map(|[f, t]| (f.as_str(), t.as_str()))
        .collect();
    let state_of = |id: &str| -> (&str, Option<u64>) {
        view.nodes
            .iter()
            .find(|n| n.id == id)
            .map_or(("pending", None), |n| (n.state.as_str(), n.duration_ms))
    };
    html! {
        svg.graph #graph xmlns="http://www.w3.org/2000/svg" width=(l.width) height=(l.height) viewBox={ "0 0 " (l.width) " " (l.height) } role="img" aria-label="workflow graph" {
            defs {
                marker #arrow viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M 0 0 L 10 5 L 0 10 z" fill="#6b7785" {}
                }
            }
            @for e in &l.edges {
                path.edge.back[e.back].taken[taken.contains(&(e.from.as_str(), e.to.as_str()))] d=(e.d) marker-end="url(#arrow)" data-from=(e.from) data-to=(e.to) {}
                @if let Some(label) = &e.label { text.label x=(e.label_x) y=(e.label_y) { (crate::view::clip(label, 28)) } }
            }
            @for n in &l.nodes {
                @let (state, ms) = if n.kind == "end" { ("end", None) } else { state_of(&n.id) };
                g class={ "node kind-" (n.kind) } data-node=(n.id) data-state=(state) {
                    title { (n.id) " (" (n.kind) "): " (state) }
                    rect x=(n.x) y=(n.y) width=(NODE_W) height=(NODE_H) rx="6" {}
                    text x=(n.x + 10.0) y=(n.y + 18.0) { (crate::view::clip(&n.id, 20)) }
                    text.sub x=(n.x + 10.0) y=(n.y + 34.0) {
                        (n.kind) @if n.kind != "end" { " · " (state) } @if let Some(ms) = ms { " · " (duration(ms)) }
                    }
                }
            }
        }
    }
}

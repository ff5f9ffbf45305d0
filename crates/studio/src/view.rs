//! What the pages and the API show, derived from the store: a run row for the list, and the
//! whole view of one run (graph with node states, transcripts, sandbox panel, failure, question,
//! artifacts, timeline). The API serialises these as they are; the pages render them.

use std::collections::HashMap;

use iterion_store::{Admission, Event, LogLine, NodeLog, Run, RunStatus, Timestamp};
use serde::Serialize;
use serde_json::Value;

use crate::graph::{Graph, graph_of};
use crate::remedy::remedy;

/// How many characters of an event's payload the timeline shows.
pub const SUMMARY_MAX: usize = 400;

/// One row of the runs list.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    /// The full id.
    pub id: String,
    /// Its first 8 characters (in a list: the shortest prefix, 8 at least, that no other listed
    /// run shares).
    pub short_id: String,
    /// The workflow's name.
    pub workflow: String,
    /// The status word.
    pub status: String,
    /// The failure code, if any.
    pub failure_code: Option<String>,
    /// `trusted` or `untrusted`.
    pub trust: String,
    /// The sandbox driver (`docker`, `podman`, …), `none` when the run went unsandboxed, `null`
    /// before the sandbox was decided.
    pub driver: Option<String>,
    /// When the run was created.
    pub started: Timestamp,
    /// When it ended, if it did.
    pub finished: Option<Timestamp>,
    /// Wall-clock time so far (to the end, or to now for a live run).
    pub duration_ms: u64,
    /// The parent of a subbot child.
    pub parent_run_id: Option<String>,
    /// Subbot children, nested.
    pub children: Vec<RunRow>,
}

/// The sandbox driver a run's events name: `sandbox_started.driver`, the adopting parent's
/// driver of `sandbox_shared`, or `none` after `sandbox_skipped` — or when a node started with no
/// sandbox event before it (mode `none` decides silently).
pub fn driver_of(events: &[Event]) -> Option<String> {
    for e in events {
        match e.kind.as_str() {
            "sandbox_started" => return str_of(&e.data, "driver"),
            "sandbox_shared" if e.data.get("adopted") == Some(&Value::Bool(true)) => {
                return str_of(&e.data, "driver");
            }
            "sandbox_skipped" | "node_started" => return Some("none".to_owned()),
            _ => {}
        }
    }
    None
}

/// The row of `run`, given its events (for the driver), without children.
pub fn row(run: &Run, events: &[Event], now: Timestamp) -> RunRow {
    let end = run.finished_at.unwrap_or(if run.status.is_terminal() {
        run.updated_at
    } else {
        now
    });
    RunRow {
        id: run.id.to_string(),
        short_id: run.id.as_str().chars().take(8).collect(),
        workflow: run.workflow.clone(),
        status: run.status.as_str().to_owned(),
        failure_code: run.failure_code.clone(),
        trust: run.trust.as_str().to_owned(),
        driver: driver_of(events),
        started: run.created_at,
        finished: run.finished_at,
        duration_ms: u64::try_from(end.as_millis() - run.created_at.as_millis()).unwrap_or(0),
        parent_run_id: run.parent_run_id.as_ref().map(ToString::to_string),
        children: Vec::new(),
    }
}

/// Sets each row's `short_id` to the shortest prefix of its id (8 characters at least) that no
/// other row shares: UUIDv7 ids begin with their creation time, so runs made in the same minute
/// share their first 8.
pub fn unique_short_ids(rows: &mut [RunRow]) {
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    for r in rows.iter_mut() {
        let longest_shared = ids
            .iter()
            .filter(|other| **other != r.id)
            .map(|other| {
                other
                    .bytes()
                    .zip(r.id.bytes())
                    .take_while(|(a, b)| a == b)
                    .count()
            })
            .max()
            .unwrap_or(0);
        let len = (longest_shared + 1).clamp(8, r.id.len());
        r.short_id = r.id.chars().take(len).collect();
    }
}

/// Nests `rows` (newest first) under their parents; a child whose parent is not in `rows` stays
/// at the top.
pub fn nest(rows: Vec<RunRow>) -> Vec<RunRow> {
    let ids: std::collections::HashSet<String> = rows.iter().map(|r| r.id.clone()).collect();
    let mut children: HashMap<String, Vec<RunRow>> = HashMap::new();
    let mut top = Vec::new();
    for r in rows {
        match &r.parent_run_id {
            Some(p) if ids.contains(p) => children.entry(p.clone()).or_default().push(r),
            _ => top.push(r),
        }
    }
    fn attach(mut r: RunRow, children: &mut HashMap<String, Vec<RunRow>>) -> RunRow {
        let mine = children.remove(&r.id).unwrap_or_default();
        r.children = mine.into_iter().map(|c| attach(c, children)).collect();
        r
    }
    top.into_iter().map(|r| attach(r, &mut children)).collect()
}

/// One entry of an agent's transcript.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TranscriptItem {
    /// `agent_turn`.
    Turn {
        /// 1 first.
        turn: u64,
        /// The backend.
        backend: String,
        /// The model, when known.
        model: Option<String>,
        /// Why it stopped, when known.
        stop_reason: Option<String>,
        /// Input tokens, when known.
        input_tokens: Option<u64>,
        /// Output tokens, when known.
        output_tokens: Option<u64>,
    },
    /// `agent_tool_call`.
    ToolCall {
        /// The turn that asked.
        turn: u64,
        /// The tool.
        tool: String,
        /// Its input (redacted JSON text).
        input: String,
        /// Its result, when reported.
        result: Option<String>,
        /// Whether the result was an error.
        is_error: bool,
        /// A command's exit code.
        exit_code: Option<i64>,
        /// How long it took.
        duration_ms: Option<u64>,
    },
}

/// A node's failure.
#[derive(Clone, Debug, Serialize)]
pub struct NodeFailure {
    /// The failure code.
    pub code: Option<String>,
    /// What happened (redacted).
    pub message: String,
    /// A tool's exit code.
    pub exit_code: Option<i64>,
    /// The tail of a tool's stderr.
    pub stderr_tail: Option<String>,
}

/// One node as the run saw it.
#[derive(Clone, Debug, Serialize)]
pub struct NodeView {
    /// The node id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// `pending`, `running`, `finished`, `failed`, `paused`, or `stopped` (it started, and the
    /// run ended without it finishing).
    pub state: String,
    /// How many times it started.
    pub attempts: u32,
    /// Its last duration.
    pub duration_ms: Option<u64>,
    /// Its last failure.
    pub failure: Option<NodeFailure>,
    /// Its last output (redacted).
    pub output: Option<Value>,
    /// The agent's transcript, in order.
    pub transcript: Vec<TranscriptItem>,
    /// What the node printed, chunk by chunk, in order.
    pub logs: Vec<NodeLogView>,
}

/// A chunk of a node's output.
#[derive(Clone, Debug, Serialize)]
pub struct NodeLogView {
    /// Its sequence number in the run's node log.
    pub seq: u64,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// The lines (redacted), joined by `\n`.
    pub text: String,
    /// The node's output on this stream was cut after this chunk.
    pub truncated: bool,
}

/// A host the egress proxy refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocked {
    /// The host as asked.
    pub host: String,
    /// Why.
    pub reason: String,
}

/// The sandbox panel.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SandboxView {
    /// `started`, `skipped` (degraded or noop), `refused`, `adopted` (shares its parent's),
    /// `none` (a node ran with no sandbox event before it: mode `none`), or `undecided` (no
    /// sandbox event and no node yet).
    pub state: String,
    /// The driver.
    pub driver: Option<String>,
    /// The mode (`auto`, `inline`, `none`).
    pub mode: Option<String>,
    /// The tier that chose the mode.
    pub mode_source: Option<String>,
    /// The image.
    pub image: Option<String>,
    /// The container or pod.
    pub sandbox_id: Option<String>,
    /// Why there is no sandbox (skipped, refused).
    pub reason: Option<String>,
    /// The egress policy (`open`, `allowlist`, `none`, …).
    pub network_mode: Option<String>,
    /// The tier that chose it.
    pub network_source: Option<String>,
    /// Whether the per-run proxy ran.
    pub proxy: Option<bool>,
    /// Whether TLS was inspected.
    pub tls_inspection: Option<bool>,
    /// Whether the route around the proxy was shown closed.
    pub egress_enforced: Option<bool>,
    /// Whether host state was bound, and from which tier.
    pub host_state: Option<String>,
    /// What was mounted (host state, workspace).
    pub mounts: Vec<String>,
    /// Binds the driver dropped.
    pub dropped: Vec<String>,
    /// Every `network_blocked`, in order.
    pub blocked: Vec<Blocked>,
    /// The workflow's secrets, by name only.
    pub secrets: Vec<String>,
    /// The admission gate's verdict.
    pub admission: Option<Admission>,
    /// The parent whose sandbox a child shares.
    pub parent_run: Option<String>,
}

/// The failure row.
#[derive(Clone, Debug, Serialize)]
pub struct FailureView {
    /// The status (`failed`, `failed_resumable`, `cancelled`).
    pub status: String,
    /// The stable code.
    pub code: Option<String>,
    /// The message (redacted).
    pub message: Option<String>,
    /// The phase (`execution`, a setup phase).
    pub phase: Option<String>,
    /// What to do.
    pub remedy: String,
}

/// A paused run's question.
#[derive(Clone, Debug, Serialize)]
pub struct QuestionView {
    /// The asking node.
    pub node: String,
    /// The question.
    pub question: String,
    /// Its choices, if any.
    pub options: Vec<String>,
}

/// Something a run left behind.
#[derive(Clone, Debug, Serialize)]
pub struct Artifact {
    /// `published`, `worktree`, `branch`, `patch`, `output`.
    pub kind: String,
    /// Where, which node, or a published artifact's name.
    pub name: String,
    /// What (a path, a commit, an output's JSON).
    pub value: String,
    /// The node that published it (`published` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// 0 for its first publication under its name, then 1, 2, … (`published` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

/// One line of the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineItem {
    /// The event's sequence number.
    pub seq: u64,
    /// When.
    pub ts: Timestamp,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The payload as compact JSON, at most [`SUMMARY_MAX`] characters.
    pub summary: String,
}

/// A run log line.
#[derive(Clone, Debug, Serialize)]
pub struct LogView {
    /// Its sequence number.
    pub seq: u64,
    /// `stdout`, `stderr`, …
    pub stream: String,
    /// The text (redacted).
    pub line: String,
}

/// Everything the run page shows.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    /// The run's row (status, trust, driver, times).
    pub run: RunRow,
    /// The workflow file.
    pub file_path: String,
    /// The workflow hash.
    pub workflow_hash: String,
    /// The node the run completed last.
    pub last_completed_node: Option<String>,
    /// The workflow graph.
    pub graph: Graph,
    /// Every node of the graph (ends excluded), in graph order.
    pub nodes: Vec<NodeView>,
    /// The sandbox panel.
    pub sandbox: SandboxView,
    /// The failure, for a failed or cancelled run.
    pub failure: Option<FailureView>,
    /// The question, for a paused run.
    pub question: Option<QuestionView>,
    /// What the run left behind.
    pub artifacts: Vec<Artifact>,
    /// The run's log lines (the engine's own: sandbox setup, teardown, each node's command).
    pub logs: Vec<LogView>,
    /// Output of the sandbox's own setup (`post_create`, `sandbox`), which belongs to no node.
    pub setup_logs: Vec<(String, NodeLogView)>,
    /// The event timeline.
    pub timeline: Vec<TimelineItem>,
    /// Subbot children.
    pub children: Vec<RunRow>,
    /// The edges the run crossed, as `[from, to]`, each once.
    pub taken: Vec<[String; 2]>,
    /// The last event's sequence number (where a live view resumes).
    pub last_seq: u64,
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn strings_of(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The whole view of `run`.
pub fn run_view(
    run: &Run,
    events: &[Event],
    logs: &[LogLine],
    node_logs: &[NodeLog],
    children: Vec<RunRow>,
    now: Timestamp,
) -> RunView {
    let graph = graph_of(run, events);
    let mut nodes: Vec<NodeView> = graph
        .nodes
        .iter()
        .filter(|n| n.kind != "end")
        .map(|n| NodeView {
            id: n.id.clone(),
            kind: n.kind.clone(),
            state: "pending".to_owned(),
            attempts: 0,
            duration_ms: None,
            failure: None,
            output: None,
            transcript: Vec::new(),
            logs: Vec::new(),
        })
        .collect();
    let mut sandbox = SandboxView {
        state: "undecided".to_owned(),
        secrets: graph.secret_names.clone(),
        admission: run.admission.clone(),
        ..SandboxView::default()
    };
    let mut artifacts = Vec::new();
    let mut phase = None;
    let mut question = None;
    let mut taken: Vec<[String; 2]> = Vec::new();

    for e in events {
        let d = &e.data;
        let node_id = str_of(d, "node");
        let node = |nodes: &mut Vec<NodeView>| -> Option<usize> {
            let id = node_id.as_deref()?;
            if let Some(i) = nodes.iter().position(|n| n.id == id) {
                return Some(i);
            }
            nodes.push(NodeView {
                id: id.to_owned(),
                kind: str_of(d, "kind").unwrap_or_else(|| "unknown".to_owned()),
                state: "pending".to_owned(),
                attempts: 0,
                duration_ms: None,
                failure: None,
                output: None,
                transcript: Vec::new(),
                logs: Vec::new(),
            });
            Some(nodes.len() - 1)
        };
        match e.kind.as_str() {
            "node_started" => {
                if sandbox.state == "undecided" {
                    "none".clone_into(&mut sandbox.state);
                    sandbox.driver = Some("none".to_owned());
                    sandbox.reason = Some("no sandbox: the run's mode was none".to_owned());
                }
                if let Some(i) = node(&mut nodes) {
                    let n = &mut nodes[i];
                    "running".clone_into(&mut n.state);
                    n.attempts = u64_of(d, "attempt")
                        .and_then(|a| u32::try_from(a).ok())
                        .unwrap_or(n.attempts + 1);
                    n.failure = None;
                }
            }
            "node_finished" => {
                if let Some(i) = node(&mut nodes) {
                    let n = &mut nodes[i];
                    "finished".clone_into(&mut n.state);
                    n.duration_ms = u64_of(d, "duration_ms");
                    n.output = d.get("output").cloned();
                }
            }
            "node_failed" => {
                if let Some(i) = node(&mut nodes) {
                    let n = &mut nodes[i];
                    // A node the run's stop ended (a cancel, an interrupt) did not fail itself.
                    let state = match d.get("code").and_then(Value::as_str) {
                        Some("CANCELLED" | "INTERRUPTED") => "stopped",
                        _ => "failed",
                    };
                    state.clone_into(&mut n.state);
                    n.failure = Some(NodeFailure {
                        code: str_of(d, "code"),
                        message: str_of(d, "message").unwrap_or_default(),
                        exit_code: d.get("exit_code").and_then(Value::as_i64),
                        stderr_tail: str_of(d, "stderr_tail"),
                    });
                }
            }
            "run_paused" => {
                if let Some(i) = node(&mut nodes) {
                    "paused".clone_into(&mut nodes[i].state);
                }
                question = Some(QuestionView {
                    node: node_id.clone().unwrap_or_default(),
                    question: str_of(d, "question").unwrap_or_default(),
                    options: strings_of(d, "options"),
                });
            }
            "run_started" => question = None,
            "edge_selected" => {
                if let (Some(from), Some(to)) = (str_of(d, "from"), str_of(d, "to")) {
                    let edge = [from, to];
                    if !taken.contains(&edge) {
                        taken.push(edge);
                    }
                }
            }
            "agent_turn" => {
                if let Some(i) = node(&mut nodes) {
                    nodes[i].transcript.push(TranscriptItem::Turn {
                        turn: u64_of(d, "turn").unwrap_or(0),
                        backend: str_of(d, "backend").unwrap_or_default(),
                        model: str_of(d, "model"),
                        stop_reason: str_of(d, "stop_reason"),
                        input_tokens: u64_of(d, "input_tokens"),
                        output_tokens: u64_of(d, "output_tokens"),
                    });
                }
            }
            "agent_tool_call" => {
                if let Some(i) = node(&mut nodes) {
                    nodes[i].transcript.push(TranscriptItem::ToolCall {
                        turn: u64_of(d, "turn").unwrap_or(0),
                        tool: str_of(d, "tool").unwrap_or_default(),
                        input: str_of(d, "input").unwrap_or_default(),
                        result: str_of(d, "result"),
                        is_error: d.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                        exit_code: d.get("exit_code").and_then(Value::as_i64),
                        duration_ms: u64_of(d, "duration_ms"),
                    });
                }
            }
            "run_failed" | "run_cancelled" => phase = str_of(d, "phase"),
            "sandbox_started" => {
                "started".clone_into(&mut sandbox.state);
                sandbox.driver = str_of(d, "driver");
                sandbox.mode = str_of(d, "mode");
                sandbox.mode_source = str_of(d, "source");
                sandbox.image = str_of(d, "image");
                sandbox.sandbox_id = str_of(d, "sandbox_id");
                sandbox.network_mode = str_of(d, "network_mode");
                sandbox.network_source = str_of(d, "network_source");
                sandbox.proxy = d.get("proxy").and_then(Value::as_bool);
                sandbox.tls_inspection = d.get("tls_inspection").and_then(Value::as_bool);
                sandbox.egress_enforced = d.get("egress_enforced").and_then(Value::as_bool);
            }
            "sandbox_skipped" => {
                let refused = d.get("refused") == Some(&Value::Bool(true));
                sandbox.state = if refused { "refused" } else { "skipped" }.to_owned();
                sandbox.driver = str_of(d, "driver").or_else(|| Some("none".to_owned()));
                sandbox.mode = str_of(d, "mode");
                sandbox.mode_source = str_of(d, "source");
                sandbox.reason = str_of(d, "reason");
            }
            "sandbox_shared" => {
                if d.get("adopted") == Some(&Value::Bool(true)) {
                    "adopted".clone_into(&mut sandbox.state);
                    sandbox.driver = str_of(d, "driver");
                } else {
                    sandbox.reason = str_of(d, "reason");
                }
                sandbox.parent_run = str_of(d, "parent_run");
            }
            "sandbox_host_state_mounted" => {
                let enabled = d.get("enabled") == Some(&Value::Bool(true));
                sandbox.host_state = Some(format!(
                    "{} ({})",
                    if enabled { "bound" } else { "not bound" },
                    str_of(d, "source").unwrap_or_default()
                ));
                if let Some(w) = str_of(d, "workspace_folder") {
                    sandbox.mounts.push(format!("workspace → {w}"));
                }
                sandbox.mounts.extend(strings_of(d, "mounts"));
                if let Some(s) = str_of(d, "scratch") {
                    sandbox.mounts.push(format!("scratch → {s}"));
                }
            }
            "sandbox_host_binds_dropped" => sandbox.dropped.extend(strings_of(d, "dropped")),
            "network_blocked" => {
                let b = Blocked {
                    host: str_of(d, "host").unwrap_or_default(),
                    reason: str_of(d, "reason").unwrap_or_default(),
                };
                if !sandbox.blocked.contains(&b) {
                    sandbox.blocked.push(b);
                }
            }
            // `publish: NAME` (the one record of published artifacts: the event).
            "artifact_published" => {
                if let Some(name) = str_of(d, "name") {
                    artifacts.push(Artifact {
                        kind: "published".to_owned(),
                        name,
                        value: clip(
                            &d.get("value").map(Value::to_string).unwrap_or_default(),
                            2000,
                        ),
                        node: str_of(d, "node"),
                        version: d.get("version").and_then(Value::as_u64),
                    });
                }
            }
            "sandbox_workspace_landed" => {
                if let Some(b) = str_of(d, "branch") {
                    let commit = str_of(d, "commit").unwrap_or_default();
                    artifacts.push(Artifact {
                        kind: "branch".to_owned(),
                        name: b,
                        value: commit,
                        node: None,
                        version: None,
                    });
                }
                if let Some(p) = str_of(d, "patch") {
                    artifacts.push(Artifact {
                        kind: "patch".to_owned(),
                        name: "patch".to_owned(),
                        value: p,
                        node: None,
                        version: None,
                    });
                }
            }
            _ => {}
        }
    }
    let mut setup_logs = Vec::new();
    for chunk in node_logs {
        let view = NodeLogView {
            seq: chunk.seq,
            stream: chunk.stream.as_str().to_owned(),
            text: chunk.text.clone(),
            truncated: chunk.truncated,
        };
        match nodes.iter_mut().find(|n| n.id == chunk.node) {
            Some(n) => n.logs.push(view),
            None => setup_logs.push((chunk.node.clone(), view)),
        }
    }
    if run.status.is_terminal() || run.status == RunStatus::Paused {
        for n in &mut nodes {
            if n.state == "running" {
                "stopped".clone_into(&mut n.state);
            }
        }
    }
    if run.status != RunStatus::Paused {
        question = None;
    }
    if let Some(w) = &run.worktree_path {
        artifacts.push(Artifact {
            kind: "worktree".to_owned(),
            name: "worktree".to_owned(),
            value: w.display().to_string(),
            node: None,
            version: None,
        });
    }
    for n in &nodes {
        if let Some(out) = &n.output {
            artifacts.push(Artifact {
                kind: "output".to_owned(),
                name: n.id.clone(),
                value: clip(&out.to_string(), 2000),
                node: None,
                version: None,
            });
        }
    }
    let status = run.status.as_str();
    let failure = run.status.allows_failure().then(|| FailureView {
        status: status.to_owned(),
        code: run.failure_code.clone(),
        message: run.failure_message.clone(),
        phase,
        remedy: remedy(run.failure_code.as_deref(), status, run.id.as_str()),
    });
    let timeline = events
        .iter()
        .map(|e| TimelineItem {
            seq: e.seq,
            ts: e.ts,
            kind: e.kind.clone(),
            summary: clip(&e.data.to_string(), SUMMARY_MAX),
        })
        .collect();
    let mut row = row(run, events, now);
    row.children = children.clone();
    RunView {
        run: row,
        file_path: run.file_path.display().to_string(),
        workflow_hash: run.workflow_hash.clone(),
        last_completed_node: run.last_completed_node.clone(),
        graph,
        nodes,
        sandbox,
        failure,
        question,
        artifacts,
        logs: logs
            .iter()
            .map(|l| LogView {
                seq: l.seq,
                stream: l.stream.as_str().to_owned(),
                line: l.line.clone(),
            })
            .collect(),
        setup_logs,
        timeline,
        children,
        taken,
        last_seq: events.last().map_or(0, |e| e.seq),
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;

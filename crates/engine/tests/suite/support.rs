//! Running a workflow from `.iter` text on the host through the noop driver.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iterion_engine::dsl::{CompileOptions, compile, ir::Workflow};
use iterion_engine::{
    EdgeSelected, Event, Execution, FailureCode, LogLine, MemoryEventSink, MemoryRunLog,
    NodeFailed, NodeFinished, NodeKindLabel, NodeStarted, RunReport,
};
use iterion_sandbox::SandboxRun;
use serde_json::Value;

pub const RUN_ID: &str = "run-1";

/// Compiles `src`, panicking with the diagnostics when it has errors.
pub fn workflow(src: &str) -> Workflow {
    let compiled = compile(src.as_bytes(), &CompileOptions::default());
    match compiled.workflow {
        Some(wf) => wf,
        None => panic!("does not compile: {:#?}", compiled.diagnostics),
    }
}

/// The vars at their defaults, as the launcher resolves them without `--var`.
pub fn default_vars(wf: &Workflow) -> serde_json::Map<String, Value> {
    wf.vars
        .iter()
        .filter_map(|v| Some((v.name.clone(), v.default.clone()?)))
        .collect()
}

/// A workspace dir and a noop sandbox run in it.
pub struct Host {
    pub dir: tempfile::TempDir,
    pub sandbox: Box<dyn SandboxRun>,
}

impl Host {
    pub async fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = iterion_engine::host_sandbox(RUN_ID, dir.path())
            .await
            .unwrap();
        Host { dir, sandbox }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// What one execution produced.
pub struct Ran {
    pub report: RunReport,
    pub events: Vec<Event>,
    pub logs: Vec<LogLine>,
}

/// Runs `wf` in `host` with `vars`, after `configure` adjusts the execution.
pub async fn run_with<'a>(
    wf: &'a Workflow,
    host: &'a Host,
    configure: impl FnOnce(Execution<'a>) -> Execution<'a>,
) -> Ran {
    let events = MemoryEventSink::new();
    let logs = MemoryRunLog::new();
    let exec = Execution::new(wf, RUN_ID, host.sandbox.as_ref(), Arc::new(events.clone()))
        .vars(default_vars(wf))
        .run_log(Arc::new(logs.clone()));
    let report = tokio::time::timeout(Duration::from_secs(60), configure(exec).run())
        .await
        .expect("the run ends within 60 s")
        .expect("the run starts");
    Ran {
        report,
        events: zero_durations(events.events()),
        logs: logs.lines(),
    }
}

/// Runs `src` on a fresh host with default settings.
pub async fn run_src(src: &str) -> (Ran, Host) {
    let wf = workflow(src);
    let host = Host::new().await;
    let ran = run_with(&wf, &host, |e| e).await;
    (ran, host)
}

/// Durations are the one non-deterministic field; zero them before comparing.
pub fn zero_durations(events: Vec<Event>) -> Vec<Event> {
    events
        .into_iter()
        .map(|e| match e {
            Event::NodeFinished(mut f) => {
                f.duration_ms = 0;
                Event::NodeFinished(f)
            }
            other => other,
        })
        .collect()
}

pub fn started(node: &str, kind: NodeKindLabel, attempt: u32) -> Event {
    Event::NodeStarted(NodeStarted {
        node: node.into(),
        kind,
        attempt,
        branch: None,
    })
}

pub fn tool(node: &str) -> Event {
    started(node, NodeKindLabel::Tool, 1)
}

pub fn in_branch(event: Event, branch: &str) -> Event {
    match event {
        Event::NodeStarted(mut s) => {
            s.branch = Some(branch.into());
            Event::NodeStarted(s)
        }
        other => other,
    }
}

pub fn finished(node: &str, output: Value) -> Event {
    Event::NodeFinished(NodeFinished {
        node: node.into(),
        duration_ms: 0,
        output,
        usage: None,
    })
}

pub fn failed(node: &str, code: FailureCode, message: &str) -> Event {
    Event::NodeFailed(NodeFailed {
        node: node.into(),
        code,
        message: message.into(),
        exit_code: None,
        stderr_tail: None,
        declared_code: None,
    })
}

pub fn edge(from: &str, to: &str) -> Event {
    Event::EdgeSelected(EdgeSelected {
        from: from.into(),
        to: to.into(),
        condition: None,
        loop_: None,
        iteration: None,
    })
}

pub fn edge_when(from: &str, to: &str, condition: &str) -> Event {
    Event::EdgeSelected(EdgeSelected {
        from: from.into(),
        to: to.into(),
        condition: Some(condition.into()),
        loop_: None,
        iteration: None,
    })
}

pub fn edge_loop(from: &str, to: &str, name: &str, iteration: u32) -> Event {
    Event::EdgeSelected(EdgeSelected {
        from: from.into(),
        to: to.into(),
        condition: None,
        loop_: Some(name.into()),
        iteration: Some(iteration),
    })
}

/// The node an event is about (`from` for edges), if any.
pub fn subject(event: &Event) -> Option<&str> {
    match event {
        Event::NodeStarted(e) => Some(&e.node),
        Event::NodeFinished(e) => Some(&e.node),
        Event::NodeFailed(e) => Some(&e.node),
        Event::EdgeSelected(e) => Some(&e.from),
        Event::LoopExhausted(e) => Some(&e.from),
        Event::EdgeConditionError(e) => Some(&e.from),
        _ => None,
    }
}

/// The events about `nodes`, in order: one branch's own sequence out of interleaved branches.
pub fn about(events: &[Event], nodes: &[&str]) -> Vec<Event> {
    events
        .iter()
        .filter(|e| subject(e).is_some_and(|n| nodes.contains(&n)))
        .cloned()
        .collect()
}

/// Waits (bounded) until `path` holds a pid, and returns it.
pub async fn read_pid(path: &Path) -> u32 {
    for _ in 0..400 {
        if let Ok(text) = tokio::fs::read_to_string(path).await
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never held a pid", path.display());
}

/// Whether process `pid` is gone (or a zombie awaiting its reaper), waiting up to 10 s for it.
pub async fn process_gone(pid: u32) -> bool {
    for _ in 0..400 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                let state = stat
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next());
                if state == Some("Z") {
                    return true;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// A SQLite store in `dir` (`iterion.db`), as the CLI opens one.
pub async fn sqlite_store(dir: &Path) -> Arc<dyn iterion_store::Store> {
    Arc::new(
        iterion_store::SqliteStore::open(
            dir.join("iterion.db"),
            iterion_store::SqliteOptions::default(),
        )
        .await
        .unwrap(),
    )
}

/// A trusted launch of `wf` from the workspace `ws`, its file named `file` there, with the vars
/// at their defaults and no sandbox flags.
pub fn run_request(wf: Workflow, ws: &Path, file: &str) -> iterion_engine::RunRequest {
    iterion_engine::RunRequest {
        vars: default_vars(&wf),
        workflow: wf,
        workflow_hash: "sha256:test".to_owned(),
        file_path: ws.join(file),
        secrets: Vec::new(),
        trust: iterion_sandbox::Trust::Trusted,
        options: iterion_engine::LaunchOptions {
            cwd: ws.to_owned(),
            ..iterion_engine::LaunchOptions::default()
        },
    }
}

/// Runs `request` on `engine` to its end, with no observer and no stop.
pub async fn run_to_end(
    engine: &iterion_engine::Engine,
    request: iterion_engine::RunRequest,
) -> iterion_engine::RunSummary {
    engine
        .run(
            request,
            iterion_engine::RunControl::default(),
            Arc::new(iterion_engine::NoObserver),
        )
        .await
        .unwrap()
}

/// The events of run `run_id` as `(type, data)`.
pub async fn events_of(store: &dyn iterion_store::Store, run_id: &str) -> Vec<(String, Value)> {
    let id = iterion_store::RunId::parse(run_id).unwrap();
    store
        .events(&id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.data))
        .collect()
}

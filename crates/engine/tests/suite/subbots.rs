//! Subbot nodes (DSL.md §3.9) through the executor on the host (noop driver): the child runs in
//! the parent's sandbox, its output comes back, its failure fails the node, nesting works, and
//! the adoption refusals of SANDBOX.md §14 hold against a run flagged copy-based.
//!
//! `CopyFlaggedRun` is a TEST SANDBOX RUN, not a product one: the noop host run that also offers a
//! workspace file refresher, which is what makes a parent copy-based (SANDBOX.md §14).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_engine::dsl::{CompileOptions, compile_file, ir::Workflow};
use iterion_engine::{Event, Execution, FailureCode, MemoryEventSink, OutcomeStatus, RunReport};
use iterion_sandbox::{ExecOpts, ExecResult, SandboxRun, WorkspaceFileRefresher};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{Host, RUN_ID, default_vars, run_request, run_to_end, sqlite_store};

/// An `Engine::run` launcher on the host (the noop driver only): its home (the store's dir),
/// a workspace, the store and the engine.
struct Launcher {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
    store: Arc<dyn iterion_store::Store>,
    engine: iterion_engine::Engine,
}

impl Launcher {
    async fn on_the_host() -> Launcher {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let store = sqlite_store(home.path()).await;
        let engine = iterion_engine::Engine::new(Arc::clone(&store), home.path())
            .with_registry(iterion_sandbox::Registry::with_noop());
        Launcher {
            home,
            ws,
            store,
            engine,
        }
    }
}

/// Writes `files` into `dir` and compiles the first one from its path.
fn compile_tree(dir: &Path, files: &[(&str, &str)]) -> Workflow {
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let compiled = compile_file(&dir.join(files[0].0), &CompileOptions::default()).unwrap();
    match compiled.workflow {
        Some(wf) => wf,
        None => panic!("does not compile: {:#?}", compiled.diagnostics),
    }
}

async fn execute(
    wf: &Workflow,
    sandbox: &dyn SandboxRun,
    workdir: &Path,
) -> (RunReport, Vec<Event>) {
    let events = MemoryEventSink::new();
    let exec = Execution::new(wf, RUN_ID, sandbox, Arc::new(events.clone()))
        .vars(default_vars(wf))
        .workdir(workdir.display().to_string());
    let report = tokio::time::timeout(Duration::from_secs(60), exec.run())
        .await
        .expect("the run ends within 60 s")
        .expect("the run starts");
    (report, events.events())
}

const PARENT: &str = "\
schema result:
  wrote: string

tool start:
  command: `echo '{\"name\": \"alpha\"}'`

subbot sub:
  source: \"child.iter\"
  output: result

tool after:
  command: `cat child-was-here.txt`

workflow parent:
  entry: start
  start -> sub with { who: \"{{outputs.start.name}}\" }
  sub -> after
  after -> done
";

const CHILD: &str = "\
vars:
  who: string

schema result:
  wrote: string

tool write:
  command: `echo hello {{vars.who}} from $ITERION_RUN_ID > child-was-here.txt && echo '{\"wrote\": \"child-was-here.txt\"}'`
  output: result

workflow child:
  entry: write
  write -> done
";

#[tokio::test]
async fn a_child_runs_in_the_parents_sandbox_and_its_output_comes_back() {
    let host = Host::new().await;
    let wf = compile_tree(
        host.path(),
        &[("parent.iter", PARENT), ("child.iter", CHILD)],
    );
    let (report, events) = execute(&wf, host.sandbox.as_ref(), host.path()).await;
    assert_eq!(
        report.outcome.status,
        OutcomeStatus::Finished,
        "{:?}",
        report.outcome.message
    );
    assert_eq!(
        report.outcome.outputs["sub"],
        json!({"wrote": "child-was-here.txt"})
    );
    // The child wrote into the shared workspace, under its own run id.
    let written = std::fs::read_to_string(host.file("child-was-here.txt")).unwrap();
    assert_eq!(written.trim(), format!("hello alpha from {RUN_ID}.sub.1"));
    // One sandbox_shared {adopted: true} naming the parent, and the child's own node events.
    let shared: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::SandboxShared(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(shared.len(), 1, "{events:#?}");
    assert!(shared[0].adopted);
    assert_eq!(shared[0].parent_run, RUN_ID);
    assert_eq!(shared[0].driver.as_deref(), Some("noop"));
    assert_eq!(shared[0].copy_based, Some(false));
    let child_started = events
        .iter()
        .any(|e| matches!(e, Event::NodeStarted(s) if s.node == "write"));
    assert!(child_started, "the child's node events are recorded");
}

#[tokio::test]
async fn a_failing_child_fails_the_node_with_its_code_and_the_sandbox_survives() {
    let host = Host::new().await;
    let failing = CHILD.replace("echo hello", "exit 3; echo hello");
    let wf = compile_tree(
        host.path(),
        &[("parent.iter", PARENT), ("child.iter", &failing)],
    );
    let (report, _) = execute(&wf, host.sandbox.as_ref(), host.path()).await;
    assert_eq!(report.outcome.status, OutcomeStatus::FailedResumable);
    assert_eq!(
        report.outcome.failure_code,
        Some(FailureCode::ExecutionFailed)
    );
    let message = report.outcome.message.unwrap_or_default();
    assert!(message.contains("node \"sub\""), "{message}");
    // The parent's sandbox is still usable: the child never tears it down.
    let after = host
        .sandbox
        .exec(&["true".to_owned()], ExecOpts::default())
        .await
        .expect("the parent's sandbox still runs commands");
    assert_eq!(after.exit_code, 0);
}

#[tokio::test]
async fn children_nest_three_deep() {
    let host = Host::new().await;
    let level = |name: &str, next: &str| {
        format!(
            "tool start:\n  command: `echo {name} >> trail.txt`\n\nsubbot sub:\n  source: \"{next}\"\n\nworkflow {name}:\n  entry: start\n  start -> sub\n  sub -> done\n"
        )
    };
    let leaf = "tool start:\n  command: `echo leaf >> trail.txt && echo '{\"depth\": 3}'`\n\nworkflow leaf:\n  entry: start\n  start -> done\n";
    let (l0, l1, l2) = (
        level("l0", "l1.iter"),
        level("l1", "l2.iter"),
        level("l2", "l3.iter"),
    );
    let wf = compile_tree(
        host.path(),
        &[
            ("l0.iter", &l0),
            ("l1.iter", &l1),
            ("l2.iter", &l2),
            ("l3.iter", leaf),
        ],
    );
    let (report, _) = execute(&wf, host.sandbox.as_ref(), host.path()).await;
    assert_eq!(
        report.outcome.status,
        OutcomeStatus::Finished,
        "{:?}",
        report.outcome.message
    );
    assert_eq!(report.outcome.outputs["sub"], json!({"depth": 3}));
    let trail = std::fs::read_to_string(host.file("trail.txt")).unwrap();
    assert_eq!(trail, "l0\nl1\nl2\nleaf\n");
}

/// The host run, flagged copy-based.
struct CopyFlaggedRun {
    inner: Box<dyn SandboxRun>,
}

#[async_trait]
impl SandboxRun for CopyFlaggedRun {
    fn driver(&self) -> &str {
        "copy-flagged-test"
    }
    fn id(&self) -> &str {
        self.inner.id()
    }
    async fn exec(&self, argv: &[String], opts: ExecOpts) -> iterion_sandbox::Result<ExecResult> {
        self.inner.exec(argv, opts).await
    }
    async fn cleanup(&self) -> iterion_sandbox::Result<()> {
        self.inner.cleanup().await
    }
    fn workspace_file_refresher(&self) -> Option<&dyn WorkspaceFileRefresher> {
        Some(self)
    }
}

#[async_trait]
impl WorkspaceFileRefresher for CopyFlaggedRun {
    async fn refresh_workspace_file(
        &self,
        _rel: &str,
        _value: &[u8],
    ) -> iterion_sandbox::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn under_a_copy_based_parent_a_declaring_child_is_refused_naming_fields_and_driver() {
    let host = Host::new().await;
    let declaring = CHILD.replace(
        "workflow child:\n",
        "workflow child:\n  sandbox:\n    image: \"alpine:3\"\n",
    );
    let wf = compile_tree(
        host.path(),
        &[("parent.iter", PARENT), ("child.iter", &declaring)],
    );
    let flagged = CopyFlaggedRun {
        inner: iterion_engine::host_sandbox(RUN_ID, host.path())
            .await
            .unwrap(),
    };
    let (report, events) = execute(&wf, &flagged, host.path()).await;
    assert_eq!(
        report.outcome.failure_code,
        Some(FailureCode::SandboxAdoptionRefused)
    );
    let message = report.outcome.message.unwrap_or_default();
    assert!(
        message.contains(
            "subbot sub declares sandbox fields [image] but its parent's copy-flagged-test sandbox is copy-based"
        ),
        "{message}"
    );
    assert!(!events.iter().any(|e| matches!(e, Event::SandboxShared(_))));
}

#[tokio::test]
async fn under_a_copy_based_parent_a_pausing_child_is_refused_naming_the_node() {
    let host = Host::new().await;
    let pausing = "\
vars:
  who: string

schema result:
  wrote: string

agent asker:
  model: \"anthropic/claude-x\"
  user: \"ask {{vars.who}}\"
  output: result
  interaction: ask

workflow child:
  entry: asker
  asker -> done
";
    let wf = compile_tree(
        host.path(),
        &[("parent.iter", PARENT), ("child.iter", pausing)],
    );
    let flagged = CopyFlaggedRun {
        inner: iterion_engine::host_sandbox(RUN_ID, host.path())
            .await
            .unwrap(),
    };
    let (report, _) = execute(&wf, &flagged, host.path()).await;
    assert_eq!(
        report.outcome.failure_code,
        Some(FailureCode::SandboxAdoptionRefused)
    );
    let message = report.outcome.message.unwrap_or_default();
    assert!(message.contains("can pause at node \"asker\""), "{message}");
}

/// Through `Engine::run` on the host: the child has a run record of its own (parent, root and
/// trust from the parent), its own events, and its final status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_child_has_its_own_record_and_events() {
    use iterion_store::{RunQuery, RunStatus};

    let Launcher {
        home: _home,
        ws,
        store,
        engine,
    } = Launcher::on_the_host().await;
    let parent = PARENT.replace("  entry: start\n", "  entry: start\n  sandbox: none\n");
    let wf = compile_tree(
        ws.path(),
        &[("parent.iter", &parent), ("child.iter", CHILD)],
    );
    let summary = run_to_end(&engine, run_request(wf, ws.path(), "parent.iter")).await;
    assert_eq!(summary.status, RunStatus::Finished, "{:?}", summary.message);
    let runs = store.list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let parent_id = iterion_store::RunId::parse(&summary.run_id).unwrap();
    let child = runs
        .iter()
        .find(|r| r.id != parent_id)
        .expect("a child run record");
    assert_eq!(child.parent_run_id.as_ref(), Some(&parent_id));
    assert_eq!(child.root_run_id, parent_id);
    assert_eq!(child.workflow, "child");
    assert_eq!(child.status, RunStatus::Finished);
    assert_eq!(child.file_path, ws.path().join("child.iter"));
    // The record keeps what a resume of the child needs: its inputs and the parent's launch
    // options (its cwd), not the resuming process's.
    assert_eq!(child.vars.get("who"), Some(&json!("alpha")));
    let envelope = child
        .checkpoint
        .as_ref()
        .expect("the child's launch envelope");
    assert_eq!(
        envelope["launch"]["cwd"],
        json!(ws.path().display().to_string()),
        "{envelope:#}"
    );
    let kinds: Vec<String> = store
        .events(&child.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "sandbox_shared",
            "node_started",
            "node_finished",
            "edge_selected",
            "run_finished"
        ]
    );
    let child_started = &store.events(&child.id, 0).await.unwrap()[0].data;
    assert_eq!(child_started["parent_run"], parent_id.as_str());
    assert_eq!(child_started["root_run"], parent_id.as_str());
    assert_eq!(child_started["trust"], "trusted");
    assert_eq!(child_started["workflow"], "child");
    let parent_kinds: Vec<String> = store
        .events(&parent_id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(
        !parent_kinds.iter().any(|k| k == "sandbox_shared"),
        "the child's events are its own: {parent_kinds:?}"
    );
    let written = std::fs::read_to_string(ws.path().join("child-was-here.txt")).unwrap();
    assert_eq!(written.trim(), format!("hello alpha from {}", child.id));
}

/// Resume of a child that adopted a copy-based parent's sandbox (SANDBOX.md §14): refused
/// without `--force` (`RESUME_INVALID`); with it, the child runs in a sandbox of its own and
/// records `sandbox_shared {adopted: false, forced: true}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_of_a_copy_based_parent_resumes_only_with_force() {
    use iterion_engine::{EngineError, NoObserver, ResumeRequest, RunControl};
    use iterion_store::{NewEvent, NewRun, RunStatus};

    let Launcher {
        home: _home,
        ws,
        store,
        engine,
    } = Launcher::on_the_host().await;
    // An absolute path: a forced child resumes with the process's cwd (no launch envelope).
    let marker = ws.path().join("resumed.txt");
    let source = format!(
        "tool t:\n  command: `echo resumed > {}`\n\nworkflow child:\n  entry: t\n  sandbox: none\n  t -> done\n",
        marker.display()
    );
    let source = source.as_str();
    let file = ws.path().join("child.iter");
    std::fs::write(&file, source).unwrap();
    let parent = store
        .create_run(NewRun::new(
            "parent",
            "sha256:p",
            ws.path().join("parent.iter"),
        ))
        .await
        .unwrap();
    let child = store
        .create_run(
            NewRun::new(
                "child",
                iterion_engine::workflow_hash(source.as_bytes()),
                &file,
            )
            .child_of(&parent),
        )
        .await
        .unwrap();
    let mut failed = child.clone();
    failed.status = RunStatus::FailedResumable;
    failed.failure_code = Some("EXECUTION_FAILED".to_owned());
    store.save_run(&failed, child.version).await.unwrap();
    let adopted = json!({
        "adopted": true, "driver": "kubernetes", "workspace": "/workspace",
        "parent_run": parent.id.as_str(), "copy_based": true,
    });
    store
        .append_event(&child.id, NewEvent::new("sandbox_shared", adopted))
        .await
        .unwrap();
    let resume = |force: bool| ResumeRequest {
        from: None,
        run_id: child.id.to_string(),
        force,
        answer: None,
    };

    let refused = engine
        .resume(resume(false), RunControl::default(), Arc::new(NoObserver))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "RESUME_INVALID");
    assert!(
        matches!(&refused, EngineError::ResumeRefused { message } if message.contains("--force")),
        "{refused}"
    );
    assert!(!marker.exists());

    let summary = engine
        .resume(resume(true), RunControl::default(), Arc::new(NoObserver))
        .await
        .unwrap();
    assert_eq!(summary.status, RunStatus::Finished, "{:?}", summary.message);
    assert!(marker.exists(), "the forced resume ran the child");
    let shared: Vec<serde_json::Value> = store
        .events(&child.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "sandbox_shared")
        .map(|e| e.data)
        .collect();
    assert_eq!(shared.len(), 2, "{shared:#?}");
    assert_eq!(shared[1]["adopted"], false);
    assert_eq!(shared[1]["forced"], true);
    assert_eq!(shared[1]["parent_run"], parent.id.as_str());
}

/// Through `Engine::run` on the host: a child declaring sandbox fields under a bind-mount (here
/// host) parent is honoured — a launch of its own, recorded as `sandbox_shared {adopted: false,
/// declared}` — and its output comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declaring_child_is_launched_on_its_own() {
    use iterion_store::{RunQuery, RunStatus};

    let Launcher {
        home: _home,
        ws,
        store,
        engine,
    } = Launcher::on_the_host().await;
    let parent = PARENT.replace("  entry: start\n", "  entry: start\n  sandbox: none\n");
    let declaring = CHILD.replace(
        "workflow child:\n",
        "workflow child:\n  sandbox:\n    mode: auto\n    env:\n      A: \"1\"\n",
    );
    let wf = compile_tree(
        ws.path(),
        &[("parent.iter", &parent), ("child.iter", &declaring)],
    );
    let summary = run_to_end(&engine, run_request(wf, ws.path(), "parent.iter")).await;
    assert_eq!(summary.status, RunStatus::Finished, "{:?}", summary.message);
    let runs = store.list_runs(&RunQuery::default()).await.unwrap();
    let parent_id = iterion_store::RunId::parse(&summary.run_id).unwrap();
    let child = runs
        .iter()
        .find(|r| r.id != parent_id)
        .expect("a child run record");
    assert_eq!(child.parent_run_id.as_ref(), Some(&parent_id));
    assert_eq!(child.status, RunStatus::Finished);
    let events = store.events(&child.id, 0).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds[..2], ["run_started", "sandbox_shared"], "{kinds:?}");
    let shared = &events[1];
    assert_eq!(shared.data["adopted"], false);
    assert_eq!(shared.data["declared"], json!(["env"]));
    assert_eq!(shared.data["parent_run"], parent_id.as_str());
    let started = events
        .iter()
        .find(|e| e.kind == "run_started")
        .expect("run_started");
    assert_eq!(started.data["parent_run"], parent_id.as_str());
    let written = std::fs::read_to_string(ws.path().join("child-was-here.txt")).unwrap();
    assert_eq!(written.trim(), format!("hello alpha from {}", child.id));
}

/// The adopted child is told what adoption does not give it (SANDBOX.md §14): its bundle's
/// `devbox.json` (a child file in a directory other than the workspace root, §15's bot source)
/// is not provisioned, and its own file secrets are not materialised — as `sandbox_shared`
/// fields and as warnings in the run log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_child_is_warned_about_its_devbox_and_its_file_secrets() {
    use iterion_store::{RunQuery, RunStatus};

    let Launcher {
        home: _home,
        ws,
        store,
        engine,
    } = Launcher::on_the_host().await;
    std::fs::create_dir(ws.path().join("bots")).unwrap();
    std::fs::write(ws.path().join("bots/devbox.json"), r#"{"packages": []}"#).unwrap();
    let parent = PARENT
        .replace("  entry: start\n", "  entry: start\n  sandbox: none\n")
        .replace("source: \"child.iter\"", "source: \"bots/child.iter\"");
    let child_src = format!(
        "secrets:\n  cert:\n    value: \"pem\"\n    as: file\n\n{}",
        CHILD
    );
    let wf = compile_tree(
        ws.path(),
        &[("parent.iter", &parent), ("bots/child.iter", &child_src)],
    );
    let summary = run_to_end(&engine, run_request(wf, ws.path(), "parent.iter")).await;
    assert_eq!(summary.status, RunStatus::Finished, "{:?}", summary.message);
    let parent_id = iterion_store::RunId::parse(&summary.run_id).unwrap();
    let runs = store.list_runs(&RunQuery::default()).await.unwrap();
    let child = runs.iter().find(|r| r.id != parent_id).expect("the child");
    let shared = store
        .events(&child.id, 0)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "sandbox_shared")
        .expect("sandbox_shared")
        .data;
    assert_eq!(shared["adopted"], true);
    assert_eq!(shared["devbox_declared"], true, "{shared:#}");
    assert_eq!(shared["file_secrets_declared"], true, "{shared:#}");
    let logs: Vec<String> = store
        .logs(&parent_id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.line)
        .collect();
    let devbox = ws.path().canonicalize().unwrap().join("bots/devbox.json");
    let warned = |needle: &str| {
        logs.iter()
            .any(|l| l.contains("warning: subbot sub:") && l.contains(needle))
    };
    assert!(
        warned(&format!("{} is not provisioned", devbox.display())),
        "{logs:#?}"
    );
    assert!(
        warned("file secrets [cert] are not materialised"),
        "{logs:#?}"
    );
}

/// An interrupt of the parent (SIGTERM of `iterion run`, a runner's shutdown) reaches its
/// children: a child running in the parent's sandbox and a child launched on its own both end
/// INTERRUPTED (resumable) with the parent, not CANCELLED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parents_interrupt_ends_its_children_interrupted() {
    use iterion_engine::{NoObserver, RunControl};
    use iterion_store::{RunQuery, RunStatus};

    let sleeper = "tool nap:\n  command: `touch started-$ITERION_RUN_ID && sleep 30`\n\n";
    let cases = [
        ("adopting", String::new()),
        (
            "launched on its own",
            "  sandbox:\n    mode: auto\n    env:\n      A: \"1\"\n".to_owned(),
        ),
    ];
    for (case, declaration) in cases {
        let Launcher {
            home: _home,
            ws,
            store,
            engine,
        } = Launcher::on_the_host().await;
        let engine = Arc::new(engine);
        let parent = "subbot sub:\n  source: \"child.iter\"\n\n\
                      workflow parent:\n  entry: sub\n  sandbox: none\n  sub -> done\n";
        let child = format!("{sleeper}workflow child:\n  entry: nap\n{declaration}  nap -> done\n");
        let wf = compile_tree(
            ws.path(),
            &[("parent.iter", parent), ("child.iter", &child)],
        );
        let control = RunControl::default();
        let run = {
            let (engine, control) = (Arc::clone(&engine), control.clone());
            let request = run_request(wf, ws.path(), "parent.iter");
            tokio::spawn(async move { engine.run(request, control, Arc::new(NoObserver)).await })
        };
        // The child's tool has started: the interrupt lands while the child runs.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !std::fs::read_dir(ws.path()).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("started-")
        }) {
            assert!(
                std::time::Instant::now() < deadline,
                "{case}: the child never started"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        control.interrupt.cancel();
        let summary = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .expect("the run ends soon after the interrupt")
            .unwrap()
            .unwrap();
        assert_eq!(summary.status, RunStatus::FailedResumable, "{case}");
        assert_eq!(
            summary.failure_code.as_deref(),
            Some("INTERRUPTED"),
            "{case}"
        );
        let parent_id = iterion_store::RunId::parse(&summary.run_id).unwrap();
        let runs = store.list_runs(&RunQuery::default()).await.unwrap();
        let child = runs.iter().find(|r| r.id != parent_id).expect("the child");
        assert_eq!(
            child.status,
            RunStatus::FailedResumable,
            "{case}: {child:#?}"
        );
        assert_eq!(child.failure_code.as_deref(), Some("INTERRUPTED"), "{case}");
    }
}

const ASKING_PARENT: &str = "\
tool before:
  command: `echo before >> parent-steps.txt; echo '{}'`

subbot kid:
  source: \"child.iter\"

workflow parent:
  entry: before
  sandbox: none
  before -> kid
  kid -> done
";

/// A child whose `human` node asks (no operator: it pauses) after a tool that must not run again
/// on the resume. `SANDBOX` is its sandbox block (none: it adopts its parent's).
const ASKING_CHILD: &str = "\
tool first:
  command: `echo first >> child-steps.txt; echo '{}'`

prompt q:
  Which environment?

human ask:
  instructions: q

workflow child:
  entry: first
SANDBOX  first -> ask
  ask -> done
";

/// A child (adopted, or a launch of its own) that pauses pauses its parent; only the parent's
/// resume answers it, the same child record continues from its asking node, and the answer
/// comes back as the parent's result.
async fn a_pausing_child_pauses_its_parent(child_sandbox: &str) {
    use iterion_engine::{EngineError, NoObserver, ResumeRequest, RunControl};
    use iterion_store::{RunQuery, RunStatus};

    let Launcher {
        home: _home,
        ws,
        store,
        engine,
    } = Launcher::on_the_host().await;
    let child_src = ASKING_CHILD.replace("SANDBOX", child_sandbox);
    let wf = compile_tree(
        ws.path(),
        &[("parent.iter", ASKING_PARENT), ("child.iter", &child_src)],
    );
    let summary = run_to_end(&engine, run_request(wf, ws.path(), "parent.iter")).await;
    assert_eq!(summary.status, RunStatus::Paused, "{:?}", summary.message);
    assert_eq!(summary.message.as_deref(), Some("Which environment?"));
    let runs = store.list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let parent_id = iterion_store::RunId::parse(&summary.run_id).unwrap();
    let child = runs.iter().find(|r| r.id != parent_id).unwrap().clone();
    assert_eq!(child.status, RunStatus::Paused);
    let parent_events = super::support::events_of(store.as_ref(), parent_id.as_str()).await;
    let paused: Vec<_> = parent_events
        .iter()
        .filter(|(k, _)| k == "run_paused")
        .map(|(_, v)| v.clone())
        .collect();
    assert_eq!(
        paused,
        vec![json!({"node": "kid", "question": "Which environment?"})]
    );
    assert!(
        !parent_events.iter().any(|(k, _)| k == "node_failed"),
        "{parent_events:#?}"
    );
    let resume = |run_id: &str, answer: &str| ResumeRequest {
        from: None,
        run_id: run_id.to_owned(),
        // The request's hash is a stand-in, not the file's.
        force: true,
        answer: Some(answer.to_owned()),
    };
    // The child is answered through its parent only.
    let refused = engine
        .resume(
            resume(child.id.as_str(), "prod"),
            RunControl::default(),
            Arc::new(NoObserver),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, EngineError::ResumeRefused { message }
            if message.contains(&format!("`iterion resume {parent_id} --answer TEXT`"))),
        "{refused}"
    );
    let summary = engine
        .resume(
            resume(parent_id.as_str(), "staging"),
            RunControl::default(),
            Arc::new(NoObserver),
        )
        .await
        .unwrap();
    assert_eq!(summary.status, RunStatus::Finished, "{:?}", summary.message);
    assert_eq!(summary.output, Some(json!({"answer": "staging"})));
    // The same child record finished; nothing before the question ran twice.
    let runs = store.list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let after = runs.iter().find(|r| r.id == child.id).unwrap();
    assert_eq!(after.status, RunStatus::Finished);
    let started: Vec<_> = super::support::events_of(store.as_ref(), child.id.as_str())
        .await
        .into_iter()
        .filter(|(k, _)| k == "run_started")
        .map(|(_, v)| v["resumed"].clone())
        .collect();
    assert_eq!(started, vec![json!(false), json!(true)]);
    let steps = |f: &str| std::fs::read_to_string(ws.path().join(f)).unwrap();
    assert_eq!(steps("child-steps.txt"), "first\n");
    assert_eq!(steps("parent-steps.txt"), "before\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_child_that_pauses_pauses_its_parent_and_the_parents_resume_answers_it() {
    a_pausing_child_pauses_its_parent("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_child_that_pauses_pauses_its_parent_and_the_parents_resume_answers_it() {
    a_pausing_child_pauses_its_parent("  sandbox: none\n").await;
}

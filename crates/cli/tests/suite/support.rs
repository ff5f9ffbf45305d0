//! Fixtures for the binary-level run tests: a private `ITERION_HOME` and a git workspace per
//! test, the `iterion` binary with a clean environment, and readers of the store the binary
//! wrote. Containers a test's store left behind are force-removed when the fixture drops.
use std::path::PathBuf;
use std::process::Command as StdCommand;

use assert_cmd::Command;
use iterion_store::{Run, RunQuery, SqliteOptions, SqliteStore, Store};
use serde_json::Value;

/// The image `sandbox: auto` uses in these tests (bash, coreutils; built by
/// scripts/build-test-images.sh).
pub const IMAGE: &str = iterion_test_support::DEBIAN_IMAGE;

/// Endpoints where no engine answers.
pub const DEAD_DOCKER: &str = "unix:///nonexistent/docker.sock";
pub const DEAD_PODMAN: &str = "unix:///nonexistent/podman.sock";

/// Every variable that would change a run's sandbox decision from outside the test.
const CLEARED: [&str; 16] = [
    "ITERION_STORE_URL",
    "ITERION_SANDBOX_DEFAULT",
    "ITERION_SANDBOX_OVERRIDE",
    "ITERION_SANDBOX_DEFAULT_IMAGE",
    "ITERION_SANDBOX_HOST_STATE",
    "ITERION_SANDBOX_POST_CREATE_TIMEOUT",
    "ITERION_SANDBOX_PULL_TIMEOUT",
    "ITERION_MODE",
    "KUBERNETES_SERVICE_HOST",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "ITERION_CLAUDE_CREDENTIALS",
    "ITERION_CODEX_AUTH",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "ITERION_CREDENTIAL_ROOTS",
];

/// A run that ended, as [`Env::only_run_ended`] read it.
pub struct Ended {
    pub run: Run,
    pub events: Vec<(String, Value)>,
    pub logs: Vec<(String, String)>,
}

pub struct Env {
    pub home: tempfile::TempDir,
    pub ws: tempfile::TempDir,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

impl Env {
    /// A fresh home and a workspace that is a git repository (so `sandbox: auto` has a root).
    pub fn new() -> Env {
        let env = Env {
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
        };
        let ok = StdCommand::new("git")
            .args(["init", "-q"])
            .current_dir(env.ws.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git init");
        env
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.ws.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `iterion` in the workspace, with this home and none of the outside knobs.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::cargo_bin("iterion").unwrap();
        for var in CLEARED {
            cmd.env_remove(var);
        }
        cmd.env("ITERION_HOME", self.home.path())
            .env("RUST_LOG", "error")
            .current_dir(self.ws.path())
            .timeout(std::time::Duration::from_secs(120));
        cmd
    }

    /// The same, as a plain `std::process::Command` (for tests that act while the run runs).
    pub fn std_cmd(&self) -> StdCommand {
        self.std_cmd_via(&[])
    }

    /// The same, run through `wrapper` (for example `setpriv --reuid=…`): the program is
    /// `wrapper[0]`, and iterion's path follows the wrapper's other arguments.
    pub fn std_cmd_via(&self, wrapper: &[&str]) -> StdCommand {
        let iterion = assert_cmd::cargo::cargo_bin("iterion");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = StdCommand::new(program);
                cmd.args(args).arg(&iterion);
                cmd
            }
            None => StdCommand::new(&iterion),
        };
        for var in CLEARED {
            cmd.env_remove(var);
        }
        cmd.env("ITERION_HOME", self.home.path())
            .env("RUST_LOG", "error")
            .current_dir(self.ws.path());
        cmd
    }

    /// `args` spawned with piped output (for tests that signal it).
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.std_cmd()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Polls the store until a run has an event of type `kind` (at most `secs` seconds).
    pub fn wait_for_event(&self, kind: &str, secs: u64) -> (Run, Vec<(String, Value)>) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            if let Some(run) = self.runs().into_iter().next() {
                let events = self.events(&run);
                if events.iter().any(|(k, _)| k == kind) {
                    return (run, events);
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {kind} event within {secs}s"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    pub fn db(&self) -> PathBuf {
        self.home.path().join("iterion.db")
    }

    fn with_store<T>(&self, f: impl AsyncFnOnce(&SqliteStore) -> T) -> T {
        runtime().block_on(async {
            let store = SqliteStore::open(self.db(), SqliteOptions::default())
                .await
                .unwrap();
            f(&store).await
        })
    }

    /// Every run, newest first (none when the database was never created).
    pub fn runs(&self) -> Vec<Run> {
        if !self.db().exists() {
            return Vec::new();
        }
        self.with_store(async |s| s.list_runs(&RunQuery::newest(1000)).await.unwrap())
    }

    pub fn only_run(&self) -> Run {
        let runs = self.runs();
        assert_eq!(runs.len(), 1, "{runs:#?}");
        runs.into_iter().next().unwrap()
    }

    /// A run's events as `(type, data)`.
    pub fn events(&self, run: &Run) -> Vec<(String, Value)> {
        self.with_store(async |s| {
            s.events(&run.id, 0)
                .await
                .unwrap()
                .into_iter()
                .map(|e| (e.kind, e.data))
                .collect()
        })
    }

    /// The only run after `out`, with its events and run-log lines; panics with stderr, events
    /// and logs when `out` did not exit with `code`.
    pub fn only_run_ended(&self, out: &std::process::Output, code: i32) -> Ended {
        let run = self.only_run();
        let events = self.events(&run);
        let logs = self.logs(&run);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}\n{events:#?}\n{logs:#?}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ended { run, events, logs }
    }

    /// A run's run-log lines as `(stream, line)`, then its nodes' output lines (`node_logs`)
    /// as `(stream, "[node] line")`, the form they had in the run log.
    pub fn logs(&self, run: &Run) -> Vec<(String, String)> {
        self.with_store(async |s| {
            let mut lines: Vec<(String, String)> = s
                .logs(&run.id, 0)
                .await
                .unwrap()
                .into_iter()
                .map(|l| (l.stream.as_str().to_owned(), l.line))
                .collect();
            for chunk in self_node_logs(s, run).await {
                for line in chunk.lines() {
                    lines.push((
                        chunk.stream.as_str().to_owned(),
                        format!("[{}] {line}", chunk.node),
                    ));
                }
            }
            lines
        })
    }

    /// A run's node-output chunks, in order.
    pub fn node_logs(&self, run: &Run) -> Vec<iterion_store::NodeLog> {
        self.with_store(async |s| self_node_logs(s, run).await)
    }

    /// The store's id; `None` when there is no (readable) database.
    pub fn store_id(&self) -> Option<String> {
        store_id_of(&self.db())
    }

    /// Container ids labelled with this test's store.
    pub fn containers(&self) -> Vec<String> {
        match self.store_id() {
            Some(id) => containers_of(&id),
            None => Vec::new(),
        }
    }
}

async fn self_node_logs(store: &SqliteStore, run: &Run) -> Vec<iterion_store::NodeLog> {
    let mut query = iterion_store::NodeLogQuery::default();
    let mut all = Vec::new();
    loop {
        let page = store.node_logs(&run.id, &query).await.unwrap();
        let Some(last) = page.last() else {
            return all;
        };
        query.after_seq = last.seq;
        all.extend(page);
    }
}

/// The id of the store at `db`; `None` when there is no (readable) database.
pub fn store_id_of(db: &std::path::Path) -> Option<String> {
    if !db.exists() {
        return None;
    }
    runtime().block_on(async {
        SqliteStore::open(db, SqliteOptions::default())
            .await
            .ok()
            .map(|s| s.store_id().to_owned())
    })
}

/// Container ids labelled `iterion.io/store=<id>`, in any state.
pub fn containers_of(store_id: &str) -> Vec<String> {
    let out = StdCommand::new("docker")
        .args(["ps", "-aq", "--filter"])
        .arg(format!("label=iterion.io/store={store_id}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect()
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(id) = self.store_id() {
            for c in containers_of(&id) {
                let _ = StdCommand::new("docker").args(["rm", "-f", &c]).output();
            }
        }
    }
}

/// The event types, in order.
pub fn kinds(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(k, _)| k.as_str()).collect()
}

/// The first event of a type.
pub fn first<'a>(events: &'a [(String, Value)], kind: &str) -> Option<&'a Value> {
    events.iter().find(|(k, _)| k == kind).map(|(_, d)| d)
}

/// Skips (or, under ITERION_IT_DOCKER, fails) when no engine answers.
pub fn docker_or_skip(test: &str) -> bool {
    runtime()
        .block_on(iterion_test_support::docker_or_skip(test))
        .is_some()
}

pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

//! Devbox provisioning on the host, for a run with no sandbox (SANDBOX.md §15 "No sandbox").
//!
//! The `devbox` here is a STAND-IN, not devbox: a shell script placed first on the `PATH` the
//! engine is given (through `Engine::with_environment`, not the process env) that records its
//! invocations and, like `devbox install -c DIR`, creates `DIR/devbox.lock` and a profile bin dir
//! `DIR/.devbox/nix/profile/default/bin` holding a `hello-devbox` executable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use iterion_engine::Engine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

const BIN: &str = ".devbox/nix/profile/default/bin";

const SRC: &str = "tool t:\n  command: `hello-devbox > hello.txt; printf '%s' \"$PATH\" > path.txt`\n\nworkflow w:\n  entry: t\n  sandbox: none\n  t -> done\n";

/// The summary, the events as `(type, data)` and the run-log lines of one run.
type Ran = (
    iterion_engine::RunSummary,
    Vec<(String, Value)>,
    Vec<String>,
);

/// A workspace with a repo `devbox.json` and a bundle dir `bot/` with its own (the workflow file
/// is `bot/flow.iter`), and a dir for the stand-in `devbox` (empty when there is none).
struct Fixture {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
    tools: tempfile::TempDir,
}

impl Fixture {
    /// With a stand-in that exits with `standin_exit`, or with no `devbox` at all.
    fn new(standin_exit: Option<i32>) -> Fixture {
        let fixture = Fixture {
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
            tools: tempfile::tempdir().unwrap(),
        };
        let ws = fixture.ws.path();
        std::fs::write(ws.join("devbox.json"), "{\"packages\": []}").unwrap();
        std::fs::create_dir(ws.join("bot")).unwrap();
        std::fs::write(ws.join("bot/devbox.json"), "{\"packages\": [\"jq\"]}").unwrap();
        if let Some(code) = standin_exit {
            let script = format!(
                "#!/bin/sh\necho \"devbox $* prompt=$DEVBOX_NO_PROMPT\" >> {calls}\nif [ {code} -ne 0 ]; then echo boom >&2; exit {code}; fi\nmkdir -p \"$3/{BIN}\"\ntouch \"$3/devbox.lock\"\nprintf '#!/bin/sh\\necho hello from devbox\\n' > \"$3/{BIN}/hello-devbox\"\nchmod +x \"$3/{BIN}/hello-devbox\"\n",
                calls = fixture.calls().display(),
            );
            let standin = fixture.tools.path().join("devbox");
            std::fs::write(&standin, script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&standin, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        fixture
    }

    fn calls(&self) -> PathBuf {
        self.home.path().join("devbox-calls.log")
    }

    fn ws(&self) -> PathBuf {
        self.ws.path().canonicalize().unwrap()
    }

    /// The `PATH` the engine is given: the stand-in dir, then the system dirs.
    fn host_path(&self) -> String {
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.tools.path().display()
        )
    }

    /// Runs [`SRC`].
    async fn run(&self, repo_devbox: Option<&'static str>) -> Ran {
        self.run_src(SRC, repo_devbox).await
    }

    /// Runs `src` as `bot/flow.iter`, the host env being [`Fixture::host_path`] and
    /// `ITERION_REPO_DEVBOX=repo_devbox`.
    async fn run_src(&self, src: &str, repo_devbox: Option<&'static str>) -> Ran {
        self.run_with(src, repo_devbox, None).await
    }

    /// [`Fixture::run_src`] with the engine's driver registry set (its default otherwise).
    async fn run_with(
        &self,
        src: &str,
        repo_devbox: Option<&'static str>,
        registry: Option<iterion_sandbox::Registry>,
    ) -> Ran {
        std::fs::write(self.ws.path().join("bot/flow.iter"), src).unwrap();
        let path = self.host_path();
        let store = sqlite_store(self.home.path()).await;
        let mut engine = Engine::new(Arc::clone(&store), self.home.path());
        if let Some(registry) = registry {
            engine = engine.with_registry(registry);
        }
        let mut env = iterion_vocab::Environment::from_pairs([("PATH", path)]);
        if let Some(value) = repo_devbox {
            env = env.with("ITERION_REPO_DEVBOX", value);
        }
        let engine = engine.with_environment(env);
        let request = run_request(workflow(src), &self.ws(), "bot/flow.iter");
        let summary = run_to_end(&engine, request).await;
        let events = events_of(store.as_ref(), &summary.run_id).await;
        let logs = store
            .logs(&iterion_store::RunId::parse(&summary.run_id).unwrap(), 0)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.line)
            .collect();
        (summary, events, logs)
    }
}

fn provisioned(events: &[(String, Value)]) -> Vec<&Value> {
    events
        .iter()
        .filter(|(kind, _)| kind == "sandbox_devbox_provisioned")
        .map(|(_, data)| data)
        .collect()
}

fn bot_stage(run_id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("iterion-devbox-{run_id}/bot"))
}

fn bin(dir: &Path) -> String {
    dir.join(BIN).display().to_string()
}

#[tokio::test]
async fn devbox_host_stand_in_installs_repo_then_bot_and_their_bins_lead_the_path() {
    let fx = Fixture::new(Some(0));
    let (summary, events, _) = fx.run(None).await;
    assert_eq!(
        summary.failure_code, None,
        "{:?}\n{events:#?}",
        summary.message
    );
    let ws = fx.ws();
    let stage = bot_stage(&summary.run_id);
    assert_eq!(
        std::fs::read_to_string(fx.calls()).unwrap(),
        format!(
            "devbox install -c {} prompt=1\ndevbox install -c {} prompt=1\n",
            ws.display(),
            stage.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("hello.txt")).unwrap(),
        "hello from devbox\n"
    );
    let path = std::fs::read_to_string(ws.join("path.txt")).unwrap();
    let want_prefix = format!("{}:{}:", bin(&ws), bin(&stage));
    assert!(path.starts_with(&want_prefix), "{path}");
    // The repository had no devbox.lock: the one install created is gone.
    assert!(!ws.join("devbox.lock").exists());
    // The per-run stage dir is removed at the end.
    assert!(!stage.exists());
    let base = fx.host_path();
    assert_eq!(
        provisioned(&events),
        vec![&json!({
            "target": "host",
            "sources": ["repo", "bot"],
            "configs": [
                ws.join("devbox.json").display().to_string(),
                ws.join("bot/devbox.json").display().to_string(),
            ],
            "bin_dirs": [bin(&ws), bin(&stage)],
            "path": format!("{want_prefix}{base}"),
            "skipped_sources": [],
            "skipped_reasons": [],
            "errors": [],
            "lock_kept": false,
        })]
    );
    // Before the first node.
    let first_node = events
        .iter()
        .position(|(k, _)| k == "node_started")
        .unwrap();
    let devbox = events
        .iter()
        .position(|(k, _)| k == "sandbox_devbox_provisioned")
        .unwrap();
    assert!(devbox < first_node, "{events:#?}");
}

#[tokio::test]
async fn devbox_host_repo_off_is_reported_as_skipped_and_only_the_bot_installs() {
    let fx = Fixture::new(Some(0));
    let (summary, events, _) = fx.run(Some("off")).await;
    assert_eq!(
        summary.failure_code, None,
        "{:?}\n{events:#?}",
        summary.message
    );
    let stage = bot_stage(&summary.run_id);
    assert_eq!(
        std::fs::read_to_string(fx.calls()).unwrap(),
        format!("devbox install -c {} prompt=1\n", stage.display())
    );
    let event = provisioned(&events)[0];
    assert_eq!(event["sources"], json!(["bot"]));
    assert_eq!(event["skipped_sources"], json!(["repo"]));
    assert_eq!(event["skipped_reasons"], json!(["ITERION_REPO_DEVBOX=off"]));
}

#[tokio::test]
async fn devbox_host_a_failing_stand_in_is_reported_and_the_run_goes_on() {
    let fx = Fixture::new(Some(7));
    // The failed install made no hello-devbox: the node does not call it.
    let (summary, events, logs) = fx
        .run_src(&SRC.replace("hello-devbox > hello.txt; ", ""), None)
        .await;
    assert_eq!(
        summary.failure_code, None,
        "{:?}\n{events:#?}",
        summary.message
    );
    let failed = |config: PathBuf| {
        format!(
            "iterion: devbox install failed for {}: exit status 7: boom",
            config.display()
        )
    };
    let want = vec![
        failed(fx.ws().join("devbox.json")),
        failed(bot_stage(&summary.run_id).join("devbox.json")),
    ];
    assert_eq!(provisioned(&events)[0]["errors"], json!(want));
    for error in &want {
        assert!(logs.iter().any(|l| l.ends_with(error)), "{logs:#?}");
    }
}

#[tokio::test]
async fn devbox_host_without_devbox_on_path_logs_the_line_and_the_run_finishes() {
    // No stand-in: the PATH the engine is given has no devbox.
    let fx = Fixture::new(None);
    let (summary, events, logs) = fx
        .run_src(&SRC.replace("hello-devbox > hello.txt; ", ""), None)
        .await;
    assert_eq!(
        summary.failure_code, None,
        "{:?}\n{events:#?}",
        summary.message
    );
    assert!(
        logs.iter()
            .any(|l| l.ends_with("iterion: devbox is not on PATH; devbox.json not installed")),
        "{logs:#?}"
    );
    assert!(!fx.calls().exists());
    assert_eq!(provisioned(&events)[0]["errors"], json!([]));
}

/// A degraded `auto` (no container runtime: only the noop driver) runs on the host, and is
/// provisioned there like an opted-out run (§15 "No sandbox (degraded or opted out)").
#[tokio::test]
async fn devbox_host_a_degraded_auto_run_is_provisioned_on_the_host() {
    let fixture = Fixture::new(Some(0));
    let src = SRC.replace("sandbox: none", "sandbox: auto");
    let (summary, events, _) = fixture
        .run_with(&src, None, Some(iterion_sandbox::Registry::with_noop()))
        .await;
    assert_eq!(
        summary.status,
        iterion_store::RunStatus::Finished,
        "{:?}",
        summary.message
    );
    assert!(
        events.iter().any(|(kind, _)| kind == "sandbox_skipped"),
        "the run degraded: {events:#?}"
    );
    let provisioned = provisioned(&events);
    assert_eq!(provisioned.len(), 1, "{events:#?}");
    assert_eq!(provisioned[0]["target"], "host");
    let hello = std::fs::read_to_string(fixture.ws().join("hello.txt")).unwrap();
    assert_eq!(hello.trim(), "hello from devbox");
}

/// Issue 15 item 12: a repository `devbox.json` that is a symlink to `/dev/stdin` (or a FIFO)
/// used to hang setup forever. It is declined at once, naming the file and the rule, and the run
/// goes on with the bot's config only.
#[tokio::test]
async fn devbox_host_a_repo_devbox_json_that_is_stdin_or_a_fifo_is_declined_at_once() {
    for hostile in ["stdin", "fifo"] {
        let fx = Fixture::new(Some(0));
        let ws = fx.ws();
        std::fs::remove_file(ws.join("devbox.json")).unwrap();
        match hostile {
            "stdin" => std::os::unix::fs::symlink("/dev/stdin", ws.join("devbox.json")).unwrap(),
            _ => assert!(
                std::process::Command::new("mkfifo")
                    .arg(ws.join("devbox.json"))
                    .status()
                    .unwrap()
                    .success()
            ),
        }
        let (summary, events, _) =
            tokio::time::timeout(std::time::Duration::from_secs(30), fx.run(None))
                .await
                .unwrap_or_else(|_| panic!("{hostile}: setup hung on the repo devbox.json"));
        assert_eq!(
            summary.failure_code, None,
            "{hostile}: {:?}",
            summary.message
        );
        let event = provisioned(&events);
        let reasons = event[0]["skipped_reasons"].to_string();
        assert_eq!(event[0]["sources"], json!(["bot"]), "{hostile}: {event:#?}");
        assert!(
            reasons.contains("devbox.json")
                && (reasons.contains("outside the repository") || reasons.contains("fifo")),
            "{hostile}: {reasons}"
        );
    }
}

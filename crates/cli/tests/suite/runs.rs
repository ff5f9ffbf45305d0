//! The operator's view of runs at the binary level (issue 19): ids by prefix or `last`, `ps`,
//! `rm`, `prune`, a closed stdout, `--json` on refusal, errors said once, the config file and
//! shell completions.
use std::process::Stdio;
use std::time::Duration;

use iterion_store::{NewEvent, NewRun, RunStatus, SqliteOptions, SqliteStore, Store};
use pretty_assertions::assert_eq;
use serde_json::Value;

use super::support::{Env, stderr_of};

const HELLO: &str = "tool a:\n  command: `echo ok`\n\nworkflow w:\n  entry: a\n  a -> done\n";

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two finished host runs, oldest first.
fn two_runs(env: &Env) -> (String, String) {
    let file = env.write("w.iter", HELLO);
    for _ in 0..2 {
        env.cmd()
            .args(["run", "--sandbox", "none"])
            .arg(&file)
            .assert()
            .code(0);
    }
    let runs = env.runs();
    assert_eq!(runs.len(), 2);
    (runs[1].id.to_string(), runs[0].id.to_string())
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

async fn store(env: &Env) -> SqliteStore {
    SqliteStore::open(env.db(), SqliteOptions::default())
        .await
        .unwrap()
}

#[test]
fn a_prefix_or_last_names_a_run_in_every_command_and_an_ambiguous_one_lists_the_candidates() {
    let env = Env::new();
    let (older, newer) = two_runs(&env);
    let json_of = |args: &[&str]| -> Value {
        let out = env.cmd().args(args).assert().code(0).get_output().clone();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(
        json_of(&["inspect", "last", "--json"])["id"],
        newer.as_str()
    );
    // The shortest prefix that tells them apart, in capitals: still that run.
    let common = older
        .chars()
        .zip(newer.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let short = older[..=common].to_ascii_uppercase();
    assert_eq!(
        json_of(&["inspect", &short, "--json"])["id"],
        older.as_str()
    );
    let events = env
        .cmd()
        .args(["events", &short, "--json"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let first: Value = serde_json::from_str(stdout_of(&events).lines().next().unwrap()).unwrap();
    assert_eq!(first["run_id"], older.as_str());

    // Ambiguous: exit 1, both candidates named, nothing on stdout.
    let ambiguous = env
        .cmd()
        .args(["events", &older[..common]])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let err = stderr_of(&ambiguous);
    assert!(
        err.contains("is ambiguous") && err.contains(&older) && err.contains(&newer),
        "{err}"
    );
    assert_eq!(stdout_of(&ambiguous), "");
    // Text that cannot name a run is bad input; a prefix nobody has fails.
    env.cmd().args(["inspect", "../etc"]).assert().code(2);
    env.cmd().args(["inspect", "%"]).assert().code(2);
    let none = env
        .cmd()
        .args(["resume", "fff"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(
        stderr_of(&none).contains("no run matches \"fff\""),
        "{}",
        stderr_of(&none)
    );
}

#[test]
fn ps_lists_what_is_not_over_and_all_lists_every_run() {
    let env = Env::new();
    let (older, newer) = two_runs(&env);
    let out = env.cmd().arg("ps").assert().code(0).get_output().clone();
    assert!(stdout_of(&out).contains("no run is running, paused or queued"));
    let running = block_on(async {
        let store = store(&env).await;
        store
            .create_run(
                NewRun::new("live", "sha256:x", "live.iter")
                    .lease("host:1", Duration::from_secs(300)),
            )
            .await
            .unwrap()
            .id
            .to_string()
    });
    let out = env
        .cmd()
        .args(["ps", "--json"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![running.as_str()]);
    assert_eq!(rows[0]["status"], "running");
    let out = env
        .cmd()
        .args(["ps", "--all", "--json"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![running.as_str(), newer.as_str(), older.as_str()]);
}

#[test]
fn rm_removes_a_finished_run_whole_and_refuses_a_running_one_leaving_it_untouched() {
    let env = Env::new();
    let (older, newer) = two_runs(&env);
    let dir = env.home.path().join("runs").join(&older).join("files");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("out.txt"), "x").unwrap();
    // A link a container could have planted: removed, never followed.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), "precious").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.join("escape")).unwrap();

    // What an interrupted removal left parked: swept once its run is gone, kept while the run
    // is still in the store (another removal is under way).
    let gone = env
        .home
        .path()
        .join("runs")
        .join(format!(".removing-{}", iterion_store::RunId::generate()));
    let in_progress = env
        .home
        .path()
        .join("runs")
        .join(format!(".removing-{newer}"));
    std::fs::create_dir_all(&gone).unwrap();
    std::fs::create_dir_all(&in_progress).unwrap();
    let out = env
        .cmd()
        .args(["rm", &older])
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert!(!gone.exists(), "a leftover of a finished removal stayed");
    assert!(in_progress.exists(), "a removal in progress lost its dir");
    assert_eq!(stdout_of(&out), format!("removed {older}\n"));
    assert!(!env.home.path().join("runs").join(&older).exists());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("keep")).unwrap(),
        "precious"
    );
    let left: Vec<String> = env.runs().iter().map(|r| r.id.to_string()).collect();
    assert_eq!(left, vec![newer.clone()]);
    block_on(async {
        let store = store(&env).await;
        let id = iterion_store::RunId::parse(&older).unwrap();
        assert_eq!(store.events(&id, 0).await.unwrap().len(), 0);
    });

    // A running (leased) run: refused, its record, events and dir untouched.
    let running = block_on(async {
        let store = store(&env).await;
        let run = store
            .create_run(
                NewRun::new("live", "sha256:x", "live.iter")
                    .lease("host:1", Duration::from_secs(300)),
            )
            .await
            .unwrap();
        store
            .append_event(&run.id, NewEvent::new("run_started", serde_json::json!({})))
            .await
            .unwrap();
        run.id.to_string()
    });
    let live_dir = env.home.path().join("runs").join(&running);
    std::fs::create_dir_all(&live_dir).unwrap();
    let out = env
        .cmd()
        .args(["rm", &running, "--json"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["removed"], serde_json::json!([]));
    assert_eq!(doc["refused"][0]["code"], "STORE_RUN_ACTIVE");
    assert!(live_dir.exists());
    let run = env
        .runs()
        .into_iter()
        .find(|r| r.id.as_str() == running)
        .unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(env.events(&run).len(), 1);
}

#[test]
fn prune_dry_run_lists_and_removes_nothing_then_prune_removes_the_old_runs() {
    let env = Env::new();
    let (older, newer) = two_runs(&env);
    // Nothing is older than a week.
    let out = env
        .cmd()
        .args(["prune", "--json"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"], serde_json::json!([]));
    assert_eq!(env.runs().len(), 2);

    std::thread::sleep(Duration::from_millis(20));
    let out = env
        .cmd()
        .args(["prune", "--older-than", "0s", "--dry-run", "--json"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["dry_run"], true);
    assert_eq!(doc["runs"], serde_json::json!([older, newer]));
    assert_eq!(env.runs().len(), 2, "a dry run removed runs");
    let human = env
        .cmd()
        .args(["prune", "--older-than", "0s", "--dry-run"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert!(stdout_of(&human).contains(&format!("would remove run {older}")));
    assert!(stdout_of(&human).contains("(dry run: nothing was removed)"));
    assert_eq!(env.runs().len(), 2);

    let out = env
        .cmd()
        .args(["prune", "--older-than", "0s", "--json"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["dry_run"], false);
    assert_eq!(doc["runs"], serde_json::json!([older, newer]));
    assert_eq!(env.runs().len(), 0);
    env.cmd()
        .args(["prune", "--older-than", "7x"])
        .assert()
        .code(2);
}

/// `| head`: the reader goes away; the command exits 0 and says nothing.
#[test]
fn a_closed_stdout_exits_zero_quietly_for_every_command_that_prints() {
    let env = Env::new();
    let (older, _) = two_runs(&env);
    let file = env.write("w.iter", HELLO);
    let file = file.to_str().unwrap();
    for args in [
        vec!["events", older.as_str()],
        vec!["events", older.as_str(), "--json"],
        vec!["inspect"],
        vec!["inspect", "last"],
        vec!["ps", "--all"],
        vec!["validate", file],
        vec!["validate", "--json", file],
        vec!["completions", "bash"],
        vec!["config", "show"],
        vec!["--help"],
        vec!["run", "--help"],
    ] {
        let mut child = env
            .std_cmd()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before the command writes a byte.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            (out.status.code(), stderr_of(&out)),
            (Some(0), String::new()),
            "{args:?}"
        );
    }
}

#[test]
fn run_json_prints_an_object_on_refusal_and_an_error_says_each_cause_once() {
    let env = Env::new();
    let out = env
        .cmd()
        .args(["run", "--json", "missing.iter"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["run_id"], Value::Null);
    assert_eq!(doc["exit_code"], 2);
    assert!(
        doc["failure_code"].as_str().unwrap().starts_with("DSL_")
            || doc["failure_code"] != "FAILED",
        "{doc}"
    );
    let out = env
        .cmd()
        .args(["resume", "--json", "fff"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["failure_code"], "STORE_NO_RUN_MATCHES");

    // A store that cannot be created: the io error is said once, not twice.
    let out = env
        .cmd()
        .env("ITERION_HOME", "/dev/null/home")
        .args(["ps"])
        .assert()
        .failure()
        .get_output()
        .clone();
    let err = stderr_of(&out);
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.matches("(os error 20)").count(), 1, "{err}");
}

#[test]
fn help_gives_host_state_its_own_text_and_lists_the_exit_codes() {
    let env = Env::new();
    let out = env
        .cmd()
        .args(["run", "--help"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let help = stdout_of(&out);
    let host_state = help
        .split("--sandbox-host-state")
        .nth(1)
        .unwrap()
        .split("--sandbox-default-image")
        .next()
        .unwrap();
    assert!(
        host_state.contains("host caches and tool state"),
        "{host_state}"
    );
    assert!(!host_state.contains("degrades visibly"), "{host_state}");
    for line in ["0  success", "1  failed", "2  bad input", "3  paused"] {
        assert!(help.contains(line), "{line}: {help}");
    }
}

#[test]
fn the_config_file_sits_below_the_environment_and_a_bad_one_names_the_file_and_the_key() {
    let env = Env::new();
    let config = env.home.path().join("config.toml");
    std::fs::write(
        &config,
        "sandbox = \"none\"\ndefault_image = \"ghcr.io/acme/dev:1\"\n",
    )
    .unwrap();
    let out = env
        .cmd()
        .env("ITERION_SANDBOX_DEFAULT_IMAGE", "from-env:1")
        .args(["config", "show", "--json"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = |key: &str| {
        doc["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .cloned()
            .unwrap()
    };
    assert_eq!(doc["file"], config.to_str().unwrap());
    assert_eq!(row("sandbox")["source"], "config file");
    assert_eq!(row("sandbox")["value"], "none");
    assert_eq!(row("default_image")["value"], "from-env:1");
    assert_eq!(
        row("default_image")["source"],
        "env ITERION_SANDBOX_DEFAULT_IMAGE"
    );
    assert_eq!(row("host_state")["source"], "default");

    // The file's `sandbox = "none"` is the global default a run without a sandbox: block takes:
    // no sandbox_skipped (an auto that degraded), no container asked for.
    let file = env.write("w.iter", HELLO);
    env.cmd()
        .env("DOCKER_HOST", super::support::DEAD_DOCKER)
        .env("CONTAINER_HOST", super::support::DEAD_PODMAN)
        .arg("run")
        .arg(&file)
        .assert()
        .code(0);
    let run = env.only_run();
    let kinds: Vec<String> = env.events(&run).into_iter().map(|(k, _)| k).collect();
    assert!(
        !kinds.iter().any(|k| k.starts_with("sandbox_")),
        "{kinds:?}"
    );

    std::fs::write(&config, "sandbox = \"inline\"\n").unwrap();
    let out = env.cmd().arg("ps").assert().code(2).get_output().clone();
    let err = stderr_of(&out);
    assert!(
        err.contains(config.to_str().unwrap()) && err.contains("`sandbox` must be"),
        "{err}"
    );
}

#[test]
fn completions_are_generated_for_bash_zsh_and_fish() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = env
            .cmd()
            .args(["completions", shell])
            .assert()
            .code(0)
            .get_output()
            .clone();
        let script = stdout_of(&out);
        assert!(
            script.contains("prune") && script.contains("older-than"),
            "{shell}: {script}"
        );
    }
    env.cmd().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn a_worktree_auto_run_prints_the_branch_its_changes_landed_on() {
    let env = Env::new();
    let file = env.write(
        "wt.iter",
        "tool edit:\n  command: `echo changed > a.txt; echo ok`\n\nworkflow wt:\n  entry: edit\n  worktree: auto\n  edit -> done\n",
    );
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(env.ws.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["add", "wt.iter"]);
    git(&["commit", "-qm", "init"]);
    let out = env
        .cmd()
        .args(["run", "--sandbox", "none"])
        .arg(&file)
        .assert()
        .code(0)
        .get_output()
        .clone();
    let run = env.only_run();
    assert!(
        stdout_of(&out).contains(&format!(
            "changes committed on branch iterion/wt/{}",
            run.id
        )),
        "{}",
        stdout_of(&out)
    );
}

fn docker(args: &[&str]) -> String {
    let out = std::process::Command::new("docker")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "docker {args:?}: {}", stderr_of(&out));
    stdout_of(&out).trim().to_owned()
}

fn docker_exists(kind: &str, name: &str) -> bool {
    std::process::Command::new("docker")
        .args([kind, "inspect", name])
        .output()
        .unwrap()
        .status
        .success()
}

/// An image committed from the busybox test image with `labels`, tagged `tag`; its id.
fn labelled_image(tag: &str, labels: &[(&str, &str)]) -> String {
    let container = docker(&["create", iterion_test_support::BUSYBOX_IMAGE, "true"]);
    let mut args = vec!["commit".to_owned()];
    for (k, v) in labels {
        args.push("--change".to_owned());
        args.push(format!("LABEL {k}={v}"));
    }
    args.push(container.clone());
    args.push(tag.to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let id = docker(&args);
    docker(&["rm", &container]);
    id
}

/// Removes what a test made, whatever happened.
struct Leftovers(Vec<(&'static str, String)>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for (kind, name) in &self.0 {
            let _ = std::process::Command::new("docker")
                .args([kind, "rm", "-f", name])
                .output();
        }
    }
}

#[test]
fn docker_prune_dry_run_lists_a_built_image_and_its_nix_volume_and_removes_nothing_then_prune_removes_them()
 {
    if !super::support::docker_or_skip("cli::runs::docker_prune") {
        return;
    }
    let env = Env::new();
    let (older, newer) = two_runs(&env);
    let store = env.store_id().unwrap();
    let built_tag = format!("iterion-sandbox-build:{older}");
    let built = labelled_image(
        &built_tag,
        &[
            ("iterion.io/managed", "true"),
            ("iterion.io/store", &store),
            ("iterion.io/run-id", &older),
        ],
    );
    let hex = built.trim_start_matches("sha256:")[..12].to_owned();
    let volume = format!("iterion-nix-{hex}");
    let other_store_tag = format!("iterion-sandbox-build:{newer}-elsewhere");
    let elsewhere = labelled_image(
        &other_store_tag,
        &[
            ("iterion.io/managed", "true"),
            ("iterion.io/store", "another-store"),
            ("iterion.io/run-id", &older),
        ],
    );
    let _leftovers = Leftovers(vec![
        ("image", built_tag.clone()),
        ("image", other_store_tag.clone()),
        ("volume", volume.clone()),
    ]);
    docker(&[
        "volume",
        "create",
        "--label",
        "iterion.io/managed=true",
        "--label",
        &format!("iterion.io/store={store}"),
        "--label",
        "iterion.io/purpose=nix-store",
        "--label",
        &format!("iterion.io/image={hex}"),
        &volume,
    ]);

    let prune = |extra: &[&str]| -> Value {
        let out = env
            .cmd()
            .args(["prune", "--older-than", "0s", "--json"])
            .args(extra)
            .assert()
            .code(0)
            .get_output()
            .clone();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let dry = prune(&["--dry-run"]);
    assert!(
        dry["images"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i == built.as_str()),
        "{dry}"
    );
    assert!(
        !dry["images"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i == elsewhere.as_str()),
        "{dry}"
    );
    assert!(
        dry["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == volume.as_str()),
        "{dry}"
    );
    assert_eq!(dry["runs"], serde_json::json!([older, newer]));
    // Nothing moved.
    assert!(docker_exists("image", &built_tag) && docker_exists("volume", &volume));
    assert_eq!(env.runs().len(), 2);

    let done = prune(&[]);
    assert!(
        done["images"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i == built.as_str()),
        "{done}"
    );
    assert!(
        done["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == volume.as_str()),
        "{done}"
    );
    assert!(
        !docker_exists("image", &built_tag),
        "the built image is still there"
    );
    assert!(
        !docker_exists("volume", &volume),
        "the nix volume is still there"
    );
    // Another store's image is never ours to remove.
    assert!(docker_exists("image", &other_store_tag));
    assert_eq!(env.runs().len(), 0);
}

#[test]
fn resume_json_of_a_finished_run_names_the_refusal_code_and_the_run() {
    let env = Env::new();
    let (_, newer) = two_runs(&env);
    let out = env
        .cmd()
        .args(["resume", "--json", "last"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&doc["run_id"], &doc["failure_code"], &doc["exit_code"]),
        (
            &Value::from(newer.as_str()),
            &Value::from("RESUME_INVALID"),
            &Value::from(1)
        )
    );
    assert!(
        stderr_of(&out).starts_with("error: resume refused [RESUME_INVALID]: run "),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn an_unset_base_url_says_it_is_not_set_and_names_the_variable() {
    let env = Env::new();
    let file = env.write(
        "agent.iter",
        "prompt sys:\n  You answer.\n\nprompt usr:\n  Say hi.\n\nagent a:\n  model: \"openai_compatible/m\"\n  system: sys\n  user: usr\n\nworkflow w:\n  entry: a\n  a -> done\n",
    );
    let out = env
        .cmd()
        .env("ITERION_OPENAI_COMPATIBLE_API_KEY", "k")
        .env_remove("ITERION_OPENAI_COMPATIBLE_BASE_URL")
        .args(["run", "--sandbox", "none"])
        .arg(&file)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = stderr_of(&out);
    assert!(
        err.contains("ITERION_OPENAI_COMPATIBLE_BASE_URL is not set"),
        "{err}"
    );
    assert!(!err.contains("must be an http"), "{err}");
}

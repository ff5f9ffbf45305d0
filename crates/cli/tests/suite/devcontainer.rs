//! `sandbox: auto` over a repository's devcontainer, for real (SANDBOX.md §7, §8): the fixture
//! corpus of `crates/sandbox/tests/fixtures/devcontainer/` copied into a git workspace (its image
//! pointed at the debian test image), run, and checked from inside the container by a probe node
//! that prints its env, user, mounts and working directory as JSON. Hostile files are refused
//! with `SANDBOX_SETUP_FAILED` and leave no container.
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use serde_json::{Value, json};

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

/// Prints `{user, pwd, mounts, files, env}` from inside the sandbox.
const PROBE_TOOL: &str = "tool probe:\n  command: `jq -cn --arg user \"$(id -un):$(id -u):$(id -g)\" --arg pwd \"$PWD\" --arg mounts \"$(awk '{print $5}' /proc/self/mountinfo)\" --arg files \"$(ls -d /tmp/pc-a /tmp/pc-b /tmp/zeta '/opt/my env' /variant 2>/dev/null)\" '{user:$user, pwd:$pwd, mounts:($mounts|split(\"\\n\")), files:($files|split(\"\\n\")|map(select(. != \"\"))), env: env}'`\n\n";

fn probe_workflow(block: &str) -> String {
    format!("{PROBE_TOOL}workflow probe:\n  entry: probe\n{block}  probe -> done\n")
}

fn fixture(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox/tests/fixtures/devcontainer");
    std::fs::read_to_string(dir.join(name)).unwrap()
}

/// A workspace whose `.devcontainer/devcontainer.json` is the fixture, with `alpine:3.20` (and
/// each `(from, to)`) replaced so that the container is the debian test image.
fn workspace_with(name: &str, replace: &[(&str, &str)]) -> Env {
    let env = Env::new();
    let mut text = fixture(name).replace("alpine:3.20", IMAGE);
    for (from, to) in replace {
        assert!(text.contains(from), "{name} has no {from:?}");
        text = text.replace(from, to);
    }
    std::fs::create_dir_all(env.path(".devcontainer")).unwrap();
    env.write(".devcontainer/devcontainer.json", &text);
    env
}

/// Runs the probe workflow; returns the exit code, the run's events and the probe's output.
fn run_probe(env: &Env, block: &str, extra: &[&str]) -> (i32, Vec<(String, Value)>, Value) {
    env.write("probe.iter", &probe_workflow(block));
    let out = env
        .cmd()
        .args([
            "run",
            "probe.iter",
            "--json",
            "--sandbox-default-image",
            IMAGE,
        ])
        .args(extra)
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let run = env.only_run();
    let events = env.events(&run);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        env.containers(),
        Vec::<String>::new(),
        "a container was left"
    );
    (
        code,
        events,
        summary.get("output").cloned().unwrap_or(Value::Null),
    )
}

fn ws_of(env: &Env) -> PathBuf {
    std::fs::canonicalize(env.ws.path()).unwrap()
}

fn devcontainer_label(env: &Env) -> String {
    format!(
        "global sandbox default ({}/.devcontainer/devcontainer.json)",
        env.ws.path().display()
    )
}

fn has_mount(out: &Value, target: &str) -> bool {
    out["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m.as_str() == Some(target))
}

fn started(events: &[(String, Value)]) -> &Value {
    first(events, "sandbox_started").unwrap_or_else(|| panic!("{events:#?}"))
}

#[test]
fn docker_devcontainer_corpus_images_env_and_jsonc_run_for_real() {
    if !docker_or_skip("cli::devcontainer::corpus_images") {
        return;
    }
    // 01: the plain image; the workspace is bound at its host path (host_state auto).
    let env = workspace_with("01-image.json", &[]);
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(started(&events)["source"], json!(devcontainer_label(&env)));
    assert_eq!(started(&events)["image"], json!(IMAGE));
    assert_eq!(started(&events)["network_mode"], json!("allowlist"));
    assert_eq!(
        started(&events)["network_source"],
        json!("devcontainer default (iterion-default)")
    );
    assert_eq!(out["pwd"], json!(ws_of(&env).to_string_lossy()));
    assert!(has_mount(&out, &ws_of(&env).to_string_lossy()), "{out:#}");
    // The silent workflow over a devcontainer: network defaulted, announced before the start.
    let ks = kinds(&events);
    let defaulted = ks
        .iter()
        .position(|k| *k == "sandbox_network_defaulted")
        .unwrap();
    assert!(defaulted < ks.iter().position(|k| *k == "sandbox_started").unwrap());
    assert_eq!(
        first(&events, "sandbox_network_defaulted").unwrap(),
        &json!({"mode": "allowlist", "preset": "iterion-default", "source": devcontainer_label(&env), "run_id": env.only_run().id.as_str()})
    );

    // 02: comments and trailing commas; containerEnv; a named-volume mount.
    let env = workspace_with(
        "02-jsonc-quirks.jsonc",
        &[("mcr.microsoft.com/devcontainers/base:bookworm", IMAGE)],
    );
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(out["env"]["EDITOR"], json!("vi"));
    assert_eq!(out["env"]["TZ"], json!("UTC"));
    assert!(has_mount(&out, "/workspaces/app/node_modules"), "{out:#}");

    // 08: remoteEnv under containerEnv; the workflow's key wins; null unsets.
    let env = workspace_with("08-env-collision.json", &[]);
    let block = "  sandbox:\n    mode: auto\n    env:\n      WF_WINS: \"workflow\"\n";
    let (code, events, out) = run_probe(&env, block, &[]);
    assert_eq!(code, 0, "{events:#?}");
    let e = &out["env"];
    assert_eq!(
        (
            &e["SHARED"],
            &e["REMOTE_ONLY"],
            &e["CONTAINER_ONLY"],
            &e["WF_WINS"]
        ),
        (
            &json!("from-container"),
            &json!("r"),
            &json!("c"),
            &json!("workflow")
        )
    );
    assert_eq!(e.get("UNSET_ME"), None);
    assert_eq!(
        started(&events)["source"],
        json!(format!(
            "workflow sandbox: block ({}/.devcontainer/devcontainer.json)",
            env.ws.path().display()
        ))
    );

    // 09: ${localEnv:…} reads only allow-listed host variables.
    let env = workspace_with("09-local-env.json", &[]);
    env.write("probe.iter", &probe_workflow(""));
    let out = env
        .cmd()
        .env("AWS_SECRET_ACCESS_KEY", "host-secret")
        .env("GITHUB_TOKEN", "host-token")
        .env("HOME", "/tmp/iterion-fake-home")
        .args([
            "run",
            "probe.iter",
            "--json",
            "--sandbox-default-image",
            IMAGE,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &summary["output"]["env"];
    assert_eq!(e["HOST_HOME"], json!("/tmp/iterion-fake-home"));
    assert_eq!(e["STOLEN_AWS"], json!("x"));
    assert_eq!(e["STOLEN_GH"], json!(""));
    assert_eq!(
        e["LEFT_ALONE"],
        json!("${containerEnv:PATH}:${containerWorkspaceFolder}")
    );
    assert!(!summary.to_string().contains("host-secret"));
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_devcontainer_corpus_post_create_forms_users_and_mounts_run_for_real() {
    if !docker_or_skip("cli::devcontainer::corpus_post_create") {
        return;
    }
    // 03: a string postCreateCommand, trimmed.
    let env = workspace_with(
        "03-post-create-string.json",
        &[
            ("node:22", IMAGE),
            (
                "npm ci && npm run build",
                "touch /tmp/pc-a && touch /tmp/pc-b",
            ),
        ],
    );
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(started(&events)["has_post_create"], json!(true));
    assert_eq!(out["files"], json!(["/tmp/pc-a", "/tmp/pc-b"]));

    // 04: an array, POSIX-quoted (one argument with a space, one with a quote).
    let env = workspace_with(
        "04-post-create-array.json",
        &[
            ("python:3.12", IMAGE),
            (r#""pip", "install", "--prefix", "#, r#""touch", "#),
            ("it's", "/tmp/it's"),
        ],
    );
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(out["files"], json!(["/opt/my env"]));

    // 05: an object: sorted keys, each wrapped, joined with &&; blank entries dropped.
    let env = workspace_with(
        "05-post-create-object.jsonc",
        &[("rust:1", IMAGE), ("cargo fetch", "touch /tmp/zeta")],
    );
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(out["files"], json!(["/tmp/zeta"]));

    // 06: object mounts (volume, bind) and a relative string bind.
    let env = workspace_with("06-object-mounts.json", &[]);
    std::fs::create_dir_all(env.path("data")).unwrap();
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    for target in ["/usr/local/cargo/registry", "/data", "/data-ro"] {
        assert!(has_mount(&out, target), "{target}: {out:#}");
    }

    // 10: remoteUser beats containerUser; workspaceFolder with the basename.
    let env = workspace_with("10-users-workspace.json", &[("\"dev\"", "\"nobody\"")]);
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    assert!(
        out["user"].as_str().unwrap().starts_with("nobody:"),
        "{out:#}"
    );
    let base = env.ws.path().file_name().unwrap().to_string_lossy();
    assert_eq!(
        out["pwd"].as_str().unwrap().trim_end_matches('/'),
        format!("/workspaces/{base}")
    );

    // 11: a numeric containerUser.
    let env = workspace_with("11-container-user.json", &[]);
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    assert!(
        out["user"].as_str().unwrap().ends_with(":1000:1000"),
        "{out:#}"
    );

    // 12: ignored fields: runArgs listed in the run log, initializeCommand never run.
    let env = workspace_with("12-ignored-fields.jsonc", &[]);
    let (code, events, _) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    let logs = env.logs(&env.only_run());
    let line = |needle: &str| logs.iter().any(|(_, l)| l.contains(needle));
    assert!(line("runArgs ignored: --init"), "{logs:#?}");
    assert!(line("initializeCommand is never run"), "{logs:#?}");
}

#[test]
fn docker_devcontainer_denied_env_keys_are_stripped_with_one_event() {
    if !docker_or_skip("cli::devcontainer::denied_env") {
        return;
    }
    let env = workspace_with("13-denied-env.json", &[]);
    let (code, events, out) = run_probe(&env, "", &[]);
    assert_eq!(code, 0, "{events:#?}");
    let run = env.only_run();
    let denied: Vec<_> = events
        .iter()
        .filter(|(k, _)| k == "sandbox_env_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert_eq!(
        denied[0].1,
        json!({
            "keys": ["ANTHROPIC_BASE_URL", "GIT_CONFIG_KEY_0", "HTTPS_PROXY", "ITERION_X", "LD_PRELOAD", "PATH", "https_proxy"],
            "source": devcontainer_label(&env),
            "run_id": run.id.as_str(),
        })
    );
    let ks = kinds(&events);
    let at = |k: &str| ks.iter().position(|x| *x == k).unwrap();
    assert!(at("sandbox_env_denied") < at("sandbox_network_defaulted"));
    assert!(at("sandbox_network_defaulted") < at("sandbox_started"));
    let e = &out["env"];
    assert_eq!(e["KEPT"], json!("yes"));
    for key in ["LD_PRELOAD", "ANTHROPIC_BASE_URL", "ITERION_X"] {
        assert_eq!(e.get(key), None, "{key}");
    }
    assert!(!out.to_string().contains("attacker.example"), "{out:#}");
    assert!(!e["PATH"].as_str().unwrap().contains("/evil"));
    assert_ne!(e["GIT_CONFIG_KEY_0"], json!("core.sshCommand"));
}

#[test]
fn docker_unusable_devcontainers_fall_back_to_the_default_image_and_say_why() {
    if !docker_or_skip("cli::devcontainer::unusable") {
        return;
    }
    for name in [
        "14-relative-workspace-folder.json",
        "15-single-quotes.jsonc",
        "16-image-and-build.json",
        "17-build-without-dockerfile.json",
        "18-object-mount-unknown-key.json",
    ] {
        let env = workspace_with(name, &[]);
        let (code, events, _) = run_probe(&env, "", &[]);
        assert_eq!(code, 0, "{name}: {events:#?}");
        let source = started(&events)["source"].as_str().unwrap().to_owned();
        assert!(
            source.starts_with("global sandbox default (devcontainer unusable — ")
                && source.ends_with(&format!(" — default image: {IMAGE})")),
            "{name}: {source}"
        );
        assert_eq!(started(&events)["image"], json!(IMAGE), "{name}");
        assert_eq!(first(&events, "sandbox_network_defaulted"), None, "{name}");
    }
}

#[test]
fn docker_hostile_devcontainers_are_refused_and_leave_no_container() {
    if !docker_or_skip("cli::devcontainer::hostile") {
        return;
    }
    let fake_home = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(fake_home.path()).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "not a key").unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "not a secret").unwrap();
    for (name, needle) in [
        ("hostile-docker-socket.json", "/var/run/docker.sock"),
        ("hostile-ssh-typed.json", ".ssh"),
        ("hostile-ssh-untyped.json", ".ssh"),
        ("hostile-symlink-aws.json", "creds"),
        ("hostile-privileged.json", "--privileged"),
        ("hostile-cap-add-split.json", "--cap-add"),
        ("hostile-network-host-split.json", "--network"),
        ("hostile-run-args-volume.json", "-v"),
    ] {
        let env = workspace_with(name, &[]);
        std::os::unix::fs::symlink(home.join(".aws"), env.path("creds")).unwrap();
        env.write("probe.iter", &probe_workflow(""));
        let out = env
            .cmd()
            .env("HOME", &home)
            .args([
                "run",
                "probe.iter",
                "--json",
                "--sandbox-default-image",
                IMAGE,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr_of(&out));
        let run = env.only_run();
        assert_eq!(
            run.failure_code.as_deref(),
            Some("SANDBOX_SETUP_FAILED"),
            "{name}"
        );
        let message = run.failure_message.clone().unwrap_or_default();
        assert!(
            message.contains("devcontainer.json") && message.contains(needle),
            "{name}: {message}"
        );
        let events = env.events(&run);
        let ks = kinds(&events);
        assert_eq!(ks, ["run_started", "run_failed"], "{name}");
        assert_eq!(
            first(&events, "run_failed").unwrap()["code"],
            json!("SANDBOX_SETUP_FAILED")
        );
        assert_eq!(env.containers(), Vec::<String>::new(), "{name}");
    }
}

#[test]
fn docker_the_operator_overlay_overrides_the_repository_but_not_the_workflow() {
    if !docker_or_skip("cli::devcontainer::overlay") {
        return;
    }
    let env = workspace_with("08-env-collision.json", &[]);
    let file = env.home.path().join("overlay.env");
    std::fs::write(
        &file,
        "# operator\nFROM_FILE=f\nSHARED=file\n\nREMOTE_ONLY=file\n",
    )
    .unwrap();
    let block = "  sandbox:\n    mode: auto\n    env:\n      WF_WINS: \"workflow\"\n";
    env.write("probe.iter", &probe_workflow(block));
    let out = env
        .cmd()
        .env("ITERION_SANDBOX_ENV_FILE", &file)
        .args([
            "run",
            "probe.iter",
            "--json",
            "--sandbox-default-image",
            IMAGE,
        ])
        .args([
            "--sandbox-env",
            "SHARED=flag",
            "--sandbox-env",
            "WF_WINS=flag",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &summary["output"]["env"];
    assert_eq!(
        (
            &e["SHARED"],
            &e["REMOTE_ONLY"],
            &e["FROM_FILE"],
            &e["WF_WINS"]
        ),
        (
            &json!("flag"),
            &json!("file"),
            &json!("f"),
            &json!("workflow")
        )
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn a_malformed_operator_overlay_is_bad_input_and_no_run_exists() {
    let env = Env::new();
    env.write("probe.iter", &probe_workflow(""));
    let out = env
        .cmd()
        .args(["run", "probe.iter", "--sandbox-env", "1BAD=x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("1BAD"), "{}", stderr_of(&out));
    let file = env.home.path().join("bad.env");
    std::fs::write(&file, "OK=1\nnot a pair\n").unwrap();
    let out = env
        .cmd()
        .env("ITERION_SANDBOX_ENV_FILE", &file)
        .args(["run", "probe.iter"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("bad.env:2"), "{}", stderr_of(&out));
    assert_eq!(env.runs().len(), 0);
}

#[test]
fn docker_a_devcontainer_build_goes_through_the_driver_build_with_its_events() {
    if !docker_or_skip("cli::devcontainer::build") {
        return;
    }
    // 07: build.dockerfile relative to the file's dir, context "..", args expanded, target dropped.
    let env = workspace_with("07-build.jsonc", &[]);
    env.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {IMAGE}\nARG VARIANT\nRUN echo \"$VARIANT\" > /variant && useradd -m -u 1234 vscode\n"
        ),
    );
    // Issue 15 item 16: under the defaulted allowlist the build's egress would not be
    // policed, so `build:` is refused naming the knob, before anything is built or started.
    let (code, events, _) = run_probe(&env, "", &[]);
    assert_eq!(code, 1, "{events:#?}");
    let failed = first(&events, "run_failed").unwrap();
    assert_eq!(failed["code"], json!("SANDBOX_SETUP_FAILED"), "{failed:#}");
    let message = failed["error"].as_str().unwrap_or_default().to_owned()
        + failed["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("build: is refused under network mode allowlist")
            && message.contains("pin an image:")
            && message.contains("mode: open"),
        "{failed:#}"
    );
    assert!(first(&events, "sandbox_build_started").is_none());
    assert!(first(&events, "sandbox_started").is_none());
    let env = workspace_with("07-build.jsonc", &[]);
    env.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {IMAGE}\nARG VARIANT\nRUN echo \"$VARIANT\" > /variant && useradd -m -u 1234 vscode\n"
        ),
    );
    let open = "  sandbox:\n    mode: auto\n    network:\n      mode: open\n";
    let (code, events, out) = run_probe(&env, open, &[]);
    assert_eq!(code, 0, "{events:#?}");
    let ks = kinds(&events);
    let at = |k: &str| ks.iter().position(|x| *x == k).unwrap();
    assert!(at("sandbox_build_started") < at("sandbox_build_finished"));
    assert!(at("sandbox_build_finished") < at("sandbox_started"));
    let build = first(&events, "sandbox_build_started").unwrap();
    assert_eq!(
        build,
        &json!({"driver": "docker", "dockerfile": ".devcontainer/Dockerfile", "context": ".", "network": "default"})
    );
    let target = first(&events, "sandbox_build_finished").unwrap()["target"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(started(&events)["image"], json!(target));
    assert_eq!(out["user"], json!("vscode:1234:1234"));
    assert_eq!(out["files"], json!(["/variant"]));

    // A failing build: sandbox_build_failed, the run fails, nothing is left.
    let env = workspace_with("07-build.jsonc", &[]);
    env.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {IMAGE}\nRUN echo broken-step && exit 3\n"),
    );
    let (code, events, _) = run_probe(&env, open, &[]);
    assert_eq!(code, 1, "{events:#?}");
    let failed = first(&events, "sandbox_build_failed").unwrap();
    assert_eq!(failed["driver"], json!("docker"));
    assert!(first(&events, "sandbox_started").is_none());
    assert_eq!(
        first(&events, "run_failed").unwrap()["code"],
        json!("SANDBOX_SETUP_FAILED")
    );
    // The build's output was streamed into the run's node output as it ran (issue 19).
    let built: Vec<String> = env
        .node_logs(&env.only_run())
        .into_iter()
        .filter(|c| c.node == "sandbox.build")
        .map(|c| c.text)
        .collect();
    assert!(
        built.iter().any(|t| t.contains("broken-step")),
        "{built:#?}"
    );
}

#[test]
fn docker_a_worktree_run_gets_the_repository_git_dir_bound_at_its_path() {
    if !docker_or_skip("cli::devcontainer::worktree_git") {
        return;
    }
    let env = Env::new();
    env.write("README", "x\n");
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(env.ws.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["add", "README"]);
    git(&["commit", "-q", "-m", "init"]);
    env.write(
        "wt.iter",
        "tool probe:\n  command: `jq -cn --arg gd \"$(git rev-parse --absolute-git-dir)\" --arg m \"$(awk '{print $5}' /proc/self/mountinfo)\" '{gd:$gd, mounts:($m|split(\"\\n\"))}'`\n\nworkflow wt:\n  entry: probe\n  worktree: auto\n  probe -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "wt.iter", "--json", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dot_git = ws_of(&env).join(".git");
    let dot_git = dot_git.to_string_lossy();
    assert!(has_mount(&summary["output"], &dot_git), "{summary:#}");
    assert!(
        summary["output"]["gd"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{dot_git}/worktrees/")),
        "{summary:#}"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_host_state_auto_binds_caches_and_none_binds_nothing() {
    if !docker_or_skip("cli::devcontainer::host_state") {
        return;
    }
    let fake_home = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(fake_home.path()).unwrap();
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    std::fs::write(home.join(".gitconfig"), "[user]\n\tname = Host User\n").unwrap();
    let probe = "tool probe:\n  command: `touch \"$HOME/.npm/from-container\" \"$HOME/written\" 2>/dev/null; echo '[core] pager = planted' >> \"$HOME/.gitconfig\" 2>/dev/null; jq -cn --arg s \"$(touch \"$PROJECT_SCRATCH_DIR/s\" && echo \"$PROJECT_SCRATCH_DIR\")\" --arg w \"$(ls \"$HOME/written\" 2>/dev/null)\" --arg m \"$(awk '{print $5}' /proc/self/mountinfo)\" '{home: env.HOME, scratch: $s, written: $w, mounts:($m|split(\"\\n\")), env: env}'`\n\nworkflow hs:\n  entry: probe\n  probe -> done\n";
    let run = |state: &str| {
        let env = Env::new();
        env.write("hs.iter", probe);
        let out = env
            .cmd()
            .env("HOME", &home)
            .args(["run", "hs.iter", "--json", "--sandbox-default-image", IMAGE])
            .args(["--sandbox-host-state", state])
            .output()
            .unwrap();
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let run = env.only_run();
        let events = env.events(&run);
        assert_eq!(env.containers(), Vec::<String>::new());
        // The scratch dir (§8.3) is keyed on the (root) run and writable in either state.
        let scratch = format!("/tmp/iterion-scratch/{}", run.id.as_str());
        assert_eq!(summary["output"]["scratch"], json!(scratch), "{summary:#}");
        let on_host = env.home.path().join("scratch").join(run.id.as_str());
        let host_file = on_host.join("s").exists();
        (
            out.status.code(),
            summary,
            events,
            (scratch, on_host, host_file),
        )
    };
    // auto: the cache is bound at its own path, HOME is the host's and writable, and a file the
    // container creates in the bound cache belongs to the host user.
    let (code, summary, events, (scratch, on_host, host_file)) = run("auto");
    assert_eq!(code, Some(0), "{events:#?}");
    // auto binds the scratch dir from ITERION_HOME/scratch/<run> and says so.
    assert!(
        host_file,
        "the scratch file is not on the host: {summary:#}"
    );
    assert!(has_mount(&summary["output"], &scratch), "{summary:#}");
    assert_eq!(
        first(&events, "sandbox_host_state_mounted").unwrap()["scratch"],
        json!(format!("{}:{scratch}", on_host.display()))
    );
    let npm = home.join(".npm");
    assert!(
        has_mount(&summary["output"], &npm.to_string_lossy()),
        "{summary:#}"
    );
    assert_eq!(summary["output"]["home"], json!(home.to_string_lossy()));
    assert_eq!(
        summary["output"]["written"],
        json!(home.join("written").to_string_lossy())
    );
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(npm.join("from-container")).unwrap().uid();
    let me = std::fs::metadata("/proc/self").unwrap().uid();
    assert_eq!(owner, me);
    let mounted = first(&events, "sandbox_host_state_mounted").unwrap();
    assert_eq!(mounted["enabled"], json!(true));
    assert_eq!(mounted["source"], json!("cli flag --sandbox-host-state"));
    assert!(
        mounted["mounts"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("{0}:{0}", npm.display()))),
        "{mounted:#}"
    );
    std::fs::remove_file(npm.join("from-container")).unwrap();
    // Issue 15 item 5: git config is bound read-only (the planted pager never reaches the
    // host) and the store (ITERION_HOME) is never bound.
    let gitconfig = home.join(".gitconfig");
    assert_eq!(
        std::fs::read_to_string(&gitconfig).unwrap(),
        "[user]\n\tname = Host User\n"
    );
    assert!(
        mounted["mounts"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("{0}:{0}:ro", gitconfig.display()))),
        "{mounted:#}"
    );
    let store = on_host
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let points = summary["output"]["mounts"].as_array().unwrap();
    assert!(
        !points
            .iter()
            .any(|m| m.as_str().unwrap_or_default().starts_with(&store)),
        "the store {store} is mounted: {points:#?}"
    );
    assert!(
        !mounted["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap_or_default().starts_with(&store)),
        "{mounted:#}"
    );

    // none: nothing of the host's home is mounted; the git identity is passed as four variables.
    let (code, summary, events, (scratch, _, host_file)) = run("none");
    assert_eq!(code, Some(0), "{events:#?}");
    // none: the scratch dir lives in the container only.
    assert!(!host_file);
    assert!(!has_mount(&summary["output"], &scratch), "{summary:#}");
    let out = &summary["output"];
    let home_shown = home.to_string_lossy().into_owned();
    assert!(
        !out["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().starts_with(&home_shown)),
        "{out:#}"
    );
    assert!(!npm.join("from-container").exists());
    for key in [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
    ] {
        assert!(out["env"][key].is_string(), "{key}: {out:#}");
    }
    assert_eq!(
        first(&events, "sandbox_host_state_mounted").unwrap(),
        &json!({"enabled": false, "source": "cli flag --sandbox-host-state"})
    );
}

/// host_state auto for a non-root operator (SANDBOX.md §8.1 steps 5 and 7), as a real non-root
/// process: iterion runs under `setpriv` as uid/gid 4242 with only the docker socket's group. The
/// container then runs as the host uid (`sandbox_user_remap`), HOME is a writable tmpfs owned by
/// it with `.cache` writable below, and a file the container creates in a bound cache belongs to
/// the host user.
#[test]
fn docker_host_state_auto_as_a_non_root_user_remaps_to_the_host_uid() {
    if !docker_or_skip("cli::devcontainer::host_state_non_root") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    const UID: u32 = 4242;
    let socket_gid = std::fs::metadata("/var/run/docker.sock").unwrap().gid();
    let env = Env::new();
    let fake_home = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(fake_home.path()).unwrap();
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    std::fs::create_dir_all(home.join(".cache/yarn")).unwrap();
    for dir in [
        &home,
        &env.home.path().to_owned(),
        &env.ws.path().to_owned(),
    ] {
        let status = StdCommand::new("chown")
            .args(["-R", &format!("{UID}:{UID}")])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    env.write(
        "nr.iter",
        "tool probe:\n  command: `touch \"$HOME/.npm/from-container\" && touch \"$HOME/written\" && mkdir -p \"$HOME/.cache/mine\" && jq -cn --arg u \"$(id -u):$(id -g)\" --arg o \"$(stat -c %u \"$HOME\")\" '{id: $u, home_owner: $o}'`\n\nworkflow nr:\n  entry: probe\n  probe -> done\n",
    );
    let out = env
        .std_cmd_via(&[
            "setpriv",
            &format!("--reuid={UID}"),
            &format!("--regid={UID}"),
            &format!("--groups={socket_gid}"),
            "--",
        ])
        .env("HOME", &home)
        .args(["run", "nr.iter", "--json", "--sandbox-default-image", IMAGE])
        .args(["--sandbox-host-state", "auto"])
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}",
        stderr_of(&out)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"],
        json!({"id": format!("{UID}:{UID}"), "home_owner": UID.to_string()})
    );
    assert_eq!(
        first(&events, "sandbox_user_remap").unwrap(),
        &json!({
            "uid": UID,
            "gid": UID,
            "reason": "host_state auto binds host paths read-write; running as the host uid keeps ownership consistent",
        })
    );
    let owner = std::fs::metadata(home.join(".npm/from-container"))
        .unwrap()
        .uid();
    assert_eq!(owner, UID);
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// Where the run dir of `run_id` would be (`<runtime root>/<run id>`), for each root the engine
/// may have picked.
fn run_dir_candidates(run_id: &str) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    let mut out = vec![
        std::env::temp_dir()
            .join(format!("iterion-{uid}"))
            .join(run_id),
    ];
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR") {
        out.push(PathBuf::from(xdg).join("iterion").join(run_id));
    }
    out
}

/// Names of the engine's volumes that start with `prefix`.
fn volumes_named(prefix: &str) -> Vec<String> {
    let out = StdCommand::new("docker")
        .args(["volume", "ls", "-q"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|v| v.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

/// Issue 15 item 3: an untrusted run's only host binds are the engine's own. Every author mount
/// naming a host path or a named volume — a devcontainer `mounts` entry (string or object), a
/// `runArgs` volume in any spelling, the workflow's own `sandbox.mounts` — fails the run with
/// `SANDBOX_SETUP_FAILED` naming the entry; nothing is started and no container, volume or run
/// dir is left.
#[test]
fn docker_untrusted_author_mounts_are_refused_and_leave_nothing() {
    if !docker_or_skip("cli::devcontainer::untrusted_mounts") {
        return;
    }
    let fake_home = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(fake_home.path()).unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    let devcontainers: Vec<(&str, String, &str)> = vec![
        (
            "workspace subdir",
            r#""mounts": ["source=${localWorkspaceFolder}/sub,target=/x,type=bind"]"#.to_owned(),
            "/sub",
        ),
        (
            "relative bind",
            r#""mounts": ["type=bind,source=./sub,target=/x"]"#.to_owned(),
            "./sub",
        ),
        (
            "cron dir, object form",
            r#""mounts": [{"source": "/etc/cron.d", "target": "/c", "type": "bind"}]"#.to_owned(),
            "/etc/cron.d",
        ),
        (
            "operator rc file",
            r#""mounts": ["source=${localEnv:HOME}/.bashrc,target=/r,type=bind"]"#.to_owned(),
            ".bashrc",
        ),
        (
            "the nix store volume",
            r#""mounts": ["type=volume,source=iterion-nix-0123456789ab,target=/nix"]"#.to_owned(),
            "iterion-nix-0123456789ab",
        ),
        (
            "a named volume",
            r#""mounts": ["source=shared-data,target=/s,type=volume"]"#.to_owned(),
            "shared-data",
        ),
        (
            "runArgs -v",
            r#""runArgs": ["-v", "/tmp:/t:ro"]"#.to_owned(),
            "/tmp:/t:ro",
        ),
        (
            "runArgs --mount=",
            r#""runArgs": ["--mount=type=bind,src=.,dst=/w"]"#.to_owned(),
            "--mount=type=bind,src=.,dst=/w",
        ),
        (
            "runArgs --volume= to the rc file",
            r#""runArgs": ["--volume=${localEnv:HOME}/.bashrc:/r"]"#.to_owned(),
            "--volume=",
        ),
        (
            "runArgs named volume",
            r#""runArgs": ["--volume", "iterion-nix-0123456789ab:/nix"]"#.to_owned(),
            "iterion-nix-0123456789ab",
        ),
    ];
    let nix_before = volumes_named("iterion-nix-0123456789ab");
    for (what, field, needle) in &devcontainers {
        let env = Env::new();
        std::fs::create_dir_all(env.path("sub")).unwrap();
        std::fs::create_dir_all(env.path(".devcontainer")).unwrap();
        env.write(
            ".devcontainer/devcontainer.json",
            &format!("{{\"image\": \"{IMAGE}\", {field}}}"),
        );
        env.write("probe.iter", &probe_workflow(""));
        let out = env
            .cmd()
            .env("HOME", &home)
            .args([
                "run",
                "probe.iter",
                "--json",
                "--sandbox-default-image",
                IMAGE,
            ])
            .args(["--trust", "untrusted"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr_of(&out));
        let run = env.only_run();
        assert_eq!(
            run.failure_code.as_deref(),
            Some("SANDBOX_SETUP_FAILED"),
            "{what}"
        );
        let message = run.failure_message.clone().unwrap_or_default();
        assert!(message.contains(needle), "{what}: {message}");
        let events = env.events(&run);
        assert!(first(&events, "sandbox_started").is_none(), "{what}");
        assert_eq!(env.containers(), Vec::<String>::new(), "{what}");
        for dir in run_dir_candidates(run.id.as_str()) {
            assert!(!dir.exists(), "{what}: {} was left", dir.display());
        }
    }
    // The workflow's own mounts (no devcontainer): refused by the driver, same outcome.
    for mount in [
        "source=./sub,target=/x",
        "type=volume,source=shared-data,target=/s",
    ] {
        let env = Env::new();
        std::fs::create_dir_all(env.path("sub")).unwrap();
        env.write(
            "probe.iter",
            &probe_workflow(&format!(
                "  sandbox:\n    image: \"{IMAGE}\"\n    mounts: [\"{mount}\"]\n"
            )),
        );
        let out = env
            .cmd()
            .args(["run", "probe.iter", "--json", "--trust", "untrusted"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{mount}: {}", stderr_of(&out));
        let run = env.only_run();
        assert_eq!(
            run.failure_code.as_deref(),
            Some("SANDBOX_SETUP_FAILED"),
            "{mount}"
        );
        let message = run.failure_message.clone().unwrap_or_default();
        assert!(
            message.contains(mount) && message.contains("untrusted run may not"),
            "{mount}: {message}"
        );
        assert!(first(&env.events(&run), "sandbox_started").is_none());
        assert_eq!(env.containers(), Vec::<String>::new(), "{mount}");
        for dir in run_dir_candidates(run.id.as_str()) {
            assert!(!dir.exists(), "{mount}: {} was left", dir.display());
        }
    }
    assert_eq!(volumes_named("iterion-nix-0123456789ab"), nix_before);
    assert_eq!(volumes_named("shared-data"), Vec::<String>::new());
}

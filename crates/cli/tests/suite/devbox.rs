//! Devbox provisioning in the sandbox (SANDBOX.md §15, §8 M4/M7, §8.10).
//!
//! The `devbox` in these containers is a STAND-IN, not devbox: a shell script baked into a
//! test image (`iterion-test/devbox-standin:1`, built here from the Debian test image) that
//! records its invocations in `/tmp/devbox-calls.log` and, like `devbox install`, creates a
//! `devbox.lock` in the project it installs. What is checked is what the engine asks of it, and
//! the `PATH` the nodes then see.

use std::process::Command as StdCommand;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Ended, Env, IMAGE, docker_or_skip, first};

const STANDIN_IMAGE: &str = "iterion-test/devbox-standin:1";

/// Builds the stand-in image once (cached by tag).
fn standin_image() -> &'static str {
    let present = StdCommand::new("docker")
        .args(["image", "inspect", STANDIN_IMAGE])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("devbox"),
            "#!/bin/sh\necho \"devbox $*\" >> /tmp/devbox-calls.log\nif [ \"$1\" = install ] && [ \"$2\" = -c ]; then touch \"$3/devbox.lock\"; fi\nexit 0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("Dockerfile"),
            format!("FROM {IMAGE}\nCOPY --chmod=0755 devbox /usr/local/bin/devbox\n"),
        )
        .unwrap();
        let out = StdCommand::new("docker")
            .args(["build", "-q", "-t", STANDIN_IMAGE])
            .arg(dir.path())
            .output()
            .unwrap();
        // Engines without --chmod support in COPY: retry with a RUN chmod.
        if !out.status.success() {
            std::fs::write(
                dir.path().join("Dockerfile"),
                format!(
                    "FROM {IMAGE}\nCOPY devbox /usr/local/bin/devbox\nRUN chmod 0755 /usr/local/bin/devbox\n"
                ),
            )
            .unwrap();
            let out = StdCommand::new("docker")
                .args(["build", "-q", "-t", STANDIN_IMAGE])
                .arg(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    STANDIN_IMAGE
}

/// A workspace with a repo `devbox.json` and the workflow in `bot/` with its own.
fn workspace(image: &str) -> Env {
    let env = Env::new();
    env.write("devbox.json", "{\"packages\": [\"jq@latest\"]}\n");
    std::fs::create_dir_all(env.path("bot")).unwrap();
    env.write("bot/devbox.json", "{\"packages\": [\"ripgrep@latest\"]}\n");
    env.write(
        "bot/flow.iter",
        &format!(
            "tool probe:\n  command: `jq -cn --arg calls \"$(cat /tmp/devbox-calls.log 2>/dev/null)\" --arg bundle \"$(ls /run/iterion/bundle 2>/dev/null | tr '\\n' ' ')\" '{{calls: $calls, path: env.PATH, bundle: $bundle}}'`\n\nworkflow flow:\n  entry: probe\n  sandbox:\n    image: \"{image}\"\n  probe -> done\n"
        ),
    );
    env
}

/// The node's output, the events and the logs of a successful run.
type Ran = (Value, Vec<(String, Value)>, Vec<(String, String)>);

fn run(env: &Env, extra: &[(&str, &str)]) -> Ran {
    let mut cmd = env.cmd();
    cmd.args(["run", "bot/flow.iter", "--json"]);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let Ended { events, logs, .. } = env.only_run_ended(&out, 0);
    assert_eq!(env.containers(), Vec::<String>::new());
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    (summary["output"].clone(), events, logs)
}

#[test]
fn docker_devbox_standin_installs_repo_then_bot_and_path_starts_with_the_repo_bin() {
    if !docker_or_skip("cli::devbox::docker_devbox_standin_installs") {
        return;
    }
    let image = standin_image();
    let env = workspace(image);
    let ws = std::fs::canonicalize(env.ws.path()).unwrap();
    let ws = ws.to_string_lossy();
    let (out, events, _) = run(&env, &[]);
    assert_eq!(
        out["calls"],
        json!(format!(
            "devbox install -c {ws}\ndevbox install -c /tmp/iterion-devbox/bot"
        ))
    );
    let repo_bin = format!("{ws}/.devbox/nix/profile/default/bin");
    let bot_bin = "/tmp/iterion-devbox/bot/.devbox/nix/profile/default/bin";
    let path = out["path"].as_str().unwrap();
    assert!(
        path.starts_with(&format!("{repo_bin}:{bot_bin}:")),
        "{path}"
    );
    // The base is the image's own PATH (§8.10), not the guessed one.
    let planted = first(&events, "sandbox_image_env_planted").unwrap();
    assert_eq!(planted["keys"], json!(["PATH"]));
    // The bundle is the workflow's directory, read-only.
    assert_eq!(out["bundle"], json!("devbox.json flow.iter "));
    let provisioned = first(&events, "sandbox_devbox_provisioned").unwrap();
    assert_eq!(provisioned["target"], json!("sandbox"));
    assert_eq!(provisioned["sources"], json!(["repo", "bot"]));
    assert_eq!(provisioned["bin_dirs"], json!([repo_bin, bot_bin]));
    assert_eq!(provisioned["skipped_sources"], json!([]));
    // The repository had no lock: the one install created is removed, git sees no change.
    assert!(!env.path("devbox.lock").exists());
}

#[test]
fn docker_devbox_standin_repo_source_turned_off_is_reported() {
    if !docker_or_skip("cli::devbox::docker_devbox_standin_repo_off") {
        return;
    }
    let image = standin_image();
    let env = workspace(image);
    let (out, events, _) = run(&env, &[("ITERION_REPO_DEVBOX", "off")]);
    assert_eq!(
        out["calls"],
        json!("devbox install -c /tmp/iterion-devbox/bot")
    );
    let provisioned = first(&events, "sandbox_devbox_provisioned").unwrap();
    assert_eq!(provisioned["sources"], json!(["bot"]));
    assert_eq!(provisioned["skipped_sources"], json!(["repo"]));
    let reasons = provisioned["skipped_reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].as_str().unwrap().contains("ITERION_REPO_DEVBOX"),
        "{reasons:?}"
    );
}

#[test]
fn docker_devbox_standin_the_workflow_repo_devbox_wins_over_the_variable() {
    if !docker_or_skip("cli::devbox::docker_devbox_standin_workflow_repo_devbox") {
        return;
    }
    let image = standin_image();
    let env = workspace(image);
    let flow = std::fs::read_to_string(env.path("bot/flow.iter")).unwrap();
    let with = |setting: &str| {
        flow.replace(
            "  entry: probe\n",
            &format!("  entry: probe\n  repo_devbox: {setting}\n"),
        )
    };
    // `repo_devbox: off` declines the repository's devbox.json although the variable says on.
    env.write("bot/flow.iter", &with("off"));
    let (out, events, _) = run(&env, &[("ITERION_REPO_DEVBOX", "on")]);
    assert_eq!(
        out["calls"],
        json!("devbox install -c /tmp/iterion-devbox/bot")
    );
    let provisioned = first(&events, "sandbox_devbox_provisioned").unwrap();
    assert_eq!(provisioned["skipped_sources"], json!(["repo"]));
    assert_eq!(
        provisioned["skipped_reasons"],
        json!(["repo_devbox: off (workflow)"]),
        "{provisioned}"
    );
    // `repo_devbox: on` installs it although the variable says off.
    let env = workspace(image);
    env.write("bot/flow.iter", &with("on"));
    let (_, events, _) = run(&env, &[("ITERION_REPO_DEVBOX", "off")]);
    let provisioned = first(&events, "sandbox_devbox_provisioned").unwrap();
    assert_eq!(
        provisioned["sources"],
        json!(["repo", "bot"]),
        "{provisioned}"
    );
}

#[test]
fn docker_an_image_without_devbox_says_so_and_the_run_succeeds() {
    if !docker_or_skip("cli::devbox::docker_no_devbox") {
        return;
    }
    let env = workspace(IMAGE);
    let (out, events, logs) = run(&env, &[]);
    assert_eq!(out["calls"], json!(""));
    assert!(
        logs.iter()
            .any(|(_, l)| l.contains("iterion: devbox is not on PATH; devbox.json not installed")),
        "{logs:#?}"
    );
    assert!(first(&events, "sandbox_devbox_provisioned").is_some());
}

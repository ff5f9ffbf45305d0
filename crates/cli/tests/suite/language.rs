//! Language parity features at run time (issue 20 part A), each from a workflow in `examples/`:
//! published artifacts, enum fields, a readonly agent with a bare model name, a bundle
//! directory, and `max_parallel_branches`, in the docker sandbox with the fake model server.
use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

const KEY: &str = "sk-ant-lang-0123456789abcdef";

fn example(path: &str) -> String {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The example with `sandbox: auto` pinned to the test image.
fn in_test_image(text: &str) -> String {
    assert!(text.contains("  sandbox: auto\n"));
    text.replace(
        "  sandbox: auto\n",
        &format!("  sandbox:\n    image: \"{IMAGE}\"\n"),
    )
}

#[test]
fn docker_a_published_artifact_is_read_in_the_sandbox_after_an_enum_miss_is_corrected() {
    let test = "cli::language::publish";
    if !docker_or_skip(test) {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip(test) else {
        return;
    };
    let env = Env::new();
    std::fs::create_dir_all(env.path("bundle")).unwrap();
    env.write(
        "bundle/main.bot",
        // An allowlist: the model's host is added to it as its last rule.
        &in_test_image(&example("11_publish/main.bot")).replace(
            &format!("    image: \"{IMAGE}\"\n"),
            &format!(
                "    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n"
            ),
        ),
    );
    env.write("NOTES.md", "Rotate the signing key.\n");
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            // "severe" is outside the enum: a schema miss, corrected once.
            Reply::text(r#"{"level": "severe", "summary": "key rotation"}"#),
            Reply::text(r#"{"level": "high", "summary": "rotates the 'signing' key; $HOME"}"#),
        ],
    );
    let out = env
        .cmd()
        .args(["run", "bundle"])
        .env("ITERION_BIN", &static_bin)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
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
    // The bundle directory ran its main.bot.
    assert!(
        run.file_path.ends_with("bundle/main.bot"),
        "{:?}",
        run.file_path
    );
    // The artifact reached the sandboxed command, each value quoted as one word.
    assert_eq!(
        std::fs::read_to_string(env.path("risk.txt")).unwrap(),
        "high: rotates the 'signing' key; $HOME\n"
    );
    let published = first(&events, "artifact_published").unwrap();
    assert_eq!(
        published,
        &json!({"name": "risk", "node": "reviewer", "version": 0,
                "value": {"level": "high", "summary": "rotates the 'signing' key; $HOME"}})
    );
    let order: Vec<&str> = kinds(&events)
        .into_iter()
        .filter(|k| ["node_finished", "artifact_published"].contains(k))
        .collect();
    assert_eq!(
        order,
        ["node_finished", "artifact_published", "node_finished"]
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    // A bare model name goes to Anthropic under its own name.
    assert_eq!(requests[0].body["model"], json!("claude-sonnet-4-5"));
    // readonly: no writing tool; upstream's list_files is glob.
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, vec!["read_file", "glob"]);
    let correction = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .to_string();
    assert!(
        correction.contains(
            r#"field \"level\" must be one of \"low\", \"medium\", \"high\", found \"severe\""#
        ),
        "{correction}"
    );
    // inspect lists the artifact, in both forms.
    let inspect = env
        .cmd()
        .args(["inspect", run.id.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(inspect.status.code(), Some(0), "{}", stderr_of(&inspect));
    let doc: Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(doc["artifacts"], json!([published]));
    let human = env
        .cmd()
        .args(["inspect", run.id.as_str()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout).into_owned();
    assert!(
        text.contains("artifact             risk (v0, from reviewer): {\"level\":\"high\""),
        "{text}"
    );
}

#[test]
fn docker_max_parallel_branches_runs_fan_out_branches_one_at_a_time() {
    let test = "cli::language::parallel_cap";
    if !docker_or_skip(test) {
        return;
    }
    let capped = in_test_image(&example("12_parallel_cap.iter"));
    // Without the cap the branches overlap: one of them finds the lock taken and the join fails
    // (this is what proves the cap is what serialises them).
    let uncapped = capped.replace("  budget:\n    max_parallel_branches: 1\n", "");
    assert_ne!(capped, uncapped);
    for (text, code) in [(&capped, 0), (&uncapped, 1)] {
        let env = Env::new();
        env.write("w.iter", text);
        let out = env.cmd().args(["run", "w.iter"]).output().unwrap();
        let run = env.only_run();
        let events = env.events(&run);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}\n{events:#?}",
            stderr_of(&out)
        );
        let finished = kinds(&events)
            .iter()
            .filter(|k| **k == "node_finished")
            .count();
        if code == 0 {
            // spread, three branches, gather.
            assert_eq!(finished, 5, "{events:#?}");
            assert_eq!(run.status.as_str(), "finished");
        } else {
            assert!(kinds(&events).contains(&"node_failed"), "{events:#?}");
        }
    }
}

#[test]
fn a_bundles_skills_reach_the_workspace_and_the_workspaces_own_win() {
    let env = Env::new();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/19_skills");
    std::fs::create_dir_all(env.path("bundle/skills")).unwrap();
    env.write(
        "bundle/main.bot",
        &std::fs::read_to_string(src.join("main.bot")).unwrap(),
    );
    env.write(
        "bundle/skills/review-rules.md",
        &std::fs::read_to_string(src.join("skills/review-rules.md")).unwrap(),
    );
    env.write("bundle/skills/style.md", "the bundle's style\n");
    // The workspace has its own style skill already.
    std::fs::create_dir_all(env.path(".claude/skills")).unwrap();
    env.write(".claude/skills/style.md", "the workspace's style\n");
    let out = env
        .cmd()
        .args(["run", "bundle", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"],
        json!({"result": "# Review rules: every finding names a file and a line."})
    );
    assert_eq!(
        std::fs::read_to_string(env.path(".claude/skills/style.md")).unwrap(),
        "the workspace's style\n"
    );
    // What the engine wrote is taken back when the run ends: nothing is left in the checkout.
    assert!(!env.path(".claude/skills/review-rules.md").exists());
}

#[test]
fn attack_a_workspace_claude_link_refuses_the_bundles_skills() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(env.path("bundle/skills")).unwrap();
    env.write(
        "bundle/main.bot",
        "tool t:\n  command: `true`\n\nworkflow w:\n  entry: t\n  t -> done\n",
    );
    env.write("bundle/skills/rules.md", "planted?\n");
    std::os::unix::fs::symlink(outside.path(), env.path(".claude")).unwrap();
    let out = env
        .cmd()
        .args(["run", "bundle", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["failure_code"],
        json!("SANDBOX_SETUP_FAILED"),
        "{summary}"
    );
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .contains("symbolic link"),
        "{summary}"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

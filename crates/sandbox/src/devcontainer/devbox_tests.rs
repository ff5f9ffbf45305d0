//! Devbox provisioning, the pure part (SANDBOX.md §15).

use std::path::PathBuf;

use pretty_assertions::assert_eq;

use crate::spec::Spec;

use super::corpus_tests::Repo;
use super::devbox::RepoDevbox;
use super::*;

fn config(path: &str, lock: Option<&str>) -> DevboxRead {
    DevboxRead::Present(DevboxConfig {
        path: PathBuf::from(path),
        content: r#"{"packages": ["jq@1.7"]}"#.to_owned(),
        lock: lock.map(str::to_owned),
    })
}

const NOT_ON_PATH: &str =
    "else\necho 'iterion: devbox is not on PATH; devbox.json not installed' >&2\nfi";

#[test]
fn repo_then_bot_install_in_order_and_path_starts_with_the_repo_bin_dir() {
    let repo = config("/host/ws/devbox.json", None);
    let bot = config("/host/bundle/devbox.json", Some("{}"));
    let plan = plan_devbox(&DevboxInputs {
        repo: &repo,
        bot: Some(&bot),
        repo_devbox: RepoDevbox::On,
        workspace_in_sandbox: "/workspaces/app",
        bundle_mounted: true,
        bot_stage_dir: DEVBOX_BOT_STAGE_DIR,
    });
    let prologue = format!(
        "if command -v devbox >/dev/null 2>&1; then\nexport DEVBOX_NO_PROMPT=1\n\
         devbox install -c /workspaces/app || echo 'iterion: devbox install failed for /workspaces/app/devbox.json' >&2\n\
         rm -f /workspaces/app/devbox.lock\n\
         {{ mkdir -p /tmp/iterion-devbox/bot && cp /run/iterion/bundle/devbox.json /tmp/iterion-devbox/bot/devbox.json \
         && cp /run/iterion/bundle/devbox.lock /tmp/iterion-devbox/bot/devbox.lock && devbox install -c /tmp/iterion-devbox/bot; }} \
         || echo 'iterion: devbox install failed for /tmp/iterion-devbox/bot/devbox.json' >&2\n{NOT_ON_PATH}"
    );
    let bin_dirs = vec![
        "/workspaces/app/.devbox/nix/profile/default/bin".to_owned(),
        "/tmp/iterion-devbox/bot/.devbox/nix/profile/default/bin".to_owned(),
    ];
    assert_eq!(
        plan,
        DevboxPlan {
            sources: vec![DevboxSource::Repo, DevboxSource::Bot],
            configs: vec![
                PathBuf::from("/host/ws/devbox.json"),
                PathBuf::from("/host/bundle/devbox.json")
            ],
            bin_dirs: bin_dirs.clone(),
            prologue: Some(prologue.clone()),
            ..DevboxPlan::default()
        }
    );

    // The workflow's PATH is prefixed too, and its post_create runs after the prologue.
    let mut spec = Spec {
        post_create: Some("make setup".to_owned()),
        env: [("PATH".to_owned(), "/wf/bin".to_owned())]
            .into_iter()
            .collect(),
        ..Spec::default()
    };
    let path = apply_devbox_plan(&mut spec, &plan);
    let want_path = format!("{}:/wf/bin", bin_dirs.join(":"));
    assert_eq!(
        (path.as_deref(), spec.env.get("PATH"), spec.post_create),
        (
            Some(want_path.as_str()),
            Some(&want_path),
            Some(format!("{prologue}\nmake setup"))
        )
    );
}

#[test]
fn without_a_bundle_mount_the_bot_config_is_written_inline_and_quoted() {
    let bot = DevboxRead::Present(DevboxConfig {
        path: PathBuf::from("/b/devbox.json"),
        content: "{\"it's\": 1}".to_owned(),
        lock: None,
    });
    let plan = plan_devbox(&DevboxInputs {
        repo: &DevboxRead::Absent,
        bot: Some(&bot),
        repo_devbox: RepoDevbox::On,
        workspace_in_sandbox: "/w",
        bundle_mounted: false,
        bot_stage_dir: DEVBOX_BOT_STAGE_DIR,
    });
    assert_eq!(
        plan.prologue,
        Some(format!(
            "if command -v devbox >/dev/null 2>&1; then\nexport DEVBOX_NO_PROMPT=1\n\
             {{ mkdir -p /tmp/iterion-devbox/bot && printf '%s' '{{\"it'\\''s\": 1}}' > /tmp/iterion-devbox/bot/devbox.json \
             && devbox install -c /tmp/iterion-devbox/bot; }} \
             || echo 'iterion: devbox install failed for /tmp/iterion-devbox/bot/devbox.json' >&2\n{NOT_ON_PATH}"
        ))
    );
}

#[test]
fn a_source_turned_off_or_declined_is_reported_with_its_reason() {
    let repo = config("/ws/devbox.json", Some("{}"));
    let bot = DevboxRead::Declined {
        path: PathBuf::from("/b/devbox.json"),
        reason: "larger than 524288 bytes".to_owned(),
    };
    let off = resolve_repo_devbox(None, Some("off")).unwrap();
    let plan = plan_devbox(&DevboxInputs {
        repo: &repo,
        bot: Some(&bot),
        repo_devbox: off,
        workspace_in_sandbox: "/w",
        bundle_mounted: true,
        bot_stage_dir: DEVBOX_BOT_STAGE_DIR,
    });
    assert_eq!(
        plan,
        DevboxPlan {
            skipped_sources: vec![DevboxSource::Repo, DevboxSource::Bot],
            skipped_reasons: vec![
                "ITERION_REPO_DEVBOX=off".to_owned(),
                "larger than 524288 bytes".to_owned()
            ],
            ..DevboxPlan::default()
        }
    );
    let mut spec = Spec::default();
    assert_eq!(apply_devbox_plan(&mut spec, &plan), None);
    assert_eq!(spec, Spec::default());
    assert!(!plan.is_empty());
    let absent = plan_devbox(&DevboxInputs {
        repo: &DevboxRead::Absent,
        bot: None,
        repo_devbox: RepoDevbox::On,
        workspace_in_sandbox: "/w",
        bundle_mounted: true,
        bot_stage_dir: DEVBOX_BOT_STAGE_DIR,
    });
    assert!(absent.is_empty());
}

#[test]
fn the_default_base_path_and_a_bin_dir_with_a_colon_is_skipped_with_a_warning() {
    let repo = config("/ws/devbox.json", Some("{}"));
    let plan = plan_devbox(&DevboxInputs {
        repo: &repo,
        bot: None,
        repo_devbox: RepoDevbox::On,
        workspace_in_sandbox: "/odd:dir",
        bundle_mounted: true,
        bot_stage_dir: DEVBOX_BOT_STAGE_DIR,
    });
    assert_eq!(
        (plan.bin_dirs.clone(), plan.warnings.clone()),
        (
            vec![],
            vec!["devbox: repo bin dir /odd:dir/.devbox/nix/profile/default/bin skipped: it contains ':' or a control character".to_owned()]
        )
    );
    let ok = plan_devbox(&DevboxInputs {
        workspace_in_sandbox: "/w/",
        ..DevboxInputs {
            repo: &repo,
            bot: None,
            repo_devbox: RepoDevbox::On,
            workspace_in_sandbox: "",
            bundle_mounted: true,
            bot_stage_dir: DEVBOX_BOT_STAGE_DIR,
        }
    });
    let mut spec = Spec::default();
    assert_eq!(
        apply_devbox_plan(&mut spec, &ok).as_deref(),
        Some(
            "/w/.devbox/nix/profile/default/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        )
    );
}

#[test]
fn the_repo_switch_reads_on_off_and_refuses_other_words() {
    let got: Vec<String> = [None, Some(""), Some("on"), Some("OFF"), Some("0")]
        .iter()
        .map(|value| format!("{:?}", resolve_repo_devbox(None, *value).unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            "On",
            "On",
            "On",
            "Off { by: \"ITERION_REPO_DEVBOX=off\" }",
            "Off { by: \"ITERION_REPO_DEVBOX=off\" }"
        ]
    );
    assert_eq!(
        resolve_repo_devbox(None, Some("maybe"))
            .unwrap_err()
            .to_string(),
        "ITERION_REPO_DEVBOX=\"maybe\": want on or off"
    );
    assert_eq!(
        resolve_repo_devbox(Some(RepoDevbox::On), Some("off")).unwrap(),
        RepoDevbox::On
    );
}

#[test]
fn reading_finds_the_config_and_lock_and_declines_what_is_too_big() {
    let repo = Repo::new();
    assert_eq!(read_devbox_config(&repo.root), DevboxRead::Absent);
    repo.write("devbox.json", "{}");
    assert_eq!(
        read_devbox_config(&repo.root),
        DevboxRead::Present(DevboxConfig {
            path: repo.root.join("devbox.json"),
            content: "{}".to_owned(),
            lock: None,
        })
    );
    repo.write("devbox.lock", &"x".repeat(512 * 1024));
    assert_eq!(
        read_devbox_config(&repo.root),
        DevboxRead::Declined {
            path: repo.root.join("devbox.json"),
            reason: "devbox.json plus devbox.lock larger than 524288 bytes".to_owned(),
        }
    );
}

/// Issue 15 item 12: a `devbox.json` that is a symlink to `/dev/stdin` (or any device, a FIFO, a
/// file outside the repository) is declined at once, naming the file and the rule — never read,
/// never waited on.
#[test]
fn a_devbox_json_that_is_not_a_regular_file_of_the_repository_is_declined_at_once() {
    let started = std::time::Instant::now();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("devbox.json"),
        r#"{"packages":["evil"]}"#,
    )
    .unwrap();
    let targets: Vec<(PathBuf, &str)> = vec![
        (PathBuf::from("/dev/stdin"), "outside the repository"),
        (PathBuf::from("/dev/zero"), "outside the repository"),
        (PathBuf::from("/proc/self/fd/0"), "outside the repository"),
        (outside.path().join("devbox.json"), "outside the repository"),
    ];
    for (target, rule) in targets {
        let repo = Repo::new();
        std::os::unix::fs::symlink(&target, repo.root.join("devbox.json")).unwrap();
        match read_devbox_config(&repo.root) {
            DevboxRead::Declined { reason, .. } => {
                assert!(reason.contains(rule), "{target:?}: {reason}");
                assert!(reason.contains("devbox.json"), "{target:?}: {reason}");
            }
            other => panic!("{target:?}: want declined, got {other:?}"),
        }
    }
    let repo = Repo::new();
    nix::unistd::mkfifo(
        &repo.root.join("devbox.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    match read_devbox_config(&repo.root) {
        DevboxRead::Declined { reason, .. } => assert!(reason.contains("fifo"), "{reason}"),
        other => panic!("fifo: want declined, got {other:?}"),
    }
    // A lock symlinked out is declined the same way.
    let repo = Repo::new();
    repo.write("devbox.json", "{}");
    std::os::unix::fs::symlink("/dev/stdin", repo.root.join("devbox.lock")).unwrap();
    assert!(matches!(
        read_devbox_config(&repo.root),
        DevboxRead::Declined { .. }
    ));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

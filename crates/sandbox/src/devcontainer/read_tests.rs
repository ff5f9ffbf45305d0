//! Finding and parsing the devcontainer (SANDBOX.md §7.1–§7.2).

use std::collections::BTreeMap;
use std::path::Path;

use pretty_assertions::assert_eq;

use crate::error::DevcontainerError;
use crate::mode::Mode;
use crate::rules::RunArgRule;
use crate::spec::{Build, Spec};

use super::convert::to_sandbox_spec;
use super::corpus_tests::Repo;
use super::expand::LocalVars;
use super::read::{CommandForm, Devcontainer, LifecycleCommand, parse_devcontainer};
use super::*;

fn found_path(text: &DevcontainerText) -> Option<&Path> {
    match text {
        DevcontainerText::Found { path, .. } => Some(path),
        _ => None,
    }
}

fn unusable_message(text: DevcontainerText) -> String {
    match text {
        DevcontainerText::Unusable(error) => {
            assert!(error.is_unusable());
            error.to_string()
        }
        other => panic!("want unusable, got {other:?}"),
    }
}

#[test]
fn the_devcontainer_dir_wins_over_the_root_file_and_missing_is_not_found() {
    let repo = Repo::new();
    assert!(matches!(
        read_from_repo(&repo.root),
        DevcontainerText::NotFound
    ));
    repo.write(".devcontainer.json", "{}");
    assert_eq!(
        found_path(&read_from_repo(&repo.root)),
        Some(repo.root.join(".devcontainer.json").as_path())
    );
    repo.write(".devcontainer/devcontainer.json", "{}");
    assert_eq!(
        found_path(&read_from_repo(&repo.root)),
        Some(repo.dc_path().as_path())
    );
}

#[test]
fn a_devcontainer_symlinked_outside_the_repository_is_unusable() {
    let repo = Repo::new();
    std::fs::write(repo.home.join("dc.json"), r#"{"image":"x"}"#).unwrap();
    std::fs::create_dir(repo.root.join(".devcontainer")).unwrap();
    std::os::unix::fs::symlink(repo.home.join("dc.json"), repo.dc_path()).unwrap();
    assert_eq!(
        unusable_message(read_from_repo(&repo.root)),
        format!(
            "{}: refused: it resolves outside the repository {} (a repository file must lie inside the repository; `..` and symlinks may not leave it)",
            repo.dc_path().display(),
            repo.root.display()
        )
    );
}

#[test]
fn a_dangling_symlink_a_directory_and_an_oversized_file_are_unusable_not_missing() {
    let repo = Repo::new();
    std::fs::create_dir(repo.root.join(".devcontainer")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/dc.json", repo.dc_path()).unwrap();
    assert!(matches!(
        read_from_repo(&repo.root),
        DevcontainerText::Unusable(DevcontainerError::Refused { .. })
    ));
    let repo = Repo::new();
    std::fs::create_dir(repo.root.join(".devcontainer")).unwrap();
    std::os::unix::fs::symlink("missing.json", repo.dc_path()).unwrap();
    assert!(matches!(
        read_from_repo(&repo.root),
        DevcontainerText::Unusable(DevcontainerError::Unreadable { .. })
    ));

    let repo = Repo::new();
    std::fs::create_dir_all(repo.dc_path()).unwrap();
    assert!(matches!(
        read_from_repo(&repo.root),
        DevcontainerText::Unusable(DevcontainerError::Refused { .. })
    ));

    let big = format!(
        "{{\"image\":\"x\",\"name\":\"{}\"}}",
        "a".repeat(300 * 1024)
    );
    let repo = Repo::with_file(".devcontainer.json", &big);
    assert_eq!(
        unusable_message(read_from_repo(&repo.root)),
        format!(
            "{}/.devcontainer.json: larger than 262144 bytes",
            repo.root.display()
        )
    );
}

#[test]
fn a_root_level_file_resolves_build_paths_from_the_root() {
    let repo = Repo::with_file(
        ".devcontainer.json",
        r#"{"build": {"dockerfile": "docker/Dockerfile"}}"#,
    );
    let DevcontainerText::Found { path, text } = read_from_repo(&repo.root) else {
        panic!("not found");
    };
    let dc = parse_devcontainer(&path, &text).unwrap();
    let lookup = |_: &str| None;
    let vars = LocalVars {
        repo_root: Some(&repo.root),
        lookup: &lookup,
    };
    let converted = to_sandbox_spec(&dc, &repo.root, &vars).unwrap();
    assert_eq!(
        converted.spec,
        Spec {
            mode: Mode::Auto,
            build: Some(Build {
                dockerfile: "docker/Dockerfile".to_owned(),
                context: Some(".".to_owned()),
                args: BTreeMap::new(),
            }),
            ..Spec::default()
        }
    );
}

#[test]
fn parsing_keeps_what_the_spec_lists_and_records_initialize_command() {
    let dc = parse_devcontainer(
        Path::new("/r/.devcontainer/devcontainer.json"),
        r#"{
          "name": "n", "image": "i",
          "postStartCommand": ["a", "b"],
          "initializeCommand": ["rm", "-rf", "/"],
          "forwardPorts": [1], "features": {}, "hostRequirements": {"cpus": 1},
          "customizations": {"x": 1},
          "workspaceMount": "source=${localWorkspaceFolder},target=/w,type=bind",
          "remoteEnv": {"A": null, "B": "b"}
        }"#,
    )
    .unwrap();
    let want = Devcontainer {
        path: "/r/.devcontainer/devcontainer.json".into(),
        name: Some("n".to_owned()),
        image: Some("i".to_owned()),
        remote_env: [("B".to_owned(), "b".to_owned())].into_iter().collect(),
        workspace_mount: Some("source=${localWorkspaceFolder},target=/w,type=bind".to_owned()),
        post_start_command: Some(LifecycleCommand::Single(CommandForm::Argv(vec![
            "a".to_owned(),
            "b".to_owned(),
        ]))),
        unused: [
            ("features".to_owned(), serde_json::json!({})),
            ("forwardPorts".to_owned(), serde_json::json!([1])),
            (
                "hostRequirements".to_owned(),
                serde_json::json!({"cpus": 1}),
            ),
        ]
        .into_iter()
        .collect(),
        has_initialize_command: true,
        ..Devcontainer::default()
    };
    assert_eq!(dc, want);
}

#[test]
fn shape_failures_name_the_field() {
    let cases = [
        ("[]", "(root): want an object"),
        (
            "{}",
            "image: neither image nor build is set (docker compose is not supported)",
        ),
        (r#"{"image": 1}"#, "image: want a string"),
        (
            r#"{"image": "i", "containerEnv": {"A": 1}}"#,
            "containerEnv.A: want a string",
        ),
        (
            r#"{"image": "i", "mounts": [1]}"#,
            "mounts[0]: want a string or an object",
        ),
        (
            r#"{"image": "i", "mounts": [{"target": 2}]}"#,
            "mounts[0].target: want a string",
        ),
        (
            r#"{"image": "i", "runArgs": "--privileged"}"#,
            "runArgs: want an array of strings",
        ),
        (
            r#"{"image": "i", "postCreateCommand": {"a": 1}}"#,
            "postCreateCommand.a: want a string or an array of strings",
        ),
        (r#"{"build": "Dockerfile"}"#, "build: want an object"),
        (
            r#"{"build": {"dockerfile": "D", "args": {"A": true}}}"#,
            "build.args.A: want a string",
        ),
    ];
    let got: Vec<String> = cases
        .iter()
        .map(|(text, _)| {
            let error = parse_devcontainer(Path::new("f"), text).unwrap_err();
            assert!(error.is_unusable());
            error.to_string()
        })
        .collect();
    let want: Vec<String> = cases.iter().map(|(_, msg)| format!("f: {msg}")).collect();
    assert_eq!(got, want);
}

#[test]
fn json5_extensions_are_not_jsonc() {
    let texts = [
        r#"{image: "i"}"#,
        r#"{"image": 'i'}"#,
        r#"{"image": "i" "name": "n"}"#,
        r#"{"image": "i", "n": 0x10}"#,
        r#"{"image": "i", "n": +1}"#,
        r#"{"image": "i", "n": .5}"#,
        r#"{"image": "i", "n": NaN}"#,
        r#"{"image": "i"} {"image": "j"}"#,
        "",
    ];
    let not_jsonc: Vec<bool> = texts
        .iter()
        .map(|text| {
            let error = parse_devcontainer(Path::new("f"), text).unwrap_err();
            error.is_unusable()
                && (matches!(error, DevcontainerError::NotJsonc { .. })
                    || error.to_string() == "f: (root): want an object")
        })
        .collect();
    assert_eq!(not_jsonc, vec![true; texts.len()]);
}

#[test]
fn error_codes_and_families() {
    let path = || std::path::PathBuf::from("f");
    let refusal = DevcontainerError::RunArgRefused {
        path: path(),
        arg: "--privileged".to_owned(),
        rule: RunArgRule::HostPrivilege("--privileged"),
    };
    let shape = DevcontainerError::Shape {
        path: path(),
        field: "x".to_owned(),
        reason: "y".to_owned(),
    };
    let wrapped: crate::Error = refusal.into();
    assert_eq!(
        (wrapped.code(), shape.code(), shape.is_unusable()),
        ("SANDBOX_SETUP_FAILED", "SANDBOX_SETUP_FAILED", true)
    );
    assert_eq!(
        wrapped.to_string(),
        "f: runArgs entry \"--privileged\" refused: --privileged grants host privileges"
    );
}

#[test]
fn the_pure_parser_bounds_its_input_too() {
    let big = " ".repeat(256 * 1024 + 1);
    assert_eq!(
        parse_devcontainer(Path::new("f"), &big)
            .unwrap_err()
            .to_string(),
        "f: larger than 262144 bytes"
    );
}

/// Issue 15 item 12: a devcontainer that is a FIFO, a symlink to `/dev/stdin` or one whose
/// directory is a symlink out of the repository is unusable at once, never read or waited on.
#[test]
fn a_devcontainer_that_is_a_fifo_a_device_or_behind_an_escaping_directory_is_unusable_at_once() {
    let started = std::time::Instant::now();
    let repo = Repo::new();
    std::fs::create_dir(repo.root.join(".devcontainer")).unwrap();
    nix::unistd::mkfifo(
        &repo.dc_path(),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    assert!(unusable_message(read_from_repo(&repo.root)).contains("fifo"));

    let repo = Repo::new();
    std::fs::create_dir(repo.root.join(".devcontainer")).unwrap();
    std::os::unix::fs::symlink("/dev/stdin", repo.dc_path()).unwrap();
    assert!(unusable_message(read_from_repo(&repo.root)).contains("outside the repository"));

    let repo = Repo::new();
    std::fs::create_dir(repo.home.join("elsewhere")).unwrap();
    std::fs::write(
        repo.home.join("elsewhere/devcontainer.json"),
        r#"{"image":"x"}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(repo.home.join("elsewhere"), repo.root.join(".devcontainer"))
        .unwrap();
    assert!(unusable_message(read_from_repo(&repo.root)).contains("outside the repository"));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

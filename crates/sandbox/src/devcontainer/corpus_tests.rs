//! The devcontainer corpus (tests/fixtures/devcontainer): each file resolved through
//! [`resolve_sandbox_spec_with_fallback`] in a temp repository with a temp HOME, with whole-value
//! asserts on the outcome. Hostile files are refused or stripped with the exact outcome.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use crate::mode::{Mode, NetworkMode};
use crate::mounts::ScreenContext;
use crate::precedence::{DefaultImage, resolve_default_sandbox_image_with_fallback};
use crate::spec::{Build, Network, Spec};
use crate::{Error, Result};

use super::resolve::ResolvedSpec;
use super::*;

const LABEL: &str = "cli flag --sandbox";
const DEFAULT_IMAGE: &str = "iterion-default:test";

pub(super) struct Repo {
    _dir: tempfile::TempDir,
    _home_dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
}

impl Repo {
    pub(super) fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let home_dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = home_dir.path().canonicalize().unwrap();
        Repo {
            _dir: dir,
            _home_dir: home_dir,
            root,
            home,
        }
    }

    pub(super) fn with_file(at: &str, text: &str) -> Repo {
        let repo = Repo::new();
        repo.write(at, text);
        repo
    }

    pub(super) fn write(&self, at: &str, text: &str) {
        let path = self.root.join(at);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub(super) fn basename(&self) -> String {
        self.root
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    pub(super) fn dc_path(&self) -> PathBuf {
        self.root.join(".devcontainer/devcontainer.json")
    }
}

pub(super) fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/devcontainer")
        .join(name);
    std::fs::read_to_string(&path).unwrap()
}

fn default_image() -> DefaultImage {
    resolve_default_sandbox_image_with_fallback(Some(DEFAULT_IMAGE), None)
}

/// Resolves with a recording host lookup that *has* secrets set; returns the names looked up.
fn resolve_in(
    repo: &Repo,
    workflow: Option<&Spec>,
    overlay: &EnvOverlay,
) -> (Result<ResolvedSpec>, Vec<String>) {
    let looked_up = RefCell::new(Vec::new());
    let home = repo.home.to_string_lossy().into_owned();
    let lookup = |name: &str| {
        looked_up.borrow_mut().push(name.to_owned());
        match name {
            "HOME" => Some(home.clone()),
            "USER" => Some("op".to_owned()),
            "AWS_SECRET_ACCESS_KEY" => Some("AKIA-host-secret".to_owned()),
            "GITHUB_TOKEN" => Some("ghp-host-secret".to_owned()),
            _ => None,
        }
    };
    let text = read_from_repo(&repo.root);
    let screen = ScreenContext::new(&repo.root, Some(&repo.home)).unwrap();
    let default = default_image();
    let inputs = AutoInputs {
        mode: Mode::Auto,
        source_label: LABEL,
        workflow,
        repo_root: Some(&repo.root),
        devcontainer: &text,
        default_image: Some(&default),
        lookup: &lookup,
        overlay,
        screen: &screen,
    };
    let resolved = resolve_sandbox_spec_with_fallback(&inputs);
    (resolved, looked_up.into_inner())
}

fn resolve_fixture(name: &str) -> (Repo, ResolvedSpec, Vec<String>) {
    let repo = Repo::with_file(".devcontainer/devcontainer.json", &fixture(name));
    let (resolved, looked_up) = resolve_in(&repo, None, &EnvOverlay::default());
    (repo, resolved.unwrap(), looked_up)
}

fn refusal(name: &str, setup: impl FnOnce(&Repo)) -> (Repo, Error) {
    let repo = Repo::with_file(".devcontainer/devcontainer.json", &fixture(name));
    setup(&repo);
    let (resolved, _) = resolve_in(&repo, None, &EnvOverlay::default());
    (repo, resolved.unwrap_err())
}

pub(super) fn default_network() -> Network {
    Network {
        mode: Some(NetworkMode::Allowlist),
        preset: Some("iterion-default".to_owned()),
        ..Network::default()
    }
}

/// A fused spec: mode auto, the defaulted network, `image`, then `edit`.
fn fused(image: &str, edit: impl FnOnce(&mut Spec)) -> Spec {
    let mut spec = Spec {
        mode: Mode::Auto,
        image: Some(image.to_owned()),
        network: Some(default_network()),
        ..Spec::default()
    };
    edit(&mut spec);
    spec
}

fn found(repo: &Repo, spec: Spec, repo_env: &[&str]) -> ResolvedSpec {
    let detail = format!(" ({})", repo.dc_path().display());
    ResolvedSpec {
        spec: Some(spec),
        source: format!("{LABEL}{detail}"),
        source_detail: detail,
        repo_env: repo_env.iter().map(|key| (*key).to_owned()).collect(),
        repo_network_defaulted: true,
        devcontainer: Some(repo.dc_path()),
        ..ResolvedSpec::default()
    }
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

#[test]
fn minimal_image_is_fused_with_the_default_allowlist() {
    let (repo, resolved, looked_up) = resolve_fixture("01-image.json");
    assert_eq!(resolved, found(&repo, fused("alpine:3.20", |_| {}), &[]));
    assert_eq!(looked_up, Vec::<String>::new());
}

#[test]
fn comments_and_trailing_commas_are_jsonc() {
    let (repo, resolved, _) = resolve_fixture("02-jsonc-quirks.jsonc");
    let spec = fused("mcr.microsoft.com/devcontainers/base:bookworm", |spec| {
        spec.env = env(&[("EDITOR", "vi"), ("TZ", "UTC")]);
        spec.mounts =
            vec!["type=volume,source=node-modules,target=/workspaces/app/node_modules".to_owned()];
    });
    assert_eq!(resolved, found(&repo, spec, &["EDITOR", "TZ"]));
}

#[test]
fn post_create_string_is_kept_and_trimmed() {
    let (repo, resolved, _) = resolve_fixture("03-post-create-string.json");
    let spec = fused("node:22", |spec| {
        spec.post_create = Some("npm ci && npm run build".to_owned());
    });
    assert_eq!(resolved, found(&repo, spec, &[]));
}

#[test]
fn post_create_array_is_posix_quoted_and_space_joined() {
    let (repo, resolved, _) = resolve_fixture("04-post-create-array.json");
    let want = format!(
        "pip install --prefix '/opt/my env' 'it'\\''s' {}",
        repo.basename()
    );
    let spec = fused("python:3.12", |spec| spec.post_create = Some(want));
    assert_eq!(resolved, found(&repo, spec, &[]));
}

#[test]
fn post_create_object_runs_named_commands_in_sorted_key_order() {
    let (repo, resolved, _) = resolve_fixture("05-post-create-object.jsonc");
    let spec = fused("rust:1", |spec| {
        spec.post_create = Some("( echo 'a b' ) && ( cargo fetch )".to_owned());
    });
    assert_eq!(resolved, found(&repo, spec, &[]));
}

#[test]
fn object_mounts_become_mount_grammar_and_pass_screening() {
    let repo = Repo::with_file(
        ".devcontainer/devcontainer.json",
        &fixture("06-object-mounts.json"),
    );
    std::fs::create_dir(repo.root.join("data")).unwrap();
    let (resolved, _) = resolve_in(&repo, None, &EnvOverlay::default());
    let spec = fused("alpine:3.20", |spec| {
        spec.mounts = vec![
            "type=volume,source=cargo-cache,target=/usr/local/cargo/registry".to_owned(),
            format!("type=bind,source={}/data,target=/data", repo.root.display()),
            "source=./data,target=/data-ro,readonly".to_owned(),
        ];
    });
    assert_eq!(resolved.unwrap(), found(&repo, spec, &[]));
}

#[test]
fn build_paths_are_rewritten_relative_to_the_repository_and_target_is_dropped() {
    let (repo, resolved, looked_up) = resolve_fixture("07-build.jsonc");
    let spec = Spec {
        mode: Mode::Auto,
        build: Some(Build {
            dockerfile: ".devcontainer/Dockerfile".to_owned(),
            context: Some(".".to_owned()),
            args: env(&[("USER", "op"), ("VARIANT", "bookworm")]),
        }),
        user: Some("vscode".to_owned()),
        network: Some(default_network()),
        ..Spec::default()
    };
    assert_eq!(resolved, found(&repo, spec, &[]));
    assert_eq!(looked_up, vec!["USER", "VARIANT"]);
}

#[test]
fn env_collisions_container_env_beats_remote_env_workflow_beats_both_overlay_beats_repo() {
    let repo = Repo::with_file(
        ".devcontainer/devcontainer.json",
        &fixture("08-env-collision.json"),
    );
    let workflow = Spec {
        mode: Mode::Auto,
        env: env(&[("WF_WINS", "workflow"), ("WF_ONLY", "w")]),
        ..Spec::default()
    };
    let overlay = EnvOverlay {
        vars: env(&[
            ("SHARED", "operator"),
            ("WF_WINS", "operator"),
            ("NEW", "operator"),
        ]),
    };
    let (resolved, _) = resolve_in(&repo, Some(&workflow), &overlay);
    let spec = fused("alpine:3.20", |spec| {
        spec.env = env(&[
            ("CONTAINER_ONLY", "c"),
            ("NEW", "operator"),
            ("REMOTE_ONLY", "r"),
            ("SHARED", "operator"),
            ("WF_ONLY", "w"),
            ("WF_WINS", "workflow"),
        ]);
    });
    let want = ResolvedSpec {
        overlay_applied: vec!["NEW".to_owned(), "SHARED".to_owned()],
        ..found(&repo, spec, &["CONTAINER_ONLY", "REMOTE_ONLY", "SHARED"])
    };
    assert_eq!(resolved.unwrap(), want);
}

#[test]
fn local_env_home_expands_but_host_secrets_are_never_read() {
    let (repo, resolved, looked_up) = resolve_fixture("09-local-env.json");
    let spec = fused("alpine:3.20", |spec| {
        spec.env = env(&[
            ("HOST_HOME", &repo.home.to_string_lossy()),
            (
                "LEFT_ALONE",
                "${containerEnv:PATH}:${containerWorkspaceFolder}",
            ),
            ("LOCALE", "C.UTF-8"),
            ("STOLEN_AWS", "x"),
            ("STOLEN_GH", ""),
        ]);
    });
    let keys = [
        "HOST_HOME",
        "LEFT_ALONE",
        "LOCALE",
        "STOLEN_AWS",
        "STOLEN_GH",
    ];
    assert_eq!(resolved, found(&repo, spec, &keys));
    // The secrets are set on the "host"; the lookup was never even asked for them.
    assert_eq!(looked_up, vec!["HOME", "LC_ALL"]);
}

#[test]
fn remote_user_beats_container_user_and_workspace_folder_is_expanded_and_cleaned() {
    let (repo, resolved, _) = resolve_fixture("10-users-workspace.json");
    let spec = fused("alpine:3.20", |spec| {
        spec.user = Some("dev".to_owned());
        spec.workspace_folder = Some(format!("/workspaces/{}", repo.basename()));
    });
    assert_eq!(resolved, found(&repo, spec, &[]));
}

#[test]
fn container_user_is_the_user_without_remote_user() {
    let (repo, resolved, _) = resolve_fixture("11-container-user.json");
    let spec = fused("alpine:3.20", |spec| {
        spec.user = Some("1000:1000".to_owned())
    });
    assert_eq!(resolved, found(&repo, spec, &[]));
}

#[test]
fn ignored_fields_are_not_mapped_and_initialize_command_never_runs() {
    let (repo, resolved, _) = resolve_fixture("12-ignored-fields.jsonc");
    let want = ResolvedSpec {
        run_log: vec![
            "runArgs ignored: --init --shm-size=1g --label team=a -v named-vol:/cache".to_owned(),
            "devcontainer initializeCommand is never run (ignored)".to_owned(),
        ],
        ..found(&repo, fused("alpine:3.20", |_| {}), &[])
    };
    assert_eq!(resolved, want);
}

#[test]
fn denied_env_keys_are_stripped_sorted_and_the_workflow_value_is_untouched() {
    let repo = Repo::with_file(
        ".devcontainer/devcontainer.json",
        &fixture("13-denied-env.json"),
    );
    let workflow = Spec {
        mode: Mode::Auto,
        env: env(&[("HTTPS_PROXY", "http://operator-proxy:3128")]),
        ..Spec::default()
    };
    let (resolved, _) = resolve_in(&repo, Some(&workflow), &EnvOverlay::default());
    let spec = fused("alpine:3.20", |spec| {
        spec.env = env(&[
            ("HTTPS_PROXY", "http://operator-proxy:3128"),
            ("KEPT", "yes"),
        ]);
    });
    let want = ResolvedSpec {
        denied_env: [
            "ANTHROPIC_BASE_URL",
            "GIT_CONFIG_KEY_0",
            "HTTPS_PROXY",
            "ITERION_X",
            "LD_PRELOAD",
            "PATH",
            "https_proxy",
        ]
        .map(str::to_owned)
        .to_vec(),
        ..found(&repo, spec, &["KEPT"])
    };
    assert_eq!(resolved.unwrap(), want);
}

/// A shape failure: the default image, the reason in the label, the workflow's own fields (its
/// network as written), no skip.
fn unusable_outcome(name: &str, error: impl FnOnce(&Repo) -> String) {
    let repo = Repo::with_file(".devcontainer/devcontainer.json", &fixture(name));
    let workflow = Spec {
        mode: Mode::Auto,
        env: env(&[("A", "1")]),
        user: Some("wf".to_owned()),
        ..Spec::default()
    };
    let (resolved, _) = resolve_in(&repo, Some(&workflow), &EnvOverlay::default());
    let error = error(&repo);
    let detail = format!(" (devcontainer unusable — {error} — default image: {DEFAULT_IMAGE})");
    let want = ResolvedSpec {
        spec: Some(Spec {
            mode: Mode::Auto,
            image: Some(DEFAULT_IMAGE.to_owned()),
            image_is_default: true,
            env: env(&[("A", "1")]),
            user: Some("wf".to_owned()),
            ..Spec::default()
        }),
        source: format!("{LABEL}{detail}"),
        source_detail: detail,
        run_log: vec![format!(
            "devcontainer unusable, using the default image {DEFAULT_IMAGE}: {error}"
        )],
        ..ResolvedSpec::default()
    };
    assert_eq!(resolved.unwrap(), want, "{name}");
}

#[test]
fn relative_workspace_folder_falls_back_to_the_default_image() {
    unusable_outcome("14-relative-workspace-folder.json", |repo| {
        format!(
            "{}: workspaceFolder: workspaces/app is not absolute",
            repo.dc_path().display()
        )
    });
}

#[test]
fn single_quotes_are_not_jsonc() {
    unusable_outcome("15-single-quotes.jsonc", |repo| {
        format!(
            "{}: not JSONC: Single-quoted strings are not allowed on line 1 column 3",
            repo.dc_path().display()
        )
    });
}

#[test]
fn image_and_build_together_are_unusable() {
    unusable_outcome("16-image-and-build.json", |repo| {
        format!(
            "{}: image: image and build are exclusive; set only one",
            repo.dc_path().display()
        )
    });
}

#[test]
fn build_without_dockerfile_is_unusable() {
    unusable_outcome("17-build-without-dockerfile.json", |repo| {
        format!(
            "{}: build.dockerfile: a build needs a dockerfile",
            repo.dc_path().display()
        )
    });
}

#[test]
fn an_object_mount_with_another_key_is_unusable() {
    unusable_outcome("18-object-mount-unknown-key.json", |repo| {
        format!(
            "{}: mounts[0].consistency: unknown key in an object mount (want source, target, type)",
            repo.dc_path().display()
        )
    });
}

#[test]
fn hostile_docker_socket_mount_refuses_the_run() {
    let (repo, error) = refusal("hostile-docker-socket.json", |_| {});
    assert_eq!(error.code(), "SANDBOX_SETUP_FAILED");
    assert_eq!(
        error.to_string(),
        format!(
            "{}: mounts: sandbox: mount refused: source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind: \
             /var/run/docker.sock is sensitive: it is, lies under or contains the sensitive host path /var/run/docker.sock",
            repo.dc_path().display()
        )
    );
}

#[test]
fn hostile_ssh_mount_with_type_refuses_the_run() {
    let (repo, error) = refusal("hostile-ssh-typed.json", |_| {});
    let home = repo.home.display();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: mounts: sandbox: mount refused: source={home}/.ssh,target=/root/.ssh,type=bind,readonly: \
             {home}/.ssh is sensitive: .ssh holds credentials",
            repo.dc_path().display()
        )
    );
}

#[test]
fn hostile_ssh_mount_without_type_is_a_bind_and_refuses_the_run() {
    let (repo, error) = refusal("hostile-ssh-untyped.json", |_| {});
    let home = repo.home.display();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: mounts: sandbox: mount refused: source={home}/.ssh,target=/home/dev/.ssh: \
             {home}/.ssh is sensitive: .ssh holds credentials",
            repo.dc_path().display()
        )
    );
}

#[test]
fn hostile_symlink_in_the_repository_to_the_home_aws_dir_refuses_the_run() {
    let (repo, error) = refusal("hostile-symlink-aws.json", |repo| {
        std::fs::create_dir(repo.home.join(".aws")).unwrap();
        std::os::unix::fs::symlink(repo.home.join(".aws"), repo.root.join("creds")).unwrap();
    });
    assert_eq!(
        error.to_string(),
        format!(
            "{}: mounts: sandbox: mount refused: type=bind,source=creds,target=/creds: \
             {}/.aws is sensitive: .aws holds credentials",
            repo.dc_path().display(),
            repo.home.display()
        )
    );
}

#[test]
fn hostile_run_args_refuse_the_run_naming_the_entry() {
    let cases = [
        (
            "hostile-privileged.json",
            "\"--privileged\" refused: --privileged grants host privileges",
        ),
        (
            "hostile-cap-add-split.json",
            "\"--cap-add SYS_ADMIN\" refused: --cap-add grants host privileges",
        ),
        (
            "hostile-network-host-split.json",
            "\"--network host\" refused: host networking bypasses the egress proxy",
        ),
        (
            "hostile-run-args-volume.json",
            "\"-v /var/run/docker.sock:/var/run/docker.sock\" refused: mount refused: /var/run/docker.sock is sensitive: \
             it is, lies under or contains the sensitive host path /var/run/docker.sock",
        ),
    ];
    for (name, tail) in cases {
        let (repo, error) = refusal(name, |_| {});
        assert_eq!(error.code(), "SANDBOX_SETUP_FAILED");
        assert_eq!(
            error.to_string(),
            format!("{}: runArgs entry {tail}", repo.dc_path().display()),
            "{name}"
        );
    }
}

#[test]
fn the_corpus_has_at_least_fifteen_usable_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/devcontainer");
    let names: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().filter(|n| !n.starts_with("hostile")).count() >= 15);
    assert!(names.iter().filter(|n| n.starts_with("hostile")).count() >= 8);
}

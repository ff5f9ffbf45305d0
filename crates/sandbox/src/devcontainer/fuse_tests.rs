//! Fusion (SANDBOX.md §7.6), the env deny class (§7.7), the overlay (§7.8), network defaulting
//! (§7.9) and the non-devcontainer resolution paths (§7.5).

use std::collections::{BTreeMap, BTreeSet};

use pretty_assertions::assert_eq;

use crate::mode::{HostState, Mode, NetworkMode};
use crate::mounts::ScreenContext;
use crate::precedence::resolve_default_sandbox_image_with_fallback;
use crate::spec::{Build, Network, Spec};

use super::corpus_tests::{Repo, default_network};
use super::env_deny::is_denied_env_key;
use super::fuse::{FusedSpec, fuse_devcontainer_spec};
use super::overlay::merge_environment_overlay;
use super::resolve::ResolvedSpec;
use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn set(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

#[test]
fn the_repository_pair_replaces_the_workflow_pair_and_container_fields_prefer_the_repository() {
    let repo = Spec {
        mode: Mode::Auto,
        build: Some(Build::default()),
        user: Some("repo".to_owned()),
        mounts: vec![
            "type=volume,source=a,target=/shared/".to_owned(),
            "type=volume,source=b,target=/repo".to_owned(),
        ],
        ..Spec::default()
    };
    let workflow = Spec {
        mode: Mode::Auto,
        image: Some("wf:1".to_owned()),
        image_fallback: Some("wf:fallback".to_owned()),
        user: Some("wf".to_owned()),
        post_create: Some("wf-setup".to_owned()),
        workspace_folder: Some("/wf".to_owned()),
        mounts: vec![
            "type=volume,source=c,target=/shared".to_owned(),
            "type=volume,source=d,target=/wf".to_owned(),
        ],
        host_state: HostState::None,
        tmpfs: vec!["/tmp".to_owned()],
        ..Spec::default()
    };
    let fused = fuse_devcontainer_spec(&repo, Some(&workflow));
    let want = Spec {
        mode: Mode::Auto,
        build: Some(Build::default()),
        user: Some("repo".to_owned()),
        post_create: Some("wf-setup".to_owned()),
        workspace_folder: Some("/wf".to_owned()),
        mounts: vec![
            "type=volume,source=a,target=/shared/".to_owned(),
            "type=volume,source=b,target=/repo".to_owned(),
            "type=volume,source=d,target=/wf".to_owned(),
        ],
        host_state: HostState::None,
        tmpfs: vec!["/tmp".to_owned()],
        network: Some(default_network()),
        ..Spec::default()
    };
    assert_eq!(
        fused,
        FusedSpec {
            spec: want,
            repo_env: BTreeSet::new(),
            denied_env: vec![],
            network_defaulted: true,
        }
    );
}

#[test]
fn a_repository_without_a_container_keeps_the_workflow_pair() {
    let repo = Spec {
        mode: Mode::Auto,
        ..Spec::default()
    };
    let workflow = Spec {
        mode: Mode::Auto,
        image: Some("wf:1".to_owned()),
        image_fallback: Some("wf:fallback".to_owned()),
        ..Spec::default()
    };
    let fused = fuse_devcontainer_spec(&repo, Some(&workflow)).spec;
    assert_eq!(
        (fused.image, fused.image_fallback),
        (Some("wf:1".to_owned()), Some("wf:fallback".to_owned()))
    );
}

#[test]
fn the_deny_class_strips_repository_keys_only_and_records_them_sorted() {
    let repo = Spec {
        env: env(&[
            ("LD_PRELOAD", "x"),
            ("https_proxy", "x"),
            ("ITERION_X", "x"),
            ("OK", "repo"),
            ("BOTH", "repo"),
        ]),
        ..Spec::default()
    };
    let workflow = Spec {
        env: env(&[("LD_PRELOAD", "wf"), ("BOTH", "wf"), ("PATH", "/wf")]),
        ..Spec::default()
    };
    let fused = fuse_devcontainer_spec(&repo, Some(&workflow));
    assert_eq!(
        (fused.spec.env, fused.repo_env, fused.denied_env),
        (
            env(&[
                ("BOTH", "wf"),
                ("LD_PRELOAD", "wf"),
                ("OK", "repo"),
                ("PATH", "/wf")
            ]),
            set(&["OK"]),
            vec![
                "ITERION_X".to_owned(),
                "LD_PRELOAD".to_owned(),
                "https_proxy".to_owned()
            ],
        )
    );
}

#[test]
fn the_deny_class_is_exactly_the_specs() {
    let denied = [
        "PATH",
        "ANTHROPIC_BASE_URL",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "OPENAI_BASE_URL",
        "HTTP_PROXY",
        "https_proxy",
        "No_Proxy",
        "all_proxy",
        "ITERION_",
        "ITERION_SANDBOX_X",
        "HOME",
        "LD_AUDIT",
        "BASH_ENV",
        "ENV",
        "NODE_OPTIONS",
        "OPENAI_API_BASE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "NIX_SSL_CERT_FILE",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_12",
        // Issue 15 item 14: the class, not the cases (case-insensitive throughout).
        "Path",
        "path",
        "iterion_x",
        "ld_preload",
        "GIT_CONFIG",
        "GIT_CONFIG_KEY",
        "GIT_CONFIG_PARAMETERS",
        "git_config_parameters",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "GIT_PAGER",
        "GIT_EDITOR",
        "GIT_PROXY_COMMAND",
        "GIT_EXTERNAL_DIFF",
        "GIT_DIR",
        "GIT_TEMPLATE_DIR",
        "BASH_FUNC_echo%%",
        "BASH_FUNC_ls()",
        "BASH_FUNC_X",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "LD_BIND_NOW",
        "DYLD_INSERT_LIBRARIES",
        "GLIBC_TUNABLES",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONWARNINGS",
        "NODE_PATH",
        "NPM_CONFIG_SCRIPT_SHELL",
        "npm_config_registry",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "PAGER",
        "XDG_CONFIG_HOME",
        "ftp_proxy",
        "GRPC_PROXY",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "PIP_INDEX_URL",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "RUSTC_WRAPPER",
        "GOFLAGS",
        "NIX_CONFIG",
        "OPENSSL_CONF",
        "SSH_AUTH_SOCK",
        "DOCKER_HOST",
        // Not a name: a key holding `=` would smuggle a second variable into `KEY=VALUE`.
        "NODE_OPTIONS=--require /x #",
        "A=B",
        "",
        "1X",
        "X Y",
        "X\nLD_PRELOAD",
    ];
    let allowed = [
        "HTTP_PROXY_X",
        "NODE_ENV",
        "HOMEBREW",
        "LANG",
        "GIT_AUTHOR_NAME",
        "GIT_COMMITTER_EMAIL",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "DATABASE_URL",
        "RUST_LOG",
        "TZ",
        "CI",
        // Interactive-only in git (never run by the engine's non-interactive git).
        "EDITOR",
        "VISUAL",
    ];
    let wrong: Vec<&str> = denied
        .iter()
        .filter(|k| !is_denied_env_key(k))
        .chain(allowed.iter().filter(|k| is_denied_env_key(k)))
        .copied()
        .collect();
    assert_eq!(wrong, Vec::<&str>::new());
}

#[test]
fn network_defaulting_follows_the_table() {
    let known = || Some("iterion-default".to_owned());
    let rules = || vec!["a.com".to_owned()];
    let allow = |preset: Option<String>, rules: Vec<String>| Network {
        mode: Some(NetworkMode::Allowlist),
        preset,
        rules,
        inherit: None,
    };
    let cases: Vec<(Option<Network>, (Network, bool))> = vec![
        (None, (allow(known(), vec![]), true)),
        (Some(Network::default()), (allow(known(), vec![]), true)),
        (
            Some(Network {
                preset: known(),
                ..Network::default()
            }),
            (allow(known(), vec![]), false),
        ),
        (
            Some(Network {
                rules: rules(),
                ..Network::default()
            }),
            (allow(known(), rules()), true),
        ),
        (
            Some(Network {
                preset: Some("nope".to_owned()),
                rules: rules(),
                ..Network::default()
            }),
            (allow(known(), rules()), true),
        ),
        (
            Some(Network {
                mode: Some(NetworkMode::Open),
                ..Network::default()
            }),
            (
                Network {
                    mode: Some(NetworkMode::Open),
                    ..Network::default()
                },
                false,
            ),
        ),
        (
            Some(Network {
                mode: Some(NetworkMode::Denylist),
                rules: rules(),
                ..Network::default()
            }),
            (
                Network {
                    mode: Some(NetworkMode::Denylist),
                    rules: rules(),
                    ..Network::default()
                },
                false,
            ),
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            super::fuse::default_network(input.as_ref()),
            want,
            "{input:?}"
        );
    }
}

#[test]
fn the_overlay_fills_gaps_overrides_repository_keys_and_never_workflow_keys() {
    let mut spec = Spec {
        env: env(&[("REPO", "r"), ("WF", "w")]),
        ..Spec::default()
    };
    let overlay = EnvOverlay {
        vars: env(&[("REPO", "op"), ("WF", "op"), ("NEW", "op")]),
    };
    let applied = merge_environment_overlay(&mut spec, &overlay, &set(&["REPO"]));
    assert_eq!(
        (spec.env, applied),
        (
            env(&[("NEW", "op"), ("REPO", "op"), ("WF", "w")]),
            vec!["NEW".to_owned(), "REPO".to_owned()]
        )
    );
}

#[test]
fn without_a_repository_the_overlay_only_fills_gaps() {
    let mut spec = Spec {
        env: env(&[("WF", "w")]),
        ..Spec::default()
    };
    let overlay = EnvOverlay {
        vars: env(&[("WF", "op"), ("NEW", "op")]),
    };
    merge_environment_overlay(&mut spec, &overlay, &BTreeSet::new());
    assert_eq!(spec.env, env(&[("NEW", "op"), ("WF", "w")]));
}

#[test]
fn the_env_file_keeps_values_verbatim_and_flags_override_it() {
    let file = parse_env_file(
        "/etc/iterion.env",
        "# operator defaults\n\n  A=1\nB=\"quoted\" # not a comment\r\nC=x=y\nD=$HOME\nE=\n",
    )
    .unwrap();
    assert_eq!(
        file.vars,
        env(&[
            ("A", "1"),
            ("B", "\"quoted\" # not a comment"),
            ("C", "x=y"),
            ("D", "$HOME"),
            ("E", "")
        ])
    );
    let flags =
        parse_env_pairs(&["A=flag".to_owned(), "F=2".to_owned(), "F=3".to_owned()]).unwrap();
    assert_eq!(
        file.overridden_by(flags).vars,
        env(&[
            ("A", "flag"),
            ("B", "\"quoted\" # not a comment"),
            ("C", "x=y"),
            ("D", "$HOME"),
            ("E", ""),
            ("F", "3")
        ])
    );
}

#[test]
fn an_invalid_overlay_key_is_an_input_error_naming_the_key_not_the_value() {
    let cases = [
        (
            parse_env_file("f.env", "OK=1\n1BAD=secret\n"),
            "f.env:2: \"1BAD\"",
        ),
        (
            parse_env_file("f.env", "no equals sign\n"),
            "f.env:1: \"no equals sign\"",
        ),
        (
            parse_env_pairs(&["A-B=secret".to_owned()]),
            "--sandbox-env: \"A-B\"",
        ),
        (
            parse_env_pairs(&["=secret".to_owned()]),
            "--sandbox-env: \"\"",
        ),
    ];
    for (got, prefix) in cases {
        let error = got.unwrap_err();
        assert!(error.is_input_error());
        assert_eq!(
            error.to_string(),
            format!("{prefix}: want KEY=VALUE with KEY matching [A-Za-z_][A-Za-z0-9_]*")
        );
    }
}

fn resolve_without_file(
    mode: Mode,
    repo_root: Option<&std::path::Path>,
    workflow: Option<&Spec>,
    with_default: bool,
) -> crate::Result<ResolvedSpec> {
    let repo = Repo::new();
    let screen = ScreenContext::new(&repo.root, Some(&repo.home)).unwrap();
    let default = resolve_default_sandbox_image_with_fallback(None, None);
    let lookup = |name: &str| (name == "HOME").then(|| "/home/op".to_owned());
    let overlay = EnvOverlay {
        vars: env(&[("OP", "1")]),
    };
    resolve_sandbox_spec_with_fallback(&AutoInputs {
        mode,
        source_label: "global sandbox default",
        workflow,
        repo_root,
        devcontainer: &DevcontainerText::NotFound,
        default_image: with_default.then_some(&default),
        lookup: &lookup,
        overlay: &overlay,
        screen: &screen,
    })
}

#[test]
fn a_missing_devcontainer_gives_the_default_image_with_the_workflow_network_as_written() {
    let root = std::path::Path::new("/src/r");
    let workflow = Spec {
        mode: Mode::Auto,
        post_create: Some("echo ${localEnv:HOME}".to_owned()),
        ..Spec::default()
    };
    let got = resolve_without_file(Mode::Auto, Some(root), Some(&workflow), true).unwrap();
    let default = resolve_default_sandbox_image_with_fallback(None, None);
    let detail = format!(" (default image: {})", default.image);
    let want = ResolvedSpec {
        spec: Some(Spec {
            mode: Mode::Auto,
            image: Some(default.image.clone()),
            image_fallback: default.fallback.clone(),
            image_is_default: true,
            post_create: Some("echo /home/op".to_owned()),
            env: env(&[("OP", "1")]),
            ..Spec::default()
        }),
        source: format!("global sandbox default{detail}"),
        source_detail: detail,
        overlay_applied: vec!["OP".to_owned()],
        ..ResolvedSpec::default()
    };
    assert_eq!(got, want);
}

#[test]
fn the_other_rows_of_the_resolution_table() {
    let root = std::path::Path::new("/src/r");
    let none = resolve_without_file(Mode::None, Some(root), None, true).unwrap();
    assert_eq!(
        none,
        ResolvedSpec {
            source: "global sandbox default".to_owned(),
            ..ResolvedSpec::default()
        }
    );
    let no_root = resolve_without_file(Mode::Auto, None, None, true).unwrap();
    assert_eq!(
        (no_root.spec, no_root.skip_reason.as_deref()),
        (
            None,
            Some("no repository root: sandbox: auto needs a git repository")
        )
    );
    let no_default = resolve_without_file(Mode::Auto, Some(root), None, false).unwrap_err();
    assert_eq!(
        no_default.to_string(),
        "mode=auto but no .devcontainer/devcontainer.json found"
    );
    let inline_missing = resolve_without_file(Mode::Inline, Some(root), None, true).unwrap_err();
    assert_eq!(
        inline_missing.to_string(),
        "mode inline needs a workflow sandbox: block"
    );
    let block = Spec {
        mode: Mode::Inline,
        image: Some("i:${localEnv:HOME}".to_owned()),
        env: env(&[("OP", "wf")]),
        ..Spec::default()
    };
    let inline = resolve_without_file(Mode::Inline, Some(root), Some(&block), true).unwrap();
    assert_eq!(
        inline.spec,
        Some(Spec {
            image: Some("i:/home/op".to_owned()),
            ..block
        })
    );
}

#[test]
fn an_unusable_devcontainer_without_a_default_image_skips_with_the_reason() {
    let repo = Repo::with_file(".devcontainer/devcontainer.json", "{ nope");
    let screen = ScreenContext::new(&repo.root, Some(&repo.home)).unwrap();
    let lookup = |_: &str| None;
    let text = read_from_repo(&repo.root);
    let got = resolve_sandbox_spec_with_fallback(&AutoInputs {
        mode: Mode::Auto,
        source_label: "l",
        workflow: None,
        repo_root: Some(&repo.root),
        devcontainer: &text,
        default_image: None,
        lookup: &lookup,
        overlay: &EnvOverlay::default(),
        screen: &screen,
    })
    .unwrap();
    assert_eq!(
        (got.spec, got.skip_reason),
        (
            None,
            Some(format!(
                "devcontainer.json unreadable: {}: not JSONC: Expected string for object property on line 1 column 3",
                repo.dc_path().display()
            ))
        )
    );
}

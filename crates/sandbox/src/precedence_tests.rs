use super::*;
use crate::spec::Build;
use pretty_assertions::assert_eq;

/// (cli, workflow block, global) → (mode, label): the full matrix of SANDBOX.md §2.5's acceptance,
/// each row written out (`-` = absent).
const MODE_MATRIX: &[(&str, &str, &str, &str, &str)] = &[
    ("none", "none", "none", "none", "cli flag --sandbox"),
    ("none", "none", "auto", "none", "cli flag --sandbox"),
    ("none", "none", "-", "none", "cli flag --sandbox"),
    ("none", "auto", "none", "none", "cli flag --sandbox"),
    ("none", "auto", "auto", "none", "cli flag --sandbox"),
    ("none", "auto", "-", "none", "cli flag --sandbox"),
    ("none", "inline+image", "none", "none", "cli flag --sandbox"),
    ("none", "inline+image", "auto", "none", "cli flag --sandbox"),
    ("none", "inline+image", "-", "none", "cli flag --sandbox"),
    ("none", "inline+build", "none", "none", "cli flag --sandbox"),
    ("none", "inline+build", "auto", "none", "cli flag --sandbox"),
    ("none", "inline+build", "-", "none", "cli flag --sandbox"),
    ("none", "-", "none", "none", "cli flag --sandbox"),
    ("none", "-", "auto", "none", "cli flag --sandbox"),
    ("none", "-", "-", "none", "cli flag --sandbox"),
    ("auto", "none", "none", "auto", "cli flag --sandbox"),
    ("auto", "none", "auto", "auto", "cli flag --sandbox"),
    ("auto", "none", "-", "auto", "cli flag --sandbox"),
    ("auto", "auto", "none", "auto", "cli flag --sandbox"),
    ("auto", "auto", "auto", "auto", "cli flag --sandbox"),
    ("auto", "auto", "-", "auto", "cli flag --sandbox"),
    (
        "auto",
        "inline+image",
        "none",
        "inline",
        "workflow sandbox: block (overrides --sandbox=auto)",
    ),
    (
        "auto",
        "inline+image",
        "auto",
        "inline",
        "workflow sandbox: block (overrides --sandbox=auto)",
    ),
    (
        "auto",
        "inline+image",
        "-",
        "inline",
        "workflow sandbox: block (overrides --sandbox=auto)",
    ),
    (
        "auto",
        "inline+build",
        "none",
        "inline",
        "workflow sandbox: block (overrides --sandbox=auto)",
    ),
    (
        "auto",
        "inline+build",
        "auto",
        "inline",
        "workflow sandbox: block (overrides --sandbox=auto)",
    ),
    (
        "auto",
        "inline+build",
        "-",
        "inline",
        "workflow sandbox: block (overrides --sandbox=auto)",
    ),
    ("auto", "-", "none", "auto", "cli flag --sandbox"),
    ("auto", "-", "auto", "auto", "cli flag --sandbox"),
    ("auto", "-", "-", "auto", "cli flag --sandbox"),
    ("-", "none", "none", "none", "workflow sandbox: block"),
    ("-", "none", "auto", "none", "workflow sandbox: block"),
    ("-", "none", "-", "none", "workflow sandbox: block"),
    ("-", "auto", "none", "auto", "workflow sandbox: block"),
    ("-", "auto", "auto", "auto", "workflow sandbox: block"),
    ("-", "auto", "-", "auto", "workflow sandbox: block"),
    (
        "-",
        "inline+image",
        "none",
        "inline",
        "workflow sandbox: block",
    ),
    (
        "-",
        "inline+image",
        "auto",
        "inline",
        "workflow sandbox: block",
    ),
    (
        "-",
        "inline+image",
        "-",
        "inline",
        "workflow sandbox: block",
    ),
    (
        "-",
        "inline+build",
        "none",
        "inline",
        "workflow sandbox: block",
    ),
    (
        "-",
        "inline+build",
        "auto",
        "inline",
        "workflow sandbox: block",
    ),
    (
        "-",
        "inline+build",
        "-",
        "inline",
        "workflow sandbox: block",
    ),
    ("-", "-", "none", "none", "global sandbox default"),
    ("-", "-", "auto", "auto", "global sandbox default"),
    ("-", "-", "-", "", "default (no sandbox)"),
];

fn flag(word: &str) -> Option<SandboxFlag> {
    match word {
        "-" => None,
        other => Some(SandboxFlag::parse(other).unwrap()),
    }
}

fn block(word: &str) -> Option<Spec> {
    let spec = |mode| Spec {
        mode,
        ..Spec::default()
    };
    match word {
        "-" => None,
        "none" => Some(spec(Mode::None)),
        "auto" => Some(spec(Mode::Auto)),
        "inline+image" => Some(Spec {
            image: Some("alpine:3".to_owned()),
            ..spec(Mode::Inline)
        }),
        "inline+build" => Some(Spec {
            build: Some(Build::default()),
            ..spec(Mode::Inline)
        }),
        other => panic!("unknown block {other}"),
    }
}

#[test]
fn every_cli_block_and_global_combination_picks_the_specified_mode_and_label() {
    assert_eq!(MODE_MATRIX.len(), 45);
    let got: Vec<(&str, &str, &str, &str, &str)> = MODE_MATRIX
        .iter()
        .map(|(cli, blk, global, _, _)| {
            let block = block(blk);
            let (mode, source) = pick_mode(block.as_ref(), flag(cli), flag(global));
            (*cli, *blk, *global, mode.as_str(), source.label())
        })
        .collect();
    assert_eq!(got, MODE_MATRIX.to_vec());
}

#[test]
fn auto_flag_does_not_yield_to_an_inline_block_naming_no_container() {
    let bare_inline = Spec {
        mode: Mode::Inline,
        ..Spec::default()
    };
    let auto_with_image = Spec {
        mode: Mode::Auto,
        image: Some("alpine".to_owned()),
        ..Spec::default()
    };
    assert_eq!(
        (
            pick_mode(Some(&bare_inline), Some(SandboxFlag::Auto), None),
            pick_mode(Some(&auto_with_image), Some(SandboxFlag::Auto), None),
        ),
        ((Mode::Auto, Source::CliFlag), (Mode::Auto, Source::CliFlag))
    );
}

#[test]
fn the_override_variable_fills_the_cli_tier_and_the_flag_beats_it() {
    let inline = block("inline+image");
    let pick = |flag_word: &str, override_word: &str| {
        let (mode, source) = pick_mode(
            inline.as_ref(),
            cli_tier(flag(flag_word), flag(override_word)),
            Some(SandboxFlag::Auto),
        );
        (mode.as_str(), source.label())
    };
    assert_eq!(
        [
            pick("-", "none"),
            pick("auto", "none"),
            pick("none", "auto"),
            pick("-", "-")
        ],
        [
            ("none", "cli flag --sandbox"),
            (
                "inline",
                "workflow sandbox: block (overrides --sandbox=auto)"
            ),
            ("none", "cli flag --sandbox"),
            ("inline", "workflow sandbox: block"),
        ]
    );
}

#[test]
fn workflow_sandbox_active_looks_at_the_mode_only() {
    let inline = block("inline+image");
    assert_eq!(
        (
            workflow_sandbox_active(inline.as_ref(), None, None),
            workflow_sandbox_active(inline.as_ref(), Some(SandboxFlag::None), None),
            workflow_sandbox_active(None, None, Some(SandboxFlag::Auto)),
            workflow_sandbox_active(None, None, None),
        ),
        (true, false, true, false)
    );
}

#[test]
fn the_global_default_is_auto_when_unset_and_refuses_other_words() {
    let got: Vec<std::result::Result<SandboxFlag, String>> =
        [None, Some(""), Some(" NONE "), Some("auto"), Some("inline")]
            .into_iter()
            .map(|value| resolve_global_sandbox_default(value).map_err(|e| e.to_string()))
            .collect();
    assert_eq!(
        got,
        vec![
            Ok(SandboxFlag::Auto),
            Ok(SandboxFlag::Auto),
            Ok(SandboxFlag::None),
            Ok(SandboxFlag::Auto),
            Err("ITERION_SANDBOX_DEFAULT=\"inline\": want auto or none".to_owned()),
        ]
    );
    assert_eq!(
        (
            resolve_sandbox_override(None).ok(),
            resolve_sandbox_override(Some("none")).ok(),
            resolve_sandbox_override(Some("off")).map_err(|e| e.to_string()),
        ),
        (
            Some(None),
            Some(Some(SandboxFlag::None)),
            Err("ITERION_SANDBOX_OVERRIDE=\"off\": want auto or none".to_owned())
        )
    );
}

#[test]
fn each_host_state_tier_wins_over_the_ones_below_and_untrusted_forces_none() {
    use HostState::{Auto, None as Off, Unset};
    let rows = [
        // (block, cli, global, trust) → (state, label)
        ((Auto, Auto, Auto, Trust::Untrusted), (Off, "untrusted run")),
        (
            (Unset, Unset, Unset, Trust::Untrusted),
            (Off, "untrusted run"),
        ),
        (
            (Auto, Off, Auto, Trust::Trusted),
            (Off, "cli flag --sandbox-host-state"),
        ),
        (
            (Off, Auto, Off, Trust::Trusted),
            (Auto, "cli flag --sandbox-host-state"),
        ),
        (
            (Off, Unset, Auto, Trust::Trusted),
            (Off, "workflow sandbox.host_state"),
        ),
        (
            (Auto, Unset, Off, Trust::Trusted),
            (Auto, "workflow sandbox.host_state"),
        ),
        (
            (Unset, Unset, Off, Trust::Trusted),
            (Off, "ITERION_SANDBOX_HOST_STATE"),
        ),
        (
            (Unset, Unset, Auto, Trust::Trusted),
            (Auto, "ITERION_SANDBOX_HOST_STATE"),
        ),
        ((Unset, Unset, Unset, Trust::Trusted), (Unset, "default")),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|((block, cli, global, trust), _)| {
            let (state, source) = pick_host_state(*block, *cli, *global, *trust);
            ((*block, *cli, *global, *trust), (state, source.label()))
        })
        .collect();
    assert_eq!(got, rows.to_vec());
    assert_eq!(
        (
            resolve_host_state_setting(Some(" Auto ")).ok(),
            resolve_host_state_setting(None).ok(),
            resolve_host_state_setting(Some("yes")).map_err(|e| e.to_string()),
        ),
        (
            Some(HostState::Auto),
            Some(HostState::Unset),
            Err("ITERION_SANDBOX_HOST_STATE=\"yes\": want auto or none".to_owned())
        )
    );
}

#[test]
fn each_network_row_resolves_its_mode_rules_and_label() {
    let with = |network: Option<Network>| Spec {
        network,
        ..Spec::default()
    };
    let rules = |r: &[&str]| r.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let rows = [
        (with(None), NetworkOrigin::Workflow),
        (
            with(Some(Network {
                rules: rules(&["a.com"]),
                ..Network::default()
            })),
            NetworkOrigin::Workflow,
        ),
        (with(Some(Network::default())), NetworkOrigin::Workflow),
        (
            with(Some(Network {
                mode: Some(NetworkMode::Denylist),
                preset: Some("iterion-default".to_owned()),
                rules: rules(&["evil.example"]),
                inherit: None,
            })),
            NetworkOrigin::Workflow,
        ),
        (
            with(Some(Network {
                mode: Some(NetworkMode::Allowlist),
                preset: Some("iterion-default".to_owned()),
                rules: rules(&["x.dev"]),
                inherit: None,
            })),
            NetworkOrigin::DevcontainerDefault,
        ),
    ];
    let got: Vec<(NetworkPolicy, Option<&str>)> = rows
        .iter()
        .map(|(spec, origin)| {
            let policy = resolve_network_policy(spec, *origin);
            let warning = policy.warning();
            (policy, warning)
        })
        .collect();
    let policy = |mode, preset: Option<&str>, r: &[&str], source| NetworkPolicy {
        mode,
        preset: preset.map(str::to_owned),
        rules: rules(r),
        source,
    };
    assert_eq!(
        got,
        vec![
            (
                policy(NetworkMode::Open, None, &[], NetworkSource::Default),
                None
            ),
            (
                policy(
                    NetworkMode::Allowlist,
                    None,
                    &["a.com"],
                    NetworkSource::WorkflowNoMode
                ),
                Some("network: block has no mode; enforcing allowlist")
            ),
            (
                policy(
                    NetworkMode::Allowlist,
                    None,
                    &[],
                    NetworkSource::WorkflowNoMode
                ),
                Some("network: block has no mode; enforcing allowlist")
            ),
            (
                policy(
                    NetworkMode::Denylist,
                    Some("iterion-default"),
                    &["evil.example"],
                    NetworkSource::Workflow
                ),
                None
            ),
            (
                policy(
                    NetworkMode::Allowlist,
                    Some("iterion-default"),
                    &["x.dev"],
                    NetworkSource::DevcontainerDefault
                ),
                None
            ),
        ]
    );
    let labels: Vec<&str> = got.iter().map(|(p, _)| p.source.label()).collect();
    assert_eq!(
        labels,
        vec![
            "default (open)",
            "workflow sandbox.network (no mode: allowlist)",
            "workflow sandbox.network (no mode: allowlist)",
            "workflow sandbox.network",
            "devcontainer default (iterion-default)",
        ]
    );
}

#[test]
fn the_default_image_comes_from_the_flag_then_the_variable_then_the_built_in() {
    let rows = [
        (Some("my/flag:1"), Some("my/env:2")),
        (Some("  "), Some("my/env:2")),
        (None, Some("my/env:2")),
        (None, Some("")),
        (None, None),
    ];
    let got: Vec<DefaultImage> = rows
        .iter()
        .map(|(flag, env)| resolve_default_sandbox_image_with_fallback(*flag, *env))
        .collect();
    let image = |image: &str, fallback: Option<&str>, source| DefaultImage {
        image: image.to_owned(),
        fallback: fallback.map(str::to_owned),
        source,
    };
    let built_in = "ghcr.io/socialgouv/iterion-sandbox-slim:edge";
    let fallback = Some("ghcr.io/socialgouv/iterion-sandbox-slim:latest");
    assert_eq!(
        got,
        vec![
            image("my/flag:1", None, DefaultImageSource::CliFlag),
            image("my/env:2", None, DefaultImageSource::Env),
            image("my/env:2", None, DefaultImageSource::Env),
            image(built_in, fallback, DefaultImageSource::BuiltIn),
            image(built_in, fallback, DefaultImageSource::BuiltIn),
        ]
    );
    assert_eq!(
        [
            DefaultImageSource::CliFlag,
            DefaultImageSource::Env,
            DefaultImageSource::BuiltIn
        ]
        .map(DefaultImageSource::label),
        [
            "cli flag --sandbox-default-image",
            "ITERION_SANDBOX_DEFAULT_IMAGE",
            "built-in default"
        ]
    );
    assert_eq!(
        built_in_image(ImageVariant::Full),
        "ghcr.io/socialgouv/iterion-sandbox-full:edge"
    );
}

#[test]
fn the_pure_verdict_names_why_a_run_gets_no_container() {
    let inline = block("inline+image").unwrap();
    let none_block = block("none").unwrap();
    let auto_block = block("auto").unwrap();
    let verdict =
        |inputs: ModeInputs<'_>, resolution| match verdict_before_driver(&inputs, resolution) {
            Ok((mode, source, _)) => (mode, source.label(), None),
            Err(verdict) => (
                verdict.mode,
                verdict.source.label(),
                verdict.cause().map(|c| c.label()),
            ),
        };
    let resolved = SpecResolution::Resolved(&inline);
    let rows = [
        verdict(
            ModeInputs {
                workflow_block: Some(&inline),
                override_env: Some(SandboxFlag::None),
                ..ModeInputs::default()
            },
            resolved,
        ),
        verdict(
            ModeInputs {
                workflow_block: Some(&inline),
                cli_flag: Some(SandboxFlag::None),
                override_env: Some(SandboxFlag::None),
                ..ModeInputs::default()
            },
            resolved,
        ),
        verdict(
            ModeInputs {
                workflow_block: Some(&none_block),
                ..ModeInputs::default()
            },
            resolved,
        ),
        verdict(ModeInputs::default(), resolved),
        verdict(
            ModeInputs {
                workflow_block: Some(&auto_block),
                ..ModeInputs::default()
            },
            SpecResolution::NoRepositoryRoot,
        ),
        verdict(
            ModeInputs {
                global: Some(SandboxFlag::Auto),
                ..ModeInputs::default()
            },
            SpecResolution::NoRepositoryRoot,
        ),
        verdict(
            ModeInputs {
                workflow_block: Some(&inline),
                ..ModeInputs::default()
            },
            resolved,
        ),
    ];
    assert_eq!(
        rows.to_vec(),
        vec![
            (Mode::None, "cli flag --sandbox", Some("override none")),
            (Mode::None, "cli flag --sandbox", Some("opted out")),
            (Mode::None, "workflow sandbox: block", Some("opted out")),
            (
                Mode::Inherit,
                "default (no sandbox)",
                Some("no sandbox configuration")
            ),
            (
                Mode::Auto,
                "workflow sandbox: block",
                Some("auto without repository root")
            ),
            (
                Mode::Auto,
                "global sandbox default",
                Some("auto without repository root")
            ),
            (Mode::Inline, "workflow sandbox: block", None),
        ]
    );
}

//! The `--mount` grammar: what parses into what, and the predicate shared with §8.8.

use super::grammar::{MountSpec, validate_env_pair};
use super::*;
use crate::error::Error;
use crate::rules::{ArgRule, EnvRule, MountKind};
use pretty_assertions::assert_eq;

fn spec(kind: MountKind, source: Option<&str>, target: &str) -> MountSpec {
    MountSpec {
        kind,
        source: source.map(str::to_owned),
        target: target.to_owned(),
        read_only: false,
        bind_propagation: None,
        consistency: None,
        volume_nocopy: false,
        tmpfs_size_bytes: None,
        tmpfs_mode: None,
    }
}

#[test]
fn well_formed_mounts_parse_into_their_kind_and_options() {
    let rows = [
        (
            "type=bind,source=/a,target=/b",
            spec(MountKind::Bind, Some("/a"), "/b"),
        ),
        (
            "src=rel/dir,dst=/b",
            spec(MountKind::Bind, Some("rel/dir"), "/b"),
        ),
        (
            " type=volume,  source=cache,destination=/c,volume-nocopy",
            MountSpec {
                volume_nocopy: true,
                ..spec(MountKind::Volume, Some("cache"), "/c")
            },
        ),
        ("target=/anon", spec(MountKind::Volume, None, "/anon")),
        (
            "type=tmpfs,target=/t,tmpfs-size=64m,tmpfs-mode=1777,ro=false",
            MountSpec {
                tmpfs_size_bytes: Some(64 << 20),
                tmpfs_mode: Some(0o1777),
                ..spec(MountKind::Tmpfs, None, "/t")
            },
        ),
        (
            "type=bind,source=/a,target=/b,readonly,bind-propagation=rprivate,consistency=cached",
            MountSpec {
                read_only: true,
                bind_propagation: Some(BindPropagation::Rprivate),
                consistency: Some("cached".to_owned()),
                ..spec(MountKind::Bind, Some("/a"), "/b")
            },
        ),
    ];
    let got: Vec<(&str, MountSpec)> = rows
        .iter()
        .map(|(raw, _)| (*raw, parse_mount(raw).unwrap()))
        .collect();
    assert_eq!(got, rows.to_vec());
}

#[test]
fn a_host_bind_is_any_mount_with_a_source_and_no_other_type() {
    let rows = [
        ("type=bind,source=/a,target=/b", true),
        ("source=/a,target=/b", true),
        ("src=a,target=/b", true),
        ("type=volume,source=a,target=/b", false),
        ("type=tmpfs,target=/b", false),
        ("target=/b", false),
        // Kubernetes mounts are not host binds, even though the docker grammar refuses them.
        ("type=pvc,source=claim,target=/data", false),
        // Unparseable, but still classified, failing closed.
        ("type=volume,type=bind,source=/a,target=/b", true),
        ("source=/a,,target=/b", true),
    ];
    let got: Vec<(&str, bool)> = rows
        .iter()
        .map(|(raw, _)| (*raw, mount_is_host_bind(raw)))
        .collect();
    assert_eq!(got, rows.to_vec());
}

#[test]
fn plain_arguments_refuse_control_characters_and_a_leading_dash_only() {
    let rows = [
        ("image", "", None),
        ("image", "ghcr.io/x/y:1", None),
        ("user", "1000:1000", None),
        ("image", "--privileged", Some(ArgRule::LeadingDash)),
        ("user", "root\n", Some(ArgRule::ControlCharacter)),
        ("workdir", "/w\u{1b}[2J", Some(ArgRule::ControlCharacter)),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(label, value, _)| {
            let rule = match validate_plain_arg(label, value) {
                Ok(()) => None,
                Err(Error::InvalidArgument { rule, .. }) => Some(rule),
                Err(other) => panic!("{other}"),
            };
            (*label, *value, rule)
        })
        .collect();
    assert_eq!(got, rows.to_vec());
}

#[test]
fn env_pairs_refuse_bad_keys_and_line_breaking_values_without_naming_the_value() {
    let rows = [
        ("A", "x=y\tz", None),
        ("A", "", None),
        ("", "value-one", Some(EnvRule::EmptyKey)),
        ("A=B", "value-two", Some(EnvRule::KeyContainsEquals)),
        ("A\n", "value-three", Some(EnvRule::KeyControlCharacter)),
        ("A", "line\nbreak", Some(EnvRule::ValueControlCharacter)),
        ("A", "nul\0", Some(EnvRule::ValueControlCharacter)),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(key, value, _)| {
            let rule = match validate_env_pair(key, value) {
                Ok(()) => None,
                Err(error @ Error::InvalidEnv { .. }) => {
                    assert!(!error.to_string().contains(value), "{error}");
                    match error {
                        Error::InvalidEnv { rule, .. } => Some(rule),
                        _ => None,
                    }
                }
                Err(other) => panic!("{other}"),
            };
            (*key, *value, rule)
        })
        .collect();
    assert_eq!(got, rows.to_vec());
}

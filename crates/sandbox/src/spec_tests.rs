use super::*;
use pretty_assertions::assert_eq;

const SECRET: &str = "s3cr3t-value-that-must-never-print";

fn inline_image() -> Spec {
    Spec {
        mode: Mode::Inline,
        image: Some("alpine:3".to_owned()),
        ..Spec::default()
    }
}

fn secret(name: &str, path: &str, env: Option<&str>) -> SecretFileMount {
    SecretFileMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        env: env.map(str::to_owned),
        value: SecretBytes::from(SECRET),
    }
}

/// A validation row: name, spec, and the (field, reason) it must fail with.
type Row = (&'static str, Spec, Option<(&'static str, &'static str)>);

fn field_of(spec: &Spec) -> Option<(String, String)> {
    match spec.validate() {
        Ok(()) => None,
        Err(Error::InvalidSpec { field, reason }) => Some((field, reason)),
        Err(other) => panic!("not InvalidSpec: {other}"),
    }
}

#[test]
fn each_validation_rule_names_its_field() {
    let network = |preset: &str| Network {
        preset: Some(preset.to_owned()),
        ..Network::default()
    };
    let rows: Vec<Row> = vec![
        ("valid inline image", inline_image(), None),
        (
            "valid inline build",
            Spec {
                mode: Mode::Inline,
                build: Some(Build::default()),
                ..Spec::default()
            },
            None,
        ),
        ("valid empty spec", Spec::default(), None),
        (
            "inline without image or build",
            Spec {
                mode: Mode::Inline,
                image: Some(String::new()),
                ..Spec::default()
            },
            Some(("image", "mode inline needs image or build")),
        ),
        (
            "image and build",
            Spec {
                build: Some(Build::default()),
                ..inline_image()
            },
            Some(("image", "image and build are exclusive; set only one")),
        ),
        (
            "unknown preset",
            Spec {
                network: Some(network("corp-proxy")),
                ..inline_image()
            },
            Some((
                "network.preset",
                "unknown preset \"corp-proxy\" (known: iterion-default)",
            )),
        ),
        (
            "known preset",
            Spec {
                network: Some(network("iterion-default")),
                ..inline_image()
            },
            None,
        ),
        (
            "relative workspace folder",
            Spec {
                workspace_folder: Some("work".to_owned()),
                ..inline_image()
            },
            Some(("workspace_folder", "work is not absolute")),
        ),
        (
            "unclean workspace folder",
            Spec {
                workspace_folder: Some("/work/../etc/".to_owned()),
                ..inline_image()
            },
            Some(("workspace_folder", "/work/../etc/ is not clean (want /etc)")),
        ),
        (
            "relative secret path",
            Spec {
                secret_files: vec![secret("a", "run/a", None)],
                ..inline_image()
            },
            Some(("secret_files[0].mount_path", "run/a is not absolute")),
        ),
        (
            "root secret path",
            Spec {
                secret_files: vec![secret("a", "/", None)],
                ..inline_image()
            },
            Some(("secret_files[0].mount_path", "may not be /")),
        ),
        (
            "secret path with a comma",
            Spec {
                secret_files: vec![secret("a", "/x,readonly=false", None)],
                ..inline_image()
            },
            Some((
                "secret_files[0].mount_path",
                "may not contain a newline, carriage return, NUL or comma",
            )),
        ),
        (
            "secret path with a newline",
            Spec {
                secret_files: vec![secret("a", "/x\n", None)],
                ..inline_image()
            },
            Some((
                "secret_files[0].mount_path",
                "may not contain a newline, carriage return, NUL or comma",
            )),
        ),
        (
            "secret env not a name",
            Spec {
                secret_files: vec![secret("a", "/run/a", Some("1BAD"))],
                ..inline_image()
            },
            Some((
                "secret_files[0].env",
                "\"1BAD\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
            )),
        ),
        (
            "two secrets sharing a path",
            Spec {
                secret_files: vec![
                    secret("a", "/run/s", Some("A")),
                    secret("b", "/run/s", None),
                ],
                ..inline_image()
            },
            Some((
                "secret_files[1].mount_path",
                "/run/s is already the mount_path of another secret file",
            )),
        ),
    ];
    let got: Vec<(&str, Option<(String, String)>)> = rows
        .iter()
        .map(|(name, spec, _)| (*name, field_of(spec)))
        .collect();
    let want: Vec<(&str, Option<(String, String)>)> = rows
        .iter()
        .map(|(name, _, want)| (*name, want.map(|(f, r)| (f.to_owned(), r.to_owned()))))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_first_failing_rule_wins() {
    let spec = Spec {
        mode: Mode::Inline,
        workspace_folder: Some("relative".to_owned()),
        network: Some(Network {
            preset: Some("nope".to_owned()),
            ..Network::default()
        }),
        secret_files: vec![secret("a", "/", None)],
        ..Spec::default()
    };
    assert_eq!(
        field_of(&spec).map(|(field, _)| field),
        Some("image".to_owned())
    );
    let spec = Spec {
        image: Some("alpine".to_owned()),
        ..spec
    };
    assert_eq!(
        field_of(&spec).map(|(field, _)| field),
        Some("network.preset".to_owned())
    );
}

#[test]
fn a_secret_value_never_appears_in_debug_or_json() {
    let spec = Spec {
        secret_files: vec![secret("api", "/run/iterion/secrets/api", Some("API_FILE"))],
        ..inline_image()
    };
    let debug = format!("{spec:?}");
    let pretty = format!("{spec:#?}");
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(
        (
            debug.contains(SECRET),
            pretty.contains(SECRET),
            json.contains(SECRET)
        ),
        (false, false, false)
    );
    assert!(debug.contains("SecretBytes { .. }"), "{debug}");
    assert_eq!(
        serde_json::to_value(&spec).unwrap(),
        serde_json::json!({
            "mode": "inline",
            "image": "alpine:3",
            "host_state": "",
            "secret_files": [
                {"name": "api", "mount_path": "/run/iterion/secrets/api", "env": "API_FILE"}
            ]
        })
    );
}

#[test]
fn names_container_ignores_an_empty_image() {
    let empty = Spec {
        image: Some(String::new()),
        ..Spec::default()
    };
    assert_eq!(
        (
            empty.names_container(),
            inline_image().names_container(),
            Spec {
                build: Some(Build::default()),
                ..Spec::default()
            }
            .names_container()
        ),
        (false, true, true)
    );
}

#[test]
fn a_build_block_defaults_to_the_dockerfile_in_the_workspace() {
    let build: Build = serde_json::from_str("{}").unwrap();
    assert_eq!(
        build,
        Build {
            dockerfile: "Dockerfile".to_owned(),
            context: None,
            args: BTreeMap::new()
        }
    );
}

#[test]
fn attack_a_workspace_folder_may_not_be_the_root_or_the_engines_reserved_tree() {
    for folder in ["/", "/run/iterion", "/run/iterion/bin", "/run/iterion/net"] {
        let spec = Spec {
            workspace_folder: Some(folder.to_owned()),
            ..inline_image()
        };
        assert_eq!(
            field_of(&spec).map(|(field, _)| field),
            Some("workspace_folder".to_owned()),
            "{folder}"
        );
    }
    let spec = Spec {
        workspace_folder: Some("/run/iterionx".to_owned()),
        ..inline_image()
    };
    assert_eq!(field_of(&spec), None);
}

//! Property tests for the mount grammar and screening (STYLE.md §5.15): random input never
//! panics, what parses is well-formed, the host-bind predicate agrees with the parser, and a
//! relative source that passes never leaves the workspace nor lands on a sensitive path.

use std::os::unix::fs::symlink;

use proptest::prelude::*;

use super::*;
use crate::rules::MountKind;
use crate::text::{clean, has_control, is_clean_absolute};

fn item() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("type"),
        Just("source"),
        Just("src"),
        Just("target"),
        Just("dst"),
        Just("readonly"),
        Just("ro"),
        Just("bind-propagation"),
        Just("volume-nocopy"),
        Just("tmpfs-size"),
        Just("volume-opt"),
        Just("x"),
    ];
    let value = prop_oneof![
        Just("bind".to_owned()),
        Just("volume".to_owned()),
        Just("tmpfs".to_owned()),
        Just("/".to_owned()),
        Just("/data".to_owned()),
        Just("/run/iterion/x".to_owned()),
        Just("vol".to_owned()),
        Just("rel/../x".to_owned()),
        "[ -~\n\0]{0,12}",
    ];
    (key, proptest::option::of(value)).prop_map(|(key, value)| match value {
        Some(value) => format!("{key}={value}"),
        None => key.to_owned(),
    })
}

fn mount() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(item(), 0..6).prop_map(|items| items.join(",")),
        ".{0,40}",
    ]
}

proptest! {
    #[test]
    fn what_parses_is_well_formed_and_agrees_with_the_host_bind_predicate(raw in mount()) {
        if let Ok(spec) = parse_mount(&raw) {
            prop_assert!(!has_control(&raw));
            prop_assert!(!raw.trim_start().starts_with('-'));
            prop_assert!(is_clean_absolute(&spec.target) && spec.target != "/");
            prop_assert!(!spec.target.starts_with("/run/iterion"));
            prop_assert_eq!(spec.kind == MountKind::Bind, mount_is_host_bind(&raw));
            prop_assert!(!raw.contains("volume-opt") && !raw.contains("volume-driver"));
        }
    }

    #[test]
    fn cleaning_a_path_is_idempotent(path in "[/a.]{0,16}") {
        let once = clean(&path);
        prop_assert_eq!(clean(&once), once.clone());
        if path.starts_with('/') {
            prop_assert!(is_clean_absolute(&once));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn an_accepted_relative_source_stays_in_the_workspace_and_off_sensitive_paths(
        parts in proptest::collection::vec(
            prop_oneof![Just(".."), Just("."), Just("sub"), Just("link-out"), Just("link-ssh"), Just("link-sub")],
            1..6,
        )
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home/user");
        let ws = home.join("proj");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        symlink(root.join("outside"), ws.join("link-out")).unwrap();
        symlink(home.join(".ssh"), ws.join("link-ssh")).unwrap();
        symlink("sub", ws.join("link-sub")).unwrap();
        let ctx = ScreenContext::new(&ws, Some(&home)).unwrap();

        let mount = format!("source={},target=/x", parts.join("/"));
        if let Ok(screened) = validate_mount(&mount, &ctx) {
            let source = screened.host_source.unwrap();
            prop_assert!(source.starts_with(&ws), "{} -> {}", mount, source.display());
            prop_assert_eq!(ctx.sensitivity(&source), None);
        }
    }
}

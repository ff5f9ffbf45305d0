use super::*;
use pretty_assertions::assert_eq;

#[test]
fn a_run_is_named_after_its_id_and_labelled_with_its_store() {
    let mut info = RunInfo::new(
        "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
        "store-1",
        "/ws",
        "/run/x",
    );
    info.friendly_name = "fix the bug: tests/ (again)".to_owned();
    assert_eq!(
        (container_name(&info.run_id), managed_labels(&info)),
        (
            "iterion-0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".to_owned(),
            BTreeMap::from([
                ("iterion.io/managed".to_owned(), "true".to_owned()),
                (
                    "iterion.io/run-id".to_owned(),
                    "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".to_owned()
                ),
                (
                    "iterion.io/run-name".to_owned(),
                    "fix-the-bug--tests---again-".to_owned()
                ),
                ("iterion.io/store".to_owned(), "store-1".to_owned()),
            ])
        )
    );
}

#[test]
fn names_and_tags_are_bounded() {
    let long = "A_".repeat(100);
    assert_eq!(
        (
            container_name(&long).len(),
            run_name_label(&long).map(|n| n.len()),
            run_name_label(""),
            build_image_tag(&long).len(),
            build_image_tag("Run_ID"),
        ),
        (
            64,
            Some(63),
            None,
            "iterion-sandbox-build:".len() + 128,
            "iterion-sandbox-build:run-id".to_owned(),
        )
    );
}

#[test]
fn the_nix_volume_is_skipped_for_untrusted_runs_short_ids_and_when_disabled() {
    let id = "sha256:0123456789abcdef0123";
    assert_eq!(
        (
            nix_volume_name(id, Trust::Trusted, None),
            nix_volume_name(id, Trust::Trusted, Some(" Off ")),
            nix_volume_name(id, Trust::Trusted, Some("on")),
            nix_volume_name(id, Trust::Untrusted, None),
            nix_volume_name("sha256:0123", Trust::Trusted, None),
            nix_volume_name("sha256:zzzzzzzzzzzzzz", Trust::Trusted, None),
        ),
        (
            Some("iterion-nix-0123456789ab".to_owned()),
            None,
            Some("iterion-nix-0123456789ab".to_owned()),
            None,
            None,
            None,
        )
    );
}

#[test]
fn orphan_listing_keeps_only_this_stores_managed_resources() {
    let resource = |id: &str, labels: &[(&str, &str)]| ListedResource {
        id: id.to_owned(),
        name: format!("iterion-{id}"),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    let listed = vec![
        resource(
            "c1",
            &[
                (LABEL_MANAGED, "true"),
                (LABEL_STORE, "s1"),
                (LABEL_RUN_ID, "r1"),
            ],
        ),
        resource("c2", &[(LABEL_MANAGED, "true"), (LABEL_STORE, "s1")]),
        resource(
            "c3",
            &[
                (LABEL_MANAGED, "true"),
                (LABEL_STORE, "s2"),
                (LABEL_RUN_ID, "r3"),
            ],
        ),
        resource("c4", &[(LABEL_STORE, "s1"), (LABEL_RUN_ID, "r4")]),
        resource(
            "v5",
            &[
                (LABEL_MANAGED, "true"),
                (LABEL_STORE, "s1"),
                (LABEL_PURPOSE, "nix-store"),
            ],
        ),
    ];
    assert_eq!(
        filter_managed(&listed, "s1"),
        vec![
            ManagedResource {
                id: "c1".to_owned(),
                name: "iterion-c1".to_owned(),
                run_id: "r1".to_owned()
            },
            ManagedResource {
                id: "c2".to_owned(),
                name: "iterion-c2".to_owned(),
                run_id: String::new()
            },
        ]
    );
    assert_eq!(
        managed_filters("s1"),
        vec!["iterion.io/managed=true", "iterion.io/store=s1"]
    );
}

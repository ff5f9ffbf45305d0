//! M12 (SANDBOX.md §8.8): `finalize_mounts_for_driver`. A driver that cannot bind host paths (a
//! copy-based one: kubernetes) would otherwise be handed binds it silently ignores, and the
//! variables promising them (`ITERION_ARTIFACT_FILES_DIR`) would point at empty directories.
//! So every host bind — the author's own `sandbox.mounts:` entries included — is removed, the
//! promises they made are withdrawn, and one event says what went.
//!
//! Pure: it only edits the spec and returns the event.

use std::collections::BTreeSet;

use iterion_sandbox::{EngineMountKind, Spec, mount_is_host_bind};

use crate::records::sandbox_events::SandboxHostBindsDropped;

/// The env keys whose value is a path a bind may serve (M2's run files dir).
const BIND_PROMISES: [&str; 1] = ["ITERION_ARTIFACT_FILES_DIR"];

/// The target of an author mount string, read lexically (`target=`, `destination=`, `dst=`).
fn author_target(mount: &str) -> Option<String> {
    mount.split(',').find_map(|item| {
        let (key, value) = item.split_once('=')?;
        matches!(key.trim(), "target" | "destination" | "dst").then(|| value.trim().to_owned())
    })
}

/// `path` with trailing `/` and surrounding whitespace removed (`/` stays `/`).
fn normalised(path: &str) -> String {
    let trimmed = path.trim().trim_end_matches('/');
    if trimmed.is_empty() && path.trim().starts_with('/') {
        "/".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Whether `path` is `target` or lies under it.
fn served_by(path: &str, target: &str) -> bool {
    let (path, target) = (normalised(path), normalised(target));
    path == target || target == "/" || path.starts_with(&format!("{target}/"))
}

/// §8.8: on a driver without host binds, drops every host bind from `spec` and withdraws the
/// variables only those binds served. Returns the `sandbox_host_binds_dropped` payload when
/// something was dropped; a host-bind driver changes nothing.
pub(crate) fn finalize_mounts_for_driver(
    spec: &mut Spec,
    host_binds: bool,
    driver: &str,
) -> Option<SandboxHostBindsDropped> {
    if host_binds {
        return None;
    }
    let mut dropped = BTreeSet::new();
    spec.mounts.retain(|mount| {
        if mount_is_host_bind(mount) {
            dropped.insert(author_target(mount).unwrap_or_else(|| mount.clone()));
            false
        } else {
            true
        }
    });
    spec.engine_mounts.retain(|mount| {
        if mount.kind == EngineMountKind::Bind {
            dropped.insert(mount.target.clone());
            false
        } else {
            true
        }
    });
    if dropped.is_empty() {
        return None;
    }
    let kept: Vec<String> = spec
        .mounts
        .iter()
        .filter_map(|m| author_target(m))
        .chain(spec.engine_mounts.iter().map(|m| m.target.clone()))
        .collect();
    let mut withdrawn_env = Vec::new();
    for key in BIND_PROMISES {
        let Some(value) = spec.env.get(key) else {
            continue;
        };
        let lost = dropped.iter().any(|t| served_by(value, t));
        let still_served = kept.iter().any(|t| served_by(value, t));
        if lost && !still_served {
            spec.env.remove(key);
            withdrawn_env.push(key.to_owned());
        }
    }
    withdrawn_env.sort();
    Some(SandboxHostBindsDropped {
        driver: driver.to_owned(),
        dropped: dropped.into_iter().collect(),
        withdrawn_env,
        // No attachments dir is planned yet (M1 has no producer), so there is nothing to clear.
        attachments_dir_cleared: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use iterion_sandbox::EngineMount;
    use pretty_assertions::assert_eq;

    fn engine_bind(target: &str) -> EngineMount {
        EngineMount {
            kind: EngineMountKind::Bind,
            source: format!("/host{target}"),
            target: target.to_owned(),
            read_only: false,
            purpose: "test".to_owned(),
        }
    }

    fn spec() -> Spec {
        let mut spec = Spec {
            image: Some("img".to_owned()),
            ..Spec::default()
        };
        spec.mounts = vec![
            "source=./cache,target=/cache".to_owned(),
            "type=bind,src=/data,dst=/data/".to_owned(),
            "type=volume,source=named,target=/vol".to_owned(),
            "type=tmpfs,target=/scratch".to_owned(),
        ];
        spec.engine_mounts = vec![
            engine_bind("/iterion/artifact-files"),
            engine_bind("/run/iterion/bin/iterion"),
            EngineMount {
                kind: EngineMountKind::Volume,
                source: "nix".to_owned(),
                target: "/nix".to_owned(),
                read_only: false,
                purpose: "nix".to_owned(),
            },
        ];
        spec.env.insert(
            "ITERION_ARTIFACT_FILES_DIR".to_owned(),
            "/iterion/artifact-files/ ".to_owned(),
        );
        spec.env.insert("KEEP".to_owned(), "/cache".to_owned());
        spec
    }

    #[test]
    fn a_host_bind_driver_changes_nothing() {
        let mut s = spec();
        assert_eq!(finalize_mounts_for_driver(&mut s, true, "docker"), None);
        assert_eq!(s, spec());
    }

    #[test]
    fn every_host_bind_goes_and_the_run_files_promise_is_withdrawn() {
        let mut s = spec();
        let event = finalize_mounts_for_driver(&mut s, false, "kubernetes").unwrap();
        assert_eq!(
            event,
            SandboxHostBindsDropped {
                driver: "kubernetes".to_owned(),
                dropped: vec![
                    "/cache".to_owned(),
                    "/data/".to_owned(),
                    "/iterion/artifact-files".to_owned(),
                    "/run/iterion/bin/iterion".to_owned(),
                ],
                withdrawn_env: vec!["ITERION_ARTIFACT_FILES_DIR".to_owned()],
                attachments_dir_cleared: false,
            }
        );
        assert_eq!(
            s.mounts,
            vec![
                "type=volume,source=named,target=/vol".to_owned(),
                "type=tmpfs,target=/scratch".to_owned(),
            ]
        );
        assert_eq!(s.engine_mounts.len(), 1);
        assert_eq!(s.env.get("KEEP").map(String::as_str), Some("/cache"));
    }

    #[test]
    fn a_workflow_value_naming_a_kept_mount_stays() {
        let mut s = spec();
        s.env.insert(
            "ITERION_ARTIFACT_FILES_DIR".to_owned(),
            "/vol/files".to_owned(),
        );
        let event = finalize_mounts_for_driver(&mut s, false, "kubernetes").unwrap();
        assert_eq!(event.withdrawn_env, Vec::<String>::new());
        assert_eq!(
            s.env.get("ITERION_ARTIFACT_FILES_DIR").map(String::as_str),
            Some("/vol/files")
        );
    }

    #[test]
    fn nothing_to_drop_means_no_event() {
        let mut s = Spec {
            image: Some("img".to_owned()),
            mounts: vec!["type=volume,source=v,target=/v".to_owned()],
            ..Spec::default()
        };
        assert_eq!(
            finalize_mounts_for_driver(&mut s, false, "kubernetes"),
            None
        );
    }

    #[test]
    fn paths_are_compared_as_paths() {
        assert!(served_by(
            "/iterion/artifact-files/",
            "/iterion/artifact-files"
        ));
        assert!(served_by(
            "/iterion/artifact-files/x",
            "/iterion/artifact-files/"
        ));
        assert!(!served_by(
            "/iterion/artifact-filesX",
            "/iterion/artifact-files"
        ));
        assert!(served_by("/anything", "/"));
    }
}

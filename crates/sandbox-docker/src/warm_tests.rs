use bollard::models::{HostConfig, Mount};
use pretty_assertions::assert_eq;

use super::*;

fn bind(source: &str, target: &str, read_only: bool) -> Mount {
    Mount {
        typ: Some(MountType::BIND),
        source: Some(source.to_owned()),
        target: Some(target.to_owned()),
        read_only: Some(read_only),
        ..Mount::default()
    }
}

/// A run's body as `create_plan` shapes it: the workspace, a per-run `net/` dir and run files.
fn body(run_id: &str, token: &str, cap_drop: Option<Vec<String>>) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some("img".to_owned()),
        env: Some(vec![
            format!("HTTPS_PROXY=http://t:{token}@127.0.0.1:3128"),
            "FOO=1".to_owned(),
        ]),
        labels: Some(HashMap::from([
            ("iterion.io/run-id".to_owned(), run_id.to_owned()),
            ("iterion.io/managed".to_owned(), "true".to_owned()),
            ("iterion.io/test-id".to_owned(), "t".to_owned()),
        ])),
        host_config: Some(HostConfig {
            mounts: Some(vec![
                bind("/ws", "/ws", false),
                bind(&format!("/rt/{run_id}/net"), "/run/iterion/net", true),
                bind(
                    &format!("/home/runs/{run_id}/files"),
                    "/run/iterion/files",
                    false,
                ),
            ]),
            cap_drop,
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    }
}

fn info(run_id: &str, trust: Trust) -> RunInfo {
    let mut info = RunInfo::new(run_id, "store", "/ws", format!("/rt/{run_id}"));
    info.trust = trust;
    info
}

fn dirs(_: &Path) -> Option<SlotKind> {
    Some(SlotKind::Dir)
}

#[test]
fn two_runs_of_one_spec_share_a_shape_whatever_their_env_ids_and_per_run_dirs() {
    let a = shape_of(
        &body("run-a", "tok-a", None),
        &info("run-a", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    let b = shape_of(
        &body("run-b", "tok-b", None),
        &info("run-b", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    assert_eq!(a.key, b.key);
    assert!(
        !a.key.contains("tok-a") && !a.key.contains("run-a"),
        "{}",
        a.key
    );
    assert_eq!(
        b.env,
        vec![
            (
                "HTTPS_PROXY".to_owned(),
                "http://t:tok-b@127.0.0.1:3128".to_owned()
            ),
            ("FOO".to_owned(), "1".to_owned()),
        ]
    );
    assert_eq!(
        b.run_sources,
        vec![
            PathBuf::from("/rt/run-b/net"),
            PathBuf::from("/home/runs/run-b/files")
        ]
    );
    let slots: Vec<(usize, PathBuf)> = b
        .template
        .slots
        .iter()
        .map(|slot| (slot.mount, slot.parent.clone()))
        .collect();
    assert_eq!(
        slots,
        vec![(1, PathBuf::from("/rt")), (2, PathBuf::from("/home/runs"))]
    );
    // The template names no run: no env, no run id label; the embedder's label stays.
    let labels = b.template.body.labels.clone().unwrap();
    assert_eq!(
        (
            b.template.body.env.is_none(),
            labels.contains_key("iterion.io/run-id"),
            labels.get("iterion.io/test-id").map(String::as_str),
            labels.get(LABEL_PURPOSE).map(String::as_str),
        ),
        (true, false, Some("t"), Some(WARM_PURPOSE))
    );
}

#[test]
fn trust_is_part_of_the_shape_even_with_an_identical_body() {
    let trusted = shape_of(
        &body("run-a", "t", None),
        &info("run-a", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    let untrusted = shape_of(
        &body("run-b", "t", None),
        &info("run-b", Trust::Untrusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    assert_ne!(trusted.key, untrusted.key);
}

#[test]
fn what_is_fixed_at_create_time_is_in_the_key() {
    let plain = shape_of(
        &body("run-a", "t", None),
        &info("run-a", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    let dropped = shape_of(
        &body("run-b", "t", Some(vec!["ALL".to_owned()])),
        &info("run-b", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    assert_ne!(plain.key, dropped.key);
    let mut other_ws = body("run-c", "t", None);
    other_ws
        .host_config
        .as_mut()
        .unwrap()
        .mounts
        .as_mut()
        .unwrap()[0] = bind("/ws2", "/ws2", false);
    let other = shape_of(
        &other_ws,
        &info("run-c", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    assert_ne!(plain.key, other.key);
}

#[test]
fn what_a_slot_cannot_stand_in_for_is_never_pooled() {
    let trusted = info("run-a", Trust::Trusted);
    let never = |not: NotPooled| shape_of(&body("run-a", "t", None), &trusted, not, &dirs).is_err();
    assert!(never(NotPooled {
        secret_files: true,
        ..NotPooled::default()
    }));
    assert!(never(NotPooled {
        built_image: true,
        ..NotPooled::default()
    }));
    assert!(never(NotPooled {
        staged_binds: true,
        ..NotPooled::default()
    }));
    let mut listener = info("run-a", Trust::Trusted);
    listener.listener_planned = true;
    assert!(
        shape_of(
            &body("run-a", "t", None),
            &listener,
            NotPooled::default(),
            &dirs
        )
        .is_err()
    );
    // A per-run dir with content (a worktree, a copy), or a missing one.
    assert!(
        shape_of(
            &body("run-a", "t", None),
            &trusted,
            NotPooled::default(),
            &|_| None
        )
        .is_err()
    );
    // A writable per-run file.
    let files = |p: &Path| {
        Some(if p.ends_with("files") {
            SlotKind::File
        } else {
            SlotKind::Dir
        })
    };
    assert!(
        shape_of(
            &body("run-a", "t", None),
            &trusted,
            NotPooled::default(),
            &files
        )
        .is_err()
    );
    // The run id left anywhere else (a per-run workspace target).
    let mut per_run_target = body("run-a", "t", None);
    per_run_target.working_dir = Some("/work/run-a".to_owned());
    assert!(shape_of(&per_run_target, &trusted, NotPooled::default(), &dirs).is_err());
}

#[test]
fn an_owner_is_gone_only_when_this_host_can_tell() {
    let me = this_owner();
    assert!(!owner_is_gone(&me), "this process is alive: {me}");
    let parts: Vec<&str> = me.split('/').collect();
    let (boot, ns) = (parts[0], parts[1]);
    // A pid that is not running (pid_max is far below this), same boot and namespace: gone.
    assert!(owner_is_gone(&format!("{boot}/{ns}/4194304999/1")));
    // This pid with another start time (a recycled pid): gone.
    assert!(owner_is_gone(&format!(
        "{boot}/{ns}/{}/1",
        std::process::id()
    )));
    // Another boot, another namespace, or nonsense: kept.
    assert!(!owner_is_gone(&format!("other-boot/{ns}/4194304999/1")));
    assert!(!owner_is_gone(&format!("{boot}/pid:[1]/4194304999/1")));
    assert!(!owner_is_gone("garbage"));
}

#[test]
fn only_slot_named_paths_are_ever_removed() {
    let dir = tempfile::tempdir().unwrap();
    let slot = dir.path().join(format!("{SLOT_PREFIX}x-0"));
    let other = dir.path().join("precious");
    std::fs::create_dir(&slot).unwrap();
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("f"), "keep").unwrap();
    remove_slots([slot.as_path(), other.as_path()]);
    assert_eq!((slot.exists(), other.join("f").exists()), (false, true));
}

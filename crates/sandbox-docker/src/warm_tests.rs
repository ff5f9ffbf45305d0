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

#[test]
fn a_claim_is_staked_once_whoever_races_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let claims = dir.path().to_owned();
    // Eight claimers (threads standing in for processes: the marker is a file, shared by all).
    let won: Vec<bool> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|n| {
                let claims = claims.clone();
                scope.spawn(move || {
                    stake_claim(&claims, "abc123", &format!("owner-{n}"))
                        .unwrap()
                        .is_some()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
    // The marker names the winner whole (written before it was linked into place).
    let holder = claim_holder(&claims, "abc123").unwrap();
    assert!(holder.starts_with("owner-"), "{holder:?}");
    // Nothing staged is left beside it; another entry is claimable.
    let names: Vec<String> = std::fs::read_dir(&claims)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![format!("{CLAIM_PREFIX}abc123")]);
    assert!(claim_holder(&claims, "def456").is_none());
    // An id that is not a plain name never becomes a path.
    assert!(stake_claim(&claims, "../x", "o").is_err());
    assert!(claim_marker_of("../x", &BTreeMap::new()).is_none());
}

#[test]
fn the_reaper_rule_keeps_what_a_live_process_holds_and_what_waits_for_a_claim() {
    let facts =
        |owner_gone, claim_holder_gone, running, age_s: Option<u64>, pool_enabled| EntryFacts {
            owner_gone,
            claim_holder_gone,
            running,
            age: age_s.map(Duration::from_secs),
            pool_enabled,
        };
    let keep = Verdict::Keep;
    let remove = Verdict::Remove { claimed: false };
    let remove_claimed = Verdict::Remove { claimed: true };
    // Claimed: the claimer decides, whatever the maker and the pool.
    assert_eq!(judge(&facts(true, Some(false), true, Some(1), false)), keep);
    assert_eq!(
        judge(&facts(false, Some(true), true, Some(1), true)),
        remove_claimed
    );
    // Unclaimed, maker alive: its own.
    assert_eq!(judge(&facts(false, None, true, Some(99_999), false)), keep);
    // Unclaimed, maker gone: waits for a claim only while running, young, and pooled here.
    assert_eq!(judge(&facts(true, None, true, Some(60), true)), keep);
    assert_eq!(judge(&facts(true, None, true, Some(60), false)), remove);
    assert_eq!(judge(&facts(true, None, false, Some(60), true)), remove);
    assert_eq!(
        judge(&facts(true, None, true, Some(MAX_IDLE.as_secs()), true)),
        remove
    );
    assert_eq!(judge(&facts(true, None, true, None, true)), remove);
}

#[test]
fn an_entry_made_elsewhere_is_claimed_only_with_this_shapes_slots() {
    let shape = shape_of(
        &body("run-a", "t", None),
        &info("run-a", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    let template = &shape.template;
    let parents: Vec<PathBuf> = template.slots.iter().map(|s| s.parent.clone()).collect();
    let labels = |slots: Vec<PathBuf>| {
        BTreeMap::from([(
            LABEL_WARM_SLOTS.to_owned(),
            slots
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("\n"),
        )])
    };
    let good: Vec<PathBuf> = parents
        .iter()
        .enumerate()
        .map(|(n, p)| p.join(format!("{SLOT_PREFIX}e-{n}")))
        .collect();
    assert_eq!(
        foreign_slots(template, &labels(good.clone())),
        Some(good.clone())
    );
    // A label naming a path elsewhere (a hostile or stale label: the claim would rename it
    // over the run's dir) is refused, as is a non-slot name, or a wrong count.
    let mut elsewhere = good.clone();
    elsewhere[0] = PathBuf::from("/etc/.iterion-warm-e-0");
    assert_eq!(foreign_slots(template, &labels(elsewhere)), None);
    let mut not_a_slot = good.clone();
    not_a_slot[1] = parents[1].join("precious");
    assert_eq!(foreign_slots(template, &labels(not_a_slot)), None);
    let mut traversal = good.clone();
    traversal[0] = parents[0].join(format!("{SLOT_PREFIX}e/../../etc"));
    assert_eq!(foreign_slots(template, &labels(traversal)), None);
    assert_eq!(foreign_slots(template, &labels(good[..1].to_vec())), None);
}

#[test]
fn a_shape_digest_is_its_key_and_the_claims_dir_is_part_of_the_key() {
    let a = shape_of(
        &body("run-a", "t", None),
        &info("run-a", Trust::Trusted),
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    let mut elsewhere = info("run-b", Trust::Trusted);
    elsewhere.run_dir = PathBuf::from("/other-root/run-b");
    let b = shape_of(
        &body("run-b", "t", None),
        &elsewhere,
        NotPooled::default(),
        &dirs,
    )
    .unwrap();
    assert_ne!(a.key, b.key);
    assert_ne!(a.template.digest, b.template.digest);
    assert_eq!(a.template.digest, key_digest(&a.key));
    assert_eq!(a.template.digest.len(), 32);
}

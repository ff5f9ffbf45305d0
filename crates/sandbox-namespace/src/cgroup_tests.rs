//! The cgroup policy's pure decisions, and its file writes against a **fake cgroup2 tree**: a
//! temp directory imitating `/sys/fs/cgroup` (the v2 path cannot run on a cgroup v1 host). The
//! fake plays the kernel's part honestly and no more: it holds the interface files a real
//! `mkdir` would populate, and the tests add them where the kernel would; it does not enforce
//! the no-internal-processes rule (the decision does, and is tested on facts).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use pretty_assertions::assert_eq;

/// This host's mountinfo (cgroup v1, systemd's hybrid `unified` with no controller).
const V1_MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

const V1_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/950e
1:cpu,cpuacct:/jobs/7
0::/
";

#[test]
fn v1_places_the_child_under_the_engines_own_cgroup_of_each_hierarchy() {
    let Located::V1(parents) = locate(V1_MOUNTINFO, V1_CGROUP).unwrap() else {
        panic!("v1 expected");
    };
    let got: Vec<(Vec<String>, PathBuf)> = parents
        .into_iter()
        .map(|p| (p.controllers, p.dir))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                vec!["memory".to_owned()],
                PathBuf::from("/sys/fs/cgroup/memory/process_api/950e")
            ),
            (
                vec!["pids".to_owned()],
                PathBuf::from("/sys/fs/cgroup/pids")
            ),
            (
                vec!["cpu".to_owned()],
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/jobs/7")
            ),
        ]
    );
}

#[test]
fn v1_without_a_pids_hierarchy_is_refused_naming_it() {
    let mountinfo: String = V1_MOUNTINFO
        .lines()
        .filter(|l| !l.contains("pids"))
        .map(|l| format!("{l}\n"))
        .collect();
    let reason = locate(&mountinfo, V1_CGROUP).unwrap_err();
    assert!(
        reason.starts_with("cgroup v1: no hierarchy carries the pids controller"),
        "{reason}"
    );
    assert!(reason.contains("run the engine as root"), "{reason}");
}

#[test]
fn a_container_mount_of_a_subtree_is_followed_and_a_foreign_path_refused() {
    // A container whose memory hierarchy is bind-mounted from /docker/abc.
    let mountinfo = "\
35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
36 31 0:36 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
37 31 0:29 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
";
    let own = "4:memory:/docker/abc/job\n3:pids:/docker/abc\n2:cpu:/docker/abc\n";
    let Located::V1(parents) = locate(mountinfo, own).unwrap() else {
        panic!("v1 expected");
    };
    assert_eq!(
        parents[0].dir,
        PathBuf::from("/sys/fs/cgroup/memory/job"),
        "the mount's root is stripped"
    );
    assert_eq!(parents[1].dir, PathBuf::from("/sys/fs/cgroup/pids"));
    let foreign = "4:memory:/docker/other\n3:pids:/docker/abc\n2:cpu:/docker/abc\n";
    let reason = locate(mountinfo, foreign).unwrap_err();
    assert!(
        reason.starts_with(
            "cgroup v1: the engine's memory cgroup /docker/other is not visible under /sys/fs/cgroup/memory"
        ),
        "{reason}"
    );
    let escape = "4:memory:/docker/abc/../../x\n3:pids:/docker/abc\n2:cpu:/docker/abc\n";
    assert!(locate(mountinfo, escape).is_err());
}

#[test]
fn a_pure_v2_host_finds_the_engines_cgroup_from_the_0_line() {
    let mountinfo = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    let own = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n";
    assert_eq!(
        locate(mountinfo, own).unwrap(),
        Located::V2(PathBuf::from(
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"
        ))
    );
    let reason = locate(mountinfo, "1:name=systemd:/\n").unwrap_err();
    assert!(reason.contains("no `0::` line"), "{reason}");
}

fn delegated(procs: Vec<i32>) -> V2Facts {
    V2Facts {
        dir: PathBuf::from("/sys/fs/cgroup/app.slice/run-r1.scope"),
        writable: Ok(()),
        controllers: ["cpuset", "cpu", "io", "memory", "pids"]
            .map(str::to_owned)
            .to_vec(),
        subtree_control: Vec::new(),
        procs,
        is_root: false,
        engine_pid: 42,
    }
}

#[test]
fn v2_a_delegated_cgroup_holding_only_the_engine_gets_an_engine_leaf() {
    let placement = decide_v2(&delegated(vec![42])).unwrap();
    assert_eq!(
        placement,
        Placement {
            version: Version::V2,
            parents: vec![Parent {
                controllers: CONTROLLERS.map(str::to_owned).to_vec(),
                dir: PathBuf::from("/sys/fs/cgroup/app.slice/run-r1.scope"),
            }],
            prepare: Some(V2Prepare {
                engine_leaf: true,
                enable: CONTROLLERS.map(str::to_owned).to_vec(),
            }),
        }
    );
    assert!(
        CgroupSupport::Ready(placement)
            .describe()
            .contains("moves itself into iterion-engine")
    );
}

#[test]
fn v2_decisions_refuse_what_cannot_be_delegated_and_say_how() {
    let mut not_writable = delegated(vec![42]);
    not_writable.writable =
        Err("/sys/fs/cgroup/user.slice/cgroup.procs (Permission denied)".into());
    let reason = decide_v2(&not_writable).unwrap_err();
    assert!(
        reason.starts_with("cgroup v2: the engine's cgroup /sys/fs/cgroup/app.slice/run-r1.scope is not delegated to it (/sys/fs/cgroup/user.slice/cgroup.procs (Permission denied) is not writable)"),
        "{reason}"
    );
    assert!(
        reason.contains("systemd-run --user --scope -p Delegate=yes iterion"),
        "{reason}"
    );

    let mut no_pids = delegated(vec![42]);
    no_pids.controllers.retain(|c| c != "pids");
    let reason = decide_v2(&no_pids).unwrap_err();
    assert!(
        reason.starts_with(
            "cgroup v2: /sys/fs/cgroup/app.slice/run-r1.scope/cgroup.controllers lacks pids"
        ),
        "{reason}"
    );

    let reason = decide_v2(&delegated(vec![42, 7, 9])).unwrap_err();
    assert!(
        reason.contains("holds other processes besides the engine (pids 7, 9)"),
        "{reason}"
    );
}

#[test]
fn v2_the_root_or_an_already_enabled_subtree_needs_no_engine_leaf() {
    let mut root = delegated(vec![1, 42, 99]);
    root.is_root = true;
    assert_eq!(
        decide_v2(&root).unwrap().prepare,
        Some(V2Prepare {
            engine_leaf: false,
            enable: CONTROLLERS.map(str::to_owned).to_vec()
        })
    );
    let mut enabled = delegated(Vec::new());
    enabled.subtree_control = ["memory", "pids", "cpu", "io"].map(str::to_owned).to_vec();
    assert_eq!(decide_v2(&enabled).unwrap().prepare, None);
}

#[test]
fn the_limit_files_and_their_values_per_version() {
    let limits = Limits {
        memory_bytes: Some(64 << 20),
        nano_cpus: Some(1_500_000_000),
        pids: Some(32),
    };
    let render = |version| -> Vec<(&str, String, bool)> {
        writes(version, &limits)
            .into_iter()
            .map(|w| (w.file, w.value, w.optional))
            .collect()
    };
    assert_eq!(
        render(Version::V1),
        vec![
            ("memory.limit_in_bytes", "67108864".to_owned(), false),
            ("memory.memsw.limit_in_bytes", "67108864".to_owned(), true),
            ("pids.max", "32".to_owned(), false),
            ("cpu.cfs_period_us", "100000".to_owned(), false),
            ("cpu.cfs_quota_us", "150000".to_owned(), false),
        ]
    );
    assert_eq!(
        render(Version::V2),
        vec![
            ("memory.max", "67108864".to_owned(), false),
            ("memory.swap.max", "0".to_owned(), true),
            ("pids.max", "32".to_owned(), false),
            ("cpu.max", "150000 100000".to_owned(), false),
        ]
    );
    let only_pids = Limits {
        pids: Some(5),
        ..Limits::default()
    };
    assert_eq!(writes(Version::V2, &only_pids).len(), 1);
    // The smallest cpu limit (0.01) is the kernel's smallest quota (1 ms).
    let least = Limits {
        nano_cpus: Some(iterion_sandbox::MIN_NANO_CPUS),
        ..Limits::default()
    };
    assert_eq!(writes(Version::V1, &least)[1].value, "1000");
}

#[test]
fn names_carry_the_run_id_and_only_ours_are_recognised() {
    let name = sandbox_name("0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000", "0a1b2c3d");
    assert_eq!(
        name,
        "iterion-0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000-0a1b2c3d"
    );
    assert_eq!(
        run_id_of(&name).as_deref(),
        Some("0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000")
    );
    assert_eq!(run_id_of("iterion-probe-deadbeef").as_deref(), Some(""));
    for theirs in [
        ENGINE_LEAF,
        "iterion-",
        "iterion-x",
        "iterion-run-nothex!!",
        "docker",
        "iterion--0a1b2c3d",
    ] {
        assert_eq!(run_id_of(theirs), None, "{theirs}");
    }
    assert_eq!(
        sandbox_name("../../x", "00000000"),
        "iterion-______x-00000000"
    );
}

/// A fake cgroup2 directory: the interface files a real one has.
fn fake_cgroup(dir: &Path, controllers: &str, subtree: &str, procs: &str, root: bool) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("cgroup.controllers"), controllers).unwrap();
    std::fs::write(dir.join("cgroup.subtree_control"), subtree).unwrap();
    std::fs::write(dir.join("cgroup.procs"), procs).unwrap();
    if !root {
        std::fs::write(dir.join("cgroup.type"), "domain\n").unwrap();
    }
}

#[test]
fn v2_on_a_fake_delegated_tree_the_engine_moves_to_its_leaf_and_the_limits_are_written() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path().join("fake-cgroup2");
    fake_cgroup(
        &root,
        "cpuset cpu io memory pids\n",
        "cpu memory pids\n",
        "",
        true,
    );
    let own = root.join("user.slice/run-r1.scope");
    fake_cgroup(&own, "cpu memory pids\n", "", "4242\n", false);
    let mountinfo = format!(
        "30 23 0:26 / {} rw - cgroup2 cgroup2 rw,nsdelegate\n",
        root.display()
    );
    let Located::V2(dir) = locate(&mountinfo, "0::/user.slice/run-r1.scope\n").unwrap() else {
        panic!("v2 expected");
    };
    assert_eq!(dir, own);
    let mut facts = read_v2_facts(&dir);
    assert_eq!(facts.procs, vec![4242]);
    assert!(!facts.is_root);
    facts.engine_pid = 4242;
    let placement = decide_v2(&facts).unwrap();
    let prepare = placement.prepare.clone().unwrap();
    // The kernel would populate the leaf's files on mkdir: the fake has them already.
    fake_cgroup(&own.join(ENGINE_LEAF), "", "", "", false);
    prepare_v2(&dir, &prepare, 4242).unwrap();
    assert_eq!(
        std::fs::read_to_string(own.join(ENGINE_LEAF).join("cgroup.procs")).unwrap(),
        "4242"
    );
    assert_eq!(
        std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
        "+memory +pids +cpu"
    );

    let run = "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000";
    let mut cgroup = SandboxCgroup::make(&placement, run).unwrap();
    let [path] = cgroup.paths().try_into().unwrap();
    assert_eq!(
        path.parent(),
        Some(own.as_path()),
        "a sibling of the engine's leaf"
    );
    assert_eq!(
        run_id_of(&path.file_name().unwrap().to_string_lossy()).as_deref(),
        Some(run)
    );
    // The kernel's part of the child's mkdir (memory.swap.max left out: no swap accounting).
    for file in ["memory.max", "pids.max", "cpu.max", "cgroup.procs"] {
        std::fs::write(path.join(file), "max\n").unwrap();
    }
    let limits = Limits {
        memory_bytes: Some(64 << 20),
        nano_cpus: Some(500_000_000),
        pids: Some(16),
    };
    cgroup.fill(Version::V2, &limits).unwrap();
    let read = |file: &str| std::fs::read_to_string(path.join(file)).unwrap();
    assert_eq!(
        (read("memory.max"), read("pids.max"), read("cpu.max")),
        (
            "67108864".to_owned(),
            "16".to_owned(),
            "50000 100000".to_owned()
        )
    );
    assert!(!path.join("memory.swap.max").exists());
    // The leftover walk sees it (and never the engine's leaf).
    let found = leftovers_under(&root);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].path.clone(), found[0].run_id.as_str()),
        (path.clone(), run)
    );
    assert!(!found[0].empty, "the fake's cgroup.procs holds `max`");
    // A missing required file fails the fill, naming it.
    std::fs::remove_file(path.join("pids.max")).unwrap();
    let error = cgroup.fill(Version::V2, &limits).unwrap_err();
    assert_eq!(error.step, "write pids.max = 16");
    assert_eq!(error.path, path.join("pids.max"));
    // Removal is an rmdir: a real cgroup dir is empty of regular files to rmdir; the fake's
    // are removed first, as the kernel would do with its interface files.
    for entry in std::fs::read_dir(&path).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    assert_eq!(cgroup.remove(), Vec::new());
    assert!(!path.exists());
}

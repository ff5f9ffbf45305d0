//! Resource limits on this kernel (issue 18): a real cgroup per sandbox, real fork loops and
//! memory hogs in it. They need a host where the engine can make cgroups (`sandbox doctor`:
//! "cgroup limits … applied"); where it cannot they fail under `ITERION_IT_DOCKER=1` (the
//! suite's strict mode) and are skipped, loudly, otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iterion_sandbox::{Limits, ReapJudge, Reaper, SandboxRun, Spec, Trust};
use iterion_sandbox_namespace::NamespaceReaper;
use iterion_sandbox_namespace::cgroup::{CgroupSupport, Version};

use super::driver::{Fixture, Lines, fixture, sh, start_as};

/// Whether this host can make a sandbox's cgroup; in strict mode a host that cannot fails.
#[allow(clippy::print_stderr)] // a skip says so in the test's output
fn cgroups_or_skip(test: &str) -> Option<Version> {
    match iterion_sandbox_namespace::cgroup::support() {
        CgroupSupport::Ready(placement) => Some(placement.version),
        CgroupSupport::Refused(reason) => {
            let strict = std::env::var("ITERION_IT_DOCKER")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
            assert!(
                !strict,
                "{test}: ITERION_IT_DOCKER=1 and this host makes no cgroup: {reason}"
            );
            #[allow(clippy::print_stderr)]
            {
                eprintln!("SKIPPED {test}: this host makes no cgroup ({reason})");
            }
            None
        }
    }
}

/// Starts a sandbox with `limits`; returns it and its cgroup's directories (from the log line).
/// The run id of most tests here.
const RUN: &str = "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000";

async fn start_limited(fx: &Fixture, limits: Limits) -> (Arc<dyn SandboxRun>, Vec<PathBuf>) {
    start_limited_as(fx, limits, RUN).await
}

async fn start_limited_as(
    fx: &Fixture,
    limits: Limits,
    run_id: &str,
) -> (Arc<dyn SandboxRun>, Vec<PathBuf>) {
    let spec = Spec {
        limits,
        ..Spec::default()
    };
    start_with(fx, spec, Trust::Trusted, run_id).await
}

async fn start_with(
    fx: &Fixture,
    spec: Spec,
    trust: Trust,
    run_id: &str,
) -> (Arc<dyn SandboxRun>, Vec<PathBuf>) {
    let log = Arc::new(Lines::default());
    let run = start_as(fx, spec, trust, Arc::clone(&log), run_id).await;
    let lines = log.0.lock().unwrap().clone();
    let active = lines
        .iter()
        .find(|l| l.starts_with("sandbox active:"))
        .expect("the start logs its sandbox")
        .clone();
    let paths: Vec<PathBuf> = active
        .split_once(" cgroup=")
        .map(|(_, p)| p)
        .unwrap_or("none")
        .split(',')
        .filter(|p| *p != "none")
        .map(PathBuf::from)
        .collect();
    (run, paths)
}

/// The directory of `controller` among a sandbox's cgroup directories (v1: one per hierarchy).
fn dir_of<'a>(paths: &'a [PathBuf], file: &str) -> &'a Path {
    paths
        .iter()
        .find(|p| p.join(file).exists())
        .unwrap_or_else(|| panic!("no cgroup of {paths:?} has {file}"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_owned()
}

#[tokio::test]
async fn a_pids_limit_stops_a_fork_loop_and_the_sandbox_lives_on() {
    let Some(version) = cgroups_or_skip("pids") else {
        return;
    };
    let fx = fixture();
    let (run, paths) = start_limited(
        &fx,
        Limits {
            pids: Some(12),
            ..Limits::default()
        },
    )
    .await;
    assert!(!paths.is_empty(), "a limited sandbox has a cgroup");
    let pids_dir = dir_of(&paths, "pids.max").to_owned();
    assert_eq!(read(&pids_dir.join("pids.max")), "12");
    assert!(
        pids_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("iterion-0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000-"),
        "{pids_dir:?}"
    );
    // A fork loop of 40 children that stay: the kernel refuses the forks past the limit with
    // EAGAIN (the limit counts the init's two processes and the loop's own).
    let script = r#"
import errno, os, time
kids, refused, other = [], 0, 0
for _ in range(40):
    try:
        pid = os.fork()
    except OSError as e:
        if e.errno == errno.EAGAIN:
            refused += 1
        else:
            other += 1
        continue
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print(len(kids), refused, other)
for k in kids:
    os.kill(k, 9)
for k in kids:
    os.waitpid(k, 0)
"#;
    let argv = ["python3", "-c", script].map(str::to_owned);
    let result = run
        .exec(&argv, iterion_sandbox::ExecOpts::default())
        .await
        .unwrap();
    let out = String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned();
    let counts: Vec<u32> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    let [kids, refused, other] = counts[..] else {
        panic!("{out}");
    };
    assert_eq!(result.exit_code, 0, "{out}");
    assert!(
        (1..=9).contains(&kids) && refused == 40 - kids && other == 0,
        "at most 12 - 3 children, every other fork refused with EAGAIN: {out}"
    );
    // The sandbox (its init, later execs) lives on once the loop is gone; the engine too.
    let (code, out, _) = sh(run.as_ref(), "echo alive").await;
    assert_eq!((code, out.as_str()), (0, "alive\n"));
    run.cleanup().await.unwrap();
    for path in &paths {
        assert!(!path.exists(), "{} is removed at teardown", path.display());
    }
    let _ = version;
}

#[tokio::test]
async fn a_memory_limit_gets_a_hog_oom_killed_and_the_sandbox_lives_on() {
    let Some(version) = cgroups_or_skip("memory") else {
        return;
    };
    let fx = fixture();
    let bytes = 48u64 << 20;
    let (run, paths) = start_limited(
        &fx,
        Limits {
            memory_bytes: Some(bytes),
            ..Limits::default()
        },
    )
    .await;
    let file = match version {
        Version::V1 => "memory.limit_in_bytes",
        Version::V2 => "memory.max",
    };
    let memory_dir = dir_of(&paths, file).to_owned();
    assert_eq!(read(&memory_dir.join(file)), bytes.to_string());
    if memory_dir.join("memory.memsw.limit_in_bytes").exists() {
        assert_eq!(
            read(&memory_dir.join("memory.memsw.limit_in_bytes")),
            bytes.to_string(),
            "no swap beyond the limit"
        );
    }
    // 256 MiB touched, page by page: far past the 48 MiB limit.
    let (code, out, _) = sh(
        run.as_ref(),
        "python3 -c 'b = bytearray(256 << 20); b[::4096] = b\"x\" * len(b[::4096]); print(\"survived\")'",
    )
    .await;
    assert_eq!((code, out.as_str()), (137, ""), "the hog is OOM-killed");
    let (code, out, _) = sh(run.as_ref(), "echo alive").await;
    assert_eq!((code, out.as_str()), (0, "alive\n"));
    run.cleanup().await.unwrap();
    assert!(!memory_dir.exists());
}

#[tokio::test]
async fn a_cpu_limit_is_the_quota_of_the_sandboxs_cgroup_while_it_runs() {
    let Some(version) = cgroups_or_skip("cpu") else {
        return;
    };
    let fx = fixture();
    let (run, paths) = start_limited(
        &fx,
        Limits {
            nano_cpus: Some(250_000_000),
            ..Limits::default()
        },
    )
    .await;
    match version {
        Version::V1 => {
            let dir = dir_of(&paths, "cpu.cfs_quota_us");
            assert_eq!(
                (
                    read(&dir.join("cpu.cfs_quota_us")),
                    read(&dir.join("cpu.cfs_period_us"))
                ),
                ("25000".to_owned(), "100000".to_owned())
            );
        }
        Version::V2 => {
            assert_eq!(
                read(&dir_of(&paths, "cpu.max").join("cpu.max")),
                "25000 100000"
            );
        }
    }
    // The sandbox's processes are in it: a command's pid is listed there.
    let (code, out, _) = sh(run.as_ref(), "cat /proc/self/cgroup").await;
    assert_eq!(code, 0);
    let procs: Vec<String> = paths
        .iter()
        .map(|p| read(&p.join("cgroup.procs")))
        .collect();
    assert!(
        procs.iter().all(|p| !p.is_empty()),
        "the init is in every hierarchy's cgroup: {procs:?}"
    );
    // Inside, the cgroup namespace's root is the sandbox's cgroup: every path is `/`.
    for line in out.lines() {
        let path = line.splitn(3, ':').nth(2).unwrap_or("");
        let names = line.split(':').nth(1).unwrap_or("");
        if names
            .split(',')
            .any(|n| ["memory", "pids", "cpu", ""].contains(&n))
        {
            assert_eq!(path, "/", "{out}");
        }
    }
    run.cleanup().await.unwrap();
    for path in &paths {
        assert!(!path.exists());
    }
}

/// The attack: from inside, raise the limits, reach the cgroup filesystem, move out.
#[tokio::test]
async fn the_sandbox_can_neither_raise_its_limits_nor_leave_its_cgroup() {
    let Some(_) = cgroups_or_skip("attack") else {
        return;
    };
    let fx = fixture();
    let (run, paths) = start_limited(
        &fx,
        Limits {
            pids: Some(64),
            memory_bytes: Some(128 << 20),
            ..Limits::default()
        },
    )
    .await;
    // Only this sandbox's own cgroup and its parents are aimed at: were the protection gone,
    // the attack must not touch another cgroup of the host.
    let script = r#"
for f in $(find /sys/fs/cgroup /proc/1/root/sys/fs/cgroup -maxdepth 6 -path '*/iterion-*' \( -name 'pids.max' -o -name 'memory.limit_in_bytes' -o -name 'memory.max' -o -name 'memory.memsw.limit_in_bytes' \) 2>/dev/null); do
  (echo max > "$f") 2>/dev/null && echo "RAISED $f"
  (echo 9223372036854771712 > "$f") 2>/dev/null && echo "RAISED $f"
  for p in "$(dirname "$(dirname "$f")")"/cgroup.procs; do
    (echo $$ > "$p") 2>/dev/null && echo "MOVED $p"
  done
done
for p in /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/memory/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs; do
  [ -f "$p" ] && (echo $$ > "$p") 2>/dev/null && echo "MOVED $p"
done
mkdir -p /tmp/cg
for t in "-t cgroup2 none" "-t cgroup -o pids none" "-t cgroup -o memory none"; do
  mount $t /tmp/cg 2>/dev/null && echo "MOUNTED $t"
done
python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print("mount", l.mount(b"none", b"/tmp/cg", b"cgroup2", 0, None), ctypes.get_errno())'
echo done
"#;
    let argv = ["bash", "-c", script].map(str::to_owned);
    let result = run
        .exec(&argv, iterion_sandbox::ExecOpts::default())
        .await
        .unwrap();
    let out = String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned();
    assert!(
        !out.contains("RAISED") && !out.contains("MOVED") && !out.contains("MOUNTED"),
        "{out}"
    );
    // The raw syscall is refused (seccomp: EPERM), not merely missing a tool.
    assert!(out.contains("mount -1 1\n"), "{out}");
    // From the host: the limits are as written, and the sandbox still in its cgroup.
    let pids_dir = dir_of(&paths, "pids.max");
    assert_eq!(read(&pids_dir.join("pids.max")), "64");
    let memory_file = if dir_of(&paths, "cgroup.procs").join("memory.max").exists() {
        "memory.max"
    } else {
        "memory.limit_in_bytes"
    };
    assert_eq!(
        read(&dir_of(&paths, memory_file).join(memory_file)),
        (128u64 << 20).to_string()
    );
    assert!(!read(&pids_dir.join("cgroup.procs")).is_empty());
    run.cleanup().await.unwrap();
}

/// As on docker: an untrusted run holds at most 4096 processes even when the operator set no
/// limit, and an operator's lower limit stands.
#[tokio::test]
async fn an_untrusted_run_is_capped_at_4096_pids_without_an_operator_limit() {
    if !nix::unistd::geteuid().is_root() {
        return; // an untrusted run as a user engine maps the engine's own uid: same cgroup code
    }
    let Some(_) = cgroups_or_skip("untrusted") else {
        return;
    };
    for (operator, want) in [(None, "4096"), (Some(50), "50"), (Some(10_000), "4096")] {
        let fx = fixture();
        std::os::unix::fs::chown(&fx.workspace, Some(65532), Some(65532)).unwrap();
        let spec = Spec {
            user: Some("65532:65532".to_owned()),
            limits: Limits {
                pids: operator,
                ..Limits::default()
            },
            ..Spec::default()
        };
        let (run, paths) = start_with(&fx, spec, Trust::Untrusted, RUN).await;
        assert_eq!(read(&dir_of(&paths, "pids.max").join("pids.max")), want);
        let (code, _, _) = sh(run.as_ref(), "true").await;
        assert_eq!(code, 0);
        run.cleanup().await.unwrap();
    }
}

#[tokio::test]
async fn without_limits_no_cgroup_is_made() {
    let fx = fixture();
    let (run, paths) = start_limited(&fx, Limits::default()).await;
    assert_eq!(paths, Vec::<PathBuf>::new());
    run.cleanup().await.unwrap();
}

/// Frees one run only: the tests of this binary run side by side, and another's start must not
/// lose its fresh cgroup to this one's reaper.
struct FreeOnly(&'static str);

#[async_trait::async_trait]
impl ReapJudge for FreeOnly {
    async fn reapable(&self, run_id: &str) -> bool {
        run_id == self.0
    }

    async fn claims(&self, run_id: &str) -> bool {
        run_id == self.0
    }
}

const CRASHED_RUN: &str = "0199aaaa-bbbb-7ccc-8ddd-0000000c4a5e";
const LIVE_RUN: &str = "0199aaaa-bbbb-7ccc-8ddd-00000000a11e";

/// Keeps every run.
struct KeepAll;

#[async_trait::async_trait]
impl ReapJudge for KeepAll {
    async fn reapable(&self, _run_id: &str) -> bool {
        false
    }

    async fn claims(&self, _run_id: &str) -> bool {
        false
    }
}

const FREE_CRASHED: FreeOnly = FreeOnly(CRASHED_RUN);

const CRASH_HELPER_ENV: &str = "ITERION_NS_TEST_CRASH_HELPER";

/// Not a test by itself: the crashing engine of the next test (run as a child of it). Starts a
/// limited sandbox, prints its cgroup, and aborts, as a crashed engine would.
#[tokio::test]
#[ignore = "run by an_engine_crash_leaves_a_cgroup_the_reaper_removes"]
#[allow(clippy::print_stdout)] // the parent test reads the cgroup paths from it
async fn crash_helper() {
    if std::env::var_os(CRASH_HELPER_ENV).is_none() {
        return;
    }
    let fx = fixture();
    let (run, paths) = start_limited_as(
        &fx,
        Limits {
            pids: Some(32),
            ..Limits::default()
        },
        CRASHED_RUN,
    )
    .await;
    let (code, _, _) = sh(run.as_ref(), "sleep 60 & echo up").await;
    assert_eq!(code, 0);
    let joined: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    println!("CGROUPS={}", joined.join(","));
    std::process::abort();
}

#[tokio::test]
async fn an_engine_crash_leaves_a_cgroup_the_reaper_removes() {
    let Some(_) = cgroups_or_skip("crash") else {
        return;
    };
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::cgroup::crash_helper",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_HELPER_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "the helper aborts: {stdout}");
    let paths: Vec<PathBuf> = stdout
        .lines()
        .find_map(|l| l.split_once("CGROUPS=").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr)))
        .split(',')
        .map(PathBuf::from)
        .collect();
    assert!(!paths.is_empty());
    for path in &paths {
        assert!(path.exists(), "the crash left {} behind", path.display());
    }
    // The sandbox died with its engine (the parent-death signal): its cgroup empties.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while paths
        .iter()
        .any(|p| !read(&p.join("cgroup.procs")).is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the sandbox outlived its engine"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The grace keeps a fresh cgroup (a start in progress elsewhere), a kept run keeps its own.
    let report = NamespaceReaper::default()
        .reap("s1", &FREE_CRASHED)
        .await
        .unwrap();
    assert!(
        report
            .deleted
            .iter()
            .all(|(_, p)| !paths.contains(&PathBuf::from(p))),
        "{report:?}"
    );
    let reaper = NamespaceReaper::with_grace(Duration::ZERO);
    reaper.reap("s1", &KeepAll).await.unwrap();
    assert!(paths.iter().all(|p| p.exists()));
    let survey = reaper.survey("s1", &FREE_CRASHED).await.unwrap();
    assert!(paths.iter().all(|p| p.exists()), "a survey removes nothing");
    for path in &paths {
        assert!(
            survey.deleted.contains(&(
                iterion_sandbox::ResourceKind::Cgroup,
                path.display().to_string()
            )),
            "{survey:?}"
        );
    }
    let report = reaper.reap("s1", &FREE_CRASHED).await.unwrap();
    for path in &paths {
        assert!(!path.exists(), "{} is reaped", path.display());
        assert!(report.deleted.contains(&(
            iterion_sandbox::ResourceKind::Cgroup,
            path.display().to_string()
        )));
    }
}

#[tokio::test]
async fn the_reaper_never_removes_a_live_sandboxs_cgroup() {
    let Some(_) = cgroups_or_skip("live") else {
        return;
    };
    let fx = fixture();
    let (run, paths) = start_limited_as(
        &fx,
        Limits {
            pids: Some(32),
            ..Limits::default()
        },
        LIVE_RUN,
    )
    .await;
    let report = NamespaceReaper::with_grace(Duration::ZERO)
        .reap("s1", &FreeOnly(LIVE_RUN))
        .await
        .unwrap();
    for path in &paths {
        assert!(path.exists(), "{report:?}");
    }
    let (code, _, _) = sh(run.as_ref(), "true").await;
    assert_eq!(code, 0);
    run.cleanup().await.unwrap();
}

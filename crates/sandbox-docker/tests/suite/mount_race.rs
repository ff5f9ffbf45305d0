//! Attack tests for issue 15 item 1, the mount race: a bind source is screened by path, and a
//! writer of the workspace swaps a component for a symlink before the container engine mounts
//! it. Here a host thread exchanges `<ws>/sub` between a directory and a symlink to a stand-in
//! for `/var/run` (a dir holding a `docker.sock` marker file — never the real socket) with
//! `renameat2(RENAME_EXCHANGE)`, as fast as it can, while:
//!
//! - real sandboxes start with `type=bind,source=./sub,target=/x` (on both engines), and
//! - hundreds of screen + pin iterations run against the staging mount directly.
//!
//! Neither ever yields the marker; a refusal (the swap was seen) is fine. The fallback of an
//! engine that cannot mount (not root) refuses a source inside a directory a live sandbox
//! writes.

// Test code: a failed unwrap is the assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use iterion_sandbox::{
    Driver, EngineMount, EngineMountKind, Error, MountRule, MountScope, NoProgress, STAGE_DIR,
    ScreenContext, Stager, Trust, validate_mount,
};
use iterion_sandbox_docker::DockerSettings;
use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};

use super::docker_driver::{busybox_spec, ids, run_info, sh, text};
use super::engines::{Engine, labelled};

crate::engine_tests!(
    a_flipping_source_never_mounts_the_socket_in_a_real_sandbox,
    a_flipping_engine_bind_in_a_shared_workspace_never_mounts_the_socket,
);

const MARKER: &str = "HOST-DOCKER-SOCKET-STAND-IN";
const MOUNT: &str = "type=bind,source=./sub,target=/x";

/// `<root>/ws/sub` (a dir with `ok`), `<root>/ws/other` (a symlink to `<root>/fake-run`, whose
/// `docker.sock` is the marker).
struct Host {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
}

fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/ok"), "the real dir\n").unwrap();
    std::fs::create_dir_all(root.join("fake-run")).unwrap();
    std::fs::write(root.join("fake-run/docker.sock"), MARKER).unwrap();
    symlink(root.join("fake-run"), ws.join("other")).unwrap();
    Host {
        _dir: dir,
        root,
        ws,
    }
}

/// Exchanges `sub` and `other` until stopped; counts the flips.
struct Flipper {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flipper {
    /// Flips every `pause` (zero: as fast as it can).
    fn start(ws: &Path, pause: Duration) -> Flipper {
        let (stop, flips) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (a, b) = (ws.join("sub"), ws.join("other"));
        let thread = {
            let (stop, flips) = (Arc::clone(&stop), Arc::clone(&flips));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    renameat2(AT_FDCWD, &a, AT_FDCWD, &b, RenameFlags::RENAME_EXCHANGE).unwrap();
                    flips.fetch_add(1, Ordering::Relaxed);
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
            })
        };
        Flipper {
            stop,
            flips,
            thread: Some(thread),
        }
    }

    fn flips(&self) -> u64 {
        self.flips.load(Ordering::Relaxed)
    }

    fn stop(mut self) -> u64 {
        self.halt();
        self.flips()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The refusals a swap can cause: the screen saw the symlink, or the pin did.
fn is_race_refusal(error: &Error) -> bool {
    matches!(
        error,
        Error::MountRefused {
            rule: MountRule::RelativeSourceEscapesWorkspace(_)
                | MountRule::SourceChanged(_)
                | MountRule::SourceMissing(_),
            ..
        }
    )
}

/// No staging dir and no mount of this host's paths is left.
fn assert_nothing_staged(host: &Host) {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let root = host.root.display().to_string();
    let left: Vec<&str> = mountinfo.lines().filter(|l| l.contains(&root)).collect();
    assert_eq!(left, Vec::<&str>::new(), "staging mounts were left");
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// 400 screen + pin iterations (the driver's own two steps) under the flip: every staged dir
/// is the real one, never the marker's.
#[test]
fn a_flipping_source_is_never_staged_as_its_symlink_target() {
    let host = host();
    let run_dir = host.root.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let ctx = ScreenContext::new(&host.ws, None).unwrap();
    let flipper = Flipper::start(&host.ws, Duration::from_micros(20));
    let (mut staged, mut refused) = (0, 0);
    // 400 iterations at least, and on until the flipper has raced them 200 times (a loaded
    // machine schedules it less often), within a minute.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut iterations = 0;
    while iterations < 400 || (flipper.flips() < 200 && std::time::Instant::now() < deadline) {
        iterations += 1;
        let mut stager = if is_root() {
            Stager::new(&run_dir)
        } else {
            Stager::without_mount_privilege(&run_dir)
        };
        let pinned = validate_mount(MOUNT, &ctx).and_then(|screened| {
            let source = screened.host_source.unwrap();
            stager.pin(MOUNT, &source, false, &ctx)
        });
        match pinned {
            Ok(path) => {
                staged += 1;
                assert!(!path.join("docker.sock").exists(), "the marker was staged");
                assert_eq!(
                    std::fs::read_to_string(path.join("ok")).unwrap(),
                    "the real dir\n"
                );
            }
            Err(error) if is_race_refusal(&error) => refused += 1,
            Err(error) => panic!("unexpected: {error}"),
        }
        stager.release().unwrap();
    }
    let flips = flipper.stop();
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{staged} staged, {refused} refused, {flips} flips");
    }
    assert!(flips >= 200, "only {flips} flips");
    assert!(staged > 0, "never staged ({refused} refused)");
    assert!(!run_dir.join(STAGE_DIR).exists());
    assert_nothing_staged(&host);
}

/// Without the privilege to mount, a source inside a directory a live sandbox writes (a §14
/// child's shared workspace) is refused outright; one elsewhere binds by its verified path.
#[test]
fn without_mount_privilege_a_source_a_live_sandbox_writes_is_refused() {
    let host = host();
    let run_dir = host.root.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::create_dir_all(host.root.join("elsewhere")).unwrap();
    let scope = MountScope {
        sandbox_writable: vec![host.ws.clone()],
        ..MountScope::default()
    };
    let ctx = ScreenContext::new(&host.ws, None)
        .unwrap()
        .for_run(Trust::Trusted, &scope);
    let mut stager = Stager::without_mount_privilege(&run_dir);
    let screened = validate_mount(MOUNT, &ctx).unwrap();
    let refused = stager
        .pin(MOUNT, screened.host_source.as_deref().unwrap(), false, &ctx)
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::MountRefused {
                rule: MountRule::InSandboxWritable { .. },
                ..
            }
        ),
        "{refused}"
    );
    let elsewhere = host.root.join("elsewhere");
    let mount = format!("source={},target=/e", elsewhere.display());
    let screened = validate_mount(&mount, &ctx).unwrap();
    assert_eq!(
        stager
            .pin(
                &mount,
                screened.host_source.as_deref().unwrap(),
                false,
                &ctx
            )
            .unwrap(),
        elsewhere
    );
    assert!(stager.staged().is_empty());
}

/// A source that is a symlink when it is pinned, a socket, or one that moved is refused.
#[test]
fn the_pin_refuses_symlinks_sockets_and_moved_sources() {
    let host = host();
    let run_dir = host.root.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let ctx = ScreenContext::new(&host.ws, None).unwrap();
    let mut stager = Stager::new(&run_dir);
    // Screened as the dir, a symlink by the time it is pinned.
    let screened = validate_mount(MOUNT, &ctx).unwrap();
    renameat2(
        AT_FDCWD,
        &host.ws.join("sub"),
        AT_FDCWD,
        &host.ws.join("other"),
        RenameFlags::RENAME_EXCHANGE,
    )
    .unwrap();
    let refused = stager
        .pin(MOUNT, screened.host_source.as_deref().unwrap(), false, &ctx)
        .unwrap_err();
    assert!(is_race_refusal(&refused), "{refused}");
    // A socket.
    let sock = host.ws.join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let refused = stager
        .pin("source=./s.sock,target=/s", &sock, true, &ctx)
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::MountRefused {
                rule: MountRule::SourceNotFileOrDirectory(_),
                ..
            }
        ),
        "{refused}"
    );
    stager.release().unwrap();
    assert_nothing_staged(&host);
}

/// Real sandboxes under the flip: each start either refuses the mount or mounts the real dir;
/// the marker is never visible, and no staging mount is left.
async fn a_flipping_source_never_mounts_the_socket_in_a_real_sandbox(engine: Engine) {
    let (test_id, run_id) = ids(engine, "mount_race");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let host = host();
    let prepared = driver.prepare(&busybox_spec(), &NoProgress).await.unwrap();
    // Slow enough that screening often sees the dir, fast enough that the state at the
    // engine's own mount, a few hundred ms later, is a coin toss.
    let flipper = Flipper::start(&host.ws, Duration::from_micros(500));
    let (mut started, mut refused) = (0, 0);
    let before = flipper.flips();
    for attempt in 0..24 {
        let mut spec = prepared.clone();
        spec.spec.mounts = vec![MOUNT.to_owned()];
        let info = run_info(
            &format!("{run_id}-{attempt}"),
            "store",
            &host.ws,
            &host.root,
        );
        let run_dir = info.run_dir.clone();
        match driver.start(spec, info).await {
            Ok(run) => {
                started += 1;
                let seen = sh(run.as_ref(), "cat /x/docker.sock 2>/dev/null; ls /x").await;
                let out = text(seen.stdout);
                run.cleanup().await.unwrap();
                assert!(!out.contains(MARKER), "the sandbox saw the socket: {out}");
                assert!(out.contains("ok"), "the real dir is not mounted: {out}");
            }
            Err(error) if is_race_refusal(&error) => refused += 1,
            Err(error) => panic!("unexpected: {error}"),
        }
        assert!(!run_dir.join(STAGE_DIR).exists(), "a staging dir was left");
    }
    let flips = flipper.stop() - before;
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{engine:?}: {started} started, {refused} refused, {flips} flips");
    }
    assert!(flips >= 200, "only {flips} flips during the starts");
    assert!(started > 0, "no start got through ({refused} refused)");
    assert_nothing_staged(&host);
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

/// An engine bind inside a directory a live sandbox writes (a §14 child's bundle dir in its
/// parent's workspace) is pinned too: under the flip, the real sandbox never sees the marker.
async fn a_flipping_engine_bind_in_a_shared_workspace_never_mounts_the_socket(engine: Engine) {
    let (test_id, run_id) = ids(engine, "engine_bind_race");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let host = host();
    let prepared = driver.prepare(&busybox_spec(), &NoProgress).await.unwrap();
    let flipper = Flipper::start(&host.ws, Duration::from_micros(500));
    let (mut started, mut refused) = (0, 0);
    for attempt in 0..16 {
        let mut spec = prepared.clone();
        spec.spec.engine_mounts = vec![EngineMount {
            kind: EngineMountKind::Bind,
            source: host.ws.join("sub").to_string_lossy().into_owned(),
            target: "/run/iterion/bundle".to_owned(),
            read_only: true,
            purpose: "bundle".to_owned(),
        }];
        let mut info = run_info(
            &format!("{run_id}-{attempt}"),
            "store",
            &host.ws,
            &host.root,
        );
        info.mount_scope.sandbox_writable = vec![host.ws.clone()];
        match driver.start(spec, info).await {
            Ok(run) => {
                started += 1;
                let seen = sh(
                    run.as_ref(),
                    "cat /run/iterion/bundle/docker.sock 2>/dev/null; ls /run/iterion/bundle",
                )
                .await;
                let out = text(seen.stdout);
                run.cleanup().await.unwrap();
                assert!(!out.contains(MARKER), "the sandbox saw the socket: {out}");
                assert!(out.contains("ok"), "the real dir is not mounted: {out}");
            }
            Err(error) if is_race_refusal(&error) => refused += 1,
            Err(error) => panic!("unexpected: {error}"),
        }
    }
    let flips = flipper.stop();
    assert!(flips >= 200, "only {flips} flips");
    assert!(started > 0, "no start got through ({refused} refused)");
    assert_nothing_staged(&host);
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

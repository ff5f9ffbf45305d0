//! The namespace driver against this kernel: a real sandbox per test, real commands in it.
//! These tests need user namespaces; where the kernel refuses them they fail (never skip):
//! `iterion sandbox doctor` says why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use iterion_sandbox::{
    DriverConstructor, EngineMount, EngineMountKind, ExecOpts, LogLevel, NoProgress, RunInfo,
    RunLog, SandboxRun, SecretBytes, SecretFileMount, Spec, Trust,
};
use iterion_sandbox_namespace::NamespaceConstructor;
use iterion_vocab::Environment;

pub(crate) struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    pub(crate) workspace: PathBuf,
    pub(crate) run_dir: PathBuf,
    pub(crate) home: PathBuf,
}

pub(crate) fn fixture() -> Fixture {
    let workspace = tempfile::Builder::new()
        .prefix("nsws")
        .tempdir_in("/var/tmp")
        .unwrap();
    let run_dir = tempfile::Builder::new()
        .prefix("nsrun")
        .tempdir_in("/var/tmp")
        .unwrap();
    let home = tempfile::Builder::new()
        .prefix("nshome")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::write(workspace.path().join("hello.txt"), "hi").unwrap();
    std::fs::write(home.path().join("secret-in-home"), "s3cr3t").unwrap();
    Fixture {
        workspace: workspace.path().canonicalize().unwrap(),
        run_dir: run_dir.path().canonicalize().unwrap(),
        home: home.path().canonicalize().unwrap(),
        _dirs: vec![workspace, run_dir, home],
    }
}

fn env(fx: &Fixture) -> Environment {
    Environment::from_pairs([
        ("HOME", fx.home.to_str().unwrap()),
        ("ITERION_HOME", fx.home.join(".iterion").to_str().unwrap()),
    ])
}

/// The run log's lines, kept.
#[derive(Default)]
pub(crate) struct Lines(pub(crate) std::sync::Mutex<Vec<String>>);

impl RunLog for Lines {
    fn line(&self, _level: LogLevel, line: &str) {
        self.0.lock().unwrap().push(line.to_owned());
    }
}

pub(crate) async fn start(fx: &Fixture, spec: Spec, trust: Trust) -> Arc<dyn SandboxRun> {
    start_logged(fx, spec, trust, Arc::new(Lines::default())).await
}

pub(crate) async fn start_logged(
    fx: &Fixture,
    spec: Spec,
    trust: Trust,
    log: Arc<Lines>,
) -> Arc<dyn SandboxRun> {
    start_as(fx, spec, trust, log, "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000").await
}

/// [`start_logged`] for run `run_id`.
pub(crate) async fn start_as(
    fx: &Fixture,
    spec: Spec,
    trust: Trust,
    log: Arc<Lines>,
    run_id: &str,
) -> Arc<dyn SandboxRun> {
    let driver = NamespaceConstructor::from_env(&env(fx))
        .construct()
        .await
        .expect("user namespaces must be usable here (see `iterion sandbox doctor`)");
    let driver = driver.with_run_log(log).unwrap();
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let mut info = RunInfo::new(run_id, "s1", &fx.workspace, &fx.run_dir);
    info.trust = trust;
    Arc::from(driver.start(prepared, info).await.unwrap())
}

pub(crate) async fn sh(run: &dyn SandboxRun, script: &str) -> (i64, String, String) {
    let argv = ["sh", "-c", script].map(str::to_owned);
    let result = run.exec(&argv, ExecOpts::default()).await.unwrap();
    (
        result.exit_code,
        String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned(),
        String::from_utf8_lossy(result.stderr.as_deref().unwrap_or_default()).into_owned(),
    )
}

#[tokio::test]
async fn a_command_runs_in_the_workspace_and_its_exit_code_comes_back() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let (code, out, _) = sh(run.as_ref(), "pwd; cat hello.txt; exit 7").await;
    assert_eq!((code, out), (7, format!("{}\nhi", fx.workspace.display())));
    run.cleanup().await.unwrap();
}

/// The engine's own binary, bound read-only where the engine binds it.
fn engine_binary_mount() -> EngineMount {
    EngineMount {
        kind: EngineMountKind::Bind,
        source: std::env::current_exe()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        target: "/run/iterion/bin/iterion".to_owned(),
        read_only: true,
        purpose: "engine-binary".to_owned(),
    }
}

#[tokio::test]
async fn the_host_pid_namespace_is_invisible_and_proc_1_root_is_the_sandbox_root() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let host_pid = std::process::id();
    let script = format!(
        "test ! -e /proc/{host_pid} && echo no-host-pid; ls /proc | grep -c '^[0-9]*$'; \
         cat /proc/1/root{home}/secret-in-home 2>/dev/null || echo no-escape; \
         test -e /proc/1/root/run/iterion || echo same-root",
        home = fx.home.display()
    );
    let (code, out, _) = sh(run.as_ref(), &script).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(code, 0);
    assert_eq!(lines[0], "no-host-pid");
    // The init, the shell, and ls/grep: a handful, never the host's hundreds.
    assert!(lines[1].parse::<u32>().unwrap() <= 5, "{out}");
    assert_eq!(&lines[2..], ["no-escape", "same-root"]);
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn only_loopback_exists_and_a_direct_connection_to_the_host_fails() {
    let fx = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let script = format!(
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; \
         (echo x > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached-host || echo refused; \
         (echo x > /dev/tcp/1.1.1.1/443) 2>/dev/null && echo reached-internet || echo unreachable"
    );
    let argv = ["bash", "-c", &script].map(str::to_owned);
    let result = run.exec(&argv, ExecOpts::default()).await.unwrap();
    let out = String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned();
    assert_eq!(out, "lo\nrefused\nunreachable\n");
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn homes_are_empty_and_the_operator_home_and_shadow_are_masked() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let script = format!(
        "ls -A /home | wc -l; ls -A /root | wc -l; ls -A {home} | wc -l; wc -c < /etc/shadow",
        home = fx.home.display()
    );
    let (code, out, _) = sh(run.as_ref(), &script).await;
    assert_eq!(
        (code, out.split_whitespace().collect::<Vec<_>>()),
        (0, vec!["0", "0", "0", "0"])
    );
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn writes_land_only_in_the_workspace_and_tmp() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let script = "for p in /usr/iterion-x /etc/iterion-x /var/tmp/iterion-x /iterion-x /run/iterion-x /dev/iterion-x; do \
                    (echo x > $p) 2>/dev/null && echo \"wrote $p\"; done; \
                  echo ok > /tmp/t && echo ok > ./made-inside && cat /tmp/t";
    let (code, out, _) = sh(run.as_ref(), script).await;
    assert_eq!((code, out.as_str()), (0, "ok\n"));
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("made-inside")).unwrap(),
        "ok\n"
    );
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn mount_unshare_and_ptrace_are_refused() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    // ctypes calls the syscalls themselves, so the answer is the kernel's, not a tool's.
    let script = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(rc):
    return "ok" if rc == 0 else os.strerror(ctypes.get_errno())
print("mount", errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("unshare-user", errno_of(libc.unshare(0x10000000)))
print("unshare-mnt", errno_of(libc.unshare(0x00020000)))
pid = os.fork()
if pid == 0:
    import time; time.sleep(5); os._exit(0)
print("ptrace", errno_of(libc.ptrace(16, pid, None, None)))
os.kill(pid, 9)
"#;
    let argv = ["python3", "-c", script].map(str::to_owned);
    let result = run.exec(&argv, ExecOpts::default()).await.unwrap();
    let out = String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned();
    assert_eq!(
        out,
        "mount Operation not permitted\nunshare-user Operation not permitted\nunshare-mnt Operation not permitted\nptrace Operation not permitted\n"
    );
    // The util-linux tools meet the same walls.
    let (code, _, _) = sh(
        run.as_ref(),
        "unshare -Ur true 2>/dev/null || unshare -m true 2>/dev/null",
    )
    .await;
    assert_ne!(code, 0);
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_engine_binary_cannot_be_written_where_it_is_bound_or_where_it_lives() {
    let fx = fixture();
    let spec = Spec {
        engine_mounts: vec![engine_binary_mount()],
        ..Spec::default()
    };
    let run = start(&fx, spec, Trust::Trusted).await;
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "(echo x >> /run/iterion/bin/iterion) 2>/dev/null && echo wrote-bound; \
         (echo x >> {host}) 2>/dev/null && echo wrote-host; \
         test -x /run/iterion/bin/iterion && echo executable",
        host = exe.display()
    );
    let (code, out, _) = sh(run.as_ref(), &script).await;
    assert_eq!((code, out.as_str()), (0, "executable\n"));
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_hosts_abstract_unix_sockets_are_out_of_reach() {
    use std::os::linux::net::SocketAddrExt as _;
    let fx = fixture();
    let name = format!("iterion-ns-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    // The control: from the host, the socket answers.
    assert!(std::os::unix::net::UnixStream::connect_addr(&addr).is_ok());
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let script = format!(
        r#"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0{name}")
    print("reached")
except OSError as e:
    print("refused", e.errno)
"#
    );
    let argv = ["python3", "-c", &script].map(str::to_owned);
    let result = run.exec(&argv, ExecOpts::default()).await.unwrap();
    let out = String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned();
    assert_eq!(out, "refused 111\n");
    drop(listener);
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_sandbox_holds_no_capability_and_runs_under_seccomp_no_new_privs_and_landlock() {
    let fx = fixture();
    let log = Arc::new(Lines::default());
    let run = start_logged(&fx, Spec::default(), Trust::Trusted, Arc::clone(&log)).await;
    let (code, out, _) = sh(
        run.as_ref(),
        "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t ' ' '",
    )
    .await;
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nCapAmb: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n"
        )
    );
    // This kernel has Landlock (ABI ≥ 5): the sandbox says it is fully enforced.
    let lines = log.0.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("sandbox active: driver=namespace")
                && l.contains("landlock=full")),
        "{lines:?}"
    );
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_untrusted_run_of_a_root_engine_is_the_copy_owner_not_root() {
    if !nix::unistd::geteuid().is_root() {
        return; // the mapping under test is a root engine's; a user engine maps itself
    }
    let fx = fixture();
    std::os::unix::fs::chown(&fx.workspace, Some(65532), Some(65532)).unwrap();
    let spec = Spec {
        user: Some("65532:65532".to_owned()),
        ..Spec::default()
    };
    let run = start(&fx, spec, Trust::Untrusted).await;
    let (code, out, _) = sh(
        run.as_ref(),
        "id -u; echo x > mine; cat /etc/shadow 2>&1 | wc -c",
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(out.lines().next(), Some("65532"));
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(
        std::fs::metadata(fx.workspace.join("mine")).unwrap().uid(),
        65532
    );
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_file_secret_is_read_only_at_its_path_and_named_by_its_variable() {
    let fx = fixture();
    let spec = Spec {
        secret_files: vec![SecretFileMount {
            name: "TOKEN".to_owned(),
            mount_path: "/run/secrets/token".to_owned(),
            env: Some("TOKEN_FILE".to_owned()),
            value: SecretBytes::new("s3cret"),
        }],
        ..Spec::default()
    };
    let run = start(&fx, spec, Trust::Trusted).await;
    let (code, out, _) = sh(
        run.as_ref(),
        "cat \"$TOKEN_FILE\"; (echo x > /run/secrets/token) 2>/dev/null && echo wrote; true",
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "s3cret"));
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn stdin_is_fed_and_streams_and_a_dropped_exec_kills_its_command() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let argv = ["sh", "-c", "tr a-z A-Z"].map(str::to_owned);
    let opts = ExecOpts {
        stdin: Some(Box::new(std::io::Cursor::new(b"hello".to_vec()))),
        ..ExecOpts::default()
    };
    let result = run.exec(&argv, opts).await.unwrap();
    assert_eq!(result.stdout.as_deref(), Some(&b"HELLO"[..]));
    // A hung command whose exec is dropped (a cancelled node) is killed, not left running.
    let argv = ["sh", "-c", "exec sleep 300"].map(str::to_owned);
    let hung = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        run.exec(&argv, ExecOpts::default()),
    )
    .await;
    assert!(hung.is_err());
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (_, out, _) = sh(
        run.as_ref(),
        "for p in /proc/[0-9]*; do cat $p/comm; done | grep -c sleep",
    )
    .await;
    assert_eq!(out.trim(), "0");
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn teardown_leaves_no_process_behind_and_later_execs_are_refused() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let argv = ["sh", "-c", "sleep 300 & sleep 300 & echo started"].map(str::to_owned);
    run.exec(&argv, ExecOpts::default()).await.unwrap();
    let before = descendants();
    assert!(!before.is_empty());
    run.cleanup().await.unwrap();
    assert_eq!(descendants(), Vec::<u32>::new());
    let again = run.exec(&argv, ExecOpts::default()).await;
    assert!(matches!(
        again,
        Err(iterion_sandbox::Error::SandboxClosed { .. })
    ));
}

/// The processes (other than threads) whose parent is this test process, and theirs.
fn descendants() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    let mut parents = vec![me];
    while let Some(parent) = parents.pop() {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            let ppid = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .and_then(|v| v.trim().parse::<u32>().ok());
            let zombie = status
                .lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'));
            if ppid == Some(parent) && !zombie && !found.contains(&pid) {
                found.push(pid);
                parents.push(pid);
            }
        }
    }
    found
}

#[tokio::test]
async fn a_setup_step_that_fails_fails_the_start_with_its_step_named() {
    let fx = fixture();
    let spec = Spec {
        engine_mounts: vec![EngineMount {
            kind: EngineMountKind::Bind,
            source: "/nonexistent/iterion-source".to_owned(),
            target: "/run/iterion/x".to_owned(),
            read_only: true,
            purpose: "test".to_owned(),
        }],
        ..Spec::default()
    };
    let driver = NamespaceConstructor::from_env(&env(&fx))
        .construct()
        .await
        .unwrap();
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let info = RunInfo::new(
        "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0001",
        "s1",
        &fx.workspace,
        &fx.run_dir,
    );
    let error = driver.start(prepared, info).await.err().unwrap();
    assert_eq!(
        (
            error.code(),
            error
                .to_string()
                .starts_with("sandbox: namespace: bind source /nonexistent/iterion-source (test)")
        ),
        ("SANDBOX_SETUP_FAILED", true),
        "{error}"
    );
    assert_eq!(descendants(), Vec::<u32>::new());
}

#[tokio::test]
async fn an_image_the_workflow_names_is_refused_at_prepare() {
    let fx = fixture();
    let driver = NamespaceConstructor::from_env(&env(&fx))
        .construct()
        .await
        .unwrap();
    let spec = Spec {
        image: Some("alpine:3".to_owned()),
        ..Spec::default()
    };
    let error = driver.prepare(&spec, &NoProgress).await.err().unwrap();
    assert!(
        matches!(error, iterion_sandbox::Error::InvalidSpec { ref field, .. } if field == "image")
    );
}

#[tokio::test]
async fn the_sandbox_processes_keep_none_of_the_engines_descriptors() {
    let fx = fixture();
    // An engine descriptor without close-on-exec, as a fork would inherit it.
    let marker = fx.run_dir.join("engine-private-file");
    let file = std::fs::File::create(&marker).unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&file);
    nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let sandbox_processes = descendants();
    assert!(!sandbox_processes.is_empty());
    for pid in &sandbox_processes {
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
        {
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            assert_ne!(target, marker, "pid {pid} holds the engine's fd {raw}");
        }
    }
    run.cleanup().await.unwrap();
    drop(file);
}

#[tokio::test]
async fn a_request_larger_than_a_datagram_is_delivered_whole() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    // Five 100 kB variables: half a megabyte of request, each value under the kernel's
    // 128 KiB limit on one string.
    let env: Vec<(String, String)> = (0..5)
        .map(|i| (format!("BIG{i}"), "a".repeat(100_000)))
        .collect();
    let argv = ["sh", "-c", "echo $(( ${#BIG0} + ${#BIG4} ))"].map(str::to_owned);
    let result = run
        .exec(
            &argv,
            ExecOpts {
                env,
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (result.exit_code, result.stdout.as_deref()),
        (0, Some(&b"200000\n"[..]))
    );
    // An argument the kernel refuses says so on stderr, with exit 126.
    let huge = format!("x='{}'", "a".repeat(200_000));
    let (code, _, err) = sh(run.as_ref(), &huge).await;
    assert_eq!(code, 126);
    assert!(err.contains("Argument list too long"), "{err}");
    run.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_exec_runs_as_the_one_mapped_user_and_another_user_is_refused_not_ignored() {
    let fx = fixture();
    let spec = Spec {
        user: Some("1000:1000".to_owned()),
        ..Spec::default()
    };
    let run = start(&fx, spec, Trust::Trusted).await;
    assert_eq!(run.only_user().as_deref(), Some("1000:1000"));
    let as_user = |user: &str| ExecOpts {
        user: Some(user.to_owned()),
        ..ExecOpts::default()
    };
    let argv = ["sh", "-c", "id -u; id -g"].map(str::to_owned);
    for same in ["1000", "1000:1000", " 1000:1000 "] {
        let result = run.exec(&argv, as_user(same)).await.unwrap();
        assert_eq!(
            (
                result.exit_code,
                String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned()
            ),
            (0, "1000\n1000\n".to_owned()),
            "{same}"
        );
    }
    for other in ["0:0", "0", "1000:0", "root", "65534"] {
        let error = run.exec(&argv, as_user(other)).await.unwrap_err();
        assert!(
            error.to_string().contains("maps one user, 1000:1000"),
            "{other}: {error}"
        );
    }
    run.cleanup().await.unwrap();
}

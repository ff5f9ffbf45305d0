//! `iterion __egress-bridge` (SANDBOX.md §4.6) and the static binary that carries it (§8.4).
//!
//! Host tests drive the normal build: readiness, the splice with half-close, setup failures.
//! Container tests (`docker_*`) mount the static build (`ITERION_STATIC_BIN`, set by
//! scripts/test.sh) read-only at `/run/iterion/bin/iterion` and the host's `net/` dir at
//! `/run/iterion/net`, as the engine will: in `--network none` containers the bridge is the only
//! route out, a direct connection fails, and a dead bridge leaves no route at all.
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Stdio};

use iterion_test_support::{
    BUSYBOX_IMAGE, ContainerGuard, DEBIAN_IMAGE, TEST_ID_LABEL, static_iterion_or_skip,
};
use pretty_assertions::assert_eq;

use crate::suite::support::docker_or_skip;

/// Where the engine mounts its binary and the proxy's socket dir (SANDBOX.md §8.4, §4.6).
const ENGINE_BIN: &str = "/run/iterion/bin/iterion";
const NET_DIR: &str = "/run/iterion/net";
const BRIDGE: &str =
    "/run/iterion/bin/iterion __egress-bridge --listen 127.0.0.1:3128=/run/iterion/net/proxy.sock";

/// A tiny HTTP server on a Unix socket standing in for the proxy: every request gets
/// `<name>: <request line>` as its body, then the connection closes. Mode 0666 as §4.6 says.
fn http_on_unix(path: &Path, name: &'static str) {
    let listener = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match conn.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let line = head.lines().next().unwrap_or_default();
                let body = format!("{name}: {line}\n");
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
}

/// The exact response [`http_on_unix`] gives to `request_line`.
fn http_response(name: &str, request_line: &str) -> String {
    let body = format!("{name}: {request_line}\n");
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A TCP server on all host interfaces answering `direct` to anything: what a container that
/// could reach the host directly would get.
fn http_on_tcp() -> u16 {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\ndirect\n",
            );
        }
    });
    port
}

fn free_loopback_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A bridge started on the host, killed when dropped.
struct HostBridge(Child);

impl Drop for HostBridge {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bridge_cmd(listen: &[String]) -> StdCommand {
    let mut cmd = StdCommand::new(assert_cmd::cargo::cargo_bin("iterion"));
    cmd.arg("__egress-bridge");
    for pair in listen {
        cmd.args(["--listen", pair]);
    }
    cmd
}

/// Starts the bridge and returns once it has printed its ready line (asserted exactly).
fn start_host_bridge(listen: &[String]) -> HostBridge {
    let mut child = bridge_cmd(listen)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let bridge = HostBridge(child);
    assert_eq!(line, "ready\n");
    bridge
}

#[test]
fn bridge_splices_each_listener_to_its_socket_and_passes_half_close_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    // Socket 1 reads to EOF before answering: only a half-close from the client gets an answer.
    let echo = dir.path().join("echo.sock");
    let listener = UnixListener::bind(&echo).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                conn.read_to_end(&mut got).unwrap();
                let answer = format!("{} bytes: {}", got.len(), String::from_utf8_lossy(&got));
                conn.write_all(answer.as_bytes()).unwrap();
            });
        }
    });
    let http = dir.path().join("http.sock");
    http_on_unix(&http, "second");
    let (p1, p2) = (free_loopback_port(), free_loopback_port());
    let _bridge = start_host_bridge(&[
        format!("127.0.0.1:{p1}={}", echo.display()),
        format!("127.0.0.1:{p2}={}", http.display()),
    ]);

    let mut tcp = TcpStream::connect(("127.0.0.1", p1)).unwrap();
    tcp.write_all(b"hello through the bridge").unwrap();
    tcp.shutdown(Shutdown::Write).unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, "24 bytes: hello through the bridge");

    // A bulk transfer arrives whole (no buffering limit cuts it).
    let big = vec![b'x'; 4 * 1024 * 1024];
    let mut tcp = TcpStream::connect(("127.0.0.1", p1)).unwrap();
    let writer = {
        let mut tcp = tcp.try_clone().unwrap();
        std::thread::spawn(move || {
            tcp.write_all(&big).unwrap();
            tcp.shutdown(Shutdown::Write).unwrap();
        })
    };
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).unwrap();
    writer.join().unwrap();
    assert_eq!(answer.len(), "4194304 bytes: ".len() + 4 * 1024 * 1024);
    assert!(answer.starts_with(b"4194304 bytes: xxx"));

    let mut tcp = TcpStream::connect(("127.0.0.1", p2)).unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, http_response("second", "GET / HTTP/1.1"));
}

#[test]
fn bridge_closes_a_connection_when_its_socket_is_gone_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("proxy.sock");
    let port = free_loopback_port();
    // The socket exists at start (the check), then its server goes away.
    drop(UnixListener::bind(&sock).unwrap());
    let _bridge = start_host_bridge(&[format!("127.0.0.1:{port}={}", sock.display())]);

    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut answer = Vec::new();
    // Closed without a byte: the client gets no route, not a hang.
    let _ = tcp.read_to_end(&mut answer);
    assert_eq!(answer, b"");

    // The proxy comes back at the same path: new connections reach it.
    std::fs::remove_file(&sock).unwrap();
    http_on_unix(&sock, "back");
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.write_all(b"GET /again HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, http_response("back", "GET /again HTTP/1.1"));
}

#[test]
fn bridge_fails_before_ready_when_the_socket_is_missing_or_the_port_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("proxy.sock");
    let out = bridge_cmd(&[format!("127.0.0.1:3128={}", missing.display())])
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(1),
            String::new(),
            format!(
                "error: egress bridge: socket {} is not there (is the proxy listening and its socket mounted?): No such file or directory (os error 2)\n",
                missing.display()
            )
        )
    );

    let not_socket = dir.path().join("file");
    std::fs::write(&not_socket, "").unwrap();
    let out = bridge_cmd(&[format!("127.0.0.1:3128={}", not_socket.display())])
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(1),
            format!(
                "error: egress bridge: {} is not a Unix socket\n",
                not_socket.display()
            )
        )
    );

    let sock = dir.path().join("ok.sock");
    let _server = UnixListener::bind(&sock).unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = bridge_cmd(&[format!("127.0.0.1:{port}={}", sock.display())])
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(1),
            String::new(),
            format!(
                "error: egress bridge: cannot listen on 127.0.0.1:{port}: Address already in use (os error 98)\n"
            )
        )
    );
}

#[test]
fn bridge_is_hidden_and_refuses_bad_listen_pairs_with_exit_2() {
    let help = bridge_cmd(&[]).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    let top = StdCommand::new(assert_cmd::cargo::cargo_bin("iterion"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&top.stdout).contains("egress"));

    let out = bridge_cmd(&["0.0.0.0:3128=/s.sock".to_owned()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "0.0.0.0:3128 is not a loopback address: the bridge listens on loopback only"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bridge_cmd(&[]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

// ---------------------------------------------------------------------------------------------
// Real containers.

/// `docker run --rm` a labelled, guarded container; returns (exit code, stdout, stderr).
fn docker_run(test_id: &str, args: &[&str]) -> (Option<i32>, String, String) {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!(
        "iterion-test-egress-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let _guard = ContainerGuard::new(name.clone());
    let out = StdCommand::new("docker")
        .args(["run", "--rm", "--name", &name, "--label"])
        .arg(format!("{TEST_ID_LABEL}={test_id}"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn bin_mount(bin: &Path) -> String {
    format!("{}:{ENGINE_BIN}:ro", bin.display())
}

/// The docker0 gateway: the host address a container on the default network reaches.
fn host_gateway() -> String {
    iterion_test_support::docker_bridge_gateway()
}

/// The host side of the per-run `net/` dir with the proxy stand-in listening in it.
fn net_dir_with_proxy(name: &'static str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("net");
    std::fs::create_dir(&net).unwrap();
    std::fs::set_permissions(&net, std::fs::Permissions::from_mode(0o755)).unwrap();
    http_on_unix(&net.join("proxy.sock"), name);
    (dir, net)
}

#[test]
fn docker_static_binary_runs_in_busybox_which_has_no_libc() {
    let test_id = "cli::egress_bridge::docker_static_binary_runs_in_busybox";
    let Some(bin) = static_iterion_or_skip(test_id) else {
        return;
    };
    if !docker_or_skip(test_id) {
        return;
    }
    let result = docker_run(
        test_id,
        &[
            "--network",
            "none",
            "-v",
            &bin_mount(&bin),
            BUSYBOX_IMAGE,
            "sh",
            "-c",
            // No dynamic loader and no libc anywhere: only a static binary can run here.
            "test ! -e /lib && test ! -e /lib64 && test ! -e /usr/lib && \
             /run/iterion/bin/iterion --version",
        ],
    );
    assert_eq!(
        result,
        (
            Some(0),
            format!("iterion {}\n", env!("CARGO_PKG_VERSION")),
            String::new()
        )
    );
}

#[test]
fn docker_network_none_container_reaches_only_the_proxy_socket_and_a_dead_bridge_leaves_no_route() {
    let test_id = "cli::egress_bridge::docker_network_none_debian";
    let Some(bin) = static_iterion_or_skip(test_id) else {
        return;
    };
    if !docker_or_skip(test_id) {
        return;
    }
    let (_dir, net) = net_dir_with_proxy("proxy.sock");
    let gateway = host_gateway();
    let port = http_on_tcp();
    let direct = format!("http://{gateway}:{port}/");

    // Control: from a container with a network, the host server answers directly. So the failure
    // below is the isolation, not a server that is not there.
    let control = docker_run(
        test_id,
        &[DEBIAN_IMAGE, "curl", "-sS", "--max-time", "10", &direct],
    );
    assert_eq!(control, (Some(0), "direct\n".to_owned(), String::new()));

    let script = format!(
        r#"
mkfifo /tmp/ready
{BRIDGE} >/tmp/ready 2>/tmp/bridge.err &
pid=$!
read -r -t 10 line </tmp/ready
echo "bridge said: $line"
curl -sS -x http://127.0.0.1:3128 http://example.test/hello; echo "proxied rc=$?"
curl -sS --noproxy '*' --max-time 5 {direct} 2>/dev/null; echo "direct to host rc=$?"
curl -sS --noproxy '*' --max-time 5 http://1.1.1.1/ 2>/dev/null; echo "direct to 1.1.1.1 rc=$?"
kill "$pid"; wait "$pid"; echo "bridge killed: $?"
curl -sS -x http://127.0.0.1:3128 http://example.test/again 2>/dev/null; echo "after kill rc=$?"
cat /tmp/bridge.err
"#
    );
    let net_mount = format!("{}:{NET_DIR}:ro", net.display());
    let result = docker_run(
        test_id,
        &[
            "--network",
            "none",
            "-v",
            &bin_mount(&bin),
            "-v",
            &net_mount,
            DEBIAN_IMAGE,
            "bash",
            "-c",
            &script,
        ],
    );
    assert_eq!(
        result,
        (
            Some(0),
            "bridge said: ready\n\
             proxy.sock: GET http://example.test/hello HTTP/1.1\n\
             proxied rc=0\n\
             direct to host rc=7\n\
             direct to 1.1.1.1 rc=7\n\
             bridge killed: 143\n\
             after kill rc=7\n"
                .to_owned(),
            String::new()
        )
    );
}

#[test]
fn docker_bridge_works_in_a_busybox_network_none_container() {
    let test_id = "cli::egress_bridge::docker_network_none_busybox";
    let Some(bin) = static_iterion_or_skip(test_id) else {
        return;
    };
    if !docker_or_skip(test_id) {
        return;
    }
    let (_dir, net) = net_dir_with_proxy("busybox");
    let gateway = host_gateway();
    let port = http_on_tcp();
    // busybox nc connects to IP literals (its wget does not work here). ash reports the killed
    // job ("Terminated") on stderr whenever it likes, so stderr is dropped; the bridge's own
    // stderr is printed on stdout and is part of the assertion.
    let script = format!(
        r#"
exec 2>/dev/null
mkfifo /tmp/ready
{BRIDGE} >/tmp/ready 2>/tmp/bridge.err &
pid=$!
read -r -t 10 line </tmp/ready
echo "bridge said: $line"
printf 'GET http://example.test/bb HTTP/1.0\r\n\r\n' | nc 127.0.0.1 3128; echo "proxied rc=$?"
nc {gateway} {port} </dev/null 2>/dev/null; echo "direct rc=$?"
kill "$pid"; wait "$pid"; echo "bridge killed: $?"
nc 127.0.0.1 3128 </dev/null 2>/dev/null; echo "after kill rc=$?"
cat /tmp/bridge.err
"#
    );
    let net_mount = format!("{}:{NET_DIR}:ro", net.display());
    let result = docker_run(
        test_id,
        &[
            "--network",
            "none",
            "-v",
            &bin_mount(&bin),
            "-v",
            &net_mount,
            BUSYBOX_IMAGE,
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(
        result,
        (
            Some(0),
            format!(
                "bridge said: ready\n{}proxied rc=0\ndirect rc=1\nbridge killed: 143\nafter kill rc=1\n",
                http_response("busybox", "GET http://example.test/bb HTTP/1.0")
            ),
            String::new()
        )
    );
}

//! Attack tests of the reader (issue 15 item 12): every way a repository can point the engine at
//! something other than a small regular file of its own is refused, by name, at once.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Instant;

use pretty_assertions::assert_eq;

use super::*;

fn rule(root: &Path, relative: &str) -> &'static str {
    match read_beneath(root, Path::new(relative), 1024) {
        Ok(_) => "read",
        Err(e) => e.rule(),
    }
}

#[test]
fn a_regular_file_inside_is_read_and_an_inside_symlink_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("conf")).unwrap();
    std::fs::write(dir.path().join("conf/devbox.json"), "{}").unwrap();
    symlink("conf/devbox.json", dir.path().join("devbox.json")).unwrap();
    assert_eq!(
        read_beneath(dir.path(), Path::new("devbox.json"), 1024).unwrap(),
        b"{}"
    );
}

#[test]
fn every_escape_and_special_file_is_refused_by_its_rule_without_blocking() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(outer.path().join("secret"), "host secret").unwrap();
    symlink("/dev/stdin", root.join("stdin.json")).unwrap();
    symlink("/dev/zero", root.join("zero.json")).unwrap();
    symlink("/proc/self/fd/0", root.join("fd0.json")).unwrap();
    symlink("/etc/passwd", root.join("passwd.json")).unwrap();
    symlink("../secret", root.join("up.json")).unwrap();
    symlink(outer.path().join("secret"), root.join("abs.json")).unwrap();
    symlink("/", root.join("slash")).unwrap();
    symlink("nowhere", root.join("dangling.json")).unwrap();
    std::fs::create_dir(root.join("dir.json")).unwrap();
    nix::unistd::mkfifo(&root.join("fifo.json"), Mode::from_bits_truncate(0o600)).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(root.join("sock.json")).unwrap();
    std::fs::write(root.join("big.json"), vec![b'x'; 2048]).unwrap();
    let started = Instant::now();
    let got: Vec<(&str, &str)> = [
        "stdin.json",
        "zero.json",
        "fd0.json",
        "passwd.json",
        "up.json",
        "abs.json",
        "slash/etc/passwd",
        "../repo/../secret",
        "/etc/passwd",
        "dangling.json",
        "dir.json",
        "fifo.json",
        "sock.json",
        "big.json",
        "absent.json",
    ]
    .into_iter()
    .map(|name| (name, rule(&root, name)))
    .collect();
    drop(listener);
    assert_eq!(
        got,
        vec![
            ("stdin.json", "outside_repository"),
            ("zero.json", "outside_repository"),
            ("fd0.json", "outside_repository"),
            ("passwd.json", "outside_repository"),
            ("up.json", "outside_repository"),
            ("abs.json", "outside_repository"),
            ("slash/etc/passwd", "outside_repository"),
            ("../repo/../secret", "outside_repository"),
            ("/etc/passwd", "outside_repository"),
            ("dangling.json", "not_found"),
            ("dir.json", "not_regular"),
            ("fifo.json", "not_regular"),
            ("sock.json", "not_regular"),
            ("big.json", "too_large"),
            ("absent.json", "not_found"),
        ]
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "nothing blocked"
    );
}

#[test]
fn the_error_names_the_file_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    symlink("/dev/stdin", dir.path().join("devbox.json")).unwrap();
    let error = read_beneath(dir.path(), Path::new("devbox.json"), 1024).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("devbox.json"), "{text}");
    assert!(text.contains("outside the repository"), "{text}");
}

#[test]
fn the_fallback_walk_refuses_every_symlink_and_dot_dot() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d/f"), "ok").unwrap();
    symlink("d", dir.path().join("link")).unwrap();
    symlink("d/f", dir.path().join("flink")).unwrap();
    let walk = |rel: &str| {
        let root_fd = open(
            dir.path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        walk_without_symlinks(
            root_fd,
            Path::new(rel),
            OFlag::O_RDONLY | OFlag::O_NONBLOCK,
            Path::new(rel),
            dir.path(),
        )
        .map(|_| "read")
        .unwrap_or_else(|e| e.rule())
    };
    assert_eq!(
        ["d/f", "link/f", "flink", "d/../d/f"].map(walk),
        ["read", "symlink", "symlink", "outside_repository"]
    );
}

#[test]
fn read_regular_refuses_devices_and_fifos_outside_a_repository() {
    let dir = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
    let got = [
        Path::new("/dev/stdin"),
        Path::new("/dev/zero"),
        &dir.path().join("fifo"),
    ]
    .map(|p| {
        read_regular(p, 10)
            .map(|_| "read")
            .unwrap_or_else(|e| e.rule())
    });
    assert_eq!(got, ["not_regular", "not_regular", "not_regular"]);
}

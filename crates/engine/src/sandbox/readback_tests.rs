use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;

const SESSION: &str = "0b1c2d3e-aaaa-4bbb-8ccc-123456789abc";

async fn host(dir: &Path) -> Box<dyn SandboxRun> {
    crate::sandbox::host::host_sandbox_with_path("r", dir, None)
        .await
        .unwrap()
}

/// The most memory this process has held so far (nextest runs each test in its own process).
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

fn write(root: &Path, name: &str, text: &str) {
    let path = root.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn a_session_s_files_come_back_with_their_names() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &format!("projects/-ws/{SESSION}.jsonl"),
        "{\"a\":1}\n",
    );
    write(
        dir.path(),
        &format!("sessions/2026/12/03/rollout-2026-12-03T10-00-00-{SESSION}.jsonl"),
        "{\"b\":2}\n",
    );
    write(dir.path(), "projects/-ws/other.jsonl", "not this session");
    let run = host(dir.path()).await;
    let mut files = session_files(run.as_ref(), dir.path().to_str().unwrap(), SESSION)
        .await
        .unwrap();
    files.sort();
    assert_eq!(
        files,
        vec![
            (
                format!("projects/-ws/{SESSION}.jsonl"),
                "{\"a\":1}\n".to_owned()
            ),
            (
                format!("sessions/2026/12/03/rollout-2026-12-03T10-00-00-{SESSION}.jsonl"),
                "{\"b\":2}\n".to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn attack_a_huge_session_file_is_refused_without_the_engine_reading_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &format!("projects/-ws/{SESSION}.jsonl"), "");
    // Sparse: 2 GiB of zeros that cost the sandbox no disk.
    std::fs::File::options()
        .write(true)
        .open(dir.path().join(format!("projects/-ws/{SESSION}.jsonl")))
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let run = host(dir.path()).await;
    let before = peak_rss_bytes();
    let error = session_files(run.as_ref(), dir.path().to_str().unwrap(), SESSION)
        .await
        .unwrap_err();
    let grown = peak_rss_bytes().saturating_sub(before);
    assert!(error.contains("over 16 MiB"), "{error}");
    assert!(
        grown < 256 << 20,
        "reading the session back grew the engine by {} MiB",
        grown >> 20
    );
}

#[tokio::test]
async fn attack_a_hostile_image_printing_without_end_is_cut_at_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let run = host(dir.path()).await;
    // What a `head` or `cat` the image replaced would print.
    let argv = [
        "sh".to_owned(),
        "-c".to_owned(),
        "head -c 1073741824 /dev/zero".to_owned(),
    ];
    let before = peak_rss_bytes();
    let error = exec_capped(run.as_ref(), &argv, 1 << 20).await.unwrap_err();
    let grown = peak_rss_bytes().saturating_sub(before);
    assert!(error.contains("over 1048576 bytes"), "{error}");
    assert!(
        grown < 256 << 20,
        "the exec grew the engine by {} MiB",
        grown >> 20
    );
}

#[tokio::test]
async fn attack_a_session_of_thousands_of_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..(SESSION_MAX_FILES + 10) {
        write(dir.path(), &format!("projects/p{i}/{SESSION}.jsonl"), "x");
    }
    let run = host(dir.path()).await;
    let error = session_files(run.as_ref(), dir.path().to_str().unwrap(), SESSION)
        .await
        .unwrap_err();
    assert!(error.contains("over 64 files"), "{error}");
}

#[tokio::test]
async fn attack_a_newline_in_a_dir_name_cannot_name_a_file_outside_the_config_dir() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("config");
    // `projects/x\n..` lists as `projects/x` and `../<id>.jsonl`: a file beside the config dir.
    write(&dir, &format!("projects/x\n../{SESSION}.jsonl"), "x");
    write(root.path(), &format!("{SESSION}.jsonl"), "OUTSIDE-SECRET");
    let run = host(root.path()).await;
    let got = session_files(run.as_ref(), dir.to_str().unwrap(), SESSION).await;
    let error = got.expect_err("a split name is refused");
    assert!(error.contains("not a plain name"), "{error}");
    assert!(!error.contains("OUTSIDE-SECRET"));
}

#[tokio::test]
async fn attack_a_session_file_that_is_a_symlink_is_not_read() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("config");
    write(root.path(), "id_rsa", "PRIVATE-KEY");
    std::fs::create_dir_all(dir.join("projects/-ws")).unwrap();
    std::os::unix::fs::symlink(
        root.path().join("id_rsa"),
        dir.join(format!("projects/-ws/{SESSION}.jsonl")),
    )
    .unwrap();
    let run = host(root.path()).await;
    let files = session_files(run.as_ref(), dir.to_str().unwrap(), SESSION)
        .await
        .unwrap();
    assert_eq!(files, Vec::<(String, String)>::new());
}

#[test]
fn a_session_file_name_is_plain_and_of_its_session() {
    for good in [
        format!("projects/-ws-repo/{SESSION}.jsonl"),
        format!("sessions/2026/12/03/rollout-2026-12-03T10-00-00-{SESSION}.jsonl"),
    ] {
        assert!(session_file_name(&good, SESSION), "{good}");
    }
    for bad in [
        format!("../{SESSION}.jsonl"),
        format!("projects/../{SESSION}.jsonl"),
        format!("projects/./{SESSION}.jsonl"),
        format!("/projects/x/{SESSION}.jsonl"),
        format!("projects/x\n/{SESSION}.jsonl"),
        format!("projects/x/y/{SESSION}.jsonl"),
        format!("projects//{SESSION}.jsonl"),
        "projects/x/other.jsonl".to_owned(),
        format!("settings/x/{SESSION}.jsonl"),
        format!("sessions/a/b/c/{SESSION}.jsonl"),
        format!("projects/{}/{SESSION}.jsonl", "d".repeat(2000)),
    ] {
        assert!(!session_file_name(&bad, SESSION), "{bad:?}");
    }
}

#[tokio::test]
async fn attack_an_exec_without_a_sink_of_its_own_keeps_a_bounded_part_of_its_output() {
    let dir = tempfile::tempdir().unwrap();
    // What a hostile image's `mkdir`, `true` or `sh` could print to a setup exec or a probe.
    let run = bounded(host(dir.path()).await.into());
    let argv = [
        "sh".to_owned(),
        "-c".to_owned(),
        "head -c 1073741824 /dev/zero; head -c 268435456 /dev/zero >&2; exit 3".to_owned(),
    ];
    let before = peak_rss_bytes();
    let result = run.exec(&argv, ExecOpts::default()).await.unwrap();
    let grown = peak_rss_bytes().saturating_sub(before);
    assert_eq!(result.exit_code, 3);
    assert_eq!(
        (
            result.stdout.map(|b| b.len()),
            result.stderr.map(|b| b.len())
        ),
        (Some(DEFAULT_STDOUT_MAX), Some(DEFAULT_STDERR_MAX))
    );
    assert!(
        grown < 256 << 20,
        "the exec grew the engine by {} MiB",
        grown >> 20
    );
}

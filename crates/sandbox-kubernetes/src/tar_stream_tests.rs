use std::io::Write;
use std::path::PathBuf;

use pretty_assertions::assert_eq;

use super::*;

fn names(plan: &WorkspaceTarPlan) -> Vec<String> {
    plan.names().map(|n| n.display().to_string()).collect()
}

/// Every member of an archive as `(path, entry type, link target, content)`.
fn members(bytes: &[u8]) -> Vec<(String, EntryType, Option<String>, Vec<u8>)> {
    let mut archive = tar::Archive::new(bytes);
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            (
                entry.path().unwrap().display().to_string(),
                entry.header().entry_type(),
                entry.link_name().unwrap().map(|l| l.display().to_string()),
                content,
            )
        })
        .collect()
}

/// A writer that keeps everything.
#[derive(Default)]
struct Recorder {
    bytes: Vec<u8>,
}

impl Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn write(plan: &WorkspaceTarPlan) -> (TarWritten, Vec<u8>) {
    let mut out = Recorder::default();
    let written = plan.write_to(&mut out).unwrap();
    (written, out.bytes)
}

#[test]
fn the_workspace_tar_lists_top_level_entries_never_dot() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "fn main() {}").unwrap();
    std::fs::write(dir.path().join("README"), "hi").unwrap();
    let plan = WorkspaceTarPlan::scan(dir.path()).unwrap();
    assert_eq!(names(&plan), vec!["README", "src", "src/lib.rs"]);
    let (_, bytes) = write(&plan);
    let got: Vec<(String, EntryType)> = members(&bytes)
        .into_iter()
        .map(|(name, kind, _, _)| (name, kind))
        .collect();
    assert_eq!(
        got,
        vec![
            ("README".to_owned(), EntryType::Regular),
            ("src".to_owned(), EntryType::Directory),
            ("src/lib.rs".to_owned(), EntryType::Regular),
        ]
    );
}

#[test]
fn the_planned_length_is_exact_for_long_names_links_and_odd_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let long_dir = "d".repeat(90);
    let long_file = format!("{long_dir}/{}", "f".repeat(120));
    std::fs::create_dir_all(root.join(&long_dir)).unwrap();
    std::fs::create_dir_all(root.join("empty/nested")).unwrap();
    let sizes = [0usize, 1, 511, 512, 513, 100_000];
    for size in sizes {
        std::fs::write(root.join(format!("size-{size}")), vec![b'x'; size]).unwrap();
    }
    std::fs::write(root.join(&long_file), b"long").unwrap();
    std::os::unix::fs::symlink("size-1", root.join("short-link")).unwrap();
    std::os::unix::fs::symlink("t".repeat(200), root.join("long-link")).unwrap();
    std::os::unix::fs::symlink(&long_file, root.join("l".repeat(110))).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(root.join("fifo"))
        .status()
        .is_ok_and(|s| s.success());

    let plan = WorkspaceTarPlan::scan(root).unwrap();
    let (written, bytes) = write(&plan);
    assert_eq!(
        (written.bytes, bytes.len() as u64, written.changed),
        (plan.len(), plan.len(), vec![])
    );
    let got = members(&bytes);
    let find = |name: &str| got.iter().find(|m| m.0 == name).cloned();
    assert_eq!(
        (
            find(&long_file).map(|m| m.3),
            find("long-link").and_then(|m| m.2),
            find(&"l".repeat(110)).and_then(|m| m.2),
            find("size-100000").map(|m| m.3.len()),
            find("empty/nested").map(|m| m.1),
            find("fifo").map(|m| m.1),
        ),
        (
            Some(b"long".to_vec()),
            Some("t".repeat(200)),
            Some(long_file.clone()),
            Some(100_000),
            Some(EntryType::Directory),
            fifo.then_some(EntryType::Fifo),
        )
    );
}

#[test]
fn a_file_that_changes_after_the_scan_keeps_its_scanned_size() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("grows"), b"abc").unwrap();
    std::fs::write(dir.path().join("shrinks"), b"abcdef").unwrap();
    std::fs::write(dir.path().join("stays"), b"same").unwrap();
    let plan = WorkspaceTarPlan::scan(dir.path()).unwrap();
    std::fs::write(dir.path().join("grows"), b"abcdefgh").unwrap();
    std::fs::write(dir.path().join("shrinks"), b"ab").unwrap();
    let (written, bytes) = write(&plan);
    let contents: Vec<(String, Vec<u8>)> = members(&bytes)
        .into_iter()
        .map(|(name, _, _, content)| (name, content))
        .collect();
    assert_eq!(
        (written, contents),
        (
            TarWritten {
                bytes: plan.len(),
                changed: vec![PathBuf::from("grows"), PathBuf::from("shrinks")],
            },
            vec![
                ("grows".to_owned(), b"abc".to_vec()),
                ("shrinks".to_owned(), b"ab\0\0\0\0".to_vec()),
                ("stays".to_owned(), b"same".to_vec()),
            ]
        )
    );
}

#[test]
fn a_file_that_vanishes_after_the_scan_fails_the_copy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gone"), b"abc").unwrap();
    let plan = WorkspaceTarPlan::scan(dir.path()).unwrap();
    std::fs::remove_file(dir.path().join("gone")).unwrap();
    let error = plan.write_to(Recorder::default()).unwrap_err();
    assert_eq!(
        (error.code(), error.to_string().contains("gone")),
        ("SANDBOX_SETUP_FAILED", true)
    );
}

#[test]
fn sockets_are_left_out_and_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), b"a").unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    let plan = WorkspaceTarPlan::scan(dir.path()).unwrap();
    assert_eq!(
        (names(&plan), plan.skipped().to_vec()),
        (vec!["a".to_owned()], vec![PathBuf::from("sock")])
    );
}

#[test]
fn the_export_unpacker_reads_past_the_archive_end() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), b"content").unwrap();
    let plan = WorkspaceTarPlan::scan(dir.path()).unwrap();
    let (_, mut bytes) = write(&plan);
    // GNU tar pads its output to a 10 KiB record.
    bytes.resize(10_240, 0);
    let mut reader = std::io::Cursor::new(bytes);
    let dest = tempfile::tempdir().unwrap();
    unpack_stream(&mut reader, dest.path()).unwrap();
    assert_eq!(
        (
            std::fs::read(dest.path().join("a")).unwrap(),
            reader.position()
        ),
        (b"content".to_vec(), 10_240)
    );
}

#[test]
fn an_empty_workspace_is_just_the_end_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let plan = WorkspaceTarPlan::scan(dir.path()).unwrap();
    let (written, bytes) = write(&plan);
    assert_eq!(
        (plan.is_empty(), written.bytes, bytes),
        (true, 1024, vec![0u8; 1024])
    );
}

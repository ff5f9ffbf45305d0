use super::*;
use pretty_assertions::assert_eq;

const CAP: u64 = RUN_FILES_DRAIN_CAP_BYTES;

#[test]
fn screening_declines_links_devices_escapes_and_what_passes_the_cap() {
    use Decline::*;
    use MemberKind::*;
    let cases: [(&str, MemberKind, u64, u64, Screened); 22] = [
        // Benign.
        ("./", Directory, 0, 0, Screened::Skip),
        (".", Directory, 0, 0, Screened::Skip),
        ("./report.md", File, 10, 0, Screened::Accept),
        ("out/data.json", File, 10, 0, Screened::Accept),
        ("./out/", Directory, 0, 0, Screened::Accept),
        ("./pax_global_header", GlobalHeader, 52, 0, Screened::Skip),
        // Links, whatever they point at.
        ("./link", Symlink, 0, 0, Screened::Decline(Link)),
        ("./hard", HardLink, 0, 0, Screened::Decline(Link)),
        // Devices and specials.
        ("./null", CharDevice, 0, 0, Screened::Decline(Device)),
        ("./sda", BlockDevice, 0, 0, Screened::Decline(Device)),
        ("./pipe", Fifo, 0, 0, Screened::Decline(Special)),
        ("./sparse", Other, 10, 0, Screened::Decline(Special)),
        // Names that escape.
        ("../x", File, 1, 0, Screened::Decline(ParentName)),
        ("./../x", File, 1, 0, Screened::Decline(ParentName)),
        ("a/../../x", File, 1, 0, Screened::Decline(ParentName)),
        ("a..b", File, 1, 0, Screened::Decline(ParentName)),
        ("/abs", File, 1, 0, Screened::Decline(AbsoluteName)),
        (".//etc/passwd", File, 1, 0, Screened::Decline(AbsoluteName)),
        // A name check comes before the kind: an escaping link is named for its name.
        ("/etc", Symlink, 0, 0, Screened::Decline(AbsoluteName)),
        // The cap: exactly at it passes, one byte past it does not, whatever came before.
        ("./fits", File, 1, CAP - 1, Screened::Accept),
        ("./over", File, 2, CAP - 1, Screened::Decline(OverCap)),
        ("./huge", File, u64::MAX, 1, Screened::Decline(OverCap)),
    ];
    let got: Vec<(&str, Screened)> = cases
        .iter()
        .map(|(name, kind, size, drained, _)| {
            (
                *name,
                screen_member(name.as_bytes(), *kind, *size, *drained),
            )
        })
        .collect();
    let want: Vec<(&str, Screened)> = cases
        .iter()
        .map(|(name, .., want)| (*name, *want))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_reason_is_the_worst_of_what_happened() {
    let declined = |why| DeclinedMember {
        name: "x".to_owned(),
        why,
    };
    let mut report = DrainReport::default();
    assert_eq!(report.reason(), None);
    report.declined.push(declined(Decline::Link));
    assert_eq!(report.reason(), Some(DrainReason::UnsafeMembers));
    report.declined.push(declined(Decline::OverCap));
    assert_eq!(report.reason(), Some(DrainReason::ArchiveTooLarge));
    report.fail(DrainReason::WriteFailed, "disk full");
    report.fail(DrainReason::ExecFailed, "a later failure is not recorded");
    assert_eq!(
        (
            report.reason(),
            report.error.as_ref().map(|e| e.message.as_str())
        ),
        (Some(DrainReason::WriteFailed), Some("disk full"))
    );
}

/// A tar member written header-first, so hostile names the builder would refuse can be made.
fn raw_member(out: &mut Vec<u8>, name: &[u8], kind: tar::EntryType, link: &[u8], data: &[u8]) {
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..name.len()].copy_from_slice(name);
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link);
    header.set_entry_type(kind);
    header.set_mode(0o644);
    header.set_size(data.len() as u64);
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

#[test]
fn a_hostile_archive_writes_only_its_plain_files_and_names_the_rest() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("files");
    std::fs::create_dir(&dest).unwrap();
    let mut tar = Vec::new();
    raw_member(&mut tar, b"./", tar::EntryType::Directory, b"", b"");
    raw_member(&mut tar, b"./ok.txt", tar::EntryType::Regular, b"", b"fine");
    raw_member(&mut tar, b"./sub/", tar::EntryType::Directory, b"", b"");
    raw_member(
        &mut tar,
        b"./sub/deep.txt",
        tar::EntryType::Regular,
        b"",
        b"deep",
    );
    raw_member(
        &mut tar,
        b"./sym",
        tar::EntryType::Symlink,
        b"/etc/passwd",
        b"",
    );
    raw_member(&mut tar, b"./hard", tar::EntryType::Link, b"ok.txt", b"");
    raw_member(&mut tar, b"../escape", tar::EntryType::Regular, b"", b"out");
    raw_member(&mut tar, b"/abs", tar::EntryType::Regular, b"", b"abs");
    raw_member(&mut tar, b"./null", tar::EntryType::Char, b"", b"");
    raw_member(
        &mut tar,
        b"./after.txt",
        tar::EntryType::Regular,
        b"",
        b"after",
    );
    tar.extend_from_slice(&[0; 1024]);
    // Trailing record padding, as GNU tar writes it: read to the end, not left in the pipe.
    tar.extend_from_slice(&[0; 4096]);
    let mut cursor = std::io::Cursor::new(tar);
    let mut report = DrainReport::default();
    unpack_screened(&mut cursor, &dest, &mut report);
    assert_eq!(cursor.position(), cursor.get_ref().len() as u64);
    let named = |name: &str, why| DeclinedMember {
        name: name.to_owned(),
        why,
    };
    assert_eq!(
        report,
        DrainReport {
            found: false,
            files: 3,
            bytes: 13,
            declined: vec![
                named("sym", Decline::Link),
                named("hard", Decline::Link),
                named("../escape", Decline::ParentName),
                named("/abs", Decline::AbsoluteName),
                named("null", Decline::Device),
            ],
            stale: false,
            error: None,
        }
    );
    let mut written: Vec<String> = walk(root.path());
    written.sort();
    assert_eq!(
        written,
        vec![
            "files".to_owned(),
            "files/after.txt".to_owned(),
            "files/ok.txt".to_owned(),
            "files/sub".to_owned(),
            "files/sub/deep.txt".to_owned(),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("ok.txt")).unwrap(),
        "fine"
    );
}

#[test]
fn a_symlink_already_in_the_host_dir_is_not_written_through() {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join("files");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&dest).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, dest.join("planted")).unwrap();
    let mut tar = Vec::new();
    raw_member(&mut tar, b"./planted/x", tar::EntryType::Regular, b"", b"x");
    tar.extend_from_slice(&[0; 1024]);
    let mut report = DrainReport::default();
    unpack_screened(std::io::Cursor::new(tar), &dest, &mut report);
    assert_eq!(
        (
            report.files,
            report.error.map(|e| e.reason),
            outside.join("x").exists()
        ),
        (0, Some(DrainReason::WriteFailed), false)
    );
}

#[test]
fn a_truncated_archive_is_an_exec_failure_after_what_it_held() {
    let dest = tempfile::tempdir().unwrap();
    let mut tar = Vec::new();
    raw_member(&mut tar, b"./a.txt", tar::EntryType::Regular, b"", b"aaaa");
    let mut cut = Vec::new();
    raw_member(
        &mut cut,
        b"./b.txt",
        tar::EntryType::Regular,
        b"",
        &[7; 2000],
    );
    tar.extend_from_slice(&cut[..700]);
    let mut report = DrainReport::default();
    unpack_screened(std::io::Cursor::new(tar), dest.path(), &mut report);
    assert_eq!(
        (
            report.files,
            report.error.map(|e| e.reason),
            dest.path().join("b.txt").exists()
        ),
        (1, Some(DrainReason::ExecFailed), false)
    );
}

fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            out.push(
                path.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
            if path.symlink_metadata().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    out
}

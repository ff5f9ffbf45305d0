//! The run-files drain (SANDBOX.md §5.11): on a driver without host binds, the run files the
//! sandbox left in `/iterion/artifact-files` come out as a tar, at teardown, into the host
//! run-files dir (`<ITERION_HOME>/runs/<run id>/files`).
//!
//! The archive is hostile input: whatever the sandbox's `tar` (or a process that replaced it)
//! wrote. Every member goes through one pure judgement, [`screen_member`], before anything
//! touches the host:
//!
//! - links (symbolic and hard) are declined: a link planted now is followed by whoever reads the
//!   host dir later;
//! - devices, FIFOs and any other special member are declined;
//! - absolute names and names containing `..` (anywhere, as the spec says: a component-level
//!   check would let `a..b` through too, and that is not worth the doubt) are declined;
//! - a file that would take the drained total past [`RUN_FILES_DRAIN_CAP_BYTES`] is declined
//!   (its data is read and dropped; later, smaller files may still fit).
//!
//! [`unpack_screened`] applies the verdicts while reading the stream once, so memory stays
//! bounded whatever the sandbox sends; accepted members are written with the tar crate's
//! `unpack_in`, which also refuses to write through a symlink already in the host dir (the dir is
//! world-writable, M2). The drain never fails the run: what went wrong is a [`DrainReport`],
//! which the engine turns into `sandbox_runfiles_drain_failed`.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The most the drain writes on the host (SANDBOX.md §5.11: "anything past 256 MiB in total").
pub(crate) const RUN_FILES_DRAIN_CAP_BYTES: u64 = 256 * 1024 * 1024;
/// The drain's teardown bound (SANDBOX.md §16.1).
pub const RUN_FILES_DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// What a tar member is, as far as screening cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemberKind {
    /// A regular file (`0`, the old NUL type, or contiguous).
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A hard link.
    HardLink,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A FIFO.
    Fifo,
    /// A pax global header: metadata, no file.
    GlobalHeader,
    /// Anything else (GNU sparse, volume labels, unknown types).
    Other,
}

impl MemberKind {
    /// The kind of a tar entry type.
    pub(crate) fn of(entry_type: tar::EntryType) -> MemberKind {
        match entry_type {
            tar::EntryType::Regular | tar::EntryType::Continuous => MemberKind::File,
            tar::EntryType::Directory => MemberKind::Directory,
            tar::EntryType::Symlink => MemberKind::Symlink,
            tar::EntryType::Link => MemberKind::HardLink,
            tar::EntryType::Char => MemberKind::CharDevice,
            tar::EntryType::Block => MemberKind::BlockDevice,
            tar::EntryType::Fifo => MemberKind::Fifo,
            tar::EntryType::XGlobalHeader => MemberKind::GlobalHeader,
            _ => MemberKind::Other,
        }
    }
}

/// Why a member was declined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decline {
    /// A symbolic or hard link.
    Link,
    /// A character or block device.
    Device,
    /// A FIFO or another special member.
    Special,
    /// An absolute name.
    AbsoluteName,
    /// A name containing `..`.
    ParentName,
    /// The file would take the drained total past `RUN_FILES_DRAIN_CAP_BYTES`.
    OverCap,
}

impl Decline {
    /// A short wire/log word.
    pub fn as_str(self) -> &'static str {
        match self {
            Decline::Link => "link",
            Decline::Device => "device",
            Decline::Special => "special",
            Decline::AbsoluteName => "absolute name",
            Decline::ParentName => "name containing ..",
            Decline::OverCap => "over the cap",
        }
    }
}

/// The verdict on one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Screened {
    /// Nothing to write: the archive's root (`.`, `./`) or a global header.
    Skip,
    /// Write it.
    Accept,
    /// Do not write it, and name it.
    Decline(Decline),
}

/// The name a member is reported under: its raw name without leading `./`.
pub(crate) fn member_display_name(name: &[u8]) -> String {
    String::from_utf8_lossy(strip_dot_slash(name)).into_owned()
}

fn strip_dot_slash(mut name: &[u8]) -> &[u8] {
    while let Some(rest) = name.strip_prefix(b"./") {
        name = rest;
    }
    name
}

/// The judgement on one member (SANDBOX.md §5.11). Pure. `name` is the member's full name as
/// the archive gives it (GNU long names and pax paths applied), `size` its data size, and
/// `drained` the bytes of the files accepted so far.
///
/// Order: names first (absolute, `..`), then the kind (links, devices, specials), then the cap.
pub(crate) fn screen_member(name: &[u8], kind: MemberKind, size: u64, drained: u64) -> Screened {
    if kind == MemberKind::GlobalHeader {
        return Screened::Skip;
    }
    let name = strip_dot_slash(name);
    if name.starts_with(b"/") {
        return Screened::Decline(Decline::AbsoluteName);
    }
    if name.windows(2).any(|pair| pair == b"..") {
        return Screened::Decline(Decline::ParentName);
    }
    if name.is_empty() || name == b"." {
        return Screened::Skip;
    }
    match kind {
        MemberKind::Symlink | MemberKind::HardLink => Screened::Decline(Decline::Link),
        MemberKind::CharDevice | MemberKind::BlockDevice => Screened::Decline(Decline::Device),
        MemberKind::Fifo | MemberKind::Other | MemberKind::GlobalHeader => {
            Screened::Decline(Decline::Special)
        }
        MemberKind::Directory => Screened::Accept,
        MemberKind::File if drained.saturating_add(size) > RUN_FILES_DRAIN_CAP_BYTES => {
            Screened::Decline(Decline::OverCap)
        }
        MemberKind::File => Screened::Accept,
    }
}

/// A declined member, named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclinedMember {
    /// The member's name (without leading `./`).
    pub name: String,
    /// Why.
    pub why: Decline,
}

/// Why a drain is reported (`sandbox_runfiles_drain_failed.reason`). Declaration order is
/// severity: when several apply, the report names the worst ([`DrainReport::reason`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DrainReason {
    /// Members were declined as unsafe (links, devices, specials, absolute or `..` names).
    UnsafeMembers,
    /// Files past the cap were declined.
    ArchiveTooLarge,
    /// Writing on the host failed (some files may be missing).
    WriteFailed,
    /// Reading from the sandbox failed, or the archive was malformed (the drain may be partial).
    ExecFailed,
}

impl DrainReason {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            DrainReason::UnsafeMembers => "unsafe_members",
            DrainReason::ArchiveTooLarge => "archive_too_large",
            DrainReason::WriteFailed => "write_failed",
            DrainReason::ExecFailed => "exec_failed",
        }
    }
}

/// A hard failure of the drain (not a declined member).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainError {
    /// [`DrainReason::ExecFailed`] or [`DrainReason::WriteFailed`].
    pub reason: DrainReason,
    /// What went wrong.
    pub message: String,
}

/// What a drain did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Whether the sandbox had the directory at all (absent: nothing was read).
    pub found: bool,
    /// Regular files written on the host.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The members not written, in archive order.
    pub declined: Vec<DeclinedMember>,
    /// The host dir held entries before the drain (an earlier attempt's files): where the drain
    /// did not replace them, they may be stale.
    pub stale: bool,
    /// The first hard failure.
    pub error: Option<DrainError>,
}

impl DrainReport {
    /// Why the drain is to be reported, or `None` when it went through whole: the worst of the
    /// hard failure and the declined members (an over-cap file is `archive_too_large`, any other
    /// declined member `unsafe_members`).
    pub fn reason(&self) -> Option<DrainReason> {
        let declined = self.declined.iter().map(|member| match member.why {
            Decline::OverCap => DrainReason::ArchiveTooLarge,
            Decline::Link
            | Decline::Device
            | Decline::Special
            | Decline::AbsoluteName
            | Decline::ParentName => DrainReason::UnsafeMembers,
        });
        declined.chain(self.error.as_ref().map(|e| e.reason)).max()
    }

    /// Records `error` unless an earlier one is already recorded.
    pub fn fail(&mut self, reason: DrainReason, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(DrainError {
                reason,
                message: message.into(),
            });
        }
    }
}

/// Reads a tar from `reader` and writes the members `screen_member` accepts under `dest`
/// (which must exist). Blocking. Fills `files`, `bytes`, `declined` and `error` of `report`; a
/// malformed archive is [`DrainReason::ExecFailed`], a host write [`DrainReason::WriteFailed`]
/// (the drain goes on with the next member). The reader is read to its end in every case, so the
/// writer on the other side never sees a closed pipe.
pub fn unpack_screened<R: Read>(reader: R, dest: &Path, report: &mut DrainReport) {
    let ended = Arc::new(AtomicBool::new(false));
    let mut archive = tar::Archive::new(Tracked {
        inner: reader,
        ended: Arc::clone(&ended),
    });
    archive.set_overwrite(true);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    archive.set_unpack_xattrs(false);
    match archive.entries() {
        Err(error) => report.fail(
            DrainReason::ExecFailed,
            format!("read the archive: {error}"),
        ),
        Ok(entries) => {
            for entry in entries {
                let mut entry = match entry {
                    Ok(entry) => entry,
                    Err(error) => {
                        report.fail(
                            DrainReason::ExecFailed,
                            format!("read the archive: {error}"),
                        );
                        break;
                    }
                };
                let name = entry.path_bytes().into_owned();
                let kind = MemberKind::of(entry.header().entry_type());
                let size = entry.size();
                match screen_member(&name, kind, size, report.bytes) {
                    Screened::Skip => {}
                    Screened::Decline(why) => report.declined.push(DeclinedMember {
                        name: member_display_name(&name),
                        why,
                    }),
                    Screened::Accept => match entry.unpack_in(dest) {
                        Ok(true) => {
                            if kind == MemberKind::File {
                                report.files += 1;
                                report.bytes += size;
                            }
                        }
                        // The tar crate's own refusal of a path that escapes `dest`.
                        Ok(false) => report.declined.push(DeclinedMember {
                            name: member_display_name(&name),
                            why: Decline::ParentName,
                        }),
                        // The stream ended inside the member: a truncated archive, not a host
                        // write. The partial file goes (its name was screened above).
                        Err(error) if ended.load(Ordering::Relaxed) => {
                            let partial = dest.join(Path::new(std::ffi::OsStr::from_bytes(
                                strip_dot_slash(&name),
                            )));
                            if let Err(error) = std::fs::remove_file(&partial) {
                                tracing::debug!(%error, "run-files drain: a partial file stays");
                            }
                            report.fail(
                                DrainReason::ExecFailed,
                                format!(
                                    "the archive ends inside {}: {error}",
                                    member_display_name(&name)
                                ),
                            );
                            break;
                        }
                        Err(error) => report.fail(
                            DrainReason::WriteFailed,
                            format!("write {}: {error}", member_display_name(&name)),
                        ),
                    },
                }
            }
        }
    }
    let mut rest = archive.into_inner();
    if let Err(error) = std::io::copy(&mut rest, &mut std::io::sink()) {
        tracing::debug!(%error, "run-files drain: reading past the archive's end failed");
    }
}

/// A reader that remembers whether it reached its end.
struct Tracked<R> {
    inner: R,
    ended: Arc<AtomicBool>,
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.ended.store(true, Ordering::Relaxed);
        }
        Ok(n)
    }
}

#[cfg(test)]
#[path = "runfiles_tests.rs"]
mod tests;

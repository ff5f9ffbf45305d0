//! Workspace tars that stream (SANDBOX.md §5.7 step 8, §5.11): the copy-in and the export never
//! hold an archive in memory.
//!
//! **Copy-in.** The command in the pod is `head -c <n> | tar -C <dir> --no-overwrite-dir -xf -`:
//! on the v4 exec protocol stdin cannot be closed without ending the exec, and `tar -x` alone does
//! not stop at the end-of-archive blocks: GNU tar (1.34) and BusyBox tar (1.35) both read a pipe
//! on to its EOF after them (checked by hand, `(cat a.tar; sleep 3) | tar -xf -` takes 3 s). So the
//! exact length must be known *before* the first byte is sent. [`WorkspaceTarPlan::scan`] walks the
//! tree once (stat only, no content read) and keeps one small record per member; the length is
//! computed by rendering the members' headers through the tar crate itself into a byte counter
//! (so GNU long-name and long-link entries count exactly) plus each file's size rounded up to a
//! block. [`WorkspaceTarPlan::write_to`] then renders the same members with their contents, on a
//! blocking thread, into a bounded pipe that feeds the exec's stdin.
//!
//! The cost: a file whose size changes between the scan and the read is written at its *scanned*
//! size (cut short, or padded with zeros, as GNU tar does when a file changes as it reads it) and
//! named in [`TarWritten::changed`], so that the length stays exact; a member that vanished in
//! between fails the copy-in. The record list costs about 100 bytes plus the name per member.
//!
//! **Export.** [`unpack_stream`] unpacks from a reader (the exec's stdout through a bounded pipe)
//! and reads past the archive's end, as the run-files drain does (`runfiles.rs`).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use iterion_sandbox::{Error, LogLevel, Result};
use tar::{Builder, EntryType, Header};
use tokio_util::io::SyncIoBridge;

use crate::manifest::WORKLOAD_CONTAINER;
use crate::run::{RunShared, engine_error, exit_error};

/// Capacity of the in-process pipe between the tar thread and the exec (either way).
pub(crate) const PIPE_CAPACITY: usize = 256 * 1024;
/// The tar thread's write buffer in front of that pipe (headers are 512-byte writes).
const WRITE_BUFFER: usize = 64 * 1024;

/// What a member is, with what its header needs beyond the common fields.
#[derive(Clone, Debug, PartialEq, Eq)]
enum MemberKind {
    Dir,
    /// A regular file of `size` bytes, as scanned.
    File {
        size: u64,
    },
    Symlink {
        target: PathBuf,
    },
    /// A fifo or a device node.
    Special {
        entry_type: EntryType,
        major: u32,
        minor: u32,
    },
}

/// One member: its name in the archive (relative to the root) and the header fields the tar
/// crate's `HeaderMode::Complete` takes from the metadata.
#[derive(Clone, Debug)]
struct Member {
    name: PathBuf,
    kind: MemberKind,
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
}

impl Member {
    /// The member's header, its path not yet set (`append_data`/`append_link` set it).
    fn header(&self) -> Result<Header> {
        let mut header = Header::new_gnu();
        header.set_mode(self.mode);
        header.set_uid(self.uid);
        header.set_gid(self.gid);
        header.set_mtime(self.mtime);
        header.set_size(0);
        header
            .set_device_major(0)
            .map_err(self.io_error("archive"))?;
        header
            .set_device_minor(0)
            .map_err(self.io_error("archive"))?;
        match &self.kind {
            MemberKind::Dir => header.set_entry_type(EntryType::Directory),
            MemberKind::File { size } => {
                header.set_entry_type(EntryType::Regular);
                header.set_size(*size);
            }
            MemberKind::Symlink { .. } => header.set_entry_type(EntryType::Symlink),
            MemberKind::Special {
                entry_type,
                major,
                minor,
            } => {
                header.set_entry_type(*entry_type);
                header
                    .set_device_major(*major)
                    .map_err(self.io_error("archive"))?;
                header
                    .set_device_minor(*minor)
                    .map_err(self.io_error("archive"))?;
            }
        }
        Ok(header)
    }

    /// Appends the member with `data` as its content (exactly the header's size, or empty).
    fn append<W: Write>(&self, builder: &mut Builder<W>, data: impl Read) -> Result<()> {
        let mut header = self.header()?;
        match &self.kind {
            MemberKind::Symlink { target } => builder.append_link(&mut header, &self.name, target),
            MemberKind::Dir | MemberKind::File { .. } | MemberKind::Special { .. } => {
                builder.append_data(&mut header, &self.name, data)
            }
        }
        .map_err(self.io_error("archive"))
    }

    fn io_error(&self, operation: &'static str) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            operation,
            path: self.name.clone(),
            source,
        }
    }
}

/// The members of a workspace tar, scanned before any byte is written, and the archive's exact
/// length. Top-level entries are listed one by one (never `.`, so extracting does not touch the
/// target directory's own mode or owner), each tree depth-first in name order; symlinks are
/// archived as links, never followed.
#[derive(Clone, Debug)]
pub struct WorkspaceTarPlan {
    root: PathBuf,
    members: Vec<Member>,
    skipped: Vec<PathBuf>,
    len: u64,
}

/// What [`WorkspaceTarPlan::write_to`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TarWritten {
    /// Bytes written: always the plan's [`len`](WorkspaceTarPlan::len).
    pub bytes: u64,
    /// Files whose size changed after the scan (written cut short or zero-padded to the scanned
    /// size), relative to the root.
    pub changed: Vec<PathBuf>,
}

/// `(major, minor)` of a device number, as the tar crate splits it.
fn device_numbers(rdev: u64) -> (u32, u32) {
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0000_0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0x0000_00ff);
    (
        u32::try_from(major).unwrap_or(u32::MAX),
        u32::try_from(minor).unwrap_or(u32::MAX),
    )
}

fn sorted_names(dir: &Path) -> Result<Vec<OsString>> {
    let io = |source| Error::Io {
        operation: "read workspace",
        path: dir.to_owned(),
        source,
    };
    let mut names = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io)?;
    names.sort();
    Ok(names)
}

/// Counts what goes through it.
struct Counter<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

const BLOCK: u64 = 512;

impl WorkspaceTarPlan {
    /// Walks `root` (stat only; no file content is read). Sockets cannot be archived: they are
    /// left out and listed in [`skipped`](Self::skipped). Blocking.
    pub fn scan(root: &Path) -> Result<WorkspaceTarPlan> {
        let mut members = Vec::new();
        let mut skipped = Vec::new();
        let mut stack: Vec<PathBuf> = sorted_names(root)?
            .into_iter()
            .rev()
            .map(PathBuf::from)
            .collect();
        while let Some(name) = stack.pop() {
            let path = root.join(&name);
            let meta = std::fs::symlink_metadata(&path).map_err(|source| Error::Io {
                operation: "stat",
                path: path.clone(),
                source,
            })?;
            let file_type = meta.file_type();
            let kind = if file_type.is_dir() {
                MemberKind::Dir
            } else if file_type.is_file() {
                MemberKind::File { size: meta.len() }
            } else if file_type.is_symlink() {
                let target = std::fs::read_link(&path).map_err(|source| Error::Io {
                    operation: "read link",
                    path: path.clone(),
                    source,
                })?;
                MemberKind::Symlink { target }
            } else if file_type.is_socket() {
                skipped.push(name);
                continue;
            } else {
                let entry_type = if file_type.is_fifo() {
                    EntryType::Fifo
                } else if file_type.is_char_device() {
                    EntryType::Char
                } else {
                    EntryType::Block
                };
                let (major, minor) = device_numbers(meta.rdev());
                MemberKind::Special {
                    entry_type,
                    major,
                    minor,
                }
            };
            if kind == MemberKind::Dir {
                for child in sorted_names(&path)?.into_iter().rev() {
                    stack.push(name.join(child));
                }
            }
            members.push(Member {
                name,
                kind,
                mode: meta.mode(),
                uid: u64::from(meta.uid()),
                gid: u64::from(meta.gid()),
                mtime: u64::try_from(meta.mtime()).unwrap_or(0),
            });
        }
        let mut plan = WorkspaceTarPlan {
            root: root.to_owned(),
            members,
            skipped,
            len: 0,
        };
        plan.len = plan.measure()?;
        Ok(plan)
    }

    /// The archive's exact length in bytes: what the pod's `head -c` reads.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the archive has no member (it still has its end-of-archive blocks).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The members' names, in archive order (relative to the root).
    pub fn names(&self) -> impl Iterator<Item = &Path> {
        self.members.iter().map(|m| m.name.as_path())
    }

    /// Sockets left out, relative to the root.
    pub fn skipped(&self) -> &[PathBuf] {
        &self.skipped
    }

    /// Headers through the tar crate into a counter (contents skipped), plus every file's size
    /// rounded up to a block.
    fn measure(&self) -> Result<u64> {
        let mut builder = Builder::new(Counter {
            inner: std::io::sink(),
            bytes: 0,
        });
        let mut contents = 0u64;
        for member in &self.members {
            // With an empty reader `append_data` writes the header (and any long-name entry)
            // and no padding: the content is counted here instead.
            member.append(&mut builder, std::io::empty())?;
            if let MemberKind::File { size } = member.kind {
                contents += size.div_ceil(BLOCK) * BLOCK;
            }
        }
        let counter = builder.into_inner().map_err(|source| Error::Io {
            operation: "archive",
            path: self.root.clone(),
            source,
        })?;
        Ok(counter.bytes + contents)
    }

    /// Writes the archive into `out`: exactly [`len`](Self::len) bytes. Blocking; `out` is
    /// flushed. A member that can no longer be opened is an error.
    pub fn write_to<W: Write>(&self, out: W) -> Result<TarWritten> {
        let mut builder = Builder::new(Counter {
            inner: out,
            bytes: 0,
        });
        let mut changed = Vec::new();
        for member in &self.members {
            let MemberKind::File { size } = member.kind else {
                member.append(&mut builder, std::io::empty())?;
                continue;
            };
            let path = self.root.join(&member.name);
            let file = std::fs::File::open(&path).map_err(|source| Error::Io {
                operation: "open",
                path: path.clone(),
                source,
            })?;
            if file.metadata().map(|m| m.len()).ok() != Some(size) {
                changed.push(member.name.clone());
            }
            // Exactly `size` bytes whatever the file holds now.
            let data = file.take(size).chain(std::io::repeat(0)).take(size);
            member.append(&mut builder, data)?;
        }
        let io = |source| Error::Io {
            operation: "archive",
            path: self.root.clone(),
            source,
        };
        let mut counter = builder.into_inner().map_err(io)?;
        counter.flush().map_err(io)?;
        if counter.bytes != self.len {
            return Err(io(std::io::Error::other(format!(
                "wrote {} bytes, planned {}",
                counter.bytes, self.len
            ))));
        }
        Ok(TarWritten {
            bytes: counter.bytes,
            changed,
        })
    }
}

/// Unpacks the tar read from `reader` into `dest`, then reads `reader` to its end (what follows
/// the end-of-archive blocks: GNU tar pads to a 10 KiB record). The tar crate refuses members
/// that would escape `dest`. Blocking.
pub(crate) fn unpack_stream<R: Read>(reader: R, dest: &Path) -> Result<()> {
    let mut archive = tar::Archive::new(reader);
    archive.set_overwrite(true);
    archive.unpack(dest).map_err(|source| Error::Io {
        operation: "unpack exported workspace into",
        path: dest.to_owned(),
        source,
    })?;
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink()).map_err(|source| Error::Io {
        operation: "read the exported workspace past its end into",
        path: dest.to_owned(),
        source,
    })?;
    Ok(())
}

impl RunShared {
    /// Streams a tar of `from` (top-level entries listed, never `.`) into the existing pod
    /// directory `to` (SANDBOX.md §5.7 step 8), reading no more of it ahead than the pipe holds.
    ///
    /// The scan runs first (stat only) to know the length `head -c` reads in the pod; the tar is
    /// then written on a blocking thread into a [`PIPE_CAPACITY`] pipe that is the exec's stdin.
    /// A failure of the tar thread ends the exec (dropped, so `head -c` never waits for bytes
    /// that will not come); a failure in the pod is reported with its stderr. The caller bounds
    /// the whole by the `workspace copy` phase: when it fires, the exec is dropped and the tar
    /// thread sees a broken pipe.
    pub(crate) async fn copy_dir_in(&self, from: &Path, to: &str, operation: &str) -> Result<()> {
        let source = from.to_owned();
        let plan = tokio::task::spawn_blocking(move || WorkspaceTarPlan::scan(&source))
            .await
            .map_err(|e| engine_error(operation, e.to_string()))??;
        for socket in plan.skipped() {
            self.log(
                LogLevel::Warn,
                &format!(
                    "sandbox: {operation}: socket {} not copied (sockets cannot be archived)",
                    from.join(socket).display()
                ),
            );
        }
        self.log(
            LogLevel::Info,
            &format!(
                "kubectl exec -i {} -c {WORKLOAD_CONTAINER} -- tar -C {to} --no-overwrite-dir -xf -  # {}: {} bytes",
                self.pod,
                from.display(),
                plan.len()
            ),
        );
        let argv = [
            "sh",
            "-c",
            "head -c \"$1\" | tar -C \"$2\" --no-overwrite-dir -xf -",
            "sh",
            &plan.len().to_string(),
            to,
        ]
        .map(str::to_owned)
        .to_vec();
        let (reader, writer) = tokio::io::duplex(PIPE_CAPACITY);
        let writer = std::io::BufWriter::with_capacity(WRITE_BUFFER, SyncIoBridge::new(writer));
        let mut producer = tokio::task::spawn_blocking(move || plan.write_to(writer));
        let exec = self.exec_raw(argv, Some(Box::new(reader)), false, None, None);
        tokio::pin!(exec);
        let operation = format!("{operation} into the pod");
        let written = tokio::select! {
            produced = &mut producer => {
                // The tar is written (or failed: returning drops the exec, which ends it).
                let written = produced.map_err(|e| engine_error(&operation, e.to_string()))??;
                let result = exec.await?;
                if result.exit_code != 0 {
                    return Err(exit_error(&operation, &result));
                }
                written
            }
            result = &mut exec => {
                // The exec ended first (it read its length, or failed): its stdin pipe is gone,
                // so the tar thread ends too. The pod's own error explains more.
                let result = result?;
                if result.exit_code != 0 {
                    return Err(exit_error(&operation, &result));
                }
                producer
                    .await
                    .map_err(|e| engine_error(&operation, e.to_string()))??
            }
        };
        for name in &written.changed {
            self.log(
                LogLevel::Warn,
                &format!(
                    "sandbox: {operation}: {} changed as it was read; copied at its size when scanned",
                    from.join(name).display()
                ),
            );
        }
        Ok(())
    }

    /// Streams the pod's `argv` (a `tar -cf -`) straight into [`unpack_stream`] on a blocking
    /// thread (SANDBOX.md §5.11). An unpack failure ends the exec (dropped); otherwise the exec's
    /// failure (non-zero exit with its stderr, transport) comes first. The caller bounds it.
    pub(crate) async fn export_into(&self, argv: Vec<String>, dest: &Path) -> Result<()> {
        const OPERATION: &str = "export workspace";
        let (writer, reader) = tokio::io::duplex(PIPE_CAPACITY);
        let reader = SyncIoBridge::new(reader);
        let unpack_dest = dest.to_owned();
        let mut unpacking =
            tokio::task::spawn_blocking(move || unpack_stream(reader, &unpack_dest));
        let exec = self.exec_raw(argv, None, false, Some(Box::new(writer)), None);
        tokio::pin!(exec);
        tokio::select! {
            unpacked = &mut unpacking => {
                // On success the unpacker read to the end of stdout: the exec is ending.
                unpacked.map_err(|e| engine_error(OPERATION, e.to_string()))??;
                let result = exec.await?;
                if result.exit_code != 0 {
                    return Err(exit_error(OPERATION, &result));
                }
                Ok(())
            }
            result = &mut exec => {
                // Stdout is closed (the exec dropped its end): the unpacker reaches its end.
                let unpacked = unpacking
                    .await
                    .map_err(|e| engine_error(OPERATION, e.to_string()))
                    .and_then(|unpacked| unpacked);
                match result {
                    // The pod's tar failed: its stderr says why (a cut stream follows from it).
                    Ok(result) if result.exit_code != 0 => Err(exit_error(OPERATION, &result)),
                    Ok(_) => unpacked,
                    // A stdout write error is the unpacker having stopped: its error says why.
                    Err(error) => unpacked.and(Err(error)),
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "tar_stream_tests.rs"]
mod tests;

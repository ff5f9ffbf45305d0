//! M1 (SANDBOX.md §8, the seed's step 5): the files an operator attaches at launch
//! (`iterion run --attach NAME=PATH`, docs/language.md "Attachments").
//!
//! A launch **stages** them before the run exists ([`stage`]): every name must be declared, every
//! `required: true` one given, each source a regular file reached through no symbolic link (a
//! checkout could put one where the operator expects a document, pointing at `~/.ssh`), within
//! the size bounds, of a type its `accept_mime` (and `image`) admits. The staged files stay open,
//! so what is copied is what was checked. Once the run has an id, [`Staged::copy_into`] copies
//! them into the run's attachments dir, `<ITERION_HOME>/runs/<run id>/attachments/NAME/FILE`,
//! read-only, with a `manifest.json` of names, sizes and hashes (never contents). That copy is
//! all a node ever sees: a sandboxed run gets it bound read-only at [`CONTAINER_DIR`] (the
//! operator's source is never bound, whatever the trust level); an unsandboxed one reads it at
//! its host path. `{{attachments.NAME[.path|.mime|.size|.sha256]}}` resolves against
//! [`scope`].

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use iterion_dsl::ir::Workflow;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub use crate::records::sandbox_events::AttachmentRecord;

/// Where the attachments dir is bound (read-only) in a sandbox.
pub const CONTAINER_DIR: &str = "/run/iterion/attachments";
/// The most bytes one attachment may have.
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;
/// The most bytes the attachments of one run may have together.
pub const MAX_TOTAL_BYTES: u64 = 5 * MAX_FILE_BYTES;
/// The manifest's file name in the attachments dir.
const MANIFEST: &str = "manifest.json";
/// The longest file name kept from a source (longer ones are cut).
const MAX_FILE_NAME: usize = 100;

/// One `--attach NAME=PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachmentSource {
    /// The attachment's declared name.
    pub name: String,
    /// The file to copy, absolute (the entry point joins a relative one to its directory).
    pub path: PathBuf,
}

impl AttachmentSource {
    /// Parses `NAME=PATH`; a relative path is taken from `cwd`.
    ///
    /// # Errors
    ///
    /// [`AttachmentError::Malformed`] without `=`, with an empty name or path.
    pub fn parse(arg: &str, cwd: &Path) -> Result<AttachmentSource, AttachmentError> {
        match arg.split_once('=') {
            Some((name, path)) if !name.is_empty() && !path.is_empty() => Ok(AttachmentSource {
                name: name.to_owned(),
                path: cwd.join(path),
            }),
            _ => Err(AttachmentError::Malformed {
                arg: arg.to_owned(),
            }),
        }
    }
}

/// Why the attachments of a launch were refused (exit 2, nothing created), or could not be
/// copied.
#[derive(Debug, thiserror::Error)]
pub enum AttachmentError {
    /// `--attach` is not `NAME=PATH`.
    #[error("--attach {arg:?}: expected NAME=PATH")]
    Malformed {
        /// The argument as given.
        arg: String,
    },
    /// `--attach` names an attachment the workflow does not declare.
    #[error("--attach {name}: the workflow declares no attachment {name:?} (declared: {declared})")]
    Unknown {
        /// The name given.
        name: String,
        /// The declared names, comma-separated (or `none`).
        declared: String,
    },
    /// The same attachment was given twice.
    #[error("--attach {name} is given more than once")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// A `required: true` attachment was not given.
    #[error("attachment {name} is required; pass --attach {name}=PATH")]
    Missing {
        /// The name.
        name: String,
    },
    /// The source path has a symbolic link in it.
    #[error("--attach {name}: {} goes through a symbolic link ({}); give the file's own path", path.display(), link.display())]
    Symlink {
        /// The attachment.
        name: String,
        /// The path given.
        path: PathBuf,
        /// The first component that is a link.
        link: PathBuf,
    },
    /// The source is a directory, fifo, socket or device.
    #[error("--attach {name}: {} is not a regular file", path.display())]
    NotRegular {
        /// The attachment.
        name: String,
        /// The path given.
        path: PathBuf,
    },
    /// The source cannot be opened or read.
    #[error("--attach {name}: {}: {source}", path.display())]
    Unreadable {
        /// The attachment.
        name: String,
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// One source is over [`MAX_FILE_BYTES`].
    #[error("--attach {name}: {} has {size} bytes; an attachment may have at most {max}", path.display())]
    TooLarge {
        /// The attachment.
        name: String,
        /// The path given.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// The sources together are over [`MAX_TOTAL_BYTES`].
    #[error("the attachments have {total} bytes together; a run may have at most {max}")]
    TotalTooLarge {
        /// Their sizes' sum.
        total: u64,
        /// The bound.
        max: u64,
    },
    /// The file's type is not one the declaration accepts.
    #[error("--attach {name}: {} looks like {mime}, and the attachment accepts {accepted}", path.display())]
    WrongType {
        /// The attachment.
        name: String,
        /// The path given.
        path: PathBuf,
        /// The type sniffed from its first bytes.
        mime: String,
        /// What the declaration accepts.
        accepted: String,
    },
    /// The source changed size while it was copied.
    #[error("--attach {name}: {} changed while it was copied", path.display())]
    Changed {
        /// The attachment.
        name: String,
        /// The path given.
        path: PathBuf,
    },
    /// The run's attachments dir could not be written.
    #[error("attachments dir {}: {source}", dir.display())]
    Store {
        /// The dir.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl AttachmentError {
    /// A stable code for JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            AttachmentError::Malformed { .. }
            | AttachmentError::Unknown { .. }
            | AttachmentError::Duplicate { .. }
            | AttachmentError::Missing { .. }
            | AttachmentError::Symlink { .. }
            | AttachmentError::NotRegular { .. }
            | AttachmentError::Unreadable { .. }
            | AttachmentError::TooLarge { .. }
            | AttachmentError::TotalTooLarge { .. }
            | AttachmentError::WrongType { .. }
            | AttachmentError::Changed { .. } => "ATTACHMENT_INVALID",
            AttachmentError::Store { .. } => "ATTACHMENT_STORE_FAILED",
        }
    }
}

/// The attachments of a launch, checked and open, waiting for the run's id.
#[derive(Debug, Default)]
pub struct Staged {
    items: Vec<StagedFile>,
}

#[derive(Debug)]
struct StagedFile {
    name: String,
    path: PathBuf,
    file_name: String,
    file: File,
    size: u64,
    mime: String,
}

impl Staged {
    /// Whether nothing was attached.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Copies the staged files into `dir` (which must not exist yet): `dir/NAME/FILE`, each
    /// read-only, hashed while copied, and `dir/manifest.json`. On an error `dir` is removed.
    ///
    /// # Errors
    ///
    /// [`AttachmentError::Store`] when `dir` cannot be written; [`AttachmentError::Changed`]
    /// when a source's size moved since it was staged.
    pub fn copy_into(self, dir: &Path) -> Result<Vec<AttachmentRecord>, AttachmentError> {
        if self.items.is_empty() {
            return Ok(Vec::new());
        }
        let result = copy_all(self.items, dir);
        if result.is_err() {
            let _ = std::fs::remove_dir_all(dir);
        }
        result
    }
}

fn copy_all(items: Vec<StagedFile>, dir: &Path) -> Result<Vec<AttachmentRecord>, AttachmentError> {
    let store = |source: std::io::Error| AttachmentError::Store {
        dir: dir.to_owned(),
        source,
    };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(store)?;
    }
    std::fs::create_dir(dir).map_err(store)?;
    let mut records = Vec::new();
    for item in items {
        let sub = dir.join(&item.name);
        std::fs::create_dir(&sub).map_err(store)?;
        let target = sub.join(&item.file_name);
        let mut out = crate::sandbox::nofollow::create(&target, 0o644, true).map_err(store)?;
        let mut hasher = Sha256::new();
        let mut copied = 0u64;
        let mut reader = (&item.file).take(item.size + 1);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(AttachmentError::Unreadable {
                        name: item.name,
                        path: item.path,
                        source,
                    });
                }
            };
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk);
            out.write_all(chunk).map_err(store)?;
            copied += n as u64;
        }
        if copied != item.size {
            return Err(AttachmentError::Changed {
                name: item.name,
                path: item.path,
            });
        }
        out.sync_all().map_err(store)?;
        drop(out);
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444)).map_err(store)?;
        records.push(AttachmentRecord {
            name: item.name,
            file: item.file_name,
            size: copied,
            sha256: hex(&hasher.finalize()),
            mime: item.mime,
        });
    }
    let manifest = serde_json::to_vec_pretty(&records).map_err(|e| store(e.into()))?;
    std::fs::write(dir.join(MANIFEST), manifest).map_err(store)?;
    Ok(records)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The attachments dir of `run_id`: `<ITERION_HOME>/runs/<run id>/attachments`.
pub(crate) fn run_dir(iterion_home: &Path, run_id: &str) -> PathBuf {
    iterion_home.join("runs").join(run_id).join("attachments")
}

/// The records of a run's attachments, from its manifest; none when the run has no
/// attachments dir (or its manifest does not parse: the run then sees none).
pub(crate) fn load(dir: &Path) -> Vec<AttachmentRecord> {
    std::fs::read(dir.join(MANIFEST))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// The `attachments` namespace: `{NAME: {path, mime, size, sha256}}`, each `path` under `base`
/// (the host dir, or [`CONTAINER_DIR`] in a sandbox).
pub(crate) fn scope(records: &[AttachmentRecord], base: &str) -> Value {
    let mut map = Map::new();
    for r in records {
        map.insert(
            r.name.clone(),
            json!({
                "path": format!("{base}/{}/{}", r.name, r.file),
                "mime": r.mime,
                "size": r.size,
                "sha256": r.sha256,
            }),
        );
    }
    Value::Object(map)
}

/// Checks and opens the `sources` against the workflow's `attachments:` declarations.
///
/// # Errors
///
/// Every [`AttachmentError`] but `Store` and `Changed`: the launch is refused before a run
/// exists.
pub fn stage(wf: &Workflow, sources: &[AttachmentSource]) -> Result<Staged, AttachmentError> {
    let mut items: Vec<StagedFile> = Vec::new();
    let mut total = 0u64;
    for source in sources {
        let Some(decl) = wf.attachments.iter().find(|a| a.name == source.name) else {
            let declared: Vec<&str> = wf.attachments.iter().map(|a| a.name.as_str()).collect();
            return Err(AttachmentError::Unknown {
                name: source.name.clone(),
                declared: if declared.is_empty() {
                    "none".to_owned()
                } else {
                    declared.join(", ")
                },
            });
        };
        if items.iter().any(|i| i.name == source.name) {
            return Err(AttachmentError::Duplicate {
                name: source.name.clone(),
            });
        }
        let item = open_source(source)?;
        let accepted = accepted_types(&decl.kind, &decl.accept_mime);
        if !accepted.iter().any(|p| mime_matches(p, &item.mime)) {
            return Err(AttachmentError::WrongType {
                name: item.name,
                path: item.path,
                mime: item.mime,
                accepted: accepted.join(", "),
            });
        }
        total += item.size;
        if total > MAX_TOTAL_BYTES {
            return Err(AttachmentError::TotalTooLarge {
                total,
                max: MAX_TOTAL_BYTES,
            });
        }
        items.push(item);
    }
    if let Some(missing) = wf
        .attachments
        .iter()
        .find(|a| a.required && !items.iter().any(|i| i.name == a.name))
    {
        return Err(AttachmentError::Missing {
            name: missing.name.clone(),
        });
    }
    Ok(Staged { items })
}

/// The patterns a declaration accepts: its `accept_mime` (`image/*` for an `image` without
/// one), `*/*` for a `file` without one.
fn accepted_types(kind: &str, accept_mime: &[String]) -> Vec<String> {
    match (kind, accept_mime.is_empty()) {
        (_, false) => accept_mime.to_vec(),
        ("image", true) => vec!["image/*".to_owned()],
        (_, true) => vec!["*/*".to_owned()],
    }
}

fn mime_matches(pattern: &str, mime: &str) -> bool {
    let (Some((pt, ps)), Some((mt, ms))) = (pattern.split_once('/'), mime.split_once('/')) else {
        return false;
    };
    (pt == "*" || pt.eq_ignore_ascii_case(mt)) && (ps == "*" || ps.eq_ignore_ascii_case(ms))
}

/// Opens one source: no symbolic link on the way (every component is checked with `lstat`,
/// and the file itself is opened `O_NOFOLLOW`), a regular file, within [`MAX_FILE_BYTES`].
fn open_source(source: &AttachmentSource) -> Result<StagedFile, AttachmentError> {
    let unreadable = |e: std::io::Error| AttachmentError::Unreadable {
        name: source.name.clone(),
        path: source.path.clone(),
        source: e,
    };
    let lexical = normalize(&source.path);
    let mut walked = PathBuf::new();
    for component in lexical.components() {
        walked.push(component);
        let meta = std::fs::symlink_metadata(&walked).map_err(unreadable)?;
        if meta.file_type().is_symlink() {
            return Err(AttachmentError::Symlink {
                name: source.name.clone(),
                path: source.path.clone(),
                link: walked,
            });
        }
    }
    let file = match crate::sandbox::nofollow::open_regular(&lexical) {
        Ok(Some(file)) => file,
        Ok(None) => {
            return Err(AttachmentError::NotRegular {
                name: source.name.clone(),
                path: source.path.clone(),
            });
        }
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(AttachmentError::Symlink {
                name: source.name.clone(),
                path: source.path.clone(),
                link: lexical,
            });
        }
        Err(e) => return Err(unreadable(e)),
    };
    let size = file.metadata().map_err(unreadable)?.len();
    if size > MAX_FILE_BYTES {
        return Err(AttachmentError::TooLarge {
            name: source.name.clone(),
            path: source.path.clone(),
            size,
            max: MAX_FILE_BYTES,
        });
    }
    let mut head = vec![0u8; 512];
    let n = file.read_at(&mut head, 0).map_err(unreadable)?;
    head.truncate(n);
    Ok(StagedFile {
        name: source.name.clone(),
        path: source.path.clone(),
        file_name: safe_file_name(&lexical),
        file,
        size,
        mime: sniff(&head).to_owned(),
    })
}

/// `path` with `.` dropped and `..` applied lexically (no link can make that wrong: each
/// component is then checked not to be one).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The source's file name as kept in the attachments dir: only `[A-Za-z0-9._-]` (anything else
/// becomes `_`), no leading `.`, at most [`MAX_FILE_NAME`] characters, never empty.
pub(crate) fn safe_file_name(path: &Path) -> String {
    let raw = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_FILE_NAME)
        .collect();
    if name.starts_with('.') {
        name.replace_range(..1, "_");
    }
    if name.is_empty() {
        name.push_str("attachment");
    }
    name
}

/// The type of a file from its first bytes: the common image, document and archive signatures,
/// `text/plain` for UTF-8 text without NUL, else `application/octet-stream`.
pub(crate) fn sniff(head: &[u8]) -> &'static str {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"%PDF-", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
    ];
    if let Some((_, mime)) = SIGNATURES.iter().find(|(sig, _)| head.starts_with(sig)) {
        return mime;
    }
    if head.len() >= 12 && head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return "image/webp";
    }
    let text = match std::str::from_utf8(head) {
        Ok(_) => true,
        // A character cut by the 512-byte window is still text.
        Err(e) => e.error_len().is_none(),
    };
    if text && !head.contains(&0) {
        "text/plain"
    } else {
        "application/octet-stream"
    }
}

#[cfg(test)]
#[path = "attachments_tests.rs"]
mod tests;

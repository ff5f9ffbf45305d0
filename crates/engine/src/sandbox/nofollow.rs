//! Opening what a sandbox wrote (an untrusted run's copy, its run files) or what a working tree
//! holds, on the host: never through a symlink put in a file's place, never blocking on a fifo,
//! and only when the opened object is a regular file. The one owner of that rule for the copy,
//! the landing and the run-files drain.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `path` opened for reading with `O_NOFOLLOW | O_NONBLOCK`: `Ok(None)` when the opened object
/// is not a regular file (a fifo, socket or device), an error when it is a symlink or missing.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<Option<File>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    Ok(file.metadata()?.is_file().then_some(file))
}

/// `path` created for writing with `mode`, never through a symlink in its place; `create_new`
/// refuses an existing entry, otherwise an existing file is truncated.
pub(crate) fn create(path: &Path, mode: u32, create_new: bool) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(mode);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    options
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

//! A bundle's skills (`skills/NAME.md` beside its `main.bot`) written into the run's workspace
//! as `.claude/skills/NAME.md` before the sandbox starts, as upstream mirrors them: an agent (and
//! the `claude` CLI, which reads `.claude/skills/`) finds them where the bundle's prompts say.
//!
//! The workspace wins: an entry that exists already is left as it is. The workspace is hostile
//! (a checkout may put a symlink at `.claude` or `.claude/skills` pointing anywhere on the host),
//! so every step is relative to an open directory and never follows a symlink: each directory
//! is opened with `O_NOFOLLOW | O_DIRECTORY`, each file created with `O_CREAT | O_EXCL |
//! O_NOFOLLOW`. A symlink or non-directory in the way refuses the run.
//!
//! Where they go follows "Trust": a trusted run's into its workspace; an untrusted run's into its
//! copy, never the operator's checkout (a stranger's bundle would otherwise plant instructions that
//! the operator's own `claude` loads later). When the run ends, [`unmirror`] takes back what
//! [`mirror`] wrote and nobody changed, so nothing is left in a checkout and an untrusted run's
//! landing holds only the run's own changes.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use iterion_dsl::ir::Skill;
use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::{Mode, fstat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, unlinkat};

/// Where the skills go, relative to the workspace.
pub(crate) const SKILLS_DIR: [&str; 2] = [".claude", "skills"];

/// What [`mirror`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mirrored {
    /// Skills written.
    pub written: Vec<String>,
    /// Skills the workspace had already (left alone).
    pub kept: Vec<String>,
    /// How many of [`SKILLS_DIR`]'s directories [`mirror`] created (the innermost last).
    pub made_dirs: usize,
}

/// Writes each of `skills` to `workspace/.claude/skills/NAME.md` unless an entry of that name
/// exists; what it creates is owned by `owner` when given (an untrusted copy's uid).
///
/// # Errors
///
/// A message naming the path: a symlink or non-directory at `.claude` or `.claude/skills`, a
/// skill name that is not one plain file name, or an I/O error.
pub(crate) fn mirror(
    workspace: &Path,
    skills: &[Skill],
    owner: Option<(u32, u32)>,
) -> Result<Mirrored, String> {
    let mut done = Mirrored::default();
    if skills.is_empty() {
        return Ok(done);
    }
    // Every name is checked before anything is written.
    for skill in skills {
        let name = &skill.name;
        if name.is_empty()
            || name.starts_with('.')
            || name.contains('/')
            || name.chars().any(char::is_control)
        {
            return Err(format!("bundle skills: {name:?} is not a skill file name"));
        }
    }
    match write_skills(workspace, skills, owner, &mut done) {
        Ok(()) => Ok(done),
        // A failure leaves nothing: what was made moments ago goes again, whatever it holds.
        Err(message) => {
            take_back(workspace, None, &done);
            Err(message)
        }
    }
}

fn write_skills(
    workspace: &Path,
    skills: &[Skill],
    owner: Option<(u32, u32)>,
    done: &mut Mirrored,
) -> Result<(), String> {
    let shown = |rel: &str| workspace.join(rel).display().to_string();
    let mut dir: OwnedFd = open(
        workspace,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("bundle skills: {}: {e}", workspace.display()))?;
    let mut rel = String::new();
    for part in SKILLS_DIR {
        if !rel.is_empty() {
            rel.push('/');
        }
        rel.push_str(part);
        let made = match mkdirat(&dir, part, Mode::from_bits_truncate(0o755)) {
            Ok(()) => true,
            Err(Errno::EEXIST) => false,
            Err(e) => return Err(format!("bundle skills: {}: {e}", shown(&rel))),
        };
        dir = openat(
            &dir,
            part,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ELOOP | Errno::ENOTDIR => format!(
                "bundle skills: {} is a symbolic link or not a directory; the skills are not written through it",
                shown(&rel)
            ),
            e => format!("bundle skills: {}: {e}", shown(&rel)),
        })?;
        if made {
            done.made_dirs += 1;
            give(&dir, owner).map_err(|e| format!("bundle skills: {}: {e}", shown(&rel)))?;
        }
    }
    for skill in skills {
        let name = &skill.name;
        let file = format!("{name}.md");
        let fd = match openat(
            &dir,
            file.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        ) {
            Ok(fd) => fd,
            // The workspace's own entry (file, symlink or anything) wins.
            Err(Errno::EEXIST) => {
                done.kept.push(name.clone());
                continue;
            }
            Err(e) => return Err(format!("bundle skills: {}/{file}: {e}", shown(&rel))),
        };
        // Named as written before the bytes go in: a half-written file is taken back too.
        done.written.push(name.clone());
        let mut file_handle = std::fs::File::from(fd);
        give(&file_handle, owner)
            .map_err(|e| format!("bundle skills: {}/{file}: {e}", shown(&rel)))?;
        file_handle
            .write_all(skill.text.as_bytes())
            .map_err(|e| format!("bundle skills: {}/{file}: {e}", shown(&rel)))?;
    }
    Ok(())
}

/// [`mirror`] on the blocking pool.
pub(crate) async fn mirror_blocking(
    workspace: &Path,
    skills: &[Skill],
    owner: Option<(u32, u32)>,
) -> Result<Mirrored, String> {
    if skills.is_empty() {
        return Ok(Mirrored::default());
    }
    let (workspace, skills) = (workspace.to_path_buf(), skills.to_vec());
    tokio::task::spawn_blocking(move || mirror(&workspace, &skills, owner))
        .await
        .map_err(|e| format!("bundle skills: {e}"))
        .and_then(|r| r)
}

/// [`unmirror`] on the blocking pool.
pub(crate) async fn unmirror_blocking(workspace: &Path, skills: &[Skill], mirrored: Mirrored) {
    if mirrored.written.is_empty() && mirrored.made_dirs == 0 {
        return;
    }
    let (workspace, skills) = (workspace.to_path_buf(), skills.to_vec());
    let _ = tokio::task::spawn_blocking(move || unmirror(&workspace, &skills, &mirrored)).await;
}

fn give(fd: &impl std::os::fd::AsFd, owner: Option<(u32, u32)>) -> Result<(), Errno> {
    match owner {
        Some((uid, gid)) => fchown(fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid))),
        None => Ok(()),
    }
}

/// Takes back what [`mirror`] wrote into `workspace` (or into a copy of it): each skill file it
/// wrote that is still a regular file holding exactly the skill's text is removed, then each
/// directory it created if that left it empty. A file the run changed, replaced or made a link
/// stays (it is the run's own work). Never follows a symlink; a directory that is no longer one
/// ends the walk. Returns the names of the skills left in place because they changed.
pub(crate) fn unmirror(workspace: &Path, skills: &[Skill], mirrored: &Mirrored) -> Vec<String> {
    take_back(workspace, Some(skills), mirrored)
}

/// Removes what `mirrored` says was made: each file only if it still holds its skill's bytes
/// when `skills` is given, unconditionally (a failed [`mirror`]'s own files) when it is not.
fn take_back(workspace: &Path, skills: Option<&[Skill]>, mirrored: &Mirrored) -> Vec<String> {
    let mut changed = Vec::new();
    if mirrored.written.is_empty() && mirrored.made_dirs == 0 {
        return changed;
    }
    let Ok(root) = open(
        workspace,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return changed;
    };
    let mut chain: Vec<OwnedFd> = vec![root];
    for part in SKILLS_DIR {
        let Some(parent) = chain.last() else {
            return changed;
        };
        match openat(
            parent,
            part,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(dir) => chain.push(dir),
            Err(_) => return changed,
        }
    }
    let Some(dir) = chain.last() else {
        return changed;
    };
    for name in &mirrored.written {
        let file = format!("{name}.md");
        let ours = match skills {
            None => true,
            Some(skills) => skills
                .iter()
                .find(|s| &s.name == name)
                .is_some_and(|skill| still_ours(dir, &file, skill.text.as_bytes())),
        };
        if ours {
            let _ = unlinkat(dir, file.as_str(), UnlinkatFlags::NoRemoveDir);
        } else {
            changed.push(name.clone());
        }
    }
    // The innermost directory first; one that is not empty (the run's files) stays.
    for depth in
        (SKILLS_DIR.len() - mirrored.made_dirs.min(SKILLS_DIR.len())..SKILLS_DIR.len()).rev()
    {
        if unlinkat(&chain[depth], SKILLS_DIR[depth], UnlinkatFlags::RemoveDir).is_err() {
            break;
        }
    }
    changed
}

/// Whether `dir/file` is a regular file (not followed if a link) holding exactly `text`.
fn still_ours(dir: &OwnedFd, file: &str, text: &[u8]) -> bool {
    use std::io::Read;
    let Ok(fd) = openat(
        dir,
        file,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let regular = fstat(&fd).is_ok_and(|st| {
        (st.st_mode & nix::libc::S_IFMT) == nix::libc::S_IFREG
            && u64::try_from(st.st_size).ok() == u64::try_from(text.len()).ok()
    });
    if !regular {
        return false;
    }
    let mut held = Vec::with_capacity(text.len());
    std::fs::File::from(fd)
        .take(
            u64::try_from(text.len())
                .unwrap_or(u64::MAX)
                .saturating_add(1),
        )
        .read_to_end(&mut held)
        .is_ok_and(|_| held == text)
}

#[cfg(test)]
#[path = "skills_tests.rs"]
mod tests;

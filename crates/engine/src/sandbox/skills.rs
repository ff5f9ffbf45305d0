//! A bundle's skills (`skills/NAME.md` beside its `main.bot`) written into the run's workspace
//! as `.claude/skills/NAME.md` before the sandbox starts, as upstream mirrors them: an agent (and
//! the `claude` CLI, which reads `.claude/skills/`) finds them where the bundle's prompts say.
//!
//! The workspace wins: an entry that exists already is left as it is. The workspace is hostile
//! (a checkout may put a symlink at `.claude` or `.claude/skills` pointing anywhere on the host),
//! so every step is relative to an open directory and never follows a symlink: each directory
//! is opened with `O_NOFOLLOW | O_DIRECTORY`, each file created with `O_CREAT | O_EXCL |
//! O_NOFOLLOW`. A symlink or non-directory in the way refuses the run.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use iterion_dsl::ir::Skill;
use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::{Mode, mkdirat};

/// Where the skills go, relative to the workspace.
pub(crate) const SKILLS_DIR: [&str; 2] = [".claude", "skills"];

/// What [`mirror`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Mirrored {
    /// Skills written.
    pub written: Vec<String>,
    /// Skills the workspace had already (left alone).
    pub kept: Vec<String>,
}

/// Writes each of `skills` to `workspace/.claude/skills/NAME.md` unless an entry of that name
/// exists.
///
/// # Errors
///
/// A message naming the path: a symlink or non-directory at `.claude` or `.claude/skills`, a
/// skill name that is not one plain file name, or an I/O error.
pub(crate) fn mirror(workspace: &Path, skills: &[Skill]) -> Result<Mirrored, String> {
    let mut done = Mirrored::default();
    if skills.is_empty() {
        return Ok(done);
    }
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
        match mkdirat(&dir, part, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(format!("bundle skills: {}: {e}", shown(&rel))),
        }
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
    }
    for skill in skills {
        let name = &skill.name;
        if name.is_empty()
            || name.starts_with('.')
            || name.contains('/')
            || name.chars().any(char::is_control)
        {
            return Err(format!("bundle skills: {name:?} is not a skill file name"));
        }
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
        std::fs::File::from(fd)
            .write_all(skill.text.as_bytes())
            .map_err(|e| format!("bundle skills: {}/{file}: {e}", shown(&rel)))?;
        done.written.push(name.clone());
    }
    Ok(done)
}

#[cfg(test)]
#[path = "skills_tests.rs"]
mod tests;

//! Landlock, the second layer under the mounts (issue 18 item 1): read and execute everywhere,
//! write only where the plan makes the sandbox writable (the workspace, `/tmp`, HOME, `/dev`, the
//! read-write binds). A kernel without Landlock leaves the mounts and seccomp alone in charge;
//! the init reports which it was (`ready landlock=full|partial|none`).

use landlock::{
    ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus,
};

/// The ABI whose rights are asked for (best effort: a kernel with fewer grants fewer).
const ABI_ASKED: ABI = ABI::V5;

/// Restricts the calling process (and every child it will have). Returns `full`, `partial` or
/// `none`.
///
/// # Errors
///
/// A rule that cannot be added or a restriction the kernel refuses, in words.
pub(crate) fn restrict(writable: &[String]) -> Result<&'static str, String> {
    let all = AccessFs::from_all(ABI_ASKED);
    let read = AccessFs::from_read(ABI_ASKED);
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?;
    let root = PathFd::new("/").map_err(|e| e.to_string())?;
    ruleset = ruleset
        .add_rule(PathBeneath::new(root, read))
        .map_err(|e| e.to_string())?;
    for path in writable {
        let Ok(fd) = PathFd::new(path) else {
            continue;
        };
        let rights = if std::path::Path::new(path).is_dir() {
            all
        } else {
            AccessFs::from_file(ABI_ASKED)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let status = ruleset.restrict_self().map_err(|e| e.to_string())?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "full",
        RulesetStatus::PartiallyEnforced => "partial",
        RulesetStatus::NotEnforced => "none",
    })
}

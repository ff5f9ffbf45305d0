//! Conversion of a parsed devcontainer into the repository's half of a [`Spec`] (SANDBOX.md §7.3),
//! with host variables expanded first (§7.4). Pure but for the allow-listed lookup.

use std::path::{Path, PathBuf};

use crate::mode::Mode;
use crate::spec::{Build, Spec};
use crate::text::{clean, clean_path};

use super::expand::{LocalVars, expand_local_vars};
use super::read::{CommandForm, Devcontainer, LifecycleCommand};
use crate::error::DevcontainerError;

/// The repository's spec, before fusion: mode `auto`, `network` unset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RepoSpec {
    /// The converted spec.
    pub spec: Spec,
    /// `runArgs`, expanded, for [`screen_run_args`](super::run_args::screen_run_args); never mapped.
    pub run_args: Vec<String>,
    /// The devcontainer file (the source label's detail).
    pub path: PathBuf,
    /// Whether the file had an `initializeCommand`, which never runs (for the run log).
    pub has_initialize_command: bool,
}

/// Quotes `arg` for a POSIX `sh`: bare when it is only `[A-Za-z0-9_@%+=:,./-]`, otherwise in
/// single quotes with each `'` written `'\''`. Never `$'…'`, which `sh` need not understand.
pub(super) fn posix_quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        return arg.to_owned();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// Converts a devcontainer into the repository's spec (SANDBOX.md §7.3), after expanding host
/// variables in every field §7.4 lists (with `repo_root` as `${localWorkspaceFolder}`):
///
/// - `image` → `image`; `build.dockerfile` and `build.context` are relative to the file's
///   directory and rewritten relative to the repository root (`context` defaults to that
///   directory); `args` copied; `target` dropped;
/// - `remoteEnv`, then `containerEnv` → `env` (containerEnv wins a key);
/// - `mounts` → `mounts` (screened later, never trusted);
/// - `remoteUser`, else `containerUser` → `user`;
/// - `workspaceFolder` → `workspace_folder` (must be absolute; cleaned);
/// - `postCreateCommand` → `post_create`: a string as-is; an array POSIX-quoted and
///   space-joined; an object's entries in sorted key order, each converted and wrapped as
///   `( … )`, joined with ` && `; trimmed; empty is unset.
///
/// # Errors
///
/// [`DevcontainerError::Shape`] for a relative `workspaceFolder` (unusable).
pub(super) fn to_sandbox_spec(
    dc: &Devcontainer,
    repo_root: &Path,
    vars: &LocalVars<'_>,
) -> Result<RepoSpec, DevcontainerError> {
    let x = |value: &str| expand_local_vars(value, vars);
    let xo = |value: &Option<String>| value.as_deref().map(x);
    let workspace_folder = match xo(&dc.workspace_folder) {
        Some(folder) if !folder.starts_with('/') => {
            return Err(DevcontainerError::Shape {
                path: dc.path.clone(),
                field: "workspaceFolder".to_owned(),
                reason: format!("{folder} is not absolute"),
            });
        }
        other => other.map(|folder| clean(&folder)),
    };
    let file_dir = dc
        .path
        .parent()
        .and_then(|dir| dir.strip_prefix(repo_root).ok())
        .map(Path::to_owned)
        .unwrap_or_default();
    let relative = |path: &str| -> String {
        clean_path(&file_dir.join(path))
            .to_string_lossy()
            .into_owned()
    };
    let build = dc.build.as_ref().map(|build| Build {
        dockerfile: relative(&x(&build.dockerfile)),
        context: Some(relative(
            &xo(&build.context).unwrap_or_else(|| ".".to_owned()),
        )),
        args: build
            .args
            .iter()
            .map(|(key, value)| (key.clone(), x(value)))
            .collect(),
    });
    let mut env: std::collections::BTreeMap<String, String> = dc
        .remote_env
        .iter()
        .map(|(key, value)| (key.clone(), x(value)))
        .collect();
    env.extend(
        dc.container_env
            .iter()
            .map(|(key, value)| (key.clone(), x(value))),
    );
    let spec = Spec {
        mode: Mode::Auto,
        image: xo(&dc.image),
        build,
        mounts: dc.mounts.iter().map(|mount| x(mount)).collect(),
        env,
        user: dc.remote_user.clone().or_else(|| dc.container_user.clone()),
        post_create: dc
            .post_create_command
            .as_ref()
            .and_then(|command| lifecycle_to_shell(command, &x)),
        workspace_folder,
        ..Spec::default()
    };
    Ok(RepoSpec {
        spec,
        run_args: dc.run_args.iter().map(|arg| x(arg)).collect(),
        path: dc.path.clone(),
        has_initialize_command: dc.has_initialize_command,
    })
}

/// A lifecycle command as one `sh -c` snippet (§7.3); `None` when it is empty.
fn lifecycle_to_shell(
    command: &LifecycleCommand,
    expand: &dyn Fn(&str) -> String,
) -> Option<String> {
    let form = |form: &CommandForm| match form {
        CommandForm::Shell(command) => expand(command),
        CommandForm::Argv(argv) => argv
            .iter()
            .map(|arg| posix_quote(&expand(arg)))
            .collect::<Vec<_>>()
            .join(" "),
    };
    let shell = match command {
        LifecycleCommand::Single(single) => form(single),
        // BTreeMap: sorted key order, deterministic whatever the file's order.
        LifecycleCommand::Named(named) => named
            .values()
            .map(form)
            .filter(|entry| !entry.trim().is_empty())
            .map(|entry| format!("( {} )", entry.trim()))
            .collect::<Vec<_>>()
            .join(" && "),
    };
    let shell = shell.trim();
    (!shell.is_empty()).then(|| shell.to_owned())
}

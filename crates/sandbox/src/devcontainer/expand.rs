//! Host variable expansion (SANDBOX.md §7.4). The one rule that matters: a repository names
//! variables, the operator's host answers only for the allow-list. A name off the list is never
//! looked up, so `${localEnv:AWS_SECRET_ACCESS_KEY}` cannot reach the container whatever the
//! host has set.

use std::path::Path;

use crate::spec::Spec;
use crate::text::is_env_name;

/// The host variables `${localEnv:NAME}` may read (SANDBOX.md §7.4), besides any `LC_*`.
pub(super) const LOCAL_ENV_ALLOW_LIST: &[&str] = &[
    "HOME",
    "USER",
    "USERNAME",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "PWD",
    "OLDPWD",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "PUID",
    "PGID",
    "VARIANT",
];

/// Whether `${localEnv:NAME}` may read the host's `NAME`: on [`LOCAL_ENV_ALLOW_LIST`], or `LC_*`.
pub(super) fn is_allowed_local_env(name: &str) -> bool {
    LOCAL_ENV_ALLOW_LIST.contains(&name) || (name.starts_with("LC_") && is_env_name(name))
}

/// What expansion may know about the host: the repository root (when there is one) and a
/// lookup for host variables. The lookup is only ever called with allow-listed names
/// (`is_allowed_local_env`); the engine passes its environment's `|name| env.get(name)`.
pub struct LocalVars<'a> {
    /// The repository root: `${localWorkspaceFolder}` and its basename. `None` leaves both
    /// literal.
    pub repo_root: Option<&'a Path>,
    /// Reads a host variable; called only for allow-listed names.
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl std::fmt::Debug for LocalVars<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalVars")
            .field("repo_root", &self.repo_root)
            .finish_non_exhaustive()
    }
}

/// Expands `${localWorkspaceFolder}`, `${localWorkspaceFolderBasename}`, `${localEnv:NAME}` and
/// `${localEnv:NAME:default}` in `input` (SANDBOX.md §7.4). Pure but for `vars.lookup`.
///
/// - `localEnv` matches `\$\{localEnv:[A-Za-z_][A-Za-z0-9_]*(?::[^}]*)?\}`; it gives the host
///   value only when NAME is allow-listed and set, else the default, else empty.
/// - The workspace forms expand only when the root is known.
/// - Everything else (`${containerEnv:…}`, `${containerWorkspaceFolder…}`, unknown forms, a
///   malformed `localEnv`) is left untouched.
/// - A substituted value is never expanded again.
///
/// ```
/// use iterion_sandbox::{LocalVars, expand_local_vars};
/// let lookup = |name: &str| (name == "HOME").then(|| "/home/op".to_owned());
/// let vars = LocalVars { repo_root: None, lookup: &lookup };
/// assert_eq!(expand_local_vars("${localEnv:HOME}/x", &vars), "/home/op/x");
/// assert_eq!(expand_local_vars("${localEnv:GITHUB_TOKEN:none}", &vars), "none");
/// ```
pub fn expand_local_vars(input: &str, vars: &LocalVars<'_>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let replaced = after
            .find('}')
            .and_then(|end| substitute(&after[..end], vars).map(|value| (value, end)));
        match replaced {
            Some((value, end)) => {
                out.push_str(&value);
                rest = &after[end + 1..];
            }
            None => {
                // Not ours: keep the `$` and rescan from the next character, so an inner
                // `${localEnv:…}` is still found (regex semantics).
                out.push('$');
                rest = &rest[start + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of one `${…}` body, or `None` to leave it literal.
fn substitute(body: &str, vars: &LocalVars<'_>) -> Option<String> {
    match body {
        "localWorkspaceFolder" => vars
            .repo_root
            .map(|root| root.to_string_lossy().into_owned()),
        "localWorkspaceFolderBasename" => vars.repo_root.map(|root| {
            root.file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default()
        }),
        _ => {
            let spec = body.strip_prefix("localEnv:")?;
            let (name, default) = match spec.split_once(':') {
                Some((name, default)) => (name, Some(default)),
                None => (spec, None),
            };
            if !is_env_name(name) {
                return None;
            }
            // The allow-list gate comes first: a name off the list is never looked up.
            let host = if is_allowed_local_env(name) {
                (vars.lookup)(name)
            } else {
                None
            };
            Some(host.unwrap_or_else(|| default.unwrap_or_default().to_owned()))
        }
    }
}

/// Applies [`expand_local_vars`] to the fields of an inline or default-image spec (SANDBOX.md
/// §7.4): image, user, workspace_folder, post_create, mounts, env values and build fields.
pub(super) fn expand_sandbox_spec(spec: &mut Spec, vars: &LocalVars<'_>) {
    let expand = |value: &mut String| *value = expand_local_vars(value, vars);
    for value in [
        spec.image.as_mut(),
        spec.user.as_mut(),
        spec.workspace_folder.as_mut(),
        spec.post_create.as_mut(),
    ]
    .into_iter()
    .flatten()
    {
        expand(value);
    }
    spec.mounts.iter_mut().for_each(expand);
    spec.env.values_mut().for_each(expand);
    if let Some(build) = spec.build.as_mut() {
        expand(&mut build.dockerfile);
        if let Some(context) = build.context.as_mut() {
            expand(context);
        }
        build.args.values_mut().for_each(expand);
    }
}

//! Subscription credential files ("forfaits", seed steps 14 and 17) for delegate nodes that have
//! no API key: [`load`] reads and checks the operator's login before anything is made, [`plan`]
//! turns it into a per-run read-only secret-file mount (plus a shadow over the original when
//! `host_state: auto` binds the directory that holds it) and exports the CLI's config-dir
//! variable, and [`seed`] copies the mount into the writable per-run config dir once the
//! container runs. A seed that fails fails the setup, naming the file.
//!
//! The container's copy carries the access token's placeholder (the run's proxy swaps it toward
//! the model's host only) and no refresh token (`iterion_agent::forfait` says why).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use iterion_agent::delegate::Cli;
use iterion_agent::forfait::{self as pure, Forfait};
use iterion_agent::provider::{Endpoint, Provider, Routes};
use iterion_dsl::ir::{Backend, Workflow};
use iterion_sandbox::{EngineMountKind, SandboxRun, SecretBytes, SecretFileMount, Spec, Trust};
use iterion_vocab::Environment;

use crate::records::secrets::ResolvedSecret;
use crate::sandbox::egress::EgressSecret;
use crate::sandbox::error::SetupError;

/// Where a delegate's config lives inside a container (the container is the run's own).
pub(crate) const CONTAINER_CONFIG_ROOT: &str = "/tmp/iterion-delegate";

/// The variable naming claude's login file (else `$CLAUDE_CONFIG_DIR/.credentials.json`, else
/// `~/.claude/.credentials.json`).
pub(crate) const CLAUDE_CREDENTIALS_VAR: &str = "ITERION_CLAUDE_CREDENTIALS";
/// The variable naming codex's login file (else `$CODEX_HOME/auth.json`, else
/// `~/.codex/auth.json`).
pub(crate) const CODEX_AUTH_VAR: &str = "ITERION_CODEX_AUTH";

/// codex's ChatGPT backend: where a ChatGPT login is served when no base URL is set.
const CHATGPT_CODEX_BASE: &str = "https://chatgpt.com/backend-api/codex";

/// One loaded login.
struct Login {
    cli: Cli,
    /// The operator's file (as found, and canonical).
    path: PathBuf,
    canonical: PathBuf,
    forfait: Forfait,
    /// The target of the workflow's bind mount that named the login (upstream's
    /// `mounts: [type=bind,source=~/.claude,target=T]` with `CLAUDE_CONFIG_DIR: T`): the login
    /// arrives as the secret file instead, so that mount is not made.
    consumed_target: Option<String>,
    /// Where the CLI sends its requests with this login.
    base_url: String,
    host: Option<String>,
    rule: Option<String>,
}

/// The run's loaded logins (none when every delegate node has a key).
#[derive(Clone, Default)]
pub(crate) struct Forfaits(Arc<Vec<Login>>);

/// What a delegate node on its CLI's login needs.
pub(crate) struct LoginUse {
    /// The base URL the CLI is pointed at.
    pub base_url: String,
    /// The file a host run's CLI gets (real access token, no refresh token).
    pub host_text: String,
}

/// The CLI of a delegate backend.
fn cli_of(backend: Backend) -> Option<Cli> {
    match backend {
        Backend::Claw => None,
        Backend::ClaudeCode => Some(Cli::ClaudeCode),
        Backend::Codex => Some(Cli::Codex),
    }
}

/// The operator's login file for `cli`, read through the environment the CLI handed the engine.
fn login_path(cli: Cli, env: &Environment) -> Option<PathBuf> {
    let (var, config_var, home_dir) = match cli {
        Cli::ClaudeCode => (CLAUDE_CREDENTIALS_VAR, "CLAUDE_CONFIG_DIR", ".claude"),
        Cli::Codex => (CODEX_AUTH_VAR, "CODEX_HOME", ".codex"),
    };
    let set = |k: &str| env.get(k).filter(|v| !v.trim().is_empty());
    if let Some(path) = set(var) {
        return Some(PathBuf::from(path));
    }
    if let Some(dir) = set(config_var) {
        return Some(Path::new(&dir).join(cli.login_file()));
    }
    let home = env.get_os("HOME").map(PathBuf::from)?;
    Some(home.join(home_dir).join(cli.login_file()))
}

/// Reads and checks the login of every delegate CLI a node without a key uses, at `now` (Unix
/// seconds). Makes nothing.
///
/// # Errors
///
/// A message naming the file (or where it was looked for) when a login is missing, unreadable,
/// broken or expired.
pub(crate) fn load(
    wf: &Workflow,
    routes: &Routes,
    env: &Environment,
    trust: Trust,
    now: i64,
) -> Result<Forfaits, String> {
    let mut logins: Vec<Login> = Vec::new();
    for node in &wf.nodes {
        let Some(cli) = cli_of(node.body.backend()) else {
            continue;
        };
        let Some(route) = routes.get(&node.id) else {
            continue;
        };
        if !route.endpoint.api_key.is_empty() || logins.iter().any(|l| l.cli == cli) {
            continue;
        }
        let provider = route.endpoint.provider;
        // The operator's own variable wins; then a login the workflow names (upstream's
        // `sandbox.env.CLAUDE_CONFIG_DIR` / `CODEX_HOME`), resolved only inside the allowed
        // roots; then the operator's defaults.
        let named = match env.get(var_of(cli)).filter(|v| !v.trim().is_empty()) {
            Some(_) => None,
            None => workflow_login(cli, wf, env, trust).map_err(|e| e.to_string())?,
        };
        if let Some(named) = named {
            let shown = named.path.display().to_string();
            let placeholder = iterion_netproxy::placeholder_for(pure::secret_name(cli));
            let forfait = pure::parse(cli, &named.text, now, &placeholder).map_err(|e| {
                format!(
                    "the {} subscription login {shown} (the workflow's sandbox.env.{}) {e}",
                    cli.program(),
                    cli.config_var()
                )
            })?;
            logins.push(login_of(
                cli,
                route,
                named.path,
                named.canonical,
                forfait,
                named.consumed_target,
            ));
            continue;
        }
        let Some(path) = login_path(cli, env) else {
            return Err(format!(
                "node \"{}\" uses {} with no {}: set it, or point {} at a {} login file",
                node.id,
                cli.program(),
                provider.key_var(),
                var_of(cli),
                cli.program()
            ));
        };
        let shown = path.display().to_string();
        let text = read_bounded(&path).map_err(|e| {
            format!(
                "node \"{}\" uses {} with no {}, and its subscription login {shown} {e}: set {}, log in with `{}`, or point {} at a login file",
                node.id,
                cli.program(),
                provider.key_var(),
                provider.key_var(),
                cli.program(),
                var_of(cli)
            )
        })?;
        let placeholder = iterion_netproxy::placeholder_for(pure::secret_name(cli));
        let forfait = pure::parse(cli, &text, now, &placeholder)
            .map_err(|e| format!("the {} subscription login {shown} {e}", cli.program()))?;
        let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        logins.push(login_of(cli, route, path, canonical, forfait, None));
    }
    Ok(Forfaits(Arc::new(logins)))
}

fn login_of(
    cli: Cli,
    route: &iterion_agent::provider::NodeModel,
    path: PathBuf,
    canonical: PathBuf,
    forfait: Forfait,
    consumed_target: Option<String>,
) -> Login {
    let provider = route.endpoint.provider;
    let base_url = match (cli, provider) {
        (Cli::Codex, Provider::Openai)
            if Some(route.endpoint.base_url.as_str()) == provider.default_base_url() =>
        {
            CHATGPT_CODEX_BASE.to_owned()
        }
        _ => route.endpoint.base_url.clone(),
    };
    let endpoint = Endpoint {
        provider,
        base_url: base_url.clone(),
        api_key: String::new(),
    };
    Login {
        cli,
        canonical,
        path,
        forfait,
        consumed_target,
        host: endpoint.host(),
        rule: endpoint.rule(),
        base_url,
    }
}

/// The operator's variable listing more directories a workflow-named login may come from.
pub(crate) const CREDENTIAL_ROOTS_VAR: &str = "ITERION_CREDENTIAL_ROOTS";

/// Why a login the workflow names (`sandbox.env.CLAUDE_CONFIG_DIR` / `CODEX_HOME`) is refused.
/// Each names the property: the path is the workflow's, hostile until proven otherwise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WorkflowLoginError {
    /// An untrusted run may not pick a host file.
    #[error(
        "the workflow's {property} names a login directory, and an untrusted run may not use a login file its workflow names; the operator's {var} (or the default login) is used only when the workflow names none"
    )]
    Untrusted { property: String, var: &'static str },
    /// Not an absolute host path (nor the target of one of the workflow's bind mounts whose
    /// source is one).
    #[error(
        "the workflow's {property} ({value}) names no absolute host directory: give a host path, or the target of a `type=bind` entry of sandbox.mounts whose source is one"
    )]
    NotAbsolute { property: String, value: String },
    /// Missing or unreadable.
    #[error("the workflow's {property} names the login {path}, which {reason}")]
    Unreadable {
        property: String,
        path: String,
        reason: String,
    },
    /// Outside every allowed root once symlinks are resolved.
    #[error(
        "the workflow's {property} names the login {path}, which resolves to {resolved}, outside the directories logins may come from ({roots}); the operator can add a directory to {CREDENTIAL_ROOTS_VAR}"
    )]
    OutsideRoots {
        property: String,
        path: String,
        resolved: String,
        roots: String,
    },
    /// A fifo, socket, device or directory.
    #[error("the workflow's {property} names the login {path}, which is not a regular file")]
    NotRegular { property: String, path: String },
    /// Larger than the bound.
    #[error("the workflow's {property} names the login {path}, which is larger than {kib} KiB")]
    TooLarge {
        property: String,
        path: String,
        kib: usize,
    },
}

/// A login the workflow named, read.
struct NamedLogin {
    path: PathBuf,
    canonical: PathBuf,
    text: String,
    consumed_target: Option<String>,
}

/// The directories a workflow-named login of `cli` may resolve into, canonical: the operator's
/// own config dir of that CLI (`$CLAUDE_CONFIG_DIR` / `$CODEX_HOME` of the engine's
/// environment, and `~/.claude` / `~/.codex`) and each absolute entry of
/// `ITERION_CREDENTIAL_ROOTS` (`:`-separated). Never the workspace: a repository is the
/// workflow author's, and a login committed there is no login of the operator's.
fn allowed_roots(cli: Cli, env: &Environment) -> Vec<PathBuf> {
    let home_dir = match cli {
        Cli::ClaudeCode => ".claude",
        Cli::Codex => ".codex",
    };
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(dir) = env.get(cli.config_var()).filter(|v| !v.trim().is_empty()) {
        roots.push(PathBuf::from(dir));
    }
    if let Some(home) = env.get_os("HOME") {
        roots.push(Path::new(home).join(home_dir));
    }
    if let Some(list) = env.get(CREDENTIAL_ROOTS_VAR) {
        roots.extend(
            list.split(':')
                .map(PathBuf::from)
                .filter(|p| p.is_absolute()),
        );
    }
    let mut canonical: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .filter(|r| r.is_dir() && r.parent().is_some())
        .collect();
    canonical.sort();
    canonical.dedup();
    canonical
}

/// The login the workflow names for `cli`, if it names one: upstream's `sandbox.env.<config
/// var>` (`${localEnv:…}` expanded), mapped through the workflow's bind mount whose target it
/// is, else taken as a host directory. Resolved on the host only inside [`allowed_roots`], with
/// symlinks resolved (and the opened file checked again), a regular file, at most
/// [`pure::MAX_BYTES`]. An untrusted run gets none.
fn workflow_login(
    cli: Cli,
    wf: &Workflow,
    env: &Environment,
    trust: Trust,
) -> Result<Option<NamedLogin>, WorkflowLoginError> {
    let var = cli.config_var();
    let Some(raw) = wf.sandbox.env.get(var).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let property = format!("sandbox.env.{var}");
    if trust != Trust::Trusted {
        return Err(WorkflowLoginError::Untrusted {
            property,
            var: var_of(cli),
        });
    }
    let lookup = |name: &str| env.get(name);
    let vars = iterion_sandbox::LocalVars {
        repo_root: None,
        lookup: &lookup,
    };
    let value = iterion_sandbox::expand_local_vars(raw, &vars);
    let mut consumed_target = None;
    let mut dir = value.clone();
    for mount in &wf.sandbox.mounts {
        let expanded = iterion_sandbox::expand_local_vars(mount, &vars);
        let Ok(parsed) = iterion_sandbox::parse_mount(&expanded) else {
            continue;
        };
        if parsed.kind == iterion_sandbox::MountKind::Bind
            && Path::new(&parsed.target) == Path::new(&value)
            && let Some(source) = parsed.source
        {
            dir = source;
            consumed_target = Some(parsed.target);
            break;
        }
    }
    let dir = PathBuf::from(&dir);
    if !dir.is_absolute() {
        return Err(WorkflowLoginError::NotAbsolute { property, value });
    }
    let path = dir.join(cli.login_file());
    let shown = path.display().to_string();
    let unreadable = |e: std::io::Error| WorkflowLoginError::Unreadable {
        property: property.clone(),
        path: shown.clone(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => "does not exist".to_owned(),
            _ => format!("cannot be read ({e})"),
        },
    };
    let canonical = std::fs::canonicalize(&path).map_err(unreadable)?;
    let roots = allowed_roots(cli, env);
    let inside = |p: &Path| roots.iter().any(|r| p != r && p.starts_with(r));
    let outside = |resolved: &Path| WorkflowLoginError::OutsideRoots {
        property: property.clone(),
        path: shown.clone(),
        resolved: resolved.display().to_string(),
        roots: if roots.is_empty() {
            "none exist".to_owned()
        } else {
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
    };
    if !inside(&canonical) {
        return Err(outside(&canonical));
    }
    // Opened without following a symlink put in its place since, and checked again through the
    // descriptor: a directory swapped for a symlink between the two steps is caught here.
    let file = crate::sandbox::nofollow::open_regular(&canonical)
        .map_err(unreadable)?
        .ok_or_else(|| WorkflowLoginError::NotRegular {
            property: property.clone(),
            path: shown.clone(),
        })?;
    {
        use std::os::fd::AsRawFd;
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(unreadable)?;
        if !inside(&opened) {
            return Err(outside(&opened));
        }
    }
    let text = read_bounded_from(file).map_err(|reason| match reason {
        Bounded::TooLarge => WorkflowLoginError::TooLarge {
            property: property.clone(),
            path: shown.clone(),
            kib: pure::MAX_BYTES / 1024,
        },
        Bounded::Other(reason) => WorkflowLoginError::Unreadable {
            property: property.clone(),
            path: shown.clone(),
            reason,
        },
    })?;
    Ok(Some(NamedLogin {
        path,
        canonical,
        text,
        consumed_target,
    }))
}

enum Bounded {
    TooLarge,
    Other(String),
}

/// At most [`pure::MAX_BYTES`] of UTF-8 text from `file`.
fn read_bounded_from(file: std::fs::File) -> Result<String, Bounded> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(pure::MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Bounded::Other(format!("cannot be read ({e})")))?;
    if bytes.len() > pure::MAX_BYTES {
        return Err(Bounded::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| Bounded::Other("is not UTF-8 text".to_owned()))
}

fn var_of(cli: Cli) -> &'static str {
    match cli {
        Cli::ClaudeCode => CLAUDE_CREDENTIALS_VAR,
        Cli::Codex => CODEX_AUTH_VAR,
    }
}

/// The file's text, at most [`pure::MAX_BYTES`]. The operator's own path may be a symlink (a
/// dotfiles checkout), but what it names must be a regular file: a fifo a sandbox sharing the
/// directory (`host_state: auto`) planted there would block the engine's next setup for ever,
/// a device would be read as a login. It is opened without blocking and checked before a byte
/// is read.
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "does not exist".to_owned(),
            _ => format!("cannot be read ({e})"),
        })?;
    let regular = file
        .metadata()
        .map_err(|e| format!("cannot be read ({e})"))?
        .is_file();
    if !regular {
        return Err("is not a regular file".to_owned());
    }
    read_bounded_from(file).map_err(|e| match e {
        Bounded::TooLarge => format!("is larger than {} KiB", pure::MAX_BYTES / 1024),
        Bounded::Other(reason) => reason,
    })
}

/// The in-container config dir of `cli`.
pub(crate) fn container_config_dir(cli: Cli) -> String {
    format!("{CONTAINER_CONFIG_ROOT}/{}", cli.backend())
}

fn mount_name(cli: Cli) -> String {
    format!("forfait-{}", cli.backend())
}

impl Forfaits {
    /// What a node of `cli` without a key needs, when its login is loaded.
    pub(crate) fn login(&self, cli: Cli) -> Option<LoginUse> {
        self.0.iter().find(|l| l.cli == cli).map(|l| LoginUse {
            base_url: l.base_url.clone(),
            host_text: l.forfait.host_text.clone(),
        })
    }

    /// Every real token the logins hold, for redaction.
    pub(crate) fn redacted(&self) -> Vec<ResolvedSecret> {
        self.0
            .iter()
            .flat_map(|l| {
                l.forfait
                    .secrets
                    .iter()
                    .map(|s| ResolvedSecret::new(pure::secret_name(l.cli), s.clone()))
            })
            .collect()
    }

    /// The access tokens as the proxy's value secrets, scoped to their model host.
    pub(crate) fn egress_secrets(&self) -> Vec<EgressSecret> {
        self.0
            .iter()
            .map(|l| EgressSecret {
                name: pure::secret_name(l.cli).to_owned(),
                value: l.forfait.access_token.clone(),
                hosts: l.host.iter().cloned().collect(),
                file: false,
            })
            .collect()
    }

    /// The model hosts the logins talk to (allowed under an allowlist, like the routes').
    pub(crate) fn model_hosts(&self) -> Vec<String> {
        self.0.iter().filter_map(|l| l.rule.clone()).collect()
    }

    /// Drops the workflow's bind mounts that named a login (the login arrives as a secret file
    /// instead), before the author mounts are screened and planned.
    pub(crate) fn consume_mounts(&self, spec: &mut Spec) {
        let targets: Vec<&str> = self
            .0
            .iter()
            .filter_map(|l| l.consumed_target.as_deref())
            .collect();
        if targets.is_empty() {
            return;
        }
        spec.mounts.retain(|mount| {
            iterion_sandbox::parse_mount(mount).map_or(true, |m| {
                m.kind != iterion_sandbox::MountKind::Bind
                    || !targets.iter().any(|t| Path::new(t) == Path::new(&m.target))
            })
        });
    }

    /// Seed step 14 on the final spec: each login's container copy as a read-only secret file,
    /// the same copy over the original wherever a host-state bind would show it, and the CLI's
    /// config-dir variable on the container's environment.
    pub(crate) fn plan(&self, spec: &mut Spec) {
        for login in self.0.iter() {
            let value = SecretBytes::new(login.forfait.container_text.clone().into_bytes());
            spec.secret_files.push(SecretFileMount {
                name: mount_name(login.cli),
                mount_path: iterion_vocab::default_secret_mount_path(&mount_name(login.cli)),
                env: None,
                value: value.clone(),
            });
            let shadows: Vec<String> = spec
                .engine_mounts
                .iter()
                .filter(|m| m.kind == EngineMountKind::Bind)
                .filter_map(|m| {
                    let rest = login.canonical.strip_prefix(&m.source).ok()?;
                    let target = Path::new(&m.target).join(rest);
                    Some(target.to_string_lossy().into_owned())
                })
                .collect();
            for (index, target) in shadows.into_iter().enumerate() {
                spec.secret_files.push(SecretFileMount {
                    name: format!("{}-shadow-{index}", mount_name(login.cli)),
                    mount_path: target,
                    env: None,
                    value: value.clone(),
                });
            }
            spec.env.insert(
                login.cli.config_var().to_owned(),
                container_config_dir(login.cli),
            );
        }
    }

    /// Seed step 17: copies each login's read-only mount into the CLI's writable per-run config
    /// dir (0700, the file 0600).
    ///
    /// # Errors
    ///
    /// A setup failure naming the operator's file when a copy fails.
    pub(crate) async fn seed(&self, run: &dyn SandboxRun) -> Result<(), SetupError> {
        for login in self.0.iter() {
            let dir = container_config_dir(login.cli);
            let source = iterion_vocab::default_secret_mount_path(&mount_name(login.cli));
            let argv: Vec<String> = [
                "sh",
                "-c",
                "umask 077 && mkdir -p \"$1/tmp\" && cp \"$2\" \"$1/$3\" && chmod 600 \"$1/$3\"",
                "sh",
                &dir,
                &source,
                login.cli.login_file(),
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
            let failure = match run.exec(&argv, iterion_sandbox::ExecOpts::default()).await {
                Ok(result) if result.exit_code == 0 => continue,
                Ok(result) => format!(
                    "exit {}: {}",
                    result.exit_code,
                    String::from_utf8_lossy(result.stderr.as_deref().unwrap_or_default()).trim()
                ),
                Err(error) => error.to_string(),
            };
            return Err(SetupError::failed(format!(
                "the {} subscription login {} could not be seeded into {dir} in the container ({}); the sandbox was torn down",
                login.cli.program(),
                login.path.display(),
                iterion_agent::text::truncate_bytes(&failure, 1024)
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_bounded(path)` on a thread, or `None` when it did not return within 5 s.
    fn read_within(path: &Path) -> Option<Result<String, String>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let path = path.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(read_bounded(&path));
        });
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }

    #[test]
    fn attack_a_fifo_or_a_device_in_place_of_the_operators_login_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(".credentials.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        for path in [fifo.as_path(), link.as_path(), Path::new("/dev/zero")] {
            let read = read_within(path)
                .unwrap_or_else(|| panic!("reading {} blocked the engine", path.display()));
            assert_eq!(
                read,
                Err("is not a regular file".to_owned()),
                "{}",
                path.display()
            );
        }
        // The control: a regular file through a symlink (a dotfiles checkout) is read.
        let real = dir.path().join("real.json");
        std::fs::write(&real, "{}").unwrap();
        let dotfile = dir.path().join("dotfile.json");
        std::os::unix::fs::symlink(&real, &dotfile).unwrap();
        assert_eq!(read_within(&dotfile), Some(Ok("{}".to_owned())));
    }
}

//! The pure half of a start: from the spec, the run and what was found on the host to a
//! [`Plan`] the init carries out (STYLE.md §5.3). Nothing here touches the system.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use iterion_sandbox::{
    EngineMountKind, Error, MountKind, MountSpec, RunInfo, ScreenedMount, Spec, Trust,
};

/// Where the per-run `net/` dir (the proxy socket) is bound, read-only: the path the egress
/// bridge dials (`iterion __egress-bridge --listen 127.0.0.1:3128=/run/iterion/net/proxy.sock`).
pub(crate) const NET_DIR_TARGET: &str = "/run/iterion/net";
/// Where the proxy's ephemeral CA is bound, read-only, when TLS inspection is on.
pub(crate) const CA_TARGET: &str = iterion_sandbox::PROXY_CA_TARGET;
/// The CA's file in the per-run dir.
pub(crate) const CA_RUN_DIR_FILE: &str = "ca/egress-ca.pem";
/// The per-run dir holding the secret files.
pub(crate) const SECRETS_RUN_DIR: &str = "secrets";
/// `PATH` when the spec sets none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The top-level entries of the host's root that the sandbox does not show: it mounts its own
/// (`/proc`, `/dev`, `/sys`, `/tmp`, `/run`), shows them empty (`/home`, `/root`: every home),
/// or has no use for them (`/boot`, `lost+found`).
pub(crate) const REPLACED_TOP_LEVEL: &[&str] = &[
    "proc",
    "dev",
    "sys",
    "tmp",
    "run",
    "home",
    "root",
    "boot",
    "lost+found",
];

/// The uid and gid inside the sandbox and the host ids they map to (one of each: the driver
/// needs no privilege beyond its own user).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ids {
    pub inside_uid: u32,
    pub inside_gid: u32,
    pub host_uid: u32,
    pub host_gid: u32,
}

/// What kind of object a bind mounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Object {
    Dir,
    File,
}

/// One bind: a host object (opened `O_PATH` before the fork, so the init mounts exactly what was
/// screened) onto a target inside the sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bind {
    pub source: PathBuf,
    pub target: String,
    pub read_only: bool,
    pub object: Object,
    /// Why it exists, for errors.
    pub purpose: String,
}

/// One tmpfs the sandbox mounts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tmpfs {
    pub target: String,
    /// `mode=…,uid=…` and the like, as `mount -o` takes them.
    pub options: String,
}

/// Everything the init does, decided before the fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub ids: Ids,
    pub hostname: String,
    /// The workspace inside the sandbox (the default working directory).
    pub workdir: String,
    /// The env every exec starts from, sorted by key.
    pub env: Vec<(String, String)>,
    /// Host paths hidden before the binds (each canonical, not under a replaced top-level dir).
    pub masks_before: Vec<PathBuf>,
    /// Sandbox paths hidden after the binds (sensitive paths inside a bound tree).
    pub masks_after: Vec<String>,
    /// The tmpfs mounts: `/tmp`, HOME, the spec's.
    pub tmpfs: Vec<Tmpfs>,
    /// The binds, in order: the workspace, the engine's, the proxy's, the secrets, the author's.
    pub binds: Vec<Bind>,
    /// The paths Landlock lets the sandbox write (everything else is read and execute only).
    pub writable: Vec<String>,
    /// Transparent egress (issue 22): the sandbox's network namespace lets any uid bind ports
    /// below 1024 (the bridge, with no capability, binds 53, 80 and 443 on loopback).
    pub unprivileged_ports: bool,
}

/// What a plan needs besides the spec and the run.
#[derive(Clone, Debug)]
pub(crate) struct PlanInputs<'a> {
    /// The engine's own uid and gid.
    pub engine_ids: (u32, u32),
    /// [`ScreenContext::masked_paths`](iterion_sandbox::ScreenContext::masked_paths).
    pub masked: &'a [PathBuf],
    /// The author mounts, screened (and their sources canonical).
    pub screened: &'a [ScreenedMount],
    /// The canonical host workspace.
    pub workspace: &'a Path,
    /// Which of the secret files and the CA were written to the run dir (their host paths).
    pub secret_sources: &'a [(PathBuf, String)],
}

/// The uid:gid inside and on the host (issue 18): inside, the spec's numeric user (else root);
/// on the host, the engine's own ids — except for an untrusted run of an engine running as root,
/// whose copy the engine gave to the spec's user, which is then the host id too (so that run
/// never holds the host's root).
///
/// # Errors
///
/// [`Error::InvalidSpec`] for a user that is not `uid` or `uid:gid`.
pub(crate) fn ids(spec: &Spec, trust: Trust, engine: (u32, u32)) -> Result<Ids, Error> {
    let (uid, gid) = match spec
        .user
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        None => (0, 0),
        Some(user) => parse_user(user).ok_or_else(|| Error::InvalidSpec {
            field: "user".to_owned(),
            reason: format!(
                "the namespace driver takes a numeric uid or uid:gid, not \"{}\"",
                user.escape_default()
            ),
        })?,
    };
    let (host_uid, host_gid) = if trust == Trust::Untrusted && engine.0 == 0 {
        (uid, gid)
    } else {
        engine
    };
    Ok(Ids {
        inside_uid: uid,
        inside_gid: gid,
        host_uid,
        host_gid,
    })
}

/// Whether an exec may run as `user` (`ExecOpts::user`): only the one uid:gid the namespace
/// maps, written `uid` or `uid:gid`; any other user does not exist in the sandbox, and an
/// exec naming one is refused rather than run as someone else. Pure.
///
/// # Errors
///
/// [`Error::InvalidSpec`] naming the user and the one the sandbox has.
pub(crate) fn check_exec_user(ids: &Ids, user: &str) -> Result<(), Error> {
    let wanted = parse_user(user.trim());
    if wanted == Some((ids.inside_uid, ids.inside_gid))
        || (!user.contains(':') && wanted.map(|(uid, _)| uid) == Some(ids.inside_uid))
    {
        return Ok(());
    }
    Err(Error::InvalidSpec {
        field: "exec user".to_owned(),
        reason: format!(
            "the namespace sandbox maps one user, {}:{}; an exec as \"{}\" cannot run here",
            ids.inside_uid,
            ids.inside_gid,
            user.escape_default()
        ),
    })
}

fn parse_user(user: &str) -> Option<(u32, u32)> {
    match user.split_once(':') {
        Some((u, g)) => Some((u.parse().ok()?, g.parse().ok()?)),
        None => {
            let uid = user.parse().ok()?;
            Some((uid, uid))
        }
    }
}

/// Builds the plan. Pure.
///
/// # Errors
///
/// [`Error::InvalidSpec`] for what the driver cannot honour: an image other than auto's default,
/// a build, a volume mount, a non-numeric user, a relative or unclean target.
pub(crate) fn plan(spec: &Spec, info: &RunInfo, inputs: &PlanInputs<'_>) -> Result<Plan, Error> {
    if !spec.runs_without_image() {
        return Err(invalid(
            "image",
            "the namespace driver runs the host's root, not an image; use docker or podman",
        ));
    }
    let ids = ids(spec, info.trust, inputs.engine_ids)?;
    let workdir = spec
        .workspace_folder
        .clone()
        .unwrap_or_else(|| inputs.workspace.to_string_lossy().into_owned());
    check_target("workspace_folder", &workdir)?;
    let mut env: BTreeMap<String, String> = spec.env.clone();
    for secret in &spec.secret_files {
        if let Some(name) = &secret.env {
            env.insert(name.clone(), secret.mount_path.clone());
        }
    }
    let home = env
        .get("HOME")
        .filter(|h| h.starts_with('/'))
        .cloned()
        .unwrap_or_else(|| {
            if ids.inside_uid == 0 {
                "/root".to_owned()
            } else {
                "/tmp".to_owned()
            }
        });
    check_target("HOME", &home)?;
    env.insert("HOME".to_owned(), home.clone());
    env.entry("PATH".to_owned())
        .or_insert_with(|| DEFAULT_PATH.to_owned());
    iterion_sandbox::plant_proxy_env(&mut env, info);

    let mut binds = vec![Bind {
        source: inputs.workspace.to_owned(),
        target: workdir.clone(),
        read_only: false,
        object: Object::Dir,
        purpose: "workspace".to_owned(),
    }];
    for mount in &spec.engine_mounts {
        if mount.kind == EngineMountKind::Volume {
            return Err(invalid(
                "engine_mounts",
                &format!(
                    "{} ({}) is a volume; the namespace driver has no volumes",
                    mount.target, mount.purpose
                ),
            ));
        }
        check_target("engine_mounts", &mount.target)?;
        binds.push(Bind {
            source: PathBuf::from(&mount.source),
            target: mount.target.clone(),
            read_only: mount.read_only,
            object: Object::Dir,
            purpose: mount.purpose.clone(),
        });
    }
    // The `net/` dir holds the proxy's socket and the ask-user listener's (seed step 18).
    if info.listener_planned || info.proxy.as_ref().is_some_and(|p| p.host_socket.is_some()) {
        binds.push(Bind {
            source: info.run_dir.join("net"),
            target: NET_DIR_TARGET.to_owned(),
            read_only: true,
            object: Object::Dir,
            purpose: "egress proxy socket".to_owned(),
        });
    }
    for (source, target) in inputs.secret_sources {
        binds.push(Bind {
            source: source.clone(),
            target: target.clone(),
            read_only: true,
            object: Object::File,
            purpose: "secret file".to_owned(),
        });
    }
    let mut tmpfs = vec![Tmpfs {
        target: "/tmp".to_owned(),
        options: "mode=1777".to_owned(),
    }];
    if !Path::new(&home).starts_with("/tmp") && !Path::new(&home).starts_with(&workdir) {
        tmpfs.push(Tmpfs {
            target: home.clone(),
            options: format!("mode=0700,uid={},gid={}", ids.inside_uid, ids.inside_gid),
        });
    }
    for mount in inputs.screened {
        binds_or_tmpfs(mount, &mut binds, &mut tmpfs)?;
    }
    for entry in &spec.tmpfs {
        let (target, options) = entry.split_once(':').unwrap_or((entry.as_str(), ""));
        check_target("tmpfs", target)?;
        tmpfs.push(Tmpfs {
            target: target.to_owned(),
            options: tmpfs_options(options),
        });
    }

    let (masks_before, masks_after) = split_masks(inputs.masked, &binds);
    let mut writable: Vec<String> = vec!["/dev".to_owned()];
    writable.extend(tmpfs.iter().map(|t| t.target.clone()));
    writable.extend(
        binds
            .iter()
            .filter(|b| !b.read_only)
            .map(|b| b.target.clone()),
    );
    let short: String = info
        .run_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect();
    Ok(Plan {
        ids,
        hostname: format!("iterion-{short}"),
        workdir,
        env: env.into_iter().collect(),
        masks_before,
        masks_after,
        tmpfs,
        binds,
        writable,
        unprivileged_ports: info.transparent_egress,
    })
}

/// An author mount: a bind of its screened canonical source, or a tmpfs; a named volume is
/// refused (there is no engine to own one).
fn binds_or_tmpfs(
    mount: &ScreenedMount,
    binds: &mut Vec<Bind>,
    tmpfs: &mut Vec<Tmpfs>,
) -> Result<(), Error> {
    let spec: &MountSpec = &mount.spec;
    check_target("mounts", &spec.target)?;
    match (&mount.host_source, spec.kind) {
        (Some(source), _) => {
            binds.push(Bind {
                source: source.clone(),
                target: spec.target.clone(),
                read_only: spec.read_only,
                object: if source.is_dir() {
                    Object::Dir
                } else {
                    Object::File
                },
                purpose: "author mount".to_owned(),
            });
            Ok(())
        }
        (None, MountKind::Tmpfs) => {
            tmpfs.push(Tmpfs {
                target: spec.target.clone(),
                options: "mode=0755".to_owned(),
            });
            Ok(())
        }
        (None, _) => Err(invalid(
            "mounts",
            &format!(
                "{}: the namespace driver binds host paths and mounts tmpfs; it has no volumes",
                spec.target
            ),
        )),
    }
}

/// A spec tmpfs's options, kept to the ones that cannot widen anything (size and mode).
fn tmpfs_options(options: &str) -> String {
    let kept: Vec<&str> = options
        .split(',')
        .map(str::trim)
        .filter(|o| o.starts_with("size=") || o.starts_with("mode="))
        .collect();
    if kept.is_empty() {
        "mode=1777".to_owned()
    } else {
        kept.join(",")
    }
}

/// The masks applied before the binds (paths of the read-only root that are not under a
/// replaced top-level dir) and after them (the same paths seen through a bind whose source
/// holds them: the store inside a bound workspace stays hidden).
fn split_masks(masked: &[PathBuf], binds: &[Bind]) -> (Vec<PathBuf>, Vec<String>) {
    let mut before = Vec::new();
    let mut after = Vec::new();
    for mask in masked {
        let top = mask
            .components()
            .nth(1)
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        let replaced = top
            .as_deref()
            .is_none_or(|top| REPLACED_TOP_LEVEL.contains(&top));
        if !replaced {
            before.push(mask.clone());
        }
        for bind in binds {
            if let Ok(rest) = mask.strip_prefix(&bind.source) {
                let inside = Path::new(&bind.target).join(rest);
                after.push(inside.to_string_lossy().into_owned());
            }
        }
    }
    before.sort();
    before.dedup();
    after.sort();
    after.dedup();
    (before, after)
}

fn check_target(field: &str, target: &str) -> Result<(), Error> {
    if !iterion_sandbox::is_clean_absolute(target) || target == "/" || target.contains('\0') {
        return Err(invalid(
            field,
            &format!(
                "{} is not a clean absolute path other than /",
                target.escape_default()
            ),
        ));
    }
    Ok(())
}

fn invalid(field: &str, reason: &str) -> Error {
    Error::InvalidSpec {
        field: field.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

//! The pure half of the docker/podman driver (STYLE.md §5.3): what to ask the engine for, as
//! values. [`create_plan`] turns a prepared spec and the run into the container's create body
//! (SANDBOX.md §4.5), [`exec_plan`] an exec into its `create_exec` request (§4.7), and
//! [`build_request`] a `build:` spec into the classic builder's options (§4.4). Nothing here
//! touches the engine or the filesystem: the mounts arrive screened, the paths canonical.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountBindOptions,
    MountBindOptionsPropagationEnum, MountTmpfsOptions, MountType, MountVolumeOptions,
    ResourcesUlimits,
};
use bytes::Bytes;
use iterion_sandbox::{
    BindPropagation, Build, EngineMountKind, Error, LABEL_IMAGE, LABEL_MANAGED, LABEL_PURPOSE,
    LABEL_STORE, MountKind, Result, RunInfo, ScreenedMount, Spec, Trust, container_name,
    managed_labels,
};

use crate::api::{BuildRequest, EngineKind, ExecRequest};
use crate::secrets::SecretPlan;

/// PID 1 of every sandbox: `sleep infinity`, with the image's ENTRYPOINT overridden.
pub(crate) const SANDBOX_ENTRYPOINT: &str = "sleep";
/// The argument of [`SANDBOX_ENTRYPOINT`].
pub(crate) const SANDBOX_CMD: &str = "infinity";
/// The host alias a per-run listener is reached through when the container keeps a network.
pub(crate) const HOST_ALIAS: &str = "host.docker.internal:host-gateway";
/// Where the per-run `net/` dir (the proxy and listener sockets) is bound, read-only.
pub(crate) const NET_DIR_TARGET: &str = "/run/iterion/net";
/// Where the proxy's ephemeral CA is bound, read-only, when TLS inspection is on (§6.11).
pub(crate) const CA_TARGET: &str = iterion_sandbox::PROXY_CA_TARGET;
/// The file the CA is written to, inside the per-run dir.
pub(crate) const CA_RUN_DIR_FILE: &str = "ca/egress-ca.pem";
/// The soft and hard `nofile`/`nproc` limits of a podman sandbox (SANDBOX.md §4.5): rootful podman
/// asks for the host's maximum, and without `CAP_SYS_RESOURCE` the runtime cannot set it.
pub(crate) const PODMAN_ULIMIT: i64 = 16384;
/// A `sh -c`/`bash -c` script longer than this goes through stdin (`sh -s`), not argv (§4.7).
pub(crate) const SCRIPT_STDIN_THRESHOLD: usize = 100_000;
/// The label a shared `/nix` volume carries on top of [`LABEL_MANAGED`].
pub(crate) const NIX_VOLUME_PURPOSE: &str = "nix-store";

/// Everything [`create_plan`] reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CreateInputs<'a> {
    /// Docker or podman (podman gets explicit ulimits).
    pub engine: EngineKind,
    /// The image to run (after any fallback or build).
    pub image: &'a str,
    /// The prepared spec.
    pub spec: &'a Spec,
    /// The run.
    pub info: &'a RunInfo,
    /// The spec's author mounts, screened, in order ([`validate_spec_mounts`](iterion_sandbox::validate_spec_mounts)).
    pub author_mounts: &'a [ScreenedMount],
    /// The shared `/nix` volume, when one applies ([`nix_volume_name`](iterion_sandbox::nix_volume_name)).
    pub nix_volume: Option<&'a str>,
    /// Labels added to the run's own (an embedder's or a test's); they never override
    /// `iterion.io/*`.
    pub extra_labels: &'a BTreeMap<String, String>,
    /// The file secrets' binds and env ([`secret_plan`](crate::secrets::secret_plan)).
    pub secrets: &'a SecretPlan,
}

/// The container to create: its name and the create body (SANDBOX.md §4.5).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CreatePlan {
    /// `iterion-<run id>`.
    pub name: String,
    /// The body of `POST /containers/create`.
    pub body: ContainerCreateBody,
}

/// The workspace path inside the sandbox: `spec.workspace_folder`, else the host's absolute
/// workspace path (same-path binding).
///
/// # Errors
///
/// [`Error::InvalidSpec`] when the host path is not UTF-8 (the Engine API speaks JSON strings).
pub(crate) fn workspace_folder(spec: &Spec, info: &RunInfo) -> Result<String> {
    match spec.workspace_folder.as_deref() {
        Some(folder) => Ok(folder.to_owned()),
        None => utf8("workspace_path", &info.workspace_path),
    }
}

fn utf8(field: &str, path: &Path) -> Result<String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::InvalidSpec {
            field: field.to_owned(),
            reason: format!("{} is not valid UTF-8", path.display()),
        })
}

/// The capabilities an untrusted container drops: all of them, so its minimal set is empty
/// (docs/security.md).
pub(crate) const UNTRUSTED_CAP_DROP: &[&str] = &["ALL"];
/// The security options of an untrusted container.
pub(crate) const UNTRUSTED_SECURITY_OPT: &[&str] = &["no-new-privileges"];
/// The most processes an untrusted container may hold at once
/// ([`iterion_sandbox::UNTRUSTED_PIDS_LIMIT`]).
#[cfg(test)]
pub(crate) const UNTRUSTED_PIDS_LIMIT: i64 = iterion_sandbox::UNTRUSTED_PIDS_LIMIT as i64;

/// The container's pids limit: the operator's ([`Spec::limits`]), and for an untrusted run at
/// most [`iterion_sandbox::UNTRUSTED_PIDS_LIMIT`] ([`iterion_sandbox::Limits::for_run`]).
fn pids_limit(spec: &Spec, untrusted: bool) -> Option<i64> {
    spec.limits
        .for_run(untrusted)
        .pids
        .map(|p| i64::try_from(p).unwrap_or(i64::MAX))
}

/// The create body of a run's one long-lived container (SANDBOX.md §4.5). Pure.
///
/// In order: the workspace bind (first mount), the author mounts (their canonical sources), the
/// engine mounts, the file secrets (read-only), the `net/` dir when a proxy is active, the CA when inspection is on, the
/// shared `/nix` volume. `network_mode = "none"` exactly when a proxy is active; the host alias
/// only when there is no proxy and a per-run listener is planned. PID 1 is `sleep infinity`
/// whatever the image's ENTRYPOINT. Never privileged, no added capabilities, no devices, no host
/// namespaces.
///
/// # Errors
///
/// [`Error::InvalidSpec`] when a host path is not UTF-8.
pub(crate) fn create_plan(inputs: &CreateInputs<'_>) -> Result<CreatePlan> {
    let CreateInputs {
        engine,
        image,
        spec,
        info,
        author_mounts,
        nix_volume,
        extra_labels,
        secrets,
    } = *inputs;
    let workspace = workspace_folder(spec, info)?;
    let proxied = info.proxy.is_some();
    let untrusted = info.trust == Trust::Untrusted;

    let mut mounts = vec![bind(
        utf8("workspace_path", &info.workspace_path)?,
        workspace.clone(),
        false,
    )];
    for screened in author_mounts {
        mounts.push(author_mount(screened)?);
    }
    for engine_mount in &spec.engine_mounts {
        mounts.push(match engine_mount.kind {
            EngineMountKind::Bind => bind(
                engine_mount.source.clone(),
                engine_mount.target.clone(),
                engine_mount.read_only,
            ),
            EngineMountKind::Volume => Mount {
                typ: Some(MountType::VOLUME),
                source: Some(engine_mount.source.clone()),
                target: Some(engine_mount.target.clone()),
                read_only: Some(engine_mount.read_only),
                ..Mount::default()
            },
        });
    }
    for (source, target) in secrets.binds() {
        mounts.push(bind(utf8("run_dir", &source)?, target, true));
    }
    // The `net/` dir holds the proxy's socket and the ask-user listener's (seed step 18).
    if proxied || info.listener_planned {
        mounts.push(bind(
            utf8("run_dir", &info.run_dir.join("net"))?,
            NET_DIR_TARGET.to_owned(),
            true,
        ));
    }
    if info.proxy_ca_pem.is_some() {
        mounts.push(bind(
            utf8("run_dir", &info.run_dir.join(CA_RUN_DIR_FILE))?,
            CA_TARGET.to_owned(),
            true,
        ));
    }
    // Issue 22: the bridge's DNS stub is the sandbox's resolver.
    if info.transparent_egress {
        mounts.push(bind(
            utf8(
                "run_dir",
                &info.run_dir.join(iterion_sandbox::RESOLV_CONF_RUN_DIR_FILE),
            )?,
            iterion_sandbox::RESOLV_CONF_TARGET.to_owned(),
            true,
        ));
    }
    if let Some(volume) = nix_volume {
        mounts.push(Mount {
            typ: Some(MountType::VOLUME),
            source: Some(volume.to_owned()),
            target: Some("/nix".to_owned()),
            read_only: Some(false),
            ..Mount::default()
        });
    }

    let tmpfs: HashMap<String, String> = spec
        .tmpfs
        .iter()
        .map(|entry| match entry.split_once(':') {
            Some((target, options)) => (target.to_owned(), options.to_owned()),
            None => (entry.clone(), String::new()),
        })
        .collect();

    let mut labels: BTreeMap<String, String> = extra_labels.clone();
    labels.extend(managed_labels(info));

    let host_config = HostConfig {
        auto_remove: Some(true),
        mounts: Some(mounts),
        tmpfs: (!tmpfs.is_empty()).then_some(tmpfs),
        network_mode: proxied.then(|| "none".to_owned()),
        // Issue 22: the bridge binds 53, 80 and 443 with every capability dropped; the sysctl
        // is the container's own network namespace's (podman's default is 1024).
        sysctls: info.transparent_egress.then(|| {
            HashMap::from([(
                iterion_sandbox::UNPRIVILEGED_PORT_SYSCTL.to_owned(),
                "0".to_owned(),
            )])
        }),
        extra_hosts: (!proxied && info.listener_planned).then(|| vec![HOST_ALIAS.to_owned()]),
        ulimits: (engine == EngineKind::Podman).then(|| {
            ["nofile", "nproc"]
                .into_iter()
                .map(|name| ResourcesUlimits {
                    name: Some(name.to_owned()),
                    soft: Some(PODMAN_ULIMIT),
                    hard: Some(PODMAN_ULIMIT),
                })
                .collect()
        }),
        privileged: Some(false),
        // Issue 15 item 4: an untrusted sandbox keeps no capability and cannot gain privilege
        // (a setuid binary it plants or finds does not elevate); its user is non-root (the
        // engine's plan sets it).
        cap_drop: untrusted.then(|| UNTRUSTED_CAP_DROP.iter().map(|c| (*c).to_owned()).collect()),
        pids_limit: pids_limit(spec, untrusted),
        // Issue 18: the operator's limits; swap equal to memory means no swap beyond it.
        memory: spec.limits.memory_bytes.and_then(|m| i64::try_from(m).ok()),
        memory_swap: spec.limits.memory_bytes.and_then(|m| i64::try_from(m).ok()),
        nano_cpus: spec.limits.nano_cpus.and_then(|c| i64::try_from(c).ok()),
        security_opt: untrusted.then(|| {
            UNTRUSTED_SECURITY_OPT
                .iter()
                .map(|c| (*c).to_owned())
                .collect()
        }),
        ..HostConfig::default()
    };

    let mut body = ContainerCreateBody {
        image: Some(image.to_owned()),
        entrypoint: Some(vec![SANDBOX_ENTRYPOINT.to_owned()]),
        cmd: Some(vec![SANDBOX_CMD.to_owned()]),
        working_dir: Some(workspace),
        user: spec.user.clone().filter(|user| !user.is_empty()),
        env: Some(container_env(spec, info, secrets)),
        labels: Some(labels.into_iter().collect()),
        tty: Some(false),
        open_stdin: Some(false),
        host_config: Some(host_config),
        ..ContainerCreateBody::default()
    };
    if let Some(agent) = spec.exec_agent.as_deref().filter(|bin| !bin.is_empty()) {
        agent_command(&mut body, agent);
    }
    Ok(CreatePlan {
        name: container_name(&info.run_id),
        body,
    })
}

/// PID 1 becomes the exec agent (issue 18): `<agent> __exec-agent`, its stdin open for the
/// driver's attach and closed when that attach ends (so the agent ends what it started), its
/// stdout (the agent's frames) kept out of the engine's log.
fn agent_command(body: &mut ContainerCreateBody, agent: &str) {
    body.entrypoint = Some(vec![agent.to_owned()]);
    body.cmd = Some(vec![
        iterion_sandbox::exec_agent::EXEC_AGENT_SUBCOMMAND.to_owned(),
    ]);
    body.open_stdin = Some(true);
    body.stdin_once = Some(true);
    body.attach_stdin = Some(true);
    body.attach_stdout = Some(true);
    body.attach_stderr = Some(true);
    if let Some(host) = body.host_config.as_mut() {
        host.log_config = Some(HostConfigLogConfig {
            typ: Some("none".to_owned()),
            config: None,
        });
    }
}

/// Whether `body` runs the exec agent as PID 1 ([`agent_command`]).
pub(crate) fn runs_agent(body: &ContainerCreateBody) -> bool {
    body.open_stdin == Some(true)
}

/// `body` with PID 1 back to [`SANDBOX_ENTRYPOINT`] `infinity`: the fallback when the agent
/// could not start as the command.
pub(crate) fn idle_command(body: &mut ContainerCreateBody) {
    body.entrypoint = Some(vec![SANDBOX_ENTRYPOINT.to_owned()]);
    body.cmd = Some(vec![SANDBOX_CMD.to_owned()]);
    body.open_stdin = Some(false);
    body.stdin_once = None;
    body.attach_stdin = None;
    body.attach_stdout = None;
    body.attach_stderr = None;
    if let Some(host) = body.host_config.as_mut() {
        host.log_config = None;
    }
}

/// The container's env, sorted by key: the spec's, then each file secret's `env:` path, then the
/// driver's proxy and CA keys, each tier winning over the ones before (SANDBOX.md §6.11, §8.10).
/// Under a proxy `ALL_PROXY`/`all_proxy` are removed.
fn container_env(spec: &Spec, info: &RunInfo, secrets: &SecretPlan) -> Vec<String> {
    let mut env: BTreeMap<String, String> = spec.env.clone();
    env.extend(secrets.env.iter().cloned());
    iterion_sandbox::plant_proxy_env(&mut env, info);
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

fn bind(source: String, target: String, read_only: bool) -> Mount {
    Mount {
        typ: Some(MountType::BIND),
        source: Some(source),
        target: Some(target),
        read_only: Some(read_only),
        ..Mount::default()
    }
}

/// An author mount as the engine takes it: built from the parsed spec and, for a bind, from the
/// screened canonical source — never from the string as written.
fn author_mount(screened: &ScreenedMount) -> Result<Mount> {
    let spec = &screened.spec;
    let mut mount = Mount {
        target: Some(spec.target.clone()),
        read_only: Some(spec.read_only),
        consistency: spec.consistency.clone(),
        ..Mount::default()
    };
    match spec.kind {
        MountKind::Bind => {
            let Some(source) = screened.host_source.as_deref() else {
                // A bind always has a screened source; refuse rather than bind something else.
                return Err(Error::InvalidSpec {
                    field: "mounts".to_owned(),
                    reason: format!("bind mount to {} has no screened source", spec.target),
                });
            };
            mount.typ = Some(MountType::BIND);
            mount.source = Some(utf8("mounts", source)?);
            mount.bind_options = spec.bind_propagation.map(|propagation| MountBindOptions {
                propagation: Some(match propagation {
                    BindPropagation::Private => MountBindOptionsPropagationEnum::PRIVATE,
                    BindPropagation::Rprivate => MountBindOptionsPropagationEnum::RPRIVATE,
                }),
                ..MountBindOptions::default()
            });
        }
        MountKind::Volume => {
            mount.typ = Some(MountType::VOLUME);
            mount.source = spec.source.clone();
            mount.volume_options = spec.volume_nocopy.then(|| MountVolumeOptions {
                no_copy: Some(true),
                ..MountVolumeOptions::default()
            });
        }
        MountKind::Tmpfs => {
            mount.typ = Some(MountType::TMPFS);
            let size = spec
                .tmpfs_size_bytes
                .and_then(|size| i64::try_from(size).ok());
            let mode = spec.tmpfs_mode.map(i64::from);
            mount.tmpfs_options = (size.is_some() || mode.is_some()).then(|| MountTmpfsOptions {
                size_bytes: size,
                mode,
                ..MountTmpfsOptions::default()
            });
        }
    }
    Ok(mount)
}

/// The labels of the shared `/nix` volume: managed, its purpose, the store, and the image it was
/// made for ([`LABEL_IMAGE`]), so the reaper can tell when it is orphaned (issue 15 item 13).
pub(crate) fn nix_volume_labels(store_id: &str, volume: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (LABEL_MANAGED.to_owned(), "true".to_owned()),
        (LABEL_PURPOSE.to_owned(), NIX_VOLUME_PURPOSE.to_owned()),
        (LABEL_STORE.to_owned(), store_id.to_owned()),
    ]);
    if let Some(image) = volume.strip_prefix("iterion-nix-") {
        labels.insert(LABEL_IMAGE.to_owned(), image.to_owned());
    }
    labels
}

/// Everything [`exec_plan`] reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExecInputs<'a> {
    /// argv, non-empty.
    pub argv: &'a [String],
    /// The exec's extra env, in order.
    pub env: &'a [(String, String)],
    /// The exec's workdir, else `workspace_folder`.
    pub workdir: Option<&'a str>,
    /// The exec's user, else `spec_user`.
    pub user: Option<&'a str>,
    /// The sandbox's workspace folder.
    pub workspace_folder: &'a str,
    /// The spec's user.
    pub spec_user: Option<&'a str>,
    /// Whether the caller supplies stdin.
    pub has_stdin: bool,
    /// Whether stdin stays attached after the input ends.
    pub keep_stdin_open: bool,
}

/// An exec, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExecPlan {
    /// The `create_exec` request.
    pub request: ExecRequest,
    /// A script to write to stdin instead of passing it in argv (§4.7).
    pub stdin_script: Option<Bytes>,
    /// Keys of env pairs that were skipped, each to be warned about.
    pub skipped_env: Vec<String>,
}

/// Plans one exec (SANDBOX.md §4.7). Pure.
///
/// - env: the valid pairs, in order; a key that is empty or holds `=`, NUL, `\n` or `\r`, or a
///   value holding NUL, `\n` or `\r`, is skipped (and named in `skipped_env`);
/// - workdir: the exec's, else the workspace folder; user: the exec's, else the spec's;
/// - a `[sh|bash, -c, script]` with no caller stdin and a script over
///   [`SCRIPT_STDIN_THRESHOLD`] bytes becomes `[shell, -s]` with the script on stdin, which
///   avoids `E2BIG`;
/// - stdin is attached when supplied, kept open, or carrying the script.
pub(crate) fn exec_plan(inputs: &ExecInputs<'_>) -> ExecPlan {
    let mut skipped_env = Vec::new();
    let mut env = Vec::with_capacity(inputs.env.len());
    for (key, value) in inputs.env {
        let bad_key = key.is_empty() || key.contains(['=', '\0', '\n', '\r']);
        let bad_value = value.contains(['\0', '\n', '\r']);
        if bad_key || bad_value {
            skipped_env.push(key.clone());
        } else {
            env.push(format!("{key}={value}"));
        }
    }
    let mut cmd = inputs.argv.to_vec();
    let mut stdin_script = None;
    if let [shell, flag, script] = inputs.argv
        && matches!(shell.as_str(), "sh" | "bash")
        && flag == "-c"
        && !inputs.has_stdin
        && script.len() > SCRIPT_STDIN_THRESHOLD
    {
        cmd = vec![shell.clone(), "-s".to_owned()];
        stdin_script = Some(Bytes::from(script.clone().into_bytes()));
    }
    let non_empty = |value: Option<&str>| value.filter(|v| !v.is_empty()).map(str::to_owned);
    ExecPlan {
        request: ExecRequest {
            cmd,
            env,
            working_dir: Some(
                non_empty(inputs.workdir).unwrap_or_else(|| inputs.workspace_folder.to_owned()),
            ),
            user: non_empty(inputs.user).or_else(|| non_empty(inputs.spec_user)),
            attach_stdin: inputs.has_stdin || inputs.keep_stdin_open || stdin_script.is_some(),
        },
        stdin_script,
        skipped_env,
    }
}

/// A `build:` spec's paths relative to the workspace: the Dockerfile and the context (default:
/// the Dockerfile's directory).
pub(crate) fn build_paths(build: &Build) -> (String, String) {
    let dockerfile = build.dockerfile.clone();
    let context = build.context.clone().unwrap_or_else(|| {
        Path::new(&dockerfile)
            .parent()
            .and_then(Path::to_str)
            .filter(|parent| !parent.is_empty())
            .unwrap_or(".")
            .to_owned()
    });
    (dockerfile, context)
}

/// The classic builder's options for a `build:` spec (SANDBOX.md §4.4). Pure: `dockerfile_in_context`
/// is the canonical Dockerfile relative to the canonical context, already checked to lie inside
/// it. Build args go sorted by key; the image is labelled like the run's container; an untrusted
/// run builds with `networkmode=none`.
pub(crate) fn build_request(
    build: &Build,
    dockerfile_in_context: &str,
    info: &RunInfo,
    tag: &str,
    extra_labels: &BTreeMap<String, String>,
) -> BuildRequest {
    let mut labels = extra_labels.clone();
    labels.extend(managed_labels(info));
    BuildRequest {
        dockerfile: dockerfile_in_context.to_owned(),
        tag: tag.to_owned(),
        build_args: build.args.clone(),
        labels,
        network_mode: (info.trust == Trust::Untrusted).then(|| "none".to_owned()),
    }
}

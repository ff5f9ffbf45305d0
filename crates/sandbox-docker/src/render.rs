//! Each Engine API operation as the equivalent command line, for the run log (SANDBOX.md §4.9,
//! our decision 7): we call the API, but an operator reads `docker run …`, which they can paste.
//!
//! Pure: rendered from the very values sent to the engine (the create body, the exec request),
//! so the log cannot drift from what was asked. Arguments are shell-quoted; control characters
//! are written as `$'…'` escapes, so one operation is always one line. Credentials in URLs are
//! rendered `***` ([`redact_proxy_url`]); known secret values are the run log's to redact.

use std::fmt::Write as _;

use bollard::models::{ContainerCreateBody, Mount, MountBindOptionsPropagationEnum, MountType};
use iterion_sandbox::redact_proxy_url;

use crate::api::{BuildRequest, EngineKind, ExecRequest};
use crate::plan::CreatePlan;

/// Quotes `arg` for a POSIX shell: bare when it is only safe characters, `'…'` otherwise, and
/// `$'…'` when it holds a control character (so the line stays one line).
pub(crate) fn shell_quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:=,@%+".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        return arg.to_owned();
    }
    if arg.chars().any(char::is_control) {
        let mut out = String::from("$'");
        for c in arg.chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        return out;
    }
    format!("'{}'", arg.replace('\'', "'\\''"))
}

fn push(line: &mut String, arg: &str) {
    line.push(' ');
    line.push_str(&shell_quote(arg));
}

fn push_flag(line: &mut String, flag: &str, value: &str) {
    line.push(' ');
    line.push_str(flag);
    push(line, value);
}

/// An env pair with any URL credentials rendered `***`.
fn env_pair(pair: &str) -> String {
    match pair.split_once('=') {
        Some((key, value)) => format!("{key}={}", redact_proxy_url(value)),
        None => pair.to_owned(),
    }
}

/// `docker pull <ref>`.
pub(crate) fn render_pull(engine: EngineKind, image: &str) -> String {
    let mut line = format!("{engine} pull");
    push(&mut line, image);
    line
}

/// `docker build -f <df> -t <tag> [--network none] [--label K=V]… [--build-arg K=V]… <ctx>`.
pub(crate) fn render_build(engine: EngineKind, request: &BuildRequest, context: &str) -> String {
    let mut line = format!("{engine} build");
    push_flag(&mut line, "-f", &request.dockerfile);
    push_flag(&mut line, "-t", &request.tag);
    if let Some(network) = &request.network_mode {
        push_flag(&mut line, "--network", network);
    }
    for (key, value) in &request.labels {
        push_flag(&mut line, "--label", &format!("{key}={value}"));
    }
    for (key, value) in &request.build_args {
        push_flag(&mut line, "--build-arg", &format!("{key}={value}"));
    }
    push(&mut line, context);
    line
}

fn render_mount(mount: &Mount) -> String {
    let mut parts: Vec<String> = Vec::new();
    let kind = match mount.typ {
        Some(MountType::BIND) => "bind",
        Some(MountType::VOLUME) => "volume",
        Some(MountType::TMPFS) => "tmpfs",
        Some(MountType::IMAGE) => "image",
        Some(MountType::NPIPE) => "npipe",
        Some(MountType::CLUSTER) => "cluster",
        None => "volume",
    };
    parts.push(format!("type={kind}"));
    if let Some(source) = &mount.source {
        parts.push(format!("source={source}"));
    }
    if let Some(target) = &mount.target {
        parts.push(format!("target={target}"));
    }
    if mount.read_only == Some(true) {
        parts.push("readonly".to_owned());
    }
    if let Some(propagation) = mount.bind_options.as_ref().and_then(|b| b.propagation) {
        let value = match propagation {
            MountBindOptionsPropagationEnum::PRIVATE => "private",
            MountBindOptionsPropagationEnum::RPRIVATE => "rprivate",
            MountBindOptionsPropagationEnum::SHARED => "shared",
            MountBindOptionsPropagationEnum::RSHARED => "rshared",
            MountBindOptionsPropagationEnum::SLAVE => "slave",
            MountBindOptionsPropagationEnum::RSLAVE => "rslave",
            MountBindOptionsPropagationEnum::EMPTY => "",
        };
        if !value.is_empty() {
            parts.push(format!("bind-propagation={value}"));
        }
    }
    if let Some(consistency) = &mount.consistency {
        parts.push(format!("consistency={consistency}"));
    }
    if mount.volume_options.as_ref().and_then(|v| v.no_copy) == Some(true) {
        parts.push("volume-nocopy".to_owned());
    }
    if let Some(tmpfs) = &mount.tmpfs_options {
        if let Some(size) = tmpfs.size_bytes {
            parts.push(format!("tmpfs-size={size}"));
        }
        if let Some(mode) = tmpfs.mode {
            parts.push(format!("tmpfs-mode={mode:o}"));
        }
    }
    parts.join(",")
}

/// `docker run --detach --rm --name … <image> sleep infinity`, from the create body itself.
pub(crate) fn render_run(engine: EngineKind, plan: &CreatePlan) -> String {
    let ContainerCreateBody {
        image,
        entrypoint,
        cmd,
        working_dir,
        user,
        env,
        labels,
        host_config,
        open_stdin,
        ..
    } = &plan.body;
    let host = host_config.clone().unwrap_or_default();
    let mut line = format!("{engine} run --detach");
    if *open_stdin == Some(true) {
        line.push_str(" --interactive");
    }
    if host.auto_remove == Some(true) {
        line.push_str(" --rm");
    }
    if let Some(driver) = host.log_config.as_ref().and_then(|c| c.typ.as_ref()) {
        push_flag(&mut line, "--log-driver", driver);
    }
    push_flag(&mut line, "--name", &plan.name);
    let mut labels: Vec<(&String, &String)> = labels.iter().flatten().collect();
    labels.sort();
    for (key, value) in labels {
        push_flag(&mut line, "--label", &format!("{key}={value}"));
    }
    if let Some(dir) = working_dir {
        push_flag(&mut line, "--workdir", dir);
    }
    if let Some(user) = user {
        push_flag(&mut line, "--user", user);
    }
    if let Some(network) = &host.network_mode {
        push_flag(&mut line, "--network", network);
    }
    for alias in host.extra_hosts.iter().flatten() {
        push_flag(&mut line, "--add-host", alias);
    }
    for mount in host.mounts.iter().flatten() {
        push_flag(&mut line, "--mount", &render_mount(mount));
    }
    let mut tmpfs: Vec<(&String, &String)> = host.tmpfs.iter().flatten().collect();
    tmpfs.sort();
    for (target, options) in tmpfs {
        let entry = if options.is_empty() {
            target.clone()
        } else {
            format!("{target}:{options}")
        };
        push_flag(&mut line, "--tmpfs", &entry);
    }
    let mut sysctls: Vec<(&String, &String)> = host.sysctls.iter().flatten().collect();
    sysctls.sort();
    for (key, value) in sysctls {
        push_flag(&mut line, "--sysctl", &format!("{key}={value}"));
    }
    for limit in host.ulimits.iter().flatten() {
        let (Some(name), Some(soft), Some(hard)) = (&limit.name, limit.soft, limit.hard) else {
            continue;
        };
        push_flag(&mut line, "--ulimit", &format!("{name}={soft}:{hard}"));
    }
    for pair in env.iter().flatten() {
        push_flag(&mut line, "--env", &env_pair(pair));
    }
    if let Some(memory) = host.memory {
        push_flag(&mut line, "--memory", &format!("{memory}b"));
    }
    if let Some(swap) = host.memory_swap {
        push_flag(&mut line, "--memory-swap", &format!("{swap}b"));
    }
    if let Some(nano) = host.nano_cpus {
        push_flag(
            &mut line,
            "--cpus",
            &format!("{}.{:09}", nano / 1_000_000_000, nano % 1_000_000_000),
        );
    }
    if let Some(pids) = host.pids_limit {
        push_flag(&mut line, "--pids-limit", &pids.to_string());
    }
    let mut entrypoint = entrypoint.iter().flatten();
    if let Some(first) = entrypoint.next() {
        push_flag(&mut line, "--entrypoint", first);
    }
    if let Some(image) = image {
        push(&mut line, image);
    }
    for arg in entrypoint.chain(cmd.iter().flatten()) {
        push(&mut line, arg);
    }
    line
}

/// `docker exec [--interactive] [--user U] [--workdir W] [--env K=V]… <id> argv…`.
pub(crate) fn render_exec(engine: EngineKind, container: &str, request: &ExecRequest) -> String {
    let mut line = format!("{engine} exec");
    if request.attach_stdin {
        line.push_str(" --interactive");
    }
    if let Some(user) = &request.user {
        push_flag(&mut line, "--user", user);
    }
    if let Some(dir) = &request.working_dir {
        push_flag(&mut line, "--workdir", dir);
    }
    for pair in &request.env {
        push_flag(&mut line, "--env", &env_pair(pair));
    }
    push(&mut line, container);
    for arg in &request.cmd {
        push(&mut line, arg);
    }
    line
}

/// `docker rm --force <id>`.
pub(crate) fn render_rm(engine: EngineKind, container: &str) -> String {
    let mut line = format!("{engine} rm --force");
    push(&mut line, container);
    line
}

/// `docker rmi --no-prune <image>`.
pub(crate) fn render_rmi(engine: EngineKind, image: &str) -> String {
    let mut line = format!("{engine} rmi --no-prune");
    push(&mut line, image);
    line
}

/// `docker volume create --label K=V… <name>`.
pub(crate) fn render_volume_create(
    engine: EngineKind,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut line = format!("{engine} volume create");
    for (key, value) in labels {
        push_flag(&mut line, "--label", &format!("{key}={value}"));
    }
    push(&mut line, name);
    line
}

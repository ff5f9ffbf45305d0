//! The `runArgs` screen (SANDBOX.md §7.2). `runArgs` are never mapped onto the container; they
//! are screened because a repository that *asks* for host privileges is hostile or broken, and
//! the run must say so instead of quietly running something else (our decision 2).

use std::path::PathBuf;

use crate::mounts::{MountRequest, ScreenContext, mount_is_host_bind};
use crate::rules::{MountRule, RunArgRule, Sensitivity};
use crate::text::clean_path;

/// Flags refused whatever their value (§7.2).
const PRIVILEGE_FLAGS: &[&str] = &["--privileged", "--cap-add", "--security-opt", "--device"];

/// Short docker flags that take a value: in a cluster like `-itv`, what follows one of these is
/// its value, not more flags.
const SHORT_WITH_VALUE: &str = "acehlmpuw";

/// Screens `runArgs` (SANDBOX.md §7.2) and returns the entries that are ignored (for the run-log
/// line `runArgs ignored: …`). Refused, in `--flag=value`, `--flag value` and short forms:
/// `PRIVILEGE_FLAGS`-class flags whatever their value, `--pid host`, `--network host` /
/// `--net host` (any case), `--volumes-from`, and `-v`/`--volume`/`--mount` that the one
/// author-mount decision ([`ScreenContext::admit`]) refuses for this run: for an untrusted run
/// any host path or named volume; for every run a sensitive or protected path (judged lexically
/// and with symlinks resolved; a relative source against the workspace) or an `iterion…` volume.
///
/// # Errors
///
/// The first refused entry, as `(entry as written, rule)`.
pub(crate) fn screen_run_args(
    args: &[String],
    ctx: &ScreenContext,
) -> Result<Vec<String>, (String, RunArgRule)> {
    let mut ignored = Vec::new();
    let mut index = 0;
    while index < args.len() {
        let arg = args[index].as_str();
        let next = args.get(index + 1).map(String::as_str);
        let (consumed, verdict) = judge(arg, next, ctx);
        if let Some(rule) = verdict {
            let written = if consumed == 2 {
                format!("{arg} {}", next.unwrap_or_default())
            } else {
                arg.to_owned()
            };
            return Err((written, rule));
        }
        ignored.extend(args[index..index + consumed].iter().cloned());
        index += consumed;
    }
    Ok(ignored)
}

/// Judges one entry; returns how many entries it spans (1, or 2 when its value is the next one).
fn judge(arg: &str, next: Option<&str>, ctx: &ScreenContext) -> (usize, Option<RunArgRule>) {
    if let Some(long) = arg.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        let flag = format!("--{name}");
        if let Some(flag) = PRIVILEGE_FLAGS.iter().find(|known| **known == flag) {
            // A bare `--privileged` takes no value; the others take the next entry.
            let takes_next = inline.is_none() && *flag != "--privileged" && next.is_some();
            let consumed = if takes_next { 2 } else { 1 };
            return (consumed, Some(RunArgRule::HostPrivilege(flag)));
        }
        if name == "volumes-from" {
            let consumed = if inline.is_none() && next.is_some() {
                2
            } else {
                1
            };
            return (consumed, Some(RunArgRule::Mount(MountRule::VolumesFrom)));
        }
        let takes_value = matches!(name, "pid" | "network" | "net" | "volume" | "mount");
        if !takes_value {
            return (1, None);
        }
        let (value, consumed) = match (inline, next) {
            (Some(value), _) => (value, 1),
            (None, Some(next)) => (next, 2),
            (None, None) => return (1, None),
        };
        let rule = match name {
            "pid" => value
                .trim()
                .eq_ignore_ascii_case("host")
                .then_some(RunArgRule::HostPidNamespace),
            "network" | "net" => value
                .trim()
                .eq_ignore_ascii_case("host")
                .then_some(RunArgRule::HostNetwork),
            "volume" => volume_rule(value, ctx),
            _ => mount_rule(value, ctx),
        };
        return (consumed, rule);
    }
    if let Some(cluster) = arg.strip_prefix('-') {
        // Short flags: only `-v` matters. In `-itv /a:/b` or `-v/a:/b` or `-v=/a:/b`, find `v`
        // before any flag that takes a value.
        for (at, c) in cluster.char_indices() {
            if c == 'v' {
                let inline = &cluster[at + 1..];
                let inline = inline.strip_prefix('=').unwrap_or(inline);
                return match (inline.is_empty(), next) {
                    (false, _) => (1, volume_rule(inline, ctx)),
                    (true, Some(next)) => (2, volume_rule(next, ctx)),
                    (true, None) => (1, None),
                };
            }
            if SHORT_WITH_VALUE.contains(c) {
                break;
            }
        }
    }
    (1, None)
}

/// `-v SRC:DST[:OPTS]`: one field is an anonymous volume; SRC is a host path when it is
/// absolute, relative (`.`), `~`-based or holds a `/`, otherwise a named volume. Judged by the
/// one author-mount decision, [`ScreenContext::admit`].
fn volume_rule(value: &str, ctx: &ScreenContext) -> Option<RunArgRule> {
    let mut fields = value.split(':');
    let source = fields.next().unwrap_or_default();
    let rest: Vec<&str> = fields.collect();
    if rest.is_empty() {
        return admit(MountRequest::Anonymous, ctx);
    }
    let read_only = rest.get(1).is_some_and(|opts| {
        opts.split(',')
            .any(|opt| opt.trim() == "ro" || opt.trim() == "readonly")
    });
    if source.is_empty() {
        return admit(MountRequest::Anonymous, ctx);
    }
    let is_path = source.starts_with(['/', '.', '~']) || source.contains('/');
    if !is_path {
        return admit(MountRequest::NamedVolume(source), ctx);
    }
    host_path_rule(source, read_only, ctx)
}

/// `--mount k=v,…`: a host bind (§5.1's predicate), a named volume or nothing on the host.
fn mount_rule(value: &str, ctx: &ScreenContext) -> Option<RunArgRule> {
    let mut source = None;
    let mut read_only = false;
    let mut kind = None;
    for item in value.split(',') {
        let (key, value) = match item.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => (item.trim(), None),
        };
        match key {
            "source" | "src" => source = value,
            "type" => kind = value,
            "readonly" | "ro" => read_only = !matches!(value, Some("false" | "0")),
            _ => {}
        }
    }
    if mount_is_host_bind(value) {
        return match source {
            Some(source) => host_path_rule(source, read_only, ctx),
            None => None,
        };
    }
    match (kind, source) {
        (Some("volume") | None, Some(name)) if !name.is_empty() => {
            admit(MountRequest::NamedVolume(name), ctx)
        }
        _ => admit(MountRequest::Anonymous, ctx),
    }
}

/// A host path: `~` is the operator's home (refused as the home itself when unknown). A source
/// that does not exist is not refused here: `runArgs` are never applied.
fn host_path_rule(source: &str, read_only: bool, ctx: &ScreenContext) -> Option<RunArgRule> {
    let expanded;
    let source = if source == "~" || source.starts_with("~/") {
        let Some(home) = ctx.home() else {
            return Some(RunArgRule::Mount(MountRule::Sensitive {
                path: PathBuf::from(source),
                why: Sensitivity::HomeOrAncestor,
            }));
        };
        let tail = source.trim_start_matches('~').trim_start_matches('/');
        expanded = clean_path(&home.join(tail)).to_string_lossy().into_owned();
        expanded.as_str()
    } else {
        source
    };
    match ctx.admit(&MountRequest::HostPath { source, read_only }) {
        Ok(_) | Err(MountRule::SourceMissing(_)) => None,
        Err(rule) => Some(RunArgRule::Mount(rule)),
    }
}

fn admit(request: MountRequest<'_>, ctx: &ScreenContext) -> Option<RunArgRule> {
    ctx.admit(&request).err().map(RunArgRule::Mount)
}

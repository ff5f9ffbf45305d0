//! The `runArgs` screen (SANDBOX.md §7.2). `runArgs` are never mapped onto the container; they
//! are screened because a repository that *asks* for host privileges is hostile or broken, and
//! the run must say so instead of quietly running something else (our decision 2).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::mounts::{ScreenContext, Sensitivity, mount_is_host_bind};
use crate::text::clean_path;

/// Why a `runArgs` entry refuses the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunArgRule {
    /// `--privileged`, `--cap-add`, `--security-opt` or `--device`, in any form.
    HostPrivilege(&'static str),
    /// `--pid=host`.
    HostPidNamespace,
    /// `--network=host` or `--net=host`.
    HostNetwork,
    /// `-v`, `--volume` or `--mount` whose source is sensitive (§5.2).
    SensitiveMount {
        /// The path judged (lexical or canonical).
        path: PathBuf,
        /// Which rule.
        why: Sensitivity,
    },
}

impl fmt::Display for RunArgRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunArgRule::HostPrivilege(flag) => write!(f, "{flag} grants host privileges"),
            RunArgRule::HostPidNamespace => f.write_str("--pid=host shares the host's processes"),
            RunArgRule::HostNetwork => f.write_str("host networking bypasses the egress proxy"),
            RunArgRule::SensitiveMount { path, why } => {
                write!(f, "mounts {} which is sensitive: {why}", path.display())
            }
        }
    }
}

/// Flags refused whatever their value (§7.2).
const PRIVILEGE_FLAGS: &[&str] = &["--privileged", "--cap-add", "--security-opt", "--device"];

/// Short docker flags that take a value: in a cluster like `-itv`, what follows one of these is
/// its value, not more flags.
const SHORT_WITH_VALUE: &str = "acehlmpuw";

/// Screens `runArgs` (SANDBOX.md §7.2) and returns the entries that are ignored (for the run-log
/// line `runArgs ignored: …`). Refused, in `--flag=value`, `--flag value` and short forms:
/// `PRIVILEGE_FLAGS`-class flags whatever their value, `--pid host`, `--network host` /
/// `--net host` (any case), and `-v`/`--volume`/`--mount` whose host source §5.2 calls sensitive
/// (judged lexically and with symlinks resolved; a relative source against the workspace).
///
/// # Errors
///
/// The first refused entry, as `(entry as written, rule)`.
pub fn screen_run_args(
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

/// `-v SRC:DST[:OPTS]`: SRC is a host path when it is absolute, relative (`.`) or `~`-based;
/// otherwise a named volume, which is not a host bind.
fn volume_rule(value: &str, ctx: &ScreenContext) -> Option<RunArgRule> {
    let source = value.split(':').next().unwrap_or_default();
    let is_path = source.starts_with(['/', '.', '~']) || source.contains('/');
    if !is_path {
        return None;
    }
    source_rule(source, ctx)
}

/// `--mount k=v,…`: screened when the mount is a host bind (§5.1's predicate).
fn mount_rule(value: &str, ctx: &ScreenContext) -> Option<RunArgRule> {
    if !mount_is_host_bind(value) {
        return None;
    }
    let source = value.split(',').find_map(|item| {
        let (key, value) = item.split_once('=')?;
        matches!(key.trim(), "source" | "src").then_some(value)
    })?;
    source_rule(source, ctx)
}

/// §5.2 steps 1–3: the lexical path, then the canonical one when it resolves. A `~` is judged as
/// the user's home would be, without reading it: `~/.ssh` is sensitive by its `.ssh` component,
/// and a bare `~` (or anything cleaning to it, like `~/a/..`) is the home itself.
fn source_rule(source: &str, ctx: &ScreenContext) -> Option<RunArgRule> {
    if source == "~" || source.starts_with("~/") {
        let tail = source.trim_start_matches('~').trim_start_matches('/');
        let judged = clean_path(&Path::new("/home/~").join(tail));
        let why = if judged == Path::new("/home/~") {
            Some(Sensitivity::HomeOrAncestor)
        } else {
            ctx.sensitivity(&judged)
        };
        return why.map(|why| RunArgRule::SensitiveMount {
            path: PathBuf::from(source),
            why,
        });
    }
    let lexical = clean_path(&ctx.workspace().join(source));
    if let Some(why) = ctx.sensitivity(&lexical) {
        return Some(RunArgRule::SensitiveMount { path: lexical, why });
    }
    let canonical = std::fs::canonicalize(&lexical).ok()?;
    ctx.sensitivity(&canonical)
        .map(|why| RunArgRule::SensitiveMount {
            path: canonical,
            why,
        })
}

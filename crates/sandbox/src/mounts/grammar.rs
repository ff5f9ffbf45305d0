//! The `--mount` grammar and the syntax checks every mount, argument and env pair passes
//! (SANDBOX.md §5.1). Pure: nothing here touches the filesystem.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::rules::{ArgRule, EnvRule, MountKind, MountRule};
use crate::text::{has_control, is_clean_absolute};

/// The directory the engine reserves inside every sandbox (binary, secrets, CA, sockets).
pub(super) const RESERVED_TARGET_ROOT: &str = "/run/iterion";

/// Bind propagation modes we allow: the ones that cannot leak mounts back to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindPropagation {
    /// `private`.
    Private,
    /// `rprivate`.
    Rprivate,
}

/// A parsed author mount. Build the engine's mount from this (and, for a bind, from the
/// screened canonical source of [`ScreenedMount`](crate::ScreenedMount)), never from the string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountSpec {
    /// Bind, volume or tmpfs; a mount without `type` is a bind when it has a source and an
    /// anonymous volume otherwise.
    pub kind: MountKind,
    /// The source as written (host path or volume name); `None` for anonymous volumes and tmpfs.
    pub source: Option<String>,
    /// The absolute, clean target.
    pub target: String,
    /// `readonly`/`ro`.
    pub read_only: bool,
    /// `bind-propagation` (bind only).
    pub bind_propagation: Option<BindPropagation>,
    /// `consistency` (accepted for compatibility; no effect on Linux).
    pub consistency: Option<String>,
    /// `volume-nocopy` (volume only).
    pub volume_nocopy: bool,
    /// `tmpfs-size` in bytes (tmpfs only).
    pub tmpfs_size_bytes: Option<u64>,
    /// `tmpfs-mode` (tmpfs only).
    pub tmpfs_mode: Option<u32>,
}

fn refuse(mount: &str, rule: MountRule) -> Error {
    Error::MountRefused {
        mount: mount.to_owned(),
        rule,
    }
}

/// Whether a mount string is a host bind (SANDBOX.md §5.1): it says `type=bind`, or it says no
/// type but has a source. The same predicate drives screening (§5.2) and dropping on drivers
/// without host binds (§8.8). Lexical and total: a string the grammar would refuse is still
/// classified, and any `type=bind` item counts (fail closed).
pub fn mount_is_host_bind(mount: &str) -> bool {
    let mut has_type = false;
    let mut has_source = false;
    for item in mount.split(',') {
        let (key, value) = match item.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value)),
            None => (item.trim(), None),
        };
        match key {
            "type" => {
                has_type = true;
                if value.is_some_and(|v| v.trim() == "bind") {
                    return true;
                }
            }
            "source" | "src" => has_source = true,
            _ => {}
        }
    }
    !has_type && has_source
}

/// Parses and syntax-checks an author mount (SANDBOX.md §5.1). Sources are not screened here;
/// see [`validate_mount`](crate::validate_mount).
///
/// # Errors
///
/// [`Error::MountRefused`] naming the mount and the rule: an empty mount, a control character, a
/// leading `-`, an unknown, forbidden or repeated key, a bad value, a missing or bad target, a
/// bad volume name, a bind without source, a tmpfs with one.
///
/// ```
/// use iterion_sandbox::{MountKind, parse_mount};
/// let mount = parse_mount("source=./cache,target=/cache,ro")?;
/// assert_eq!((mount.kind, mount.read_only), (MountKind::Bind, true));
/// assert!(parse_mount("type=volume,volume-driver=local,target=/x").is_err());
/// # Ok::<(), iterion_sandbox::Error>(())
/// ```
pub fn parse_mount(mount: &str) -> Result<MountSpec> {
    if mount.trim().is_empty() {
        return Err(refuse(mount, MountRule::Empty));
    }
    if has_control(mount) {
        return Err(refuse(mount, MountRule::ControlCharacter));
    }
    if mount.trim_start().starts_with('-') {
        return Err(refuse(mount, MountRule::LeadingDash));
    }
    let mut items = Items::default();
    for item in mount.split(',') {
        items.add(item).map_err(|rule| refuse(mount, rule))?;
    }
    items.finish().map_err(|rule| refuse(mount, rule))
}

#[derive(Default)]
struct Items {
    seen: BTreeSet<&'static str>,
    kind: Option<MountKind>,
    source: Option<String>,
    target: Option<String>,
    read_only: bool,
    bind_propagation: Option<BindPropagation>,
    consistency: Option<String>,
    volume_nocopy: Option<bool>,
    tmpfs_size_bytes: Option<u64>,
    tmpfs_mode: Option<u32>,
}

const BOOL_WANT: &str = "true, false, 1 or 0 (or the bare key)";

fn parse_bool(key: &str, value: Option<&str>) -> std::result::Result<bool, MountRule> {
    match value {
        None | Some("true" | "1") => Ok(true),
        Some("false" | "0") => Ok(false),
        Some(_) => Err(MountRule::InvalidValue {
            key: key.to_owned(),
            want: BOOL_WANT,
        }),
    }
}

fn required<'v>(
    key: &str,
    value: Option<&'v str>,
    want: &'static str,
) -> std::result::Result<&'v str, MountRule> {
    value
        .filter(|v| !v.is_empty())
        .ok_or(MountRule::InvalidValue {
            key: key.to_owned(),
            want,
        })
}

impl Items {
    fn add(&mut self, item: &str) -> std::result::Result<(), MountRule> {
        if item.trim().is_empty() {
            return Err(MountRule::EmptyItem);
        }
        let (key, value) = match item.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value)),
            None => (item.trim(), None),
        };
        let canonical: &'static str = match key {
            "type" => "type",
            "source" | "src" => "source",
            "target" | "destination" | "dst" => "target",
            "readonly" | "ro" => "readonly",
            "bind-propagation" => "bind-propagation",
            "consistency" => "consistency",
            "volume-nocopy" => "volume-nocopy",
            "tmpfs-size" => "tmpfs-size",
            "tmpfs-mode" => "tmpfs-mode",
            "volume-opt" | "volume-driver" => return Err(MountRule::ForbiddenKey(key.to_owned())),
            other => return Err(MountRule::UnknownKey(other.to_owned())),
        };
        if !self.seen.insert(canonical) {
            return Err(MountRule::DuplicateKey(canonical.to_owned()));
        }
        match canonical {
            "type" => {
                self.kind = Some(match required(key, value, "bind, volume or tmpfs")? {
                    "bind" => MountKind::Bind,
                    "volume" => MountKind::Volume,
                    "tmpfs" => MountKind::Tmpfs,
                    other => return Err(MountRule::UnsupportedType(other.to_owned())),
                });
            }
            "source" => {
                let source = required(key, value, "a host path or a volume name")?;
                if source.starts_with('-') {
                    return Err(MountRule::LeadingDash);
                }
                self.source = Some(source.to_owned());
            }
            "target" => self.target = Some(required(key, value, "an absolute path")?.to_owned()),
            "readonly" => self.read_only = parse_bool(key, value)?,
            "bind-propagation" => {
                self.bind_propagation = Some(match value {
                    Some("private") => BindPropagation::Private,
                    Some("rprivate") => BindPropagation::Rprivate,
                    _ => {
                        return Err(MountRule::InvalidValue {
                            key: key.to_owned(),
                            want: "private or rprivate",
                        });
                    }
                });
            }
            "consistency" => {
                let want = "consistent, cached, delegated or default";
                match value {
                    Some(v @ ("consistent" | "cached" | "delegated" | "default")) => {
                        self.consistency = Some(v.to_owned());
                    }
                    _ => {
                        return Err(MountRule::InvalidValue {
                            key: key.to_owned(),
                            want,
                        });
                    }
                }
            }
            "volume-nocopy" => self.volume_nocopy = Some(parse_bool(key, value)?),
            "tmpfs-size" => {
                let want = "a byte count with an optional k, m or g suffix";
                let size = value.and_then(parse_size).ok_or(MountRule::InvalidValue {
                    key: key.to_owned(),
                    want,
                })?;
                self.tmpfs_size_bytes = Some(size);
            }
            _ => {
                // tmpfs-mode
                let want = "an octal mode such as 1777";
                let mode = value
                    .filter(|v| (1..=4).contains(&v.len()))
                    .and_then(|v| u32::from_str_radix(v, 8).ok())
                    .ok_or(MountRule::InvalidValue {
                        key: key.to_owned(),
                        want,
                    })?;
                self.tmpfs_mode = Some(mode);
            }
        }
        Ok(())
    }

    fn finish(self) -> std::result::Result<MountSpec, MountRule> {
        let target = self.target.ok_or(MountRule::MissingTarget)?;
        check_target(&target)?;
        let kind = match (self.kind, &self.source) {
            (Some(kind), _) => kind,
            (None, Some(_)) => MountKind::Bind,
            (None, None) => MountKind::Volume,
        };
        match (kind, self.source.as_deref()) {
            (MountKind::Bind, None) => return Err(MountRule::BindWithoutSource),
            (MountKind::Tmpfs, Some(_)) => return Err(MountRule::TmpfsWithSource),
            (MountKind::Volume, Some(name)) if !is_volume_name(name) => {
                return Err(MountRule::InvalidVolumeName);
            }
            _ => {}
        }
        let not_for = |key: &str| MountRule::KeyNotForKind {
            key: key.to_owned(),
            kind,
        };
        if self.bind_propagation.is_some() && kind != MountKind::Bind {
            return Err(not_for("bind-propagation"));
        }
        if self.volume_nocopy.is_some() && kind != MountKind::Volume {
            return Err(not_for("volume-nocopy"));
        }
        if self.tmpfs_size_bytes.is_some() && kind != MountKind::Tmpfs {
            return Err(not_for("tmpfs-size"));
        }
        if self.tmpfs_mode.is_some() && kind != MountKind::Tmpfs {
            return Err(not_for("tmpfs-mode"));
        }
        Ok(MountSpec {
            kind,
            source: self.source,
            target,
            read_only: self.read_only,
            bind_propagation: self.bind_propagation,
            consistency: self.consistency,
            volume_nocopy: self.volume_nocopy.unwrap_or(false),
            tmpfs_size_bytes: self.tmpfs_size_bytes,
            tmpfs_mode: self.tmpfs_mode,
        })
    }
}

/// Target rules shared by author mounts and tmpfs entries: absolute, clean, not `/`, not under
/// [`RESERVED_TARGET_ROOT`].
pub(crate) fn check_target(target: &str) -> std::result::Result<(), MountRule> {
    if !is_clean_absolute(target) {
        return Err(MountRule::TargetNotAbsoluteClean(target.to_owned()));
    }
    if target == "/" {
        return Err(MountRule::TargetIsRoot);
    }
    if is_reserved_target(target) {
        return Err(MountRule::TargetReserved);
    }
    Ok(())
}

/// Whether `target` (clean, absolute) is [`RESERVED_TARGET_ROOT`] or under it.
pub(crate) fn is_reserved_target(target: &str) -> bool {
    target == RESERVED_TARGET_ROOT
        || target
            .strip_prefix(RESERVED_TARGET_ROOT)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `name` matches `[A-Za-z0-9][A-Za-z0-9_.-]*`.
pub(crate) fn is_volume_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn parse_size(value: &str) -> Option<u64> {
    let (digits, multiplier) = match value.char_indices().last()? {
        (i, 'k' | 'K') => (&value[..i], 1 << 10),
        (i, 'm' | 'M') => (&value[..i], 1 << 20),
        (i, 'g' | 'G') => (&value[..i], 1 << 30),
        _ => (value, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(multiplier)
}

/// Checks a plain argument (SANDBOX.md §5.1): the image, `user`, the workdir, each tmpfs entry.
/// An empty value is accepted; control characters and a leading `-` are refused, so the value
/// can never be read as an option or forge a log line.
///
/// # Errors
///
/// [`Error::InvalidArgument`] naming `label`.
pub fn validate_plain_arg(label: &str, value: &str) -> Result<()> {
    let rule = if has_control(value) {
        ArgRule::ControlCharacter
    } else if value.starts_with('-') {
        ArgRule::LeadingDash
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument {
        label: label.to_owned(),
        value: value.to_owned(),
        rule,
    })
}

/// Checks one env pair (SANDBOX.md §5.1): the key is non-empty without `=`, newline, carriage
/// return or NUL; the value has no newline, carriage return or NUL.
///
/// # Errors
///
/// [`Error::InvalidEnv`] naming the key (never the value).
pub(super) fn validate_env_pair(key: &str, value: &str) -> Result<()> {
    let forbidden = ['\n', '\r', '\0'];
    let rule = if key.is_empty() {
        EnvRule::EmptyKey
    } else if key.contains('=') {
        EnvRule::KeyContainsEquals
    } else if key.contains(forbidden) {
        EnvRule::KeyControlCharacter
    } else if value.contains(forbidden) {
        EnvRule::ValueControlCharacter
    } else {
        return Ok(());
    };
    Err(Error::InvalidEnv {
        key: key.to_owned(),
        rule,
    })
}

//! Author mounts on kubernetes (SANDBOX.md §5.6): `pvc`, `configmap` and `secret` volumes, in the
//! `--mount` key syntax plus `key` and a bare `readonly`/`ro`. Pure.
//!
//! Host binds have no meaning in a pod; the engine drops them before Prepare (§8.8), and what
//! reaches here anyway is refused with a message that points at `pvc`.

use iterion_sandbox::{Error, Result, is_clean_absolute};
use iterion_vocab::escape_controls;

/// The kind of volume an author mount names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KubeMountKind {
    /// `persistentVolumeClaim.claimName = source`; the claim must already exist.
    Pvc,
    /// `configMap.name = source`.
    ConfigMap,
    /// `secret.secretName = source`, `defaultMode: 0o440`, readable through `fsGroup`.
    Secret,
}

/// One parsed author mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KubeMount {
    /// The volume kind.
    pub kind: KubeMountKind,
    /// The claim, ConfigMap or Secret name.
    pub source: String,
    /// The absolute path in the pod.
    pub target: String,
    /// A single key of a ConfigMap or Secret, mounted as the target file (`subPath`).
    pub key: Option<String>,
    /// Mounted read-only.
    pub read_only: bool,
}

fn refuse(mount: &str, reason: &str) -> Error {
    Error::InvalidSpec {
        field: "mounts".to_owned(),
        reason: format!("kubernetes: {}: {reason}", escape_controls(mount)),
    }
}

/// Parses one author mount (SANDBOX.md §5.6). `type`, `source` (`src`) and an absolute `target`
/// (`destination`, `dst`) are required; `key=…` and a bare `readonly`/`ro` (or `readonly=true`)
/// are optional; any other key is an error.
///
/// # Errors
///
/// [`Error::InvalidSpec`] naming the mount: an unknown key, a missing or relative target, a
/// `bind`/`volume`/`tmpfs` type (use `pvc`), or a `key` on a pvc.
pub(crate) fn parse_kube_mount(mount: &str) -> Result<KubeMount> {
    let (mut kind, mut source, mut target, mut key, mut read_only) =
        (None, None, None, None, false);
    for part in mount.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = match part.split_once('=') {
            Some((name, value)) => (name.trim(), Some(value.trim())),
            None => (part, None),
        };
        match (name.to_ascii_lowercase().as_str(), value) {
            ("type", Some(value)) => kind = Some(value.to_ascii_lowercase()),
            ("source" | "src", Some(value)) => source = Some(value.to_owned()),
            ("target" | "destination" | "dst", Some(value)) => target = Some(value.to_owned()),
            ("key", Some(value)) => key = Some(value.to_owned()),
            ("readonly" | "ro", None) => read_only = true,
            ("readonly" | "ro", Some(value)) => {
                read_only = match value.to_ascii_lowercase().as_str() {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => return Err(refuse(mount, "readonly takes true or false")),
                }
            }
            _ => {
                return Err(refuse(
                    mount,
                    &format!("unknown key \"{}\"", escape_controls(name)),
                ));
            }
        }
    }
    let kind = match kind.as_deref() {
        Some("pvc") => KubeMountKind::Pvc,
        Some("configmap") => KubeMountKind::ConfigMap,
        Some("secret") => KubeMountKind::Secret,
        Some("bind" | "volume" | "tmpfs") => {
            return Err(refuse(
                mount,
                "host binds, engine volumes and tmpfs do not exist in a pod; use type=pvc",
            ));
        }
        Some(other) => {
            return Err(refuse(
                mount,
                &format!(
                    "unknown type \"{}\" (pvc, configmap, secret)",
                    escape_controls(other)
                ),
            ));
        }
        None => return Err(refuse(mount, "type is required (pvc, configmap, secret)")),
    };
    let source = source
        .filter(|s| !s.is_empty())
        .ok_or_else(|| refuse(mount, "source is required"))?;
    let target = target
        .filter(|t| t.starts_with('/') && is_clean_absolute(t) && t != "/")
        .ok_or_else(|| refuse(mount, "an absolute, clean target is required"))?;
    if kind == KubeMountKind::Pvc && key.is_some() {
        return Err(refuse(mount, "key applies to configmap and secret only"));
    }
    Ok(KubeMount {
        kind,
        source,
        target,
        key,
        read_only,
    })
}

/// The volume name of author mount `index` (SANDBOX.md §5.6): `mount-<index>-<source>`, the
/// source lower-cased, each character outside `[a-z0-9.-]` made `-`, the name cut to 50
/// characters, and leading and trailing `-`/`.` trimmed.
pub(crate) fn mount_volume_name(index: usize, source: &str) -> String {
    let source: String = source
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut name = format!("mount-{index}-{source}");
    name.truncate(50);
    name.trim_matches(['-', '.']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn kubernetes_mounts_parse_or_are_refused() {
        let got: Vec<(&str, std::result::Result<KubeMount, String>)> = [
            "type=pvc,source=cache,target=/cache",
            "type=configmap,src=settings,dst=/etc/app.toml,key=app.toml,ro",
            "type=secret,source=creds,target=/run/creds,readonly=true",
            "type=bind,source=/home,target=/home",
            "type=pvc,source=cache,target=relative",
            "type=pvc,source=cache,target=/c,key=x",
            "type=pvc,source=cache,target=/c,bogus=1",
            "source=cache,target=/c",
        ]
        .iter()
        .map(|m| (*m, parse_kube_mount(m).map_err(|e| e.to_string())))
        .collect();
        let ok = |kind, source: &str, target: &str, key: Option<&str>, read_only| {
            Ok(KubeMount {
                kind,
                source: source.to_owned(),
                target: target.to_owned(),
                key: key.map(str::to_owned),
                read_only,
            })
        };
        let bad = |m: &str, why: &str| {
            Err(format!(
                "sandbox: invalid spec: mounts: kubernetes: {m}: {why}"
            ))
        };
        assert_eq!(
            got,
            vec![
                (
                    "type=pvc,source=cache,target=/cache",
                    ok(KubeMountKind::Pvc, "cache", "/cache", None, false)
                ),
                (
                    "type=configmap,src=settings,dst=/etc/app.toml,key=app.toml,ro",
                    ok(
                        KubeMountKind::ConfigMap,
                        "settings",
                        "/etc/app.toml",
                        Some("app.toml"),
                        true
                    )
                ),
                (
                    "type=secret,source=creds,target=/run/creds,readonly=true",
                    ok(KubeMountKind::Secret, "creds", "/run/creds", None, true)
                ),
                (
                    "type=bind,source=/home,target=/home",
                    bad(
                        "type=bind,source=/home,target=/home",
                        "host binds, engine volumes and tmpfs do not exist in a pod; use type=pvc"
                    )
                ),
                (
                    "type=pvc,source=cache,target=relative",
                    bad(
                        "type=pvc,source=cache,target=relative",
                        "an absolute, clean target is required"
                    )
                ),
                (
                    "type=pvc,source=cache,target=/c,key=x",
                    bad(
                        "type=pvc,source=cache,target=/c,key=x",
                        "key applies to configmap and secret only"
                    )
                ),
                (
                    "type=pvc,source=cache,target=/c,bogus=1",
                    bad(
                        "type=pvc,source=cache,target=/c,bogus=1",
                        "unknown key \"bogus\""
                    )
                ),
                (
                    "source=cache,target=/c",
                    bad(
                        "source=cache,target=/c",
                        "type is required (pvc, configmap, secret)"
                    )
                ),
            ]
        );
    }

    #[test]
    fn volume_names_are_sanitised_and_bounded() {
        assert_eq!(
            [
                mount_volume_name(0, "Cache_PVC"),
                mount_volume_name(3, &"x".repeat(80)),
                mount_volume_name(1, "-.odd.-"),
            ],
            [
                "mount-0-cache-pvc".to_owned(),
                format!("mount-3-{}", "x".repeat(42)),
                "mount-1--.odd".to_owned(),
            ]
        );
    }
}

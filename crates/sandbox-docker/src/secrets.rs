//! File secrets on docker/podman (SANDBOX.md §8.7 "docker delivery", §4.8 refresh): each secret
//! is a file in the per-run dir, bound read-only into the container. Its value never appears in
//! argv, in the create body, in the run log or in an error: only its path does.
//!
//! - A secret whose `mount_path` is `/run/iterion/secrets/<file>` is `<run dir>/secrets/<file>`,
//!   and the whole `secrets/` dir is bound read-only at `/run/iterion/secrets`.
//! - Any other path is a single-file read-only bind of `<run dir>/secrets-custom/<index>-<name>`.
//! - Modes ([`secret_modes`]): files 0400 and dirs 0500 when the container's numeric uid is the
//!   host uid; the same modes, chowned to the container's uid:gid, when the engine runs as root
//!   and the container user is numeric; otherwise 0444/0555. The per-run dir (0700) keeps other
//!   host users out in every case.
//!
//! [`secret_plan`] decides (pure); [`write_secret_files`] writes (blocking; run it on the blocking
//! pool); [`refresh_secret`] rewrites one value without an empty-file window.

use std::io::{Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use iterion_sandbox::{Error, Result, SecretBytes, SecretFileMount};

/// Where default-path secrets live in the container.
pub(crate) const SECRETS_TARGET: &str = "/run/iterion/secrets";

/// How secret files and their dirs are owned and protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SecretModes {
    /// Mode of each secret file.
    pub file: u32,
    /// Mode of `secrets/` and `secrets-custom/`.
    pub dir: u32,
    /// `uid:gid` to chown to, when the engine is root and the container user is numeric.
    pub owner: Option<(u32, u32)>,
}

/// The modes for a container running as `user` (the spec's; `None` = the image's, unknown)
/// when the engine runs as `host_uid` (SANDBOX.md §8.7).
pub(crate) fn secret_modes(user: Option<&str>, host_uid: u32) -> SecretModes {
    let numeric = user.and_then(|user| {
        let (uid, gid) = match user.split_once(':') {
            Some((uid, gid)) => (uid, Some(gid)),
            None => (user, None),
        };
        let uid: u32 = uid.parse().ok()?;
        let gid: u32 = match gid {
            Some(gid) => gid.parse().ok()?,
            None => uid,
        };
        Some((uid, gid))
    });
    let private = SecretModes {
        file: 0o400,
        dir: 0o500,
        owner: None,
    };
    match numeric {
        Some((uid, _)) if uid == host_uid => private,
        Some(owner) if host_uid == 0 => SecretModes {
            owner: Some(owner),
            ..private
        },
        _ => SecretModes {
            file: 0o444,
            dir: 0o555,
            owner: None,
        },
    }
}

/// One secret file to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SecretFilePlan {
    /// The secret's name.
    pub name: String,
    /// Its host file, in the per-run dir.
    pub host_path: PathBuf,
    /// Its path in the container.
    pub mount_path: String,
    /// Whether it is bound on its own (custom path) rather than through `secrets/`.
    pub single_file: bool,
}

/// The file secrets of a run, planned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SecretPlan {
    /// The files, in the spec's order.
    pub files: Vec<SecretFilePlan>,
    /// The `secrets/` dir to bind at [`SECRETS_TARGET`], when any secret uses it.
    pub shared_dir: Option<PathBuf>,
    /// `(env, mount_path)` for each secret that names an env variable.
    pub env: Vec<(String, String)>,
    /// Ownership and modes.
    pub modes: Option<SecretModes>,
}

impl SecretPlan {
    /// The read-only binds, `(host source, container target)`, in order: the shared dir first,
    /// then each single-file bind.
    pub(crate) fn binds(&self) -> Vec<(PathBuf, String)> {
        let shared = self
            .shared_dir
            .iter()
            .map(|dir| (dir.clone(), SECRETS_TARGET.to_owned()));
        let single = self
            .files
            .iter()
            .filter(|file| file.single_file)
            .map(|file| (file.host_path.clone(), file.mount_path.clone()));
        shared.chain(single).collect()
    }
}

/// Plans the files, binds and env of `secrets` (already validated by `Spec::validate`). Pure.
pub(crate) fn secret_plan(
    secrets: &[SecretFileMount],
    run_dir: &Path,
    user: Option<&str>,
    host_uid: u32,
) -> SecretPlan {
    if secrets.is_empty() {
        return SecretPlan::default();
    }
    let prefix = format!("{SECRETS_TARGET}/");
    let mut plan = SecretPlan {
        modes: Some(secret_modes(user, host_uid)),
        ..SecretPlan::default()
    };
    for (index, secret) in secrets.iter().enumerate() {
        let in_shared = secret
            .mount_path
            .strip_prefix(&prefix)
            .filter(|rest| !rest.is_empty() && !rest.contains('/'));
        let file = match in_shared {
            Some(file) => {
                let dir = run_dir.join("secrets");
                plan.shared_dir = Some(dir.clone());
                SecretFilePlan {
                    name: secret.name.clone(),
                    host_path: dir.join(file),
                    mount_path: secret.mount_path.clone(),
                    single_file: false,
                }
            }
            None => SecretFilePlan {
                name: secret.name.clone(),
                host_path: run_dir.join("secrets-custom").join(format!(
                    "{index}-{}",
                    iterion_vocab::secret_file_name(&secret.name)
                )),
                mount_path: secret.mount_path.clone(),
                single_file: true,
            },
        };
        plan.files.push(file);
        if let Some(env) = &secret.env {
            plan.env.push((env.clone(), secret.mount_path.clone()));
        }
    }
    plan
}

fn io_error(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_owned();
    move |source| Error::Io {
        operation,
        path,
        source,
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_error("chmod", path))
}

fn chown(path: &Path, owner: Option<(u32, u32)>) -> Result<()> {
    match owner {
        Some((uid, gid)) => {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(io_error("chown", path))
        }
        None => Ok(()),
    }
}

/// Writes every planned secret file with its value, then locks the modes down (files first,
/// dirs last, so the engine can still write while it fills them). Blocking.
///
/// # Errors
///
/// [`Error::Io`] naming the path (never the value).
pub(crate) fn write_secret_files(plan: &SecretPlan, secrets: &[SecretFileMount]) -> Result<()> {
    let Some(modes) = plan.modes else {
        return Ok(());
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (file, secret) in plan.files.iter().zip(secrets) {
        if let Some(dir) = file.host_path.parent() {
            std::fs::create_dir_all(dir).map_err(io_error("create", dir))?;
            if !dirs.iter().any(|d| d == dir) {
                dirs.push(dir.to_owned());
            }
        }
        write_new(&file.host_path, secret.value.expose_secret())?;
        set_mode(&file.host_path, modes.file)?;
        chown(&file.host_path, modes.owner)?;
    }
    for dir in dirs {
        chown(&dir, modes.owner)?;
        set_mode(&dir, modes.dir)?;
    }
    Ok(())
}

fn write_new(path: &Path, value: &[u8]) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io_error("create", path))?;
    file.write_all(value).map_err(io_error("write", path))?;
    file.sync_all().map_err(io_error("sync", path))
}

/// Rewrites the value of secret `name` in a running sandbox (SANDBOX.md §4.8). Blocking.
///
/// - through `secrets/`: write `<file>.tmp` with the file's mode, then rename it over the file;
/// - a single-file bind keeps its inode (the bind follows the inode): chmod 0600, write in place
///   from offset 0, truncate to the new length, restore the mode.
///
/// Neither leaves an empty-file window.
///
/// # Errors
///
/// [`Error::InvalidSpec`] for an empty value or an unknown name; [`Error::Io`] naming the path.
pub(crate) fn refresh_secret(plan: &SecretPlan, name: &str, value: &SecretBytes) -> Result<()> {
    if value.is_empty() {
        return Err(Error::InvalidSpec {
            field: "secret_files".to_owned(),
            reason: format!(
                "refusing to refresh {} with an empty value",
                iterion_vocab::escape_controls(name)
            ),
        });
    }
    let (Some(file), Some(modes)) = (plan.files.iter().find(|f| f.name == name), plan.modes) else {
        return Err(Error::InvalidSpec {
            field: "secret_files".to_owned(),
            reason: format!(
                "no file secret named {} in this sandbox",
                iterion_vocab::escape_controls(name)
            ),
        });
    };
    let path = &file.host_path;
    if file.single_file {
        set_mode(path, 0o600)?;
        let mut handle = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_error("open", path))?;
        handle.rewind().map_err(io_error("seek", path))?;
        handle
            .write_all(value.expose_secret())
            .map_err(io_error("write", path))?;
        handle
            .set_len(value.len() as u64)
            .map_err(io_error("truncate", path))?;
        handle.sync_all().map_err(io_error("sync", path))?;
        set_mode(path, modes.file)
    } else {
        let dir = path.parent().unwrap_or(path);
        let tmp = path.with_extension("tmp");
        // The dir is read-only (0500/0555) once filled; open it for the swap, then close it.
        set_mode(dir, 0o700)?;
        let swapped = (|| {
            write_new(&tmp, value.expose_secret())?;
            set_mode(&tmp, modes.file)?;
            chown(&tmp, modes.owner)?;
            std::fs::rename(&tmp, path).map_err(io_error("rename", &tmp))
        })();
        let restored = set_mode(dir, modes.dir);
        swapped.and(restored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::MetadataExt;

    fn secret(name: &str, mount_path: &str, env: Option<&str>, value: &str) -> SecretFileMount {
        SecretFileMount {
            name: name.to_owned(),
            mount_path: mount_path.to_owned(),
            env: env.map(str::to_owned),
            value: value.into(),
        }
    }

    #[test]
    fn modes_follow_who_the_container_runs_as() {
        let rows = [
            (Some("1000"), 1000),
            (Some("1000:1000"), 0),
            (Some("1000:50"), 0),
            (Some("1000"), 1001),
            (Some("user"), 0),
            (None, 0),
            (Some("0"), 0),
        ];
        let got: Vec<SecretModes> = rows.iter().map(|(u, h)| secret_modes(*u, *h)).collect();
        let private = SecretModes {
            file: 0o400,
            dir: 0o500,
            owner: None,
        };
        let shared = SecretModes {
            file: 0o444,
            dir: 0o555,
            owner: None,
        };
        assert_eq!(
            got,
            vec![
                private,
                SecretModes {
                    owner: Some((1000, 1000)),
                    ..private
                },
                SecretModes {
                    owner: Some((1000, 50)),
                    ..private
                },
                shared,
                shared,
                shared,
                private,
            ]
        );
    }

    #[test]
    fn default_paths_share_a_dir_and_custom_paths_are_single_files() {
        let secrets = [
            secret(
                "API_TOKEN",
                "/run/iterion/secrets/API_TOKEN",
                Some("TOKEN_FILE"),
                "a",
            ),
            secret("gcloud/key", "/home/user/.config/key.json", None, "b"),
            secret("deep", "/run/iterion/secrets/sub/x", None, "c"),
        ];
        let plan = secret_plan(&secrets, Path::new("/run/r1"), Some("1000"), 1000);
        assert_eq!(
            (plan.binds(), plan.env),
            (
                vec![
                    (PathBuf::from("/run/r1/secrets"), SECRETS_TARGET.to_owned()),
                    (
                        PathBuf::from("/run/r1/secrets-custom/1-gcloud_key"),
                        "/home/user/.config/key.json".to_owned()
                    ),
                    (
                        PathBuf::from("/run/r1/secrets-custom/2-deep"),
                        "/run/iterion/secrets/sub/x".to_owned()
                    ),
                ],
                vec![(
                    "TOKEN_FILE".to_owned(),
                    "/run/iterion/secrets/API_TOKEN".to_owned()
                )]
            )
        );
    }

    #[test]
    fn files_are_written_locked_down_and_refreshed_without_changing_their_inode() {
        let dir = tempfile::tempdir().unwrap();
        let uid = std::fs::metadata(dir.path()).unwrap().uid();
        let secrets = [
            secret("A", "/run/iterion/secrets/A", None, "first-a"),
            secret("B", "/etc/b", None, "first-b"),
        ];
        let plan = secret_plan(&secrets, dir.path(), Some(&uid.to_string()), uid);
        write_secret_files(&plan, &secrets).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        let (a, b) = (&plan.files[0].host_path, &plan.files[1].host_path);
        let inode_b = std::fs::metadata(b).unwrap().ino();
        assert_eq!(
            (mode(a), mode(b), mode(a.parent().unwrap())),
            (0o400, 0o400, 0o500)
        );
        refresh_secret(&plan, "A", &"second".into()).unwrap();
        refresh_secret(&plan, "B", &"2".into()).unwrap();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(
            (
                read(a),
                read(b),
                std::fs::metadata(b).unwrap().ino() == inode_b,
                mode(a),
                mode(b),
                mode(a.parent().unwrap())
            ),
            (
                "second".to_owned(),
                "2".to_owned(),
                true,
                0o400,
                0o400,
                0o500
            )
        );
        let refused = [
            refresh_secret(&plan, "A", &"".into()).map_err(|e| e.to_string()),
            refresh_secret(&plan, "C", &"x".into()).map_err(|e| e.to_string()),
        ];
        assert_eq!(
            refused,
            [
                Err("sandbox: invalid spec: secret_files: refusing to refresh A with an empty value".to_owned()),
                Err("sandbox: invalid spec: secret_files: no file secret named C in this sandbox".to_owned()),
            ]
        );
    }
}

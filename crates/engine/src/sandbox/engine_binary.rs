//! Which `iterion` goes into the container at `/run/iterion/bin/iterion` (SANDBOX.md §8.4).
//!
//! The order is the spec's: `ITERION_BIN`, else the path the CLI installed with
//! [`crate::Engine::with_engine_binary`]. What the CLI installs is decided here too, by
//! [`container_binary_for`]: its own executable when that is statically linked, else a *static
//! twin* of it when one exists and is not older, else its own executable (which then only runs in
//! images with a compatible libc — the egress bridge and the claw runner fail closed elsewhere).
//!
//! Why a twin: a normal `cargo build` links glibc dynamically, and a static build needs its own
//! `--target` (build scripts and proc-macros must stay dynamic), so the two live side by side:
//! `scripts/build-static.sh` writes `target/static/<triple>/<profile>/iterion` next to
//! `target/<profile>/iterion`, and an installation may ship `iterion-static` beside `iterion`.
//! A twin older than the executable is a stale build of other code (the runner protocol may have
//! changed), so it is not taken.

use std::path::{Path, PathBuf};

use iterion_sandbox::{LinkKind, link_kind_of};
use iterion_vocab::Environment;

/// The variable that names the binary to bind, overriding every other choice.
pub const ITERION_BIN: &str = "ITERION_BIN";

/// How to get a static engine binary bound: the one remedy every message names.
pub(crate) const STATIC_BUILD_REMEDY: &str = "build the static engine binary with scripts/build-static.sh (it is found beside the executable), or point ITERION_BIN at a static Linux build of iterion";

/// The engine binary chosen for containers, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerBinary {
    /// The file to bind read-only.
    pub path: PathBuf,
    /// How it is linked.
    pub link: LinkKind,
    /// Why this one, for logs and the doctor.
    pub reason: String,
}

/// The binary a run binds: `env`'s `ITERION_BIN` when set and non-empty, else `installed`.
pub(crate) fn engine_binary_for_run(
    installed: Option<&Path>,
    env: &Environment,
) -> Option<PathBuf> {
    env.get_os(ITERION_BIN)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| installed.map(Path::to_path_buf))
}

/// The candidates for a static twin of `exe`, most specific first.
fn static_twins(exe: &Path) -> Vec<PathBuf> {
    let mut twins = Vec::new();
    let Some(dir) = exe.parent() else {
        return twins;
    };
    twins.push(dir.join("iterion-static"));
    // target/<profile>/iterion → target/static/<triple>/<profile>/iterion (scripts/build-static.sh)
    if let (Some(profile), Some(target)) = (dir.file_name(), dir.parent()) {
        let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        twins.push(
            target
                .join("static")
                .join(triple)
                .join(profile)
                .join("iterion"),
        );
    }
    twins
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// What the CLI installs as the engine binary when its own executable is `exe`.
pub fn container_binary_for(exe: &Path) -> ContainerBinary {
    let own = link_kind_of(exe);
    if own == LinkKind::Static {
        return ContainerBinary {
            path: exe.to_owned(),
            link: own,
            reason: "this executable is statically linked".to_owned(),
        };
    }
    let exe_time = modified(exe);
    let mut stale = None;
    for twin in static_twins(exe) {
        if link_kind_of(&twin) != LinkKind::Static {
            continue;
        }
        match (modified(&twin), exe_time) {
            (Some(t), Some(e)) if t < e => stale = Some(twin),
            _ => {
                return ContainerBinary {
                    reason: format!(
                        "this executable is not statically linked ({own}); its static build {} is bound instead",
                        twin.display()
                    ),
                    path: twin,
                    link: LinkKind::Static,
                };
            }
        }
    }
    let reason = match stale {
        Some(twin) => format!(
            "this executable is not statically linked ({own}) and its static build {} is older than it \
             (rebuild it with scripts/build-static.sh, or set ITERION_BIN): it runs only in \
             images with a compatible libc",
            twin.display()
        ),
        None => format!(
            "this executable is not statically linked ({own}) and no static build sits beside it \
             (scripts/build-static.sh, or set ITERION_BIN): it runs only in images with a \
             compatible libc"
        ),
    };
    ContainerBinary {
        path: exe.to_owned(),
        link: own,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::time::{Duration, SystemTime};

    fn copy_with_mtime(from: &Path, to: &Path, mtime: SystemTime) {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
        std::fs::File::options()
            .write(true)
            .open(to)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
    }

    /// The static build `scripts/build-static.sh` made (the test script exports it).
    fn static_build() -> Option<PathBuf> {
        std::env::var_os("ITERION_STATIC_BIN").map(PathBuf::from)
    }

    #[test]
    fn a_dynamic_executable_takes_its_fresh_static_twin_and_refuses_a_stale_one() {
        let Some(static_bin) = static_build() else {
            assert!(
                std::env::var_os("ITERION_IT_DOCKER").is_none(),
                "ITERION_STATIC_BIN is required under ITERION_IT_DOCKER=1"
            );
            return;
        };
        let dynamic = std::env::current_exe().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let exe = dir.path().join("target/debug/iterion");
        copy_with_mtime(&dynamic, &exe, now);
        let twin = dir
            .path()
            .join("target/static")
            .join(format!("{}-unknown-linux-gnu", std::env::consts::ARCH))
            .join("debug/iterion");

        let alone = container_binary_for(&exe);
        assert_eq!(
            (alone.path.as_path(), alone.link),
            (exe.as_path(), LinkKind::Dynamic)
        );
        assert!(alone.reason.contains("no static build"), "{}", alone.reason);

        copy_with_mtime(&static_bin, &twin, now - Duration::from_secs(60));
        let stale = container_binary_for(&exe);
        assert_eq!(stale.path, exe);
        assert!(stale.reason.contains("older than it"), "{}", stale.reason);

        copy_with_mtime(&static_bin, &twin, now + Duration::from_secs(1));
        let fresh = container_binary_for(&exe);
        assert_eq!((fresh.path, fresh.link), (twin, LinkKind::Static));

        // A static executable is its own choice, twin or not.
        let me = container_binary_for(&static_bin);
        assert_eq!((me.path, me.link), (static_bin, LinkKind::Static));
    }

    #[test]
    fn an_installed_iterion_static_beside_the_executable_is_found() {
        let Some(static_bin) = static_build() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("bin/iterion");
        copy_with_mtime(&std::env::current_exe().unwrap(), &exe, SystemTime::now());
        let twin = dir.path().join("bin/iterion-static");
        copy_with_mtime(&static_bin, &twin, SystemTime::now());
        assert_eq!(container_binary_for(&exe).path, twin);
    }
}

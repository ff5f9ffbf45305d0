//! The build context (SANDBOX.md §4.4): resolving a `build:` spec's paths inside the workspace,
//! and packing the context directory into the tar the classic builder takes.
//!
//! Blocking (filesystem) by nature: the driver calls these on the blocking pool.
//!
//! - Both paths are canonicalised (symlinks resolved) and must lie in the canonical workspace
//!   ([`validate_contains_workspace`]); the Dockerfile must lie in the context.
//! - The tar stores symlinks as links and never follows them, so a link in the context cannot
//!   smuggle a host file into the build. Sockets, FIFOs and devices are skipped. Headers are
//!   deterministic (owner 0, fixed mtime), so an unchanged context hits the builder's cache.
//! - `.dockerignore` is honoured with the common subset of its grammar: `#` comments, `*`, `?`,
//!   `**` (any number of directories), a leading `!` to re-include, a pattern matching a directory
//!   excluding what is under it, the last matching line winning. Character classes (`[a-z]`) are
//!   matched literally (a documented limit). The Dockerfile itself is always sent.

use std::path::{Component, Path, PathBuf};

use iterion_sandbox::{Build, Error, Result, validate_contains_workspace};

use crate::plan::build_paths;

/// A `build:` spec's inputs, resolved and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolvedBuild {
    /// The canonical context directory.
    pub context: PathBuf,
    /// The context as written, relative to the workspace (for the log line).
    pub context_written: String,
    /// The canonical Dockerfile relative to the context, `/`-separated.
    pub dockerfile_in_context: String,
}

/// Resolves and checks a `build:` spec's Dockerfile and context against the workspace.
///
/// # Errors
///
/// [`Error::EscapesWorkspace`] (`build context …`/`dockerfile … escapes the workspace`),
/// [`Error::DockerfileOutsideContext`], [`Error::Io`] when a path does not resolve.
pub(crate) fn resolve_build(workspace: &Path, build: &Build) -> Result<ResolvedBuild> {
    let (dockerfile, context_written) = build_paths(build);
    let context =
        validate_contains_workspace(workspace, Path::new(&context_written), "build context")?;
    let dockerfile_path =
        validate_contains_workspace(workspace, Path::new(&dockerfile), "dockerfile")?;
    let Ok(relative) = dockerfile_path.strip_prefix(&context) else {
        return Err(Error::DockerfileOutsideContext {
            dockerfile: dockerfile_path,
            context,
        });
    };
    let parts: Vec<&str> = relative
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect();
    if parts.is_empty() || parts.len() != relative.components().count() {
        return Err(Error::DockerfileOutsideContext {
            dockerfile: dockerfile_path,
            context,
        });
    }
    Ok(ResolvedBuild {
        context,
        context_written,
        dockerfile_in_context: parts.join("/"),
    })
}

/// One `.dockerignore` line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct IgnoreRule {
    /// `!pattern`: re-include.
    include: bool,
    segments: Vec<String>,
}

/// A parsed `.dockerignore`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DockerIgnore {
    rules: Vec<IgnoreRule>,
}

impl DockerIgnore {
    /// Parses the file's text.
    pub(crate) fn parse(text: &str) -> DockerIgnore {
        let rules = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .filter_map(|line| {
                let (include, pattern) = match line.strip_prefix('!') {
                    Some(rest) => (true, rest.trim()),
                    None => (false, line),
                };
                let segments: Vec<String> = pattern
                    .split('/')
                    .filter(|s| !s.is_empty() && *s != ".")
                    .map(str::to_owned)
                    .collect();
                (!segments.is_empty()).then_some(IgnoreRule { include, segments })
            })
            .collect();
        DockerIgnore { rules }
    }

    /// Whether `relative` (`/`-separated, relative to the context) is excluded: the last rule
    /// that matches it, or one of its parent directories, decides.
    pub(crate) fn is_excluded(&self, relative: &str) -> bool {
        let path: Vec<&str> = relative.split('/').filter(|s| !s.is_empty()).collect();
        let mut excluded = false;
        for rule in &self.rules {
            let hit = (1..=path.len()).any(|len| match_segments(&rule.segments, &path[..len]));
            if hit {
                excluded = !rule.include;
            }
        }
        excluded
    }
}

fn match_segments(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| match_segments(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((segment, path_rest)) => {
                glob(first.as_bytes(), segment.as_bytes()) && match_segments(rest, path_rest)
            }
            None => false,
        },
    }
}

/// `*` and `?` within one path segment.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| glob(rest, &name[skip..])),
        Some((b'?', rest)) => !name.is_empty() && glob(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && glob(rest, &name[1..]),
    }
}

/// The largest `.dockerignore` read (defined here).
pub(crate) const MAX_DOCKERIGNORE_BYTES: u64 = 256 * 1024;

/// Packs `context` into a tar, honouring its `.dockerignore`, storing symlinks as links.
///
/// # Errors
///
/// [`Error::Io`] naming the path that could not be read.
pub fn tar_context(context: &Path, dockerfile_in_context: &str) -> Result<Vec<u8>> {
    let root =
        iterion_repofile::RepoRoot::open(context).map_err(|source| Error::RepoFile { source })?;
    tar_context_at(&root, context, dockerfile_in_context)
}

/// [`tar_context`] of `context` opened beneath `workspace` by fd (issue 15 item 12): the
/// context's own path is resolved beneath the workspace once, and every file is opened beneath
/// that handle, so a component of the workspace flipped to a symlink after [`resolve_build`]
/// checked it cannot redirect what is packed.
///
/// # Errors
///
/// As [`tar_context`]; a context that no longer resolves beneath the workspace is
/// [`Error::RepoFile`].
pub(crate) fn tar_context_in(
    workspace: &Path,
    context: &Path,
    dockerfile_in_context: &str,
) -> Result<Vec<u8>> {
    let repo_file = |source| Error::RepoFile { source };
    let workspace = std::fs::canonicalize(workspace).map_err(|source| Error::Io {
        operation: "canonicalize",
        path: workspace.to_owned(),
        source,
    })?;
    let relative = iterion_repofile::relative_to(&workspace, context).map_err(repo_file)?;
    let root = iterion_repofile::RepoRoot::open(&workspace)
        .and_then(|ws| ws.open_dir(&relative))
        .map_err(repo_file)?;
    tar_context_at(&root, context, dockerfile_in_context)
}

fn tar_context_at(
    root: &iterion_repofile::RepoRoot,
    context: &Path,
    dockerfile_in_context: &str,
) -> Result<Vec<u8>> {
    let io = |operation: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io {
            operation,
            path,
            source,
        }
    };
    // Every file of the context is read through the one repository-file reader
    // (iterion_repofile): a regular file beneath the context, opened without a window for a
    // swap (a file flipped to a symlink to a host path after the walk saw it is refused, not
    // read). Symlinks are stored as links, never followed; FIFOs, sockets and devices are skipped.
    let ignore = match root.read(Path::new(".dockerignore"), MAX_DOCKERIGNORE_BYTES) {
        Ok(bytes) => DockerIgnore::parse(&String::from_utf8_lossy(&bytes)),
        Err(error) if error.is_not_found() => DockerIgnore::default(),
        Err(source) => return Err(Error::RepoFile { source }),
    };
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Deterministic);
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        let absolute = context.join(&dir);
        let mut entries: Vec<(String, PathBuf)> = std::fs::read_dir(&absolute)
            .map_err(io("read directory", &absolute))?
            .map(|entry| {
                let entry = entry.map_err(io("read directory", &absolute))?;
                Ok((
                    entry.file_name().to_string_lossy().into_owned(),
                    entry.path(),
                ))
            })
            .collect::<Result<_>>()?;
        entries.sort();
        for (name, path) in entries {
            let relative = dir.join(&name);
            let Some(relative_str) = relative.to_str().map(str::to_owned) else {
                continue;
            };
            let always = relative_str == dockerfile_in_context;
            let meta = std::fs::symlink_metadata(&path).map_err(io("stat", &path))?;
            let kind = meta.file_type();
            if kind.is_dir() {
                if !ignore.is_excluded(&relative_str) {
                    builder
                        .append_dir(&relative, &path)
                        .map_err(io("pack", &path))?;
                }
                // Walk it anyway: a `!` rule may re-include something below an excluded dir.
                stack.push(relative);
            } else if kind.is_symlink() && (always || !ignore.is_excluded(&relative_str)) {
                builder
                    .append_path_with_name(&path, &relative)
                    .map_err(io("pack", &path))?;
            } else if kind.is_file() && (always || !ignore.is_excluded(&relative_str)) {
                let file = root
                    .open_file(&relative)
                    .map_err(|source| Error::RepoFile { source })?;
                let meta = file.metadata().map_err(io("stat", &path))?;
                let mut header = tar::Header::new_gnu();
                header.set_metadata_in_mode(&meta, tar::HeaderMode::Deterministic);
                header.set_size(meta.len());
                use std::io::Read as _;
                builder
                    .append_data(&mut header, &relative, file.take(meta.len()))
                    .map_err(io("pack", &path))?;
            }
        }
    }
    builder.into_inner().map_err(io("pack", context))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn dockerignore_matches_like_the_builder() {
        let ignore = DockerIgnore::parse(
            "# comment\n\n*.log\ntarget\n**/node_modules\n!keep.log\nsecrets/*.pem\n",
        );
        let paths = [
            "a.log",
            "keep.log",
            "src/a.log",
            "target",
            "target/debug/x",
            "web/node_modules/a",
            "node_modules/a",
            "secrets/a.pem",
            "secrets/sub/a.pem",
            "src/main.rs",
        ];
        let got: Vec<(&str, bool)> = paths.iter().map(|p| (*p, ignore.is_excluded(p))).collect();
        assert_eq!(
            got,
            vec![
                ("a.log", true),
                ("keep.log", false),
                ("src/a.log", false),
                ("target", true),
                ("target/debug/x", true),
                ("web/node_modules/a", true),
                ("node_modules/a", true),
                ("secrets/a.pem", true),
                ("secrets/sub/a.pem", false),
                ("src/main.rs", false),
            ]
        );
    }

    #[test]
    fn the_context_tar_honours_dockerignore_and_keeps_symlinks_as_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("Dockerfile"), "FROM x\n").unwrap();
        std::fs::write(root.join(".dockerignore"), "*.log\nDockerfile\ncache\n").unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::write(root.join("b.log"), "b").unwrap();
        std::fs::create_dir(root.join("cache")).unwrap();
        std::fs::write(root.join("cache/c"), "c").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("link")).unwrap();
        let tar = tar_context(root, "Dockerfile").unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut got: Vec<(String, tar::EntryType, Option<String>)> = archive
            .entries()
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (
                    entry.path().unwrap().display().to_string(),
                    entry.header().entry_type(),
                    entry.link_name().unwrap().map(|l| l.display().to_string()),
                )
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            vec![
                (".dockerignore".to_owned(), tar::EntryType::Regular, None),
                ("Dockerfile".to_owned(), tar::EntryType::Regular, None),
                ("a.txt".to_owned(), tar::EntryType::Regular, None),
                (
                    "link".to_owned(),
                    tar::EntryType::Symlink,
                    Some("/etc/hostname".to_owned())
                ),
            ]
        );
    }

    #[test]
    fn build_paths_must_stay_in_the_workspace_and_the_dockerfile_in_its_context() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("docker")).unwrap();
        std::fs::write(ws.join("docker/Dockerfile"), "FROM x\n").unwrap();
        std::fs::write(ws.join("Dockerfile"), "FROM x\n").unwrap();
        std::fs::write(dir.path().join("Outside"), "FROM x\n").unwrap();
        std::os::unix::fs::symlink(dir.path(), ws.join("up")).unwrap();
        let build = |dockerfile: &str, context: Option<&str>| Build {
            dockerfile: dockerfile.to_owned(),
            context: context.map(str::to_owned),
            ..Build::default()
        };
        let ok = resolve_build(&ws, &build("docker/Dockerfile", None)).unwrap();
        assert_eq!(
            ok,
            ResolvedBuild {
                context: ws.canonicalize().unwrap().join("docker"),
                context_written: "docker".to_owned(),
                dockerfile_in_context: "Dockerfile".to_owned(),
            }
        );
        let refusals: Vec<String> = [
            build("../Outside", Some(".")),
            build("Dockerfile", Some("..")),
            build("up/Outside", Some(".")),
            build("Dockerfile", Some("up")),
            build("Dockerfile", Some("docker")),
        ]
        .iter()
        .map(|b| {
            let error = resolve_build(&ws, b).unwrap_err();
            format!("{} {}", error.code(), error).replace(
                &dir.path().canonicalize().unwrap().display().to_string(),
                "<tmp>",
            )
        })
        .collect();
        assert_eq!(
            refusals,
            vec![
                "SANDBOX_SETUP_FAILED dockerfile <tmp>/Outside escapes the workspace",
                "SANDBOX_SETUP_FAILED build context <tmp> escapes the workspace",
                "SANDBOX_SETUP_FAILED dockerfile <tmp>/Outside escapes the workspace",
                "SANDBOX_SETUP_FAILED build context <tmp> escapes the workspace",
                "SANDBOX_SETUP_FAILED dockerfile outside build context",
            ]
        );
    }
    /// Issue 15 item 12: a `.dockerignore` that is a FIFO or a symlink to `/dev/stdin` refuses
    /// the build at once (naming the file), and a FIFO or device in the context is never read.
    #[test]
    fn a_hostile_dockerignore_refuses_at_once_and_special_files_are_never_read() {
        let started = std::time::Instant::now();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Dockerfile"), "FROM x\n").unwrap();
        std::os::unix::fs::symlink("/dev/stdin", dir.path().join(".dockerignore")).unwrap();
        let error = tar_context(dir.path(), "Dockerfile").unwrap_err();
        assert!(
            error.to_string().contains(".dockerignore") && error.to_string().contains("outside"),
            "{error}"
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Dockerfile"), "FROM x\n").unwrap();
        nix::unistd::mkfifo(
            &dir.path().join(".dockerignore"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let error = tar_context(dir.path(), "Dockerfile").unwrap_err();
        assert!(error.to_string().contains("fifo"), "{error}");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Dockerfile"), "FROM x\n").unwrap();
        nix::unistd::mkfifo(
            &dir.path().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let tar = tar_context(dir.path(), "Dockerfile").unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, vec!["Dockerfile".to_owned()]);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
    /// Issue 15 item 12: a context directory flipped to a symlink out of the workspace after
    /// `resolve_build` checked it packs nothing from outside: the context is opened beneath the
    /// workspace by fd.
    #[test]
    fn a_context_flipped_to_a_symlink_after_the_check_packs_nothing_from_outside() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("Dockerfile"), "FROM x\n").unwrap();
        std::fs::write(outside.path().join("host-secret"), "s3cr3t").unwrap();
        let ws = tempfile::tempdir().unwrap();
        let ws_path = ws.path().canonicalize().unwrap();
        std::fs::create_dir(ws_path.join("ctx")).unwrap();
        std::fs::write(ws_path.join("ctx/Dockerfile"), "FROM x\n").unwrap();
        let build = iterion_sandbox::Build {
            dockerfile: "ctx/Dockerfile".to_owned(),
            context: Some("ctx".to_owned()),
            args: Default::default(),
        };
        let resolved = resolve_build(&ws_path, &build).unwrap();
        std::fs::remove_dir_all(ws_path.join("ctx")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws_path.join("ctx")).unwrap();
        let error = tar_context_in(&ws_path, &resolved.context, &resolved.dockerfile_in_context)
            .unwrap_err();
        assert!(
            error.to_string().contains("outside the repository"),
            "{error}"
        );
    }
}

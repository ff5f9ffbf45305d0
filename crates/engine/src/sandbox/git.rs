//! Every `git` command iterion runs on the host goes through [`HostGit`] (issue 15 item 2): the
//! repository it runs in may have been written by a sandbox (a trusted `worktree: auto` run binds
//! `<repo>/.git` read-write) or be a stranger's pull request, so no hook, fsmonitor, pager,
//! editor, credential helper, ssh command, filter, diff or merge driver, textconv or auto-gc of
//! that repository ever runs, and neither the system nor the global config is read.
//!
//! How, in one place:
//! - the environment: `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`, no terminal prompt,
//!   `cat` as pager, `:` as editor, every inherited `GIT_*` variable removed (a `GIT_DIR`,
//!   `GIT_CONFIG_PARAMETERS` or `GIT_EXTERNAL_DIFF` of the operator's shell is not ours to honour);
//! - command-line config, which outranks every config file and every `include`/`includeIf`
//!   (`-c` is read last): [`FIXED_OVERRIDES`], plus, for the repository at hand, every
//!   `filter.<driver>.*`, `diff.<driver>.*` and `merge.<driver>.*` command its config (includes
//!   followed) names, blanked — driver names are arbitrary, so they are read first with
//!   `git config --get-regexp`, which runs nothing.
//!
//! The commands themselves are chosen to need none of that: the landing of a run's result is
//! `git fast-import` (no attributes, no filters, no hooks), never `git add`/`git commit`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use iterion_vocab::Environment;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// How long one host git command may take before it is killed.
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Config set on every host git command (`-c key=value`), whatever the repository says.
pub(crate) const FIXED_OVERRIDES: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=:",
    "core.askPass=",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.attributesFile=/dev/null",
    "core.alternateRefsCommand=",
    "core.symlinks=true",
    "credential.helper=",
    "diff.external=",
    "sequence.editor=:",
    "gpg.program=false",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
];

/// Why a host git command failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started.
    #[error("cannot run git: {source}")]
    Spawn {
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
    /// A `git` command failed.
    #[error("git {command} failed with status {status}: {stderr}")]
    Failed {
        /// The arguments, space-joined.
        command: String,
        /// Its exit code (-1 when killed by a signal).
        status: i32,
        /// Its stderr, trimmed (bounded).
        stderr: String,
    },
    /// A `git` command did not finish in time and was killed.
    #[error("git {command} did not finish within {seconds} s")]
    Timeout {
        /// The arguments, space-joined.
        command: String,
        /// The bound.
        seconds: u64,
    },
}

/// A hardened `git` runner for one directory (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct HostGit {
    dir: PathBuf,
    /// `-c` overrides for the repository's own drivers, read once.
    drivers: Vec<String>,
    /// Extra environment (e.g. `GIT_DIR` of a bare landing repository).
    env: Vec<(String, String)>,
    /// The `GIT_*` variables of the engine's environment, removed from every command.
    inherited: Vec<std::ffi::OsString>,
}

impl HostGit {
    /// A runner for `dir`, for commands that apply no attributes to a work tree (`rev-parse`,
    /// `config`, `ls-tree`, `fast-import`, `update-ref`, `worktree remove`): the fixed overrides
    /// only, no extra process.
    pub(crate) fn plain(dir: &Path, host: &Environment) -> HostGit {
        HostGit {
            dir: dir.to_owned(),
            drivers: Vec::new(),
            env: Vec::new(),
            inherited: inherited_git_vars(host),
        }
    }

    /// A runner for `dir` that also blanks every filter/diff/merge driver the repository's config
    /// names (read with one `git config` first), for commands that check out or diff a work tree
    /// (`worktree add`, `diff-tree -p`). Outside a repository there are none, and that is not an
    /// error.
    pub(crate) async fn open(dir: &Path, host: &Environment) -> HostGit {
        let mut git = HostGit::plain(dir, host);
        git.drivers = git.read_driver_overrides().await;
        git
    }

    /// A runner for the bare repository at `git_dir` (no work tree, so no driver can apply).
    pub(crate) fn bare(git_dir: &Path, host: &Environment) -> HostGit {
        HostGit {
            env: vec![("GIT_DIR".to_owned(), git_dir.to_string_lossy().into_owned())],
            ..HostGit::plain(git_dir, host)
        }
    }

    /// `filter.X.clean=` and the like for every driver the repository's config names.
    async fn read_driver_overrides(&self) -> Vec<String> {
        let Ok(names) = self
            .run_raw(
                &[
                    "config",
                    "--null",
                    "--name-only",
                    "--get-regexp",
                    r"^(filter|diff|merge)\.",
                ],
                None,
            )
            .await
        else {
            return Vec::new();
        };
        driver_overrides(&names)
    }

    /// The base command: hardened environment and every override.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        for key in &self.inherited {
            cmd.env_remove(key);
        }
        cmd.envs([
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_PAGER", "cat"),
            ("PAGER", "cat"),
            ("GIT_EDITOR", ":"),
            ("GIT_ASKPASS", ""),
            ("SSH_ASKPASS", ""),
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("LC_ALL", "C"),
        ]);
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd.arg("--no-pager");
        for value in FIXED_OVERRIDES
            .iter()
            .copied()
            .map(str::to_owned)
            .chain(self.drivers.iter().cloned())
        {
            cmd.arg("-c").arg(value);
        }
        cmd.arg("-C")
            .arg(&self.dir)
            .args(args.iter().map(OsStr::new));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `git args…` (stdin fed from `input` when given); its raw stdout.
    async fn run_raw(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, GitError> {
        let shown = args.join(" ");
        let mut cmd = self.command(args);
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let work = async {
            let mut child = cmd.spawn().map_err(|source| GitError::Spawn { source })?;
            if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
                // A write error (git exited early) shows in its status and stderr below.
                let _ = stdin.write_all(input).await;
                drop(stdin);
            }
            child
                .wait_with_output()
                .await
                .map_err(|source| GitError::Spawn { source })
        };
        let out = tokio::time::timeout(GIT_TIMEOUT, work)
            .await
            .map_err(|_| GitError::Timeout {
                command: shown.clone(),
                seconds: GIT_TIMEOUT.as_secs(),
            })??;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(GitError::Failed {
                command: shown,
                status: out.status.code().unwrap_or(-1),
                stderr: iterion_agent::text::truncate_bytes(stderr.trim(), 2_000).to_owned(),
            })
        }
    }

    /// Runs `git args…`; its trimmed stdout.
    pub(crate) async fn run(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.run_raw(args, None).await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// Runs `git args…`; its raw stdout.
    pub(crate) async fn run_bytes(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        self.run_raw(args, None).await
    }

    /// `git config --get key`, `None` when unset or empty.
    pub(crate) async fn config(&self, key: &str) -> Option<String> {
        self.run(&["config", "--get", key])
            .await
            .ok()
            .filter(|v| !v.is_empty())
    }
}

/// The `GIT_*` variables of `host` (the engine's environment, the process's as its entry point
/// read it): every host git command is started without them.
fn inherited_git_vars(host: &Environment) -> Vec<std::ffi::OsString> {
    host.iter()
        .map(|(key, _)| key)
        .filter(|key| key.to_string_lossy().starts_with("GIT_"))
        .map(std::ffi::OsStr::to_os_string)
        .collect()
}

/// The `-c` overrides that blank every command of the drivers named in `names` (the NUL-separated
/// output of `git config --null --name-only --get-regexp '^(filter|diff|merge)\.'`). Pure.
pub(crate) fn driver_overrides(names: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names.split(|b| *b == 0) {
        let name = String::from_utf8_lossy(name);
        let name = name.trim();
        // `section.<driver>.key`: the driver is everything between the first and the last dot.
        let (Some(first), Some(last)) = (name.find('.'), name.rfind('.')) else {
            continue;
        };
        if first == last {
            continue;
        }
        let section = name[..first].to_ascii_lowercase();
        let driver = &name[first + 1..last];
        // A driver name with a newline or `=` cannot be passed back as `-c` safely; such a
        // config entry is neutralised by refusing nothing here but is never used by the commands
        // iterion runs (no add/checkout/diff of a work tree with attributes).
        if driver.contains(['\n', '\0', '=']) {
            continue;
        }
        let keys: &[&str] = match section.as_str() {
            "filter" => &["clean=", "smudge=", "process=", "required=false"],
            "diff" => &["command=", "textconv=", "binary=false"],
            "merge" => &["driver="],
            _ => continue,
        };
        for key in keys {
            let entry = format!("{section}.{driver}.{key}");
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "git_tests.rs"]
mod tests;

//! Devbox provisioning, the pure part (SANDBOX.md §15): which `devbox.json` sources are installed,
//! the install prologue prepended to `post_create`, and the profile bin directories prepended to
//! `PATH`. Provisioning is opted into by file presence only; a source deliberately not installed
//! is reported, never silently dropped. Devbox failures never fail the run: every install is
//! `|| echo … >&2`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::spec::Spec;
use crate::text::has_control;

use super::convert::posix_quote;
use iterion_repofile::RepoFileError;

use super::read::repo_text;

/// `on`/`off` (default on): whether the repository's `devbox.json` is installed (§15, §17.1).
pub const ITERION_REPO_DEVBOX: &str = "ITERION_REPO_DEVBOX";

/// `PATH` when the spec sets none; the image's own `PATH` replaces it later (§8.10).
pub const DEVBOX_BASE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the bot config is staged and installed inside the sandbox.
pub const DEVBOX_BOT_STAGE_DIR: &str = "/tmp/iterion-devbox/bot";

/// Where the bundle dir is mounted inside the sandbox (drivers with host binds).
pub const DEVBOX_BUNDLE_DIR: &str = "/run/iterion/bundle";

/// A bot config plus its lock larger than this is declined (§15).
pub(super) const DEVBOX_INLINE_LIMIT_BYTES: u64 = 512 * 1024;

const PROFILE_BIN: &str = ".devbox/nix/profile/default/bin";

/// A provisioning source, in `PATH` precedence order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DevboxSource {
    /// `<workspace>/devbox.json`.
    Repo,
    /// `<bundle dir>/devbox.json`, when the bundle dir is not the workspace root.
    Bot,
}

impl DevboxSource {
    /// `repo` or `bot`, as in `sandbox_devbox_provisioned`.
    pub fn as_str(self) -> &'static str {
        match self {
            DevboxSource::Repo => "repo",
            DevboxSource::Bot => "bot",
        }
    }
}

impl fmt::Display for DevboxSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the repo source is installed, and who said no.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepoDevbox {
    /// Installed (the default).
    On,
    /// Not installed; `by` is the reason reported in `skipped_reasons`.
    Off {
        /// The setting that turned it off (`ITERION_REPO_DEVBOX=off`).
        by: &'static str,
    },
}

/// Resolves the repo source switch (§15): a workflow-level setting, when the DSL has one, wins
/// over [`ITERION_REPO_DEVBOX`]; unset or empty means on.
///
/// # Errors
///
/// [`Error::InvalidSetting`] when the variable is neither a truthy nor a falsy word (exit 2).
pub fn resolve_repo_devbox(
    workflow: Option<RepoDevbox>,
    env_value: Option<&str>,
) -> Result<RepoDevbox> {
    if let Some(setting) = workflow {
        return Ok(setting);
    }
    match env_value.map(str::trim).filter(|value| !value.is_empty()) {
        None => Ok(RepoDevbox::On),
        Some(value) => match crate::vars::parse_switch(value) {
            Some(true) => Ok(RepoDevbox::On),
            Some(false) => Ok(RepoDevbox::Off {
                by: "ITERION_REPO_DEVBOX=off",
            }),
            None => Err(Error::InvalidSetting {
                variable: ITERION_REPO_DEVBOX,
                value: value.to_owned(),
                want: "on or off",
            }),
        },
    }
}

/// A `devbox.json` that was found and read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevboxConfig {
    /// The host path of `devbox.json`.
    pub path: PathBuf,
    /// Its content (written inline when there is no bundle mount).
    pub content: String,
    /// `devbox.lock` beside it, when present.
    pub lock: Option<String>,
}

/// What [`read_devbox_config`] found in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DevboxRead {
    /// No `devbox.json`: nothing to provision, nothing reported.
    Absent,
    /// Found and read.
    Present(DevboxConfig),
    /// Found but declined (unreadable, or config plus lock over
    /// `DEVBOX_INLINE_LIMIT_BYTES`); reported with its reason.
    Declined {
        /// The host path of `devbox.json`.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Reads `<dir>/devbox.json` and its `devbox.lock` (the I/O shell of §15).
pub fn read_devbox_config(dir: &Path) -> DevboxRead {
    let path = dir.join("devbox.json");
    if std::fs::symlink_metadata(&path).is_err() {
        return DevboxRead::Absent;
    }
    let declined = |reason: String| DevboxRead::Declined {
        path: path.clone(),
        reason,
    };
    // Through the one repository-file reader: a regular file beneath `dir` (a devbox.json
    // symlinked to /dev/stdin or a FIFO is declined at once, never read), capped, time-bounded.
    let content = match repo_text(dir, Path::new("devbox.json"), DEVBOX_INLINE_LIMIT_BYTES) {
        Ok(content) => content,
        Err(RepoFileError::TooLarge { .. }) => {
            return declined(format!("larger than {DEVBOX_INLINE_LIMIT_BYTES} bytes"));
        }
        Err(error) => return declined(error.to_string()),
    };
    let lock_path = dir.join("devbox.lock");
    let lock = if std::fs::symlink_metadata(&lock_path).is_ok() {
        let left = DEVBOX_INLINE_LIMIT_BYTES - content.len() as u64;
        match repo_text(dir, Path::new("devbox.lock"), left) {
            Ok(lock) => Some(lock),
            Err(RepoFileError::TooLarge { .. }) => {
                return declined(format!(
                    "devbox.json plus devbox.lock larger than {DEVBOX_INLINE_LIMIT_BYTES} bytes"
                ));
            }
            Err(error) => return declined(format!("devbox.lock: {error}")),
        }
    } else {
        None
    };
    DevboxRead::Present(DevboxConfig {
        path,
        content,
        lock,
    })
}

/// What [`plan_devbox`] needs, as values.
#[derive(Clone, Copy, Debug)]
pub struct DevboxInputs<'a> {
    /// `<workspace>/devbox.json`.
    pub repo: &'a DevboxRead,
    /// `<bundle dir>/devbox.json`; `None` when the bundle dir is the workspace root.
    pub bot: Option<&'a DevboxRead>,
    /// The repo source switch ([`resolve_repo_devbox`]).
    pub repo_devbox: RepoDevbox,
    /// The workspace path inside the sandbox (`workspace_folder`, else the host path).
    pub workspace_in_sandbox: &'a str,
    /// Whether the bundle dir is mounted at [`DEVBOX_BUNDLE_DIR`]; false on kubernetes, where
    /// the bot config is written inline.
    pub bundle_mounted: bool,
    /// Where the bot config is staged and installed: [`DEVBOX_BOT_STAGE_DIR`] in the sandbox, a
    /// per-run temp dir on the host.
    pub bot_stage_dir: &'a str,
}

/// The provisioning plan, and the `sandbox_devbox_provisioned {target: "sandbox"}` facts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevboxPlan {
    /// Sources installed, in order.
    pub sources: Vec<DevboxSource>,
    /// Host paths of their configs.
    pub configs: Vec<PathBuf>,
    /// Profile bin dirs, in `PATH` order (repo first); the bot's is under the stage dir.
    pub bin_dirs: Vec<String>,
    /// The script prepended to `post_create`; `None` when nothing is installed.
    pub prologue: Option<String>,
    /// Sources found but not installed, with the reason at the same index.
    pub skipped_sources: Vec<DevboxSource>,
    /// Why each skipped source was not installed.
    pub skipped_reasons: Vec<String>,
    /// Run-log warnings (a bin dir skipped for a `:` or a control character).
    pub warnings: Vec<String>,
}

impl DevboxPlan {
    /// Whether there is nothing to do and nothing to report (no event).
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty() && self.skipped_sources.is_empty()
    }
}

/// Plans provisioning (SANDBOX.md §15). Pure. The sandbox target runs the `prologue`; the host
/// target (no sandbox) runs the same installs itself from `sources`, `configs` and
/// [`DevboxInputs::bot_stage_dir`], and ignores the prologue.
pub fn plan_devbox(inputs: &DevboxInputs<'_>) -> DevboxPlan {
    let mut plan = DevboxPlan::default();
    let mut installs = Vec::new();
    let ws = inputs.workspace_in_sandbox.trim_end_matches('/');
    let ws = if ws.is_empty() { "/" } else { ws };
    match (inputs.repo, inputs.repo_devbox) {
        (DevboxRead::Absent, _) => {}
        (_, RepoDevbox::Off { by }) => plan.skip(DevboxSource::Repo, by.to_owned()),
        (DevboxRead::Declined { reason, .. }, RepoDevbox::On) => {
            plan.skip(DevboxSource::Repo, reason.clone());
        }
        (DevboxRead::Present(config), RepoDevbox::On) => {
            let mut install = format!(
                "devbox install -c {ws_q} || echo {msg} >&2",
                ws_q = posix_quote(ws),
                msg = posix_quote(&format!(
                    "iterion: devbox install failed for {}",
                    join(ws, "devbox.json")
                )),
            );
            if config.lock.is_none() {
                // The repository had no lock: remove the one install creates, so git shows no
                // change.
                install.push_str(&format!(
                    "\nrm -f {}",
                    posix_quote(&join(ws, "devbox.lock"))
                ));
            }
            installs.push(install);
            plan.add(DevboxSource::Repo, config, &join(ws, PROFILE_BIN));
        }
    }
    match inputs.bot {
        None | Some(DevboxRead::Absent) => {}
        Some(DevboxRead::Declined { reason, .. }) => plan.skip(DevboxSource::Bot, reason.clone()),
        Some(DevboxRead::Present(config)) => {
            installs.push(bot_install(
                config,
                inputs.bundle_mounted,
                inputs.bot_stage_dir,
            ));
            plan.add(
                DevboxSource::Bot,
                config,
                &join(inputs.bot_stage_dir, PROFILE_BIN),
            );
        }
    }
    if !installs.is_empty() {
        plan.prologue = Some(format!(
            "if command -v devbox >/dev/null 2>&1; then\nexport DEVBOX_NO_PROMPT=1\n{}\nelse\necho 'iterion: devbox is not on PATH; devbox.json not installed' >&2\nfi",
            installs.join("\n")
        ));
    }
    plan
}

impl DevboxPlan {
    fn skip(&mut self, source: DevboxSource, reason: String) {
        self.skipped_sources.push(source);
        self.skipped_reasons.push(reason);
    }

    fn add(&mut self, source: DevboxSource, config: &DevboxConfig, bin_dir: &str) {
        self.sources.push(source);
        self.configs.push(config.path.clone());
        if bin_dir.contains(':') || has_control(bin_dir) {
            self.warnings.push(format!(
                "devbox: {source} bin dir {} skipped: it contains ':' or a control character",
                crate::text::escape_controls(bin_dir)
            ));
        } else {
            self.bin_dirs.push(bin_dir.to_owned());
        }
    }
}

fn bot_install(config: &DevboxConfig, bundle_mounted: bool, stage: &str) -> String {
    let mut steps = vec![format!("mkdir -p {stage}")];
    if bundle_mounted {
        steps.push(format!(
            "cp {DEVBOX_BUNDLE_DIR}/devbox.json {stage}/devbox.json"
        ));
        if config.lock.is_some() {
            steps.push(format!(
                "cp {DEVBOX_BUNDLE_DIR}/devbox.lock {stage}/devbox.lock"
            ));
        }
    } else {
        steps.push(format!(
            "printf '%s' {} > {stage}/devbox.json",
            posix_quote(&config.content)
        ));
        if let Some(lock) = &config.lock {
            steps.push(format!(
                "printf '%s' {} > {stage}/devbox.lock",
                posix_quote(lock)
            ));
        }
    }
    steps.push(format!("devbox install -c {stage}"));
    format!(
        "{{ {}; }} || echo 'iterion: devbox install failed for {stage}/devbox.json' >&2",
        steps.join(" && ")
    )
}

fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Applies a plan to the spec (§15): the prologue goes before `post_create` (joined with a
/// newline, blank fragments dropped) and the bin dirs before `PATH` — also when the workflow set
/// `PATH`; the base is the spec's `PATH`, else [`DEVBOX_BASE_PATH`]. Returns the new `PATH`
/// (`sandbox_devbox_provisioned.path`), or `None` when there were no bin dirs.
pub fn apply_devbox_plan(spec: &mut Spec, plan: &DevboxPlan) -> Option<String> {
    if let Some(prologue) = &plan.prologue {
        let joined: Vec<&str> = [Some(prologue.as_str()), spec.post_create.as_deref()]
            .into_iter()
            .flatten()
            .filter(|fragment| !fragment.trim().is_empty())
            .collect();
        spec.post_create = Some(joined.join("\n"));
    }
    if plan.bin_dirs.is_empty() {
        return None;
    }
    let base = spec
        .env
        .get("PATH")
        .filter(|path| !path.is_empty())
        .cloned()
        .unwrap_or_else(|| DEVBOX_BASE_PATH.to_owned());
    let path = format!("{}:{base}", plan.bin_dirs.join(":"));
    spec.env.insert("PATH".to_owned(), path.clone());
    Some(path)
}

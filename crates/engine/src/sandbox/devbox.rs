//! M4 (the bundle bind), M7 (devbox provisioning, SANDBOX.md §15) and `plant_image_env` (§8.10):
//! the engine's side of what `iterion_sandbox::plan_devbox` plans purely.
//!
//! Provisioning is opted into by file presence only: `<workspace>/devbox.json` (repo) and
//! `<bundle dir>/devbox.json` (bot, when the workflow's directory is not the workspace root). Under
//! a driver that runs `post_create`, an install prologue goes before it and the profile bin dirs
//! go before `PATH`; the install never fails the run. Because the spec's `PATH` base is a guess
//! until the image is known, [`plant_image_env`] replaces it with the image's own after Prepare.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iterion_sandbox::{
    DEVBOX_BASE_PATH, DEVBOX_BOT_STAGE_DIR, DEVBOX_BUNDLE_DIR, DevboxConfig, DevboxInputs,
    DevboxPlan, DevboxRead, DevboxSource, EngineMount, EngineMountKind, ITERION_REPO_DEVBOX,
    ImageConfig, RepoDevbox, ScreenContext, Spec, apply_devbox_plan, plan_devbox,
    read_devbox_config, resolve_repo_devbox,
};
use iterion_vocab::Environment;

use crate::records::sandbox_events::{
    DevboxTarget, SandboxDevboxProvisioned, SandboxImageEnvPlanted,
};
use crate::sandbox::error::SetupError;
use crate::sandbox::host::HostPath;

/// The suffix every devbox profile bin dir ends with (§15).
const PROFILE_BIN_SUFFIX: &str = "/.devbox/nix/profile/default/bin";

/// M4: the bundle dir (the workflow file's directory) bound read-only at `/run/iterion/bundle`,
/// on host-bind drivers only, when it passes the workspace screen (§5.3) and is not the workspace
/// root. Returns whether it was bound. A refused or unresolvable bundle is logged, not fatal: it
/// only serves the bot devbox config.
pub(crate) fn add_bundle_mount(
    spec: &mut Spec,
    bundle_dir: Option<&Path>,
    workspace: &Path,
    host_binds: bool,
    env: &Environment,
) -> bool {
    let Some(dir) = bundle_dir.filter(|_| host_binds) else {
        return false;
    };
    let screened =
        ScreenContext::from_env(workspace, env).and_then(|ctx| ctx.validate_workspace(dir));
    match screened {
        Ok(canonical) if canonical != workspace => {
            spec.engine_mounts.push(EngineMount {
                kind: EngineMountKind::Bind,
                source: canonical.to_string_lossy().into_owned(),
                target: DEVBOX_BUNDLE_DIR.to_owned(),
                read_only: true,
                purpose: "bundle".to_owned(),
            });
            true
        }
        Ok(_) => false,
        Err(error) => {
            tracing::warn!("sandbox: the workflow's directory is not bound as the bundle: {error}");
            false
        }
    }
}

/// Whether `bundle_dir` is §15's bot source: a workflow directory that is not the workspace root
/// (the workspace's own `devbox.json` is the repo source).
fn is_bot_bundle(bundle_dir: &Path, workspace: &Path) -> bool {
    bundle_dir != workspace
}

/// The bot source's `devbox.json` of a workflow whose file is in `bundle_dir`, when there is one
/// (SANDBOX.md §15): what a subbot child that adopts its parent's sandbox does not get
/// provisioned (§14). Paths are compared canonical.
pub(crate) async fn bot_config(bundle_dir: &Path, workspace: &Path) -> Option<PathBuf> {
    let (bundle_dir, workspace) = (bundle_dir.to_owned(), workspace.to_owned());
    tokio::task::spawn_blocking(move || {
        let bundle = bundle_dir.canonicalize().ok()?;
        let workspace = workspace.canonicalize().unwrap_or(workspace);
        let config = bundle.join("devbox.json");
        (is_bot_bundle(&bundle, &workspace) && config.is_file()).then_some(config)
    })
    .await
    .ok()
    .flatten()
}

/// What M7 needs besides the spec.
pub(crate) struct DevboxHost<'a> {
    /// The host workspace, canonical.
    pub workspace: &'a Path,
    /// The workflow file's directory, when it is not the workspace root.
    pub bundle_dir: Option<&'a Path>,
    /// Whether M4 bound the bundle dir.
    pub bundle_mounted: bool,
    /// The engine's environment (`ITERION_REPO_DEVBOX`).
    pub env: &'a Environment,
    /// The workflow's `repo_devbox` (`ir::Workflow::repo_devbox`).
    pub workflow_setting: Option<bool>,
}

/// Whether the target repository's `devbox.json` is provisioned: the workflow's `repo_devbox`,
/// else `ITERION_REPO_DEVBOX`, else on (§15).
fn repo_devbox(workflow: Option<bool>, env: &Environment) -> Result<RepoDevbox, SetupError> {
    let workflow = workflow.map(|on| {
        if on {
            RepoDevbox::On
        } else {
            RepoDevbox::Off {
                by: "repo_devbox: off (workflow)",
            }
        }
    });
    resolve_repo_devbox(workflow, env.get(ITERION_REPO_DEVBOX).as_deref())
        .map_err(|e| SetupError::failed(format!("{ITERION_REPO_DEVBOX}: {e}")))
}

/// M7 for the sandbox target (§15): plans from the files found, applies the plan to `spec`, and
/// returns the `sandbox_devbox_provisioned` payload (none when there is nothing to install or to
/// report) with the run-log warnings.
///
/// # Errors
///
/// `SANDBOX_SETUP_FAILED` when `ITERION_REPO_DEVBOX` is neither on nor off.
pub(crate) async fn provision_in_sandbox(
    spec: &mut Spec,
    host: &DevboxHost<'_>,
) -> Result<Option<(SandboxDevboxProvisioned, Vec<String>)>, SetupError> {
    let repo_devbox = repo_devbox(host.workflow_setting, host.env)?;
    // The config files are read off the runtime threads (ARCHITECTURE §6).
    let workspace = host.workspace.to_owned();
    let bundle = host
        .bundle_dir
        .filter(|dir| is_bot_bundle(dir, host.workspace))
        .map(Path::to_owned);
    let (repo, bot) = tokio::task::spawn_blocking(move || {
        (
            read_devbox_config(&workspace),
            bundle.as_deref().map(read_devbox_config),
        )
    })
    .await
    .map_err(|e| SetupError::failed(format!("devbox: reading devbox.json: {e}")))?;
    let ws_in_sandbox = spec
        .workspace_folder
        .clone()
        .unwrap_or_else(|| host.workspace.to_string_lossy().into_owned());
    let plan = plan_devbox(&DevboxInputs {
        repo: &repo,
        bot: bot.as_ref(),
        repo_devbox,
        workspace_in_sandbox: &ws_in_sandbox,
        bundle_mounted: host.bundle_mounted,
        bot_stage_dir: DEVBOX_BOT_STAGE_DIR,
    });
    if plan.is_empty() {
        return Ok(None);
    }
    let path = apply_devbox_plan(spec, &plan)
        .or_else(|| spec.env.get("PATH").cloned())
        .unwrap_or_default();
    let event = provisioned_event(DevboxTarget::Sandbox, &plan, &repo, path, None);
    Ok(Some((event, plan.warnings)))
}

/// The `sandbox_devbox_provisioned` payload of a plan (§9.1), for either target.
fn provisioned_event(
    target: DevboxTarget,
    plan: &DevboxPlan,
    repo: &DevboxRead,
    path: String,
    errors: Option<Vec<String>>,
) -> SandboxDevboxProvisioned {
    SandboxDevboxProvisioned {
        target,
        sources: plan.sources.iter().map(|s| s.as_str().to_owned()).collect(),
        configs: plan
            .configs
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect(),
        bin_dirs: plan.bin_dirs.clone(),
        path,
        skipped_sources: plan
            .skipped_sources
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect(),
        skipped_reasons: plan.skipped_reasons.clone(),
        errors,
        // Whether the repository's own devbox.lock stays (one that install creates is removed).
        lock_kept: plan
            .sources
            .contains(&DevboxSource::Repo)
            .then(|| matches!(repo, DevboxRead::Present(c) if c.lock.is_some())),
    }
}

/// How long one host `devbox install` may take before it is killed and reported (§15 names no
/// knob).
const HOST_INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The line logged when no `devbox` is found, as the sandbox prologue prints it (§15).
pub(crate) const DEVBOX_NOT_ON_PATH: &str =
    "iterion: devbox is not on PATH; devbox.json not installed";

/// What [`provision_host_devbox`] did.
pub(crate) struct HostDevbox {
    /// The payload, `target: "host"`; none when there is nothing to install or report.
    pub event: Option<SandboxDevboxProvisioned>,
    /// The `PATH` to thread into every command spawned on the host; none without bin dirs.
    pub path: Option<HostPath>,
    /// Run-log lines (warnings, install failures, the not-on-PATH line).
    pub log: Vec<String>,
    /// The per-run dir the bot config was staged in; remove it with [`HostDevbox::cleanup`].
    pub stage: Option<PathBuf>,
}

impl HostDevbox {
    /// Removes the per-run stage dir (the bot's install lives in it).
    pub(crate) async fn cleanup(&self) {
        if let Some(stage) = &self.stage {
            let _ = tokio::fs::remove_dir_all(stage).await;
        }
    }
}

/// §15 "No sandbox": the same plan as [`provision_in_sandbox`] ([`plan_devbox`] with the host
/// paths, the bot config staged in `stage_root/bot`), executed on the host — `devbox install
/// -c <dir>` for each source with `DEVBOX_NO_PROMPT=1`, each bounded by
/// [`HOST_INSTALL_TIMEOUT`]. Failures never fail the run: they go to the event's `errors` and
/// to the run log. `host_env` (the engine's environment) supplies `PATH` (where `devbox` is
/// looked up, and the base of the threaded `PATH`) and `ITERION_REPO_DEVBOX`.
///
/// # Errors
///
/// `SANDBOX_SETUP_FAILED` when `ITERION_REPO_DEVBOX` is neither on nor off.
pub(crate) async fn provision_host_devbox(
    workspace: &Path,
    bundle_dir: Option<&Path>,
    stage_root: &Path,
    host_env: &Environment,
    workflow_setting: Option<bool>,
) -> Result<HostDevbox, SetupError> {
    let repo_devbox = repo_devbox(workflow_setting, host_env)?;
    let (workspace, bundle) = (workspace.to_owned(), bundle_dir.map(Path::to_owned));
    let (workspace, repo, bot) = tokio::task::spawn_blocking(move || {
        let workspace = workspace.canonicalize().unwrap_or(workspace);
        let bundle = bundle
            .map(|dir| dir.canonicalize().unwrap_or(dir))
            .filter(|dir| is_bot_bundle(dir, &workspace));
        let repo = read_devbox_config(&workspace);
        let bot = bundle.as_deref().map(read_devbox_config);
        (workspace, repo, bot)
    })
    .await
    .map_err(|e| SetupError::failed(format!("devbox: reading devbox.json: {e}")))?;
    let stage = stage_root.join("bot");
    let ws = workspace.to_string_lossy().into_owned();
    let stage_str = stage.to_string_lossy().into_owned();
    let plan = plan_devbox(&DevboxInputs {
        repo: &repo,
        bot: bot.as_ref(),
        repo_devbox,
        workspace_in_sandbox: &ws,
        bundle_mounted: false,
        bot_stage_dir: &stage_str,
    });
    let mut done = HostDevbox {
        event: None,
        path: None,
        log: plan.warnings.clone(),
        stage: None,
    };
    if plan.is_empty() {
        return Ok(done);
    }
    let host_path = host_env.get("PATH").filter(|p| !p.is_empty());
    let mut errors = Vec::new();
    match find_on_path("devbox", host_path.as_deref()) {
        None if !plan.sources.is_empty() => done.log.push(DEVBOX_NOT_ON_PATH.to_owned()),
        None => {}
        Some(devbox) => {
            for source in &plan.sources {
                let result = match source {
                    DevboxSource::Repo => {
                        let had_lock = matches!(&repo, DevboxRead::Present(c) if c.lock.is_some());
                        let result = install(&devbox, &workspace, host_path.as_deref()).await;
                        if !had_lock {
                            // The repository had no lock: remove the one install created.
                            let _ = tokio::fs::remove_file(workspace.join("devbox.lock")).await;
                        }
                        result
                    }
                    DevboxSource::Bot => {
                        done.stage = Some(stage_root.to_owned());
                        match &bot {
                            Some(DevboxRead::Present(config)) => {
                                match stage_bot(&stage, config).await {
                                    Ok(()) => install(&devbox, &stage, host_path.as_deref()).await,
                                    Err(e) => Err(InstallError::Stage(e)),
                                }
                            }
                            _ => Ok(()),
                        }
                    }
                };
                if let Err(why) = result {
                    let config = match source {
                        DevboxSource::Repo => workspace.join("devbox.json"),
                        DevboxSource::Bot => stage.join("devbox.json"),
                    };
                    errors.push(format!(
                        "iterion: devbox install failed for {}: {why}",
                        config.display()
                    ));
                }
            }
        }
    }
    done.log.extend(errors.iter().cloned());
    let base = host_path.unwrap_or_else(|| DEVBOX_BASE_PATH.to_owned());
    let path = if plan.bin_dirs.is_empty() {
        base
    } else {
        let prefix = plan.bin_dirs.join(":");
        let path = format!("{prefix}:{base}");
        done.path = Some(HostPath {
            prefix,
            path: path.clone(),
        });
        path
    };
    done.event = Some(provisioned_event(
        DevboxTarget::Host,
        &plan,
        &repo,
        path,
        Some(errors),
    ));
    Ok(done)
}

/// Copies the bot's config (and lock) into its stage dir, from what was read under the size
/// limit.
async fn stage_bot(stage: &Path, config: &DevboxConfig) -> std::io::Result<()> {
    tokio::fs::create_dir_all(stage).await?;
    tokio::fs::write(stage.join("devbox.json"), &config.content).await?;
    if let Some(lock) = &config.lock {
        tokio::fs::write(stage.join("devbox.lock"), lock).await?;
    }
    Ok(())
}

/// Why a host `devbox install` did not succeed (its text completes "devbox install failed for
/// FILE: ...").
#[derive(Debug, thiserror::Error)]
enum InstallError {
    #[error("staging the bot config: {0}")]
    Stage(#[source] std::io::Error),
    #[error("{0}")]
    Spawn(#[source] std::io::Error),
    #[error("timed out after {}s", HOST_INSTALL_TIMEOUT.as_secs())]
    TimedOut,
    #[error("exit status {code}")]
    Exit { code: i32 },
    #[error("exit status {code}: {tail}")]
    ExitSaying { code: i32, tail: String },
    #[error("killed by a signal")]
    Killed,
}

/// `devbox install -c <dir>` on the host, bounded; the reason when it did not succeed.
async fn install(devbox: &Path, dir: &Path, host_path: Option<&str>) -> Result<(), InstallError> {
    let mut command = tokio::process::Command::new(devbox);
    command
        .args(["install", "-c"])
        .arg(dir)
        .current_dir(dir)
        .env("DEVBOX_NO_PROMPT", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group, ended whole on timeout or cancel (issue 15 item 17).
        .process_group(0)
        .kill_on_drop(true);
    if let Some(path) = host_path {
        command.env("PATH", path);
    }
    let child = command.spawn().map_err(InstallError::Spawn)?;
    let group = iterion_sandbox::ProcessGroupGuard::new(child.id());
    let output = match tokio::time::timeout(HOST_INSTALL_TIMEOUT, child.wait_with_output()).await {
        Err(_) => return Err(InstallError::TimedOut),
        Ok(Err(error)) => return Err(InstallError::Spawn(error)),
        Ok(Ok(output)) => output,
    };
    group.finished();
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: String = stderr.trim().lines().last().unwrap_or_default().to_owned();
    Err(match output.status.code() {
        Some(code) if tail.is_empty() => InstallError::Exit { code },
        Some(code) => InstallError::ExitSaying { code, tail },
        None => InstallError::Killed,
    })
}

/// The first executable `name` in `path`'s directories (relative ones are ignored).
fn find_on_path(name: &str, path: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path?
        .split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// §8.10 `plant_image_env`: when the spec's `PATH` is devbox bin dirs on top of the guessed
/// [`DEVBOX_BASE_PATH`], the guess is replaced by the image's own `PATH`. Nothing happens when the
/// image was not inspected or has no `PATH`.
pub(crate) fn plant_image_env(
    spec: &mut Spec,
    image_config: Option<&ImageConfig>,
    image: &str,
) -> Option<SandboxImageEnvPlanted> {
    let image_path = image_config?
        .env
        .iter()
        .find_map(|kv| kv.strip_prefix("PATH="))?
        .to_owned();
    let path = spec.env.get("PATH")?;
    let prefix = path.strip_suffix(&format!(":{DEVBOX_BASE_PATH}"))?;
    if prefix.is_empty() || !prefix.split(':').all(|d| d.ends_with(PROFILE_BIN_SUFFIX)) {
        return None;
    }
    let planted = format!("{prefix}:{image_path}");
    spec.env.insert("PATH".to_owned(), planted);
    Some(SandboxImageEnvPlanted {
        image: image.to_owned(),
        keys: vec!["PATH".to_owned()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn config(env: &[&str]) -> ImageConfig {
        ImageConfig {
            id: "sha256:x".to_owned(),
            env: env.iter().map(|s| (*s).to_owned()).collect(),
            architecture: "amd64".to_owned(),
        }
    }

    fn spec_with_path(path: &str) -> Spec {
        let mut spec = Spec::default();
        spec.env.insert("PATH".to_owned(), path.to_owned());
        spec
    }

    #[test]
    fn the_guessed_base_under_a_devbox_prefix_becomes_the_images_path() {
        let prefix = "/ws/.devbox/nix/profile/default/bin:/tmp/iterion-devbox/bot/.devbox/nix/profile/default/bin";
        let mut spec = spec_with_path(&format!("{prefix}:{DEVBOX_BASE_PATH}"));
        let image = config(&["LANG=C", "PATH=/opt/tool/bin:/usr/bin:/bin"]);
        assert_eq!(
            plant_image_env(&mut spec, Some(&image), "img:1"),
            Some(SandboxImageEnvPlanted {
                image: "img:1".to_owned(),
                keys: vec!["PATH".to_owned()],
            })
        );
        assert_eq!(
            spec.env["PATH"],
            format!("{prefix}:/opt/tool/bin:/usr/bin:/bin")
        );
    }

    #[test]
    fn nothing_is_planted_without_a_devbox_prefix_an_image_path_or_a_config() {
        let image = config(&["PATH=/opt/tool/bin"]);
        let rows = [
            // The workflow's own PATH, no devbox.
            (spec_with_path("/custom/bin"), Some(image.clone())),
            // The base alone (no prefix).
            (spec_with_path(DEVBOX_BASE_PATH), Some(image.clone())),
            // A prefix that is not a devbox profile dir.
            (
                spec_with_path(&format!("/mine/bin:{DEVBOX_BASE_PATH}")),
                Some(image.clone()),
            ),
            // The image has no PATH.
            (
                spec_with_path(&format!(
                    "/ws/.devbox/nix/profile/default/bin:{DEVBOX_BASE_PATH}"
                )),
                Some(config(&["LANG=C"])),
            ),
            // Not inspected (kubernetes).
            (
                spec_with_path(&format!(
                    "/ws/.devbox/nix/profile/default/bin:{DEVBOX_BASE_PATH}"
                )),
                None,
            ),
        ];
        for (mut spec, image) in rows {
            let before = spec.clone();
            assert_eq!(plant_image_env(&mut spec, image.as_ref(), "img"), None);
            assert_eq!(spec, before);
        }
    }
}

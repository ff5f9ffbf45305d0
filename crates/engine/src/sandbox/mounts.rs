//! Step L8 (SANDBOX.md §8): the engine's mounts and env, configured on the spec before Prepare.
//!
//! Done here, in order: M1 attachments (the run's copies, read-only), M2 run files, M3 locale, M5 host_state (§8.1 auto / §8.2 none), M8 the
//! engine binary, M9 the worktree's `.git` (§8.5), M10 git `safe.directory`, M11 file secrets (on
//! the spec, with their `env:` variables); M4 (bundle) and M7 (devbox) through `devbox.rs`. M12
//! (dropping what a driver without host binds cannot honour) is `finalize.rs`.
//!
//! The decisions are pure functions over what was found on the host ([`Candidate`] stats, the
//! uid); [`plan_mounts`] reads the filesystem and runs `git` to find it, and makes nothing: the
//! dirs its binds need are made by [`make_dirs`] when the start plan is applied.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use iterion_sandbox::{
    EngineMount, EngineMountKind, HostState, HostStateSource, SecretFileMount, Spec,
};
use iterion_vocab::Environment;

use crate::records::events::Event;
use crate::records::sandbox_events::{
    SandboxHostStateMounted, SandboxUidMismatchWarning, SandboxUserRemap, SkippedMount,
};
use crate::sandbox::error::SetupError;

/// Where the run files dir is bound in the sandbox (M2).
pub(crate) const ARTIFACT_FILES_TARGET: &str = "/iterion/artifact-files";
/// Where a driver without host binds expects the image to ship iterion (M8, §8.4: kubernetes).
pub(crate) const IMAGE_ENGINE_BIN: &str = "/usr/local/bin/iterion";
/// The run-files dir inside an untrusted run's copy dir (M2).
pub(crate) const UNTRUSTED_FILES: &str = "files";
/// Where the engine binary is bound in the sandbox (M8, §8.4).
pub(crate) const ENGINE_BIN_TARGET: &str = "/run/iterion/bin/iterion";
/// The parent of every scratch dir in the sandbox (M6, §8.3).
pub(crate) const SCRATCH_ROOT: &str = "/tmp/iterion-scratch";
/// The variable naming the scratch dir in the sandbox.
pub(crate) const SCRATCH_ENV: &str = "PROJECT_SCRATCH_DIR";

/// The host run-files dir of `run_id` (M2): `<ITERION_HOME>/runs/<run id>/files`. Bound at
/// [`ARTIFACT_FILES_TARGET`] where the driver binds host paths, drained into at teardown where it
/// does not (SANDBOX.md §5.11).
pub(crate) fn run_files_dir(iterion_home: &Path, run_id: &str) -> PathBuf {
    iterion_home.join("runs").join(run_id).join("files")
}

/// What the plan decided besides the spec: the events to emit, and where the scratch dir lives
/// when it is not a bind (the engine creates it after Start).
#[derive(Debug, Default)]
pub(crate) struct MountPlan {
    pub events: Vec<Event>,
    pub scratch_in_container: Option<String>,
    /// The host dirs the planned binds need, made by [`make_dirs`] when the plan is applied.
    pub dirs: Vec<PlannedDir>,
}

/// A host dir a bind of the plan needs: made (with its parents) and given `mode` when the plan
/// is applied, never while it is computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlannedDir {
    pub path: PathBuf,
    pub mode: u32,
    /// What it is, in the error when it cannot be made.
    pub what: &'static str,
}

/// What the plan needs to know about the run and the host.
#[derive(Clone, Debug)]
pub(crate) struct MountInputs {
    pub run_id: String,
    /// The engine's environment: the runtime root, the mount screen, `ITERION_REPO_DEVBOX`.
    pub env: Environment,
    pub iterion_home: PathBuf,
    /// The host workspace, canonical.
    pub workspace: PathBuf,
    /// The host user's home (`HOME` when absolute).
    pub home: Option<PathBuf>,
    pub host_state_source: HostStateSource,
    /// The engine binary to bind (`ITERION_BIN`, else the CLI's own executable).
    pub engine_binary: Option<PathBuf>,
    /// Whether the driver binds host paths.
    pub host_binds: bool,
    /// Whether the driver runs `post_create` (devbox provisioning, M7).
    pub post_create: bool,
    /// The workflow file's directory (the bundle, M4; the bot devbox source, §15).
    pub bundle_dir: Option<PathBuf>,
    /// The workflow's `repo_devbox` (§15).
    pub repo_devbox: Option<bool>,
    /// The workflow's resolved `as: file` secrets (M11).
    pub file_secrets: Vec<SecretFileMount>,
    /// The git dir of a linked-worktree workspace (`<repo>/.git/worktrees/<name>`), for M9.
    pub worktree_git_dir: Option<PathBuf>,
    /// An untrusted run's copy dir (`<runtime root>/copies/<run id>`, issue 15): its only host
    /// binds are the ones planned here — the run files come from `<copy dir>/files` (drained
    /// into the store after the run), and neither the bundle (M4) nor a worktree's `.git` (M9)
    /// is bound.
    pub untrusted_copy: Option<PathBuf>,
    /// Whether the run is a subbot child with a sandbox of its own (SANDBOX.md §14 rule 1): its
    /// workspace is then the parent's, which the parent's live sandbox writes.
    pub child_of_live_sandbox: bool,
    /// The run's attachments dir (M1) when the run has attachments: the engine's own copies
    /// (`sandbox/attachments.rs`), never an operator's source.
    pub attachments: Option<PathBuf>,
}

impl MountInputs {
    /// What no author mount may reach and what live sandboxes write (issue 15 items 1 and 3):
    /// the store, the runtime root, and a §14 child's shared workspace.
    pub(crate) fn mount_scope(&self) -> iterion_sandbox::MountScope {
        iterion_sandbox::MountScope {
            store: vec![self.iterion_home.clone()],
            runtime_roots: vec![crate::sandbox::rundir::runtime_root(&self.env)],
            engine_binaries: self.engine_binary.iter().cloned().collect(),
            sandbox_writable: if self.child_of_live_sandbox {
                vec![self.workspace.clone()]
            } else {
                Vec::new()
            },
            engine_copy: None,
        }
    }
}

impl MountInputs {
    /// The root of the run tree, which keys the scratch dir (§8.3): the run itself, until subbot
    /// children (SANDBOX.md §14) pass their root.
    pub(crate) fn root_run_id(&self) -> &str {
        &self.run_id
    }
}

/// M9 (§8.5): the `<repo>/.git` a linked worktree's git dir lives in, or `None` when the git dir
/// is not of the `<repo>/.git/worktrees/<name>` shape. Pure.
pub(crate) fn worktree_common_git_dir(git_dir: &Path) -> Option<PathBuf> {
    let worktrees = git_dir.parent()?;
    let dot_git = worktrees.parent()?;
    (worktrees.file_name()? == "worktrees" && dot_git.file_name()? == ".git")
        .then(|| dot_git.to_owned())
}

/// One host_state candidate (§8.1 step 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub path: PathBuf,
    /// Caches must be directories.
    pub cache: bool,
    /// Bound read-only (`~/.gitconfig`: a writable one could set a pager or hook that runs on
    /// the host, issue 15 item 5).
    pub read_only: bool,
}

/// The candidates of §8.1, in order: tool state, then the caches. The iterion home (the run
/// store) is **not** one (issue 15 item 5: a workflow could rewrite its own audit record).
pub(crate) fn host_state_candidates(home: Option<&Path>) -> Vec<Candidate> {
    let mut out = Vec::new();
    if let Some(home) = home {
        for (rel, cache, read_only) in [
            (".claude", false, false),
            (".claude.json", false, false),
            (".codex", false, false),
            (".gitconfig", false, true),
            (".cache/go-build", true, false),
            ("go/pkg/mod", true, false),
            (".npm", true, false),
            (".local/share/pnpm", true, false),
            (".cache/yarn", true, false),
        ] {
            out.push(Candidate {
                path: home.join(rel),
                cache,
                read_only,
            });
        }
    }
    out
}

/// What stat found for a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    Missing,
    Present { is_dir: bool, canonical: PathBuf },
}

/// The §8.1 step 3 verdict for one candidate: `Ok(())` to bind, or the skip reason. Besides the
/// table's, a candidate that is, contains or lies in the run store (`store`, canonical) is
/// skipped as `store` (issue 15 item 5: the store is never bound, not even through a symlink).
pub(crate) fn judge_candidate(
    candidate: &Candidate,
    found: &Found,
    workspace: &Path,
    store: &Path,
) -> Result<(), &'static str> {
    match found {
        Found::Missing => Err("missing"),
        Found::Present { is_dir, .. } if candidate.cache && !is_dir => Err("not_a_directory"),
        Found::Present { canonical, .. }
            if canonical.starts_with(store) || store.starts_with(canonical) =>
        {
            Err("store")
        }
        Found::Present { canonical, .. } if workspace.starts_with(canonical) => {
            Err("contains_workspace")
        }
        Found::Present { canonical, .. } if canonical.starts_with(workspace) => {
            Err("inside_workspace")
        }
        Found::Present { .. } => Ok(()),
    }
}

/// Appends `key=value` to the `GIT_CONFIG_COUNT` sequence of `env` (SANDBOX.md §8).
fn append_git_config(
    env: &mut BTreeMap<String, String>,
    key: &str,
    value: &str,
) -> Result<(), SetupError> {
    let n: u64 = match env.get("GIT_CONFIG_COUNT") {
        None => 0,
        Some(text) => text.trim().parse().map_err(|_| {
            SetupError::failed(format!(
                "GIT_CONFIG_COUNT={text:?} in the sandbox env is not a non-negative integer"
            ))
        })?,
    };
    env.insert(format!("GIT_CONFIG_KEY_{n}"), key.to_owned());
    env.insert(format!("GIT_CONFIG_VALUE_{n}"), value.to_owned());
    env.insert("GIT_CONFIG_COUNT".to_owned(), (n + 1).to_string());
    Ok(())
}

fn bind(source: &Path, target: &str, read_only: bool, purpose: &str) -> EngineMount {
    EngineMount {
        kind: EngineMountKind::Bind,
        source: source.to_string_lossy().into_owned(),
        target: target.to_owned(),
        read_only,
        purpose: purpose.to_owned(),
    }
}

/// The effective uid and gid of this process (the owner of `/proc/self`).
pub(crate) fn host_ids() -> Option<(u32, u32)> {
    std::fs::metadata("/proc/self")
        .ok()
        .map(|m| (m.uid(), m.gid()))
}

/// Plans M2–M11 into `spec`: its binds, env and user; returns the events to emit, in order, and
/// the host dirs the binds need. It reads the host (what exists, the git identity, devbox
/// configs) but makes nothing: [`make_dirs`] does, when the plan is applied.
///
/// # Errors
///
/// `SANDBOX_SETUP_FAILED`: the engine binary is unknown, or `GIT_CONFIG_COUNT` is malformed.
pub(crate) async fn plan_mounts(
    spec: &mut Spec,
    inputs: &MountInputs,
) -> Result<MountPlan, SetupError> {
    let mut events = Vec::new();
    let mut dirs = Vec::new();
    let ws = inputs.workspace.to_string_lossy().into_owned();
    let folder = spec.workspace_folder.clone().unwrap_or_else(|| ws.clone());

    // M1: the attachments, read-only: the engine-made copies, trusted or not (an untrusted run
    // never sees the operator's source either). M12 drops the bind where binds are unsupported.
    if let Some(dir) = &inputs.attachments {
        spec.engine_mounts.push(bind(
            dir,
            crate::sandbox::attachments::CONTAINER_DIR,
            true,
            "attachments",
        ));
    }
    // M2: the run files dir (every driver; M12 drops it, and its variable, where binds are
    // unsupported).
    {
        // Untrusted on a host-bind driver: bound from the copy dir, drained after the run. A
        // driver without host binds drops the bind (M12) and drains into the store itself.
        let dir = match &inputs.untrusted_copy {
            Some(copy) if inputs.host_binds => copy.join(UNTRUSTED_FILES),
            _ => run_files_dir(&inputs.iterion_home, &inputs.run_id),
        };
        spec.engine_mounts
            .push(bind(&dir, ARTIFACT_FILES_TARGET, false, "run-files"));
        dirs.push(PlannedDir {
            path: dir,
            mode: 0o777,
            what: "run files dir",
        });
        spec.env
            .entry("ITERION_ARTIFACT_FILES_DIR".to_owned())
            .or_insert_with(|| ARTIFACT_FILES_TARGET.to_owned());
    }
    // M3: the locale.
    if !spec.env.contains_key("LANG") && !spec.env.contains_key("LC_ALL") {
        spec.env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
    }
    // M4: the bundle dir, read-only (host-bind drivers, screened, not the workspace root).
    let bundle_mounted = inputs.untrusted_copy.is_none()
        && crate::sandbox::devbox::add_bundle_mount(
            spec,
            inputs.bundle_dir.as_deref(),
            &inputs.workspace,
            inputs.host_binds,
            &inputs.env,
        );
    // M5: host_state.
    let host_state = match (spec.host_state, inputs.host_binds) {
        (HostState::Auto, true) | (HostState::Unset, true) => HostState::Auto,
        (HostState::Auto | HostState::Unset | HostState::None, _) => HostState::None,
    };
    if host_state == HostState::Auto {
        events.extend(apply_host_state_auto(spec, inputs, &ws).await?);
    } else {
        seed_git_identity_env(spec, &inputs.workspace, &inputs.env).await;
        events.push(Event::SandboxHostStateMounted(SandboxHostStateMounted {
            enabled: false,
            source: inputs.host_state_source.label().to_owned(),
            workspace_folder: None,
            mounts: None,
            skipped: None,
            scratch: None,
        }));
    }
    // M6: scratch (§8.3), keyed on the root run so a parent and its children share it. Bound
    // under host_state auto; otherwise container-local, made after Start.
    let scratch = format!("{SCRATCH_ROOT}/{}", inputs.root_run_id());
    spec.env.insert(SCRATCH_ENV.to_owned(), scratch.clone());
    let mut scratch_in_container = None;
    if host_state == HostState::Auto {
        let dir = inputs
            .iterion_home
            .join("scratch")
            .join(inputs.root_run_id());
        spec.engine_mounts
            .push(bind(&dir, &scratch, false, "scratch"));
        for event in &mut events {
            if let Event::SandboxHostStateMounted(mounted) = event {
                mounted.scratch = Some(format!("{}:{scratch}", dir.display()));
            }
        }
        dirs.push(PlannedDir {
            path: dir,
            mode: 0o1777,
            what: "scratch dir",
        });
    } else {
        scratch_in_container = Some(scratch);
    }
    // M7: devbox provisioning (§15), where the driver runs post_create.
    if inputs.post_create
        && let Some((event, warnings)) = crate::sandbox::devbox::provision_in_sandbox(
            spec,
            &crate::sandbox::devbox::DevboxHost {
                workspace: &inputs.workspace,
                bundle_dir: inputs.bundle_dir.as_deref(),
                bundle_mounted,
                env: &inputs.env,
                workflow_setting: inputs.repo_devbox,
            },
        )
        .await?
    {
        for warning in warnings {
            tracing::warn!("sandbox: {warning}");
        }
        events.push(Event::SandboxDevboxProvisioned(event));
    }
    // M8: the engine binary: bound where host binds exist, else the image's own (§8.4).
    if !inputs.host_binds {
        spec.env
            .insert("ITERION_ENGINE_BIN".to_owned(), IMAGE_ENGINE_BIN.to_owned());
    } else {
        let Some(binary) = inputs.engine_binary.as_deref() else {
            return Err(SetupError::failed(
                "engine binary unknown: set ITERION_BIN".to_owned(),
            ));
        };
        spec.engine_mounts
            .push(bind(binary, ENGINE_BIN_TARGET, true, "engine-binary"));
        spec.env.insert(
            "ITERION_ENGINE_BIN".to_owned(),
            ENGINE_BIN_TARGET.to_owned(),
        );
    }
    // M9: a linked worktree's `<repo>/.git`, read-write at its own path (skipped when unknown,
    // missing or not a directory).
    if inputs.host_binds
        && inputs.untrusted_copy.is_none()
        && let Some(dot_git) = inputs
            .worktree_git_dir
            .as_deref()
            .and_then(worktree_common_git_dir)
        && tokio::fs::metadata(&dot_git)
            .await
            .is_ok_and(|m| m.is_dir())
    {
        let shown = dot_git.to_string_lossy().into_owned();
        spec.engine_mounts
            .push(bind(&dot_git, &shown, false, "worktree-git"));
    }
    // M10: git safe.directory.
    let folder = spec.workspace_folder.clone().unwrap_or(folder);
    append_git_config(&mut spec.env, "safe.directory", &folder)?;
    // M11: file secrets, and the variables naming their paths (always overwrite).
    for secret in &inputs.file_secrets {
        if let Some(env) = &secret.env {
            spec.env.insert(env.clone(), secret.mount_path.clone());
        }
        spec.secret_files.push(secret.clone());
    }
    Ok(MountPlan {
        events,
        scratch_in_container,
        dirs,
    })
}

/// §8.1 steps 1–8.
async fn apply_host_state_auto(
    spec: &mut Spec,
    inputs: &MountInputs,
    ws: &str,
) -> Result<Vec<Event>, SetupError> {
    let mut events = Vec::new();
    if spec.workspace_folder.is_none() {
        spec.workspace_folder = Some(ws.to_owned());
    }
    let candidates = host_state_candidates(inputs.home.as_deref());
    let store = tokio::fs::canonicalize(&inputs.iterion_home)
        .await
        .unwrap_or_else(|_| inputs.iterion_home.clone());
    let mut mounts = Vec::new();
    let mut skipped = Vec::new();
    let mut bound_targets = Vec::new();
    for candidate in &candidates {
        let found = match tokio::fs::metadata(&candidate.path).await {
            Err(_) => Found::Missing,
            Ok(meta) => Found::Present {
                is_dir: meta.is_dir(),
                canonical: tokio::fs::canonicalize(&candidate.path)
                    .await
                    .unwrap_or_else(|_| candidate.path.clone()),
            },
        };
        let shown = candidate.path.to_string_lossy().into_owned();
        match judge_candidate(candidate, &found, &inputs.workspace, &store) {
            Ok(()) => {
                // The canonical source, which is what was judged.
                let source = match &found {
                    Found::Present { canonical, .. } => canonical.as_path(),
                    Found::Missing => candidate.path.as_path(),
                };
                spec.engine_mounts
                    .push(bind(source, &shown, candidate.read_only, "host-state"));
                let mode = if candidate.read_only { ":ro" } else { "" };
                mounts.push(format!("{shown}:{shown}{mode}"));
                bound_targets.push(candidate.path.clone());
            }
            Err(reason) => skipped.push(SkippedMount {
                path: shown,
                reason: reason.to_owned(),
            }),
        }
    }
    if let Some(home) = &inputs.home {
        spec.env
            .entry("HOME".to_owned())
            .or_insert_with(|| home.to_string_lossy().into_owned());
    }
    let ids = host_ids();
    if let (Some((uid, gid)), Some(home)) = (ids, &inputs.home)
        && uid != 0
    {
        spec.tmpfs
            .extend(writable_home_tmpfs(home, &bound_targets, uid, gid));
    }
    if !spec.env.contains_key("GIT_CONFIG_COUNT") {
        append_git_config(&mut spec.env, "commit.gpgsign", "false")?;
    }
    if let Some((uid, gid)) = ids
        && uid != 0
    {
        match spec.user.as_deref() {
            None => {
                spec.user = Some(format!("{uid}:{gid}"));
                events.push(Event::SandboxUserRemap(SandboxUserRemap {
                    uid,
                    gid,
                    reason: "host_state auto binds host paths read-write; running as the host uid keeps ownership consistent".to_owned(),
                }));
            }
            Some(user) => {
                let numeric = user.split(':').next().and_then(|u| u.parse::<u32>().ok());
                match numeric {
                    Some(spec_uid) if spec_uid != uid => {
                        events.push(Event::SandboxUidMismatchWarning(
                            SandboxUidMismatchWarning {
                                spec_user: user.to_owned(),
                                host_uid: uid,
                            },
                        ));
                    }
                    Some(_) => {}
                    None => tracing::warn!(
                        "sandbox user {user:?} is not numeric; files written to bound host paths may not be owned by uid {uid}"
                    ),
                }
            }
        }
    }
    events.insert(
        0,
        Event::SandboxHostStateMounted(SandboxHostStateMounted {
            enabled: true,
            source: inputs.host_state_source.label().to_owned(),
            workspace_folder: spec.workspace_folder.clone(),
            mounts: Some(mounts),
            skipped: Some(skipped),
            scratch: None,
        }),
    );
    Ok(events)
}

/// §8.1 step 5: tmpfs entries for HOME and each strict ancestor below HOME of a bound target,
/// shallowest first, owned by the host uid and executable.
pub(crate) fn writable_home_tmpfs(
    home: &Path,
    bound: &[PathBuf],
    uid: u32,
    gid: u32,
) -> Vec<String> {
    let mut dirs = vec![home.to_owned()];
    for target in bound {
        let Ok(rel) = target.strip_prefix(home) else {
            continue;
        };
        let mut acc = home.to_owned();
        let parts: Vec<_> = rel.components().collect();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            acc.push(part);
            if !dirs.contains(&acc) {
                dirs.push(acc.clone());
            }
        }
    }
    dirs.sort_by_key(|d| d.components().count());
    dirs.iter()
        .map(|d| format!("{}:uid={uid},gid={gid},mode=0755,exec", d.to_string_lossy()))
        .collect()
}

/// §8.2: the host's git identity as four env vars (never overwriting the spec's).
async fn seed_git_identity_env(spec: &mut Spec, workspace: &Path, host: &Environment) {
    let name = git_config(workspace, "user.name", host)
        .await
        .unwrap_or_else(|| "iterion".to_owned());
    let email = git_config(workspace, "user.email", host)
        .await
        .unwrap_or_else(|| "iterion@localhost".to_owned());
    for (key, value) in [
        ("GIT_AUTHOR_NAME", &name),
        ("GIT_AUTHOR_EMAIL", &email),
        ("GIT_COMMITTER_NAME", &name),
        ("GIT_COMMITTER_EMAIL", &email),
    ] {
        spec.env
            .entry(key.to_owned())
            .or_insert_with(|| value.clone());
    }
}

async fn git_config(workspace: &Path, key: &str, host: &Environment) -> Option<String> {
    let git = crate::sandbox::git::HostGit::plain(workspace, host);
    let read = git.config(key);
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()
        .flatten()
}

/// Makes the dirs a mount plan needs, in order.
pub(crate) async fn make_dirs(dirs: &[PlannedDir]) -> Result<(), SetupError> {
    for dir in dirs {
        make_dir_with_mode(&dir.path, dir.mode, dir.what).await?;
    }
    Ok(())
}

/// Creates `dir` (and its parents) and sets `mode` on it; `what` names it in the error.
async fn make_dir_with_mode(dir: &Path, mode: u32, what: &str) -> Result<(), SetupError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |e: std::io::Error| {
        SetupError::failed(format!("cannot create {what} {}: {e}", dir.display()))
    };
    tokio::fs::create_dir_all(dir).await.map_err(fail)?;
    tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
        .await
        .map_err(fail)
}

#[cfg(test)]
#[path = "mounts_tests.rs"]
mod tests;

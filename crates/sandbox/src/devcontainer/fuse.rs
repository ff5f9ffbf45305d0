//! Fusion of the repository's spec with the workflow block (SANDBOX.md §7.6), the env deny class
//! applied on the way (§7.7), and network defaulting (§7.9). Pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::mode::{Mode, NetworkMode};
use crate::spec::{DEFAULT_PRESET, KNOWN_PRESETS, Network, Spec};
use crate::text::clean;

use super::env_deny::is_denied_env_key;

/// The fused spec and the facts the engine reports about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FusedSpec {
    /// Mode `auto`; the network defaulted per §7.9.
    pub spec: Spec,
    /// The keys the repository actually contributed: not authored by the workflow and not
    /// denied. The operator overlay may overwrite exactly these (§7.8).
    pub repo_env: BTreeSet<String>,
    /// The repository keys in the deny class, sorted (`sandbox_env_denied.keys`), whether or not
    /// the workflow also sets them.
    pub denied_env: Vec<String>,
    /// Whether the network was defaulted to the `iterion-default` allowlist
    /// (`sandbox_network_defaulted`; resolve the policy with
    /// [`NetworkOrigin::DevcontainerDefault`](crate::NetworkOrigin::DevcontainerDefault)).
    pub network_defaulted: bool,
}

/// Fuses the repository's spec (from [`to_sandbox_spec`](super::convert::to_sandbox_spec)) with the
/// workflow's block (SANDBOX.md §7.6):
///
/// - `image`/`build`: when the repository sets either, its pair replaces the workflow's as a
///   unit (and the workflow's `image_fallback` goes with it);
/// - `user`, `workspace_folder`, `post_create`: the repository's when set, else the workflow's;
/// - `mounts` (defined here): a union keyed by the cleaned target; the repository wins a shared
///   target. The repository's come first, in order, then the workflow's others. All are screened
///   afterwards by the caller;
/// - `env`: repository keys in the deny class (§7.7) are removed and recorded; the workflow's
///   keys win per key; keys only the workflow has are carried;
/// - `network`: the workflow's block, defaulted by [`default_network`];
/// - `host_state`, `tmpfs`, `secret_files`, `engine_mounts`: the workflow's.
pub(super) fn fuse_devcontainer_spec(repo: &Spec, workflow: Option<&Spec>) -> FusedSpec {
    let empty = Spec::default();
    let workflow = workflow.unwrap_or(&empty);
    let (image, image_fallback, build) = if repo.names_container() {
        (repo.image.clone(), None, repo.build.clone())
    } else {
        (
            workflow.image.clone(),
            workflow.image_fallback.clone(),
            workflow.build.clone(),
        )
    };

    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut denied_env = Vec::new();
    let mut repo_env = BTreeSet::new();
    for (key, value) in &repo.env {
        if is_denied_env_key(key) {
            denied_env.push(key.clone());
        } else if !workflow.env.contains_key(key) {
            env.insert(key.clone(), value.clone());
            repo_env.insert(key.clone());
        }
    }
    // Precedence: workflow > repository, per key. The deny class only ever strips the
    // repository's keys: the workflow's value for a denied key is the operator's choice.
    env.extend(workflow.env.clone());
    denied_env.sort();

    let (network, network_defaulted) = default_network(workflow.network.as_ref());
    FusedSpec {
        spec: Spec {
            mode: Mode::Auto,
            image,
            image_fallback,
            build,
            // A devcontainer names its own image (or build): never one a driver may replace.
            image_is_default: false,
            mounts: union_by_target(&repo.mounts, &workflow.mounts),
            engine_mounts: workflow.engine_mounts.clone(),
            tmpfs: workflow.tmpfs.clone(),
            env,
            user: repo.user.clone().or_else(|| workflow.user.clone()),
            post_create: repo
                .post_create
                .clone()
                .or_else(|| workflow.post_create.clone()),
            workspace_folder: repo
                .workspace_folder
                .clone()
                .or_else(|| workflow.workspace_folder.clone()),
            host_state: workflow.host_state,
            network: Some(network),
            secret_files: workflow.secret_files.clone(),
            exec_agent: workflow.exec_agent.clone(),
            limits: workflow.limits,
        },
        repo_env,
        denied_env,
        network_defaulted,
    }
}

/// The network of a fused spec (SANDBOX.md §7.9) and whether it was defaulted:
///
/// | workflow `network:` | result | defaulted |
/// |---|---|---|
/// | absent, or no mode and empty | allowlist + `iterion-default` | yes |
/// | no mode, a known preset | allowlist, preset kept (our decision 6) | no |
/// | no mode, rules but no or an unknown preset | allowlist + `iterion-default`, rules kept | yes |
/// | mode set (even `open`) | unchanged | no |
pub(super) fn default_network(workflow: Option<&Network>) -> (Network, bool) {
    let defaulted = |base: Network| Network {
        mode: Some(NetworkMode::Allowlist),
        preset: Some(DEFAULT_PRESET.to_owned()),
        ..base
    };
    match workflow {
        None => (defaulted(Network::default()), true),
        Some(network) if network.mode.is_some() => (network.clone(), false),
        Some(network)
            if network
                .preset
                .as_deref()
                .is_some_and(|preset| KNOWN_PRESETS.contains(&preset)) =>
        {
            (
                Network {
                    mode: Some(NetworkMode::Allowlist),
                    ..network.clone()
                },
                false,
            )
        }
        Some(network) => (defaulted(network.clone()), true),
    }
}

/// Union keyed by the cleaned target; `first` wins a shared target and comes first.
fn union_by_target(first: &[String], second: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    first
        .iter()
        .chain(second)
        .filter(|mount| seen.insert(target_key(mount)))
        .cloned()
        .collect()
}

/// The mount's target, cleaned (`target`, `destination` or `dst`); the whole string when it has
/// none (screening refuses such a mount anyway).
fn target_key(mount: &str) -> String {
    mount
        .split(',')
        .find_map(|item| {
            let (key, value) = item.split_once('=')?;
            matches!(key.trim(), "target" | "destination" | "dst").then(|| clean(value.trim()))
        })
        .unwrap_or_else(|| mount.to_owned())
}

//! Names and labels every sandbox resource carries (SANDBOX.md §4.5, invariant I5), and the local
//! orphan listing's filter (§4.10).
//!
//! Pure: the docker driver renders these into its create bodies and list filters, and the reaper
//! (§12) filters what the engine lists through [`filter_managed`].

use std::collections::BTreeMap;

use crate::driver::RunInfo;
use crate::mode::Trust;
use crate::vars::is_falsy;

/// `true` on every resource iterion creates.
pub const LABEL_MANAGED: &str = "iterion.io/managed";
/// The run id.
pub const LABEL_RUN_ID: &str = "iterion.io/run-id";
/// The run's friendly name, sanitised (omitted when empty).
pub(crate) const LABEL_RUN_NAME: &str = "iterion.io/run-name";
/// The store id, so two stores sharing one engine never reap each other's runs.
pub const LABEL_STORE: &str = "iterion.io/store";
/// Why a long-lived resource exists (`nix-store`): reaped by its own rule, not by run liveness.
pub const LABEL_PURPOSE: &str = "iterion.io/purpose";
/// On a shared `/nix` volume: the 12-hex image id prefix it was made for. The reaper removes the
/// volume once no image with that id is left (issue 15 item 13).
pub const LABEL_IMAGE: &str = "iterion.io/image";

/// Keeps `[A-Za-z0-9._-]`, replacing every other character with `-`.
fn sanitize(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The container name of a run: `iterion-<run id>`, characters outside `[A-Za-z0-9._-]` replaced
/// by `-`, at most 64 characters.
pub fn container_name(run_id: &str) -> String {
    let mut name = format!("iterion-{}", sanitize(run_id));
    name.truncate(64);
    name
}

/// The `iterion.io/run-name` value: every character outside `[A-Za-z0-9._-]` becomes `-`, cut to
/// 63 characters; `None` when empty.
pub(crate) fn run_name_label(friendly_name: &str) -> Option<String> {
    let mut name = sanitize(friendly_name);
    name.truncate(63);
    (!name.is_empty()).then_some(name)
}

/// The labels of every resource of a run: managed, run id, store, and the run name when there is
/// one.
pub fn managed_labels(info: &RunInfo) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (LABEL_MANAGED.to_owned(), "true".to_owned()),
        (LABEL_RUN_ID.to_owned(), info.run_id.clone()),
        (LABEL_STORE.to_owned(), info.store_id.clone()),
    ]);
    if let Some(name) = run_name_label(&info.friendly_name) {
        labels.insert(LABEL_RUN_NAME.to_owned(), name);
    }
    labels
}

/// The label filters that list one store's managed resources (`label=` values for the engine's
/// list calls).
pub fn managed_filters(store_id: &str) -> Vec<String> {
    vec![
        format!("{LABEL_MANAGED}=true"),
        format!("{LABEL_STORE}={store_id}"),
    ]
}

/// The tag a `build:` spec is built as: `iterion-sandbox-build:<run id>` lower-cased, `_`
/// replaced by `-`, the tag cut to 128 characters (SANDBOX.md §4.4).
pub fn build_image_tag(run_id: &str) -> String {
    let mut tag = run_id.to_ascii_lowercase().replace('_', "-");
    tag.truncate(128);
    format!("iterion-sandbox-build:{tag}")
}

/// The shared `/nix` volume for an image (SANDBOX.md §4.5): `iterion-nix-<first 12 hex of the
/// image id>`, or `None` when it is skipped — `ITERION_SANDBOX_PERSIST_NIX` falsy, an image id
/// shorter than 12 hex, or an untrusted run (which must not poison a shared store).
/// `persist_nix` is the value of `ITERION_SANDBOX_PERSIST_NIX`.
pub fn nix_volume_name(image_id: &str, trust: Trust, persist_nix: Option<&str>) -> Option<String> {
    if trust == Trust::Untrusted || persist_nix.is_some_and(is_falsy) {
        return None;
    }
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    let prefix = hex.get(..12)?;
    prefix
        .bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| format!("iterion-nix-{prefix}"))
}

/// A resource as the engine lists it: id, name and labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListedResource {
    /// The engine's id.
    pub id: String,
    /// Its name (containers) or first tag (images).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// A managed resource of this store (SANDBOX.md §4.10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedResource {
    /// The engine's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The run it belongs to; `""` when the label is absent (the reaper reaps those).
    pub run_id: String,
}

/// Keeps the resources labelled `iterion.io/managed=true` **and** `iterion.io/store=<store_id>`
/// (the engine's list filter says the same; this re-checks, so a filter the engine ignored can
/// never reap another store's runs). Resources with a `purpose` label are long-lived (the nix
/// store) and are left out.
pub fn filter_managed<'a>(
    listed: impl IntoIterator<Item = &'a ListedResource>,
    store_id: &str,
) -> Vec<ManagedResource> {
    listed
        .into_iter()
        .filter(|resource| {
            let label = |key: &str| resource.labels.get(key).map(String::as_str);
            label(LABEL_MANAGED) == Some("true")
                && label(LABEL_STORE) == Some(store_id)
                && label(LABEL_PURPOSE).is_none()
        })
        .map(|resource| ManagedResource {
            id: resource.id.clone(),
            name: resource.name.clone(),
            run_id: resource
                .labels
                .get(LABEL_RUN_ID)
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
#[path = "labels_tests.rs"]
mod tests;

//! The warm pool (issue 18 item 4; docs/sandbox.md "Warm pool"): pre-started containers a run
//! claims instead of creating and starting its own.
//!
//! What a container fixes at create time is its *shape*: the image, the user, the working dir,
//! the network mode, the capabilities and limits, the tmpfs and every mount. A run's shape is
//! its create plan ([`create_plan`](crate::plan::create_plan)) with everything per-run taken out:
//!
//! - the env: a pool entry is created with none; the run's container env (the spec's, the file
//!   secrets' paths, the proxy variables with the run's token) is put in front of every exec
//!   the claiming run makes ([`DockerRun`](crate::run::DockerRun)'s base env), so the entry never
//!   holds another run's token;
//! - the name and the run labels: an entry is `iterion-warm-<nonce>`, labelled managed, with the
//!   store, [`WARM_PURPOSE`], its owner process ([`LABEL_WARM_OWNER`]) and its slots;
//! - every bind whose host source lies under a directory named after the run id (the per-run
//!   dir's `net/` and CA, the run files dir): the entry binds a *slot* instead, an empty
//!   directory (or file) `.iterion-warm-<nonce>-<n>` beside the run-id directory, so on the same
//!   filesystem. At claim an empty per-run directory is replaced by the slot (rename: the
//!   container's bind follows the inode, so the run's path is now what the container sees); a
//!   read-only one's sockets (the proxy's) are hard-linked into the slot; a read-only file
//!   (the CA) is copied into the slot file. Anything else fails the claim, which then starts cold.
//!
//! Everything else, the workspace bind included, is part of the key, and a key that still names
//! the run is not pooled: under `host_state: auto` the scratch dir is bound at
//! `/tmp/iterion-scratch/<root run id>` (SANDBOX.md §8.3), so only the runs of one run tree
//! share a shape there; with `host_state: none` every run of a spec does. A pool entry serves one
//! workspace path (a trusted run in the same checkout; an untrusted run's per-run copy never
//! matches and starts cold). Trust is in the key twice, explicitly and through the untrusted
//! shape (capabilities dropped, pids limit, no-new-privileges), so an untrusted run never claims
//! a trusted entry. Specs with file secrets (refreshed by renaming in the run dir), a planned
//! listener (its socket comes later) or a per-run build image are never pooled.
//!
//! An entry's command is the exec agent when the run's is (a cold container's is): it waits,
//! unattached and silent, until the claiming process attaches and greets it with the run's env
//! ([`iterion_sandbox::exec_agent::frame::Greeting`]); so a claimed run makes no exec to start
//! an agent. An entry is claimed once (popped under the pool's lock) and never returned: at
//! cleanup its agent is shut down and the container ends, as any run's. The pool refills in the background after every claim or miss of a
//! poolable shape, up to its size per shape. Entries are owned by the process that made them;
//! the reaper removes those whose owner is gone ([`owner_is_gone`]), with their unclaimed slots.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, MountType};
use iterion_sandbox::{LABEL_MANAGED, LABEL_PURPOSE, LABEL_STORE, RunInfo, Trust};

use crate::api::{ContainerApi, EngineKind};

/// The purpose label of a pool entry: reaped by its owner's liveness, not by a run's.
pub(crate) const WARM_PURPOSE: &str = "warm-pool";
/// The process that made an entry: `<boot id>/<pid namespace>/<pid>/<start time>`.
pub(crate) const LABEL_WARM_OWNER: &str = "iterion.io/warm-owner";
/// The entry's slots, host paths joined by `\n`.
pub(crate) const LABEL_WARM_SLOTS: &str = "iterion.io/warm-slots";
/// The name every slot starts with; nothing else is ever removed as a slot.
pub(crate) const SLOT_PREFIX: &str = ".iterion-warm-";
/// The digest of an entry's shape key: how another process finds the entries it may claim.
pub(crate) const LABEL_WARM_KEY: &str = "iterion.io/warm-key";
/// When an entry was made, in seconds since the epoch.
pub(crate) const LABEL_WARM_MADE: &str = "iterion.io/warm-made";
/// The directory holding the entry's claim marker (the runs' parent directory).
pub(crate) const LABEL_WARM_CLAIMS: &str = "iterion.io/warm-claims";
/// The claim marker of an entry is `<claims dir>/.iterion-warm-claim-<container id>`.
const CLAIM_PREFIX: &str = ".iterion-warm-claim-";
/// How long an entry no live process owns waits to be claimed before a reaper removes it.
pub(crate) const MAX_IDLE: Duration = Duration::from_secs(15 * 60);

/// What a per-run bind source is on the host when the shape is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum SlotKind {
    /// An empty directory (renamed over at claim).
    Dir,
    /// A directory of sockets, bound read-only (the proxy's `net/`; linked at claim).
    Sockets,
    /// A regular file, bound read-only (copied at claim).
    File,
}

/// One per-run bind of a shape: which mount, where its slots go, what it is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct SlotTemplate {
    mount: usize,
    parent: PathBuf,
    kind: SlotKind,
    read_only: bool,
}

/// What a pool entry is created from: the run's create body with the env, the run labels and
/// the per-run bind sources taken out; the digest of its shape's key and where its claim
/// markers go.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Template {
    body: ContainerCreateBody,
    slots: Vec<SlotTemplate>,
    digest: String,
    claims: PathBuf,
}

/// A run's shape: its key, the template, and what the claiming run brings (its own per-run bind
/// sources, in slot order, and its container env).
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    pub(crate) key: String,
    template: Arc<Template>,
    run_sources: Vec<PathBuf>,
    pub(crate) env: Vec<(String, String)>,
}

/// A pre-started container, and once claimed, its claim marker.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) id: String,
    slots: Vec<PathBuf>,
    claim: Option<PathBuf>,
}

/// What else keeps a run out of the pool, besides what [`shape_of`] finds in the body.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NotPooled {
    /// File secrets: refreshed by renaming in the run dir, which a slot would not follow.
    pub(crate) secret_files: bool,
    /// A per-run image (`build:`).
    pub(crate) built_image: bool,
    /// Author or engine binds staged under the per-run dir (issue 15 item 1): their source is
    /// the screened object, which no slot may stand in for.
    pub(crate) staged_binds: bool,
}

fn poolable(info: &RunInfo, not: NotPooled) -> Result<(), String> {
    let reason = if not.secret_files {
        "file secrets"
    } else if not.built_image {
        "a per-run image"
    } else if not.staged_binds {
        "staged binds"
    } else if info.listener_planned {
        "a planned listener"
    } else if info.run_id.is_empty() {
        "no run id"
    } else {
        return Ok(());
    };
    Err(reason.to_owned())
}

/// The run's shape, or why it is not poolable. `kind_of` says what a per-run bind source
/// is on the host (`None`: missing or neither, which is not poolable). Pure but for `kind_of`.
pub(crate) fn shape_of(
    body: &ContainerCreateBody,
    info: &RunInfo,
    not: NotPooled,
    kind_of: &dyn Fn(&Path) -> Option<SlotKind>,
) -> Result<Shape, String> {
    poolable(info, not)?;
    let run_id = info.run_id.as_str();
    let claims = info
        .run_dir
        .parent()
        .filter(|parent| parent.is_absolute())
        .ok_or("the per-run dir has no absolute parent for claim markers")?
        .to_owned();
    let mut template = body.clone();
    let mut slots = Vec::new();
    let mut run_sources = Vec::new();
    let mounts = template
        .host_config
        .as_mut()
        .and_then(|host| host.mounts.as_mut())
        .ok_or("no mounts")?;
    for (index, mount) in mounts.iter_mut().enumerate() {
        if mount.typ != Some(MountType::BIND) {
            continue;
        }
        let Some(source) = mount.source.as_deref().map(PathBuf::from) else {
            continue;
        };
        let Some(parent) = run_id_parent(&source, run_id) else {
            continue;
        };
        let read_only = mount.read_only.unwrap_or(false);
        let kind = kind_of(&source)
            .ok_or_else(|| format!("per-run {} is missing or has content", source.display()))?;
        if kind != SlotKind::Dir && !read_only {
            return Err(format!("per-run {} is writable", source.display()));
        }
        mount.source = Some(format!("<slot {}>", slots.len()));
        slots.push(SlotTemplate {
            mount: index,
            parent,
            kind,
            read_only,
        });
        run_sources.push(source);
    }
    let env = template
        .env
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect();
    // The run's own labels go (the run id, its name); an embedder's extra labels stay.
    let run_labels = iterion_sandbox::managed_labels(info);
    let labels: BTreeMap<String, String> = template
        .labels
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| !run_labels.contains_key(key))
        .chain([
            (LABEL_MANAGED.to_owned(), "true".to_owned()),
            (LABEL_STORE.to_owned(), info.store_id.clone()),
            (LABEL_PURPOSE.to_owned(), WARM_PURPOSE.to_owned()),
        ])
        .collect();
    // tmpfs is a HashMap: sorted into the key, not serialised in its random order.
    let tmpfs: BTreeMap<String, String> = template
        .host_config
        .as_mut()
        .and_then(|host| host.tmpfs.take())
        .unwrap_or_default()
        .into_iter()
        .collect();
    let slot_shapes: Vec<String> = slots
        .iter()
        .map(|slot| {
            format!(
                "{}:{:?}:{}",
                slot.parent.display(),
                slot.kind,
                slot.read_only
            )
        })
        .collect();
    let trust = match info.trust {
        Trust::Trusted => "trusted",
        Trust::Untrusted => "untrusted",
    };
    let body_text = serde_json::to_string(&template).map_err(|e| e.to_string())?;
    let key = format!(
        "trust={trust}\nstore={}\nclaims={}\nbody={body_text}\ntmpfs={tmpfs:?}\nlabels={labels:?}\nslots={slot_shapes:?}",
        info.store_id,
        claims.display()
    );
    // A shape that still names the run (its workspace is a per-run copy, say) never matches
    // another run: not worth a pool entry.
    if key.contains(run_id) {
        return Err(
            "a mount target or setting names the run (host_state auto binds the run tree's scratch dir at a path naming its root run)"
                .to_owned(),
        );
    }
    if let Some(host) = template.host_config.as_mut() {
        host.tmpfs = (!tmpfs.is_empty()).then(|| tmpfs.into_iter().collect());
    }
    template.labels = Some(labels.into_iter().collect());
    let digest = key_digest(&key);
    Ok(Shape {
        key,
        template: Arc::new(Template {
            body: template,
            slots,
            digest,
            claims,
        }),
        run_sources,
        env,
    })
}

/// The first 32 hex digits of the key's SHA-256: the entry's [`LABEL_WARM_KEY`].
fn key_digest(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .take(16)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The claim marker of entry `id` in `claims`.
fn claim_path(claims: &Path, id: &str) -> PathBuf {
    claims.join(format!("{CLAIM_PREFIX}{id}"))
}

/// Claims entry `id` for `owner`, atomically across processes: the marker naming `owner` is
/// written beside it first and hard-linked into place, so it appears whole or not at all, and
/// only once. `Ok(None)`: another process holds it. An id that is not a plain name is refused.
/// Blocking.
pub(crate) fn stake_claim(
    claims: &Path,
    id: &str,
    owner: &str,
) -> std::io::Result<Option<PathBuf>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(std::io::Error::other(format!(
            "container id {id:?} is not a plain name"
        )));
    }
    let marker = claim_path(claims, id);
    let staged = claims.join(format!("{SLOT_PREFIX}staged-{}", nonce()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staged)
        .and_then(|mut file| file.write_all(owner.as_bytes()));
    let linked = written.and_then(|()| std::fs::hard_link(&staged, &marker));
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => Ok(Some(marker)),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(error) => Err(error),
    }
}

/// Who holds entry `id`'s claim: `None` when nobody does, else the owner the marker names
/// (empty when unreadable). Blocking.
pub(crate) fn claim_holder(claims: &Path, id: &str) -> Option<String> {
    match std::fs::read_to_string(claim_path(claims, id)) {
        Ok(owner) => Some(owner),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => Some(String::new()),
    }
}

/// An entry's claim marker, as its labels place it (for the reaper), when they name an
/// absolute directory and the id is a plain name.
pub(crate) fn claim_marker_of(id: &str, labels: &BTreeMap<String, String>) -> Option<PathBuf> {
    let dir = Path::new(labels.get(LABEL_WARM_CLAIMS)?);
    (dir.is_absolute() && !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| claim_path(dir, id))
}

/// What the reaper does with one warm pool entry. One rule, here:
/// - a claimed entry (its marker exists) belongs to the run that claimed it: removed when that
///   process is provably gone, kept otherwise;
/// - an unclaimed entry whose maker lives is that process's: kept;
/// - an unclaimed entry no live process owns waits for another process to claim it, kept while
///   it runs, is younger than [`MAX_IDLE`], and the reaping process keeps a pool itself
///   (`ITERION_SANDBOX_WARM` > 0); otherwise removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Keep,
    /// Remove; `claimed` when the marker of a gone claimer is to go with it.
    Remove {
        claimed: bool,
    },
}

/// The facts [`judge`] rules on, read from an entry's labels, the engine and the host.
#[derive(Clone, Debug)]
pub(crate) struct EntryFacts {
    pub(crate) owner_gone: bool,
    /// `None`: no claim marker; `Some(gone)`: claimed, and whether its holder is gone.
    pub(crate) claim_holder_gone: Option<bool>,
    pub(crate) running: bool,
    pub(crate) age: Option<Duration>,
    pub(crate) pool_enabled: bool,
}

/// See [`Verdict`]. Pure.
pub(crate) fn judge(facts: &EntryFacts) -> Verdict {
    match facts.claim_holder_gone {
        Some(true) => Verdict::Remove { claimed: true },
        Some(false) => Verdict::Keep,
        None if !facts.owner_gone => Verdict::Keep,
        None => {
            let adoptable =
                facts.running && facts.pool_enabled && facts.age.is_some_and(|age| age < MAX_IDLE);
            if adoptable {
                Verdict::Keep
            } else {
                Verdict::Remove { claimed: false }
            }
        }
    }
}

/// How long ago an entry was made, from its [`LABEL_WARM_MADE`]; `None` when the label is
/// missing or malformed (such an entry is never adoptable).
pub(crate) fn age_of(labels: &BTreeMap<String, String>) -> Option<Duration> {
    let made = labels.get(LABEL_WARM_MADE)?.parse::<u64>().ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    now.checked_sub(made).map(Duration::from_secs)
}

/// The owner string of this process, as its claim markers and entries name it.
pub(crate) fn owner_of_this_process() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(this_owner)
}

/// The directory holding the first path component named `run_id`, when there is one.
fn run_id_parent(source: &Path, run_id: &str) -> Option<PathBuf> {
    let mut parent = PathBuf::new();
    for component in source.components() {
        if let Component::Normal(name) = component
            && name == run_id
        {
            return Some(parent);
        }
        parent.push(component);
    }
    None
}

/// This process, as an entry's owner label names it. Blocking (reads `/proc`).
fn this_owner() -> String {
    let pid = std::process::id();
    format!(
        "{}/{}/{pid}/{}",
        boot_id(),
        pid_namespace(),
        start_time(pid).unwrap_or_default()
    )
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| id.trim().to_owned())
        .unwrap_or_default()
}

fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|link| link.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Field 22 of `/proc/<pid>/stat` (after the parenthesised command, which may hold spaces).
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19).map(str::to_owned)
}

/// Whether the process an owner label names is provably gone: same boot and pid namespace as
/// this process, and no process with that pid and start time. An owner this host cannot judge
/// (another boot, another pid namespace, a malformed label) is kept. Blocking (reads `/proc`).
pub(crate) fn owner_is_gone(owner: &str) -> bool {
    let parts: Vec<&str> = owner.split('/').collect();
    let [boot, ns, pid, start] = parts.as_slice() else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if boot.is_empty() || *boot != boot_id() || *ns != pid_namespace() {
        return false;
    }
    start_time(pid).is_none_or(|now| now != *start)
}

/// Removes an entry's slots that are still slots (a claimed one was renamed away). Only paths
/// whose name starts with [`SLOT_PREFIX`] are touched. Blocking.
pub(crate) fn remove_slots<'a>(slots: impl IntoIterator<Item = &'a Path>) {
    for slot in slots {
        let is_slot = slot
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(SLOT_PREFIX));
        if !is_slot {
            continue;
        }
        match std::fs::symlink_metadata(slot) {
            Ok(meta) if meta.is_dir() => {
                let _ = std::fs::remove_dir_all(slot);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(slot);
            }
            Err(_) => {}
        }
    }
}

/// The slots an entry's label lists.
pub(crate) fn slots_of(labels: &BTreeMap<String, String>) -> Vec<PathBuf> {
    labels
        .get(LABEL_WARM_SLOTS)
        .map(|slots| slots.lines().map(PathBuf::from).collect())
        .unwrap_or_default()
}

/// What each per-run bind source is: an empty directory, a directory of sockets only, or a
/// regular file; anything else (missing, a symlink, a directory with content — a per-run
/// worktree or copy) is not poolable. Blocking.
pub(crate) fn host_kind(path: &Path) -> Option<SlotKind> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.is_file() {
        return Some(SlotKind::File);
    }
    if !meta.is_dir() {
        return None;
    }
    let mut kinds = Vec::new();
    for child in std::fs::read_dir(path).ok()? {
        kinds.push(child.ok()?.file_type().ok()?);
    }
    if kinds.is_empty() {
        Some(SlotKind::Dir)
    } else if kinds.iter().all(FileTypeExt::is_socket) {
        Some(SlotKind::Sockets)
    } else {
        None
    }
}

#[derive(Default)]
struct ShapeState {
    template: Option<Arc<Template>>,
    ready: Vec<Entry>,
    filling: usize,
}

/// The pool of one driver (and every copy [`Driver::with_run_log`](iterion_sandbox::Driver::with_run_log)
/// makes of it).
pub(crate) struct WarmPool {
    size: usize,
    api: Arc<dyn ContainerApi>,
    engine: EngineKind,
    /// The endpoint the API speaks to, when known: what a detached filler connects to.
    endpoint: Option<String>,
    owner: String,
    shapes: Mutex<HashMap<String, ShapeState>>,
}

impl std::fmt::Debug for WarmPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmPool")
            .field("size", &self.size)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

static NONCE: AtomicU64 = AtomicU64::new(0);

fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{:x}-{:x}-{:x}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff,
        NONCE.fetch_add(1, Ordering::SeqCst)
    )
}

/// The program a pool refills through, detached from this process (`<program> __warm-fill`,
/// the job on its stdin): installed once by the binary that has the subcommand
/// ([`install_warm_filler`]). Without one, refills run on this process's runtime.
static FILLER: OnceLock<PathBuf> = OnceLock::new();

/// Makes every pool of this process refill through `program __warm-fill` (see
/// [`run_fill_job`]), a process of its own that outlives this one: so a short-lived process (one
/// `iterion run`) leaves ready entries for the next. Only the first call counts.
pub fn install_warm_filler(program: impl Into<PathBuf>) {
    let _ = FILLER.set(program.into());
}

/// What a detached filler is asked to do on the engine at `endpoint`: remove the claimed
/// entries of ended runs (each with the slots and marker to remove after it), then make
/// entries of `template` until `size` unclaimed ones run.
#[derive(serde::Serialize, serde::Deserialize)]
struct FillJob {
    endpoint: String,
    engine: EngineKind,
    store: String,
    size: usize,
    #[serde(default)]
    remove: Vec<(String, Vec<PathBuf>)>,
    template: Option<Template>,
}

/// The filters that list a store's entries of one shape.
fn shape_filters(store: &str, digest: &str) -> Vec<String> {
    let mut filters = iterion_sandbox::managed_filters(store);
    filters.push(format!("{LABEL_PURPOSE}={WARM_PURPOSE}"));
    filters.push(format!("{LABEL_WARM_KEY}={digest}"));
    filters
}

/// Runs one fill job (the `__warm-fill` subcommand's whole work): connects to the job's engine
/// and makes entries until the shape has the job's size of unclaimed running ones. Returns how
/// many it made. The entries name this process as their owner; once it exits they wait for a
/// claim (see [`Verdict`]).
///
/// # Errors
///
/// A job that does not parse, an engine that does not answer or is not the job's, a listing
/// that fails; an entry that cannot be made is logged and ends the job.
pub async fn run_fill_job(job: &str) -> Result<usize, String> {
    let job: FillJob = serde_json::from_str(job).map_err(|e| format!("fill job: {e}"))?;
    let (api, version) =
        crate::bollard_api::BollardApi::connect(&job.endpoint, crate::endpoints::CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("connect {}: {e}", job.endpoint))?;
    if version.kind != job.engine {
        return Err(format!(
            "{} answers at {}, not {}",
            version.kind, job.endpoint, job.engine
        ));
    }
    let api: Arc<dyn ContainerApi> = Arc::new(api);
    for (id, paths) in job.remove {
        match api.remove_container(&id).await {
            Ok(()) => {}
            Err(error) if error.is_not_found() => {}
            // Kept for the reaper: its claimer is gone, so it goes at the next pass.
            Err(error) => return Err(format!("remove {id}: {error}")),
        }
        tokio::task::spawn_blocking(move || remove_slots(paths.iter().map(PathBuf::as_path)))
            .await
            .map_err(|join| join.to_string())?;
    }
    let Some(template) = job.template else {
        return Ok(0);
    };
    let pool = WarmPool::new(
        job.size.min(crate::settings::MAX_WARM),
        Arc::clone(&api),
        job.engine,
    );
    let ready = unclaimed(&*api, &job.store, &template).await?.len();
    let mut made = 0;
    for _ in ready..pool.size {
        pool.make(&template).await?;
        made += 1;
    }
    Ok(made)
}

/// The running entries of `template`'s shape nobody has claimed, by id with their labels.
async fn unclaimed(
    api: &dyn ContainerApi,
    store: &str,
    template: &Template,
) -> Result<Vec<iterion_sandbox::ListedResource>, String> {
    let listed = api
        .list_running_containers(shape_filters(store, &template.digest))
        .await
        .map_err(|e| format!("list warm pool entries: {e}"))?;
    let claims = template.claims.clone();
    tokio::task::spawn_blocking(move || {
        listed
            .into_iter()
            .filter(|entry| entry.labels.contains_key(LABEL_WARM_KEY))
            .filter(|entry| claim_holder(&claims, &entry.id).is_none())
            .collect()
    })
    .await
    .map_err(|join| join.to_string())
}

/// The pool of every driver of this process connected to `endpoint` (the engine's factory
/// makes a driver per run attempt, so a pool kept by one driver would never see a second run).
/// Size 0 is a private, empty pool.
pub(crate) fn process_pool(
    endpoint: &str,
    engine: EngineKind,
    size: usize,
    api: Arc<dyn ContainerApi>,
) -> Arc<WarmPool> {
    type Pools = Mutex<HashMap<(String, String, usize), Arc<WarmPool>>>;
    static POOLS: std::sync::OnceLock<Pools> = std::sync::OnceLock::new();
    if size == 0 {
        return Arc::new(WarmPool::new(0, api, engine));
    }
    let mut pools = POOLS
        .get_or_init(Pools::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Arc::clone(
        pools
            .entry((endpoint.to_owned(), engine.as_str().to_owned(), size))
            .or_insert_with(|| {
                let mut pool = WarmPool::new(size, api, engine);
                pool.endpoint = Some(endpoint.to_owned());
                Arc::new(pool)
            }),
    )
}

impl WarmPool {
    pub(crate) fn new(size: usize, api: Arc<dyn ContainerApi>, engine: EngineKind) -> Self {
        WarmPool {
            size,
            api,
            engine,
            endpoint: None,
            owner: if size == 0 {
                String::new()
            } else {
                owner_of_this_process().to_owned()
            },
            shapes: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the pool keeps anything (`ITERION_SANDBOX_WARM` > 0).
    pub(crate) fn enabled(&self) -> bool {
        self.size > 0
    }

    /// The detached filler and the endpoint it connects to, when this pool refills through one.
    fn detached(&self) -> Option<(&PathBuf, &String)> {
        FILLER.get().zip(self.endpoint.as_ref())
    }

    /// Whether a frozen container's removal can be handed to a detached filler: only when the
    /// operator keeps a pool (`ITERION_SANDBOX_WARM` ≥ 1, so iterion's containers already outlive
    /// a run) and a filler is installed. Without a pool a run's container is removed before
    /// `iterion run` returns: nothing of the run is left when it has ended.
    pub(crate) fn hands_off(&self) -> bool {
        self.enabled() && self.detached().is_some()
    }

    /// Starts a detached filler that removes the (frozen) container `id`, then `paths` (a
    /// claimed entry's slots and claim marker). Returns once the filler has its job.
    pub(crate) async fn hand_off_removal(
        &self,
        id: &str,
        paths: Vec<PathBuf>,
    ) -> Result<(), String> {
        let (program, endpoint) = self.detached().ok_or("no detached filler")?;
        let job = FillJob {
            endpoint: endpoint.clone(),
            engine: self.engine,
            store: String::new(),
            size: 0,
            remove: vec![(id.to_owned(), paths)],
            template: None,
        };
        let child = start_filler(program, &job).await?;
        reap_filler(child, || {});
        Ok(())
    }

    /// The ids of the entries ready to be claimed, every shape together.
    pub(crate) fn ready_ids(&self) -> Vec<String> {
        let shapes = self
            .shapes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        shapes
            .values()
            .flat_map(|state| state.ready.iter().map(|entry| entry.id.clone()))
            .collect()
    }

    /// Claims a ready entry of `shape`, if any: one this process made first, else one of the
    /// store's that no live process holds (made by a filler, or left by a process that ended).
    /// Every claim stakes the entry's marker ([`stake_claim`]), so two claimers — in this
    /// process or another — never get the same entry, and it is never handed out again.
    /// Remembers the shape so [`WarmPool::refill`] can make more.
    pub(crate) async fn take(&self, shape: &Shape, store: &str) -> Option<Entry> {
        loop {
            let popped = {
                let mut shapes = self
                    .shapes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let state = shapes.entry(shape.key.clone()).or_default();
                if state.template.is_none() {
                    state.template = Some(Arc::clone(&shape.template));
                }
                state.ready.pop()
            };
            let Some(entry) = popped else { break };
            if let Some(claimed) = self.stake(&shape.template, entry).await {
                return Some(claimed);
            }
        }
        let candidates = match unclaimed(&*self.api, store, &shape.template).await {
            Ok(candidates) => candidates,
            Err(reason) => {
                tracing::debug!("sandbox: warm pool: {reason}");
                return None;
            }
        };
        for candidate in candidates {
            let Some(slots) = foreign_slots(&shape.template, &candidate.labels) else {
                tracing::debug!(
                    "sandbox: warm pool entry {} lists slots this shape does not have",
                    candidate.name
                );
                continue;
            };
            let entry = Entry {
                id: candidate.id,
                slots,
                claim: None,
            };
            if let Some(claimed) = self.stake(&shape.template, entry).await {
                return Some(claimed);
            }
        }
        None
    }

    /// Stakes `entry`'s claim marker for this process; `None` when another holds it.
    async fn stake(&self, template: &Template, mut entry: Entry) -> Option<Entry> {
        let (claims, id, owner) = (
            template.claims.clone(),
            entry.id.clone(),
            owner_of_this_process().to_owned(),
        );
        let staked = tokio::task::spawn_blocking(move || stake_claim(&claims, &id, &owner))
            .await
            .map_err(|join| std::io::Error::other(join.to_string()))
            .and_then(|staked| staked);
        match staked {
            Ok(Some(marker)) => {
                entry.claim = Some(marker);
                Some(entry)
            }
            Ok(None) => None,
            Err(error) => {
                tracing::debug!("sandbox: warm pool: claim {}: {error}", entry.id);
                None
            }
        }
    }

    /// Starts background creates until `shape` has `size` entries ready or being made: through
    /// the installed detached filler when there is one and the endpoint is known, else on this
    /// process's runtime.
    pub(crate) fn refill(self: &Arc<Self>, key: &str, store: &str) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let detached = self.detached();
        let (template, missing) = {
            let mut shapes = self
                .shapes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(state) = shapes.get_mut(key) else {
                return;
            };
            let Some(template) = state.template.clone() else {
                return;
            };
            let missing = if detached.is_some() {
                // One filler at a time per shape; it counts what runs itself.
                usize::from(state.filling == 0)
            } else {
                self.size.saturating_sub(state.ready.len() + state.filling)
            };
            state.filling += missing;
            (template, missing)
        };
        if missing == 0 {
            return;
        }
        if let Some((program, endpoint)) = detached {
            let job = FillJob {
                endpoint: endpoint.clone(),
                engine: self.engine,
                store: store.to_owned(),
                size: self.size,
                remove: Vec::new(),
                template: Some((*template).clone()),
            };
            let (pool, key, program) = (Arc::clone(self), key.to_owned(), program.clone());
            let done = move || {
                let mut shapes = pool
                    .shapes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let state = shapes.entry(key).or_default();
                state.filling = state.filling.saturating_sub(1);
            };
            handle.spawn(async move {
                match start_filler(&program, &job).await {
                    Ok(child) => reap_filler(child, done),
                    Err(error) => {
                        tracing::debug!("sandbox: warm pool filler: {error}");
                        done();
                    }
                }
            });
            return;
        }
        for _ in 0..missing {
            let (pool, template, key) = (Arc::clone(self), Arc::clone(&template), key.to_owned());
            handle.spawn(async move {
                let made = pool.make(&template).await;
                let mut shapes = pool
                    .shapes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let state = shapes.entry(key).or_default();
                state.filling = state.filling.saturating_sub(1);
                match made {
                    Ok(entry) => state.ready.push(entry),
                    Err(reason) => tracing::debug!("sandbox: warm pool entry not made: {reason}"),
                }
            });
        }
    }

    /// Creates and starts one entry: its slots first, then the container naming them.
    async fn make(&self, template: &Template) -> Result<Entry, String> {
        let id = nonce();
        let slots: Vec<PathBuf> = template
            .slots
            .iter()
            .enumerate()
            .map(|(n, slot)| slot.parent.join(format!("{SLOT_PREFIX}{id}-{n}")))
            .collect();
        let made = {
            let (slots, kinds): (Vec<PathBuf>, Vec<SlotKind>) = (
                slots.clone(),
                template.slots.iter().map(|slot| slot.kind).collect(),
            );
            tokio::task::spawn_blocking(move || make_slots(&slots, &kinds))
                .await
                .map_err(|join| join.to_string())
                .and_then(|made| made.map_err(|error| error.to_string()))
        };
        if let Err(reason) = made {
            let doomed = slots.clone();
            let _ = tokio::task::spawn_blocking(move || {
                remove_slots(doomed.iter().map(PathBuf::as_path));
            })
            .await;
            return Err(reason);
        }
        let mut body = template.body.clone();
        if let Some(mounts) = body.host_config.as_mut().and_then(|h| h.mounts.as_mut()) {
            for (slot, path) in template.slots.iter().zip(&slots) {
                if let Some(mount) = mounts.get_mut(slot.mount) {
                    mount.source = Some(path.to_string_lossy().into_owned());
                }
            }
        }
        let labels = body.labels.get_or_insert_with(HashMap::new);
        labels.insert(LABEL_WARM_OWNER.to_owned(), self.owner.clone());
        let listed: Vec<String> = slots
            .iter()
            .map(|slot| slot.to_string_lossy().into_owned())
            .collect();
        labels.insert(LABEL_WARM_SLOTS.to_owned(), listed.join("\n"));
        labels.insert(LABEL_WARM_KEY.to_owned(), template.digest.clone());
        labels.insert(
            LABEL_WARM_CLAIMS.to_owned(),
            template.claims.to_string_lossy().into_owned(),
        );
        let made_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        labels.insert(LABEL_WARM_MADE.to_owned(), made_at.to_string());
        let name = format!("iterion-warm-{id}");
        let created = match self.api.create_container(&name, body).await {
            Ok(created) => created,
            Err(error) => {
                let doomed = slots.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    remove_slots(doomed.iter().map(PathBuf::as_path));
                })
                .await;
                return Err(format!("create {name}: {error}"));
            }
        };
        if let Err(error) = self.api.start_container(&created).await {
            let _ = self.api.remove_container(&created).await;
            let doomed = slots.clone();
            let _ = tokio::task::spawn_blocking(move || {
                remove_slots(doomed.iter().map(PathBuf::as_path));
            })
            .await;
            return Err(format!("start {name}: {error}"));
        }
        tracing::debug!("sandbox: warm pool entry {name} ready on {}", self.engine);
        Ok(Entry {
            id: created,
            slots,
            claim: None,
        })
    }
}

/// Starts `program __warm-fill` in a process group of its own (a terminal's Ctrl-C does not
/// reach it; it outlives this process) and writes the whole job to its stdin, closing it: the
/// filler has its job when this returns.
async fn start_filler(program: &Path, job: &FillJob) -> Result<tokio::process::Child, String> {
    use tokio::io::AsyncWriteExt;
    let text = serde_json::to_vec(job).map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(program)
        .arg(FILL_SUBCOMMAND)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| format!("start {} {FILL_SUBCOMMAND}: {e}", program.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&text)
            .await
            .map_err(|e| format!("write the fill job: {e}"))?;
    }
    Ok(child)
}

/// Waits for a filler in the background (a long-lived process leaves no zombie), then `done`.
fn reap_filler(mut child: tokio::process::Child, done: impl FnOnce() + Send + 'static) {
    let waited = async move {
        match child.wait().await {
            Ok(status) if !status.success() => {
                tracing::debug!("sandbox: {FILL_SUBCOMMAND} ended with {status}");
            }
            Ok(_) => {}
            Err(error) => tracing::debug!("sandbox: wait for {FILL_SUBCOMMAND}: {error}"),
        }
        done();
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => drop(handle.spawn(waited)),
        Err(_) => drop(waited),
    }
}

/// The hidden subcommand a detached filler runs.
pub const FILL_SUBCOMMAND: &str = "__warm-fill";

/// An entry's slots as its label lists them, when they are this shape's: one per slot of the
/// template, each a [`SLOT_PREFIX`] name directly in the template slot's parent.
fn foreign_slots(template: &Template, labels: &BTreeMap<String, String>) -> Option<Vec<PathBuf>> {
    let slots = slots_of(labels);
    if slots.len() != template.slots.len() {
        return None;
    }
    let fits = slots.iter().zip(&template.slots).all(|(slot, expected)| {
        slot.parent() == Some(expected.parent.as_path())
            && slot
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(SLOT_PREFIX) && name != SLOT_PREFIX)
    });
    fits.then_some(slots)
}

fn make_slots(slots: &[PathBuf], kinds: &[SlotKind]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    for (slot, kind) in slots.iter().zip(kinds) {
        match kind {
            SlotKind::Dir | SlotKind::Sockets => {
                std::fs::DirBuilder::new().mode(0o700).create(slot)?;
            }
            SlotKind::File => drop(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .open(slot)?,
            ),
        }
    }
    Ok(())
}

/// Hands a claimed entry's slots to the run (see the module doc): returns the slots left over
/// (to remove at cleanup), or why the claim cannot go on. Blocking.
pub(crate) fn hand_over(shape: &Shape, entry: &Entry) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut leftovers = Vec::new();
    for ((slot, template), source) in entry
        .slots
        .iter()
        .zip(&shape.template.slots)
        .zip(&shape.run_sources)
    {
        let describe = |what: &str, error: std::io::Error| {
            format!(
                "{what} {} for {}: {error}",
                slot.display(),
                source.display()
            )
        };
        match template.kind {
            SlotKind::Dir | SlotKind::Sockets => {
                let meta = std::fs::symlink_metadata(source)
                    .map_err(|e| describe("inspect the run's dir", e))?;
                if !meta.is_dir() {
                    return Err(format!("{} is no longer a directory", source.display()));
                }
                let empty = std::fs::read_dir(source)
                    .map_err(|e| describe("read the run's dir", e))?
                    .next()
                    .is_none();
                if empty {
                    std::fs::remove_dir(source).map_err(|e| describe("replace", e))?;
                    std::fs::rename(slot, source).map_err(|e| describe("rename", e))?;
                    std::fs::set_permissions(source, meta.permissions())
                        .map_err(|e| describe("chmod", e))?;
                } else if template.read_only {
                    use std::os::unix::fs::FileTypeExt;
                    for child in std::fs::read_dir(source).map_err(|e| describe("read", e))? {
                        let child = child.map_err(|e| describe("read", e))?;
                        let kind = child.file_type().map_err(|e| describe("read", e))?;
                        if !kind.is_socket() {
                            return Err(format!(
                                "{} holds something other than sockets",
                                source.display()
                            ));
                        }
                        std::fs::hard_link(child.path(), slot.join(child.file_name()))
                            .map_err(|e| describe("link into", e))?;
                    }
                    std::fs::set_permissions(slot, std::fs::Permissions::from_mode(0o755))
                        .map_err(|e| describe("chmod", e))?;
                    leftovers.push(slot.clone());
                } else {
                    return Err(format!(
                        "{} is written by the sandbox and not empty",
                        source.display()
                    ));
                }
            }
            SlotKind::File => {
                let bytes = std::fs::read(source).map_err(|e| describe("read", e))?;
                std::fs::write(slot, bytes).map_err(|e| describe("write", e))?;
                leftovers.push(slot.clone());
            }
        }
    }
    Ok(leftovers)
}

/// The slots of an entry and its claim marker, for a claim that failed (the entry is removed,
/// these with it).
pub(crate) fn entry_slots(entry: &Entry) -> Vec<PathBuf> {
    entry.slots.iter().cloned().chain(claim_of(entry)).collect()
}

/// A claimed entry's marker (removed after its container).
pub(crate) fn claim_of(entry: &Entry) -> Option<PathBuf> {
    entry.claim.clone()
}

#[cfg(test)]
#[path = "warm_tests.rs"]
mod tests;

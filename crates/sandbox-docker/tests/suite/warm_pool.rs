//! The warm pool (issue 18 item 4) against the real engines: a claim matches the spec and gets
//! the run's own env and per-run dirs, a mismatch starts cold, two concurrent claims never get the
//! same sandbox, an untrusted run never claims a trusted entry, an entry another pool made (as
//! another process's would be) is found through the engine and claimed once. (A killed owner's entries are
//! reaped at the next start: crates/cli/tests/suite/warm_pool.rs, with a real `iterion run`.)

// Test code: a failed unwrap is the assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use iterion_sandbox::{
    Driver, EngineMount, EngineMountKind, NoProgress, ProxyAttachment, RunInfo, SandboxRun, Spec,
    Trust,
};
use iterion_sandbox_docker::{DockerDriver, DockerSettings};
use pretty_assertions::assert_eq;

use super::docker_driver::{busybox_spec, container_exists, ids, run_info, sh, text};
use super::engines::{Engine, EngineGuard};

crate::engine_tests!(
    a_claim_matches_the_spec_and_gets_the_runs_own_env_and_dirs,
    a_mismatched_spec_starts_cold_and_leaves_the_entry,
    an_untrusted_run_never_claims_a_trusted_entry,
    two_concurrent_claims_never_get_the_same_sandbox,
    a_claimed_entry_that_fails_to_start_leaves_no_slot_behind,
    an_entry_another_pool_made_is_claimed_once_through_the_engine,
);

const FILES_TARGET: &str = "/run/iterion/files";

/// A poolable shape with per-run binds: a run files dir under `<tmp>/runs/<run id>/files` (a
/// slot renamed at claim) and a proxy (`<run dir>/net`, its socket hard-linked at claim).
struct Fixture {
    tmp: tempfile::TempDir,
    ws: tempfile::TempDir,
    _sockets: Vec<std::os::unix::net::UnixListener>,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            tmp: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
            _sockets: Vec::new(),
        }
    }

    fn files_dir(&self, run_id: &str) -> PathBuf {
        self.tmp.path().join("runs").join(run_id).join("files")
    }

    /// The run's info and spec: `FOO=<tag>` in the spec env, a proxy token naming the run.
    fn run(&mut self, run_id: &str, store: &str, tag: &str) -> (Spec, RunInfo) {
        let mut info = run_info(run_id, store, self.ws.path(), self.tmp.path());
        let net = info.run_dir.join("net");
        std::fs::create_dir_all(&net).unwrap();
        self._sockets
            .push(std::os::unix::net::UnixListener::bind(net.join("proxy.sock")).unwrap());
        info.proxy = Some(ProxyAttachment {
            endpoint: format!("http://t:token-{run_id}@127.0.0.1:3128"),
            host_socket: Some(net.join("proxy.sock")),
            port: None,
        });
        let files = self.files_dir(run_id);
        std::fs::create_dir_all(&files).unwrap();
        let mut spec = busybox_spec();
        spec.env.insert("FOO".to_owned(), tag.to_owned());
        spec.engine_mounts.push(EngineMount {
            kind: EngineMountKind::Bind,
            source: files.to_string_lossy().into_owned(),
            target: FILES_TARGET.to_owned(),
            read_only: false,
            purpose: "run-files".to_owned(),
        });
        (spec, info)
    }
}

async fn start(driver: &DockerDriver, spec: &Spec, info: RunInfo) -> Box<dyn SandboxRun> {
    let prepared = driver.prepare(spec, &NoProgress).await.unwrap();
    driver.start(prepared, info).await.unwrap()
}

/// Waits until `n` entries are ready (a refill runs in the background).
async fn ready(driver: &DockerDriver, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = driver.warm_ready();
        if ready.len() >= n {
            return ready;
        }
        assert!(
            Instant::now() < deadline,
            "the pool has {} ready entries after 60 s, not {n}",
            ready.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Removes the entries still in the pool at the end of a test.
fn guard_pool(engine: Engine, driver: &DockerDriver) -> Vec<EngineGuard> {
    driver
        .warm_ready()
        .into_iter()
        .map(|id| EngineGuard::container(engine, id))
        .collect()
}

async fn labels(client: &Docker, id: &str) -> HashMap<String, String> {
    let inspect = client.inspect_container(id, None).await.unwrap();
    inspect.config.unwrap().labels.unwrap_or_default()
}

async fn container_env(client: &Docker, id: &str) -> Vec<String> {
    let inspect = client.inspect_container(id, None).await.unwrap();
    inspect.config.unwrap().env.unwrap_or_default()
}

fn slots_under(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(".iterion-warm-"))
                .collect()
        })
        .unwrap_or_default()
}

async fn warm_driver(engine: Engine, test_id: &str, size: usize) -> Option<(DockerDriver, Docker)> {
    engine
        .driver_or_skip(
            test_id,
            DockerSettings::default().persist_nix(false).warm(size),
        )
        .await
}

async fn a_claim_matches_the_spec_and_gets_the_runs_own_env_and_dirs(engine: Engine) {
    let (test_id, run_a) = ids(engine, "warm-claim");
    let (_, run_b) = ids(engine, "warm-claim");
    let Some((driver, client)) = warm_driver(engine, &test_id, 1).await else {
        return;
    };
    let mut fx = Fixture::new();
    let store = "store-warm-claim";

    // A cold run teaches the pool its shape; the pool fills behind it.
    let (spec_a, info_a) = fx.run(&run_a, store, "a");
    let a = start(&driver, &spec_a, info_a).await;
    let _guard_a = EngineGuard::container(engine, a.id());
    let entry = ready(&driver, 1).await[0].clone();
    assert_ne!(entry, a.id(), "the cold run is not a pool entry");
    // The entry carries no run's env, no run id, and names its owner.
    let entry_labels = labels(&client, &entry).await;
    assert_eq!(
        (
            entry_labels.get("iterion.io/purpose").map(String::as_str),
            entry_labels.contains_key("iterion.io/run-id"),
            entry_labels
                .get("iterion.io/warm-owner")
                .is_some_and(|owner| owner.contains(&format!("/{}/", std::process::id()))),
        ),
        (Some("warm-pool"), false, true)
    );
    let env = container_env(&client, &entry).await;
    assert!(
        !env.iter()
            .any(|pair| pair.contains("token-") || pair.starts_with("FOO=")),
        "a pool entry holds no run's env: {env:?}"
    );
    a.cleanup().await.unwrap();

    // Run B, same shape: it claims the entry, with its own env and its own dirs.
    let (spec_b, info_b) = fx.run(&run_b, store, "b");
    let b = start(&driver, &spec_b, info_b).await;
    let _guard_b = EngineGuard::container(engine, b.id());
    assert_eq!(b.id(), entry, "the matching run claims the ready entry");
    let out = sh(
        &*b,
        "echo \"$FOO $HTTPS_PROXY\"; test -S /run/iterion/net/proxy.sock && echo sock; echo hi > /run/iterion/files/x",
    )
    .await;
    assert_eq!(
        (out.exit_code, text(out.stdout)),
        (
            0,
            format!("b http://t:token-{run_b}@127.0.0.1:3128\nsock\n")
        )
    );
    assert_eq!(
        std::fs::read_to_string(fx.files_dir(&run_b).join("x")).unwrap(),
        "hi\n",
        "the run's files dir on the host is the one the claimed sandbox writes"
    );
    // The next entry is being made; the claimed one is never handed out again.
    let next = ready(&driver, 1).await;
    assert!(!next.contains(&entry), "a claimed entry is never reused");
    let _pool = guard_pool(engine, &driver);
    b.cleanup().await.unwrap();
    assert!(!container_exists(&client, &entry).await);
    // The claimed entry's leftover slots went with it; the ready entry keeps its own.
    let slots = slots_under(fx.tmp.path()).len() + slots_under(&fx.tmp.path().join("runs")).len();
    assert_eq!(slots, 2, "only the ready entry's two slots are left");
}

async fn a_mismatched_spec_starts_cold_and_leaves_the_entry(engine: Engine) {
    let (test_id, run_a) = ids(engine, "warm-mismatch");
    let (_, run_c) = ids(engine, "warm-mismatch");
    let Some((driver, _client)) = warm_driver(engine, &test_id, 1).await else {
        return;
    };
    let mut fx = Fixture::new();
    let store = "store-warm-mismatch";
    let (spec_a, info_a) = fx.run(&run_a, store, "a");
    let a = start(&driver, &spec_a, info_a).await;
    let _guard_a = EngineGuard::container(engine, a.id());
    let entry = ready(&driver, 1).await[0].clone();
    let _pool = guard_pool(engine, &driver);
    // Another user is fixed at create time: a different shape.
    let (mut spec_c, info_c) = fx.run(&run_c, store, "c");
    spec_c.user = Some("1234".to_owned());
    let c = start(&driver, &spec_c, info_c).await;
    let _guard_c = EngineGuard::container(engine, c.id());
    assert_ne!(c.id(), entry, "a mismatched spec starts cold");
    assert!(
        driver.warm_ready().contains(&entry),
        "the entry stays ready"
    );
    let out = sh(&*c, "id -u").await;
    assert_eq!(text(out.stdout), "1234\n");
    let _pool_c = {
        ready(&driver, 2).await;
        guard_pool(engine, &driver)
    };
    c.cleanup().await.unwrap();
    a.cleanup().await.unwrap();
}

async fn an_untrusted_run_never_claims_a_trusted_entry(engine: Engine) {
    let (test_id, run_a) = ids(engine, "warm-untrusted");
    let (_, run_u) = ids(engine, "warm-untrusted");
    let Some((driver, client)) = warm_driver(engine, &test_id, 1).await else {
        return;
    };
    let mut fx = Fixture::new();
    let store = "store-warm-untrusted";
    let (spec_a, info_a) = fx.run(&run_a, store, "a");
    let a = start(&driver, &spec_a, info_a).await;
    let _guard_a = EngineGuard::container(engine, a.id());
    let entry = ready(&driver, 1).await[0].clone();
    let _pool = guard_pool(engine, &driver);
    // The attacker's run: same image, same workspace path, same binds — untrusted.
    let (mut spec_u, mut info_u) = fx.run(&run_u, store, "u");
    info_u.trust = Trust::Untrusted;
    spec_u.user = None;
    let u = start(&driver, &spec_u, info_u).await;
    let _guard_u = EngineGuard::container(engine, u.id());
    assert_ne!(
        u.id(),
        entry,
        "an untrusted run never claims a trusted entry"
    );
    assert!(driver.warm_ready().contains(&entry));
    let caps = sh(&*u, "grep CapEff /proc/self/status").await;
    assert_eq!(text(caps.stdout), "CapEff:\t0000000000000000\n");
    let _pool_u = {
        ready(&driver, 2).await;
        guard_pool(engine, &driver)
    };
    // …and its own entry is untrusted too: no trusted run ever claims it.
    let untrusted_entry = driver
        .warm_ready()
        .into_iter()
        .find(|id| *id != entry)
        .unwrap();
    let inspect = client
        .inspect_container(&untrusted_entry, None)
        .await
        .unwrap();
    // docker keeps `ALL`; podman lists what it dropped.
    let dropped = inspect.host_config.unwrap().cap_drop.unwrap_or_default();
    assert!(
        dropped.iter().any(|cap| cap == "ALL" || cap == "SETUID"),
        "{dropped:?}"
    );
    u.cleanup().await.unwrap();
    a.cleanup().await.unwrap();
}

async fn two_concurrent_claims_never_get_the_same_sandbox(engine: Engine) {
    let (test_id, run_a) = ids(engine, "warm-concurrent");
    let (_, run_1) = ids(engine, "warm-concurrent");
    let (_, run_2) = ids(engine, "warm-concurrent");
    let (_, run_3) = ids(engine, "warm-concurrent");
    let Some((driver, _client)) = warm_driver(engine, &test_id, 2).await else {
        return;
    };
    let mut fx = Fixture::new();
    let store = "store-warm-concurrent";
    let (spec_a, info_a) = fx.run(&run_a, store, "a");
    let a = start(&driver, &spec_a, info_a).await;
    let _guard_a = EngineGuard::container(engine, a.id());
    let entries = ready(&driver, 2).await;
    // Three runs at once for two entries: two claim, one starts cold, all distinct.
    let (spec_1, info_1) = fx.run(&run_1, store, "1");
    let (spec_2, info_2) = fx.run(&run_2, store, "2");
    let (spec_3, info_3) = fx.run(&run_3, store, "3");
    let (r1, r2, r3) = tokio::join!(
        start(&driver, &spec_1, info_1),
        start(&driver, &spec_2, info_2),
        start(&driver, &spec_3, info_3)
    );
    let _guards: Vec<EngineGuard> = [&r1, &r2, &r3]
        .iter()
        .map(|r| EngineGuard::container(engine, r.id()))
        .collect();
    let mut got = vec![r1.id().to_owned(), r2.id().to_owned(), r3.id().to_owned()];
    let claimed = got.iter().filter(|id| entries.contains(id)).count();
    got.sort();
    got.dedup();
    assert_eq!((got.len(), claimed), (3, 2));
    for (run, tag) in [(&r1, "1"), (&r2, "2"), (&r3, "3")] {
        assert_eq!(
            text(sh(&**run, "echo $FOO").await.stdout),
            format!("{tag}\n")
        );
    }
    let _pool = {
        ready(&driver, 2).await;
        guard_pool(engine, &driver)
    };
    for run in [r1, r2, r3, a] {
        run.cleanup().await.unwrap();
    }
}

async fn a_claimed_entry_that_fails_to_start_leaves_no_slot_behind(engine: Engine) {
    let (test_id, run_a) = ids(engine, "warm-fail");
    let (_, run_b) = ids(engine, "warm-fail");
    let Some((driver, client)) = warm_driver(engine, &test_id, 1).await else {
        return;
    };
    let mut fx = Fixture::new();
    let store = "store-warm-fail";
    let (spec_a, info_a) = fx.run(&run_a, store, "a");
    let a = start(&driver, &spec_a, info_a).await;
    let _guard_a = EngineGuard::container(engine, a.id());
    let entry = ready(&driver, 1).await[0].clone();
    let _entry_guard = EngineGuard::container(engine, entry.clone());
    // Same shape (post_create runs after the claim), and post_create fails: the start fails
    // after the entry was claimed and its proxy slot filled.
    let (mut spec_b, info_b) = fx.run(&run_b, store, "b");
    spec_b.post_create = Some("exit 3".to_owned());
    let prepared = driver.prepare(&spec_b, &NoProgress).await.unwrap();
    let failed = driver.start(prepared, info_b).await;
    assert!(failed.is_err(), "post_create exits 3: the start fails");
    assert!(
        !container_exists(&client, &entry).await,
        "the claimed entry is removed"
    );
    // The refill made a new entry; its two slots are the only ones left.
    let next = ready(&driver, 1).await;
    let _pool = guard_pool(engine, &driver);
    assert!(!next.contains(&entry));
    let slots = slots_under(fx.tmp.path()).len() + slots_under(&fx.tmp.path().join("runs")).len();
    assert_eq!(
        slots, 2,
        "the failed claim's slots went with its entry; only the ready entry's two are left"
    );
    a.cleanup().await.unwrap();
}

/// A second pool (here another size, so another pool of this process: what another process's
/// pool is to this one) finds the first pool's ready entry through the engine's labels and
/// claims it; the first pool, which still lists it, never hands it out again.
async fn an_entry_another_pool_made_is_claimed_once_through_the_engine(engine: Engine) {
    let (test_id, run_a) = ids(engine, "warm-foreign");
    let (_, run_b) = ids(engine, "warm-foreign");
    let (_, run_c) = ids(engine, "warm-foreign");
    let Some((maker, client)) = warm_driver(engine, &test_id, 1).await else {
        return;
    };
    let Some((claimer, _)) = warm_driver(engine, &test_id, 2).await else {
        return;
    };
    let mut fx = Fixture::new();
    let store = "store-warm-foreign";
    let (spec_a, info_a) = fx.run(&run_a, store, "a");
    let a = start(&maker, &spec_a, info_a).await;
    let _guard_a = EngineGuard::container(engine, a.id());
    let entry = ready(&maker, 1).await[0].clone();
    a.cleanup().await.unwrap();

    let (spec_b, info_b) = fx.run(&run_b, store, "b");
    let b = start(&claimer, &spec_b, info_b).await;
    let _guard_b = EngineGuard::container(engine, b.id());
    assert_eq!(b.id(), entry, "the other pool's ready entry is claimed");
    let out = sh(&*b, "echo $FOO").await;
    assert_eq!((out.exit_code, text(out.stdout)), (0, "b\n".to_owned()));
    let marker = fx.tmp.path().join(format!(".iterion-warm-claim-{entry}"));
    assert!(
        marker.exists(),
        "the claim is staked beside the per-run dirs"
    );
    assert!(
        maker.warm_ready().contains(&entry),
        "the maker still lists it"
    );

    // The maker's next run does not get it: its stake fails, it claims or makes another.
    let (spec_c, info_c) = fx.run(&run_c, store, "c");
    let c = start(&maker, &spec_c, info_c).await;
    let _guard_c = EngineGuard::container(engine, c.id());
    assert_ne!(c.id(), entry, "a claimed entry is never handed out twice");
    let mut guards = guard_pool(engine, &maker);
    guards.extend(guard_pool(engine, &claimer));
    b.cleanup().await.unwrap();
    c.cleanup().await.unwrap();
    assert!(!container_exists(&client, &entry).await);
    assert!(!marker.exists(), "the claim marker goes with its entry");
}

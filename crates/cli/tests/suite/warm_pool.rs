//! The docker warm pool (issue 18 item 4) through the real binary: an `iterion run` with
//! `ITERION_SANDBOX_WARM` fills a pool behind its cold start through a detached filler, and the
//! next `iterion run` of the same shape claims what it left; an `iterion run` without a pool
//! (its boot reap) removes what nobody claimed, also after a killed iterion.
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use crate::suite::support::{Env, IMAGE, docker_or_skip, stderr_of};

const SLOW: &str = r#"
tool wait:
  command: `sleep 60`

workflow slow:
  entry: wait
  wait -> done
"#;

const QUICK: &str = r#"
tool hello:
  command: `echo hi`

workflow quick:
  entry: hello
  hello -> done
"#;

/// This store's warm pool entries: `(id, owner label)`.
fn warm_entries(store_id: &str) -> Vec<(String, String)> {
    let out = StdCommand::new("docker")
        .args([
            "ps",
            "-a",
            "--format",
            "{{.ID}} {{.Label \"iterion.io/warm-owner\"}}",
        ])
        .arg("--filter")
        .arg(format!("label=iterion.io/store={store_id}"))
        .args(["--filter", "label=iterion.io/purpose=warm-pool"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(id, owner)| (id.to_owned(), owner.to_owned()))
        .collect()
}

#[test]
fn docker_a_killed_iterion_leaves_no_warm_entry_behind_after_the_next_start() {
    if !docker_or_skip("cli::warm_pool::docker_a_killed_iterion_leaves_no_warm_entry") {
        return;
    }
    let env = Env::new();
    env.write("slow.iter", SLOW);
    env.write("quick.iter", QUICK);
    let mut child = env
        .std_cmd()
        .args(["run", "slow.iter", "--sandbox-default-image", IMAGE])
        .env("ITERION_SANDBOX_WARM", "1")
        // host_state auto binds the scratch dir at a path naming the root run: no shape to share.
        .env("ITERION_SANDBOX_HOST_STATE", "none")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The run's cold start teaches the pool its shape; an entry is made while the node sleeps.
    let deadline = Instant::now() + Duration::from_secs(90);
    let (store_id, entries) = loop {
        if let Some(store_id) = env.store_id() {
            let entries = warm_entries(&store_id);
            if !entries.is_empty() {
                break (store_id, entries);
            }
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no warm pool entry appeared within 90 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // The entries are made by a detached filler (`iterion __warm-fill`), not the run's process:
    // they outlive it by design. Wait for the filler to be done, so only the pool's rule decides.
    wait_for_owners_gone(&entries);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !warm_entries(&store_id).is_empty(),
        "killed, it leaves them"
    );

    // The next start reaps them (its boot pass), pool or no pool.
    let out = env
        .cmd()
        .args(["run", "quick.iter", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(warm_entries(&store_id), Vec::<(String, String)>::new());
}

/// Waits until no live process owns `entries` (their filler has exited).
fn wait_for_owners_gone(entries: &[(String, String)]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for (_, owner) in entries {
        let pid = owner.split('/').nth(2).unwrap_or_default().to_owned();
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            assert!(Instant::now() < deadline, "the filler {pid} did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Waits for this store's warm entries to be exactly `n` with no live owner; returns them.
fn settled_entries(store_id: &str, n: usize) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let entries = warm_entries(store_id);
        if entries.len() == n {
            wait_for_owners_gone(&entries);
            return entries;
        }
        assert!(
            Instant::now() < deadline,
            "{} warm entries after 90 s, not {n}: {entries:?}",
            entries.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn docker_one_iterion_run_leaves_a_ready_sandbox_the_next_run_claims() {
    if !docker_or_skip("cli::warm_pool::docker_one_iterion_run_leaves_a_ready_sandbox") {
        return;
    }
    let env = Env::new();
    env.write("quick.iter", QUICK);
    let run = |warm: bool| {
        let mut cmd = env.cmd();
        cmd.args(["run", "quick.iter", "--sandbox-default-image", IMAGE])
            .env("ITERION_SANDBOX_HOST_STATE", "none");
        if warm {
            cmd.env("ITERION_SANDBOX_WARM", "1");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let run = env.runs().into_iter().next().unwrap();
        let claimed = env.logs(&run).iter().any(|(_, line)| {
            line.starts_with("sandbox active:") && line.ends_with(" warm=claimed")
        });
        (run, claimed)
    };
    // The first run starts cold and leaves one ready entry behind it, made by its filler.
    let (_, claimed) = run(true);
    assert!(!claimed, "nothing to claim yet");
    let store_id = env.store_id().unwrap();
    let first = settled_entries(&store_id, 1);
    // The next `iterion run` (another process) claims it, and leaves the next one.
    let (_, claimed) = run(true);
    assert!(
        claimed,
        "the second run claims the entry the first one left"
    );
    // Frozen at the run's end, it is removed by the filler the run handed it to.
    let deadline = Instant::now() + Duration::from_secs(30);
    while env.containers().contains(&first[0].0) {
        assert!(
            Instant::now() < deadline,
            "the claimed entry is still there 30 s after its run"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let logs = env.logs(&env.runs()[0]);
    assert!(
        logs.iter()
            .any(|(_, line)| line.contains("frozen; its removal is handed to the filler")),
        "{logs:#?}"
    );
    let second = settled_entries(&store_id, 1);
    assert_ne!(second[0].0, first[0].0, "a claimed entry is never reused");
    // No claim marker is left beside the per-run dirs.
    let markers: Vec<String> = walk_names(env.home.path())
        .into_iter()
        .filter(|name| name.starts_with(".iterion-warm-claim-"))
        .collect();
    assert_eq!(markers, Vec::<String>::new());
    // A run without a pool removes what nobody claimed.
    let (_, claimed) = run(false);
    assert!(!claimed);
    assert_eq!(warm_entries(&store_id), Vec::<(String, String)>::new());
}

/// Every file name under `dir`, recursively.
fn walk_names(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return names;
    };
    for entry in entries.flatten() {
        names.push(entry.file_name().to_string_lossy().into_owned());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            names.extend(walk_names(&entry.path()));
        }
    }
    names
}

const MARK: &str = r#"
tool mark:
  command: `echo "mark=$WARM_MARK"`

workflow mark:
  entry: mark
  mark -> done
"#;

/// `docker inspect` of `id` with a Go template.
fn inspect(id: &str, format: &str) -> String {
    let out = StdCommand::new("docker")
        .args(["inspect", "--format", format, id])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The engine's events for container `id` since `since` (unix seconds): `Action` each.
fn container_actions(id: &str, since: u64) -> Vec<String> {
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1;
    let out = StdCommand::new("docker")
        .args(["events", "--format", "{{.Action}}"])
        .arg(format!("--since={since}"))
        .arg(format!("--until={until}"))
        .args(["--filter", &format!("container={id}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn docker_a_claimed_entrys_agent_is_attached_by_the_claiming_process_and_gets_its_env_only_then() {
    if !docker_or_skip("cli::warm_pool::docker_a_claimed_entrys_agent_is_attached") {
        return;
    }
    let env = Env::new();
    env.write("mark.iter", MARK);
    let run = |mark: &str| {
        let out = env
            .cmd()
            .args(["run", "mark.iter", "--sandbox-default-image", IMAGE])
            .args(["--sandbox-env", &format!("WARM_MARK={mark}")])
            .env("ITERION_SANDBOX_HOST_STATE", "none")
            .env("ITERION_SANDBOX_WARM", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let run = env.runs().into_iter().next().unwrap();
        env.logs(&run)
    };
    // A cold run: its container is frozen when the run returns, and removed by a filler.
    let logs = run("first");
    let cold = logs
        .iter()
        .find_map(|(_, line)| {
            line.strip_prefix("sandbox: container ")
                .and_then(|rest| rest.strip_suffix(" frozen; its removal is handed to the filler"))
        })
        .unwrap_or_else(|| panic!("the cold run handed its teardown off: {logs:#?}"))
        .to_owned();
    let state = inspect(&cold, "{{.State.Status}}");
    assert!(
        matches!(state.as_str(), "paused" | "removing" | "exited" | ""),
        "nothing of the run runs once it returned: {state}"
    );
    let store_id = env.store_id().unwrap();
    let entry = settled_entries(&store_id, 1).remove(0).0;
    // The entry's own command is the exec agent, waiting; made before any run, it holds none's
    // env.
    assert_eq!(
        inspect(
            &entry,
            "{{.Path}} {{join .Args \" \"}} {{.Config.OpenStdin}}"
        ),
        "/run/iterion/bin/iterion __exec-agent true"
    );
    let made_env = inspect(&entry, "{{json .Config.Env}}");
    assert!(!made_env.contains("WARM_MARK"), "{made_env}");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 1;

    // Another process claims it: the node sees that run's env, from the greeting.
    let logs = run("second");
    assert!(
        logs.iter()
            .any(|(_, line)| line.starts_with("sandbox active:") && line.ends_with(" warm=claimed")),
        "{logs:#?}"
    );
    assert!(
        logs.iter().any(|(_, line)| line.ends_with("mark=second")),
        "{logs:#?}"
    );
    assert!(
        !logs.iter().any(|(_, line)| line.contains("unavailable")),
        "{logs:#?}"
    );
    // Through an attach to the agent it already ran, not an exec that starts one.
    let actions = container_actions(&entry, before);
    assert!(actions.iter().any(|a| a == "attach"), "{actions:?}");
    assert!(
        !actions.iter().any(|a| a.starts_with("exec_create")),
        "no exec was made in the claimed entry: {actions:?}"
    );
}

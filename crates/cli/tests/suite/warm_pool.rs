//! The docker warm pool (issue 18 item 4) through the real binary: an `iterion run` with
//! `ITERION_SANDBOX_WARM` fills a pool behind its cold start; killed, it leaves its entries
//! behind, and the next `iterion run` (its boot reap) removes them.
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
    let pid = child.id();
    assert!(
        entries
            .iter()
            .all(|(_, owner)| owner.contains(&format!("/{pid}/"))),
        "each entry names the iterion that made it ({pid}): {entries:?}"
    );
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

//! Resource limits (issue 18): the operator's `ITERION_SANDBOX_MEMORY`, `_CPUS` and `_PIDS` on a
//! real docker sandbox (the container's own cgroup shows them; a fork bomb is held by the pids
//! limit), and a bad value refused before anything is made.
use crate::suite::support::{Env, IMAGE, docker_or_skip, first, stderr_of};

/// The node prints its cgroup's limits (v1 paths, else v2), then forks sleepers for six seconds
/// and prints how many processes its cgroup held in the middle of it and how many forks the
/// pids limit refused.
const LIMITS: &str = r#"
tool limits:
  command: `c=/sys/fs/cgroup; mem=$(cat $c/memory/memory.limit_in_bytes 2>/dev/null || cat $c/memory.max); pids=$(cat $c/pids/pids.max 2>/dev/null || cat $c/pids.max); cpu=$(cat $c/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 $c/cpu.max); cur=$c/pids/pids.current; [ -e $cur ] || cur=$c/pids.current; (sleep 4; cat $cur > /tmp/held) & timeout 6 bash -c 'while :; do sleep 60 & done' >/dev/null 2>&1; wait; ev=$c/pids/pids.events; [ -e $ev ] || ev=$c/pids.events; echo "mem=$mem pids=$pids cpu=$cpu held=$(cat /tmp/held) refused=$(awk '/^max/ {print $2}' $ev)"`

workflow limits:
  entry: limits
  limits -> done
"#;

fn field(line: &str, key: &str) -> i64 {
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

#[test]
fn docker_the_operators_limits_are_the_containers_cgroup_and_hold_a_fork_bomb() {
    if !docker_or_skip("cli::limits::docker_the_operators_limits") {
        return;
    }
    let env = Env::new();
    env.write("limits.iter", LIMITS);
    let out = env
        .cmd()
        .env("ITERION_SANDBOX_MEMORY", "96m")
        .env("ITERION_SANDBOX_CPUS", "0.5")
        .env("ITERION_SANDBOX_PIDS", "48")
        .args([
            "run",
            "limits.iter",
            "--sandbox-default-image",
            IMAGE,
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let events = env.events(&env.only_run());
    let finished = events
        .iter()
        .find(|(kind, _)| kind == "node_finished")
        .map(|(_, data)| data["output"]["result"].as_str().unwrap().to_owned())
        .unwrap();
    assert_eq!(field(&finished, "mem"), 96 << 20, "{finished}");
    assert_eq!(field(&finished, "pids"), 48, "{finished}");
    // 0.5 CPU = 50 ms of every 100 ms period.
    assert_eq!(field(&finished, "cpu"), 50_000, "{finished}");
    // The bomb filled the cgroup up to its limit and no further.
    let held = field(&finished, "held");
    assert!((40..=48).contains(&held), "{finished}");
    assert!(field(&finished, "refused") > 0, "{finished}");
    assert!(first(&events, "sandbox_limits_not_applied").is_none());
}

#[test]
fn a_malformed_limit_is_refused_before_a_sandbox_is_made() {
    let env = Env::new();
    env.write("limits.iter", LIMITS);
    let out = env
        .cmd()
        .env("ITERION_SANDBOX_MEMORY", "lots")
        .args([
            "run",
            "limits.iter",
            "--sandbox-default-image",
            IMAGE,
            "--json",
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("ITERION_SANDBOX_MEMORY") && stderr.contains("lots"),
        "{stderr}"
    );
    let events = env.events(&env.only_run());
    assert!(first(&events, "sandbox_started").is_none(), "{events:#?}");
}

//! The in-sandbox exec agent (issue 18 item 3) on a real docker sandbox: node commands are its
//! children, the driver's exec answers when it is turned off or cannot start, and the commands
//! it starts cannot reach its channel.
use crate::suite::support::{Env, IMAGE, docker_or_skip, stderr_of};

/// Each node's `result` (its stdout), from the run's `node_finished` events.
fn results(env: &Env) -> serde_json::Value {
    let mut results = serde_json::Map::new();
    for (kind, data) in env.events(&env.only_run()) {
        if kind == "node_finished" {
            let node = data["node"].as_str().unwrap().to_owned();
            results.insert(node, data["output"]["result"].clone());
        }
    }
    serde_json::Value::Object(results)
}

/// Each node prints its parent's command line: the agent's, when it started the node.
const PARENTS: &str = r#"
tool first:
  command: `tr '\0' ' ' < /proc/$PPID/cmdline; echo`

tool second:
  command: `tr '\0' ' ' < /proc/$PPID/cmdline; echo`

workflow parents:
  entry: first
  first -> second
  second -> done
"#;

fn run_parents(env: &Env, extra: &[(&str, &str)]) -> (serde_json::Value, String) {
    env.write("parents.iter", PARENTS);
    let mut cmd = env.cmd();
    for (key, value) in extra {
        cmd.env(key, value);
    }
    let out = cmd
        .args([
            "run",
            "parents.iter",
            "--sandbox-default-image",
            IMAGE,
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    (results(env), stderr_of(&out))
}

#[test]
fn docker_node_commands_are_children_of_the_exec_agent_unless_it_is_turned_off() {
    if !docker_or_skip("cli::exec_agent::docker_node_commands_are_children") {
        return;
    }
    let env = Env::new();
    let (output, _) = run_parents(&env, &[]);
    for key in ["first", "second"] {
        let parent = output[key].as_str().unwrap();
        assert!(
            parent.contains("/run/iterion/bin/iterion __exec-agent"),
            "node {key} was started by {parent:?}"
        );
    }

    let env = Env::new();
    let (output, _) = run_parents(&env, &[("ITERION_SANDBOX_EXEC_AGENT", "0")]);
    for key in ["first", "second"] {
        let parent = output[key].as_str().unwrap();
        assert!(
            !parent.contains("__exec-agent"),
            "agent off, yet node {key} was started by {parent:?}"
        );
    }
    let logs = env.logs(&env.only_run());
    assert!(
        logs.iter()
            .any(|(_, line)| line.contains("exec agent off (ITERION_SANDBOX_EXEC_AGENT)")),
        "{logs:#?}"
    );
}

/// Issue 18: the agent is the container's own command (PID 1, attached before the start), so no
/// exec starts it; with the agent off PID 1 is the idle `sleep infinity`.
const PID1: &str = r#"
tool first:
  command: `echo "$PPID $(tr '\0' ' ' < /proc/1/cmdline)"`

workflow pid1:
  entry: first
  first -> done
"#;

#[test]
fn docker_the_exec_agent_is_the_containers_own_command() {
    if !docker_or_skip("cli::exec_agent::docker_the_exec_agent_is_the_containers_own_command") {
        return;
    }
    let run = |extra: &[(&str, &str)]| {
        let env = Env::new();
        env.write("pid1.iter", PID1);
        let mut cmd = env.cmd();
        for (key, value) in extra {
            cmd.env(key, value);
        }
        let out = cmd
            .args([
                "run",
                "pid1.iter",
                "--sandbox-default-image",
                IMAGE,
                "--json",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let first = results(&env)["first"].as_str().unwrap().trim().to_owned();
        let logs: Vec<String> = env
            .logs(&env.only_run())
            .into_iter()
            .map(|(_, line)| line)
            .collect();
        (first, logs)
    };
    let (first, logs) = run(&[]);
    assert_eq!(
        first, "1 /run/iterion/bin/iterion __exec-agent",
        "the node's parent is PID 1, the agent"
    );
    let created = logs
        .iter()
        .find(|line| line.contains(" run --detach"))
        .expect("the create line");
    assert!(
        created.contains("--interactive") && created.contains("--log-driver none"),
        "{created}"
    );
    assert!(
        !logs
            .iter()
            .any(|line| line.contains("exec agent unavailable")),
        "{logs:#?}"
    );

    let (first, _) = run(&[("ITERION_SANDBOX_EXEC_AGENT", "0")]);
    assert!(first.ends_with(" sleep infinity"), "{first}");
}

#[test]
fn docker_an_agent_that_cannot_start_leaves_the_drivers_exec_and_says_why() {
    if !docker_or_skip("cli::exec_agent::docker_an_agent_that_cannot_start") {
        return;
    }
    // A static binary that is not iterion: the agent cannot start from it.
    let busybox = std::path::Path::new("/bin/busybox");
    assert!(
        busybox.is_file(),
        "busybox-static is installed by scripts/test.sh"
    );
    let env = Env::new();
    let (output, _) = run_parents(&env, &[("ITERION_BIN", "/bin/busybox")]);
    assert!(
        !output["first"].as_str().unwrap().contains("__exec-agent"),
        "{output}"
    );
    let logs = env.logs(&env.only_run());
    assert!(
        logs.iter()
            .any(|(_, line)| line.contains("exec agent unavailable")
                && line.contains("node commands use the driver's exec")),
        "{logs:#?}"
    );
    // As the container's command it did not greet either: the container was made again with
    // the idle command, and the run went on.
    assert!(
        logs.iter().any(|(_, line)| line
            .contains("exec agent unavailable as the container's command")
            && line.contains("sleep infinity")),
        "{logs:#?}"
    );
}

/// The attack: a node opens the agent's stdin through `/proc/$PPID/fd/0` to inject a frame that
/// starts a command nobody asked for (here: one that writes a marker file). The agent is
/// non-dumpable, so the open fails; the next node still runs through an intact agent.
const INJECT: &str = r#"
tool inject:
  command: `printf '\002\000\000\000\077\000\000\000\110{"argv":["touch","/tmp/injected"],"env":[],"workdir":null,"stdin":false}' > /proc/$PPID/fd/0 2>/dev/null && echo opened || echo refused`

tool check:
  command: `sleep 0.5; test -e /tmp/injected && echo injected || echo clean; tr '\0' ' ' < /proc/$PPID/cmdline`

workflow inject:
  entry: inject
  inject -> check
  check -> done
"#;

#[test]
fn docker_a_node_cannot_write_into_the_exec_agents_channel() {
    if !docker_or_skip("cli::exec_agent::docker_a_node_cannot_write_into") {
        return;
    }
    let env = Env::new();
    env.write("inject.iter", INJECT);
    let out = env
        .cmd()
        .args([
            "run",
            "inject.iter",
            "--sandbox-default-image",
            IMAGE,
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let output = results(&env);
    assert_eq!(output["inject"], "refused", "{output}");
    let after = output["check"].as_str().unwrap();
    assert!(after.starts_with("clean"), "{after}");
    assert!(
        after.contains("__exec-agent"),
        "the agent is intact: {after}"
    );
}

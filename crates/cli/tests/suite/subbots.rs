//! Subbot children through `iterion run` (DSL.md §3.9, SANDBOX.md §14): a child adopts its
//! parent's container — one container for both, the child sees the parent's container and writes
//! into the shared workspace — and nothing is left after the run.
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds};

const PARENT: &str = "\
tool start:
  command: `hostname > parent-host.txt`

subbot sub:
  source: \"child.iter\"

workflow parent:
  entry: start
  start -> sub
  sub -> done
";

/// Records its hostname (docker's short container id), signals, then lingers so the test can
/// count containers while it runs.
const CHILD: &str = "\
tool adopt:
  command: `hostname > child-host.txt && pwd > child-pwd.txt && touch child-running && sleep 3`

workflow child:
  entry: adopt
  adopt -> done
";

#[test]
fn docker_an_adopting_child_runs_in_the_parents_container_and_none_is_left() {
    if !docker_or_skip("cli::subbots::docker_an_adopting_child") {
        return;
    }
    let env = Env::new();
    env.write("parent.iter", PARENT);
    env.write("child.iter", CHILD);
    let mut child = env.spawn(&["run", "parent.iter", "--sandbox-default-image", IMAGE]);
    wait_for(&env, &mut child, "child-running");
    assert_eq!(
        env.containers().len(),
        1,
        "one container for the parent and its adopting child"
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let runs = env.runs();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let parent = runs
        .iter()
        .find(|r| r.parent_run_id.is_none())
        .expect("the parent run");
    let sub = runs
        .iter()
        .find(|r| r.parent_run_id.as_ref() == Some(&parent.id))
        .expect("the child run");
    assert_eq!(sub.root_run_id, parent.id);
    let parent_events = env.events(parent);
    let container =
        first(&parent_events, "sandbox_started").expect("the parent's sandbox")["sandbox_id"]
            .as_str()
            .unwrap()
            .to_owned();
    let child_events = env.events(sub);
    assert!(
        !kinds(&child_events).contains(&"sandbox_started"),
        "the child starts no sandbox: {child_events:#?}"
    );
    let shared = first(&child_events, "sandbox_shared").expect("sandbox_shared");
    assert_eq!(shared["adopted"], true);
    assert_eq!(shared["driver"], "docker");
    assert_eq!(shared["parent_run"], parent.id.as_str());
    let read = |name: &str| {
        std::fs::read_to_string(env.path(name))
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(
        shared["workspace"],
        read("child-pwd.txt"),
        "the adopted workspace is the parent's container workspace folder"
    );
    let (parent_host, child_host) = (read("parent-host.txt"), read("child-host.txt"));
    assert_eq!(
        child_host, parent_host,
        "the child ran in the parent's container"
    );
    assert!(
        container.starts_with(&child_host),
        "{container} is not {child_host}"
    );
    assert_eq!(env.containers(), Vec::<String>::new(), "nothing is left");
}

/// Waits for `marker` in the workspace while `run` is alive.
fn wait_for(env: &Env, run: &mut std::process::Child, marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while !env.path(marker).exists() {
        assert!(Instant::now() < deadline, "{marker} never appeared");
        if let Ok(Some(status)) = run.try_wait() {
            panic!("the run ended before {marker}: {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn docker_a_parent_with_an_adopting_and_a_declaring_child_uses_two_containers_then_none() {
    if !docker_or_skip("cli::subbots::docker_two_children") {
        return;
    }
    let env = Env::new();
    env.write(
        "parent.iter",
        "tool start:\n  command: `hostname > parent-host.txt`\n\nsubbot adopter:\n  source: \"adopter.iter\"\n\nsubbot declarer:\n  source: \"declarer.iter\"\n\nworkflow parent:\n  entry: start\n  start -> adopter\n  adopter -> declarer\n  declarer -> done\n",
    );
    env.write(
        "adopter.iter",
        "tool a:\n  command: `hostname > adopter-host.txt && touch adopter-running && sleep 2`\n\nworkflow adopter:\n  entry: a\n  a -> done\n",
    );
    env.write(
        "declarer.iter",
        &format!(
            "tool d:\n  command: `hostname > declarer-host.txt && touch declarer-running && sleep 3`\n\nworkflow declarer:\n  entry: d\n  sandbox:\n    image: \"{IMAGE}\"\n  d -> done\n"
        ),
    );
    let mut run = env.spawn(&["run", "parent.iter", "--sandbox-default-image", IMAGE]);
    wait_for(&env, &mut run, "adopter-running");
    assert_eq!(
        env.containers().len(),
        1,
        "the adopter shares the parent's container"
    );
    wait_for(&env, &mut run, "declarer-running");
    assert_eq!(
        env.containers().len(),
        2,
        "the declarer has a container of its own"
    );
    let out = run.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.containers(), Vec::<String>::new(), "nothing is left");

    let read = |name: &str| {
        std::fs::read_to_string(env.path(name))
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(read("adopter-host.txt"), read("parent-host.txt"));
    assert_ne!(read("declarer-host.txt"), read("parent-host.txt"));
    let runs = env.runs();
    assert_eq!(runs.len(), 3, "{runs:#?}");
    let declarer = runs
        .iter()
        .find(|r| r.workflow == "declarer")
        .expect("the declarer's run");
    let events = env.events(declarer);
    let shared = first(&events, "sandbox_shared").expect("sandbox_shared");
    assert_eq!(shared["adopted"], false);
    assert_eq!(shared["declared"], serde_json::json!(["image"]));
    assert!(
        kinds(&events).contains(&"sandbox_started"),
        "the declarer started its own sandbox: {events:#?}"
    );
    assert_eq!(declarer.status.as_str(), "finished");
    let started = first(&events, "run_started").expect("run_started");
    assert_eq!(started["parent_run"], parent_of(&runs, declarer));
    assert_eq!(started["root_run"], parent_of(&runs, declarer));
}

fn parent_of(runs: &[iterion_store::Run], child: &iterion_store::Run) -> String {
    let parent = runs
        .iter()
        .find(|r| Some(&r.id) == child.parent_run_id.as_ref())
        .expect("the parent run");
    parent.id.to_string()
}

#[test]
fn docker_a_failing_child_fails_the_run_and_leaves_no_container() {
    if !docker_or_skip("cli::subbots::docker_a_failing_child") {
        return;
    }
    let env = Env::new();
    env.write("parent.iter", PARENT);
    env.write(
        "child.iter",
        "tool adopt:\n  command: `echo broken >&2; exit 7`\n\nworkflow child:\n  entry: adopt\n  adopt -> done\n",
    );
    let out = env
        .std_cmd()
        .args(["run", "parent.iter", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(0),
        "the child's failure fails the run"
    );
    let runs = env.runs();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let parent = runs.iter().find(|r| r.parent_run_id.is_none()).unwrap();
    let sub = runs.iter().find(|r| r.parent_run_id.is_some()).unwrap();
    assert_eq!(sub.failure_code.as_deref(), Some("EXECUTION_FAILED"));
    assert_eq!(parent.failure_code.as_deref(), Some("EXECUTION_FAILED"));
    assert!(
        kinds(&env.events(parent)).contains(&"sandbox_started"),
        "the parent had a container"
    );
    assert_eq!(env.containers(), Vec::<String>::new(), "nothing is left");
}

/// Trust propagates (SANDBOX.md §10, §14): an untrusted parent's children are untrusted, and a
/// child that opts out of the sandbox (`mode: none`, honoured under a bind-mount parent) meets
/// the same admission gate as a top-level run and is refused.
#[test]
fn docker_an_untrusted_parents_children_are_untrusted_and_pass_the_same_gate() {
    if !docker_or_skip("cli::subbots::docker_untrusted_children") {
        return;
    }
    let env = Env::new();
    env.write("parent.iter", PARENT);
    env.write(
        "child.iter",
        "tool adopt:\n  command: `true`\n\nworkflow child:\n  entry: adopt\n  adopt -> done\n",
    );
    let args = [
        "run",
        "parent.iter",
        "--sandbox-default-image",
        IMAGE,
        "--trust",
        "untrusted",
    ];
    let out = env.std_cmd().args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = env.runs();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert!(
        runs.iter().all(|r| r.trust.as_str() == "untrusted"),
        "{runs:#?}"
    );

    let env = Env::new();
    env.write("parent.iter", PARENT);
    env.write(
        "child.iter",
        "tool host:\n  command: `touch on-the-host`\n\nworkflow child:\n  entry: host\n  sandbox: none\n  host -> done\n",
    );
    let out = env.std_cmd().args(args).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        !env.path("on-the-host").exists(),
        "the refused child ran nothing"
    );
    let runs = env.runs();
    let sub = runs
        .iter()
        .find(|r| r.parent_run_id.is_some())
        .expect("the child's run");
    assert_eq!(sub.trust.as_str(), "untrusted");
    assert_eq!(
        sub.failure_code.as_deref(),
        Some("LAUNCH_FAILED"),
        "{sub:#?}"
    );
    assert_eq!(env.containers(), Vec::<String>::new(), "nothing is left");
}

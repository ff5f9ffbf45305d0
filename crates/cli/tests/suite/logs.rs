//! The operator's view (issue 19): what nodes print is on the console as they print it and in
//! `iterion logs`, per node and stream, redacted; a claw agent's turns and bash calls are events,
//! on the host and in the container; `logs --follow` and `events --follow` end with the run; a
//! reader that goes away (`| head -1`) ends them quietly; the condition error that made a run
//! fail is on the console.
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

/// A tool that prints on stderr, sleeps, prints again, and ends with a line on stdout.
const SLOW: &str = "tool slow:\n  command: `echo first-line >&2; sleep 3; echo second-line >&2; echo kept-stdout`\n\nworkflow w:\n  entry: slow\n  slow -> done\n";

/// Reads a child's stream line by line on a thread, each line with when it arrived.
fn lines_of(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<(Instant, String)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for a line that `matches`; returns every line seen up to it.
fn wait_for_line(
    rx: &mpsc::Receiver<(Instant, String)>,
    matches: impl Fn(&str) -> bool,
    secs: u64,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((_, line)) => {
                let hit = matches(&line);
                seen.push(line);
                if hit {
                    return seen;
                }
            }
            Err(_) => panic!("no such line within {secs}s; saw {seen:#?}"),
        }
    }
}

fn logs_of(env: &Env, run_id: &str, extra: &[&str]) -> String {
    let out = env
        .cmd()
        .args(["logs", run_id])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The run of [`SLOW`] with `args`: the first stderr line is on the console and in `iterion
/// logs` while the node still sleeps; at the end both streams are kept.
fn output_streams_while_the_node_runs(env: &Env, args: &[&str]) {
    env.write("w.iter", SLOW);
    let mut child = env
        .std_cmd()
        .args(["run", "w.iter"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let console = lines_of(child.stderr.take().unwrap());
    let before = wait_for_line(&console, |l| l == "slow │ first-line", 180);
    // The node is asleep: its first line is on the console, not its second, and the node has
    // not finished.
    assert!(
        !before.iter().any(|l| l.contains("second-line")),
        "{before:#?}"
    );
    let run = env.only_run();
    // `iterion logs` has the line too (the writer gathers for at most 50 ms).
    let deadline = Instant::now() + Duration::from_secs(2);
    let stored = loop {
        let stored = logs_of(env, run.id.as_str(), &["--stream", "stderr"]);
        if stored.contains("first-line") || Instant::now() > deadline {
            break stored;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(stored, "slow │ first-line\n");
    assert!(
        !kinds(&env.events(&run)).contains(&"node_finished"),
        "the node ended before its first line was seen"
    );
    let status = child.wait().unwrap();
    let after: Vec<String> = console.iter().map(|(_, l)| l).collect();
    assert_eq!(status.code(), Some(0), "{before:#?}\n{after:#?}");
    assert!(
        after.contains(&"slow │ second-line".to_owned())
            && after.contains(&"slow │ kept-stdout".to_owned()),
        "{after:#?}"
    );
    // A successful node's output is kept, per stream.
    assert_eq!(
        logs_of(
            env,
            run.id.as_str(),
            &["--node", "slow", "--stream", "stdout"]
        ),
        "slow │ kept-stdout\n"
    );
    let json: Vec<Value> = logs_of(env, run.id.as_str(), &["--json", "--node", "slow"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // In order within a stream (across the two, a container engine's demultiplexing may reorder).
    let mut got: Vec<(&str, &str, &str)> = json
        .iter()
        .map(|o| {
            (
                o["node"].as_str().unwrap(),
                o["stream"].as_str().unwrap(),
                o["line"].as_str().unwrap(),
            )
        })
        .collect();
    got.sort_by_key(|(_, stream, _)| *stream);
    assert_eq!(
        got,
        vec![
            ("slow", "stderr", "first-line"),
            ("slow", "stderr", "second-line"),
            ("slow", "stdout", "kept-stdout"),
        ]
    );
    assert_eq!(json[0]["run_id"], json!(run.id.as_str()));
    // Another node's output: nothing.
    assert_eq!(logs_of(env, run.id.as_str(), &["--node", "other"]), "");
}

#[test]
fn a_tools_output_streams_to_the_console_and_into_logs_while_it_runs() {
    let env = Env::new();
    output_streams_while_the_node_runs(&env, &["--sandbox", "none"]);
}

#[test]
fn docker_a_sandboxed_tools_output_streams_to_the_console_and_into_logs_while_it_runs() {
    if !docker_or_skip("cli::logs::docker_output_streams") {
        return;
    }
    let env = Env::new();
    output_streams_while_the_node_runs(&env, &["--sandbox-default-image", IMAGE]);
    let run = env.only_run();
    assert!(first(&env.events(&run), "sandbox_started").is_some());
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn quiet_hides_node_output_from_the_console_but_it_is_stored() {
    let env = Env::new();
    env.write(
        "w.iter",
        "tool t:\n  command: `echo hidden-line`\n\nworkflow w:\n  entry: t\n  t -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let console = stderr_of(&out);
    assert!(!console.contains("hidden-line"), "{console}");
    assert!(console.contains("✓ t"), "{console}");
    let run = env.only_run();
    assert_eq!(logs_of(&env, run.id.as_str(), &[]), "t │ hidden-line\n");
}

#[test]
fn attack_a_secret_a_tool_prints_is_neither_on_the_console_nor_in_the_stored_logs() {
    const SECRET: &str = "tok-very-secret-4242";
    let env = Env::new();
    env.write(
        "w.iter",
        "secrets:\n  tok:\n    value: \"${ITERION_TEST_TOKEN}\"\n    hosts: [\"api.example.com\"]\n\ntool leak:\n  command: `echo \"token=$ITERION_TEST_TOKEN\" >&2; echo \"out=$ITERION_TEST_TOKEN\"`\n\nworkflow w:\n  entry: leak\n  leak -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("ITERION_TEST_TOKEN", SECRET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let console = stderr_of(&out);
    // The tool really printed it, in both streams: the console shows where, redacted.
    assert!(
        console.contains("leak │ token=[REDACTED:tok]")
            && console.contains("leak │ out=[REDACTED:tok]"),
        "{console}"
    );
    let run = env.only_run();
    let stored = logs_of(&env, run.id.as_str(), &["--json"]);
    let chunks = format!("{:?}", env.node_logs(&run));
    assert!(stored.contains("token=[REDACTED:tok]"), "{stored}");
    for (what, text) in [
        ("console", console),
        ("stdout", String::from_utf8_lossy(&out.stdout).into_owned()),
        ("logs", stored),
        ("node_logs", chunks),
        ("events", format!("{:?}", env.events(&run))),
    ] {
        assert!(
            !text.contains(SECRET),
            "the secret leaked into {what}: {text}"
        );
    }
}

#[test]
fn the_console_shows_the_condition_error_that_made_the_run_fail() {
    let env = Env::new();
    env.write(
        "w.iter",
        "tool a:\n  command: `echo '{\"n\": null}'`\n\ntool b:\n  command: `echo b`\n\nworkflow w:\n  entry: a\n  a -> b when \"n and true\"\n  a -> fail\n  b -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let console = stderr_of(&out);
    let reason = "⚠ edge a -> b: condition `n and true` could not be decided: and needs bool operands, found null";
    let at = console.find(reason).unwrap_or_else(|| panic!("{console}"));
    let failed = console.find("run failed [WORKFLOW_FAILED]").unwrap();
    assert!(at < failed, "{console}");
}

#[test]
fn logs_follow_and_events_follow_end_when_the_run_ends() {
    let env = Env::new();
    env.write(
        "w.iter",
        "tool t:\n  command: `echo early; sleep 2; echo late`\n\nworkflow w:\n  entry: t\n  t -> done\n",
    );
    let mut run = env.spawn(&["run", "w.iter", "--sandbox", "none"]);
    let (record, _) = env.wait_for_event("node_started", 60);
    let id = record.id.as_str().to_owned();
    let started = Instant::now();
    let logs = env.spawn(&["logs", &id, "--follow"]);
    let events = env.spawn(&["events", &id, "--follow", "--json"]);
    let logs = logs.wait_with_output().unwrap();
    let events = events.wait_with_output().unwrap();
    assert!(run.wait().unwrap().success());
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(logs.status.code(), Some(0), "{}", stderr_of(&logs));
    assert_eq!(
        String::from_utf8_lossy(&logs.stdout),
        "t │ early\nt │ late\n"
    );
    assert_eq!(events.status.code(), Some(0), "{}", stderr_of(&events));
    let types: Vec<String> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("run_started"));
    assert_eq!(types.last().map(String::as_str), Some("run_finished"));
    assert_eq!(types.len(), env.events(&record).len());
    // A finished run: `--follow` prints what there is and ends at once.
    let out = env
        .cmd()
        .args(["logs", &id, "--follow"])
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
        ),
        (Some(0), "t │ early\nt │ late\n".to_owned())
    );
}

#[test]
fn a_reader_that_goes_away_ends_events_and_logs_quietly() {
    let env = Env::new();
    env.write(
        "w.iter",
        "tool t:\n  command: `seq 1 30000`\n\nworkflow w:\n  entry: t\n  t -> done\n",
    );
    env.cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--quiet"])
        .assert()
        .code(0);
    let id = env.only_run().id.as_str().to_owned();
    for args in [
        vec!["events", id.as_str()],
        vec!["events", id.as_str(), "--json"],
        vec!["logs", id.as_str()],
        vec!["logs", id.as_str(), "--json"],
    ] {
        // `| head -1` without the race: the reading end is closed before anything is written.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = env
            .std_cmd()
            .args(&args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(
            (out.status.code(), stderr_of(&out)),
            (Some(0), String::new()),
            "{args:?}"
        );
        // And with a reader that takes one line and leaves.
        let mut child = env
            .std_cmd()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first_line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first_line)
            .unwrap();
        assert!(!first_line.is_empty());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            (out.status.code(), stderr_of(&out)),
            (Some(0), String::new()),
            "{args:?}"
        );
    }
}

#[test]
fn logs_of_an_unknown_run_or_a_bad_id_are_typed_errors() {
    let env = Env::new();
    let out = env.cmd().args(["logs", "not-a-run-id"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let ghost = iterion_store::RunId::generate();
    let out = env.cmd().args(["logs", ghost.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("no run "), "{}", stderr_of(&out));
    let out = env
        .cmd()
        .args(["logs", ghost.as_str(), "--stream", "system"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The agent of the transcript tests: one bash call, then a final text.
const AGENT: &str = "prompt task:\n  Probe.\n\nagent worker:\n  model: \"anthropic/claude-test\"\n  user: task\n  tools: [bash]\n\nworkflow w:\n  entry: worker\n  worker -> done\n";

fn transcript_model() -> FakeModel {
    FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("bash", json!({"command": "echo transcript-probe; exit 3"})),
            Reply::text("probed"),
        ],
    )
}

/// The transcript events of a run: one `agent_turn` per model answer and the bash call between
/// them, with its command, bounded result and exit code.
fn assert_bash_call_is_in_the_transcript(events: &[(String, Value)]) {
    let transcript: Vec<&(String, Value)> = events
        .iter()
        .filter(|(k, _)| k == "agent_turn" || k == "agent_tool_call")
        .collect();
    let shape: Vec<&str> = transcript.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        shape,
        vec!["agent_turn", "agent_tool_call", "agent_turn"],
        "{events:#?}"
    );
    let turn = &transcript[0].1;
    assert_eq!(
        (
            &turn["node"],
            &turn["backend"],
            &turn["turn"],
            &turn["model"]
        ),
        (
            &json!("worker"),
            &json!("claw"),
            &json!(1),
            &json!("claude-test")
        )
    );
    let call = &transcript[1].1;
    assert_eq!(
        (
            &call["node"],
            &call["tool"],
            &call["turn"],
            &call["exit_code"],
            &call["is_error"]
        ),
        (
            &json!("worker"),
            &json!("bash"),
            &json!(1),
            &json!(3),
            &json!(false)
        )
    );
    assert_eq!(
        serde_json::from_str::<Value>(call["input"].as_str().unwrap()).unwrap(),
        json!({"command": "echo transcript-probe; exit 3"})
    );
    assert!(
        call["result"]
            .as_str()
            .is_some_and(|r| r.contains("transcript-probe")),
        "{call:#}"
    );
    assert!(call["duration_ms"].is_u64(), "{call:#}");
    // All of it before the node's end.
    let finished = events
        .iter()
        .position(|(k, _)| k == "node_finished")
        .unwrap();
    let last = events.iter().rposition(|(k, _)| k == "agent_turn").unwrap();
    assert!(last < finished);
}

#[test]
fn a_claw_agents_bash_call_is_an_agent_tool_call_event_on_the_host() {
    let env = Env::new();
    env.write("w.iter", AGENT);
    let fake = transcript_model();
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("ANTHROPIC_API_KEY", "sk-test-0123456789abcdef")
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    assert_bash_call_is_in_the_transcript(&ended.events);
    // The console shows the call as it happens.
    let console = stderr_of(&out);
    assert!(
        console.contains("worker │ ⚙ bash: echo transcript-probe; exit 3 → exit 3 ("),
        "{console}"
    );
}

#[test]
fn docker_a_claw_agents_bash_call_in_the_container_is_an_agent_tool_call_event() {
    if !docker_or_skip("cli::logs::docker_agent_transcript") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::logs::docker_agent_transcript") else {
        return;
    };
    let env = Env::new();
    // An allowlist: the model's host (the fake, on the host's loopback) is added as its last
    // rule, as in agent_docker.
    env.write(
        "w.iter",
        &AGENT.replace(
            "  entry: worker\n",
            &format!(
                "  entry: worker\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n"
            ),
        ),
    );
    let fake = transcript_model();
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("ANTHROPIC_API_KEY", "sk-ant-real-key-0123456789abcdef")
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    assert!(
        kinds(&ended.events).contains(&"sandbox_claw_routed_via_runner"),
        "{:#?}",
        ended.events
    );
    assert_bash_call_is_in_the_transcript(&ended.events);
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_post_create_output_is_node_output_of_sandbox_post_create() {
    if !docker_or_skip("cli::logs::docker_post_create_output") {
        return;
    }
    let env = Env::new();
    env.write(
        "w.iter",
        &format!(
            "tool t:\n  command: `echo in-node`\n\nworkflow w:\n  entry: t\n  sandbox:\n    image: \"{IMAGE}\"\n    post_create: \"echo setting-up; echo setup-warning >&2\"\n  t -> done\n"
        ),
    );
    let out = env.cmd().args(["run", "w.iter"]).output().unwrap();
    let ended = env.only_run_ended(&out, 0);
    let console = stderr_of(&out);
    assert!(
        console.contains("sandbox.post_create │ setting-up")
            && console.contains("sandbox.post_create │ setup-warning"),
        "{console}"
    );
    let id = ended.run.id.as_str();
    assert_eq!(
        logs_of(
            &env,
            id,
            &["--node", "sandbox.post_create", "--stream", "stdout"]
        ),
        "sandbox.post_create │ setting-up\n"
    );
    assert_eq!(
        logs_of(
            &env,
            id,
            &["--node", "sandbox.post_create", "--stream", "stderr"]
        ),
        "sandbox.post_create │ setup-warning\n"
    );
    assert_eq!(logs_of(&env, id, &["--node", "t"]), "t │ in-node\n");
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn a_node_stream_past_its_bound_is_cut_and_the_cut_is_marked() {
    let env = Env::new();
    // 1300 lines of 1000 bytes on stderr: more than the 1 MiB kept per stream.
    env.write(
        "w.iter",
        "tool big:\n  command: `head -c 1300000 /dev/zero | tr '\\\\0' x | fold -w 1000 >&2; echo small`\n\nworkflow w:\n  entry: big\n  big -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--quiet"])
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let id = ended.run.id.as_str();
    let human = logs_of(&env, id, &["--stream", "stderr"]);
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines.len(), 1024 * 1024 / 1001 + 2, "{:?}", lines.last());
    assert_eq!(
        lines.last().copied(),
        Some("big │ … [stderr truncated here: the rest of this execution's output was not stored]")
    );
    let json: Vec<Value> = logs_of(&env, id, &["--stream", "stderr", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let marked: Vec<usize> = json
        .iter()
        .enumerate()
        .filter(|(_, o)| o.get("truncated") == Some(&json!(true)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(marked, vec![json.len() - 1]);
    // The other stream is not affected.
    assert_eq!(logs_of(&env, id, &["--stream", "stdout"]), "big │ small\n");
}

#[test]
fn fan_out_branches_printing_at_once_keep_each_line_whole_and_named() {
    let env = Env::new();
    env.write(
        "w.iter",
        "router fan:\n  mode: fan_out_all\n\ntool left:\n  command: `for i in $(seq 1 200); do echo left-$i; done`\n\ntool right_branch:\n  command: `for i in $(seq 1 200); do echo right-$i; done`\n\ntool join:\n  command: `echo joined`\n  await: wait_all\n\nworkflow w:\n  entry: fan\n  fan -> left\n  fan -> right_branch\n  left -> join with { l: \"{{input.result}}\" }\n  right_branch -> join with { r: \"{{input.result}}\" }\n  join -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let console = stderr_of(&out);
    let mut seen = (0, 0);
    for line in console.lines().filter(|l| l.contains(" │ ")) {
        let (node, text) = line.split_once(" │ ").unwrap();
        match (node.trim_end(), text) {
            ("left", t) if t.starts_with("left-") => seen.0 += 1,
            ("right_branch", t) if t.starts_with("right-") => seen.1 += 1,
            ("join", "joined") => {}
            other => panic!("a line lost its node or was torn: {other:?}\n{console}"),
        }
    }
    assert_eq!(seen, (200, 200), "{console}");
    // Stored per node.
    let right = logs_of(&env, ended.run.id.as_str(), &["--node", "right_branch"]);
    assert_eq!(right.lines().count(), 200);
    assert!(
        right
            .lines()
            .all(|l| l.starts_with("right_branch │ right-"))
    );
}

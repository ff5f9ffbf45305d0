//! `iterion cancel` (issue 21): a running sandboxed run, executed by another `iterion run`
//! process, cancelled through the store — it stops, its container is removed, it ends
//! `cancelled` with one `run_cancelled` after the `cancel_requested`; a queued run cancelled at
//! once; a run that is over refused and left alone; bad and unknown runs.
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

const QUICK: &str =
    "tool hi:\n  command: `echo hi`\n\nworkflow quick:\n  entry: hi\n  hi -> done\n";

fn json_out(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn cancel_refuses_a_run_that_is_over_and_cancels_a_queued_one_at_once() {
    let env = Env::new();
    env.write("quick.iter", QUICK);
    let out = env
        .cmd()
        .args(["run", "quick.iter", "--sandbox", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let finished = env.only_run();
    let before = env.events(&finished);

    // Over: refused with its code, nothing recorded.
    let out = env.cmd().args(["cancel", "last"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("is finished: it is over, there is nothing to cancel"),
        "{err}"
    );
    let out = env
        .cmd()
        .args(["cancel", finished.id.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_out(&out);
    assert_eq!(
        (&v["status"], &v["failure_code"], &v["run_id"]),
        (
            &json!("error"),
            &json!("RUN_OVER"),
            &json!(finished.id.as_str())
        )
    );
    assert_eq!(env.events(&finished), before);
    assert_eq!(env.only_run().version, finished.version);

    // Text that cannot name a run: 2; a run that is not there: 1.
    let out = env.cmd().args(["cancel", "zz"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let out = env
        .cmd()
        .args(["cancel", "0190a000-0000-7000-8000-00000000dead"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));

    // Queued (no runner took it): cancelled at once, no runner ever gets it.
    let out = env
        .cmd()
        .args([
            "run",
            "quick.iter",
            "--sandbox",
            "none",
            "--submit",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let queued = json_out(&out)["run_id"].as_str().unwrap().to_owned();
    let out = env
        .cmd()
        .args(["cancel", &queued, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        json_out(&out),
        json!({"run_id": queued, "status": "cancelled", "failure_code": "CANCELLED",
               "requested": false, "stopped": true})
    );
    let run = env
        .runs()
        .into_iter()
        .find(|r| r.id.as_str() == queued)
        .unwrap();
    let events = env.events(&run);
    assert_eq!(kinds(&events), ["cancel_requested", "run_cancelled"]);
    assert_eq!(
        first(&events, "run_cancelled").unwrap()["phase"],
        json!("queued")
    );
}

#[test]
fn docker_cancel_stops_a_sandboxed_run_another_process_executes() {
    if !docker_or_skip("cli::cancel::docker_cancel_stops_a_sandboxed_run_another_process_executes")
    {
        return;
    }
    let env = Env::new();
    env.write(
        "s.iter",
        &format!(
            "tool nap:\n  command: `touch nap.started; sleep 120`\n\nworkflow s:\n  entry: nap\n  sandbox:\n    image: \"{IMAGE}\"\n  nap -> done\n"
        ),
    );
    let child = env.spawn(&["run", "s.iter"]);
    let (run, events) = env.wait_for_event("node_started", 90);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !env.path("nap.started").exists() {
        assert!(Instant::now() < deadline, "the tool never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(first(&events, "sandbox_started").is_some(), "{events:#?}");
    assert_eq!(env.containers().len(), 1, "the run's container");

    let started = Instant::now();
    let out = env
        .cmd()
        .args(["cancel", run.id.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        json_out(&out),
        json!({"run_id": run.id.as_str(), "status": "cancelled", "failure_code": "CANCELLED",
               "requested": true, "stopped": true})
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    // The executing process ended the run itself: exit 1 (cancelled), one terminal event after
    // the request, the container removed.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("run cancelled"),
        "{}",
        stderr_of(&out)
    );
    let run = env.only_run();
    assert_eq!(
        (run.status.as_str(), run.failure_code.as_deref()),
        ("cancelled", Some("CANCELLED"))
    );
    let events = env.events(&run);
    let k = kinds(&events);
    let request = k.iter().position(|t| *t == "cancel_requested").unwrap();
    let ended = k.iter().position(|t| *t == "run_cancelled").unwrap();
    assert!(request < ended, "{k:?}");
    assert_eq!(k.last(), Some(&"run_cancelled"));
    assert_eq!(
        k.iter()
            .filter(|t| matches!(**t, "run_finished" | "run_failed" | "run_cancelled"))
            .count(),
        1,
        "{k:?}"
    );
    assert_eq!(
        first(&events, "cancel_requested").unwrap(),
        &json!({"by": "iterion cancel"})
    );
    assert_eq!(
        env.containers(),
        Vec::<String>::new(),
        "nothing left behind"
    );
    // Again: it is over now.
    let out = env.cmd().args(["cancel", "last"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// The same through PostgreSQL (`ITERION_STORE_URL`): the request reaches the executing
/// process through the shared store, as it would a runner on another host.
#[test]
fn cancel_through_a_postgres_store_stops_the_run_its_process_executes() {
    let url = match std::env::var("ITERION_IT_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            assert!(
                std::env::var("ITERION_IT_DOCKER").as_deref() != Ok("1"),
                "ITERION_IT_DOCKER=1 but ITERION_IT_POSTGRES_URL is unset (scripts/test.sh sets it)"
            );
            eprintln!("skipped: set ITERION_IT_POSTGRES_URL to run this test");
            return;
        }
    };
    let env = Env::new();
    env.write(
        "nap.iter",
        "tool nap:\n  command: `sleep 120`\n\nworkflow nap:\n  entry: nap\n  nap -> done\n",
    );
    let mut child = env
        .std_cmd()
        .env("ITERION_STORE_URL", &url)
        .args(["run", "nap.iter", "--sandbox", "none"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Progress on stderr: `run <id>` first, then `▸ nap` once the node runs.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut id = None;
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0 {
        if let Some(rest) = line.trim().strip_prefix("run ") {
            id = Some(rest.split_whitespace().next().unwrap().to_owned());
        }
        if line.contains("nap") && id.is_some() {
            break;
        }
        line.clear();
    }
    let id = id.unwrap_or_else(|| panic!("no run id on stderr: {line}"));
    let out = env
        .cmd()
        .env("ITERION_STORE_URL", &url)
        .args(["cancel", &id, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = json_out(&out);
    assert_eq!(
        (&v["status"], &v["failure_code"], &v["requested"]),
        (&json!("cancelled"), &json!("CANCELLED"), &json!(true))
    );
    assert_eq!(child.wait().unwrap().code(), Some(1));
    assert!(!env.db().exists(), "nothing in SQLite");
    let out = env
        .cmd()
        .env("ITERION_STORE_URL", &url)
        .args(["events", &id, "--json"])
        .output()
        .unwrap();
    let types: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        types.last().map(String::as_str),
        Some("run_cancelled"),
        "{types:?}"
    );
    assert!(types.iter().any(|t| t == "cancel_requested"), "{types:?}");
}

/// A subbot child that adopted its parent's sandbox runs inside its parent's execution, not an
/// attempt of its own: a cancel asked for it still stops it, and its parent with it (the subbot
/// node fails `CANCELLED`).
#[test]
fn docker_cancel_stops_an_adopting_subbot_child_and_its_parent() {
    if !docker_or_skip("cli::cancel::docker_cancel_stops_an_adopting_subbot_child_and_its_parent") {
        return;
    }
    let env = Env::new();
    env.write(
        "parent.iter",
        "tool start:\n  command: `echo parent`\n\nsubbot sub:\n  source: \"child.iter\"\n\nworkflow parent:\n  entry: start\n  start -> sub\n  sub -> done\n",
    );
    env.write(
        "child.iter",
        "tool nap:\n  command: `touch nap.started; sleep 120`\n\nworkflow child:\n  entry: nap\n  nap -> done\n",
    );
    let child_process = env.spawn(&["run", "parent.iter", "--sandbox-default-image", IMAGE]);
    let deadline = Instant::now() + Duration::from_secs(90);
    while !env.path("nap.started").exists() {
        assert!(Instant::now() < deadline, "the child's tool never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let runs = env.runs();
    let child = runs
        .iter()
        .find(|r| r.parent_run_id.is_some())
        .unwrap_or_else(|| panic!("{runs:#?}"))
        .clone();
    let parent = runs
        .iter()
        .find(|r| r.parent_run_id.is_none())
        .unwrap()
        .clone();
    assert!(
        env.events(&child)
            .iter()
            .any(|(k, d)| k == "sandbox_shared" && d["adopted"] == json!(true)),
        "{:#?}",
        env.events(&child)
    );
    let out = env
        .cmd()
        .args(["cancel", child.id.as_str(), "--json", "--timeout", "60"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(json_out(&out)["status"], json!("cancelled"));
    let out = child_process.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let runs = env.runs();
    let status = |id: &iterion_store::RunId| {
        let r = runs.iter().find(|r| &r.id == id).unwrap();
        (r.status.as_str().to_owned(), r.failure_code.clone())
    };
    assert_eq!(
        status(&child.id),
        ("cancelled".to_owned(), Some("CANCELLED".to_owned()))
    );
    assert_eq!(
        status(&parent.id),
        ("cancelled".to_owned(), Some("CANCELLED".to_owned()))
    );
    assert_eq!(
        env.containers(),
        Vec::<String>::new(),
        "nothing left behind"
    );
}

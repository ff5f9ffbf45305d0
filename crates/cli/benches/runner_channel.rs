//! The runner channel against one `docker exec` per tool call, on the same container
//! (BENCHMARKS.md "## Agent runner").
//!
//! 1. **Runner channel.** The real `iterion __claw-runner` (the static build, bind-mounted at
//!    /run/iterion/bin/iterion as the engine does) runs in a long-lived container under one
//!    attached `docker exec -i`. The fake model answers the first request with N `ask_user`
//!    calls, which the runner forwards to this process one at a time over `tool_call`; each
//!    round trip is the time from writing `tool_result` for call k to reading `tool_call` k+1
//!    (launcher → runner → launcher, the runner's own decoding and dispatch included).
//! 2. **docker exec per call.** `docker exec CONTAINER true`, N times, into the same container.
//!
//! Reports p50/p90 of each and the p50 ratio (goal ≤ 0.1×, channel p50 ≤ 5 ms). Needs a running
//! engine, the test images and the static build (`scripts/build-static.sh`, or
//! `ITERION_STATIC_BIN`). Not part of the test suite:
//! `cargo bench -p iterion --bench runner_channel [-- --calls N]`.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use iterion_engine::{Envelope, EnvelopeReader, EnvelopeWriter, TaskData};
use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use serde_json::{Value, json};

const IMAGE: &str = "iterion-test/debian:bookworm";

fn percentile(xs: &mut [Duration], p: f64) -> Duration {
    xs.sort();
    let i = ((xs.len() as f64 - 1.0) * p).round() as usize;
    xs[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

fn static_binary() -> String {
    if let Ok(path) = std::env::var("ITERION_STATIC_BIN") {
        return path;
    }
    let out = Command::new("scripts/build-static.sh")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/build-static.sh");
    assert!(out.status.success(), "the static build failed");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let calls: usize = args
        .iter()
        .position(|a| a == "--calls")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let bin = static_binary();
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::Tools(
                (0..calls)
                    .map(|i| ("ask_user".to_owned(), json!({"question": format!("q{i}")})))
                    .collect(),
            ),
            Reply::text("done"),
        ],
    );
    let out = Command::new("docker")
        .args([
            "run",
            "-d",
            "--rm",
            "--network",
            "host",
            "--label",
            "iterion.io/test-id=bench-runner-channel",
            "-v",
            &format!("{bin}:/run/iterion/bin/iterion:ro"),
            "-w",
            "/tmp",
            IMAGE,
            "sleep",
            "600",
        ])
        .output()
        .expect("docker run");
    assert!(
        out.status.success(),
        "docker run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let container = Container(String::from_utf8(out.stdout).unwrap().trim().to_owned());

    // 1. The runner channel.
    let mut child = tokio::process::Command::new("docker")
        .args([
            "exec",
            "-i",
            &container.0,
            "/run/iterion/bin/iterion",
            "__claw-runner",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("docker exec -i");
    let mut writer = EnvelopeWriter::new(child.stdin.take().unwrap());
    let mut reader = EnvelopeReader::new(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let ask_user =
        json!({"name": "ask_user", "description": "ask", "input_schema": {"type": "object"}});
    let task = TaskData {
        node_id: "bench".into(),
        model: "anthropic/claude-bench".into(),
        system: None,
        prompt: "go".into(),
        tools: vec![serde_json::from_value(ask_user).unwrap()],
        max_turns: Some(5),
        workdir: "/tmp".into(),
        interaction: "ask".into(),
        base_url: fake.base_url(),
        api_key: "__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__".into(),
        output: None,
        run_id: "bench".into(),
        mcp_servers: vec![],
        generation: Default::default(),
        tool_gate: None,
    };
    for envelope in [
        Envelope::new("permission_policy", json!(["allow ask_user"])),
        Envelope {
            kind: "gateway_v1".into(),
            id: None,
            data: None,
        },
        Envelope::new("task", serde_json::to_value(task).unwrap()),
    ] {
        writer.send(&envelope).await.unwrap();
    }
    let mut channel = Vec::with_capacity(calls);
    let mut sent_at: Option<Instant> = None;
    loop {
        let envelope = reader.next().await.expect("runner envelope");
        match envelope.kind.as_str() {
            "tool_call" => {
                if let Some(at) = sent_at {
                    channel.push(at.elapsed());
                }
                let reply = Envelope::new("tool_result", json!({"output": "ok"}))
                    .with_id(envelope.id.unwrap_or_default());
                sent_at = Some(Instant::now());
                writer.send(&reply).await.unwrap();
            }
            "result" => {
                let data = envelope.data.unwrap_or(Value::Null);
                assert_eq!(data["output"], json!({"text": "done"}), "{data}");
                break;
            }
            _ => {}
        }
    }
    drop(writer);
    let _ = child.wait().await;
    assert_eq!(
        channel.len(),
        calls - 1,
        "one round trip per call after the first"
    );

    // 2. One docker exec per call, same container.
    let mut execs = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let out = Command::new("docker")
            .args(["exec", &container.0, "true"])
            .output()
            .unwrap();
        execs.push(start.elapsed());
        assert!(out.status.success());
    }

    let (c50, c90) = (percentile(&mut channel, 0.5), percentile(&mut channel, 0.9));
    let (e50, e90) = (percentile(&mut execs, 0.5), percentile(&mut execs, 0.9));
    println!("calls: {calls}");
    println!(
        "runner channel round trip: p50 {:.3} ms, p90 {:.3} ms",
        ms(c50),
        ms(c90)
    );
    println!(
        "docker exec per call:      p50 {:.3} ms, p90 {:.3} ms",
        ms(e50),
        ms(e90)
    );
    println!(
        "ratio (p50): {:.4}x (goal <= 0.1x, channel p50 <= 5 ms)",
        c50.as_secs_f64() / e50.as_secs_f64()
    );
}

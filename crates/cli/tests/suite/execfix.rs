//! Issue 19, items 2–6 of the walk-through, at the binary level: `sandbox: auto` outside a git
//! repository, the strict doctor against setups that fail, routers' input, Ctrl-C and
//! `resume --from`, and a named host service reached from an allowlisted sandbox.
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

/// An [`Env`] whose workspace is no git repository.
fn env_without_repository() -> Env {
    let env = Env::new();
    std::fs::remove_dir_all(env.path(".git")).unwrap();
    env
}

const WRITE_MARK: &str = "tool mark:\n  command: `test -f /.dockerenv && echo in-container > mark.txt; echo done`\n\nworkflow m:\n  entry: mark\n  mark -> done\n";

#[test]
fn docker_execfix_auto_without_a_repository_is_sandboxed_on_the_current_directory() {
    if !docker_or_skip("cli::execfix::auto_without_a_repository") {
        return;
    }
    let env = env_without_repository();
    env.write("m.iter", WRITE_MARK);
    let out = env
        .cmd()
        .args(["run", "m.iter", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let started = first(&ended.events, "sandbox_started").expect("sandboxed");
    assert_eq!(started["driver"], "docker", "{started}");
    assert!(
        !kinds(&ended.events).contains(&"sandbox_skipped"),
        "{:?}",
        kinds(&ended.events)
    );
    // The current directory was the workspace bound into the container.
    assert_eq!(
        std::fs::read_to_string(env.path("mark.txt"))
            .unwrap()
            .trim(),
        "in-container"
    );
}

#[test]
fn docker_execfix_auto_without_a_repository_untrusted_works_on_a_copy() {
    if !docker_or_skip("cli::execfix::auto_without_a_repository_untrusted") {
        return;
    }
    let Some(static_bin) =
        iterion_test_support::static_iterion_or_skip("cli::execfix::auto_untrusted")
    else {
        return;
    };
    let env = env_without_repository();
    env.write("m.iter", WRITE_MARK);
    let out = env
        .cmd()
        .args([
            "run",
            "m.iter",
            "--trust",
            "untrusted",
            "--sandbox-default-image",
            IMAGE,
        ])
        .env("ITERION_BIN", &static_bin)
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let started = first(&ended.events, "sandbox_started").expect("sandboxed");
    assert_eq!(started["egress_enforced"], true, "{started}");
    // The container worked on a copy: the directory itself is untouched.
    assert!(!env.path("mark.txt").exists());
}

/// A workflow of one tool node in `image`, with `network` lines under `sandbox:`.
fn in_image(image: &str, network: &str) -> String {
    format!(
        "tool t:\n  command: `echo hi`\n\nworkflow b:\n  entry: t\n  sandbox:\n    image: \"{image}\"\n{network}  t -> done\n"
    )
}

const ALLOWLIST: &str = "    network:\n      mode: allowlist\n      rules: [\"example.com\"]\n";

/// `sandbox doctor --strict FILE --json`: its exit code and the failed rows `(id, summary, hint)`.
pub(crate) fn strict_failures(
    env: &Env,
    file: &str,
    bin: &std::path::Path,
) -> (i32, Vec<(String, String, String)>) {
    let out = env
        .cmd()
        .args(["sandbox", "doctor", "--strict", file, "--json"])
        .env("ITERION_BIN", bin)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr_of(&out)
        )
    });
    let failed = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["summary"].as_str().unwrap().to_owned(),
                c["remediation"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (out.status.code().unwrap(), failed)
}

/// The dynamically linked test build (`cargo build` links glibc).
fn dynamic_bin() -> std::path::PathBuf {
    let bin = assert_cmd::cargo::cargo_bin("iterion");
    assert_eq!(
        iterion_sandbox::link_kind_of(&bin),
        iterion_sandbox::LinkKind::Dynamic
    );
    bin
}

#[test]
fn docker_execfix_strict_doctor_fails_a_libc_less_image_behind_a_dynamic_engine_binary() {
    if !docker_or_skip("cli::execfix::strict_dynamic_binary") {
        return;
    }
    let env = Env::new();
    env.write(
        "bb.iter",
        &in_image(iterion_test_support::BUSYBOX_IMAGE, ALLOWLIST),
    );
    let (code, failed) = strict_failures(&env, "bb.iter", &dynamic_bin());
    assert_eq!(code, 1, "{failed:#?}");
    let (id, summary, hint) = &failed[0];
    assert_eq!(
        (failed.len(), id.as_str()),
        (1, "image-contents"),
        "{failed:#?}"
    );
    for want in [
        "has no bash",
        "would exit 127",
        "for the egress bridge, is dynamically linked",
        "lacks its loader /lib64/ld-linux-x86-64.so.2",
    ] {
        assert!(summary.contains(want), "{want:?} not in {summary}");
    }
    assert!(
        hint.contains("scripts/build-static.sh") && hint.contains("ITERION_BIN"),
        "{hint}"
    );
    assert!(hint.contains("an image with bash"), "{hint}");

    // The run itself names the file and the fix, not only the exec's ENOENT.
    let out = env
        .cmd()
        .args(["run", "bb.iter"])
        .env("ITERION_BIN", dynamic_bin())
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 1);
    assert_eq!(
        ended.run.failure_code.as_deref(),
        Some("SANDBOX_SETUP_FAILED")
    );
    let stderr = stderr_of(&out);
    for want in [
        "egress bridge exited before ready",
        "is the engine binary",
        "not statically linked",
        "scripts/build-static.sh",
        "ITERION_BIN",
    ] {
        assert!(stderr.contains(want), "{want:?} not in {stderr}");
    }
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_execfix_strict_doctor_passes_the_same_image_with_a_static_binary_but_not_without_bash() {
    if !docker_or_skip("cli::execfix::strict_static_binary") {
        return;
    }
    let Some(static_bin) =
        iterion_test_support::static_iterion_or_skip("cli::execfix::strict_static")
    else {
        return;
    };
    let env = Env::new();
    env.write(
        "bb.iter",
        &in_image(iterion_test_support::BUSYBOX_IMAGE, ALLOWLIST),
    );
    let (code, failed) = strict_failures(&env, "bb.iter", &static_bin);
    assert_eq!(code, 1, "{failed:#?}");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(failed[0].1.contains("has no bash"), "{failed:#?}");
    assert!(!failed[0].1.contains("loader"), "{failed:#?}");
    // The image with bash and the dynamic binary on an open network: nothing fails.
    env.write("ok.iter", &in_image(IMAGE, ""));
    let (code, failed) = strict_failures(&env, "ok.iter", &dynamic_bin());
    assert_eq!((code, failed), (0, Vec::new()));
}

#[test]
fn docker_execfix_a_tool_in_an_image_without_bash_exits_127_naming_bash() {
    if !docker_or_skip("cli::execfix::no_bash_127") {
        return;
    }
    let env = Env::new();
    env.write(
        "nb.iter",
        &in_image(iterion_test_support::BUSYBOX_IMAGE, ""),
    );
    let out = env.cmd().args(["run", "nb.iter"]).output().unwrap();
    let ended = env.only_run_ended(&out, 1);
    let failed = first(&ended.events, "node_failed").expect("node_failed");
    assert_eq!(failed["exit_code"], 127, "{failed}");
    let stderr = stderr_of(&out);
    assert!(stderr.contains("(exit 127)"), "{stderr}");
    assert!(
        stderr.contains("this image has no bash in its PATH"),
        "{stderr}"
    );
    // The strict doctor says so before a run.
    let (code, failed) = strict_failures(&env, "nb.iter", &dynamic_bin());
    assert_eq!(code, 1);
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].0, "image-contents");
}

#[test]
fn docker_execfix_strict_doctor_and_the_run_name_an_image_that_cannot_be_pulled() {
    if !docker_or_skip("cli::execfix::image_typo") {
        return;
    }
    let env = Env::new();
    // A typo of the local test image: not local, and no registry serves it here.
    env.write("ty.iter", &in_image("iterion-test/debain:bookworm", ""));
    let (code, failed) = strict_failures(&env, "ty.iter", &dynamic_bin());
    assert_eq!(code, 1, "{failed:#?}");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    let (id, summary, hint) = &failed[0];
    assert_eq!(id, "image-resolvable");
    assert!(summary.contains("is not present locally and"), "{summary}");
    assert!(summary.contains("is the name right?"), "{summary}");
    assert!(
        hint.contains("docker pull iterion-test/debain:bookworm"),
        "{hint}"
    );
    let out = env
        .cmd()
        .args(["run", "ty.iter"])
        .env("ITERION_SANDBOX_PULL_TIMEOUT", "20s")
        .output()
        .unwrap();
    env.only_run_ended(&out, 1);
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("image iterion-test/debain:bookworm is not present locally and could not be pulled: check its name"),
        "{stderr}"
    );
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn docker_execfix_ctrl_c_leaves_a_resumable_run_that_resume_finishes() {
    if !docker_or_skip("cli::execfix::ctrl_c_resume") {
        return;
    }
    let env = Env::new();
    // `nap` sleeps until the operator has fixed things (the file `go`), then says so.
    env.write(
        "c.iter",
        "tool first:\n  command: `echo first >> trail.txt`\n\ntool nap:\n  command: `echo nap >> trail.txt; if test -f go; then echo woke; else sleep 60; fi`\n\nworkflow c:\n  entry: first\n  first -> nap\n  nap -> done\n",
    );
    let child = env.spawn(&["run", "c.iter", "--sandbox-default-image", IMAGE]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, events) = env.wait_for_event("node_started", 60);
        if events
            .iter()
            .any(|(k, d)| k == "node_started" && d["node"] == "nap")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "nap never started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The command is running once it has written its line.
    while !std::fs::read_to_string(env.path("trail.txt"))
        .unwrap_or_default()
        .contains("nap")
    {
        assert!(std::time::Instant::now() < deadline, "nap never ran");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    let ended = env.only_run_ended(&out, 1);
    assert_eq!(
        (ended.run.status.as_str(), ended.run.failure_code.as_deref()),
        ("failed_resumable", Some("INTERRUPTED")),
        "{}",
        stderr_of(&out)
    );
    assert!(
        stderr_of(&out).contains("press Ctrl-C again to cancel it"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(env.containers(), Vec::<String>::new());

    env.write("go", "");
    let id = ended.run.id.to_string();
    let out = env.cmd().args(["resume", &id, "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], "finished", "{summary}");
    assert_eq!(summary["output"]["result"], "woke", "{summary}");
    // `first` ran once: the resume started at the interrupted node.
    assert_eq!(
        std::fs::read_to_string(env.path("trail.txt")).unwrap(),
        "first\nnap\nnap\n"
    );
}

/// `a → b → c`, `c` failing until the file `ok` exists; `b` says how many lines the trail has,
/// and `c` prints what `b` said. `maybe` is declared, reachable, and never taken.
const REWIND: &str = "tool a:\n  command: `echo a >> trail.txt; echo A`\n\ntool maybe:\n  command: `echo maybe`\n\ntool b:\n  command: `echo b >> trail.txt; wc -l < trail.txt`\n\ntool c:\n  command: `echo c >> trail.txt; test -f ok && echo {{input.n}}`\n\nworkflow r:\n  entry: a\n  a -> maybe when \"input.result == 'never'\"\n  a -> b\n  maybe -> done\n  b -> c with { n: \"{{input.result}}\" }\n  c -> done\n";

#[test]
fn docker_execfix_resume_from_an_earlier_node_runs_it_and_the_later_ones_again() {
    if !docker_or_skip("cli::execfix::resume_from") {
        return;
    }
    let env = Env::new();
    env.write("r.iter", REWIND);
    let out = env
        .cmd()
        .args(["run", "r.iter", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 1);
    assert_eq!(ended.run.status.as_str(), "failed_resumable");
    let id = ended.run.id.to_string();

    // Typed refusals, exit 2, and the run is left as it was.
    for (node, want) in [
        ("nope", "the workflow declares no node \"nope\""),
        (
            "maybe",
            "run never reached node \"maybe\" on its main line; it can start again only from a node it reached: a, b, c",
        ),
    ] {
        let out = env
            .cmd()
            .args(["resume", &id, "--from", node])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let stderr = stderr_of(&out);
        assert!(
            stderr.contains("RESUME_INVALID") && stderr.contains(want),
            "{stderr}"
        );
        assert_eq!(env.only_run().status.as_str(), "failed_resumable");
    }

    env.write("ok", "");
    let out = env
        .cmd()
        .args(["resume", &id, "--from", "b", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], "finished", "{summary}");
    // `b` ran again (the trail had a, b, c, then b: 4 lines) and `c` read its new output.
    assert_eq!(summary["output"]["result"], "4", "{summary}");
    // `a`, started before `b`, kept its output and did not run again.
    assert_eq!(
        std::fs::read_to_string(env.path("trail.txt")).unwrap(),
        "a\nb\nc\nb\nc\n"
    );
    // `c` failed, so only `b` had an output to drop.
    assert!(
        stderr_of(&out).contains(
            "resume --from b: starting again there; the outputs of b are dropped and computed again"
        ),
        "{}",
        stderr_of(&out)
    );
    let events = env.events(&env.only_run());
    assert_eq!(
        first(&events, "run_rewound"),
        Some(&serde_json::json!({"node": "b", "dropped_outputs": ["b"]}))
    );
    let ks = kinds(&events);
    let resumed_at = ks.iter().rposition(|k| *k == "run_started").unwrap();
    assert_eq!(ks[resumed_at + 1], "run_rewound", "{ks:?}");
}

/// `check -> gate`, the router testing the field `check` printed.
const ROUTED: &str = "schema verdict:\n  ok: bool\n\ntool check:\n  command: `echo '{\"ok\": true}'`\n  output: verdict\n\nrouter gate:\n  mode: condition\n\nworkflow r:\n  entry: check\n  check -> gate\n  gate -> done when ok\n  gate -> fail\n";

#[test]
fn docker_execfix_a_router_reads_its_predecessors_output() {
    if !docker_or_skip("cli::execfix::router_input") {
        return;
    }
    let env = Env::new();
    env.write("r.iter", ROUTED);
    let out = env
        .cmd()
        .args(["run", "r.iter", "--sandbox-default-image", IMAGE, "--json"])
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], serde_json::json!({"ok": true}));
    let selected: Vec<(&Value, &Value)> = ended
        .events
        .iter()
        .filter(|(k, _)| k == "edge_selected")
        .map(|(_, d)| (&d["from"], &d["to"]))
        .collect();
    assert_eq!(
        selected,
        vec![
            (&Value::from("check"), &Value::from("gate")),
            (&Value::from("gate"), &Value::from("done"))
        ]
    );
    assert!(first(&ended.events, "sandbox_started").is_some());
}

#[test]
fn docker_execfix_the_console_shows_the_condition_error_that_sent_a_run_to_fail() {
    if !docker_or_skip("cli::execfix::router_condition_error") {
        return;
    }
    let env = Env::new();
    env.write(
        "r.iter",
        &ROUTED.replace(
            "gate -> done when ok",
            "gate -> done when \"input.ok and input.missing\"",
        ),
    );
    let out = env
        .cmd()
        .args(["run", "r.iter", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    env.only_run_ended(&out, 1);
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(
            "edge gate -> done: condition `input.ok and input.missing` could not be decided: "
        ),
        "{stderr}"
    );
    assert!(stderr.contains("the edge to fail was taken"), "{stderr}");
}

/// A service listening on this machine's loopback only, answering `local-service:<tag>`.
fn loopback_service(tag: &'static str) -> u16 {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = format!("local-service:{tag}");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// An allowlisted workflow whose tool asks `host.docker.internal` on `port` and on `other`.
fn asks_the_host(port: u16, other: u16) -> String {
    let script = format!(
        "a=$(curl -s --max-time 10 http://host.docker.internal:{port}/); b=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 http://host.docker.internal:{other}/); echo \"$a $b\""
    );
    format!(
        "tool ask:\n  command: `{script}`\n\nworkflow h:\n  entry: ask\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.com\"]\n  ask -> done\n"
    )
}

#[test]
fn docker_execfix_allow_host_lets_an_allowlisted_sandbox_reach_one_local_service() {
    if !docker_or_skip("cli::execfix::allow_host") {
        return;
    }
    let Some(static_bin) = iterion_test_support::static_iterion_or_skip("cli::execfix::allow_host")
    else {
        return;
    };
    let (port, other) = (loopback_service("wanted"), loopback_service("other"));
    let run = |extra: &[&str]| {
        let env = Env::new();
        env.write("h.iter", &asks_the_host(port, other));
        let mut args = vec!["run", "h.iter", "--json"];
        args.extend_from_slice(extra);
        let out = env
            .cmd()
            .args(&args)
            .env("ITERION_BIN", &static_bin)
            .output()
            .unwrap();
        (env, out)
    };
    // Control: without the flag the name is refused like any other.
    let (env, out) = run(&[]);
    env.only_run_ended(&out, 0);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"]["result"],
        "host 'host.docker.internal' blocked by sandbox network policy 403",
        "{summary}"
    );

    // With it: that port of this machine answers, and another port of it does not.
    let allow = format!("host.docker.internal:{port}");
    let (env, out) = run(&["--allow-host", &allow]);
    let ended = env.only_run_ended(&out, 0);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"]["result"], "local-service:wanted 403",
        "{summary}"
    );
    let started = first(&ended.events, "sandbox_started").unwrap();
    assert_eq!(started["egress_enforced"], true, "{started}");
    assert!(
        started["network_source"]
            .as_str()
            .unwrap()
            .ends_with(&format!("+ host services (host.docker.internal:{port})")),
        "{started}"
    );
}

#[test]
fn docker_execfix_attack_an_untrusted_run_gets_no_host_service_unless_the_operator_insists() {
    if !docker_or_skip("cli::execfix::allow_host_untrusted") {
        return;
    }
    let Some(static_bin) =
        iterion_test_support::static_iterion_or_skip("cli::execfix::allow_host_untrusted")
    else {
        return;
    };
    let (port, other) = (loopback_service("wanted"), loopback_service("other"));
    let allow = format!("host.docker.internal:{port}");
    let env = Env::new();
    env.write("h.iter", &asks_the_host(port, other));
    // Refused before any run exists, naming the flag that would allow it.
    let out = env
        .cmd()
        .args([
            "run",
            "h.iter",
            "--trust",
            "untrusted",
            "--allow-host",
            &allow,
        ])
        .env("ITERION_BIN", &static_bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("--dangerously-allow-host-untrusted"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(env.runs().len(), 0);
    // A malformed one is refused the same way.
    let out = env
        .cmd()
        .args(["run", "h.iter", "--allow-host", "127.0.0.1:5432"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("NAME must be a host name, not an address"),
        "{}",
        stderr_of(&out)
    );
    // With the explicit consent, the one service opens (and only it).
    let out = env
        .cmd()
        .args([
            "run",
            "h.iter",
            "--trust",
            "untrusted",
            "--allow-host",
            &allow,
            "--dangerously-allow-host-untrusted",
            "--json",
        ])
        .env("ITERION_BIN", &static_bin)
        .output()
        .unwrap();
    env.only_run_ended(&out, 0);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"]["result"], "local-service:wanted 403",
        "{summary}"
    );
}

#[test]
fn docker_execfix_a_model_server_that_is_down_reads_the_same_sandboxed_and_not() {
    if !docker_or_skip("cli::execfix::model_down") {
        return;
    }
    let Some(static_bin) = iterion_test_support::static_iterion_or_skip("cli::execfix::model_down")
    else {
        return;
    };
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let wf = format!(
        "prompt task:\n  Do it.\n\nagent worker:\n  model: \"anthropic/claude-test\"\n  user: task\n\nworkflow w:\n  entry: worker\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n  worker -> done\n"
    );
    let message = |extra: &[&str]| {
        let env = Env::new();
        env.write("w.iter", &wf);
        let mut args = vec!["run", "w.iter"];
        args.extend_from_slice(extra);
        let out = env
            .cmd()
            .args(&args)
            .env("ITERION_BIN", &static_bin)
            .env("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
            .env(
                "ITERION_ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{port}"),
            )
            .output()
            .unwrap();
        let ended = env.only_run_ended(&out, 1);
        let failed = first(&ended.events, "node_failed")
            .expect("node_failed")
            .clone();
        failed["message"].as_str().unwrap().to_owned()
    };
    let host = message(&["--sandbox", "none"]);
    let sandboxed = message(&[]);
    assert!(host.contains("Connection refused"), "{host}");
    assert_eq!(sandboxed, host);
}

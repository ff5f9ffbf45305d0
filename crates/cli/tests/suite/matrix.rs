//! The precedence matrix (SANDBOX.md §2.1, §3.7, issue 4 "Tests"): every combination of the CLI
//! flag (none/auto/absent), the workflow block (none/auto/inline image/inline build/absent) and
//! `ITERION_SANDBOX_DEFAULT` (none/auto/unset), on a host with a working engine and on one where
//! `DOCKER_HOST` and `CONTAINER_HOST` point at dead sockets. Each case checks the resolved mode,
//! the source label in the events, degrade vs refuse, the failure code and status, and that no
//! container is left.
//!
//! The expectations are written from the spec's tables, not computed with the crate's own
//! precedence functions. The binary always installs a global default, so "unset" means `auto`.
use std::sync::Mutex;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{DEAD_DOCKER, DEAD_PODMAN, Env, IMAGE, docker_or_skip, first, kinds};

#[derive(Clone, Copy, Debug)]
enum Flag {
    None,
    Auto,
    Absent,
}

#[derive(Clone, Copy, Debug)]
enum Block {
    None,
    Auto,
    InlineImage,
    InlineBuild,
    Absent,
}

#[derive(Clone, Copy, Debug)]
enum Global {
    None,
    Auto,
    Unset,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Host {
    Engine,
    Dead,
}

fn workflow(block: Block) -> String {
    let sandbox = match block {
        Block::None => "  sandbox: none\n".to_owned(),
        Block::Auto => "  sandbox: auto\n".to_owned(),
        Block::InlineImage => format!("  sandbox:\n    image: \"{IMAGE}\"\n"),
        Block::InlineBuild => {
            "  sandbox:\n    build:\n      dockerfile: \"Dockerfile\"\n".to_owned()
        }
        Block::Absent => String::new(),
    };
    format!(
        "tool probe:\n  command: `echo ok`\n\nworkflow m:\n  entry: probe\n{sandbox}  probe -> done\n"
    )
}

/// SANDBOX.md §2.1, first match wins; auto's label gains its default-image detail.
fn expected(flag: Flag, block: Block, global: Global) -> (&'static str, String) {
    let names_container = matches!(block, Block::InlineImage | Block::InlineBuild);
    let (mode, label) = match (flag, block, global) {
        (Flag::None, _, _) => ("none", "cli flag --sandbox"),
        (Flag::Auto, _, _) if names_container => (
            "inline",
            "workflow sandbox: block (overrides --sandbox=auto)",
        ),
        (Flag::Auto, _, _) => ("auto", "cli flag --sandbox"),
        (Flag::Absent, Block::None, _) => ("none", "workflow sandbox: block"),
        (Flag::Absent, Block::Auto, _) => ("auto", "workflow sandbox: block"),
        (Flag::Absent, Block::InlineImage | Block::InlineBuild, _) => {
            ("inline", "workflow sandbox: block")
        }
        (Flag::Absent, Block::Absent, Global::None) => ("none", "global sandbox default"),
        (Flag::Absent, Block::Absent, Global::Auto | Global::Unset) => {
            ("auto", "global sandbox default")
        }
    };
    let label = if mode == "auto" {
        format!("{label} (default image: {IMAGE})")
    } else {
        label.to_owned()
    };
    (mode, label)
}

fn all_cases() -> Vec<(Flag, Block, Global)> {
    let mut cases = Vec::new();
    for flag in [Flag::None, Flag::Auto, Flag::Absent] {
        for block in [
            Block::None,
            Block::Auto,
            Block::InlineImage,
            Block::InlineBuild,
            Block::Absent,
        ] {
            for global in [Global::None, Global::Auto, Global::Unset] {
                cases.push((flag, block, global));
            }
        }
    }
    cases
}

/// Runs one case and checks it; returns a description of what was wrong, if anything.
fn check(host: Host, flag: Flag, block: Block, global: Global) -> Result<(), String> {
    let env = Env::new();
    env.write("m.iter", &workflow(block));
    env.write("Dockerfile", &format!("FROM {IMAGE}\n"));
    let mut cmd = env.cmd();
    cmd.args(["run", "m.iter", "--sandbox-default-image", IMAGE]);
    match flag {
        Flag::None => {
            cmd.args(["--sandbox", "none"]);
        }
        Flag::Auto => {
            cmd.args(["--sandbox", "auto"]);
        }
        Flag::Absent => {}
    }
    match global {
        Global::None => {
            cmd.env("ITERION_SANDBOX_DEFAULT", "none");
        }
        Global::Auto => {
            cmd.env("ITERION_SANDBOX_DEFAULT", "auto");
        }
        Global::Unset => {}
    }
    if host == Host::Dead {
        // No engine and no other driver: pinned to docker, or the embedded namespace driver
        // would answer (its own matrix is `suite::namespace`).
        cmd.env("DOCKER_HOST", DEAD_DOCKER)
            .env("CONTAINER_HOST", DEAD_PODMAN)
            .env("ITERION_SANDBOX_DRIVER", "docker");
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let (mode, label) = expected(flag, block, global);
    let run = env.only_run();
    let events = env.events(&run);
    let ks = kinds(&events);
    let sandbox_events: Vec<&str> = ks
        .iter()
        .copied()
        .filter(|k| k.starts_with("sandbox_"))
        .collect();
    let code = out.status.code();
    let got_status = (run.status.as_str(), run.failure_code.as_deref(), code);
    let mut problems = Vec::new();
    let mut want = |what: &str, ok: bool, detail: String| {
        if !ok {
            problems.push(format!("{what}: {detail}"));
        }
    };
    match (mode, host) {
        ("none", _) => {
            want(
                "status",
                got_status == ("finished", None, Some(0)),
                format!("{got_status:?}"),
            );
            want(
                "no sandbox event",
                sandbox_events.is_empty(),
                format!("{sandbox_events:?}"),
            );
        }
        (_, Host::Engine) => {
            want(
                "status",
                got_status == ("finished", None, Some(0)),
                format!("{got_status:?} {:?}", run.failure_message),
            );
            let started = first(&events, "sandbox_started")
                .cloned()
                .unwrap_or(Value::Null);
            let image = match (mode, block) {
                ("inline", Block::InlineBuild) => format!("iterion-sandbox-build:{}", run.id),
                _ => IMAGE.to_owned(),
            };
            let got = json!({"driver": started["driver"], "mode": started["mode"], "source": started["source"], "image": started["image"]});
            let exp = json!({"driver": "docker", "mode": mode, "source": label, "image": image});
            want(
                "sandbox_started",
                got == exp,
                format!("got {got}, want {exp}"),
            );
            want(
                "no skip",
                first(&events, "sandbox_skipped").is_none(),
                format!("{ks:?}"),
            );
        }
        ("auto", Host::Dead) => {
            want(
                "status",
                got_status == ("finished", None, Some(0)),
                format!("{got_status:?}"),
            );
            let skipped = first(&events, "sandbox_skipped")
                .cloned()
                .unwrap_or(Value::Null);
            let reason = skipped["reason"].as_str().unwrap_or_default().to_owned();
            want(
                "degrade reason",
                reason.starts_with("no container-runtime driver available (tried: docker: "),
                reason.clone(),
            );
            let exp = json!({"mode": "auto", "source": label, "reason": reason, "file_secrets_dropped": false});
            want(
                "sandbox_skipped (degrade)",
                skipped == exp,
                format!("got {skipped}, want {exp}"),
            );
            want(
                "one skip, no start",
                sandbox_events == ["sandbox_skipped"],
                format!("{sandbox_events:?}"),
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            want(
                "stderr",
                stderr.contains("Sandbox skipped — the run is NOT isolated: no container-runtime driver available"),
                stderr.to_string(),
            );
        }
        (_, Host::Dead) => {
            want(
                "status",
                got_status == ("failed", Some("SANDBOX_DRIVER_UNAVAILABLE"), Some(1)),
                format!("{got_status:?}"),
            );
            let skipped = first(&events, "sandbox_skipped")
                .cloned()
                .unwrap_or(Value::Null);
            let reason = skipped["reason"].clone();
            let exp = json!({"mode": "inline", "source": label, "reason": reason, "refused": true, "error_code": "SANDBOX_DRIVER_UNAVAILABLE"});
            want(
                "sandbox_skipped (refusal)",
                skipped == exp,
                format!("got {skipped}, want {exp}"),
            );
            want(
                "no node ran",
                !ks.contains(&"node_started"),
                format!("{ks:?}"),
            );
            let failed = first(&events, "run_failed").cloned().unwrap_or(Value::Null);
            want(
                "run_failed",
                failed["code"] == json!("SANDBOX_DRIVER_UNAVAILABLE")
                    && failed["phase"] == json!("sandbox setup")
                    && failed.get("resumable").is_none(),
                failed.to_string(),
            );
            let order = ks.iter().position(|k| *k == "sandbox_skipped")
                < ks.iter().position(|k| *k == "run_failed");
            want("skip before run_failed", order, format!("{ks:?}"));
            let stderr = String::from_utf8_lossy(&out.stderr);
            want(
                "stderr",
                stderr.contains("Sandbox refused [SANDBOX_DRIVER_UNAVAILABLE]: "),
                stderr.to_string(),
            );
        }
    }
    let left = env.containers();
    if !left.is_empty() {
        problems.push(format!("containers left: {left:?}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{host:?} {flag:?} {block:?} {global:?}: {}",
            problems.join("; ")
        ))
    }
}

/// Runs every case on `threads` workers; fails with every problem found.
fn run_matrix(host: Host, threads: usize) {
    let queue = Mutex::new(all_cases());
    let problems = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().unwrap().pop();
                    let Some((flag, block, global)) = next else {
                        return;
                    };
                    if let Err(problem) = check(host, flag, block, global) {
                        problems.lock().unwrap().push(problem);
                    }
                }
            });
        }
    });
    let problems = problems.into_inner().unwrap();
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn the_precedence_matrix_without_an_engine_degrades_auto_and_refuses_inline() {
    run_matrix(Host::Dead, 4);
}

#[test]
fn docker_the_precedence_matrix_with_an_engine_sandboxes_every_active_mode() {
    if !docker_or_skip("cli::matrix::docker_the_precedence_matrix") {
        return;
    }
    // Two at a time, like the container-engine test group: the engines share two cores.
    run_matrix(Host::Engine, 2);
}

#[test]
fn the_expectations_follow_the_spec_table() {
    // A few rows pinned by hand, so the table above cannot drift from SANDBOX.md §2.1.
    assert_eq!(
        expected(Flag::Auto, Block::InlineBuild, Global::None),
        (
            "inline",
            "workflow sandbox: block (overrides --sandbox=auto)".to_owned()
        )
    );
    assert_eq!(
        expected(Flag::None, Block::InlineImage, Global::Auto),
        ("none", "cli flag --sandbox".to_owned())
    );
    assert_eq!(
        expected(Flag::Absent, Block::Absent, Global::Unset),
        (
            "auto",
            format!("global sandbox default (default image: {IMAGE})")
        )
    );
}

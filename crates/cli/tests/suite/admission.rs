//! Admission (SANDBOX.md §10): trusted/untrusted × sandboxed/not. Only an untrusted run that
//! resolves to no container is refused: `LAUNCH_FAILED`, an admission record naming
//! `untrusted_without_sandbox` and the tier that spoke, no node event, no container.
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::suite::support::{DEAD_DOCKER, DEAD_PODMAN, Env, IMAGE, docker_or_skip, first, kinds};

const WF: &str =
    "tool probe:\n  command: `echo ok`\n\nworkflow a:\n  entry: probe\n  probe -> done\n";

struct Case {
    trust: &'static str,
    args: &'static [&'static str],
    dead: bool,
}

fn run_case(
    case: &Case,
) -> (
    Env,
    iterion_store::Run,
    Vec<(String, serde_json::Value)>,
    i32,
) {
    let env = Env::new();
    env.write("a.iter", WF);
    let mut cmd = env.cmd();
    cmd.args([
        "run",
        "a.iter",
        "--sandbox-default-image",
        IMAGE,
        "--trust",
        case.trust,
    ])
    .args(case.args);
    if case.dead {
        // Pinned to docker: with no engine the embedded namespace driver would admit the run
        // (issue 18; namespace.rs tests that side).
        cmd.env("DOCKER_HOST", DEAD_DOCKER)
            .env("CONTAINER_HOST", DEAD_PODMAN)
            .env("ITERION_SANDBOX_DRIVER", "docker");
    }
    let code = cmd.output().unwrap().status.code().unwrap_or(-1);
    let run = env.only_run();
    let events = env.events(&run);
    (env, run, events, code)
}

#[test]
fn docker_only_an_untrusted_run_without_a_container_is_refused() {
    if !docker_or_skip("cli::admission::docker_only_an_untrusted_run") {
        return;
    }
    let cases = [
        (
            Case {
                trust: "trusted",
                args: &[],
                dead: false,
            },
            "allowed",
            "trusted",
            "finished",
        ),
        (
            Case {
                trust: "trusted",
                args: &["--sandbox", "none"],
                dead: false,
            },
            "allowed",
            "trusted",
            "finished",
        ),
        (
            Case {
                trust: "untrusted",
                args: &[],
                dead: false,
            },
            "allowed",
            "untrusted_sandboxed",
            "finished",
        ),
        (
            Case {
                trust: "untrusted",
                args: &["--sandbox", "none"],
                dead: false,
            },
            "denied",
            "untrusted_without_sandbox",
            "failed",
        ),
        (
            Case {
                trust: "untrusted",
                args: &[],
                dead: true,
            },
            "denied",
            "untrusted_without_sandbox",
            "failed",
        ),
    ];
    for (case, decision, code, status) in cases {
        let (env, run, events, exit) = run_case(&case);
        let admission = run.admission.clone().unwrap();
        let what = format!("{} {:?} dead={}", case.trust, case.args, case.dead);
        assert_eq!(
            (
                admission.decision.as_str(),
                admission.code.as_str(),
                admission.phase.as_str(),
                run.status.as_str()
            ),
            (decision, code, "pre_model", status),
            "{what}"
        );
        assert_eq!(run.trust.as_str(), case.trust, "{what}");
        if decision == "denied" {
            assert_eq!(
                (run.failure_code.as_deref(), exit),
                (Some("LAUNCH_FAILED"), 1),
                "{what}"
            );
            assert_eq!(kinds(&events), vec!["run_started", "run_failed"], "{what}");
            assert_eq!(
                first(&events, "run_failed").unwrap(),
                &json!({"error": admission.reason, "phase": "admission", "code": "LAUNCH_FAILED"}),
                "{what}"
            );
            assert!(admission.reason.starts_with("run refused: trust=untrusted requires a per-run sandbox, but this run resolves to no container: "), "{}", admission.reason);
            if case.dead {
                assert!(
                    admission
                        .reason
                        .contains(": no container runtime (mode auto from global sandbox default"),
                    "{}",
                    admission.reason
                );
            } else {
                assert!(admission.reason.contains(": opted out (mode none from cli flag --sandbox; no ITERION_SANDBOX_OVERRIDE is set)"), "{}", admission.reason);
            }
        } else {
            assert_eq!((run.failure_code.as_deref(), exit), (None, 0), "{what}");
        }
        if case.trust == "untrusted" && decision == "allowed" {
            // An untrusted working tree never gets the operator's home.
            assert_eq!(
                first(&events, "sandbox_host_state_mounted").unwrap(),
                &json!({"enabled": false, "source": "untrusted run"})
            );
        }
        assert_eq!(env.containers(), Vec::<String>::new(), "{what}");
    }
}

#[test]
fn an_untrusted_run_under_the_none_override_names_the_override() {
    let env = Env::new();
    env.write("a.iter", WF);
    env.cmd()
        .args(["run", "a.iter", "--trust", "untrusted"])
        .env("ITERION_SANDBOX_OVERRIDE", "none")
        .assert()
        .code(1);
    let run = env.only_run();
    let admission = run.admission.unwrap();
    assert!(
        admission.reason.contains(": override none (mode none from cli flag --sandbox; the ITERION_SANDBOX_OVERRIDE=\"none\" override is set)"),
        "{}",
        admission.reason
    );
}

use super::*;
use crate::phase::Phase;
use crate::rules::{ArgRule, EnvRule, MountRule};
use pretty_assertions::assert_eq;

fn unavailable() -> Error {
    Error::DriverUnavailable {
        tried: vec![
            DriverAttempt {
                driver: "docker".to_owned(),
                reason: "unix:///var/run/docker.sock: connection refused".to_owned(),
            },
            DriverAttempt {
                driver: "podman".to_owned(),
                reason: "no socket".to_owned(),
            },
        ],
    }
}

#[test]
fn driver_unavailable_reads_as_the_spec_says_and_lists_the_obstacles() {
    let error = unavailable();
    assert_eq!(
        (
            error.code(),
            error.to_string(),
            error.obstacle(),
            error.hint()
        ),
        (
            "SANDBOX_DRIVER_UNAVAILABLE",
            "sandbox: no container-runtime driver available".to_owned(),
            "no container-runtime driver available (tried: docker: unix:///var/run/docker.sock: connection refused; podman: no socket)".to_owned(),
            Some("install and start Docker or Podman (local), or run inside a Kubernetes pod with a service account (cloud)"),
        )
    );
}

#[test]
fn select_driver_context_keeps_the_code_of_its_cause() {
    let error = Error::SelectDriver(Box::new(unavailable()));
    assert_eq!(
        (
            error.code(),
            error.is_driver_unavailable(),
            error.to_string()
        ),
        (
            "SANDBOX_DRIVER_UNAVAILABLE",
            true,
            "sandbox: select driver: sandbox: no container-runtime driver available".to_owned()
        )
    );
}

#[test]
fn each_failure_class_has_its_stable_code_and_message() {
    let cases: Vec<Error> = vec![
        Error::Unavailable {
            driver: "docker".to_owned(),
            reason: "ping timed out".to_owned(),
        },
        Error::PhaseTimeout {
            phase: Phase::ImagePull,
            elapsed: std::time::Duration::from_millis(2003),
            budget: std::time::Duration::from_secs(2),
        },
        Error::Capacity {
            why: "the pod was never scheduled (Unschedulable: 0/3 nodes)".to_owned(),
        },
        Error::MountRefused {
            mount: "source=/proc\n,target=/p".to_owned(),
            rule: MountRule::ControlCharacter,
        },
        Error::InvalidArgument {
            label: "image".to_owned(),
            value: "--privileged".to_owned(),
            rule: ArgRule::LeadingDash,
        },
        Error::InvalidEnv {
            key: "A\nB".to_owned(),
            rule: EnvRule::KeyControlCharacter,
        },
        Error::FileSecretsUnsupported,
        Error::InvalidSetting {
            variable: "ITERION_SANDBOX_DEFAULT",
            value: "inline".to_owned(),
            want: "auto or none",
        },
        Error::PostCreateFailed {
            driver: "docker".to_owned(),
            exit_code: 3,
            tail: "boom".to_owned(),
        },
    ];
    let got: Vec<(&str, String)> = cases.iter().map(|e| (e.code(), e.to_string())).collect();
    assert_eq!(
        got,
        vec![
            (
                "SANDBOX_DRIVER_UNAVAILABLE",
                "sandbox driver \"docker\" unavailable: ping timed out".to_owned()
            ),
            (
                "SANDBOX_SETUP_TIMEOUT",
                "sandbox: image pull phase timed out after 2.003s (deadline 2s exceeded)"
                    .to_owned()
            ),
            (
                "SANDBOX_CAPACITY",
                "sandbox not placed — the pod was never scheduled (Unschedulable: 0/3 nodes)"
                    .to_owned()
            ),
            (
                "SANDBOX_SETUP_FAILED",
                "sandbox: mount refused: source=/proc\\n,target=/p: contains a control character"
                    .to_owned()
            ),
            (
                "SANDBOX_SETUP_FAILED",
                "sandbox: image \"--privileged\" refused: begins with -".to_owned()
            ),
            (
                "SANDBOX_SETUP_FAILED",
                "sandbox: env \"A\\nB\" refused: key contains a newline, carriage return or NUL"
                    .to_owned()
            ),
            (
                "SANDBOX_SETUP_FAILED",
                "file secrets require a real sandbox driver; noop cannot mount secret files"
                    .to_owned()
            ),
            (
                "SANDBOX_SETUP_FAILED",
                "ITERION_SANDBOX_DEFAULT=\"inline\": want auto or none".to_owned()
            ),
            (
                "SANDBOX_SETUP_FAILED",
                "docker: postCreate failed: boom".to_owned()
            ),
        ]
    );
}

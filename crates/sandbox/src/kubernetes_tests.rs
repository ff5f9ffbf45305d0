use super::*;
use crate::mode::Mode;
use crate::spec::Build;
use pretty_assertions::assert_eq;

/// An auto spec (a fused devcontainer may name no image; inline without one is refused by
/// `Spec::validate` already, see the table).
fn spec() -> Spec {
    Spec {
        mode: Mode::Auto,
        image: Some("ghcr.io/iterion/sandbox:1".to_owned()),
        user: Some("1000:1000".to_owned()),
        ..Spec::default()
    }
}

/// `Ok`, or the rule id (the code for other errors) and the message.
type Verdict = std::result::Result<(), (&'static str, String)>;

fn verdict(spec: &Spec) -> Verdict {
    validate_spec(spec).map_err(|error| {
        let rule = match &error {
            Error::KubernetesRefused { rule } => rule.as_str(),
            other => other.code(),
        };
        (rule, error.to_string())
    })
}

#[test]
fn validate_spec_refuses_in_the_order_of_the_design() {
    let with = |edit: fn(&mut Spec)| {
        let mut spec = spec();
        edit(&mut spec);
        spec
    };
    let rows: Vec<(&str, Spec)> = vec![
        ("valid", spec()),
        (
            "build and image: Spec::validate speaks first",
            with(|s| s.build = Some(Build::default())),
        ),
        (
            "build only",
            with(|s| {
                s.image = None;
                s.build = Some(Build::default());
            }),
        ),
        ("no image", with(|s| s.image = None)),
        (
            "inline without image: Spec::validate speaks first",
            with(|s| {
                s.mode = Mode::Inline;
                s.image = None;
            }),
        ),
        ("empty image", with(|s| s.image = Some(String::new()))),
        (
            "explicit host_state auto",
            with(|s| s.host_state = HostState::Auto),
        ),
        (
            "host_state none passes",
            with(|s| s.host_state = HostState::None),
        ),
        ("no user", with(|s| s.user = None)),
        ("empty user", with(|s| s.user = Some(String::new()))),
        ("user vscode", with(|s| s.user = Some("vscode".to_owned()))),
        (
            "user 1000:staff",
            with(|s| s.user = Some("1000:staff".to_owned())),
        ),
        ("user -1", with(|s| s.user = Some("-1".to_owned()))),
        ("user 1000:", with(|s| s.user = Some("1000:".to_owned()))),
        ("user 1:2:3", with(|s| s.user = Some("1:2:3".to_owned()))),
        (
            "user past i64",
            with(|s| s.user = Some("99999999999999999999".to_owned())),
        ),
        ("user 1001", with(|s| s.user = Some("1001".to_owned()))),
        (
            "image missing, user a name: the image is reported first",
            with(|s| {
                s.image = None;
                s.user = Some("vscode".to_owned());
            }),
        ),
    ];
    let got: Vec<(&str, Verdict)> = rows
        .iter()
        .map(|(name, spec)| (*name, verdict(spec)))
        .collect();
    let refused = |rule: KubernetesRule| Err((rule.as_str(), format!("sandbox: {rule}")));
    assert_eq!(
        got,
        vec![
            ("valid", Ok(())),
            (
                "build and image: Spec::validate speaks first",
                Err((
                    "SANDBOX_SETUP_FAILED",
                    "sandbox: invalid spec: image: image and build are exclusive; set only one"
                        .to_owned()
                ))
            ),
            ("build only", refused(KubernetesRule::BuildIsLocalOnly)),
            ("no image", refused(KubernetesRule::ImageRequired)),
            (
                "inline without image: Spec::validate speaks first",
                Err((
                    "SANDBOX_SETUP_FAILED",
                    "sandbox: invalid spec: image: mode inline needs image or build".to_owned()
                ))
            ),
            ("empty image", refused(KubernetesRule::ImageRequired)),
            (
                "explicit host_state auto",
                refused(KubernetesRule::HostStateAutoNeedsBinds)
            ),
            ("host_state none passes", Ok(())),
            ("no user", refused(KubernetesRule::UserRequired)),
            ("empty user", refused(KubernetesRule::UserRequired)),
            ("user vscode", refused(KubernetesRule::UserNotNumeric)),
            ("user 1000:staff", refused(KubernetesRule::UserNotNumeric)),
            ("user -1", refused(KubernetesRule::UserNotNumeric)),
            ("user 1000:", refused(KubernetesRule::UserNotNumeric)),
            ("user 1:2:3", refused(KubernetesRule::UserNotNumeric)),
            ("user past i64", refused(KubernetesRule::UserNotNumeric)),
            ("user 1001", Ok(())),
            (
                "image missing, user a name: the image is reported first",
                refused(KubernetesRule::ImageRequired)
            ),
        ]
    );
}

#[test]
fn refusals_carry_the_design_messages_and_the_setup_failed_code() {
    let mut build = spec();
    build.image = None;
    build.build = Some(Build::default());
    let mut auto = spec();
    auto.host_state = HostState::Auto;
    let mut vscode = spec();
    vscode.user = Some("vscode".to_owned());
    let got: Vec<(String, &str)> = [build, auto, vscode]
        .iter()
        .map(|spec| {
            let error = validate_spec(spec).unwrap_err();
            (error.to_string(), error.code())
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "sandbox: kubernetes: build: is local-only; pin a pre-built image".to_owned(),
                "SANDBOX_SETUP_FAILED"
            ),
            (
                "sandbox: kubernetes: host_state: auto needs host binds; use none".to_owned(),
                "SANDBOX_SETUP_FAILED"
            ),
            (
                "sandbox: kubernetes: user must be numeric (runAsNonRoot)".to_owned(),
                "SANDBOX_SETUP_FAILED"
            ),
        ]
    );
}

#[test]
fn the_engine_path_defaults_a_missing_user_and_then_validates() {
    let mut missing = spec();
    missing.user = None;
    // The doctor path: no default, refused.
    assert_eq!(
        verdict(&missing).map_err(|(rule, _)| rule),
        Err("user-required")
    );
    // The engine path: defaulted to 1000:1000, then valid.
    assert!(apply_engine_user_default(&mut missing));
    assert_eq!(
        (missing.user.as_deref(), verdict(&missing)),
        (Some("1000:1000"), Ok(()))
    );
    // A named user is kept as written (and still validated).
    let mut named = spec();
    named.user = Some("vscode".to_owned());
    assert!(!apply_engine_user_default(&mut named));
    assert_eq!(named.user.as_deref(), Some("vscode"));
    let mut empty = spec();
    empty.user = Some(String::new());
    assert!(apply_engine_user_default(&mut empty));
    assert_eq!(empty.user.as_deref(), Some(DEFAULT_USER));
}

#[test]
fn numeric_users_parse_into_uid_and_optional_gid() {
    let got: Vec<(&str, Option<NumericUser>)> = ["1000", "1000:2000", "0:0", "10a", ":1", " 1"]
        .iter()
        .map(|user| (*user, parse_numeric_user(user)))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "1000",
                Some(NumericUser {
                    uid: 1000,
                    gid: None
                })
            ),
            (
                "1000:2000",
                Some(NumericUser {
                    uid: 1000,
                    gid: Some(2000)
                })
            ),
            (
                "0:0",
                Some(NumericUser {
                    uid: 0,
                    gid: Some(0)
                })
            ),
            ("10a", None),
            (":1", None),
            (" 1", None),
        ]
    );
    assert_eq!(
        [
            NumericUser { uid: 5, gid: None }.gid_or_default(),
            NumericUser {
                uid: 5,
                gid: Some(7)
            }
            .gid_or_default()
        ],
        [1000, 7]
    );
}

use super::*;
use pretty_assertions::assert_eq;

#[test]
fn only_auto_and_inline_are_active() {
    let got: Vec<(&str, bool)> = Mode::ALL
        .iter()
        .map(|mode| (mode.as_str(), mode.is_active()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("", false),
            ("none", false),
            ("auto", true),
            ("inline", true)
        ]
    );
}

#[test]
fn every_mode_round_trips_through_its_spelling() {
    let got: Vec<Mode> = Mode::ALL
        .iter()
        .map(|mode| Mode::parse(mode.as_str()).unwrap())
        .collect();
    assert_eq!(got, Mode::ALL.to_vec());
    assert_eq!(
        ["", "none", "auto", "inline", "Auto", " auto", "docker"].map(Mode::is_valid),
        [true, true, true, true, false, false, false]
    );
}

#[test]
fn an_unknown_mode_names_the_accepted_words() {
    let error = Mode::parse("allowlist").unwrap_err();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            "sandbox: invalid spec: mode: \"allowlist\": want \"\", none, auto, or inline"
                .to_owned()
        )
    );
}

#[test]
fn inherit_refuses_merge_and_says_to_omit_it() {
    let error = Inherit::parse("merge").unwrap_err();
    assert_eq!(
        error.to_string(),
        "sandbox: invalid spec: network.inherit: \"merge\": want replace or append; omit it to merge"
    );
    assert_eq!(
        (
            Inherit::parse("replace").ok(),
            Inherit::parse("append").ok()
        ),
        (Some(Inherit::Replace), Some(Inherit::Append))
    );
}

#[test]
fn enums_serialise_as_their_wire_spelling() {
    let json = serde_json::json!({
        "mode": Mode::Inline,
        "host_state": HostState::None,
        "network": NetworkMode::Denylist,
        "inherit": Inherit::Append,
        "flag": SandboxFlag::Auto,
        "trust": Trust::Untrusted,
    });
    assert_eq!(
        json.to_string(),
        r#"{"flag":"auto","host_state":"none","inherit":"append","mode":"inline","network":"denylist","trust":"untrusted"}"#
    );
    let back: Mode = serde_json::from_str("\"auto\"").unwrap();
    assert_eq!(back, Mode::Auto);
    let refused = serde_json::from_str::<Mode>("\"sometimes\"").unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("want \"\", none, auto, or inline"),
        "{refused}"
    );
}

#[test]
fn sandbox_flags_are_trimmed_and_case_insensitive_but_two_words_only() {
    assert_eq!(
        [" AUTO ", "none", "inline", ""].map(SandboxFlag::parse),
        [Some(SandboxFlag::Auto), Some(SandboxFlag::None), None, None]
    );
}

#[test]
fn any_stored_trust_but_trusted_fails_closed() {
    assert_eq!(
        ["trusted", "untrusted", "Trusted", ""].map(Trust::from_stored),
        [
            Trust::Trusted,
            Trust::Untrusted,
            Trust::Untrusted,
            Trust::Untrusted
        ]
    );
}

#[test]
fn host_state_parses_auto_none_and_empty() {
    assert_eq!(
        ["", "auto", "none"].map(|w| w.parse::<HostState>().ok()),
        [
            Some(HostState::Unset),
            Some(HostState::Auto),
            Some(HostState::None)
        ]
    );
    assert_eq!(
        crate::Error::from("yes".parse::<HostState>().unwrap_err()).to_string(),
        "sandbox: invalid spec: host_state: \"yes\": want auto or none"
    );
}

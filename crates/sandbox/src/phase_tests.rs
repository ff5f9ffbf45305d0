use super::*;
use pretty_assertions::assert_eq;

#[test]
fn go_durations_parse_as_the_knobs_are_written() {
    let rows = [
        ("90s", Ok(Duration::from_secs(90))),
        ("1m30s", Ok(Duration::from_secs(90))),
        ("250ms", Ok(Duration::from_millis(250))),
        (" 2s ", Ok(Duration::from_secs(2))),
        ("1.5h", Ok(Duration::from_secs(5400))),
        ("2µs", Ok(Duration::from_micros(2))),
        ("3us", Ok(Duration::from_micros(3))),
        ("7ns", Ok(Duration::from_nanos(7))),
        ("1h2m3.5s", Ok(Duration::from_millis(3_723_500))),
        (".5s", Ok(Duration::from_millis(500))),
        ("0", Ok(Duration::ZERO)),
        ("5", Err(DurationError::MissingUnit)),
        ("-1s", Err(DurationError::Negative)),
        ("abc", Err(DurationError::Malformed)),
        ("1x", Err(DurationError::Malformed)),
        ("s", Err(DurationError::Malformed)),
        ("", Err(DurationError::Empty)),
        ("-", Err(DurationError::Malformed)),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(text, _)| (*text, parse_go_duration(text)))
        .collect();
    assert_eq!(got, rows.to_vec());
}

#[test]
fn durations_print_as_go_prints_them() {
    let rows = [
        (Duration::ZERO, "0s"),
        (Duration::from_nanos(7), "7ns"),
        (Duration::from_micros(1500), "1.5ms"),
        (Duration::from_millis(250), "250ms"),
        (Duration::from_millis(2003), "2.003s"),
        (Duration::from_secs(90), "1m30s"),
        (Duration::from_secs(600), "10m0s"),
        (Duration::from_secs(3723), "1h2m3s"),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(d, _)| (*d, format_duration(*d)))
        .collect();
    let want: Vec<_> = rows.iter().map(|(d, s)| (*d, (*s).to_owned())).collect();
    assert_eq!(got, want);
}

#[test]
fn every_phase_has_its_label_knob_and_default() {
    let got: Vec<(&str, Option<&str>, String)> = Phase::ALL
        .iter()
        .map(|p| (p.label(), p.env_var(), format_duration(p.default_budget())))
        .collect();
    let row = |l, e, d: &str| (l, e, d.to_owned());
    assert_eq!(
        got,
        vec![
            row("image pull", Some("ITERION_SANDBOX_PULL_TIMEOUT"), "10m0s"),
            row(
                "image build",
                Some("ITERION_SANDBOX_BUILD_TIMEOUT"),
                "30m0s"
            ),
            row("egress bridge", None, "10s"),
            row(
                "post_create",
                Some("ITERION_SANDBOX_POST_CREATE_TIMEOUT"),
                "30m0s"
            ),
            row(
                "kubernetes apply",
                Some("ITERION_SANDBOX_K8S_APPLY_TIMEOUT"),
                "2m0s"
            ),
            row(
                "pod ready",
                Some("ITERION_SANDBOX_K8S_POD_READY_TIMEOUT"),
                "10m0s"
            ),
            row(
                "workspace copy",
                Some("ITERION_SANDBOX_WORKSPACE_COPY_TIMEOUT"),
                "15m0s"
            ),
        ]
    );
}

#[test]
fn a_knob_that_does_not_parse_or_is_not_positive_falls_back_with_one_warning() {
    let resolve = |value| resolve_phase_timeout(Phase::ImagePull, value);
    let ten_minutes = Duration::from_secs(600);
    assert_eq!(
        [
            resolve(None),
            resolve(Some("")),
            resolve(Some("1m30s")),
            resolve(Some("5")),
            resolve(Some("-1s")),
            resolve(Some("abc")),
            resolve(Some("0s")),
        ],
        [
            PhaseBudget { budget: ten_minutes, warning: None },
            PhaseBudget { budget: ten_minutes, warning: None },
            PhaseBudget { budget: Duration::from_secs(90), warning: None },
            PhaseBudget {
                budget: ten_minutes,
                warning: Some("ITERION_SANDBOX_PULL_TIMEOUT=\"5\" ignored (missing unit in duration); using the default 10m0s for phase image pull".to_owned()),
            },
            PhaseBudget {
                budget: ten_minutes,
                warning: Some("ITERION_SANDBOX_PULL_TIMEOUT=\"-1s\" ignored (negative duration); using the default 10m0s for phase image pull".to_owned()),
            },
            PhaseBudget {
                budget: ten_minutes,
                warning: Some("ITERION_SANDBOX_PULL_TIMEOUT=\"abc\" ignored (malformed duration); using the default 10m0s for phase image pull".to_owned()),
            },
            PhaseBudget {
                budget: ten_minutes,
                warning: Some("ITERION_SANDBOX_PULL_TIMEOUT=\"0s\" ignored (must be greater than zero); using the default 10m0s for phase image pull".to_owned()),
            },
        ]
    );
}

#[test]
fn pod_ready_is_at_least_one_second() {
    assert_eq!(
        resolve_phase_timeout(Phase::PodReady, Some("10ms")).budget,
        Duration::from_secs(1)
    );
}

#[test]
fn the_warning_is_given_once_per_process_and_phase() {
    assert_eq!(
        (
            first_warning_for(Phase::WorkspaceCopy),
            first_warning_for(Phase::WorkspaceCopy)
        ),
        (true, false)
    );
}

proptest::proptest! {
    #[test]
    fn printing_then_parsing_a_duration_gives_it_back(nanos in 0u64..400_000_000_000_000) {
        let duration = Duration::from_nanos(nanos);
        proptest::prop_assert_eq!(parse_go_duration(&format_duration(duration)), Ok(duration));
    }

    #[test]
    fn random_text_never_panics_the_duration_parser(text in ".{0,24}") {
        let _ = parse_go_duration(&text);
    }
}

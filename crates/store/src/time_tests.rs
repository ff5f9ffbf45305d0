use std::time::Duration;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

#[test]
fn known_instants_render_as_rfc3339_utc_with_millis() {
    let cases = [
        (0, "1970-01-01T00:00:00.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (1_793_525_400_123, "2026-11-01T09:30:00.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
    ];
    let got: Vec<_> = cases
        .iter()
        .map(|(ms, _)| (*ms, Timestamp::from_millis(*ms).to_rfc3339()))
        .collect();
    let want: Vec<_> = cases.iter().map(|(ms, s)| (*ms, (*s).to_owned())).collect();
    assert_eq!(got, want);
}

#[test]
fn parsing_accepts_offsets_and_any_fraction_length() {
    let cases = [
        ("2026-11-01T09:30:00Z", Some(1_793_525_400_000)),
        ("2026-11-01T09:30:00.1Z", Some(1_793_525_400_100)),
        ("2026-11-01T09:30:00.123456789Z", Some(1_793_525_400_123)),
        ("2026-11-01T11:30:00.123+02:00", Some(1_793_525_400_123)),
        ("2026-11-01T08:00:00-01:30", Some(1_793_525_400_000)),
        ("2026-11-01 09:30:00z", Some(1_793_525_400_000)),
        ("2026-02-29T00:00:00Z", None),
        ("2026-13-01T00:00:00Z", None),
        ("2026-11-01T24:00:00Z", None),
        ("2026-11-01T09:30:00", None),
        ("2026-11-01T09:30:00.Z", None),
        ("2026-11-01T09:30:00+0200", None),
        ("2026-11-01T09:30:00Zjunk", None),
        ("not a date at all, really", None),
        ("", None),
    ];
    let got: Vec<_> = cases
        .iter()
        .map(|(s, _)| (*s, Timestamp::parse_rfc3339(s).map(Timestamp::as_millis)))
        .collect();
    assert_eq!(got, cases.to_vec());
}

#[test]
fn serde_uses_the_rfc3339_form() {
    let ts = Timestamp::from_millis(1_793_525_400_123);
    let json = serde_json::to_string(&ts).unwrap();
    assert_eq!(json, "\"2026-11-01T09:30:00.123Z\"");
    assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), ts);
    let err = serde_json::from_str::<Timestamp>("\"yesterday\"").unwrap_err();
    assert_eq!(err.to_string(), "not an RFC 3339 date-time: \"yesterday\"");
}

#[test]
fn manual_clock_moves_only_when_told_and_clones_share_it() {
    let clock = ManualClock::new(Timestamp::from_millis(1_000));
    let other = clock.clone();
    clock.advance(Duration::from_millis(500));
    assert_eq!(other.now(), Timestamp::from_millis(1_500));
    other.set(Timestamp::from_millis(10));
    assert_eq!(clock.now(), Timestamp::from_millis(10));
}

#[test]
fn saturating_add_stops_at_the_end_of_time() {
    let late = Timestamp::from_millis(i64::MAX - 1);
    assert_eq!(
        late.saturating_add(Duration::from_secs(1)),
        Timestamp::from_millis(i64::MAX)
    );
    assert_eq!(
        Timestamp::from_millis(1).saturating_add(Duration::from_millis(2)),
        Timestamp::from_millis(3)
    );
}

proptest! {
    #[test]
    fn format_then_parse_round_trips(ms in -62_135_596_800_000_i64..253_402_300_800_000) {
        let ts = Timestamp::from_millis(ms);
        prop_assert_eq!(Timestamp::parse_rfc3339(&ts.to_rfc3339()), Some(ts));
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(text in ".{0,40}") {
        let _ = Timestamp::parse_rfc3339(&text);
    }
}

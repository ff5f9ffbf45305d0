//! Time as the store sees it: UTC instants in whole milliseconds, and the clock that makes them.
//!
//! Timestamps are stored as integer unix milliseconds (cheap to compare, index and order in SQL)
//! and serialised as RFC 3339 UTC (`2026-11-01T09:30:00.123Z`), the form the CLI's `--json`
//! output and the admission record's `checked_at` use (SANDBOX.md §10). The conversion is a few
//! lines of civil-calendar arithmetic, so the crate needs no date library.
//!
//! The clock is a seam: the store asks a [`Clock`] for "now" (timestamps, lease expiry), so a
//! test can move time forward with [`ManualClock`] instead of sleeping until a lease expires.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant, in whole milliseconds since the unix epoch.
///
/// `Display` and serde use RFC 3339 with millisecond precision and a `Z` suffix. Parsing accepts
/// any RFC 3339 offset (`Z`, `+02:00`) and fractional seconds of any length (truncated to
/// milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `millis` milliseconds after the unix epoch (negative: before it).
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// The current wall-clock time. A clock set before 1970 reads as the epoch.
    pub fn now() -> Self {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Self(millis)
    }

    /// This instant plus `duration`, saturating at the end of time.
    pub fn saturating_add(self, duration: Duration) -> Self {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(millis))
    }

    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-01T09:30:00.123Z`.
    pub fn to_rfc3339(self) -> String {
        let days = self.0.div_euclid(MILLIS_PER_DAY);
        let in_day = self.0.rem_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let secs = in_day / 1000;
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            in_day % 1000
        )
    }

    /// Parses an RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`). `None` when the
    /// text is not one.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let year = digits(b, 0, 4)?;
        let month = digits(b, 5, 2)?;
        let day = digits(b, 8, 2)?;
        let (hour, minute, second) = (digits(b, 11, 2)?, digits(b, 14, 2)?, digits(b, 17, 2)?);
        if !(1..=12).contains(&month)
            || day == 0
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return None;
        }
        let mut pos = 19;
        let mut millis = 0;
        if b[pos] == b'.' {
            pos += 1;
            let start = pos;
            while pos < b.len() && b[pos].is_ascii_digit() {
                if pos - start < 3 {
                    millis = millis * 10 + i64::from(b[pos] - b'0');
                }
                pos += 1;
            }
            let len = pos - start;
            if len == 0 {
                return None;
            }
            for _ in len..3 {
                millis *= 10;
            }
        }
        let offset_secs = match b.get(pos..)? {
            [b'Z' | b'z'] => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let hours = digits(&[*h1, *h2], 0, 2)?;
                let minutes = digits(&[*m1, *m2], 0, 2)?;
                if hours > 23 || minutes > 59 {
                    return None;
                }
                let magnitude = hours * 3600 + minutes * 60;
                if *sign == b'-' { -magnitude } else { magnitude }
            }
            _ => return None,
        };
        // A leap second (`:60`) is read as the first millisecond of the next minute.
        let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
            - offset_secs;
        Some(Self(secs * 1000 + millis))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse_rfc3339(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 date-time: {text:?}")))
    }
}

const MILLIS_PER_DAY: i64 = 86_400_000;

/// `len` ASCII digits at `start`, as a number.
fn digits(b: &[u8], start: usize, len: usize) -> Option<i64> {
    b.get(start..start + len)?.iter().try_fold(0_i64, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Where the store gets "now": event and log timestamps, `created_at`/`updated_at`, lease expiry.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The wall clock ([`Timestamp::now`]); the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to, for tests of lease expiry and ordering. Clones share
/// the same time.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start.as_millis())))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let millis = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(millis, Ordering::SeqCst);
    }

    /// Sets the clock to `to` (which may be earlier: wall clocks do go back).
    pub fn set(&self, to: Timestamp) {
        self.0.store(to.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
#[path = "time_tests.rs"]
mod tests;

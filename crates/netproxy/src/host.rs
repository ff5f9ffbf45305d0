//! Host canonicalisation (SANDBOX.md §6.5 "Canonical host", issue 15 items 6 and 9): the one
//! place a written host becomes the host the proxy decides on, materialises secrets for, and
//! contacts.
//!
//! [`canonical_host`] is the total normaliser (rules, secret `hosts`, static-hosts names);
//! [`parse_authority`] is the strict form every request target and `Host` header goes through,
//! refusing what cannot be canonicalised instead of guessing.

use std::net::{IpAddr, Ipv4Addr};

use crate::addr::canonical_ip;

/// Why a written host or authority is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing is left after canonicalisation.
    #[error("no host")]
    Empty,
    /// `user@host`: userinfo is never accepted in a request target or `Host`.
    #[error("userinfo in a host is refused")]
    Userinfo,
    /// The port is not a number in 1..=65535.
    #[error("bad port")]
    BadPort,
    /// The host is neither an IP address nor a DNS name of letters, digits, `-` and `_`
    /// (after IDNA folding), or its last label is numeric without it being an IPv4 address.
    #[error("bad host")]
    Invalid,
}

/// The canonical form of a host as written in a CONNECT authority, an absolute URI, a `Host`
/// header, a rule or a secret's `hosts`.
///
/// Trim and lower-case; strip `[…]` brackets, or a trailing `:port` when the rest contains no
/// `:`; strip trailing `.`s; fold IDNA to ASCII with UTS-46 strict rules (keeping the pre-fold
/// value when folding fails); then write an address the one way: every IPv4 number form the
/// URL standard and `inet_aton` accept (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) as a
/// dotted quad, an IPv6 address in RFC 5952 form, and an IPv4-mapped IPv6 address as its IPv4.
/// The function is total and idempotent; [`parse_authority`] is the strict form.
///
/// ```
/// use iterion_netproxy::canonical_host;
/// assert_eq!(canonical_host(" API.Example.COM.:443 "), "api.example.com");
/// assert_eq!(canonical_host("[::1]:8080"), "::1");
/// assert_eq!(canonical_host("bücher.de"), "xn--bcher-kva.de");
/// assert_eq!(canonical_host("0x7f.1"), "127.0.0.1");
/// assert_eq!(canonical_host("[::ffff:a9fe:a9fe]"), "169.254.169.254");
/// ```
pub fn canonical_host(raw: &str) -> String {
    // One pass is the spec's; repeating it to a fixed point makes malformed leftovers ("a. .",
    // "a..") converge, so canonicalisation is idempotent. Every pass that changes the value
    // shortens it (or folds it to stable ASCII), so this terminates quickly.
    let mut h = canonical_pass(raw);
    for _ in 0..=raw.len() {
        let next = canonical_pass(&h);
        if next == h {
            break;
        }
        h = next;
    }
    h
}

fn canonical_pass(raw: &str) -> String {
    let mut h = raw.trim().to_lowercase();
    if let Some(rest) = h.strip_prefix('[') {
        // `[v6]` or `[v6]:port`.
        if let Some(end) = rest.find(']') {
            h = rest[..end].to_string();
        }
    } else if let Some(colon) = h.rfind(':') {
        let (name, _port) = h.split_at(colon);
        if !name.contains(':') {
            h = name.to_string();
        }
    }
    while let Some(stripped) = h.strip_suffix('.') {
        h = stripped.to_string();
    }
    if let Some(ip) = as_address(&h) {
        return canonical_ip(ip).to_string();
    }
    if h.is_empty() || h.is_ascii() && !h.contains("xn--") {
        // Plain ASCII without punycode is already folded; skipping the fold keeps odd ASCII
        // (underscores) that strict UTS-46 would reject.
        return h;
    }
    match fold_idna(&h) {
        // A fold can produce a numeric form ("１２７.0.0.1" → "127.0.0.1").
        Some(f) => as_address(&f).map_or(f, |ip| canonical_ip(ip).to_string()),
        None => h,
    }
}

/// An IPv6 literal, or an IPv4 address in any number form.
fn as_address(h: &str) -> Option<IpAddr> {
    if let Ok(ip) = h.parse::<IpAddr>() {
        return Some(ip);
    }
    match ipv4_number_form(h) {
        Some(Ok(v4)) => Some(IpAddr::V4(v4)),
        _ => None,
    }
}

/// The URL standard's "ends in a number" test and IPv4 parser (which `inet_aton` agrees with):
/// `None` when the last label is not numeric (a DNS name), `Some(Err)` when it is but the whole
/// is not an IPv4 address (`1.2.3.4.5`, `08.1`, `foo.0x1`), which no resolver may be handed.
fn ipv4_number_form(h: &str) -> Option<Result<Ipv4Addr, HostError>> {
    let parts: Vec<&str> = h.split('.').collect();
    let last = parts.last()?;
    let numeric_last = !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || last
                .strip_prefix("0x")
                .is_some_and(|x| x.bytes().all(|b| b.is_ascii_hexdigit())));
    if !numeric_last {
        return None;
    }
    Some(parse_ipv4_parts(&parts))
}

fn parse_ipv4_parts(parts: &[&str]) -> Result<Ipv4Addr, HostError> {
    if parts.len() > 4 {
        return Err(HostError::Invalid);
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in parts {
        let (digits, radix) = if let Some(x) = p.strip_prefix("0x") {
            (x, 16)
        } else if p.len() > 1 && p.starts_with('0') {
            (&p[1..], 8)
        } else {
            (*p, 10)
        };
        if p.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return Err(HostError::Invalid);
        }
        // "0x" alone is zero; long runs of leading zeros are still small numbers.
        let trimmed = digits.trim_start_matches('0');
        let n = if trimmed.is_empty() {
            0
        } else {
            u64::from_str_radix(trimmed, radix).map_err(|_| HostError::Invalid)?
        };
        nums.push(n);
    }
    let (last, init) = nums.split_last().ok_or(HostError::Invalid)?;
    if init.iter().any(|n| *n > 255) {
        return Err(HostError::Invalid);
    }
    let room = 8 * (5 - nums.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return Err(HostError::Invalid);
    }
    let mut value = *last;
    for (i, n) in init.iter().enumerate() {
        value += n << (8 * (3 - i as u32));
    }
    u32::try_from(value)
        .map(Ipv4Addr::from)
        .map_err(|_| HostError::Invalid)
}

fn fold_idna(h: &str) -> Option<String> {
    use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};
    let folded = Uts46::new()
        .to_ascii(
            h.as_bytes(),
            AsciiDenyList::STD3,
            Hyphens::Check,
            DnsLength::Verify,
        )
        .ok()?;
    let folded = folded.into_owned();
    // A fold must be a fixed point, or normalisation would not be idempotent.
    if folded.ends_with('.') || folded.is_empty() {
        return None;
    }
    Some(folded)
}

/// The host as an IP address, when it is an IP literal (after canonicalisation).
pub(crate) fn as_ip(canonical: &str) -> Option<IpAddr> {
    canonical.parse().ok()
}

/// The strict canonical host: [`canonical_host`], then refused unless it is an IP address or a
/// DNS name (labels of 1–63 of `a-z 0-9 - _`, 253 bytes at most, punycode that decodes). A
/// numeric last label that is not an IPv4 address, a zone id, whitespace, `%`, `@` or any
/// other byte are refused, so the resolver is only ever handed a plain name.
pub fn parse_host(raw: &str) -> Result<String, HostError> {
    let raw = raw.trim();
    if raw.contains('@') {
        return Err(HostError::Userinfo);
    }
    // What the total form would keep as is but is not a host.
    let inner = raw
        .strip_prefix('[')
        .map(|r| r.strip_suffix(']').ok_or(HostError::Invalid))
        .transpose()?;
    if let Some(inner) = inner
        && inner.parse::<std::net::Ipv6Addr>().is_err()
    {
        return Err(HostError::Invalid);
    }
    let h = canonical_host(raw);
    if h.is_empty() {
        return Err(HostError::Empty);
    }
    if as_ip(&h).is_some() {
        return Ok(h);
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    };
    if h.len() > 253 || !h.split('.').all(label_ok) {
        return Err(HostError::Invalid);
    }
    if h.contains("xn--") && fold_idna(&h).is_none_or(|f| f != h) {
        return Err(HostError::Invalid);
    }
    if let Some(Err(e)) = ipv4_number_form(&h) {
        return Err(e);
    }
    Ok(h)
}

/// A written authority (`host`, `host:port`, `[v6]:port`) as the canonical `(host, port)` it
/// names, `default_port` when none is written. The one parser for CONNECT targets, absolute
/// URIs and `Host` headers. Userinfo, an empty or non-numeric port, port 0 and anything
/// [`parse_host`] refuses are errors.
///
/// ```
/// use iterion_netproxy::{parse_authority, HostError};
/// assert_eq!(parse_authority("Good.Test.:8080", 80), Ok(("good.test".into(), 8080)));
/// assert_eq!(parse_authority("[::ffff:127.0.0.1]", 443), Ok(("127.0.0.1".into(), 443)));
/// assert_eq!(parse_authority("good.test@evil.test", 80), Err(HostError::Userinfo));
/// ```
pub fn parse_authority(raw: &str, default_port: u16) -> Result<(String, u16), HostError> {
    let raw = raw.trim();
    if raw.contains('@') {
        return Err(HostError::Userinfo);
    }
    let (host, port) = if raw.starts_with('[') {
        match raw.find(']') {
            Some(end) => {
                let tail = &raw[end + 1..];
                match tail.strip_prefix(':') {
                    Some(p) => (&raw[..=end], Some(p)),
                    None if tail.is_empty() => (raw, None),
                    None => return Err(HostError::Invalid),
                }
            }
            None => return Err(HostError::Invalid),
        }
    } else {
        match raw.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (raw, None),
        }
    };
    let port = match port {
        None => default_port,
        Some(p) => parse_port(p).ok_or(HostError::BadPort)?,
    };
    Ok((parse_host(host)?, port))
}

/// A port as written: ASCII digits only, 1..=65535.
pub(crate) fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

/// The `Host` value for a canonical target: brackets around IPv6, the port only when it is not
/// the scheme's default.
pub(crate) fn authority_for(host: &str, port: u16, default_port: u16) -> String {
    let host = match as_ip(host) {
        Some(IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => host.to_string(),
    };
    if port == default_port {
        host
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn canonical_host_handles_every_written_form() {
        let cases = [
            ("example.com", "example.com"),
            ("  Example.COM  ", "example.com"),
            ("example.com.", "example.com"),
            ("example.com.:443", "example.com"),
            ("example.com:80", "example.com"),
            ("[::1]", "::1"),
            ("[::1]:443", "::1"),
            ("::1", "::1"),
            ("[0:0:0:0:0:0:0:1]", "::1"),
            ("10.0.0.1:8080", "10.0.0.1"),
            ("BÜCHER.de", "xn--bcher-kva.de"),
            ("xn--bcher-kva.de", "xn--bcher-kva.de"),
            ("", ""),
            (":443", ""),
            ("a..", "a"),
            ("a. .", "a"),
            ("127.0.0.1.", "127.0.0.1"),
        ];
        for (raw, want) in cases {
            assert_eq!(canonical_host(raw), want, "input {raw:?}");
            assert_eq!(canonical_host(want), want, "not a fixed point: {want:?}");
        }
    }

    #[test]
    fn every_ipv4_number_form_is_a_dotted_quad() {
        let cases = [
            ("2130706433", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("0X7F000001", "127.0.0.1"),
            ("017700000001", "127.0.0.1"),
            ("0x7f.1", "127.0.0.1"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("0177.0.0.01", "127.0.0.1"),
            ("00000177.0.0.1", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("127.0.1", "127.0.0.1"),
            ("127.000.000.001", "127.0.0.1"),
            ("0", "0.0.0.0"),
            ("0x", "0.0.0.0"),
            ("169.254.43518", "169.254.169.254"),
            ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
            ("2852039166", "169.254.169.254"),
            ("0xa9fea9fe", "169.254.169.254"),
            ("10.1", "10.0.0.1"),
            ("167772161", "10.0.0.1"),
            ("4294967295", "255.255.255.255"),
            ("127.1.", "127.0.0.1"),
            ("127.1:8080", "127.0.0.1"),
            ("[::ffff:127.0.0.1]", "127.0.0.1"),
            ("::ffff:7f00:1", "127.0.0.1"),
            ("１２７.0.0.1", "127.0.0.1"),
        ];
        for (raw, want) in cases {
            assert_eq!(canonical_host(raw), want, "input {raw:?}");
            assert_eq!(parse_host(raw).as_deref(), Ok(want), "strict {raw:?}");
        }
    }

    #[test]
    fn the_strict_form_refuses_what_no_resolver_may_see() {
        let refused = [
            ("", HostError::Empty),
            ("good.test@evil.test", HostError::Userinfo),
            ("1.2.3.4.5", HostError::Invalid),
            ("4294967296", HostError::Invalid),
            ("08.0.0.1", HostError::Invalid),
            ("256.0.0.1", HostError::Invalid),
            ("1.256.0.1.", HostError::Invalid),
            ("foo.0x10", HostError::Invalid),
            ("foo.123", HostError::Invalid),
            ("[fe80::1%eth0]", HostError::Invalid),
            ("[127.0.0.1]", HostError::Invalid),
            ("[::1", HostError::Invalid),
            ("%31%32%37.0.0.1", HostError::Invalid),
            ("evil test", HostError::Invalid),
            ("evil\ttest", HostError::Invalid),
            ("a..b", HostError::Invalid),
            ("xn--zz.test", HostError::Invalid),
        ];
        for (raw, want) in refused {
            assert_eq!(parse_host(raw), Err(want), "{raw:?}");
        }
        for ok in [
            "under_score.test",
            "a-b.c",
            "localhost",
            "x1.123abc",
            "0x1g",
        ] {
            assert_eq!(parse_host(ok).as_deref(), Ok(ok), "{ok}");
        }
    }

    #[test]
    fn authorities_split_into_canonical_host_and_port() {
        type Case<'a> = (&'a str, Result<(&'a str, u16), HostError>);
        let cases: &[Case<'_>] = &[
            ("good.test", Ok(("good.test", 80))),
            ("Good.Test.:8080", Ok(("good.test", 8080))),
            ("good.test:0080", Ok(("good.test", 80))),
            ("[::1]:443", Ok(("::1", 443))),
            ("[::1]", Ok(("::1", 80))),
            ("::1", Ok(("::1", 80))),
            ("0x7f.1:22", Ok(("127.0.0.1", 22))),
            ("good.test:", Err(HostError::BadPort)),
            ("good.test:0", Err(HostError::BadPort)),
            ("good.test:+80", Err(HostError::BadPort)),
            ("good.test:65536", Err(HostError::BadPort)),
            ("good.test:80:80", Err(HostError::Invalid)),
            ("[::1]x", Err(HostError::Invalid)),
            ("u:p@good.test", Err(HostError::Userinfo)),
            (":80", Err(HostError::Empty)),
        ];
        for (raw, want) in cases {
            let want = want.map(|(h, p)| (h.to_string(), p));
            assert_eq!(parse_authority(raw, 80), want, "{raw:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn canonicalisation_is_a_fixed_point_for_any_text(s in "\\PC{0,40}") {
            let once = canonical_host(&s);
            proptest::prop_assert_eq!(canonical_host(&once), once.clone());
            if let Ok(strict) = parse_host(&s) {
                proptest::prop_assert_eq!(strict, once);
            }
        }

        #[test]
        fn number_forms_are_fixed_points(s in "(0x[0-9a-f]{0,9}|0[0-7]{0,12}|[0-9]{1,11})(\\.(0x[0-9a-f]{0,3}|[0-9]{1,4})){0,4}\\.?") {
            let once = canonical_host(&s);
            proptest::prop_assert_eq!(canonical_host(&once), once.clone());
            if let Ok(h) = parse_host(&s) {
                proptest::prop_assert!(h.parse::<IpAddr>().is_ok(), "{} -> {}", s, h);
            }
        }
    }
}

//! Host canonicalisation (SANDBOX.md §6.5 "Canonical host").

use std::net::IpAddr;

/// The canonical form of a host as written in a CONNECT authority, an absolute URI or a `Host`
/// header.
///
/// Trim and lower-case; strip `[…]` brackets, or a trailing `:port` when the rest contains no
/// `:`; strip one trailing `.`; fold IDNA to ASCII with UTS-46 strict rules, keeping the
/// pre-fold value when folding fails. The function is idempotent.
///
/// ```
/// use iterion_netproxy::canonical_host;
/// assert_eq!(canonical_host(" API.Example.COM.:443 "), "api.example.com");
/// assert_eq!(canonical_host("[::1]:8080"), "::1");
/// assert_eq!(canonical_host("bücher.de"), "xn--bcher-kva.de");
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
    if let Some(stripped) = h.strip_suffix('.') {
        h = stripped.to_string();
    }
    if h.is_empty() || h.parse::<IpAddr>().is_ok() || h.is_ascii() && !h.contains("xn--") {
        // Plain ASCII without punycode is already folded; skipping the fold keeps odd ASCII
        // (underscores) that strict UTS-46 would reject.
        return h;
    }
    fold_idna(&h).unwrap_or(h)
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
            ("10.0.0.1:8080", "10.0.0.1"),
            ("BÜCHER.de", "xn--bcher-kva.de"),
            ("xn--bcher-kva.de", "xn--bcher-kva.de"),
            ("", ""),
            (":443", ""),
            ("a..", "a"),
            ("a. .", "a"),
        ];
        for (raw, want) in cases {
            assert_eq!(canonical_host(raw), want, "input {raw:?}");
            assert_eq!(canonical_host(want), want, "not a fixed point: {want:?}");
        }
    }
}

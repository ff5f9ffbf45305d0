//! Pure syntax checks for network rules (DSL.md §7.3, SANDBOX.md §6.5) and secret `hosts` entries
//! (DSL.md §3.2). The dsl crate may not depend on netproxy (ARCHITECTURE §1), so this is a small
//! validator of the shapes only; matching, IDNA folding and address checks are netproxy's.
use std::net::IpAddr;

/// Why a network rule or a secret `hosts` entry is refused: the `{why}` of its diagnostic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RuleError {
    #[error("a rule cannot be empty")]
    EmptyRule,
    #[error("\"!\" must be followed by a pattern")]
    BareNegation,
    #[error("a rule is a host pattern, with no scheme")]
    RuleScheme,
    #[error("only a CIDR holds \"/\"; a rule has no path")]
    RulePath,
    #[error("\"{0}\" is not a bracketed IPv6 address")]
    BadBracketedIpv6(String),
    #[error("\"{0}\" is not a valid CIDR")]
    BadCidr(String),
    #[error("\"{0}\" is not a port (a number from 1 to 65535)")]
    BadPort(String),
    #[error("a wildcard may only be the whole leading label (*. or **.)")]
    WildcardPlacement,
    #[error("a rule holds at most one wildcard, as its leading label")]
    SecondWildcard,
    #[error("a wildcard needs a host after it")]
    WildcardWithoutHost,
    #[error("a host cannot be empty")]
    EmptyHost,
    #[error("\"{0}\" ends in a number but is not an IPv4 address; write a.b.c.d")]
    NumericName(String),
    #[error("\"{0}\" has an empty label")]
    EmptyLabel(String),
    #[error("{} is not allowed in a host name (letters, digits and \"-\" only)", describe(.0))]
    HostCharacter(char),
    #[error("it is empty")]
    EmptyEntry,
    #[error("no scheme")]
    EntryScheme,
    #[error("no wildcard; an entry already covers its subdomains")]
    EntryWildcard,
    #[error("no path")]
    EntryPath,
    #[error("no port")]
    EntryPort,
}

/// Checks one `rules` entry:
/// `rule = [ "!" ] ( ( "**" | "*" | "**." host | "*." host | host | ipv4 | cidr ) [ ":" port ]
///        | ipv6 | "[" ipv6 "]" [ ":" port ] )`, where `port` is 1..=65535 (issue 15 item 10: an
/// allowing rule without a port admits 443 and 80 only). The error is the `{why}` of
/// `invalid network rule "{r}": {why}`.
pub(crate) fn check_rule(rule: &str) -> Result<(), RuleError> {
    let trimmed = rule.trim();
    if trimmed.is_empty() {
        return Err(RuleError::EmptyRule);
    }
    let pattern = trimmed.strip_prefix('!').unwrap_or(trimmed);
    if pattern.is_empty() {
        return Err(RuleError::BareNegation);
    }
    let pattern = pattern.to_lowercase();
    if pattern.contains("://") {
        return Err(RuleError::RuleScheme);
    }
    let pattern = strip_port(&pattern)?;
    if let Some(inner) = pattern.strip_prefix('[') {
        return match inner
            .strip_suffix(']')
            .map(str::parse::<std::net::Ipv6Addr>)
        {
            Some(Ok(_)) => Ok(()),
            _ => Err(RuleError::BadBracketedIpv6(pattern.to_owned())),
        };
    }
    if pattern.contains('/') {
        return check_cidr(pattern);
    }
    if pattern.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    if !pattern.contains('*') {
        return check_host(pattern);
    }
    if pattern == "*" || pattern == "**" {
        return Ok(());
    }
    let suffix = pattern
        .strip_prefix("**.")
        .or_else(|| pattern.strip_prefix("*."))
        .ok_or(RuleError::WildcardPlacement)?;
    if suffix.contains('*') {
        return Err(RuleError::SecondWildcard);
    }
    if suffix.is_empty() {
        return Err(RuleError::WildcardWithoutHost);
    }
    check_host(suffix)
}

/// The pattern without its `:port`, which must be 1..=65535 in digits. A CIDR carries its port
/// after the prefix length (`10.0.0.0/8:5432`), an IPv6 address only in brackets (`[::1]:8080`);
/// a pattern with several colons and no brackets is a bare IPv6 address, without a port.
fn strip_port(pattern: &str) -> Result<&str, RuleError> {
    let split = if let Some((addr, len)) = pattern.split_once('/') {
        len.split_once(':')
            .map(|(len, port)| (&pattern[..addr.len() + 1 + len.len()], port))
    } else if pattern.starts_with('[') {
        pattern
            .rsplit_once("]:")
            .map(|(v6, port)| (&pattern[..=v6.len()], port))
    } else {
        pattern
            .rsplit_once(':')
            .filter(|(host, _)| !host.contains(':'))
    };
    let Some((rest, port)) = split else {
        return Ok(pattern);
    };
    let valid = !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u16>().is_ok_and(|p| p != 0);
    if valid {
        Ok(rest)
    } else {
        Err(RuleError::BadPort(port.to_owned()))
    }
}

/// `addr/prefix`, with the prefix within the address family's width.
fn check_cidr(pattern: &str) -> Result<(), RuleError> {
    let bad = || Err(RuleError::BadCidr(pattern.to_owned()));
    let Some((addr, prefix)) = pattern.split_once('/') else {
        return bad();
    };
    let Ok(addr) = addr.parse::<IpAddr>() else {
        return Err(RuleError::RulePath);
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    match prefix.parse::<u8>() {
        Ok(p) if !prefix.starts_with('+') && p <= max => Ok(()),
        _ => bad(),
    }
}

/// A host name: dot-separated, non-empty labels of letters, digits, `-`, or non-ASCII letters
/// and digits (IDNA-folded by netproxy).
pub(crate) fn check_host(host: &str) -> Result<(), RuleError> {
    if host.is_empty() {
        return Err(RuleError::EmptyHost);
    }
    // A numeric last label makes the whole an IPv4 number to every resolver (`127.1`,
    // `0x7f.1`, `2130706433`): write addresses as dotted quads, names with a non-numeric TLD.
    let last = host.rsplit('.').next().unwrap_or_default();
    let numeric = !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || last
                .strip_prefix("0x")
                .is_some_and(|x| x.bytes().all(|b| b.is_ascii_hexdigit())));
    if numeric && host.parse::<std::net::Ipv4Addr>().is_err() {
        return Err(RuleError::NumericName(host.to_owned()));
    }
    for label in host.split('.') {
        if label.is_empty() {
            return Err(RuleError::EmptyLabel(host.to_owned()));
        }
        if let Some(c) = label.chars().find(|&c| {
            !(c.is_ascii_alphanumeric() || c == '-' || (!c.is_ascii() && c.is_alphanumeric()))
        }) {
            return Err(RuleError::HostCharacter(c));
        }
    }
    Ok(())
}

/// How a character is named in a message.
fn describe(c: &char) -> String {
    match c {
        ' ' => "a space".to_owned(),
        c if c.is_control() || c.is_whitespace() => format!("U+{:04X}", u32::from(*c)),
        c => format!("\"{c}\""),
    }
}

/// Checks one secret `hosts` entry: a bare host name or an IP literal, with no scheme, path, port
/// or wildcard. The error is the `{why}` of C092.
pub(crate) fn check_hosts_entry(entry: &str) -> Result<(), RuleError> {
    if entry.is_empty() {
        return Err(RuleError::EmptyEntry);
    }
    if entry.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    if let Some(inner) = entry.strip_prefix('[').and_then(|e| e.strip_suffix(']'))
        && inner.parse::<std::net::Ipv6Addr>().is_ok()
    {
        return Ok(());
    }
    if entry.contains("://") {
        return Err(RuleError::EntryScheme);
    }
    if entry.contains('*') {
        return Err(RuleError::EntryWildcard);
    }
    if entry.contains('/') {
        return Err(RuleError::EntryPath);
    }
    if entry.contains(':') {
        return Err(RuleError::EntryPort);
    }
    check_host(entry)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn every_rule_form_of_the_grammar_is_accepted() {
        for rule in [
            "**",
            "*",
            "**.example.com",
            "*.example.com",
            "example.com",
            "!gist.github.com",
            "API.Example.COM",
            "  padded.example.com  ",
            "10.0.0.1",
            "::1",
            "10.0.0.0/8",
            "fd00::/8",
            "!169.254.169.254/32",
            "bücher.example",
            "xn--bcher-kva.example",
            "a-b.c-d",
            "example.com:443",
            "api.example.test:8443",
            "*.example.test:8080",
            "**.example.test:1",
            "**:8080",
            "!pinned.example.com:65535",
            "10.0.0.1:5432",
            "10.0.0.0/8:5432",
            "[::1]",
            "[::1]:8080",
            "fd00::/8:9000",
        ] {
            assert_eq!(check_rule(rule), Ok(()), "{rule}");
        }
    }

    #[test]
    fn rules_outside_the_grammar_are_refused_with_a_reason() {
        let cases = [
            ("", "a rule cannot be empty"),
            ("   ", "a rule cannot be empty"),
            ("!", "\"!\" must be followed by a pattern"),
            (
                "bad rule",
                "a space is not allowed in a host name (letters, digits and \"-\" only)",
            ),
            (
                "example.com:",
                "\"\" is not a port (a number from 1 to 65535)",
            ),
            (
                "example.com:0",
                "\"0\" is not a port (a number from 1 to 65535)",
            ),
            (
                "example.com:65536",
                "\"65536\" is not a port (a number from 1 to 65535)",
            ),
            (
                "example.com:https",
                "\"https\" is not a port (a number from 1 to 65535)",
            ),
            (
                "*.example.com:+1",
                "\"+1\" is not a port (a number from 1 to 65535)",
            ),
            (
                "10.0.0.0/8:x",
                "\"x\" is not a port (a number from 1 to 65535)",
            ),
            (
                "example.com:80:80",
                "\":\" is not allowed in a host name (letters, digits and \"-\" only)",
            ),
            (
                "[10.0.0.1]:80",
                "\"[10.0.0.1]\" is not a bracketed IPv6 address",
            ),
            (
                "127.1",
                "\"127.1\" ends in a number but is not an IPv4 address; write a.b.c.d",
            ),
            (
                "0x7f.1:80",
                "\"0x7f.1\" ends in a number but is not an IPv4 address; write a.b.c.d",
            ),
            (
                "1.2.3.4.5",
                "\"1.2.3.4.5\" ends in a number but is not an IPv4 address; write a.b.c.d",
            ),
            (
                "*.foo.123",
                "\"foo.123\" ends in a number but is not an IPv4 address; write a.b.c.d",
            ),
            ("10.0.0.0/33", "\"10.0.0.0/33\" is not a valid CIDR"),
            ("10.0.0.0/x", "\"10.0.0.0/x\" is not a valid CIDR"),
            (
                "example.com/8",
                "only a CIDR holds \"/\"; a rule has no path",
            ),
            ("https://x.com", "a rule is a host pattern, with no scheme"),
            (
                "a.*.com",
                "a wildcard may only be the whole leading label (*. or **.)",
            ),
            (
                "foo*.com",
                "a wildcard may only be the whole leading label (*. or **.)",
            ),
            (
                "***",
                "a wildcard may only be the whole leading label (*. or **.)",
            ),
            (
                "*.*.com",
                "a rule holds at most one wildcard, as its leading label",
            ),
            ("*.", "a wildcard needs a host after it"),
            ("example..com", "\"example..com\" has an empty label"),
            ("example.com.", "\"example.com.\" has an empty label"),
            (
                "under_score.com",
                "\"_\" is not allowed in a host name (letters, digits and \"-\" only)",
            ),
        ];
        for (rule, why) in cases {
            assert_eq!(
                check_rule(rule).map_err(|e| e.to_string()),
                Err(why.to_owned()),
                "{rule:?}"
            );
        }
    }

    #[test]
    fn hosts_entries_must_be_bare_hosts_or_ips() {
        for ok in [
            "deploy.example.com",
            "10.1.2.3",
            "::1",
            "[::1]",
            "Example.COM",
        ] {
            assert_eq!(check_hosts_entry(ok), Ok(()), "{ok}");
        }
        let cases = [
            ("https://hooks.example.com/in", "no scheme"),
            (
                "*.example.com",
                "no wildcard; an entry already covers its subdomains",
            ),
            ("example.com/in", "no path"),
            ("example.com:443", "no port"),
            ("", "it is empty"),
            (
                "two words",
                "a space is not allowed in a host name (letters, digits and \"-\" only)",
            ),
        ];
        for (entry, why) in cases {
            assert_eq!(
                check_hosts_entry(entry).map_err(|e| e.to_string()),
                Err(why.to_owned()),
                "{entry:?}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_gets_a_verdict_without_panicking(s in "\\PC{0,40}") {
            let _ = check_rule(&s);
            let _ = check_hosts_entry(&s);
        }

        #[test]
        fn case_padding_and_negation_do_not_change_an_ascii_rule_verdict(
            s in "[a-zA-Z0-9.*/:!_ -]{0,24}",
        ) {
            let verdict = check_rule(&s).is_ok();
            proptest::prop_assert_eq!(check_rule(&s.to_ascii_uppercase()).is_ok(), verdict);
            proptest::prop_assert_eq!(check_rule(&format!("  {s} ")).is_ok(), verdict);
            if !s.trim().is_empty() && !s.trim_start().starts_with('!') {
                proptest::prop_assert_eq!(check_rule(&format!("!{}", s.trim())).is_ok(), verdict);
            }
        }

        #[test]
        fn every_accepted_hosts_entry_is_also_an_accepted_rule(s in "[a-z0-9.:-]{1,24}") {
            if check_hosts_entry(&s).is_ok() {
                proptest::prop_assert!(check_rule(&s).is_ok(), "{}", s);
            }
        }
    }
}

use super::*;
use crate::matcher::compile;
use crate::preset::{ITERION_DEFAULT_RULES, compile_with_preset};
use pretty_assertions::assert_eq;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn an_allowed_name_resolving_to_loopback_is_refused_until_a_cidr_allows_it() {
    let p = compile("allowlist", &["upstream.test"]).unwrap();
    assert_eq!(
        decide(&p, "upstream.test", &[ip("127.0.0.1")]),
        Decision {
            verdict: Verdict::Deny,
            reason: Some(BlockReason::NonPublicAddress),
            source: DecisionSource::ResolvedAddress(ip("127.0.0.1")),
            silent: false,
        }
    );
    let p = compile("allowlist", &["upstream.test", "127.0.0.1/32"]).unwrap();
    assert_eq!(
        decide(&p, "upstream.test", &[ip("127.0.0.1")]),
        Decision {
            verdict: Verdict::Allow,
            reason: None,
            source: DecisionSource::Rule("upstream.test".into()),
            silent: false,
        }
    );
    let p = compile("allowlist", &["upstream.test", "127.0.0.0/8", "!127.0.0.1"]).unwrap();
    assert_eq!(
        decide(&p, "upstream.test", &[ip("127.0.0.1")]).verdict,
        Verdict::Deny
    );
}

#[test]
fn ip_literals_and_metadata_are_refused_under_allowlist() {
    let p = compile_with_preset("allowlist", Some("iterion-default"), &["**"]).unwrap();
    for h in ["169.254.169.254", "10.0.0.1", "8.8.8.8", "[::1]"] {
        let d = decide(&p, h, &[]);
        assert_eq!(
            (d.verdict, d.reason),
            (Verdict::Deny, Some(BlockReason::PolicyDenial)),
            "{h}"
        );
    }
    // Listed literally but non-public: the literal resolves to itself and its own rule allows it.
    let p = compile("allowlist", &["10.0.0.1"]).unwrap();
    assert_eq!(decide(&p, "10.0.0.1", &[]).verdict, Verdict::Allow);
    // Listed only by name-agnostic denylist: the check still refuses it.
    let p = compile("denylist", &[] as &[&str]).unwrap();
    assert_eq!(
        decide(&p, "169.254.169.254", &[]).reason,
        Some(BlockReason::NonPublicAddress)
    );
}

#[test]
fn open_mode_skips_the_resolved_address_check() {
    let p = compile("open", &[] as &[&str]).unwrap();
    assert_eq!(
        decide(&p, "x.test", &[ip("127.0.0.1")]).verdict,
        Verdict::Allow
    );
}

#[test]
fn any_non_public_address_in_the_answer_refuses_the_request() {
    let p = compile("denylist", &[] as &[&str]).unwrap();
    let d = decide(&p, "mixed.test", &[ip("93.184.216.34"), ip("10.1.1.1")]);
    assert_eq!(d.source, DecisionSource::ResolvedAddress(ip("10.1.1.1")));
    assert_eq!(
        decide(&p, "pub.test", &[ip("93.184.216.34"), ip("2606:4700::1")]).verdict,
        Verdict::Allow
    );
}

#[test]
fn the_non_public_ranges_are_exactly_the_listed_ones() {
    let non_public = [
        "0.1.2.3",
        "10.255.0.1",
        "100.64.0.1",
        "100.127.255.255",
        "127.0.0.1",
        "169.254.169.254",
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.8",
        "192.168.1.1",
        "198.18.0.1",
        "198.19.255.255",
        "224.0.0.1",
        "239.255.255.255",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "fc00::1",
        "fdff::1",
        "fe80::1",
        "febf::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a00:1",
        "64:ff9b::7f00:1",
    ];
    let public = [
        "1.1.1.1",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.1.1",
        "192.0.2.1",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700::1111",
        "fec0::1",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "64:ff9b:1::a00:1",
    ];
    for a in non_public {
        assert!(is_non_public(ip(a)), "{a} should be non-public");
    }
    for a in public {
        assert!(!is_non_public(ip(a)), "{a} should be public");
    }
}

#[test]
fn silent_deny_hosts_are_denied_without_an_event() {
    let p = compile("allowlist", &[] as &[&str]).unwrap();
    assert!(decide(&p, "ingest.us.sentry.io", &[]).silent);
    assert!(decide(&p, "o123.ingest.sentry.io", &[]).silent);
    assert!(!decide(&p, "sentry.io", &[]).silent);
    let p = compile("allowlist", &["**"]).unwrap();
    assert_eq!(decide(&p, "api.datadoghq.com", &[]).verdict, Verdict::Allow);
}

#[test]
fn the_default_preset_is_the_exact_list_in_order() {
    assert_eq!(ITERION_DEFAULT_RULES.len(), 32);
    assert_eq!(ITERION_DEFAULT_RULES.first(), Some(&"api.anthropic.com"));
    assert_eq!(ITERION_DEFAULT_RULES.last(), Some(&"get.jetify.com"));
    let p =
        compile_with_preset("allowlist", Some("iterion-default"), &["!api.openai.com"]).unwrap();
    assert_eq!(p.rules().len(), 33);
    assert_eq!(decide(&p, "api.openai.com", &[]).verdict, Verdict::Deny);
    assert_eq!(
        decide(&p, "us-east-1.bedrock.amazonaws.com", &[]).verdict,
        Verdict::Allow
    );
    assert_eq!(decide(&p, "example.org", &[]).verdict, Verdict::Deny);
    assert_eq!(
        compile_with_preset("allowlist", Some("nope"), &[] as &[&str])
            .unwrap_err()
            .code(),
        "NETPROXY_UNKNOWN_PRESET"
    );
}

#[test]
fn verdicts_order_by_strictness() {
    assert_eq!(Verdict::Allow.max(Verdict::Deny), Verdict::Deny);
}

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
        decide(&p, "upstream.test", 443, &[ip("127.0.0.1")]),
        Decision {
            verdict: Verdict::Deny,
            reason: Some(BlockReason::NonPublicAddress),
            source: DecisionSource::ResolvedAddress(ip("127.0.0.1")),
            silent: false,
        }
    );
    let p = compile("allowlist", &["upstream.test", "127.0.0.1/32"]).unwrap();
    assert_eq!(
        decide(&p, "upstream.test", 443, &[ip("127.0.0.1")]),
        Decision {
            verdict: Verdict::Allow,
            reason: None,
            source: DecisionSource::Rule("upstream.test".into()),
            silent: false,
        }
    );
    let p = compile("allowlist", &["upstream.test", "127.0.0.0/8", "!127.0.0.1"]).unwrap();
    assert_eq!(
        decide(&p, "upstream.test", 443, &[ip("127.0.0.1")]).verdict,
        Verdict::Deny
    );
}

#[test]
fn ip_literals_and_metadata_are_refused_under_allowlist() {
    let p = compile_with_preset("allowlist", Some("iterion-default"), &["**"]).unwrap();
    for h in ["169.254.169.254", "10.0.0.1", "8.8.8.8", "[::1]"] {
        let d = decide(&p, h, 443, &[]);
        assert_eq!(
            (d.verdict, d.reason),
            (Verdict::Deny, Some(BlockReason::PolicyDenial)),
            "{h}"
        );
    }
    // Listed literally but non-public: the literal resolves to itself and its own rule allows it.
    let p = compile("allowlist", &["10.0.0.1"]).unwrap();
    assert_eq!(decide(&p, "10.0.0.1", 443, &[]).verdict, Verdict::Allow);
    // Listed only by name-agnostic denylist: the check still refuses it.
    let p = compile("denylist", &[] as &[&str]).unwrap();
    assert_eq!(
        decide(&p, "169.254.169.254", 443, &[]).reason,
        Some(BlockReason::NonPublicAddress)
    );
}

#[test]
fn open_mode_applies_the_resolved_address_check_too() {
    // Issue 15 item 9: the proxy runs under open when a secret is scoped; it must not reach
    // the host's loopback, and an explicit address rule still lets it through.
    let p = compile("open", &[] as &[&str]).unwrap();
    let d = decide(&p, "x.test", 443, &[ip("127.0.0.1")]);
    assert_eq!(
        (d.verdict, d.reason),
        (Verdict::Deny, Some(BlockReason::NonPublicAddress))
    );
    assert_eq!(decide(&p, "127.1", 8080, &[]).verdict, Verdict::Deny);
    assert_eq!(
        decide(&p, "x.test", 443, &[ip("93.184.216.34")]).verdict,
        Verdict::Allow
    );
    let p = compile("open", &["127.0.0.1:8080"]).unwrap();
    assert_eq!(
        decide(&p, "x.test", 8080, &[ip("127.0.0.1")]).verdict,
        Verdict::Allow
    );
    assert_eq!(
        decide(&p, "x.test", 8081, &[ip("127.0.0.1")]).verdict,
        Verdict::Deny
    );
}

#[test]
fn any_non_public_address_in_the_answer_refuses_the_request() {
    let p = compile("denylist", &[] as &[&str]).unwrap();
    let d = decide(
        &p,
        "mixed.test",
        443,
        &[ip("93.184.216.34"), ip("10.1.1.1")],
    );
    assert_eq!(d.source, DecisionSource::ResolvedAddress(ip("10.1.1.1")));
    assert_eq!(
        decide(
            &p,
            "pub.test",
            443,
            &[ip("93.184.216.34"), ip("2606:4700::1")]
        )
        .verdict,
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
        "192.0.2.1",
        "198.51.100.7",
        "203.0.113.200",
        "192.88.99.1",
        "192.31.196.1",
        "192.52.193.1",
        "192.175.48.1",
        "fec0::1",
        "64:ff9b::808:808",
        "64:ff9b:1::a00:1",
        "::127.0.0.1",
        "100::1",
        "2001::1",
        "2001:db8::1",
        "2002:808:808::1",
        "3fff::1",
        "5f00::1",
        "4000::1",
        "1000::1",
    ];
    let public = [
        "1.1.1.1",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.1.1",
        "192.0.3.1",
        "198.17.255.255",
        "198.20.0.0",
        "198.51.99.1",
        "203.0.114.1",
        "223.255.255.255",
        "2606:4700::1111",
        "2a00:1450:4001::1",
        "::ffff:8.8.8.8",
        "2001:200::1",
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
    assert!(decide(&p, "ingest.us.sentry.io", 443, &[]).silent);
    assert!(decide(&p, "o123.ingest.sentry.io", 443, &[]).silent);
    assert!(!decide(&p, "sentry.io", 443, &[]).silent);
    let p = compile("allowlist", &["**"]).unwrap();
    assert_eq!(
        decide(&p, "api.datadoghq.com", 443, &[]).verdict,
        Verdict::Allow
    );
}

#[test]
fn the_default_preset_is_the_exact_list_in_order() {
    assert_eq!(ITERION_DEFAULT_RULES.len(), 32);
    assert_eq!(ITERION_DEFAULT_RULES.first(), Some(&"api.anthropic.com"));
    assert_eq!(ITERION_DEFAULT_RULES.last(), Some(&"get.jetify.com"));
    let p =
        compile_with_preset("allowlist", Some("iterion-default"), &["!api.openai.com"]).unwrap();
    assert_eq!(p.rules().len(), 33);
    assert_eq!(
        decide(&p, "api.openai.com", 443, &[]).verdict,
        Verdict::Deny
    );
    assert_eq!(
        decide(&p, "us-east-1.bedrock.amazonaws.com", 443, &[]).verdict,
        Verdict::Allow
    );
    assert_eq!(decide(&p, "example.org", 443, &[]).verdict, Verdict::Deny);
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

/// One address inside each special-purpose block (IANA IPv4 and IPv6 registries), and the ways
/// IPv6 embeds an IPv4 address. Judged without any traffic.
const SPECIAL_PURPOSE: &[&str] = &[
    "0.0.0.0",
    "0.255.255.255",
    "10.0.0.1",
    "100.64.0.1",
    "100.127.255.254",
    "127.0.0.1",
    "127.255.255.254",
    "169.254.0.1",
    "169.254.169.254",
    "172.16.0.1",
    "172.31.255.254",
    "192.0.0.1",
    "192.0.0.9",
    "192.0.0.170",
    "192.0.2.1",
    "192.31.196.1",
    "192.52.193.1",
    "192.88.99.1",
    "192.168.0.1",
    "192.175.48.1",
    "198.18.0.1",
    "198.19.255.254",
    "198.51.100.1",
    "203.0.113.1",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.254",
    "255.255.255.255",
    "::",
    "::1",
    "::ffff:10.0.0.1",
    "::ffff:0:0",
    "::10.0.0.1",
    "64:ff9b::a00:1",
    "64:ff9b::8.8.8.8",
    "64:ff9b:1::1",
    "100::1",
    "100::1:0:0:1",
    "2001::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:1::1",
    "2001:2::1",
    "2001:3::1",
    "2001:4:112::1",
    "2001:10::1",
    "2001:20::1",
    "2001:1ff::1",
    "2001:db8::1",
    "2002::1",
    "2002:c0a8:101::1",
    "2620:4f:8000::1",
    "3fff::1",
    "5f00::1",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "febf::1",
    "fec0::1",
    "ff02::1",
    "ff0e::1",
    "::2",
    "1::1",
    "4000::1",
    "8000::1",
    "e000::1",
];

#[test]
fn every_special_purpose_address_is_refused_under_every_mode() {
    for mode in ["open", "denylist", "allowlist"] {
        let p = compile(mode, &["name.test", "**:8443"]).unwrap();
        for a in SPECIAL_PURPOSE {
            assert!(is_non_public(ip(a)), "{a} should be non-public");
            for port in [443, 8443] {
                let d = decide(&p, "name.test", port, &[ip(a)]);
                assert_eq!(
                    (d.verdict, d.reason),
                    (Verdict::Deny, Some(BlockReason::NonPublicAddress)),
                    "{mode}: name.test:{port} resolving to {a}"
                );
            }
            // The literal itself, bracketed or not.
            let lit = if a.contains(':') {
                format!("[{a}]")
            } else {
                (*a).to_string()
            };
            assert_eq!(
                decide(&p, &lit, 443, &[]).verdict,
                Verdict::Deny,
                "{mode}: {lit}"
            );
        }
    }
}

#[test]
fn an_embedded_private_ipv4_needs_its_own_rule_besides_the_ipv6_one() {
    let p = compile("allowlist", &["n.test", "64:ff9b::/96"]).unwrap();
    // The NAT64 prefix is allowed, but it carries 10.0.0.1: refused.
    assert_eq!(
        decide(&p, "n.test", 443, &[ip("64:ff9b::a00:1")]).verdict,
        Verdict::Deny
    );
    // A public IPv4 through the allowed prefix passes.
    assert_eq!(
        decide(&p, "n.test", 443, &[ip("64:ff9b::808:808")]).verdict,
        Verdict::Allow
    );
    let p = compile("allowlist", &["n.test", "64:ff9b::/96", "10.0.0.0/8"]).unwrap();
    assert_eq!(
        decide(&p, "n.test", 443, &[ip("64:ff9b::a00:1")]).verdict,
        Verdict::Allow
    );
    // A mapped address is its IPv4: the IPv4 rule is enough, and the source names the IPv4.
    let p = compile("allowlist", &["n.test"]).unwrap();
    assert_eq!(
        decide(&p, "n.test", 443, &[ip("::ffff:10.0.0.1")]).source,
        DecisionSource::ResolvedAddress(ip("10.0.0.1"))
    );
    let p = compile("allowlist", &["n.test", "10.0.0.0/8"]).unwrap();
    assert_eq!(
        decide(&p, "n.test", 443, &[ip("::ffff:10.0.0.1")]).verdict,
        Verdict::Allow
    );
}

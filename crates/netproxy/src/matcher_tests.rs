use super::*;
use pretty_assertions::assert_eq;
use proptest::prelude::*;

fn allows(mode: &str, rules: &[&str], host: &str) -> bool {
    compile(mode, rules).unwrap().allows(host, 443)
}

#[test]
fn every_pattern_form_matches_exactly_what_it_says() {
    // (rule, host, matches under allowlist)
    let table: &[(&str, &str, bool)] = &[
        ("example.com", "example.com", true),
        ("example.com", "EXAMPLE.com.", true),
        ("example.com", "example.com:443", true),
        ("example.com", "api.example.com", false),
        ("*", "localhost", true),
        ("*", "example.com", false),
        ("**", "a.b.c.example.com", true),
        ("**", "example", true),
        ("**", "10.0.0.1", false),
        ("**", "[::1]", false),
        ("*.example.com", "api.example.com", true),
        ("*.example.com", "example.com", false),
        ("*.example.com", "a.b.example.com", false),
        ("*.example.com", "xexample.com", false),
        ("**.example.com", "example.com", true),
        ("**.example.com", "api.example.com", true),
        ("**.example.com", "a.b.example.com", true),
        ("**.example.com", "badexample.com", false),
        ("**.example.com", "example.com.evil.org", false),
        ("10.0.0.1", "10.0.0.1", true),
        ("10.0.0.1", "10.0.0.2", false),
        ("[::1]", "::1", true),
        ("::1", "[::1]:443", true),
        ("10.0.0.0/8", "10.1.2.3", true),
        ("10.0.0.0/8", "11.1.2.3", false),
        ("10.0.0.0/8", "ten.example.com", false),
        ("fd00::/8", "[fd00::1]", true),
        ("127.0.0.0/8", "::ffff:127.0.0.1", true),
        ("bücher.de", "xn--bcher-kva.de", true),
        ("xn--bcher-kva.de", "BÜCHER.de", true),
        ("**.bücher.de", "shop.bücher.de", true),
    ];
    for (rule, host, want) in table {
        assert_eq!(
            allows("allowlist", &[rule], host),
            *want,
            "rule {rule:?} host {host:?}"
        );
    }
}

#[test]
fn the_last_matching_rule_wins_in_either_order() {
    assert!(!allows(
        "allowlist",
        &["**.example.com", "!bad.example.com"],
        "bad.example.com"
    ));
    assert!(allows(
        "allowlist",
        &["!bad.example.com", "**.example.com"],
        "bad.example.com"
    ));
    assert!(allows(
        "allowlist",
        &["**.example.com", "!bad.example.com"],
        "ok.example.com"
    ));
    assert!(!allows("denylist", &["**", "!*.corp"], "x.corp"));
    assert!(allows("denylist", &["!*.corp", "**"], "x.corp"));
}

#[test]
fn no_match_falls_back_to_the_mode_and_an_empty_host_only_passes_open() {
    assert!(!allows("allowlist", &["a.com"], "b.com"));
    assert!(allows("denylist", &["!a.com"], "b.com"));
    assert!(!allows("denylist", &["!a.com"], "a.com"));
    assert!(allows("open", &[] as &[&str], "b.com"));
    assert!(!allows("open", &["!b.com"], "b.com"));
    assert!(allows("open", &[] as &[&str], ""));
    assert!(!allows("denylist", &[] as &[&str], ""));
    assert!(!allows("allowlist", &["**"], ""));
}

#[test]
fn an_empty_mode_is_allowlist_and_an_unknown_mode_is_an_error() {
    assert_eq!(
        compile("", &["a.com"]).unwrap().mode(),
        NetworkMode::Allowlist
    );
    assert_eq!(
        compile("bogus", &["a.com"]).unwrap_err().code(),
        "NETPROXY_INVALID_MODE"
    );
}

#[test]
fn malformed_rules_are_typed_errors() {
    let cases = [
        ("", "NETPROXY_EMPTY_RULE"),
        ("   ", "NETPROXY_EMPTY_RULE"),
        ("!", "NETPROXY_EMPTY_RULE"),
        ("10.0.0.0/33", "NETPROXY_INVALID_CIDR"),
        ("example.com/8", "NETPROXY_INVALID_CIDR"),
        ("a.*.com", "NETPROXY_INVALID_WILDCARD"),
        ("*example.com", "NETPROXY_INVALID_WILDCARD"),
        ("*.", "NETPROXY_INVALID_WILDCARD"),
        ("**.", "NETPROXY_INVALID_WILDCARD"),
        ("*.*.com", "NETPROXY_INVALID_WILDCARD"),
        ("***", "NETPROXY_INVALID_WILDCARD"),
        ("example.*", "NETPROXY_INVALID_WILDCARD"),
    ];
    for (rule, code) in cases {
        assert_eq!(
            compile("allowlist", &[rule]).unwrap_err().code(),
            code,
            "rule {rule:?}"
        );
    }
}

#[test]
fn rules_compile_to_the_pattern_they_name() {
    let p = compile(
        "allowlist",
        &[
            " !**.Example.COM ",
            "*.a.b",
            "1.2.3.4",
            "10.0.0.0/8",
            "X.org.",
        ],
    )
    .unwrap();
    let got: Vec<(bool, HostPattern)> = p
        .rules()
        .iter()
        .map(|r| (r.negated, r.pattern.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (true, HostPattern::DomainAndSubdomains("example.com".into())),
            (false, HostPattern::OneLabelUnder("a.b".into())),
            (false, HostPattern::Ip("1.2.3.4".parse().unwrap())),
            (false, HostPattern::Cidr("10.0.0.0/8".parse().unwrap())),
            (false, HostPattern::Exact("x.org".into())),
        ]
    );
}

/// A plain LDH label. Labels with `--` in their third and fourth places are left out: those are
/// reserved (RFC 5891 §4.2.1), and `xn--…` ones are IDNA A-labels, which the canonicaliser decodes
/// and refuses when they are not valid punycode — not the plain names these properties are about.
fn label() -> impl Strategy<Value = String> {
    "[a-z]([a-z0-9-]{0,8}[a-z0-9])?"
        .prop_filter("a reserved or A-label", |l| l.get(2..4) != Some("--"))
}

fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(label(), 1..5).prop_map(|l| l.join("."))
}

fn flip_case(s: &str, mask: u64) -> String {
    s.chars()
        .enumerate()
        .map(|(i, c)| {
            if mask >> (i % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

proptest! {
    #[test]
    fn canonicalisation_is_idempotent(h in name(), port in proptest::option::of(0u16..), dot in any::<bool>()) {
        let mut raw = h.clone();
        if dot { raw.push('.'); }
        if let Some(p) = port { raw = format!("{raw}:{p}"); }
        let once = canonical_host(&raw);
        prop_assert_eq!(canonical_host(&once), once.clone());
    }

    #[test]
    fn trailing_dot_and_case_do_not_change_the_verdict(h in name(), mask in any::<u64>(), rule in name()) {
        let p = compile("allowlist", &[format!("**.{rule}"), rule.clone()]).unwrap();
        let variant = format!("{}.", flip_case(&h, mask));
        prop_assert_eq!(p.allows(&h, 443), p.allows(&variant, 443));
    }

    #[test]
    fn a_deny_rule_last_beats_any_allow_before_it(h in name()) {
        let p = compile("allowlist", &["**".to_string(), format!("**.{h}"), h.clone(), format!("!{h}")]).unwrap();
        prop_assert!(!p.allows(&h, 443));
    }

    #[test]
    fn double_star_suffix_matches_the_domain_itself(s in name(), sub in label()) {
        let p = compile("allowlist", &[format!("**.{s}")]).unwrap();
        prop_assert!(p.allows(&s, 443));
        let sub_host = format!("{}.{}", sub, s);
        prop_assert!(p.allows(&sub_host, 443));
    }

    #[test]
    fn double_star_never_admits_an_ip_literal(ip in any::<std::net::IpAddr>()) {
        let p = compile("allowlist", &["**", "*"]).unwrap();
        prop_assert!(!p.allows(&ip.to_string(), 443));
        let bracketed = format!("[{}]:443", ip);
        prop_assert!(!p.allows(&bracketed, 443));
    }

    #[test]
    fn random_hosts_and_rules_never_panic(host in any::<String>(), rule in any::<String>()) {
        let _ = canonical_host(&host);
        if let Ok(p) = compile("denylist", &[rule]) {
            let _ = p.allows(&host, 443);
            let _ = crate::decide(&p, &host, 443, &[]);
        }
    }
}

#[test]
fn rules_carry_ports_and_a_bare_allow_rule_admits_443_and_80_only() {
    // (rule, host, port, allowed under allowlist)
    let table: &[(&str, &str, u16, bool)] = &[
        ("api.example.test", "api.example.test", 443, true),
        ("api.example.test", "api.example.test", 80, true),
        ("api.example.test", "api.example.test", 8443, false),
        ("api.example.test", "api.example.test", 22, false),
        ("api.example.test:8443", "api.example.test", 8443, true),
        ("api.example.test:8443", "api.example.test", 443, false),
        ("api.example.test:8443", "api.example.test", 80, false),
        ("API.Example.Test.:8443", "api.example.test", 8443, true),
        ("*.example.test:8080", "a.example.test", 8080, true),
        ("*.example.test:8080", "a.example.test", 443, false),
        ("*.example.test:8080", "a.b.example.test", 8080, false),
        ("**.example.test:8080", "a.b.example.test", 8080, true),
        ("**.example.test:8080", "example.test", 8080, true),
        ("**:8080", "anything.test", 8080, true),
        ("**:8080", "anything.test", 443, false),
        ("*:8080", "intranet", 8080, true),
        ("10.0.0.1:8443", "10.0.0.1", 8443, true),
        ("10.0.0.1:8443", "10.0.0.1", 443, false),
        ("10.0.0.1", "10.0.0.1", 443, true),
        ("10.0.0.1", "10.0.0.1", 5432, false),
        ("10.0.0.0/8:5432", "10.9.9.9", 5432, true),
        ("10.0.0.0/8:5432", "10.9.9.9", 443, false),
        ("10.0.0.0/8", "10.9.9.9", 80, true),
        ("10.0.0.0/8", "10.9.9.9", 81, false),
        ("[::1]:8080", "::1", 8080, true),
        ("[::1]:8080", "::1", 443, false),
        ("[::1]", "::1", 443, true),
        ("::1", "::1", 80, true),
        ("fd00::/8:9000", "fd00::5", 9000, true),
        ("fd00::/8:9000", "fd00::5", 443, false),
        ("0x7f.1:8080", "127.0.0.1", 8080, true),
        ("2130706433", "127.0.0.1", 443, true),
    ];
    for (rule, host, port, want) in table {
        assert_eq!(
            compile("allowlist", &[rule]).unwrap().allows(host, *port),
            *want,
            "rule {rule:?} target {host}:{port}"
        );
    }
}

#[test]
fn a_bare_deny_rule_denies_every_port_and_a_port_deny_rule_only_its_port() {
    let p = compile("denylist", &["!bad.test", "!pinned.test:8443"]).unwrap();
    for port in [1, 22, 80, 443, 8443, 65535] {
        assert!(!p.allows("bad.test", port), "bad.test:{port}");
    }
    assert!(!p.allows("pinned.test", 8443));
    assert!(p.allows("pinned.test", 443));
    // Under allowlist, a later bare deny beats an earlier port allow on any port.
    let p = compile("allowlist", &["a.test:8443", "!a.test"]).unwrap();
    assert!(!p.allows("a.test", 8443));
    // ... and a later port allow re-opens only that port.
    let p = compile("allowlist", &["!a.test", "a.test:8443"]).unwrap();
    assert!(p.allows("a.test", 8443));
    assert!(!p.allows("a.test", 443));
}

#[test]
fn bad_ports_and_bad_hosts_in_rules_are_typed_errors() {
    let cases = [
        ("a.test:", "NETPROXY_INVALID_PORT"),
        ("a.test:0", "NETPROXY_INVALID_PORT"),
        ("a.test:65536", "NETPROXY_INVALID_PORT"),
        ("a.test:99999999999", "NETPROXY_INVALID_PORT"),
        ("a.test:+443", "NETPROXY_INVALID_PORT"),
        ("a.test:-1", "NETPROXY_INVALID_PORT"),
        ("a.test:https", "NETPROXY_INVALID_PORT"),
        ("a.test: 443", "NETPROXY_INVALID_PORT"),
        ("*.a.test:x", "NETPROXY_INVALID_PORT"),
        ("**:0", "NETPROXY_INVALID_PORT"),
        ("10.0.0.0/8:", "NETPROXY_INVALID_PORT"),
        ("10.0.0.0/8:70000", "NETPROXY_INVALID_PORT"),
        ("[::1]:0", "NETPROXY_INVALID_PORT"),
        ("a.test:80:80", "NETPROXY_INVALID_HOST"),
        ("a b.test", "NETPROXY_INVALID_HOST"),
        ("1.2.3.4.5", "NETPROXY_INVALID_HOST"),
        ("foo.123", "NETPROXY_INVALID_HOST"),
        ("user@a.test", "NETPROXY_INVALID_HOST"),
        ("*.foo.123", "NETPROXY_INVALID_HOST"),
    ];
    for (rule, code) in cases {
        assert_eq!(
            compile("allowlist", &[rule]).unwrap_err().code(),
            code,
            "rule {rule:?}"
        );
    }
    let p = compile("allowlist", &["a.test:8443", "!b.test", "10.0.0.0/8:5432"]).unwrap();
    let ports: Vec<Option<u16>> = p.rules().iter().map(|r| r.port).collect();
    assert_eq!(ports, vec![Some(8443), None, Some(5432)]);
}

#[test]
fn the_default_preset_still_admits_its_hosts_on_443_and_80_only() {
    let p =
        crate::compile_with_preset("allowlist", Some("iterion-default"), &[] as &[&str]).unwrap();
    for host in [
        "api.anthropic.com",
        "api.openai.com",
        "us-east-1.bedrock.amazonaws.com",
        "registry.npmjs.org",
        "github.com",
        "codeload.github.com",
        "cache.nixos.org",
    ] {
        assert!(p.allows(host, 443), "{host}:443");
        assert!(p.allows(host, 80), "{host}:80");
        assert!(!p.allows(host, 22), "{host}:22");
        assert!(!p.allows(host, 8443), "{host}:8443");
    }
}

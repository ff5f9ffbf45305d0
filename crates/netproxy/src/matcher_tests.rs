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

fn label() -> impl Strategy<Value = String> {
    "[a-z]([a-z0-9-]{0,8}[a-z0-9])?"
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

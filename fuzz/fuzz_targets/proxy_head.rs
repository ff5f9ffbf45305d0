//! The egress proxy's request-head path: request line and headers (httparse), target extraction,
//! `Proxy-Authorization` decoding and host canonicalisation. Asserts it never panics, that a
//! parsed target is canonical (a fixed point, never empty) with a CONNECT default of 443 / plain
//! default of 80 only when no port was written, and that the matcher and `decide` accept it.
#![no_main]

use iterion_netproxy::{
    TargetKind, canonical_host, compile, decide, decode_proxy_authorization, parse_request_head,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(head) = parse_request_head(data) {
        let t = &head.target;
        assert!(!t.host.is_empty());
        assert_eq!(canonical_host(&t.host), t.host, "target host is not canonical");
        assert!(head.head_len <= data.len());
        if t.kind == TargetKind::Connect {
            assert!(data.trim_ascii_start().starts_with(b"CONNECT"));
        }
        if let Ok(policy) = compile("allowlist", &["**", "10.0.0.0/8", "!*.internal"]) {
            let d = decide(&policy, &t.host, t.port, &[]);
            let _ = d.verdict;
        }
    }
    let _ = decode_proxy_authorization(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let c = canonical_host(s);
        let _ = canonical_host(&c);
    }
});

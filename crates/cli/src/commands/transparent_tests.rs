use super::*;
use pretty_assertions::assert_eq;

fn stub() -> Arc<Transparent> {
    // No socket there: any name query fails (SERVFAIL), so nothing in these tests is asked.
    Transparent::new(PathBuf::from("/nonexistent/proxy.sock"), "t".into())
}

fn query(name: &str, qtype: TYPE) -> Vec<u8> {
    let mut p = Packet::new_query(0x1234);
    p.set_flags(PacketFlag::RECURSION_DESIRED);
    p.questions.push(simple_dns::Question::new(
        simple_dns::Name::new_unchecked(name),
        QTYPE::TYPE(qtype),
        QCLASS::CLASS(CLASS::IN),
        false,
    ));
    p.build_bytes_vec().unwrap()
}

#[test]
fn names_are_lowered_and_only_plain_host_names_pass() {
    let got: Vec<Option<String>> = [
        "API.Example.COM.",
        "a_b-c.test",
        "",
        ".",
        "a..b",
        "a b.test",
        "a\u{0}b.test",
        "é.test",
        &"a".repeat(64),
        &format!("{}.test", ["a"; 130].join(".")),
    ]
    .iter()
    .map(|n| dns_name(n))
    .collect();
    assert_eq!(
        got,
        vec![
            Some("api.example.com".to_owned()),
            Some("a_b-c.test".to_owned()),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None
        ]
    );
}

#[tokio::test]
async fn a_name_the_proxy_cannot_be_asked_about_is_servfail_and_a_mapped_one_is_answered_from_the_table()
 {
    let s = stub();
    let reply = s.answer(&query("a.test", TYPE::A)).await.unwrap();
    let p = Packet::parse(&reply).unwrap();
    assert_eq!((p.id(), p.rcode()), (0x1234, RCODE::ServerFailure));
    s.lock()
        .by_name
        .insert("b.test".into(), Ipv4Addr::new(127, 100, 0, 9));
    let reply = s.answer(&query("B.test", TYPE::A)).await.unwrap();
    let p = Packet::parse(&reply).unwrap();
    assert_eq!(p.rcode(), RCODE::NoError);
    assert!(p.has_flags(PacketFlag::RESPONSE));
    match &p.answers[..] {
        [rr] => assert_eq!(rr.rdata, RData::A(A::from(Ipv4Addr::new(127, 100, 0, 9)))),
        other => panic!("{other:?}"),
    }
    // AAAA of an allowed name: NODATA.
    let reply = s.answer(&query("b.test", TYPE::AAAA)).await.unwrap();
    let p = Packet::parse(&reply).unwrap();
    assert_eq!((p.rcode(), p.answers.len()), (RCODE::NoError, 0));
    // A name that is no host name: NXDOMAIN without asking.
    let reply = s.answer(&query("a b.test", TYPE::A)).await.unwrap();
    assert_eq!(Packet::parse(&reply).unwrap().rcode(), RCODE::NameError);
}

/// Hostile input: random bytes, truncations and bit flips of a valid query, oversized
/// messages, responses, several questions. Never a panic; every reply is a parseable DNS
/// message with the query's id, and at most `MAX_DNS_MESSAGE` bytes.
#[tokio::test]
async fn hostile_dns_messages_never_panic_and_get_bounded_well_formed_replies() {
    let s = stub();
    s.lock()
        .by_name
        .insert("b.test".into(), Ipv4Addr::new(127, 100, 0, 9));
    let valid = query("b.test", TYPE::A);
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for cut in 0..valid.len() {
        inputs.push(valid[..cut].to_vec());
    }
    for i in 0..valid.len() * 8 {
        let mut v = valid.clone();
        v[i / 8] ^= 1 << (i % 8);
        inputs.push(v);
    }
    // A tiny deterministic PRNG (xorshift): thousands of random messages.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..4000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = usize::try_from(x % 600).unwrap();
        let mut v = Vec::with_capacity(len);
        let mut y = x;
        for _ in 0..len {
            y = y.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            v.push((y >> 56) as u8);
        }
        // Half of them keep a query header so that they reach the parser's deeper paths.
        if x.is_multiple_of(2) && v.len() > 12 {
            v[2] &= 0x7f;
            v[4] = 0;
            v[5] = 1;
        }
        inputs.push(v);
    }
    inputs.push(vec![0u8; MAX_DNS_MESSAGE + 1]);
    // Compression pointer loops.
    let mut looped = valid[..12].to_vec();
    looped.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
    inputs.push(looped);
    for input in inputs {
        if let Some(reply) = s.answer(&input).await {
            assert!(reply.len() <= MAX_DNS_MESSAGE);
            let p = Packet::parse(&reply).unwrap_or_else(|e| panic!("{e}: {input:?}"));
            assert_eq!(p.id(), u16::from_be_bytes([input[0], input[1]]));
            assert!(p.has_flags(PacketFlag::RESPONSE));
        }
    }
}

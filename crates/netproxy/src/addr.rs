//! Addresses (SANDBOX.md §6.6, issue 15 item 9): the one table of non-public ranges, the
//! canonical form of an address, and the IPv4 addresses an IPv6 address carries.
//!
//! IPv4 is judged by a deny table: the whole IANA IPv4 special-purpose registry plus multicast.
//! IPv6 is judged by an allow rule first (only global unicast `2000::/3` can be public, so every
//! unassigned or future block is non-public), then by the IANA IPv6 special-purpose registry
//! inside it. An IPv6 address that embeds an IPv4 address (mapped, compatible, NAT64, 6to4,
//! Teredo) is also judged by the IPv4 it carries.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len))
}

#[allow(
    clippy::too_many_arguments,
    reason = "the eight segments of an IPv6 address"
)]
const fn v6(s: [u16; 8], len: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
    ))
}

/// The one table of non-public ranges: every block of the IANA IPv4 and IPv6 special-purpose
/// address registries (whatever their "globally reachable" column says), multicast, and the
/// deprecated IPv6 site-local and IPv4-compatible blocks. `(range, name)`.
pub const NON_PUBLIC_RANGES: &[(IpNet, &str)] = &[
    // IPv4 special-purpose registry (RFC 6890 and updates).
    (v4(0, 0, 0, 0, 8), "this network"),
    (v4(10, 0, 0, 0, 8), "private use"),
    (v4(100, 64, 0, 0, 10), "shared address space (CGN)"),
    (v4(127, 0, 0, 0, 8), "loopback"),
    (v4(169, 254, 0, 0, 16), "link local (cloud metadata)"),
    (v4(172, 16, 0, 0, 12), "private use"),
    (v4(192, 0, 0, 0, 24), "IETF protocol assignments"),
    (v4(192, 0, 2, 0, 24), "documentation (TEST-NET-1)"),
    (v4(192, 31, 196, 0, 24), "AS112-v4"),
    (v4(192, 52, 193, 0, 24), "AMT"),
    (v4(192, 88, 99, 0, 24), "deprecated 6to4 relay anycast"),
    (v4(192, 168, 0, 0, 16), "private use"),
    (v4(192, 175, 48, 0, 24), "direct delegation AS112"),
    (v4(198, 18, 0, 0, 15), "benchmarking"),
    (v4(198, 51, 100, 0, 24), "documentation (TEST-NET-2)"),
    (v4(203, 0, 113, 0, 24), "documentation (TEST-NET-3)"),
    (v4(224, 0, 0, 0, 4), "multicast"),
    (v4(240, 0, 0, 0, 4), "reserved"),
    (v4(255, 255, 255, 255, 32), "limited broadcast"),
    // IPv6 special-purpose registry (RFC 6890 and updates), multicast and deprecated blocks.
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "unspecified"),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "loopback"),
    (
        v6([0, 0, 0, 0, 0, 0, 0, 0], 96),
        "IPv4-compatible (deprecated)",
    ),
    (v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96), "IPv4-mapped"),
    (
        v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96),
        "IPv4/IPv6 translation (NAT64)",
    ),
    (
        v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
        "local-use IPv4/IPv6 translation",
    ),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), "discard only"),
    (v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64), "dummy IPv6 prefix"),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        "IETF protocol assignments (Teredo, ORCHID, benchmarking…)",
    ),
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "documentation"),
    (v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), "6to4"),
    (
        v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48),
        "direct delegation AS112",
    ),
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), "documentation"),
    (
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),
        "segment routing SIDs",
    ),
    (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "unique local"),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "link local"),
    (
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        "site local (deprecated)",
    ),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "multicast"),
];

/// Only global unicast can be public: every IPv6 address outside it is non-public.
const GLOBAL_UNICAST: IpNet = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

/// The address a connection actually reaches: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is
/// the IPv4 address it maps (a dual-stack socket dials it as IPv4). Every other address is
/// itself.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4),
        v4 => v4,
    }
}

/// The IPv4 addresses an IPv6 address carries: IPv4-compatible `::a.b.c.d`, NAT64
/// `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::/48`, and Teredo `2001:0:SSSS:SSSS::/32` (its server,
/// and its client, stored inverted in the last 32 bits). The IPv4-mapped form is
/// [`canonical_ip`]'s business.
fn embedded_v4(a: Ipv6Addr) -> Vec<Ipv4Addr> {
    let s = a.segments();
    let tail = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
        return vec![tail(s[6], s[7])];
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return vec![tail(s[6], s[7])];
    }
    if s[0] == 0x2002 {
        return vec![tail(s[1], s[2])];
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return vec![tail(s[2], s[3]), tail(!s[6], !s[7])];
    }
    Vec::new()
}

/// Every address a connection to `ip` may end up at: its canonical form first, then each IPv4
/// address an IPv6 form carries. The resolved-address check judges each of them.
pub(crate) fn views(ip: IpAddr) -> Vec<IpAddr> {
    let ip = canonical_ip(ip);
    let mut out = vec![ip];
    if let IpAddr::V6(a) = ip {
        out.extend(embedded_v4(a).into_iter().map(IpAddr::V4));
    }
    out
}

/// The table entry an address falls in, judged alone (not by what it embeds); `None` means
/// public. An IPv6 address outside global unicast is non-public as "not global unicast".
pub(crate) fn non_public_range(ip: IpAddr) -> Option<&'static str> {
    if let Some((_, name)) = NON_PUBLIC_RANGES.iter().find(|(net, _)| net.contains(&ip)) {
        return Some(name);
    }
    match ip {
        IpAddr::V6(_) if !GLOBAL_UNICAST.contains(&ip) => Some("not IPv6 global unicast"),
        _ => None,
    }
}

/// Whether an address is non-public (SANDBOX.md §6.6 as issue 15 item 9 extends it): it, its
/// canonical form, or any IPv4 address it embeds falls in [`NON_PUBLIC_RANGES`], or it is IPv6
/// outside global unicast.
///
/// ```
/// use iterion_netproxy::is_non_public;
/// for a in ["127.0.0.1", "203.0.113.9", "::ffff:10.0.0.1", "2002:7f00:1::", "64:ff9b::8.8.8.8"] {
///     assert!(is_non_public(a.parse().unwrap()), "{a}");
/// }
/// assert!(!is_non_public("93.184.216.34".parse().unwrap()));
/// assert!(!is_non_public("2606:4700::1111".parse().unwrap()));
/// ```
pub fn is_non_public(ip: IpAddr) -> bool {
    views(ip).into_iter().any(|v| non_public_range(v).is_some())
}

/// Whether a rule naming the block `net` would let a connection reach a non-public address:
/// the block overlaps a range of [`NON_PUBLIC_RANGES`] (the IPv6 blocks that embed IPv4
/// addresses among them), or, for IPv6, reaches outside global unicast. `0.0.0.0/0` does.
///
/// ```
/// use iterion_netproxy::net_reaches_non_public;
/// for n in ["127.0.0.1/32", "10.1.0.0/16", "0.0.0.0/0", "::/0", "2002::/16", "fc00::/8"] {
///     assert!(net_reaches_non_public(n.parse().unwrap()), "{n}");
/// }
/// assert!(!net_reaches_non_public("93.184.216.0/24".parse().unwrap()));
/// assert!(!net_reaches_non_public("2606:4700::/32".parse().unwrap()));
/// ```
pub fn net_reaches_non_public(net: IpNet) -> bool {
    let overlap = |a: &IpNet, b: &IpNet| a.contains(&b.network()) || b.contains(&a.network());
    if NON_PUBLIC_RANGES
        .iter()
        .any(|(range, _)| overlap(range, &net))
    {
        return true;
    }
    matches!(net, IpNet::V6(_)) && !GLOBAL_UNICAST.contains(&net)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn embedded_ipv4_is_extracted_from_every_transition_form() {
        let cases: &[(&str, &[&str])] = &[
            ("::ffff:127.0.0.1", &["127.0.0.1"]),
            ("::127.0.0.1", &["::127.0.0.1", "127.0.0.1"]),
            ("64:ff9b::10.0.0.1", &["64:ff9b::a00:1", "10.0.0.1"]),
            (
                "2002:a9fe:a9fe::1",
                &["2002:a9fe:a9fe::1", "169.254.169.254"],
            ),
            (
                "2001:0:4136:e378:8000:63bf:80ff:fffe",
                &[
                    "2001:0:4136:e378:8000:63bf:80ff:fffe",
                    "65.54.227.120",
                    "127.0.0.1",
                ],
            ),
            ("2606:4700::1111", &["2606:4700::1111"]),
            ("::1", &["::1"]),
            ("::", &["::"]),
        ];
        for (raw, want) in cases {
            let want: Vec<IpAddr> = want.iter().map(|w| ip(w)).collect();
            assert_eq!(views(ip(raw)), want, "{raw}");
        }
    }

    #[test]
    fn the_table_has_no_host_bits_and_no_duplicate() {
        // A host bit set or a range listed twice would be a typo.
        for (i, (net, name)) in NON_PUBLIC_RANGES.iter().enumerate() {
            assert_eq!(net.trunc(), *net, "{net} ({name}) has host bits set");
            assert!(
                NON_PUBLIC_RANGES[..i].iter().all(|(n, _)| n != net),
                "{net} listed twice"
            );
        }
    }
}

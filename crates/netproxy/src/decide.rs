//! The pure verdict: `decide(policy, host, resolved_ips)` (SANDBOX.md §6.5, §6.6, §6.12).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::host::canonical_host;
use crate::matcher::{NetworkMode, Policy};
use crate::preset::is_silent_deny;

/// The verdict. Declaration order is strictness, so verdicts combine with `max()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// The request may proceed (to the vetted addresses only).
    Allow,
    /// The request is refused with 403.
    Deny,
}

/// Why a request was refused; the `as_str()` forms are the `network_blocked` reasons of §6.8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BlockReason {
    /// The rules (or the mode's default) deny the host.
    PolicyDenial,
    /// A resolved address is non-public and no IP/CIDR rule allows it (DNS rebinding, metadata).
    NonPublicAddress,
    /// A request carries a secret's real value toward a host outside its `hosts`.
    SecretExfiltration,
    /// Under inspection, the request's Host differs from the CONNECT target.
    HostMismatch,
    /// Under inspection, the request head is over 1 MiB + 4096 bytes.
    HeaderOverBound,
    /// Under inspection, the request body is over the body bound.
    BodyOverBound,
    /// Under inspection, an `Upgrade` request.
    UpgradeRefused,
}

impl BlockReason {
    /// The reason string of the `network_blocked` event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PolicyDenial => "policy denial",
            Self::NonPublicAddress => "resolved to a non-public address",
            Self::SecretExfiltration => "secret exfiltration blocked",
            Self::HostMismatch => "request host differs from the CONNECT target",
            Self::HeaderOverBound => "request header over the inspection bound",
            Self::BodyOverBound => "request body over the inspection bound",
            Self::UpgradeRefused => "upgrade refused under inspection",
        }
    }
}

/// What decided the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecisionSource {
    /// The last matching rule, as written.
    Rule(String),
    /// No rule matched: the mode's default.
    ModeDefault(NetworkMode),
    /// The resolved-address check, naming the refused address.
    ResolvedAddress(IpAddr),
}

/// A verdict with its reason (only for `Deny`) and source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Allow or deny.
    pub verdict: Verdict,
    /// Why, when denied.
    pub reason: Option<BlockReason>,
    /// What decided.
    pub source: DecisionSource,
    /// Whether a denial must not emit `network_blocked` (§6.12).
    pub silent: bool,
}

/// Pure: the caller has already resolved `resolved_ips` (for an IP-literal host, pass the
/// address itself or nothing: the literal is always checked). Testable without DNS.
///
/// Precedence: the rules decide first (last match wins, §6.5); an allowed host is then refused
/// when, under allowlist or denylist, any address it resolves to is non-public unless the last
/// IP/CIDR rule matching that address is non-negated (§6.6). A denied silent-deny host is
/// marked `silent`.
pub fn decide(policy: &Policy, host: &str, resolved_ips: &[IpAddr]) -> Decision {
    let host = canonical_host(host);
    let m = policy.evaluate(&host);
    let source = match m.rule {
        Some(r) => DecisionSource::Rule(r.source.clone()),
        None => DecisionSource::ModeDefault(policy.mode()),
    };
    if !m.allowed {
        return Decision {
            verdict: Verdict::Deny,
            reason: Some(BlockReason::PolicyDenial),
            source,
            silent: is_silent_deny(&host),
        };
    }
    if policy.mode() != NetworkMode::Open {
        let literal = host.parse::<IpAddr>().ok();
        for ip in literal.iter().chain(resolved_ips) {
            if is_non_public(*ip) && policy.last_address_rule(*ip).is_none_or(|r| r.negated) {
                return Decision {
                    verdict: Verdict::Deny,
                    reason: Some(BlockReason::NonPublicAddress),
                    source: DecisionSource::ResolvedAddress(*ip),
                    silent: is_silent_deny(&host),
                };
            }
        }
    }
    Decision {
        verdict: Verdict::Allow,
        reason: None,
        source,
        silent: false,
    }
}

/// Whether an address is non-public per §6.6 (IPv4-mapped and NAT64 `64:ff9b::/96` addresses
/// are judged by the IPv4 they embed).
pub fn is_non_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return non_public_v4(v4);
            }
            let s = v6.segments();
            v6.is_unspecified()
                || v6.is_loopback()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xff00) == 0xff00
        }
    }
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return Some(tail);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    None
}

fn non_public_v4(ip: Ipv4Addr) -> bool {
    const RANGES: [(u32, u8); 11] = [
        (0x0000_0000, 8),  // 0.0.0.0/8
        (0x0a00_0000, 8),  // 10.0.0.0/8
        (0x6440_0000, 10), // 100.64.0.0/10
        (0x7f00_0000, 8),  // 127.0.0.0/8
        (0xa9fe_0000, 16), // 169.254.0.0/16
        (0xac10_0000, 12), // 172.16.0.0/12
        (0xc000_0000, 24), // 192.0.0.0/24
        (0xc0a8_0000, 16), // 192.168.0.0/16
        (0xc612_0000, 15), // 198.18.0.0/15
        (0xe000_0000, 4),  // 224.0.0.0/4
        (0xf000_0000, 4),  // 240.0.0.0/4
    ];
    let a = u32::from(ip);
    RANGES
        .iter()
        .any(|(net, len)| (a & (u32::MAX << (32 - u32::from(*len)))) == *net)
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;

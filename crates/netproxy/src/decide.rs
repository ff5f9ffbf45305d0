//! The pure verdict: `decide(policy, host, resolved_ips)` (SANDBOX.md §6.5, §6.6, §6.12).

use std::net::IpAddr;

pub use crate::addr::is_non_public;
use crate::addr::{canonical_ip, non_public_range, views};
use crate::host::canonical_host;
use crate::matcher::Policy;
use crate::preset::is_silent_deny;
use iterion_vocab::NetworkMode;

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
/// Precedence: the rules decide first on `(host, port)` (last match wins, §6.5; a rule without
/// `:port` allows 443 and 80 only). An allowed host is then refused, under **every** mode (the
/// check applies whenever the proxy runs, issue 15 item 9), when any address it resolves to,
/// or any IPv4 address such an address embeds, is non-public ([`is_non_public`]) unless the
/// last IP/CIDR rule matching that address on `port` is non-negated (§6.6). A denied
/// silent-deny host is marked `silent`.
pub fn decide(policy: &Policy, host: &str, port: u16, resolved_ips: &[IpAddr]) -> Decision {
    let host = canonical_host(host);
    let m = policy.evaluate(&host, port);
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
    let literal = host.parse::<IpAddr>().ok();
    for ip in literal.iter().chain(resolved_ips) {
        let refused = views(*ip).into_iter().find(|v| {
            non_public_range(*v).is_some()
                && policy.last_address_rule(*v, port).is_none_or(|r| r.negated)
        });
        if refused.is_some() {
            return Decision {
                verdict: Verdict::Deny,
                reason: Some(BlockReason::NonPublicAddress),
                source: DecisionSource::ResolvedAddress(canonical_ip(*ip)),
                silent: is_silent_deny(&host),
            };
        }
    }
    Decision {
        verdict: Verdict::Allow,
        reason: None,
        source,
        silent: false,
    }
}

/// The ports on which `host` may be reached by name, for the transparent path's DNS stub
/// (issue 22): every port of [`crate::DEFAULT_RULE_PORTS`] and every port a rule names, kept
/// where [`decide`] allows it before resolution (the resolved-address check runs on the
/// connection itself, as for any CONNECT). Empty: the name is denied (the stub answers
/// NXDOMAIN). An IP literal is never a name: empty.
pub fn name_ports(policy: &Policy, host: &str) -> Vec<u16> {
    let host = canonical_host(host);
    if host.is_empty() || host.parse::<IpAddr>().is_ok() {
        return Vec::new();
    }
    let mut candidates: Vec<u16> = crate::matcher::DEFAULT_RULE_PORTS.to_vec();
    for rule in policy.rules() {
        if let Some(port) = rule.port
            && !candidates.contains(&port)
        {
            candidates.push(port);
        }
    }
    candidates
        .into_iter()
        .filter(|port| decide(policy, &host, *port, &[]).verdict == Verdict::Allow)
        .collect()
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;

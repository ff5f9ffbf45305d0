//! The rule matcher (SANDBOX.md §6.5): `compile(mode, rules)` and rule evaluation.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use iterion_vocab::NetworkMode;

use crate::addr::canonical_ip;
use crate::error::NetProxyError;
use crate::host::{as_ip, canonical_host, parse_host, parse_port};

/// The ports an allowing rule without `:port` admits (issue 15 item 10). A denying rule
/// without `:port` denies every port.
pub const DEFAULT_RULE_PORTS: [u16; 2] = [443, 80];

/// Parses a mode as written in a `network:` block, leniently: case and surrounding blanks are
/// ignored, and an empty (or blank) mode is `allowlist` (fail closed).
///
/// ```
/// use iterion_netproxy::{NetworkMode, parse_network_mode};
/// assert_eq!(parse_network_mode("").unwrap(), NetworkMode::Allowlist);
/// assert_eq!(parse_network_mode(" Open ").unwrap(), NetworkMode::Open);
/// assert_eq!(parse_network_mode("strict").unwrap_err().code(), "NETPROXY_INVALID_MODE");
/// ```
pub fn parse_network_mode(mode: &str) -> Result<NetworkMode, NetProxyError> {
    let word = mode.trim().to_ascii_lowercase();
    if word.is_empty() {
        return Ok(NetworkMode::Allowlist);
    }
    NetworkMode::from_word(&word).ok_or_else(|| NetProxyError::InvalidMode {
        mode: mode.to_string(),
    })
}

/// One compiled pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPattern {
    /// An exact canonical host name.
    Exact(String),
    /// `*`: any single-label name (no dot).
    AnySingleLabel,
    /// `**`: any host name (never an IP literal).
    AnyName,
    /// `*.s`: exactly one extra label before `s`.
    OneLabelUnder(String),
    /// `**.s`: `s` itself or any name ending with `.s`.
    DomainAndSubdomains(String),
    /// An IP literal.
    Ip(IpAddr),
    /// A CIDR block.
    Cidr(IpNet),
}

impl HostPattern {
    /// Whether this pattern is an IP or CIDR pattern (the only kinds an IP-literal host and the
    /// resolved-address check consult).
    pub fn is_address(&self) -> bool {
        matches!(self, Self::Ip(_) | Self::Cidr(_))
    }

    fn matches_name(&self, host: &str) -> bool {
        match self {
            Self::Exact(h) => host == h,
            Self::AnySingleLabel => !host.is_empty() && !host.contains('.'),
            Self::AnyName => !host.is_empty(),
            Self::OneLabelUnder(s) => host
                .strip_suffix(s.as_str())
                .and_then(|p| p.strip_suffix('.'))
                .is_some_and(|label| !label.is_empty() && !label.contains('.')),
            Self::DomainAndSubdomains(s) => {
                host == s
                    || host
                        .strip_suffix(s.as_str())
                        .is_some_and(|p| p.len() > 1 && p.ends_with('.'))
            }
            Self::Ip(_) | Self::Cidr(_) => false,
        }
    }

    pub(crate) fn matches_addr(&self, ip: IpAddr) -> bool {
        match self {
            Self::Ip(a) => canonical_ip(*a) == canonical_ip(ip),
            Self::Cidr(net) => net.contains(&ip) || net.contains(&canonical_ip(ip)),
            _ => false,
        }
    }
}

/// One compiled rule: a pattern, possibly negated, an optional port, with its source text for
/// reasons and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The rule as written (trimmed).
    pub source: String,
    /// `!` prefix: a match denies.
    pub negated: bool,
    /// The pattern.
    pub pattern: HostPattern,
    /// `:port` as written. `None`: an allowing rule admits [`DEFAULT_RULE_PORTS`] only, a
    /// denying rule denies every port.
    pub port: Option<u16>,
}

impl Rule {
    /// Whether this rule lets a connection reach a non-public address (SANDBOX.md §6.6): an
    /// allowing IP or CIDR rule that names one. Name rules never do: a name that resolves to a
    /// non-public address is refused unless such a rule names the address.
    pub fn opens_non_public(&self) -> bool {
        !self.negated
            && match &self.pattern {
                HostPattern::Ip(ip) => crate::addr::is_non_public(*ip),
                HostPattern::Cidr(net) => crate::addr::net_reaches_non_public(*net),
                _ => false,
            }
    }

    /// Compiles one rule. `index` only labels the error of an empty rule.
    ///
    /// `rule = ["!"] pattern [":" port]`, where a CIDR takes its port after the prefix length
    /// (`10.0.0.0/8:8080`) and an IPv6 address takes it in brackets (`[::1]:8080`). A port is
    /// 1..=65535 in ASCII digits; anything else is [`NetProxyError::InvalidPort`]. A host that
    /// cannot be canonicalised is [`NetProxyError::InvalidHost`].
    pub fn parse(raw: &str, index: usize) -> Result<Self, NetProxyError> {
        let source = raw.trim().to_string();
        let (negated, body) = match source.strip_prefix('!') {
            Some(rest) => (true, rest.trim()),
            None => (false, source.as_str()),
        };
        if body.is_empty() {
            return Err(NetProxyError::EmptyRule { index });
        }
        let body = body.to_lowercase();
        let (body, port) = split_rule_port(&body).ok_or_else(|| NetProxyError::InvalidPort {
            rule: source.clone(),
        })?;
        let bad_host = || NetProxyError::InvalidHost {
            rule: source.clone(),
        };
        let pattern = if body.contains('/') {
            HostPattern::Cidr(body.parse().map_err(|_| NetProxyError::InvalidCidr {
                rule: source.clone(),
            })?)
        } else if let Some(ip) = parse_ip_literal(body) {
            HostPattern::Ip(ip)
        } else if !body.contains('*') {
            let host = parse_host(body).map_err(|_| bad_host())?;
            match as_ip(&host) {
                // A number form (`0x7f.1`) is the address it names.
                Some(ip) => HostPattern::Ip(ip),
                None => HostPattern::Exact(host),
            }
        } else if body == "**" {
            HostPattern::AnyName
        } else if body == "*" {
            HostPattern::AnySingleLabel
        } else {
            let bad = || NetProxyError::InvalidWildcard {
                rule: source.clone(),
            };
            let (double, suffix) = if let Some(s) = body.strip_prefix("**.") {
                (true, s)
            } else if let Some(s) = body.strip_prefix("*.") {
                (false, s)
            } else {
                return Err(bad());
            };
            if suffix.is_empty() || suffix.contains('*') {
                return Err(bad());
            }
            let suffix = canonical_host(suffix);
            if suffix.is_empty() {
                return Err(bad());
            }
            if parse_host(&suffix).is_err() || as_ip(&suffix).is_some() {
                return Err(bad_host());
            }
            if double {
                HostPattern::DomainAndSubdomains(suffix)
            } else {
                HostPattern::OneLabelUnder(suffix)
            }
        };
        Ok(Self {
            source,
            negated,
            pattern,
            port,
        })
    }

    /// Whether this rule's port admits `port`: its own `:port`, else (allowing) 443 and 80,
    /// else (denying) any.
    pub fn covers_port(&self, port: u16) -> bool {
        match self.port {
            Some(p) => p == port,
            None => self.negated || DEFAULT_RULE_PORTS.contains(&port),
        }
    }
}

/// Splits `pattern[:port]`. `None` when a port is written but is not 1..=65535.
fn split_rule_port(body: &str) -> Option<(&str, Option<u16>)> {
    let (head, port) = if let Some((addr, len)) = body.split_once('/') {
        // `cidr[:port]`: the prefix length holds no `:`.
        match len.split_once(':') {
            Some((len, p)) => (&body[..addr.len() + 1 + len.len()], Some(p)),
            None => (body, None),
        }
    } else if body.starts_with('[') {
        match body.rsplit_once("]:") {
            Some((v6, p)) => (&body[..=v6.len()], Some(p)),
            None => (body, None),
        }
    } else {
        match body.rsplit_once(':') {
            // One colon: `host:port`. Several: a bare IPv6 address (no port; use brackets).
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (body, None),
        }
    };
    match port {
        None => Some((head, None)),
        Some(p) => parse_port(p).map(|p| (head, Some(p))),
    }
}

fn parse_ip_literal(body: &str) -> Option<IpAddr> {
    let inner = body
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .unwrap_or(body);
    inner.parse().ok().map(canonical_ip)
}

/// A compiled network policy: the mode and its rules in evaluation order.
#[derive(Clone, PartialEq, Eq)]
pub struct Policy {
    mode: NetworkMode,
    rules: Vec<Rule>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("mode", &self.mode)
            .field(
                "rules",
                &self.rules.iter().map(|r| &r.source).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Compiles a mode and rules (SANDBOX.md §6.5). Prepend a preset's rules yourself
/// ([`preset_rules`](crate::preset_rules)) or use [`compile_with_preset`](crate::compile_with_preset).
///
/// ```
/// use iterion_netproxy::{compile, decide, Verdict};
/// let policy = compile("allowlist", &["**.example.com", "!secret.example.com", "api.example.com:8443"]).unwrap();
/// assert_eq!(decide(&policy, "api.example.com", 443, &[]).verdict, Verdict::Allow);
/// assert_eq!(decide(&policy, "api.example.com", 8443, &[]).verdict, Verdict::Allow);
/// assert_eq!(decide(&policy, "www.example.com", 8443, &[]).verdict, Verdict::Deny);
/// assert_eq!(decide(&policy, "secret.example.com", 443, &[]).verdict, Verdict::Deny);
/// assert_eq!(compile("allowlist", &["a.*.com"]).unwrap_err().code(), "NETPROXY_INVALID_WILDCARD");
/// assert_eq!(compile("allowlist", &["a.com:0"]).unwrap_err().code(), "NETPROXY_INVALID_PORT");
/// ```
pub fn compile<S: AsRef<str>>(mode: &str, rules: &[S]) -> Result<Policy, NetProxyError> {
    let mode = parse_network_mode(mode)?;
    let rules = rules
        .iter()
        .enumerate()
        .map(|(i, r)| Rule::parse(r.as_ref(), i))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Policy { mode, rules })
}

/// What rule evaluation concluded for a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RuleMatch<'a> {
    pub allowed: bool,
    /// The last matching rule, `None` for the mode's default.
    pub rule: Option<&'a Rule>,
}

impl Policy {
    /// The mode.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// The rules in evaluation order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Evaluates a canonical host and port. Precedence: the last rule whose pattern matches the
    /// host and whose port covers the port wins (allowed = not negated); no match falls back to
    /// the mode (allowlist denies, denylist and open allow); an empty host is allowed only
    /// under open.
    pub(crate) fn evaluate(&self, host: &str, port: u16) -> RuleMatch<'_> {
        if host.is_empty() {
            return RuleMatch {
                allowed: self.mode == NetworkMode::Open,
                rule: None,
            };
        }
        let ip = as_ip(host);
        let last = self.rules.iter().rev().find(|r| {
            r.covers_port(port)
                && match ip {
                    // An IP literal matches only IP and CIDR rules, so `**` never admits an
                    // address.
                    Some(ip) => r.pattern.matches_addr(ip),
                    None => r.pattern.matches_name(host),
                }
        });
        match last {
            Some(rule) => RuleMatch {
                allowed: !rule.negated,
                rule: Some(rule),
            },
            None => RuleMatch {
                allowed: self.mode != NetworkMode::Allowlist,
                rule: None,
            },
        }
    }

    /// The last IP/CIDR rule matching `ip` on `port`, if any.
    pub(crate) fn last_address_rule(&self, ip: IpAddr, port: u16) -> Option<&Rule> {
        self.rules
            .iter()
            .rev()
            .find(|r| r.covers_port(port) && r.pattern.matches_addr(ip))
    }

    /// Whether `host` on `port` is allowed by the rules alone (no resolution).
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.evaluate(&canonical_host(host), port).allowed
    }
}

#[cfg(test)]
#[path = "matcher_tests.rs"]
mod tests;

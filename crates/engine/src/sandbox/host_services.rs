//! Services on the operator's machine that a sandbox may reach through its egress proxy
//! (`iterion run --allow-host NAME[:PORT]`, issue 19).
//!
//! The proxy runs on the host, so "the host" is its loopback: `NAME` is resolved by the proxy to
//! `127.0.0.1` (whatever DNS says), and two rules are appended after the workflow's, so they win
//! (last match wins, SANDBOX.md §6.5): the name on `PORT`, and the address `127.0.0.1/32` on
//! `PORT` (non-public addresses are otherwise refused, §6.6). Nothing else of the host opens: no
//! other port, no other name, no other private address. Without `:PORT` the rules take the
//! default ports of a rule without one (443 and 80).
//!
//! An untrusted run is refused these unless the operator also passes
//! `--dangerously-allow-host-untrusted` ([`check_trust`]): a local service is exactly what a
//! hostile working tree would like to talk to.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use iterion_vocab::Trust;
use serde::{Deserialize, Serialize};

/// Where the proxy sends an allowed host service: the host's loopback.
const HOST_LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// One `--allow-host NAME[:PORT]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostService {
    /// The name the sandbox uses for the host (canonical: lower case, no trailing dot).
    pub name: String,
    /// The port; `None` for the default ports of a rule without one (443, 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// Why an `--allow-host` cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostServiceError {
    /// Not `NAME[:PORT]` with a DNS name and a port in 1–65535.
    #[error(
        "--allow-host {arg:?}: {why}; expected NAME[:PORT], e.g. --allow-host host.docker.internal:11434"
    )]
    Malformed {
        /// The argument as given.
        arg: String,
        /// What is wrong with it.
        why: String,
    },
    /// An untrusted run without the explicit consent.
    #[error(
        "--allow-host {hosts} would let an untrusted run reach services on this machine; pass --dangerously-allow-host-untrusted as well if that is what you mean, or run it trusted"
    )]
    Untrusted {
        /// The services asked for, comma-separated.
        hosts: String,
    },
}

impl std::fmt::Display for HostService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl HostService {
    /// Parses `NAME[:PORT]`. `NAME` is a DNS name (not an IP address: the service is the host's,
    /// and an address rule would open more than one name).
    ///
    /// # Errors
    ///
    /// [`HostServiceError::Malformed`].
    pub fn parse(arg: &str) -> Result<HostService, HostServiceError> {
        let bad = |why: &str| HostServiceError::Malformed {
            arg: arg.to_owned(),
            why: why.to_owned(),
        };
        let (name, port) = match arg.rsplit_once(':') {
            Some((name, port)) => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?;
                (name, Some(port))
            }
            None => (arg, None),
        };
        let name = iterion_netproxy::parse_host(name).map_err(|e| bad(&e.to_string()))?;
        if name.parse::<IpAddr>().is_ok() {
            return Err(bad("NAME must be a host name, not an address"));
        }
        if name.contains('*') {
            return Err(bad("NAME must be one host name, not a pattern"));
        }
        Ok(HostService { name, port })
    }

    /// The two proxy rules this service adds (see the module doc).
    pub(crate) fn rules(&self) -> [String; 2] {
        match self.port {
            Some(port) => [
                format!("{}:{port}", self.name),
                format!("{HOST_LOOPBACK}/32:{port}"),
            ],
            None => [self.name.clone(), format!("{HOST_LOOPBACK}/32")],
        }
    }
}

/// The static resolution the proxy gets for `services`: each name to the host's loopback.
pub(crate) fn static_hosts(services: &[HostService]) -> HashMap<String, Vec<IpAddr>> {
    services
        .iter()
        .map(|s| (s.name.clone(), vec![HOST_LOOPBACK]))
        .collect()
}

/// The one gate: host services for an untrusted run only with the operator's explicit consent.
///
/// # Errors
///
/// [`HostServiceError::Untrusted`].
pub(crate) fn check_trust(
    services: &[HostService],
    trust: Trust,
    consent: UntrustedHostServices,
) -> Result<(), HostServiceError> {
    if services.is_empty() || trust == Trust::Trusted || consent == UntrustedHostServices::Allowed {
        return Ok(());
    }
    Err(HostServiceError::Untrusted {
        hosts: services
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Whether an untrusted run may have host services (`--dangerously-allow-host-untrusted`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UntrustedHostServices {
    /// Refused (the default).
    #[default]
    Refused,
    /// The operator asked for it explicitly.
    Allowed,
}

impl UntrustedHostServices {
    /// The default (not written in the run record).
    pub(crate) fn is_refused(&self) -> bool {
        *self == UntrustedHostServices::Refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn allow_host_parses_a_name_and_an_optional_port_and_refuses_the_rest() {
        assert_eq!(
            HostService::parse("Host.Docker.Internal:11434"),
            Ok(HostService {
                name: "host.docker.internal".to_owned(),
                port: Some(11434)
            })
        );
        assert_eq!(
            HostService::parse("svc").map(|s| s.rules()),
            Ok(["svc".to_owned(), "127.0.0.1/32".to_owned()])
        );
        for bad in [
            "svc:0",
            "svc:http",
            "127.0.0.1:80",
            "*.x:80",
            ":80",
            "a b:1",
            "u@h:1",
        ] {
            assert!(
                matches!(
                    HostService::parse(bad),
                    Err(HostServiceError::Malformed { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_untrusted_run_gets_host_services_only_with_the_explicit_consent() {
        let svc = [HostService::parse("svc:5432").unwrap()];
        use UntrustedHostServices::{Allowed, Refused};
        assert_eq!(check_trust(&svc, Trust::Trusted, Refused), Ok(()));
        assert_eq!(check_trust(&[], Trust::Untrusted, Refused), Ok(()));
        assert_eq!(check_trust(&svc, Trust::Untrusted, Allowed), Ok(()));
        assert_eq!(
            check_trust(&svc, Trust::Untrusted, Refused),
            Err(HostServiceError::Untrusted {
                hosts: "svc:5432".to_owned()
            })
        );
    }
}

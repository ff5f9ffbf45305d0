//! Resolution seam (SANDBOX.md §6.6 step 1): `trait Resolver`, the system resolver and the
//! `ITERION_SANDBOX_PROXY_HOSTS` static override.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::NetProxyError;
use crate::host::canonical_host;

/// A boxed future, so the trait stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Resolves a canonical host name to its A and AAAA addresses. The proxy calls it once per
/// request, vets every answer, and connects only to those addresses.
pub trait Resolver: Send + Sync {
    /// All addresses for `host` (never an IP literal: the proxy short-circuits those). An empty
    /// answer is treated like an error.
    fn resolve<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}

/// The system resolver through tokio's `lookup_host` (getaddrinfo on the blocking pool, so no
/// runtime thread blocks).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for addr in tokio::net::lookup_host((host, 0)).await? {
                if !out.contains(&addr.ip()) {
                    out.push(addr.ip());
                }
            }
            Ok(out)
        })
    }
}

/// A static name → addresses map consulted before a fallback resolver
/// (`ITERION_SANDBOX_PROXY_HOSTS`). The resolved-address check still applies to its answers.
#[derive(Clone)]
pub struct StaticHostsResolver {
    map: HashMap<String, Vec<IpAddr>>,
    fallback: Arc<dyn Resolver>,
}

impl std::fmt::Debug for StaticHostsResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticHostsResolver")
            .field("map", &self.map)
            .finish_non_exhaustive()
    }
}

impl StaticHostsResolver {
    /// Static entries first, `fallback` for every other name.
    pub fn new(map: HashMap<String, Vec<IpAddr>>, fallback: Arc<dyn Resolver>) -> Self {
        Self { map, fallback }
    }

    /// The system resolver behind the entries of an `ITERION_SANDBOX_PROXY_HOSTS` value.
    pub fn from_env_value(value: &str) -> Result<Self, NetProxyError> {
        Ok(Self::new(
            parse_static_hosts(value)?,
            Arc::new(SystemResolver),
        ))
    }
}

impl Resolver for StaticHostsResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        match self.map.get(host) {
            Some(ips) => {
                let ips = ips.clone();
                Box::pin(async move { Ok(ips) })
            }
            None => self.fallback.resolve(host),
        }
    }
}

/// Parses `name=ip[,name=ip…]`. Names are canonicalised; a name may repeat to give several
/// addresses (kept in order); blank entries are skipped.
///
/// ```
/// use iterion_netproxy::parse_static_hosts;
/// let m = parse_static_hosts("Upstream.Test=127.0.0.1, upstream.test=::1").unwrap();
/// assert_eq!(m["upstream.test"].len(), 2);
/// assert_eq!(parse_static_hosts("nope").unwrap_err().code(), "NETPROXY_INVALID_STATIC_HOSTS");
/// ```
pub fn parse_static_hosts(value: &str) -> Result<HashMap<String, Vec<IpAddr>>, NetProxyError> {
    let mut map: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || NetProxyError::InvalidStaticHosts {
            entry: entry.to_string(),
        };
        let (name, ip) = entry.split_once('=').ok_or_else(bad)?;
        let name = canonical_host(name);
        let ip: IpAddr = ip
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| bad())?;
        if name.is_empty() {
            return Err(bad());
        }
        let ips = map.entry(name).or_default();
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    Ok(map)
}

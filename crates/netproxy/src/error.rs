//! The crate's one error enum.

use std::path::PathBuf;

/// Why a policy could not be compiled or a proxy could not start.
///
/// Codes are stable once shipped; the engine maps every one of them to `SANDBOX_SETUP_FAILED`
/// (SANDBOX.md §6.2 step 4).
#[derive(Debug, thiserror::Error)]
pub enum NetProxyError {
    /// The `network.mode` is not one of `open`, `allowlist`, `denylist` (or empty).
    #[error("invalid network mode '{mode}': use open, allowlist or denylist")]
    InvalidMode {
        /// The mode as written.
        mode: String,
    },
    /// `ITERION_SANDBOX_INSPECT_MAX_BODY` is not a size.
    #[error(
        "{text:?} is not a size; expected bytes, or a number with KiB, MiB or GiB (e.g. 64MiB)"
    )]
    InvalidSize {
        /// The value as written.
        text: String,
    },
    /// A rule is empty (or only `!`).
    #[error("network rule #{index} is empty; remove it or write a host pattern")]
    EmptyRule {
        /// Zero-based position of the rule in the compiled list.
        index: usize,
    },
    /// A rule containing `/` is not a valid CIDR.
    #[error("network rule '{rule}' is not a valid CIDR (e.g. 10.0.0.0/8)")]
    InvalidCidr {
        /// The rule as written.
        rule: String,
    },
    /// A `*` outside the forms `*`, `**`, `*.s`, `**.s`.
    #[error("network rule '{rule}': a wildcard may only be `*`, `**`, `*.domain` or `**.domain`")]
    InvalidWildcard {
        /// The rule as written.
        rule: String,
    },
    /// A rule's `:port` is not 1..=65535 in digits.
    #[error(
        "network rule '{rule}': a port is a number from 1 to 65535 (e.g. api.example.com:8443)"
    )]
    InvalidPort {
        /// The rule as written.
        rule: String,
    },
    /// A rule's host is not a DNS name or an IP address (a bad number form, a stray byte).
    #[error("network rule '{rule}': not a host name (letters, digits, '-', '_') or an IP address")]
    InvalidHost {
        /// The rule as written.
        rule: String,
    },
    /// An unknown preset name.
    #[error("unknown network preset '{name}': the only preset is iterion-default")]
    UnknownPreset {
        /// The preset as written.
        name: String,
    },
    /// `ITERION_SANDBOX_PROXY_HOSTS` is malformed.
    #[error("ITERION_SANDBOX_PROXY_HOSTS entry '{entry}' is not name=ip")]
    InvalidStaticHosts {
        /// The offending entry.
        entry: String,
    },
    /// A secret name is not usable in a placeholder.
    #[error("secret name '{name}' must be non-empty ASCII letters, digits or '_'")]
    InvalidSecretName {
        /// The name as given.
        name: String,
    },
    /// The proxy was built without any listener.
    #[error("the proxy needs a TCP address or a Unix socket path to listen on")]
    NoListener,
    /// Binding a TCP listener failed.
    #[error("could not listen on {addr}: {source}")]
    BindTcp {
        /// The requested address.
        addr: std::net::SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Binding the Unix socket failed.
    #[error("could not listen on unix socket {}: {source}", path.display())]
    BindUnix {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Minting the CA or a leaf certificate failed.
    #[error("could not mint the TLS inspection certificate for '{subject}': {source}")]
    Certificate {
        /// The CA name or the leaf host.
        subject: String,
        /// The rcgen error.
        #[source]
        source: rcgen::Error,
    },
    /// The TLS configuration was rejected (bad root, no provider).
    #[error("TLS configuration rejected: {source}")]
    Tls {
        /// The rustls error.
        #[source]
        source: rustls::Error,
    },
    /// `ITERION_SANDBOX_UPSTREAM_CA` names a file that cannot be read.
    #[error("ITERION_SANDBOX_UPSTREAM_CA: cannot read {}: {source}", path.display())]
    UpstreamCaUnreadable {
        /// The file, as named.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `ITERION_SANDBOX_UPSTREAM_CA` names a file that holds no usable PEM certificate.
    #[error(
        "ITERION_SANDBOX_UPSTREAM_CA: {} is not a PEM file of CA certificates: {reason}",
        path.display()
    )]
    UpstreamCaInvalid {
        /// The file, as named.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The OS random source failed while minting the token or a serial.
    #[error("the OS random source failed: {reason}")]
    Random {
        /// The getrandom error text.
        reason: String,
    },
}

impl NetProxyError {
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        // No `_` arm: a new variant must choose its code.
        match self {
            Self::InvalidMode { .. } => "NETPROXY_INVALID_MODE",
            Self::InvalidSize { .. } => "NETPROXY_INVALID_SIZE",
            Self::EmptyRule { .. } => "NETPROXY_EMPTY_RULE",
            Self::InvalidCidr { .. } => "NETPROXY_INVALID_CIDR",
            Self::InvalidWildcard { .. } => "NETPROXY_INVALID_WILDCARD",
            Self::InvalidPort { .. } => "NETPROXY_INVALID_PORT",
            Self::InvalidHost { .. } => "NETPROXY_INVALID_HOST",
            Self::UnknownPreset { .. } => "NETPROXY_UNKNOWN_PRESET",
            Self::InvalidStaticHosts { .. } => "NETPROXY_INVALID_STATIC_HOSTS",
            Self::InvalidSecretName { .. } => "NETPROXY_INVALID_SECRET_NAME",
            Self::NoListener => "NETPROXY_NO_LISTENER",
            Self::BindTcp { .. } => "NETPROXY_BIND_FAILED",
            Self::BindUnix { .. } => "NETPROXY_BIND_FAILED",
            Self::Certificate { .. } => "NETPROXY_CERTIFICATE_FAILED",
            Self::Tls { .. } => "NETPROXY_TLS_CONFIG",
            Self::UpstreamCaUnreadable { .. } => "NETPROXY_UPSTREAM_CA_UNREADABLE",
            Self::UpstreamCaInvalid { .. } => "NETPROXY_UPSTREAM_CA_INVALID",
            Self::Random { .. } => "NETPROXY_RANDOM_FAILED",
        }
    }
}

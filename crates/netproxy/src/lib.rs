//! iterion-netproxy: the per-run egress proxy.
//!
//! The rule matcher, presets, the CONNECT/HTTP proxy with per-run token auth, the ephemeral CA
//! for TLS inspection and secret placeholder rewriting (SANDBOX.md §6). The policy ([`decide`])
//! is pure and testable without DNS; resolution happens in the I/O shell around it, through a
//! [`Resolver`], and the proxy connects only to the addresses it vetted, never resolving twice.
//!
//! It depends on no other iterion crate: the engine hands it a compiled [`Policy`], a run id, a
//! token, where to listen, the secrets with their hosts and a `network_blocked` callback, and
//! gets back a [`RunningProxy`] with its endpoints and CA PEM. It does not decide *whether* a run
//! needs a proxy (SANDBOX.md §6.1, the engine's start rules), it does not enforce that the
//! container has no other route (the driver's `--network none` and egress bridge do), and it
//! never writes a secret value or the token to a log.
#![deny(missing_docs)]

mod addr;
mod auth;
mod ca;
mod decide;
mod dial;
mod error;
mod forms;
mod head;
mod host;
mod matcher;
mod mitm;
mod pipe;
mod preset;
mod proxy;
mod redact_stream;
mod request_body;
mod request_stream;
mod resolve;
mod response;
mod rewrite;
mod shared;
mod tunnel;
mod upstream;
mod upstream_tls;
mod websocket;
mod zerocopy;

pub use addr::{NON_PUBLIC_RANGES, canonical_ip, net_reaches_non_public};
pub use auth::{ProxyToken, decode_proxy_authorization};
pub use ca::{CA_COMMON_NAME, EphemeralCa};
pub use decide::{
    BlockReason, Decision, DecisionSource, Verdict, decide, is_non_public, name_ports,
};
pub use error::NetProxyError;
pub use forms::{FRAGMENT_LEN, SecretForms, SecretSpan, replace_spans};
pub use head::{
    HOST_ALIAS_HEADERS, HeadError, HostMismatch, MAX_HEADERS, ParsedHead, RequestTarget,
    TargetKind, canonical_host_header, check_request_host, parse_request_head, target_of,
};
pub use host::{HostError, canonical_host, parse_authority, parse_host};
pub use iterion_vocab::NetworkMode;
pub use matcher::{DEFAULT_RULE_PORTS, HostPattern, Policy, Rule, compile, parse_network_mode};
pub use mitm::{MAX_INSPECTED_HEAD_BYTES, MAX_INSPECTED_STREAMS};
pub use preset::{
    ITERION_DEFAULT_PRESET, ITERION_DEFAULT_RULES, SILENT_DENY_HOSTS, compile_with_preset,
    is_silent_deny, preset_rules,
};
pub use proxy::{
    DEFAULT_INSPECT_MAX_BODY, MAX_PROXY_HEAD_BYTES, NAME_METHOD, NAME_PORTS_HEADER, ProxyBuilder,
    RunningProxy, parse_inspect_max_body,
};
pub use redact_stream::ResponseRedactor;
pub use resolve::{BoxFuture, Resolver, StaticHostsResolver, SystemResolver, parse_static_hosts};
pub use response::{POLICY_REASON_HEADER, UPSTREAM_ERROR_HEADER};
pub use rewrite::{
    HEADER_GROWTH_BUDGET, MIN_SCANNED_VALUE_LEN, Secret, SecretKind, SecretRewriter,
    is_model_api_request, placeholder_for,
};
/// The DER certificate type of [`ProxyBuilder::extra_upstream_roots`], re-exported so that
/// callers always name the version this crate uses.
pub use rustls::pki_types::CertificateDer;
pub use shared::{BLOCKED_HOSTS_MAX, BlockedCallback, BlockedEvent, SECRET_POLICY_REASON};
pub use upstream_tls::{UPSTREAM_CA_ENV, load_upstream_roots};

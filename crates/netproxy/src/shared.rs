//! The state one running proxy shares between its connections, and the decisions every path
//! takes through it: counting a refusal (`network_blocked`), vetting a target (policy, secret in
//! the name, resolution, the resolved-address check), and the secret-policy refusal.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use hyper_util::client::legacy::Client;
use tokio_util::sync::CancellationToken;

use crate::addr::canonical_ip;
use crate::auth::ProxyToken;
use crate::ca::EphemeralCa;
use crate::decide::{BlockReason, Verdict, decide};
use crate::dial::VettedConnector;
use crate::head::RequestTarget;
use crate::matcher::Policy;
use crate::resolve::Resolver;
use crate::response::{IO_TIMEOUT, ProxyBody, policy_denied, text};
use crate::rewrite::SecretRewriter;

pub(crate) struct Shared {
    pub run_id: String,
    pub policy: Policy,
    pub token: ProxyToken,
    pub resolver: Arc<dyn Resolver>,
    pub rewriter: Option<Arc<SecretRewriter>>,
    pub ca: Option<Arc<EphemeralCa>>,
    pub upstream_tls: crate::upstream_tls::UpstreamTls,
    pub max_body: usize,
    pub blocked: Mutex<HashMap<(String, BlockReason), u64>>,
    /// Refusals of a `(host, reason)` not itemised in `blocked` (it holds
    /// [`BLOCKED_HOSTS_MAX`] already).
    pub blocked_beyond: std::sync::atomic::AtomicU64,
    pub on_blocked: Option<BlockedCallback>,
    pub client: Client<VettedConnector, crate::request_body::RequestBody>,
    pub connector: VettedConnector,
    pub cancel: CancellationToken,
}

/// The most `(host, reason)` pairs one proxy itemises (one `network_blocked` event and one
/// shutdown log line each). The host is the sandbox's to choose: `<n>.evil.test` for every `n`
/// would otherwise grow the proxy's memory, the store's events and the run log without end.
/// Past it, a refusal of a new pair is still a refusal, counted in
/// [`RunningProxy::blocked_beyond`](crate::RunningProxy::blocked_beyond), with no event.
pub const BLOCKED_HOSTS_MAX: usize = 1000;

impl Shared {
    /// Counts a refusal and emits `network_blocked` on the first of each `(host, reason)`, for
    /// at most [`BLOCKED_HOSTS_MAX`] pairs.
    pub(crate) fn blocked(&self, host: &str, reason: BlockReason, silent: bool) {
        tracing::info!(run_id = %self.run_id, host, reason = reason.as_str(), "egress refused");
        let first = match self.blocked.lock() {
            Ok(mut m) => {
                let key = (host.to_string(), reason);
                if let Some(c) = m.get_mut(&key) {
                    *c += 1;
                    false
                } else if m.len() < BLOCKED_HOSTS_MAX {
                    m.insert(key, 1);
                    true
                } else {
                    self.blocked_beyond
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    false
                }
            }
            Err(_) => false,
        };
        if first
            && !silent
            && let Some(cb) = &self.on_blocked
        {
            cb(BlockedEvent {
                host: host.to_string(),
                reason,
                run_id: self.run_id.clone(),
            });
        }
    }

    /// Policy, then resolution, then the resolved-address check. Returns the vetted addresses
    /// in resolver order.
    pub(crate) async fn vet(
        &self,
        target: &RequestTarget,
    ) -> Result<Vec<SocketAddr>, Response<ProxyBody>> {
        let host = target.host.as_str();
        let pre = decide(&self.policy, host, target.port, &[]);
        if pre.verdict == Verdict::Deny {
            let reason = pre.reason.unwrap_or(BlockReason::PolicyDenial);
            self.blocked(host, reason, pre.silent);
            return Err(policy_denied(host));
        }
        // A secret in the name itself would leave through the resolver (DNS) before any request.
        if let Some(refused) = refuse_secret_in_host(self, host) {
            return Err(refused);
        }
        let ips = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => match tokio::time::timeout(IO_TIMEOUT, self.resolver.resolve(host)).await {
                Ok(Ok(ips)) if !ips.is_empty() => ips,
                Ok(Ok(_)) | Ok(Err(_)) | Err(_) => {
                    tracing::info!(host, "egress resolution failed");
                    return Err(text(
                        StatusCode::BAD_GATEWAY,
                        format!("could not resolve '{host}'"),
                    ));
                }
            },
        };
        // What a dual-stack socket would reach: an IPv4-mapped answer is dialled (and judged) as
        // its IPv4 address.
        let mut canonical: Vec<IpAddr> = Vec::with_capacity(ips.len());
        for ip in ips.into_iter().map(canonical_ip) {
            if !canonical.contains(&ip) {
                canonical.push(ip);
            }
        }
        let ips = canonical;
        let d = decide(&self.policy, host, target.port, &ips);
        if d.verdict == Verdict::Deny {
            self.blocked(
                host,
                d.reason.unwrap_or(BlockReason::PolicyDenial),
                d.silent,
            );
            return Err(policy_denied(host));
        }
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, target.port))
            .collect())
    }
}

/// `X-Iterion-Reason` on inspection refusals.
pub const SECRET_POLICY_REASON: &str = "sandbox secret policy";

/// A `403` when the target host name itself carries a secret in any form (a value as DNS
/// labels would be exfiltrated by resolving it), before anything is resolved or dialled.
pub(crate) fn refuse_secret_in_host(shared: &Shared, host: &str) -> Option<Response<ProxyBody>> {
    let rw = shared.rewriter.as_ref()?;
    rw.exfiltrates_to(host.as_bytes(), host)?;
    Some(refuse(
        shared,
        host,
        StatusCode::FORBIDDEN,
        BlockReason::SecretExfiltration,
    ))
}

pub(crate) fn refuse(
    shared: &Shared,
    host: &str,
    status: StatusCode,
    reason: BlockReason,
) -> Response<ProxyBody> {
    shared.blocked(host, reason, false);
    refused(status, reason)
}

/// The refusal [`refuse`] answers, without counting it (the caller already did).
pub(crate) fn refused(status: StatusCode, reason: BlockReason) -> Response<ProxyBody> {
    let body = match reason {
        BlockReason::SecretExfiltration => "blocked by sandbox secret policy".to_string(),
        other => format!("{}: {}", status.as_u16(), other.as_str()),
    };
    let mut r = text(status, body);
    r.headers_mut().insert(
        "x-iterion-reason",
        HeaderValue::from_static(SECRET_POLICY_REASON),
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// A `network_blocked` event: `{host, reason, run_id}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedEvent {
    /// The canonical host refused.
    pub host: String,
    /// Why.
    pub reason: BlockReason,
    /// The run.
    pub run_id: String,
}

/// Receives `network_blocked` events, at most one per distinct `(host, reason)`. It runs on a
/// runtime thread: keep it non-blocking (send into a channel).
pub type BlockedCallback = Arc<dyn Fn(BlockedEvent) + Send + Sync>;

//! CONNECT tunnels without inspection, dialing vetted addresses, and the pooled client's
//! connector (SANDBOX.md §6.4).

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;

use crate::dial::dial;
use crate::head::RequestTarget;
use crate::response::{ProxyBody, established};
use crate::shared::Shared;

/// Handles an authorised, vetted CONNECT.
pub(crate) async fn connect(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    target: RequestTarget,
    vetted: Vec<SocketAddr>,
) -> Response<ProxyBody> {
    if shared.ca.is_some() {
        return crate::mitm::intercept(shared, req, target, vetted);
    }
    let upstream = match dial(&vetted).await {
        Ok(s) => s,
        Err(e) => {
            tracing::info!(host = %target.host, error = %e, "tunnel dial failed");
            return crate::response::upstream_unreachable(
                &format!("{}:{}", target.host, target.port),
                &crate::response::root_cause(&e),
            );
        }
    };
    let cancel = shared.cancel.clone();
    let host = target.host.clone();
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(up) => relay_upgraded(up, upstream, &cancel).await,
            Err(e) => tracing::debug!(host, error = %e, "tunnel upgrade failed"),
        }
    });
    established()
}

/// Relays an upgraded CONNECT: when hyper hands back the plain socket it served (TCP, or the
/// Unix socket of the egress bridge), the bytes it had already read go first and then the kernel
/// splices the rest ([`crate::zerocopy`]); any other connection takes the generic copy.
async fn relay_upgraded(up: Upgraded, mut upstream: TcpStream, cancel: &CancellationToken) {
    let up = match up.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => {
            if upstream.write_all(&parts.read_buf).await.is_ok() {
                spliced(parts.io.into_inner(), upstream, cancel).await;
            }
            return;
        }
        Err(up) => up,
    };
    let up = match up.downcast::<TokioIo<UnixStream>>() {
        Ok(parts) => {
            if upstream.write_all(&parts.read_buf).await.is_ok() {
                spliced(parts.io.into_inner(), upstream, cancel).await;
            }
            return;
        }
        Err(up) => up,
    };
    crate::pipe::splice(TokioIo::new(up), upstream, cancel).await;
}

/// Both directions through `splice(2)`, with [`crate::pipe::splice`]'s closing rules.
async fn spliced<C>(client: C, upstream: TcpStream, cancel: &CancellationToken)
where
    C: crate::zerocopy::SpliceSocket,
{
    let up = crate::zerocopy::relay(&client, &upstream);
    let down = crate::zerocopy::relay(&upstream, &client);
    crate::pipe::close_together(up, down, cancel).await;
}

//! The inspected tunnel's upstream side (SANDBOX.md §6.9 step 3): a verified TLS connection per
//! request over HTTP/1.1, and the one connection per tunnel that an HTTP/2 upstream multiplexes.
//!
//! The client's protocol decides what is offered upstream: a client that negotiated `h2` gets an
//! upstream offered `h2` and `http/1.1` (an upstream that only speaks HTTP/1.1 then gets each
//! request on a connection of its own, translated by hyper); a client on HTTP/1.1 gets an
//! upstream offered `http/1.1` only, so nothing changes for it. A WebSocket handshake always goes
//! over a fresh HTTP/1.1 connection (an `Upgrade` has no HTTP/2 form upstream that every server
//! speaks), whatever the client used.

use std::net::SocketAddr;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use tokio::sync::Mutex;
use tokio_rustls::TlsConnector;

use crate::dial::dial;
use crate::request_body::{BoxError, RequestBody};
use crate::response::IO_TIMEOUT;
use crate::shared::Shared;

/// What a tunnel offers its upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// `http/1.1` only: an HTTP/1.1 client, or a WebSocket handshake.
    Http1,
    /// `h2`, then `http/1.1`: an HTTP/2 client.
    Http2,
}

/// One inspected tunnel's upstream: its target's vetted addresses, and the HTTP/2 connection
/// once there is one (shared by every stream of the tunnel).
pub(crate) struct TunnelUpstream {
    host: String,
    vetted: Vec<SocketAddr>,
    h2: Mutex<Option<hyper::client::conn::http2::SendRequest<RequestBody>>>,
}

impl TunnelUpstream {
    pub(crate) fn new(host: String, vetted: Vec<SocketAddr>) -> Self {
        Self {
            host,
            vetted,
            h2: Mutex::new(None),
        }
    }

    /// The tunnel's target host.
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// A fresh verified TLS connection to the target offering `offer`.
    async fn connect(
        &self,
        shared: &Shared,
        offer: Offer,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, BoxError> {
        let tcp = dial(&self.vetted).await?;
        let name = ServerName::try_from(self.host.clone())?;
        let cfg = match offer {
            Offer::Http1 => shared.upstream_tls.h1.clone(),
            Offer::Http2 => shared.upstream_tls.h2.clone(),
        };
        Ok(tokio::time::timeout(IO_TIMEOUT, TlsConnector::from(cfg).connect(name, tcp)).await??)
    }

    /// Sends `req` (its URI in absolute form, `https://host[:port]/path`): over the tunnel's
    /// HTTP/2 connection when the upstream speaks it, else over a fresh HTTP/1.1 connection in
    /// origin form with a `Host` header.
    pub(crate) async fn send(
        &self,
        shared: &Shared,
        offer: Offer,
        mut req: Request<RequestBody>,
    ) -> Result<Response<Incoming>, BoxError> {
        if offer == Offer::Http2 {
            let mut cached = self.h2.lock().await;
            if let Some(sender) = cached.as_mut()
                && !sender.is_closed()
            {
                let mut sender = sender.clone();
                drop(cached);
                return Ok(sender.send_request(req).await?);
            }
            let tls = self.connect(shared, Offer::Http2).await?;
            if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                    .timer(TokioTimer::new())
                    .handshake(TokioIo::new(tls))
                    .await?;
                spawn_conn(shared, conn);
                *cached = Some(sender.clone());
                drop(cached);
                let mut sender = sender;
                *req.version_mut() = http::Version::HTTP_2;
                return Ok(sender.send_request(req).await?);
            }
            drop(cached);
            return self.send_http1(shared, tls, req).await;
        }
        let tls = self.connect(shared, Offer::Http1).await?;
        self.send_http1(shared, tls, req).await
    }

    async fn send_http1(
        &self,
        shared: &Shared,
        tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
        mut req: Request<RequestBody>,
    ) -> Result<Response<Incoming>, BoxError> {
        to_origin_form(&mut req)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        spawn_conn(shared, conn.with_upgrades());
        Ok(sender.send_request(req).await?)
    }

    /// A WebSocket handshake (`req` an HTTP/1.1 `GET` with `Upgrade: websocket`) over a fresh
    /// HTTP/1.1 connection; the response is the upstream's (a `101` carries the upgrade).
    pub(crate) async fn send_upgrade(
        &self,
        shared: &Shared,
        req: Request<RequestBody>,
    ) -> Result<Response<Incoming>, BoxError> {
        let tls = self.connect(shared, Offer::Http1).await?;
        self.send_http1(shared, tls, req).await
    }
}

/// An absolute-form request as HTTP/1.1 sends it: the path and query only (the `Host` header,
/// set by the caller, names the target).
fn to_origin_form(req: &mut Request<RequestBody>) -> Result<(), BoxError> {
    let pq = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *req.uri_mut() = pq.parse()?;
    *req.version_mut() = http::Version::HTTP_11;
    Ok(())
}

fn spawn_conn<C>(shared: &Shared, conn: C)
where
    C: Future + Send + 'static,
{
    let cancel = shared.cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = conn => {}
            _ = cancel.cancelled() => {}
        }
    });
}

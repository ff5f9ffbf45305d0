//! The inspected tunnel's upstream side (SANDBOX.md §6.9 step 3): the verified TLS client, the
//! extra roots an operator trusts (`ITERION_SANDBOX_UPSTREAM_CA`), and the one connection per
//! tunnel that an HTTP/2 upstream multiplexes.
//!
//! The client's protocol decides what is offered upstream: a client that negotiated `h2` gets an
//! upstream offered `h2` and `http/1.1` (an upstream that only speaks HTTP/1.1 then gets each
//! request on a connection of its own, translated by hyper); a client on HTTP/1.1 gets an
//! upstream offered `http/1.1` only, so nothing changes for it. A WebSocket handshake always goes
//! over a fresh HTTP/1.1 connection (an `Upgrade` has no HTTP/2 form upstream that every server
//! speaks), whatever the client used.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::sync::Mutex;
use tokio_rustls::TlsConnector;

use crate::dial::dial;
use crate::error::NetProxyError;
use crate::response::{IO_TIMEOUT, ProxyBody};
use crate::shared::Shared;

/// The variable naming a PEM file of extra roots for the proxy's upstream TLS client: operators
/// behind a corporate TLS proxy, and tests with a local HTTPS server. Read by the caller (the
/// engine, from the environment the CLI hands down) and loaded with [`load_upstream_roots`].
pub const UPSTREAM_CA_ENV: &str = "ITERION_SANDBOX_UPSTREAM_CA";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The certificates of a PEM file (one or more `CERTIFICATE` blocks; other blocks are ignored),
/// each checked to be a certificate a root store accepts.
///
/// # Errors
///
/// [`NetProxyError::UpstreamCaUnreadable`] when the file cannot be read,
/// [`NetProxyError::UpstreamCaInvalid`] when it holds no certificate or one that does not parse;
/// both name [`UPSTREAM_CA_ENV`] and the path.
pub fn load_upstream_roots(path: &Path) -> Result<Vec<CertificateDer<'static>>, NetProxyError> {
    let bytes = std::fs::read(path).map_err(|source| NetProxyError::UpstreamCaUnreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |reason: String| NetProxyError::UpstreamCaInvalid {
        path: path.to_path_buf(),
        reason,
    };
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| invalid(format!("not PEM: {e}")))?;
        rustls::RootCertStore::empty()
            .add(cert.clone())
            .map_err(|e| invalid(format!("certificate #{} rejected: {e}", certs.len() + 1)))?;
        certs.push(cert);
    }
    if certs.is_empty() {
        return Err(invalid("no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

/// The two upstream TLS clients: webpki roots plus the injected extra roots, one offering
/// `http/1.1` only and one offering `h2` first.
pub(crate) struct UpstreamTls {
    h1: Arc<rustls::ClientConfig>,
    h2: Arc<rustls::ClientConfig>,
}

impl UpstreamTls {
    pub(crate) fn new(extra_roots: &[CertificateDer<'static>]) -> Result<Self, NetProxyError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for r in extra_roots {
            roots
                .add(r.clone())
                .map_err(|source| NetProxyError::Tls { source })?;
        }
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|source| NetProxyError::Tls { source })?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut h1 = cfg.clone();
        h1.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut h2 = cfg;
        h2.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            h1: Arc::new(h1),
            h2: Arc::new(h2),
        })
    }
}

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
    h2: Mutex<Option<hyper::client::conn::http2::SendRequest<ProxyBody>>>,
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
        mut req: Request<ProxyBody>,
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
        mut req: Request<ProxyBody>,
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
        req: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, BoxError> {
        let tls = self.connect(shared, Offer::Http1).await?;
        self.send_http1(shared, tls, req).await
    }
}

/// An absolute-form request as HTTP/1.1 sends it: the path and query only (the `Host` header,
/// set by the caller, names the target).
fn to_origin_form(req: &mut Request<ProxyBody>) -> Result<(), BoxError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_upstream_ca_file_must_hold_certificates_and_errors_name_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let ca = crate::EphemeralCa::new(std::time::Duration::from_secs(60)).unwrap();
        let two = dir.path().join("two.pem");
        std::fs::write(&two, format!("{}\n{}", ca.cert_pem(), ca.cert_pem())).unwrap();
        assert_eq!(load_upstream_roots(&two).unwrap().len(), 2);
        let missing = dir.path().join("missing.pem");
        let e = load_upstream_roots(&missing).unwrap_err();
        assert_eq!(e.code(), "NETPROXY_UPSTREAM_CA_UNREADABLE");
        assert!(e.to_string().contains(UPSTREAM_CA_ENV), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = load_upstream_roots(&empty).unwrap_err();
        assert_eq!(e.code(), "NETPROXY_UPSTREAM_CA_INVALID");
        assert!(
            e.to_string().contains(UPSTREAM_CA_ENV) && e.to_string().contains("empty.pem"),
            "{e}"
        );
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = load_upstream_roots(&garbage).unwrap_err();
        assert_eq!(e.code(), "NETPROXY_UPSTREAM_CA_INVALID", "{e}");
    }
}

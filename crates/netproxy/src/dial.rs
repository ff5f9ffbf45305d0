//! Dialing only what was vetted: the vetted addresses in order, and the pooled client's
//! connector, which never resolves a name.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::host::canonical_host;
use crate::resolve::BoxFuture;
use crate::response::IO_TIMEOUT;

/// Connects to the vetted addresses in order, within 10 s overall. Never resolves.
pub(crate) async fn dial(addrs: &[SocketAddr]) -> io::Result<TcpStream> {
    let deadline = tokio::time::Instant::now() + IO_TIMEOUT;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no vetted address");
    for addr in addrs {
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = e,
            Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "dial timed out")),
        }
    }
    Err(last)
}

/// `(host, port)` → the addresses vetted for it most recently.
type VettedMap = HashMap<(String, u16), Vec<SocketAddr>>;

/// The pooled client's connector: dials only addresses the handler vetted for this
/// `(host, port)` just before sending, so the pool never resolves a name.
#[derive(Clone, Debug, Default)]
pub(crate) struct VettedConnector {
    vetted: Arc<Mutex<VettedMap>>,
}

impl VettedConnector {
    pub(crate) fn remember(&self, host: &str, port: u16, addrs: Vec<SocketAddr>) {
        if let Ok(mut m) = self.vetted.lock() {
            m.insert((host.to_string(), port), addrs);
        }
    }
}

impl tower_service::Service<Uri> for VettedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = BoxFuture<'static, io::Result<Self::Response>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let host = canonical_host(uri.host().unwrap_or_default());
        let port = uri.port_u16().unwrap_or(80);
        let addrs = self
            .vetted
            .lock()
            .ok()
            .and_then(|m| m.get(&(host, port)).cloned())
            .unwrap_or_default();
        Box::pin(async move { dial(&addrs).await.map(TokioIo::new) })
    }
}

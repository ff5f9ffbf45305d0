//! A small HTTP/1.1 client for model calls: one `POST` per connection, over TCP or TLS, directly
//! or through an HTTP proxy (`CONNECT` for `https://`, absolute-form for `http://`).
//!
//! Why not a general client crate: the runner is a static binary that runs in any image, where
//! name resolution through NSS is unavailable (scripts/build-static.sh), and its only route out
//! is the run's proxy at an IP literal (SANDBOX.md §6.11). This client dials exactly what it is
//! given, trusts the webpki roots plus the PEM file named by `SSL_CERT_FILE` (the proxy's
//! ephemeral CA under TLS inspection). In the runner it never consults `NO_PROXY` (which lists
//! 127.0.0.1): model traffic from the runner always leaves through the proxy (§13.1). In the
//! engine process (no sandbox) it honours `HTTPS_PROXY`/`HTTP_PROXY` and `NO_PROXY` as usual.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use iterion_vocab::Environment;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one model request may take, answer included.
pub const MODEL_TIMEOUT: Duration = Duration::from_secs(600);
/// The largest response body read (a model answer is far smaller).
pub(crate) const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// The largest proxy `CONNECT` answer head.
const MAX_CONNECT_HEAD: usize = 16 * 1024;

/// Why a request did not get an HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL is not `http(s)://host[:port]/…`.
    #[error("bad URL {url:?}")]
    BadUrl {
        /// The URL.
        url: String,
    },
    /// TCP connect, TLS or I/O failed.
    #[error("{what}: {message}")]
    Transport {
        /// The step that failed.
        what: &'static str,
        /// Its error.
        message: String,
    },
    /// The proxy refused the tunnel.
    #[error("the proxy answered {status} to CONNECT {authority}")]
    ProxyRefused {
        /// The proxy's status code.
        status: u16,
        /// The tunnel's target.
        authority: String,
    },
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl HttpError {
    /// Transport failures are worth a retry; a bad URL or a refused tunnel is not.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, HttpError::Transport { .. } | HttpError::Timeout(_))
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct HttpResponse {
    pub status: u16,
    /// `retry-after` in seconds, when present and numeric.
    pub retry_after: Option<Duration>,
    /// `content-type`, when present and text.
    pub content_type: Option<String>,
    /// `location`, when present and text.
    pub location: Option<String>,
    pub body: Bytes,
}

/// An HTTP proxy: `http://[user:pass@]host:port`.
#[derive(Clone)]
pub struct ProxyUrl {
    authority: String,
    auth: Option<String>,
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyUrl")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

impl ProxyUrl {
    /// Parses `http://[user:pass@]host:port`; `None` for anything else.
    pub fn parse(text: &str) -> Option<ProxyUrl> {
        let rest = text.trim().strip_prefix("http://")?;
        let rest = rest.trim_end_matches('/');
        let (userinfo, authority) = match rest.rsplit_once('@') {
            Some((u, a)) => (Some(u), a),
            None => (None, rest),
        };
        if authority.is_empty() || authority.contains('/') {
            return None;
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.contains(']'))
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let auth = userinfo.map(|u| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(u)
            )
        });
        Some(ProxyUrl { authority, auth })
    }

    /// The proxy from `env`'s `HTTPS_PROXY`/`https_proxy` (for `https://` targets) or
    /// `HTTP_PROXY`/`http_proxy`.
    pub(crate) fn from_env(https: bool, env: &Environment) -> Option<ProxyUrl> {
        let names: &[&str] = if https {
            &["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
        } else {
            &["HTTP_PROXY", "http_proxy"]
        };
        names
            .iter()
            .filter_map(|n| env.get(n))
            .find_map(|v| ProxyUrl::parse(&v))
    }
}

/// Whether requests go direct or through a proxy.
#[derive(Clone, Debug)]
pub enum Route {
    /// The engine process (no sandbox): the client's environment's proxy, unless `NO_PROXY`
    /// names the target host.
    HostEnv,
    /// Through the client's environment's `HTTPS_PROXY`/`HTTP_PROXY` when set (the runner).
    EnvProxy,
    /// Through this proxy.
    #[cfg_attr(not(test), allow(dead_code))]
    Proxy(ProxyUrl),
}

/// The client.
#[derive(Clone)]
pub struct HttpClient {
    route: Route,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
    /// Where [`Route::HostEnv`] and [`Route::EnvProxy`] find their proxy variables.
    env: Environment,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("route", &self.route)
            .finish_non_exhaustive()
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl HttpClient {
    /// A client with the webpki roots and the PEM certificates of `env`'s `SSL_CERT_FILE`, when
    /// set (the proxy's ephemeral CA under TLS inspection, SANDBOX.md §6.11); its route's proxy
    /// variables are read from `env` too.
    pub fn new(
        route: Route,
        timeout: Duration,
        env: &Environment,
    ) -> Result<HttpClient, HttpError> {
        let extra = env
            .get_os("SSL_CERT_FILE")
            .filter(|p| !p.is_empty())
            .and_then(|path| std::fs::read(path).ok())
            .unwrap_or_default();
        let mut client = HttpClient::with_roots(route, timeout, &extra)?;
        client.env = env.clone();
        Ok(client)
    }

    /// A client with the webpki roots and the certificates of the PEM text `extra_pem`.
    pub(crate) fn with_roots(
        route: Route,
        timeout: Duration,
        extra_pem: &[u8],
    ) -> Result<HttpClient, HttpError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for der in pem_certificates(extra_pem) {
            let _ = roots.add(rustls::pki_types::CertificateDer::from(der));
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpError::Transport {
            what: "TLS setup",
            message: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(HttpClient {
            route,
            tls: Arc::new(tls),
            timeout,
            env: Environment::empty(),
        })
    }

    /// `POST url` with `headers` and a JSON body; reads the whole answer (≤ 32 MiB).
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> Result<HttpResponse, HttpError> {
        let request = self.send(
            http::Method::POST,
            url,
            headers,
            Some(body),
            MAX_RESPONSE_BYTES,
        );
        tokio::time::timeout(self.timeout, request)
            .await
            .unwrap_or(Err(HttpError::Timeout(self.timeout)))
    }

    /// `GET url` with `headers`, by the same route as the model calls (under a sandbox: the
    /// run's proxy); reads at most `max` bytes of the answer (more is an error). No redirect is
    /// followed.
    pub(crate) async fn get(
        &self,
        url: &str,
        headers: &[(&str, String)],
        max: usize,
    ) -> Result<HttpResponse, HttpError> {
        let request = self.send(http::Method::GET, url, headers, None, max);
        tokio::time::timeout(self.timeout, request)
            .await
            .unwrap_or(Err(HttpError::Timeout(self.timeout)))
    }

    async fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: &[(&str, String)],
        body: Option<Vec<u8>>,
        max: usize,
    ) -> Result<HttpResponse, HttpError> {
        let bad = || HttpError::BadUrl {
            url: url.to_owned(),
        };
        let uri: http::Uri = url.parse().map_err(|_| bad())?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad()),
        };
        let host = uri.host().ok_or_else(bad)?.to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let authority = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let proxy = match &self.route {
            Route::EnvProxy => ProxyUrl::from_env(https, &self.env),
            Route::HostEnv => {
                let no_proxy = self
                    .env
                    .get("NO_PROXY")
                    .or_else(|| self.env.get("no_proxy"))
                    .unwrap_or_default();
                ProxyUrl::from_env(https, &self.env).filter(|_| !no_proxy_matches(&no_proxy, &host))
            }
            Route::Proxy(p) => Some(p.clone()),
        };
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let transport = |what: &'static str| {
            move |e: std::io::Error| HttpError::Transport {
                what,
                message: e.to_string(),
            }
        };
        let tcp = match &proxy {
            Some(p) => TcpStream::connect(p.authority.as_str())
                .await
                .map_err(transport("connect to the proxy"))?,
            None => TcpStream::connect(authority.as_str())
                .await
                .map_err(transport("connect"))?,
        };
        let _ = tcp.set_nodelay(true);
        let mut target = path.clone();
        let stream: Box<dyn Io> = match (&proxy, https) {
            (Some(p), true) => {
                let tunnel = connect_tunnel(tcp, &authority, p.auth.as_deref()).await?;
                Box::new(self.tls_wrap(tunnel, &host).await?)
            }
            (Some(_), false) => {
                target = format!("http://{authority}{path}");
                Box::new(tcp)
            }
            (None, true) => Box::new(self.tls_wrap(tcp, &host).await?),
            (None, false) => Box::new(tcp),
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| HttpError::Transport {
                what: "HTTP handshake",
                message: e.to_string(),
            })?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut builder = http::Request::builder()
            .method(method)
            .uri(target)
            .header(http::header::HOST, authority.as_str());
        if let Some(body) = &body {
            builder = builder
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::CONTENT_LENGTH, body.len());
        }
        if let (Some(p), false) = (&proxy, https)
            && let Some(auth) = &p.auth
        {
            builder = builder.header(http::header::PROXY_AUTHORIZATION, auth.as_str());
        }
        for (name, value) in headers {
            builder = builder.header(*name, value.as_str());
        }
        let request = builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| HttpError::Transport {
                what: "build request",
                message: e.to_string(),
            })?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| HttpError::Transport {
                what: "send request",
                message: e.to_string(),
            })?;
        let status = response.status().as_u16();
        // The proxy could not reach the model server: the connect error it would have been
        // without the proxy (and retried as such).
        if status == 502
            && proxy.is_some()
            && let Some(reason) = upstream_error(response.headers())
        {
            driver.abort();
            return Err(HttpError::Transport {
                what: "connect",
                message: reason,
            });
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(3600.0)));
        let header_text = |name: http::header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header_text(http::header::CONTENT_TYPE);
        let location = header_text(http::header::LOCATION);
        let body = Limited::new(response.into_body(), max)
            .collect()
            .await
            .map_err(|e| HttpError::Transport {
                what: "read response",
                message: e.to_string(),
            })?
            .to_bytes();
        driver.abort();
        Ok(HttpResponse {
            status,
            retry_after,
            content_type,
            location,
            body,
        })
    }

    async fn tls_wrap<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
        &self,
        stream: S,
        host: &str,
    ) -> Result<tokio_rustls::client::TlsStream<S>, HttpError> {
        let name =
            rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
                .map_err(|e| HttpError::Transport {
                    what: "TLS server name",
                    message: e.to_string(),
                })?;
        tokio_rustls::TlsConnector::from(Arc::clone(&self.tls))
            .connect(name, stream)
            .await
            .map_err(|e| HttpError::Transport {
                what: "TLS handshake",
                message: e.to_string(),
            })
    }
}

/// Whether a `NO_PROXY` list (comma-separated host names, domain suffixes with or without a
/// leading `.`, IP literals, `*` for all; ports ignored) names `host`.
pub(crate) fn no_proxy_matches(list: &str, host: &str) -> bool {
    let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
    list.split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            let entry = entry.trim_start_matches("*.").trim_start_matches('.');
            let entry = match entry.rsplit_once(':') {
                Some((name, port))
                    if port.chars().all(|c| c.is_ascii_digit()) && !name.contains(':') =>
                {
                    name
                }
                _ => entry,
            };
            let entry = entry.trim_matches(['[', ']']);
            host == entry || host.ends_with(&format!(".{entry}"))
        })
}

/// `CONNECT authority` through an open proxy connection; `Ok` once the proxy answered 2xx.
async fn connect_tunnel(
    mut tcp: TcpStream,
    authority: &str,
    auth: Option<&str>,
) -> Result<TcpStream, HttpError> {
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = auth {
        head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    let io = |e: std::io::Error| HttpError::Transport {
        what: "proxy CONNECT",
        message: e.to_string(),
    };
    tcp.write_all(head.as_bytes()).await.map_err(io)?;
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_CONNECT_HEAD {
            return Err(HttpError::Transport {
                what: "proxy CONNECT",
                message: "answer head too long".to_owned(),
            });
        }
        let n = tcp.read(&mut byte).await.map_err(io)?;
        if n == 0 {
            return Err(HttpError::Transport {
                what: "proxy CONNECT",
                message: "the proxy closed the connection".to_owned(),
            });
        }
        answer.push(byte[0]);
    }
    let head = std::str::from_utf8(&answer).ok();
    let status = head
        .and_then(|s| s.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    // The proxy could not reach the upstream: the connect error it would have been without it.
    let reason = head.and_then(|h| {
        h.split("\r\n").skip(1).find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case(iterion_vocab::UPSTREAM_ERROR_HEADER)
                .then(|| value.trim().to_owned())
                .filter(|v| !v.is_empty())
        })
    });
    if (200..300).contains(&status) {
        Ok(tcp)
    } else if let (502, Some(message)) = (status, reason) {
        Err(HttpError::Transport {
            what: "connect",
            message,
        })
    } else {
        Err(HttpError::ProxyRefused {
            status,
            authority: authority.to_owned(),
        })
    }
}

/// The egress proxy's [`iterion_vocab::UPSTREAM_ERROR_HEADER`], when it set one.
fn upstream_error(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(iterion_vocab::UPSTREAM_ERROR_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The DER bytes of every `CERTIFICATE` block of a PEM text.
fn pem_certificates(text: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    while let Some(start) = rest.find(BEGIN) {
        let after = &rest[start + BEGIN.len()..];
        let Some(end) = after.find(END) else {
            break;
        };
        let b64: String = after[..end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64) {
            out.push(der);
        }
        rest = &after[end + END.len()..];
    }
    out
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod through_the_proxy;

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn proxy_urls_carry_basic_auth_and_a_default_port() {
        let p = ProxyUrl::parse("http://t:secret@127.0.0.1:3128").unwrap();
        assert_eq!(p.authority, "127.0.0.1:3128");
        assert_eq!(p.auth.as_deref(), Some("Basic dDpzZWNyZXQ="));
        assert!(!format!("{p:?}").contains("secret"));
        assert_eq!(
            ProxyUrl::parse("http://proxy").unwrap().authority,
            "proxy:80"
        );
        assert!(ProxyUrl::parse("socks5://x:1").is_none());
    }

    #[test]
    fn no_proxy_lists_match_hosts_suffixes_ips_and_star() {
        let list = "localhost, .internal.example,10.0.0.7:8080,[::1]";
        for (host, expected) in [
            ("localhost", true),
            ("api.internal.example", true),
            ("internal.example", true),
            ("notinternal.example", false),
            ("10.0.0.7", true),
            ("::1", true),
            ("api.anthropic.com", false),
        ] {
            assert_eq!(no_proxy_matches(list, host), expected, "{host}");
        }
        assert!(no_proxy_matches("*", "anything"));
        assert!(!no_proxy_matches("", "anything"));
    }

    #[test]
    fn pem_blocks_are_decoded() {
        let pem = b"junk\n-----BEGIN CERTIFICATE-----\nAAEC\nAw==\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_certificates(pem), vec![vec![0u8, 1, 2, 3]]);
    }
}

//! The request head: what a CONNECT or plain-HTTP request asks for (SANDBOX.md §6.4 "Host").
//!
//! [`target_of`] is what the proxy runs on every request hyper parsed; [`parse_request_head`]
//! wraps it with a byte-level parser so the whole path (request line, headers,
//! `Proxy-Authorization` decoding, host canonicalisation) can be fuzzed.

use http::{HeaderMap, HeaderValue, Method, Uri};

use crate::auth::decode_proxy_authorization;
use crate::host::{HostError, authority_for, parse_authority};

/// How the request reaches its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// `CONNECT host:port`: a tunnel.
    Connect,
    /// A plain-HTTP request to forward.
    Forward,
}

/// The target of a request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestTarget {
    /// Tunnel or forward.
    pub kind: TargetKind,
    /// Canonical host (never empty).
    pub host: String,
    /// Port (CONNECT defaults to 443, plain HTTP to 80).
    pub port: u16,
}

/// Why a head was refused before policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// No host anywhere: `400 no host`.
    NoHost,
    /// A plain request whose URI is not `http://` absolute-form or origin-form.
    UnsupportedScheme,
    /// A port that does not parse (or is 0).
    BadPort,
    /// A host that cannot be canonicalised (a bad number form, a zone id, a stray byte).
    BadHost,
    /// Userinfo (`user@host`) in the request target.
    Userinfo,
    /// Several `Host` headers, or one that is not text.
    HostMismatch,
    /// The bytes are not an HTTP/1 request head (fuzzing entry point only).
    Malformed,
    /// The head is not complete yet (fuzzing entry point only).
    Incomplete,
}

impl HeadError {
    /// The response body text for the 400.
    pub fn message(self) -> &'static str {
        match self {
            Self::NoHost => "no host",
            Self::UnsupportedScheme => "only http:// requests are forwarded; use CONNECT for https",
            Self::BadPort => "bad port",
            Self::BadHost => "bad host",
            Self::Userinfo => "userinfo in the request target is refused",
            Self::HostMismatch => "conflicting Host headers",
            Self::Malformed => "malformed request",
            Self::Incomplete => "incomplete request",
        }
    }
}

/// The target of a request: the canonical CONNECT authority, or the absolute URI's authority,
/// or the `Host` header for an origin-form request, all through [`parse_authority`]. A
/// forwarded request must then also pass [`check_request_host`].
pub fn target_of(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<RequestTarget, HeadError> {
    let (kind, default_port, authority) = if method == Method::CONNECT {
        let a = uri.authority().map(|a| a.as_str().to_string());
        (TargetKind::Connect, 443, a)
    } else {
        match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => {}
            Some(_) => return Err(HeadError::UnsupportedScheme),
            None => {}
        }
        let a = match uri.authority() {
            Some(a) => Some(a.as_str().to_string()),
            None => only_host_header(headers).map_err(|_| HeadError::HostMismatch)?,
        };
        (TargetKind::Forward, 80, a)
    };
    let authority = authority.ok_or(HeadError::NoHost)?;
    let (host, port) = parse_authority(&authority, default_port).map_err(HeadError::from)?;
    Ok(RequestTarget { kind, host, port })
}

/// The single `Host` header's value: `Ok(None)` when there is none, an error when there are
/// several or it is not text.
fn only_host_header(headers: &HeaderMap) -> Result<Option<String>, HostMismatch> {
    let mut all = headers.get_all(http::header::HOST).iter();
    let first = all.next();
    if all.next().is_some() {
        return Err(HostMismatch);
    }
    first
        .map(|v| v.to_str().map(str::to_string).map_err(|_| HostMismatch))
        .transpose()
}

/// A request names another host (or port) than the one the proxy decided on and will contact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the request's host differs from its target")]
pub struct HostMismatch;

/// The one rule against domain fronting (issue 15 item 6), for every request the proxy
/// forwards: plain-HTTP requests (absolute or origin form) and requests inside an inspected
/// CONNECT tunnel. `target` is what the policy was decided on, the secrets are materialised for
/// and the connection goes to; `default_port` is the scheme's (80 plain, 443 in a tunnel).
///
/// Every place the request names its host must canonicalise ([`parse_authority`]) to exactly
/// `target`'s host and port, a missing port meaning the scheme's default: the absolute URI's
/// authority (HTTP/1.1's `:authority`), when there is one, and the `Host` header. There must
/// be at most one `Host` header, and at least one of the two. Userinfo anywhere is a mismatch.
/// The headers through which upstreams honour another virtual host ([`HOST_ALIAS_HEADERS`],
/// `Forwarded: host=`) may only name the target as well.
/// On success the caller sends the canonical [`canonical_host_header`], never the written one.
pub fn check_request_host(
    target: &RequestTarget,
    uri: &Uri,
    headers: &HeaderMap,
    default_port: u16,
) -> Result<(), HostMismatch> {
    let same = |written: &str, default_port: u16| match parse_authority(written, default_port) {
        Ok((h, p)) => h == target.host && p == target.port,
        Err(_) => false,
    };
    let mut named = false;
    if let Some(a) = uri.authority() {
        let scheme_port = match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
            Some("http") => 80,
            Some("https") => 443,
            _ => return Err(HostMismatch),
        };
        if !same(a.as_str(), scheme_port) {
            return Err(HostMismatch);
        }
        named = true;
    }
    if let Some(h) = only_host_header(headers)? {
        if !same(&h, default_port) {
            return Err(HostMismatch);
        }
        named = true;
    }
    if !named {
        return Err(HostMismatch);
    }
    // Headers through which upstreams (reverse proxies, frameworks) let a request name its
    // virtual host: each host they name must be the target too (a port, when written, too).
    let alias_agrees = |written: &str| match parse_authority(written, target.port) {
        Ok((h, p)) => h == target.host && p == target.port,
        Err(_) => false,
    };
    for name in HOST_ALIAS_HEADERS {
        for v in headers.get_all(*name) {
            let v = v.to_str().map_err(|_| HostMismatch)?;
            if !v.split(',').all(|h| alias_agrees(h.trim())) {
                return Err(HostMismatch);
            }
        }
    }
    for v in headers.get_all(http::header::FORWARDED) {
        let v = v.to_str().map_err(|_| HostMismatch)?;
        let hosts = v
            .split([',', ';'])
            .filter_map(|pair| pair.split_once('='))
            .filter(|(k, _)| k.trim().eq_ignore_ascii_case("host"))
            .map(|(_, h)| h.trim().trim_matches('"'));
        for h in hosts {
            if !alias_agrees(h) {
                return Err(HostMismatch);
            }
        }
    }
    Ok(())
}

/// Headers that name a virtual host besides `Host` (checked by [`check_request_host`]).
pub const HOST_ALIAS_HEADERS: &[&str] = &[
    "x-forwarded-host",
    "x-forwarded-server",
    "x-host",
    "x-original-host",
    "x-http-host-override",
];

/// The `Host` header the proxy sends upstream for `target` (scheme default port omitted).
pub fn canonical_host_header(
    target: &RequestTarget,
    default_port: u16,
) -> Result<HeaderValue, HostMismatch> {
    HeaderValue::from_str(&authority_for(&target.host, target.port, default_port))
        .map_err(|_| HostMismatch)
}

impl From<HostError> for HeadError {
    fn from(e: HostError) -> Self {
        match e {
            HostError::Empty => Self::NoHost,
            HostError::Userinfo => Self::Userinfo,
            HostError::BadPort => Self::BadPort,
            HostError::Invalid => Self::BadHost,
        }
    }
}

/// A parsed request head (fuzzing and diagnostics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedHead {
    /// The target.
    pub target: RequestTarget,
    /// The credential from `Proxy-Authorization`, if it decodes.
    pub credential: Option<Vec<u8>>,
    /// Bytes consumed by the head.
    pub head_len: usize,
}

/// Most headers a head may carry.
pub const MAX_HEADERS: usize = 100;

/// Parses an HTTP/1 request head from bytes and extracts its target and proxy credential.
pub fn parse_request_head(bytes: &[u8]) -> Result<ParsedHead, HeadError> {
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut storage);
    let head_len = match req.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err(HeadError::Incomplete),
        Err(_) => return Err(HeadError::Malformed),
    };
    let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes())
        .map_err(|_| HeadError::Malformed)?;
    let uri: Uri = req
        .path
        .unwrap_or_default()
        .parse()
        .map_err(|_| HeadError::Malformed)?;
    let mut headers = HeaderMap::new();
    let mut credential = None;
    for h in req.headers.iter() {
        let name =
            http::HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| HeadError::Malformed)?;
        let value = http::HeaderValue::from_bytes(h.value).map_err(|_| HeadError::Malformed)?;
        if name == http::header::PROXY_AUTHORIZATION {
            credential = decode_proxy_authorization(h.value);
        }
        headers.append(name, value);
    }
    let target = target_of(&method, &uri, &headers)?;
    Ok(ParsedHead {
        target,
        credential,
        head_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn t(kind: TargetKind, host: &str, port: u16) -> Result<ParsedHead, HeadError> {
        Ok(ParsedHead {
            target: RequestTarget {
                kind,
                host: host.into(),
                port,
            },
            credential: None,
            head_len: 0,
        })
    }

    fn parse(s: &str) -> Result<ParsedHead, HeadError> {
        parse_request_head(s.as_bytes()).map(|mut p| {
            p.head_len = 0;
            p
        })
    }

    #[test]
    fn connect_and_forward_targets_are_canonical_with_default_ports() {
        assert_eq!(
            parse("CONNECT API.Example.com.:8443 HTTP/1.1\r\n\r\n"),
            t(TargetKind::Connect, "api.example.com", 8443)
        );
        assert_eq!(
            parse("CONNECT [::1]:443 HTTP/1.1\r\n\r\n"),
            t(TargetKind::Connect, "::1", 443)
        );
        assert_eq!(
            parse("GET http://Example.com/x?q=1 HTTP/1.1\r\n\r\n"),
            t(TargetKind::Forward, "example.com", 80)
        );
        assert_eq!(
            parse("GET /x HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"),
            t(TargetKind::Forward, "example.com", 8080)
        );
        assert_eq!(parse("GET /x HTTP/1.1\r\n\r\n"), Err(HeadError::NoHost));
        assert_eq!(
            parse("GET https://example.com/ HTTP/1.1\r\n\r\n"),
            Err(HeadError::UnsupportedScheme)
        );
        assert_eq!(
            parse("CONNECT example.com:99999 HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadPort)
        );
    }

    #[test]
    fn the_proxy_credential_is_decoded_from_the_head() {
        let p = parse_request_head(
            b"CONNECT a.com:443 HTTP/1.1\r\nProxy-Authorization: Basic dDp0b2s=\r\n\r\n",
        )
        .unwrap();
        assert_eq!(p.credential.as_deref(), Some(&b"tok"[..]));
    }
}

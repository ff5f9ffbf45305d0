//! The request head: what a CONNECT or plain-HTTP request asks for (SANDBOX.md §6.4 "Host").
//!
//! [`target_of`] is what the proxy runs on every request hyper parsed; [`parse_request_head`]
//! wraps it with a byte-level parser so the whole path (request line, headers,
//! `Proxy-Authorization` decoding, host canonicalisation) can be fuzzed.

use http::{HeaderMap, Method, Uri};

use crate::auth::decode_proxy_authorization;
use crate::host::canonical_host;

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
    /// A port that does not parse.
    BadPort,
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
            Self::Malformed => "malformed request",
            Self::Incomplete => "incomplete request",
        }
    }
}

/// Splits an authority into the raw host part and an optional port.
pub(crate) fn split_authority(authority: &str) -> Result<(&str, Option<u16>), HeadError> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => return Err(HeadError::NoHost),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (authority, None),
        }
    };
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().map_err(|_| HeadError::BadPort)?),
    };
    Ok((host, port))
}

/// The target of a request: the canonical CONNECT authority, or the absolute URI's host, or the
/// `Host` header for an origin-form request.
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
            None => headers
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string),
        };
        (TargetKind::Forward, 80, a)
    };
    let authority = authority.ok_or(HeadError::NoHost)?;
    let (raw_host, port) = split_authority(&authority)?;
    let host = canonical_host(raw_host);
    if host.is_empty() {
        return Err(HeadError::NoHost);
    }
    Ok(RequestTarget {
        kind,
        host,
        port: port.unwrap_or(default_port),
    })
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

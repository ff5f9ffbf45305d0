//! Streamed request bodies under inspection (SANDBOX.md §6.10 "Requests"): the body goes
//! upstream chunk by chunk, so client-streaming and bidirectional gRPC (and any upload) stream
//! through an inspected tunnel, while the three body rules still hold:
//!
//! - **the bound**: once more than the run's body bound has arrived the body is cut (the
//!   upstream sees an aborted request) and the client gets `413`, with one `network_blocked`;
//! - **the exfiltration scan**: every window of the body, together with the last bytes already
//!   sent (and, at the start, the tail of the head, so a value cut between head and body is
//!   seen), is searched before it is released; a hit cuts the body and answers `403`;
//! - **the placeholder swap**: a placeholder split across any number of chunks is still
//!   swapped, because the tail that might begin one is held back.
//!
//! What is held back, and when it goes: while the client keeps sending, the last
//! `max(SecretForms::max_span, longest placeholder) − 1` bytes wait for what follows (the same
//! window argument as the response redactor's: a match that starts before the release point lies
//! wholly inside what was searched). When the client has nothing more ready (it waits for an
//! answer: a bidirectional stream), everything goes except a tail that is a proper prefix of a
//! placeholder, so an exchange never stalls on the window. The cost of that release is bounded:
//! what goes out has been searched with the bytes before it, so it carries fewer than
//! [`crate::FRAGMENT_LEN`] bytes of any value, less than the fragment rule lets any one request
//! carry anyway; the next chunk is searched together with it and a value continued there is
//! refused before it leaves.
//!
//! A body that declares its `Content-Length` toward a host whose placeholders may be swapped is
//! read whole through the same rules (the swapped length must be declared before the body);
//! every other body streams, its length kept when nothing can change it.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming};

use crate::decide::BlockReason;
use crate::request_body::{BoxError, RequestBody};
use crate::response::ProxyBody;
use crate::rewrite::{HEADER_GROWTH_BUDGET, SecretRewriter, find};
use crate::shared::{Shared, refused};

/// Why a streamed body was cut, once set; the request path reads it to answer the client.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tripwire(Arc<OnceLock<BlockReason>>);

impl Tripwire {
    /// The rule that cut the body, if one did.
    pub(crate) fn tripped(&self) -> Option<BlockReason> {
        self.0.get().copied()
    }

    /// The answer when sending upstream failed: the refusal when a rule cut the body (its
    /// `network_blocked` is already out), `None` otherwise.
    pub(crate) fn refusal(&self) -> Option<Response<ProxyBody>> {
        let reason = self.tripped()?;
        let status = match reason {
            BlockReason::BodyOverBound => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::FORBIDDEN,
        };
        Some(refused(status, reason))
    }
}

#[derive(Debug)]
struct BodyRefused(BlockReason);

impl std::fmt::Display for BodyRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "request body refused: {}", self.0.as_str())
    }
}

impl std::error::Error for BodyRefused {}

/// The inspection state of one request body: the bound, the scan window and the swap hold-back.
pub(crate) struct RequestInspector {
    rewriter: Option<Arc<SecretRewriter>>,
    host: String,
    max_body: usize,
    received: usize,
    /// The placeholders swapped toward `host` (none for a model-API request).
    placeholders: Vec<Vec<u8>>,
    /// Bytes held back while more is coming.
    hold: usize,
    /// How much already-released text is searched again with what follows (0: no scan).
    scan_window: usize,
    /// The tail of the head and of the released body, searched with `carry`.
    context: Vec<u8>,
    /// Received, not yet released.
    carry: Vec<u8>,
}

impl RequestInspector {
    /// `head` is the request's method, target and header fields, joined: its tail is searched
    /// together with the start of the body. `swap` is false for a model-API request.
    pub(crate) fn new(
        rewriter: Option<Arc<SecretRewriter>>,
        host: &str,
        max_body: usize,
        head: &[u8],
        swap: bool,
    ) -> Self {
        let rewriter = rewriter.filter(|rw| !rw.is_empty());
        let placeholders = match (&rewriter, swap) {
            (Some(rw), true) => rw.placeholders_for_host(host),
            _ => Vec::new(),
        };
        let scan_window = rewriter
            .as_ref()
            .map_or(0, |rw| rw.forms().max_span().saturating_sub(1));
        let longest_ph = placeholders.iter().map(Vec::len).max().unwrap_or(0);
        let hold = scan_window.max(longest_ph.saturating_sub(1));
        let context = head[head.len().saturating_sub(scan_window)..].to_vec();
        Self {
            rewriter,
            host: host.to_string(),
            max_body,
            received: 0,
            placeholders,
            hold,
            scan_window,
            context,
            carry: Vec::new(),
        }
    }

    /// Whether a placeholder may be swapped (the body's length may change).
    pub(crate) fn swaps(&self) -> bool {
        !self.placeholders.is_empty()
    }

    /// Takes the next chunk; returns what can go upstream now (possibly nothing), or the rule
    /// that refuses the body.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<u8>, BlockReason> {
        self.received = self.received.saturating_add(chunk.len());
        if self.received > self.max_body {
            return Err(BlockReason::BodyOverBound);
        }
        if self.rewriter.is_none() {
            return Ok(chunk.to_vec());
        }
        self.carry.extend_from_slice(chunk);
        if let Some(rw) = &self.rewriter {
            let hay = [self.context.as_slice(), self.carry.as_slice()].concat();
            if rw.exfiltrates_to(&hay, &self.host).is_some() {
                return Err(BlockReason::SecretExfiltration);
            }
        }
        let want = self.carry.len().saturating_sub(self.hold);
        Ok(self.release(want))
    }

    /// The client has nothing more ready: releases all but a tail that may begin a
    /// placeholder (see the module docs).
    pub(crate) fn idle(&mut self) -> Vec<u8> {
        let keep = placeholder_prefix_len(&self.carry, &self.placeholders);
        self.release(self.carry.len() - keep)
    }

    /// The end of the body: releases everything held back.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        self.release(self.carry.len())
    }

    /// Trailers (HTTP/2): scanned like header fields, placeholders swapped within the header
    /// growth budget.
    pub(crate) fn trailers(&self, mut trailers: HeaderMap) -> Result<HeaderMap, BlockReason> {
        let Some(rw) = &self.rewriter else {
            return Ok(trailers);
        };
        let mut fields: Vec<&[u8]> = Vec::new();
        for (n, v) in &trailers {
            fields.push(n.as_str().as_bytes());
            fields.push(v.as_bytes());
        }
        if rw.request_exfiltrates_to(&fields, &self.host).is_some() {
            return Err(BlockReason::SecretExfiltration);
        }
        let mut budget = HEADER_GROWTH_BUDGET;
        for v in trailers.values_mut() {
            let m = rw.materialize_for_host(v.as_bytes(), &self.host, &mut budget);
            if m != v.as_bytes()
                && let Ok(nv) = HeaderValue::from_bytes(&m)
            {
                *v = nv;
            }
        }
        Ok(trailers)
    }

    /// Releases `carry[..want]`, moved forward past any placeholder it would cut, swapped.
    fn release(&mut self, want: usize) -> Vec<u8> {
        let cut = settle(&self.carry, want, &self.placeholders);
        let out: Vec<u8> = self.carry.drain(..cut).collect();
        if self.scan_window > 0 {
            self.context.extend_from_slice(&out);
            let excess = self.context.len().saturating_sub(self.scan_window);
            self.context.drain(..excess);
        }
        match &self.rewriter {
            Some(rw) if !self.placeholders.is_empty() && !out.is_empty() => {
                let mut unbounded = usize::MAX;
                rw.materialize_for_host(&out, &self.host, &mut unbounded)
            }
            _ => out,
        }
    }
}

/// `want`, moved to the end of every placeholder occurrence that starts before it and ends
/// after it (so a placeholder is always swapped in one piece).
fn settle(carry: &[u8], want: usize, placeholders: &[Vec<u8>]) -> usize {
    let mut cut = want.min(carry.len());
    loop {
        let mut moved = false;
        for ph in placeholders {
            let from = cut.saturating_sub(ph.len().saturating_sub(1));
            let mut at = from;
            while at < cut {
                let Some(p) = find(&carry[at..], ph) else {
                    break;
                };
                let start = at + p;
                if start >= cut {
                    break;
                }
                if start + ph.len() > cut {
                    cut = start + ph.len();
                    moved = true;
                }
                at = start + 1;
            }
        }
        if !moved {
            return cut;
        }
    }
}

/// The length of the longest tail of `carry` that is a proper prefix of a placeholder.
fn placeholder_prefix_len(carry: &[u8], placeholders: &[Vec<u8>]) -> usize {
    placeholders
        .iter()
        .filter_map(|ph| {
            (1..ph.len().min(carry.len() + 1))
                .rev()
                .find(|k| carry.ends_with(&ph[..*k]))
        })
        .max()
        .unwrap_or(0)
}

/// A client's request body going upstream through a [`RequestInspector`].
struct InspectedBody {
    inner: Incoming,
    inspector: RequestInspector,
    shared: Arc<Shared>,
    tripwire: Tripwire,
    /// Trailers that arrived while data was held back: they follow that data.
    trailers_next: Option<HeaderMap>,
    done: bool,
}

impl InspectedBody {
    /// Cuts the body for `reason`: one `network_blocked`, and the tripwire set for the answer.
    fn trip(&mut self, reason: BlockReason) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.done = true;
        if self.tripwire.0.set(reason).is_ok() {
            self.shared.blocked(&self.inspector.host, reason, false);
        }
        Poll::Ready(Some(Err(Box::new(BodyRefused(reason)))))
    }
}

impl Body for InspectedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let data = |b: Vec<u8>| Poll::Ready(Some(Ok(Frame::data(Bytes::from(b)))));
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if let Some(trailers) = self.trailers_next.take() {
                self.done = true;
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => {
                    let held = self.inspector.idle();
                    if held.is_empty() {
                        return Poll::Pending;
                    }
                    return data(held);
                }
                Poll::Ready(Some(Err(e))) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = match frame.into_data() {
                        Ok(chunk) => match self.inspector.push(&chunk) {
                            Ok(out) if out.is_empty() => continue,
                            Ok(out) => return data(out),
                            Err(reason) => return self.trip(reason),
                        },
                        Err(frame) => frame,
                    };
                    let Ok(trailers) = frame.into_trailers() else {
                        continue;
                    };
                    let trailers = match self.inspector.trailers(trailers) {
                        Ok(t) => t,
                        Err(reason) => return self.trip(reason),
                    };
                    let rest = self.inspector.finish();
                    if !rest.is_empty() {
                        self.trailers_next = Some(trailers);
                        return data(rest);
                    }
                    self.done = true;
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    let rest = self.inspector.finish();
                    if !rest.is_empty() {
                        return data(rest);
                    }
                }
            }
        }
    }
}

/// `body` streamed through `inspector`; the tripwire says which rule cut it, if one did.
pub(crate) fn inspected_body(
    shared: Arc<Shared>,
    body: Incoming,
    inspector: RequestInspector,
) -> (RequestBody, Tripwire) {
    let tripwire = Tripwire::default();
    let body = InspectedBody {
        inner: body,
        inspector,
        shared,
        tripwire: tripwire.clone(),
        trailers_next: None,
        done: false,
    }
    .boxed();
    (body, tripwire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::Secret;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    const HOST: &str = "api.example.com";

    fn rewriter() -> Arc<SecretRewriter> {
        let mut rw = SecretRewriter::new();
        rw.add_value_secret(
            "TOK",
            Secret::new(b"s3cr3t-value-0123".to_vec()),
            &[HOST.to_string()],
        )
        .unwrap();
        rw.add_value_secret(
            "K",
            Secret::new(b"kkkkkkkkkk".to_vec()),
            &[HOST.to_string()],
        )
        .unwrap();
        rw.add_value_secret(
            "ELSEWHERE",
            Secret::new(b"other-host-secret".to_vec()),
            &["other.example.com".to_string()],
        )
        .unwrap();
        Arc::new(rw)
    }

    fn inspector(max: usize) -> RequestInspector {
        RequestInspector::new(Some(rewriter()), HOST, max, b"POST /x", true)
    }

    /// Pushes `chunks`, going idle after each when `idle`; the bytes sent, or the refusal.
    fn stream(chunks: &[&[u8]], idle: bool) -> Result<Vec<u8>, BlockReason> {
        let mut r = inspector(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            out.extend(r.push(c)?);
            if idle {
                out.extend(r.idle());
            }
        }
        out.extend(r.finish());
        Ok(out)
    }

    fn whole(body: &[u8]) -> Vec<u8> {
        let mut unbounded = usize::MAX;
        rewriter().materialize_for_host(body, HOST, &mut unbounded)
    }

    #[test]
    fn a_placeholder_split_across_chunks_is_swapped_even_when_the_client_pauses() {
        for idle in [false, true] {
            let got = stream(&[b"{\"k\":\"__ITERION_SEC", b"RET_TOK__\"}"], idle).unwrap();
            assert_eq!(
                String::from_utf8(got).unwrap(),
                "{\"k\":\"s3cr3t-value-0123\"}"
            );
        }
    }

    #[test]
    fn an_idle_client_gets_its_bytes_out_except_a_placeholder_prefix() {
        let mut r = inspector(1 << 20);
        assert!(
            r.push(b"ping\n__ITER").unwrap().is_empty(),
            "held while more may come"
        );
        assert_eq!(r.idle(), b"ping\n");
        assert_eq!(r.finish(), b"__ITER");
    }

    #[test]
    fn the_bound_counts_received_bytes() {
        let mut r = inspector(10);
        r.push(b"12345").unwrap();
        r.push(b"67890").unwrap();
        assert_eq!(r.push(b"1"), Err(BlockReason::BodyOverBound));
    }

    #[test]
    fn a_value_toward_another_host_is_refused_before_any_of_it_leaves_even_when_split() {
        let mut r = inspector(1 << 20);
        let first = r.push(b"data=other-h").unwrap();
        assert!(first.is_empty(), "{first:?}");
        assert_eq!(r.push(b"ost-secret"), Err(BlockReason::SecretExfiltration));
    }

    #[test]
    fn no_part_of_an_encoded_value_leaves_before_its_end_is_seen() {
        // "other-host-secret", percent-encoded twice: 5 bytes a character.
        let enc: String = "other-host-secret"
            .bytes()
            .map(|b| format!("%25{b:02x}"))
            .collect();
        let (first, rest) = enc.split_at(7 * 5);
        let mut r = inspector(1 << 20);
        let filler = "z".repeat(100);
        let sent = r.push(format!("{filler}{first}").as_bytes()).unwrap();
        assert!(filler.as_bytes().starts_with(&sent), "{sent:?}");
        assert_eq!(
            r.push(rest.as_bytes()),
            Err(BlockReason::SecretExfiltration)
        );
    }

    #[test]
    fn a_value_dribbled_with_pauses_is_refused_when_the_next_piece_comes() {
        let mut r = inspector(1 << 20);
        let mut sent = r.push(b"other-h").unwrap();
        sent.extend(r.idle());
        assert_eq!(
            sent, b"other-h",
            "fewer than FRAGMENT_LEN bytes may go on a pause"
        );
        assert_eq!(r.push(b"ost-se"), Err(BlockReason::SecretExfiltration));
    }

    #[test]
    fn the_head_tail_is_searched_with_the_body() {
        let mut r = RequestInspector::new(Some(rewriter()), HOST, 1 << 20, b"x: other-h", true);
        assert_eq!(r.push(b"ost-secret"), Err(BlockReason::SecretExfiltration));
    }

    #[test]
    fn a_model_api_body_is_scanned_not_swapped() {
        let mut r = RequestInspector::new(Some(rewriter()), HOST, 1 << 20, b"", false);
        let mut out = r.push(b"__ITERION_SECRET_TOK__").unwrap();
        out.extend(r.finish());
        assert_eq!(out, b"__ITERION_SECRET_TOK__");
        assert!(!r.swaps());
    }

    #[test]
    fn trailers_are_swapped_and_scanned() {
        let r = inspector(1 << 20);
        let mut t = HeaderMap::new();
        t.insert("x-auth", HeaderValue::from_static("__ITERION_SECRET_TOK__"));
        let t = r.trailers(t).unwrap();
        assert_eq!(t["x-auth"], "s3cr3t-value-0123");
        let mut bad = HeaderMap::new();
        bad.insert("x-leak", HeaderValue::from_static("other-host-secret"));
        assert_eq!(r.trailers(bad), Err(BlockReason::SecretExfiltration));
    }

    proptest! {
        /// However the body is cut into chunks, and whether the client pauses between them,
        /// what goes upstream equals swapping the whole body.
        #[test]
        fn streaming_equals_whole_body_swap(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just(b"__ITERION_SECRET_TOK__".to_vec()),
                    Just(b"__ITERION_SECRET_K__".to_vec()),
                    Just(b"__ITERION_SECRET_".to_vec()),
                    Just(b"__ITERION_SECRET_ELSEWHERE__".to_vec()),
                    Just(b"_".to_vec()),
                    proptest::collection::vec(prop_oneof![Just(b'_'), Just(b'x'), Just(b'I')], 0..6),
                ],
                0..12,
            ),
            cuts in proptest::collection::vec(0usize..300, 0..8),
            idle in any::<bool>(),
        ) {
            let body: Vec<u8> = parts.concat();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut from = 0;
            for c in cuts {
                chunks.push(&body[from..c]);
                from = c;
            }
            chunks.push(&body[from..]);
            prop_assert_eq!(stream(&chunks, idle).unwrap(), whole(&body));
        }
    }
}

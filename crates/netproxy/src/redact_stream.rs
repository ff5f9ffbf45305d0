//! Streaming response redaction (SANDBOX.md §6.10 "Responses"): every real secret value an
//! inspected upstream sends back, in any form [`SecretForms`] knows (raw, hex, base64 at any
//! alignment, percent-encoded, reversed, fragments of 8 bytes or more), is replaced by its
//! placeholder before it reaches the sandbox, through a sliding window instead of buffering the
//! whole body.
//!
//! Why a window of [`SecretForms::max_span`] − 1 bytes is enough: a match that starts at least
//! that many bytes before the end of what has been received lies wholly inside it, so every match
//! that starts before that point has been seen. Only the tail that might begin a match still in
//! flight is held back (with the marks of the matches already seen over it, so a run of secret
//! bytes cut by the release point stays marked). Memory stays bounded by the longest form, not by
//! the body or the secret, and a value split across any number of chunks is still caught.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming};

use crate::forms::SecretForms;
use http::Response;
use http::header::{self, HeaderValue};

use crate::response::ProxyBody;
use crate::rewrite::SecretRewriter;
use crate::shared::Shared;

/// The redaction state of one response body.
pub struct ResponseRedactor {
    forms: SecretForms,
    /// The placeholder of each secret of `forms`.
    placeholders: Vec<Vec<u8>>,
    /// The bytes held back: they may begin a match whose end has not arrived yet.
    carry: Vec<u8>,
    /// For each byte of `carry`, the secret of a match already seen over it.
    marks: Vec<Option<usize>>,
    /// Whether the last byte released was inside a match (its placeholder is out already).
    in_match: bool,
    window: usize,
}

impl ResponseRedactor {
    /// A redactor for the real values `rewriter` holds.
    pub fn new(rewriter: &SecretRewriter) -> Self {
        let forms = rewriter.forms().clone();
        let placeholders = (0..rewriter.len())
            .map(|i| rewriter.placeholder_of(i))
            .collect();
        let window = forms.max_span().saturating_sub(1);
        Self {
            forms,
            placeholders,
            carry: Vec::new(),
            marks: Vec::new(),
            in_match: false,
            window,
        }
    }

    /// Whether there is nothing to redact (the body can pass through untouched).
    pub fn is_noop(&self) -> bool {
        self.forms.is_empty()
    }

    /// Takes the next chunk; returns what can be released now (possibly empty).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.forms.is_empty() {
            return chunk.to_vec();
        }
        self.carry.extend_from_slice(chunk);
        self.marks.resize(self.carry.len(), None);
        self.mark();
        let safe_end = self.carry.len().saturating_sub(self.window);
        self.release(safe_end)
    }

    /// The upstream has nothing more ready: releases what is held back up to and including its
    /// last line break (an SSE event, an NDJSON line), keeping the rest (see the module docs).
    pub fn flush_lines(&mut self) -> Vec<u8> {
        match self.carry.iter().rposition(|b| *b == b'\n') {
            Some(last) => self.release(last + 1),
            None => Vec::new(),
        }
    }

    /// The end of the body: releases everything held back.
    pub fn finish(&mut self) -> Vec<u8> {
        let all = self.carry.len();
        self.release(all)
    }

    fn mark(&mut self) {
        for span in self.forms.spans(&self.carry) {
            for m in &mut self.marks[span.start..span.end] {
                m.get_or_insert(span.secret);
            }
        }
    }

    /// Emits `carry[..end]`, each run of marked bytes as one placeholder, and keeps the rest.
    fn release(&mut self, end: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(end);
        for (byte, mark) in self.carry[..end].iter().zip(&self.marks[..end]) {
            match mark {
                None => {
                    out.push(*byte);
                    self.in_match = false;
                }
                Some(secret) => {
                    if !self.in_match {
                        out.extend_from_slice(
                            self.placeholders
                                .get(*secret)
                                .map_or(&[][..], Vec::as_slice),
                        );
                    }
                    self.in_match = true;
                }
            }
        }
        self.carry.drain(..end);
        self.marks.drain(..end);
        out
    }
}

/// What a redacted body does with the upstream's trailers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trailers {
    /// Dropped (an HTTP/1.1 client: §6.9 step 4).
    Drop,
    /// Relayed with their values redacted like the headers (an HTTP/2 client: gRPC's
    /// `grpc-status` lives there).
    Redact,
}

/// A response body redacted on the fly: data frames pass through a [`ResponseRedactor`], and
/// the complete lines it holds back are released as soon as the upstream has nothing more ready
/// (so a streamed response, an SSE event or an NDJSON line, reaches the client as it comes).
struct RedactedBody {
    inner: Incoming,
    redactor: ResponseRedactor,
    rewriter: Arc<SecretRewriter>,
    trailers: Trailers,
    /// Trailers that arrived while data was held back: they follow that data.
    trailers_next: Option<http::HeaderMap>,
    done: bool,
}

impl Body for RedactedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if let Some(mut trailers) = self.trailers_next.take() {
                redact_headers(&self.rewriter, &mut trailers);
                self.done = true;
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => {
                    // Nothing more is ready: the complete lines held back go now (the module
                    // docs say what this costs).
                    let held = self.redactor.flush_lines();
                    if held.is_empty() {
                        return Poll::Pending;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(held)))));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = match frame.into_data() {
                        Ok(data) => {
                            let released = self.redactor.push(&data);
                            if released.is_empty() {
                                continue;
                            }
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(released)))));
                        }
                        Err(frame) => frame,
                    };
                    let Ok(mut trailers) = frame.into_trailers() else {
                        continue;
                    };
                    if self.trailers == Trailers::Drop {
                        continue;
                    }
                    let rest = self.redactor.finish();
                    if !rest.is_empty() {
                        // The data before the trailers first; the trailers come on the next poll.
                        self.trailers_next = Some(trailers);
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                    }
                    redact_headers(&self.rewriter, &mut trailers);
                    self.done = true;
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    let rest = self.redactor.finish();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                    }
                }
            }
        }
    }
}

/// Redacts a header map in place: a header whose name carries a value goes, and every value has
/// each real value replaced by its placeholder.
pub(crate) fn redact_headers(rw: &SecretRewriter, headers: &mut http::HeaderMap) {
    let named: Vec<_> = headers
        .keys()
        .filter(|n| rw.forms().find(n.as_str().as_bytes(), |_| true).is_some())
        .cloned()
        .collect();
    for name in named {
        headers.remove(&name);
    }
    for v in headers.values_mut() {
        let r = rw.redact_response(v.as_bytes());
        if r != v.as_bytes()
            && let Ok(nv) = http::HeaderValue::from_bytes(&r)
        {
            *v = nv;
        }
    }
}

/// `body` with every real value of `rewriter` replaced by its placeholder, streamed.
pub(crate) fn redacted_body(
    body: Incoming,
    rewriter: &Arc<SecretRewriter>,
    trailers: Trailers,
) -> ProxyBody {
    RedactedBody {
        inner: body,
        redactor: ResponseRedactor::new(rewriter),
        rewriter: rewriter.clone(),
        trailers,
        trailers_next: None,
        done: false,
    }
    .boxed()
}

/// Streams the response through the §6.10 sliding window (real values become placeholders),
/// redacts headers and, for an HTTP/1.1 client, drops trailers and forces `Connection: close`
/// (an HTTP/2 client gets the trailers, redacted: gRPC's status is there). When there is a value
/// to look for, `Content-Length` is dropped (the redacted length is known only at the end;
/// HTTP/1.1 clients get it chunked); otherwise the body and its length pass through untouched.
pub(crate) fn finish_response(
    shared: &Shared,
    mut parts: http::response::Parts,
    body: Incoming,
    client_version: http::Version,
) -> Response<ProxyBody> {
    let http2 = client_version == http::Version::HTTP_2;
    let body = match &shared.rewriter {
        Some(rw) if !rw.is_empty() => {
            // A header whose name carries a value goes; a custom reason phrase is not relayed.
            redact_headers(rw, &mut parts.headers);
            parts.extensions.remove::<hyper::ext::ReasonPhrase>();
            parts.headers.remove(header::CONTENT_LENGTH);
            let trailers = if http2 {
                Trailers::Redact
            } else {
                Trailers::Drop
            };
            redacted_body(body, rw, trailers)
        }
        _ => body.boxed(),
    };
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts.headers.remove(header::TRAILER);
    if !http2 {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::Secret;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn rewriter() -> SecretRewriter {
        let mut rw = SecretRewriter::new();
        rw.add_value_secret("tok", Secret::new(b"s3cr3t-value-0123".to_vec()), &[])
            .unwrap();
        rw.add_value_secret("inner", Secret::new(b"value-01".to_vec()), &[])
            .unwrap();
        rw
    }

    fn stream(rw: &SecretRewriter, chunks: &[&[u8]]) -> Vec<u8> {
        let mut r = ResponseRedactor::new(rw);
        let mut out = Vec::new();
        for c in chunks {
            out.extend(r.push(c));
        }
        out.extend(r.finish());
        out
    }

    #[test]
    fn a_value_split_across_chunks_is_replaced() {
        let rw = rewriter();
        let got = stream(&rw, &[b"echo: s3cr", b"3t-val", b"ue-0123 and value-01!"]);
        assert_eq!(
            String::from_utf8(got).unwrap(),
            // "value-01" is also a fragment of tok's value, which was added first.
            "echo: __ITERION_SECRET_tok__ and __ITERION_SECRET_tok__!"
        );
    }

    #[test]
    fn memory_held_back_is_bounded_by_the_longest_value() {
        let rw = rewriter();
        let mut r = ResponseRedactor::new(&rw);
        let mut released = 0;
        for _ in 0..1000 {
            released += r.push(&[b'x'; 4096]).len();
            assert!(r.carry.len() <= r.window, "{}", r.carry.len());
        }
        released += r.finish().len();
        assert_eq!(released, 4096 * 1000);
    }

    #[test]
    fn no_secrets_means_pass_through() {
        let rw = SecretRewriter::new();
        let r = ResponseRedactor::new(&rw);
        assert!(r.is_noop());
        assert_eq!(stream(&rw, &[b"abc", b"def"]), b"abcdef");
    }

    proptest! {
        /// However the body is cut into chunks, the streamed result equals redacting it whole.
        #[test]
        fn streaming_equals_whole_body_redaction(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just(b"s3cr3t-value-0123".to_vec()),
                    Just(b"value-01".to_vec()),
                    Just(b"s3cr3t".to_vec()),
                    proptest::collection::vec(any::<u8>(), 0..20),
                ],
                0..12,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let rw = rewriter();
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
            let streamed = stream(&rw, &chunks);
            prop_assert!(crate::rewrite::find(&streamed, b"s3cr3t-value-0123").is_none());
            prop_assert_eq!(streamed, whole(&rw, &body));
        }
    }

    /// The reference: the whole body at once.
    fn whole(rw: &SecretRewriter, body: &[u8]) -> Vec<u8> {
        stream(rw, &[body])
    }
}

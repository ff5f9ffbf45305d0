//! The body type of every request the proxy sends upstream, and the two plain ways to make one
//! (inspected bodies are `request_stream`'s).

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;

/// The error type of a request body sent upstream.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body type of every request the proxy sends upstream.
pub(crate) type RequestBody = BoxBody<Bytes, BoxError>;

/// A request body sent upstream as it came from the client (nothing to inspect).
pub(crate) fn passthrough(body: Incoming) -> RequestBody {
    body.map_err(BoxError::from).boxed()
}

/// A request body known in full.
pub(crate) fn full_request(body: impl Into<Bytes>) -> RequestBody {
    http_body_util::Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

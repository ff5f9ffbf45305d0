//! The runner channel's wire (SANDBOX.md §13.1): NDJSON envelopes
//! `{"type": <string>, "id"?: <string>, "data"?: <json>}`, one per line, at most [`MAX_LINE`]
//! bytes in either direction.
//!
//! The reader fails the channel with a typed error on a longer line (it never buffers more than
//! the cap plus one read), on a line that is not an envelope, and on end of stream; the writer
//! refuses to write a longer line. Relayed payloads are clamped before they are written:
//! [`clamp_text`] for text fields, [`clamp_json`] for JSON fields.
//!
//! This module depends on nothing else in the crate, so the fuzz target on [`decode_line`] builds
//! it alone.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The longest line, newline excluded: 4 MiB.
pub const MAX_LINE: usize = 4 * 1024 * 1024;
/// A tool result sent to the runner is clamped to this (1 MiB).
pub const TOOL_RESULT_MAX: usize = 1024 * 1024;
/// A relayed text field is clamped to this (1 MiB).
pub const RELAY_TEXT_MAX: usize = 1024 * 1024;
/// A relayed JSON field over this (1 MiB) is replaced by an omission marker.
pub const RELAY_JSON_MAX: usize = 1024 * 1024;
/// A session snapshot over this (2 MiB) is dropped with a warning.
pub const SNAPSHOT_MAX: usize = 2 * 1024 * 1024;

/// One envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The envelope type (`task`, `tool_call`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// The correlation id (`call-<n>` for tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Envelope {
    /// An envelope of `kind` with `data`.
    pub fn new(kind: &str, data: Value) -> Envelope {
        Envelope {
            kind: kind.to_owned(),
            id: None,
            data: Some(data),
        }
    }

    /// The same with an id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Envelope {
        self.id = Some(id.into());
        self
    }
}

/// Why the channel failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// A line over [`MAX_LINE`] (read or about to be written).
    #[error("envelope line over {limit} bytes")]
    LineTooLong {
        /// The cap.
        limit: usize,
    },
    /// A line that is not an envelope.
    #[error("malformed envelope: {reason}")]
    Malformed {
        /// What the decoder said.
        reason: String,
    },
    /// The other side closed the stream.
    #[error("the channel closed")]
    Closed,
    /// Reading or writing failed.
    #[error("channel I/O: {message}")]
    Io {
        /// The I/O error.
        message: String,
    },
}

impl ChannelError {
    /// A stable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            ChannelError::LineTooLong { .. } => "RUNNER_LINE_TOO_LONG",
            ChannelError::Malformed { .. } => "RUNNER_ENVELOPE_MALFORMED",
            ChannelError::Closed => "RUNNER_CHANNEL_CLOSED",
            ChannelError::Io { .. } => "RUNNER_CHANNEL_IO",
        }
    }
}

/// Decodes one line (without its newline; a trailing `\r` is tolerated).
///
/// # Errors
///
/// [`ChannelError::LineTooLong`] over [`MAX_LINE`], [`ChannelError::Malformed`] for anything but
/// one envelope object with a non-empty string `type`.
pub fn decode_line(line: &[u8]) -> Result<Envelope, ChannelError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_LINE {
        return Err(ChannelError::LineTooLong { limit: MAX_LINE });
    }
    let envelope: Envelope = serde_json::from_slice(line).map_err(|e| ChannelError::Malformed {
        reason: e.to_string(),
    })?;
    if envelope.kind.is_empty() {
        return Err(ChannelError::Malformed {
            reason: "empty type".to_owned(),
        });
    }
    Ok(envelope)
}

/// Encodes one envelope as a line, newline included.
///
/// # Errors
///
/// [`ChannelError::LineTooLong`] when the line would be over [`MAX_LINE`].
pub fn encode_line(envelope: &Envelope) -> Result<Vec<u8>, ChannelError> {
    let mut line = serde_json::to_vec(envelope).map_err(|e| ChannelError::Malformed {
        reason: e.to_string(),
    })?;
    if line.len() > MAX_LINE {
        return Err(ChannelError::LineTooLong { limit: MAX_LINE });
    }
    line.push(b'\n');
    Ok(line)
}

/// Reads envelopes from a byte stream, one line at a time, never holding more than one line.
pub struct EnvelopeReader<R> {
    inner: R,
    line: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> EnvelopeReader<R> {
    /// A reader over `inner`.
    pub fn new(inner: R) -> EnvelopeReader<R> {
        EnvelopeReader {
            inner,
            line: Vec::new(),
        }
    }

    /// The next envelope.
    ///
    /// # Errors
    ///
    /// [`ChannelError::Closed`] at end of stream, [`ChannelError::LineTooLong`] as soon as a line
    /// passes the cap (without reading the rest of it), [`ChannelError::Malformed`], or I/O.
    pub async fn next(&mut self) -> Result<Envelope, ChannelError> {
        self.line.clear();
        loop {
            let available = self.inner.fill_buf().await.map_err(|e| ChannelError::Io {
                message: e.to_string(),
            })?;
            if available.is_empty() {
                return Err(ChannelError::Closed);
            }
            let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
                Some(i) => (&available[..i], Some(i + 1)),
                None => (available, None),
            };
            if self.line.len() + chunk.len() > MAX_LINE + 1 {
                return Err(ChannelError::LineTooLong { limit: MAX_LINE });
            }
            self.line.extend_from_slice(chunk);
            let used = done.unwrap_or(available.len());
            self.inner.consume(used);
            if done.is_some() {
                if self.line.trim_ascii().is_empty() {
                    self.line.clear();
                    continue;
                }
                return decode_line(&self.line);
            }
        }
    }
}

/// Writes envelopes, one flushed line each.
pub struct EnvelopeWriter<W> {
    inner: W,
}

impl<W: AsyncWrite + Unpin> EnvelopeWriter<W> {
    /// A writer over `inner`.
    pub fn new(inner: W) -> EnvelopeWriter<W> {
        EnvelopeWriter { inner }
    }

    /// Writes and flushes one envelope.
    ///
    /// # Errors
    ///
    /// [`ChannelError::LineTooLong`] (nothing written), or I/O.
    pub async fn send(&mut self, envelope: &Envelope) -> Result<(), ChannelError> {
        let line = encode_line(envelope)?;
        let io = |e: std::io::Error| ChannelError::Io {
            message: e.to_string(),
        };
        self.inner.write_all(&line).await.map_err(io)?;
        self.inner.flush().await.map_err(io)
    }
}

/// Text clamped to `max` bytes, on a char boundary, with `…[iterion: <N> bytes omitted]`.
pub fn clamp_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}…[iterion: {} bytes omitted]",
        &text[..end],
        text.len() - end
    )
}

/// A JSON value whose compact form is over `max` bytes replaced by
/// `{"_iterion_sandbox_relay_omitted_bytes": N}`.
pub fn clamp_json(value: Value, max: usize) -> Value {
    let len = serde_json::to_vec(&value).map_or(0, |v| v.len());
    if len <= max {
        value
    } else {
        serde_json::json!({"_iterion_sandbox_relay_omitted_bytes": len})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn envelopes_round_trip_and_reject_anything_else() {
        let e =
            Envelope::new("tool_call", json!({"name": "ask_user", "input": {}})).with_id("call-1");
        let line = encode_line(&e).unwrap();
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            "{\"type\":\"tool_call\",\"id\":\"call-1\",\"data\":{\"input\":{},\"name\":\"ask_user\"}}\n"
        );
        assert_eq!(decode_line(&line[..line.len() - 1]).unwrap(), e);
        for bad in [
            &b"[]"[..],
            b"{}",
            b"{\"type\":\"\"}",
            b"{\"type\":1}",
            b"nope",
            b"{\"type\":\"t\",\"x\":1}",
        ] {
            assert!(
                matches!(decode_line(bad), Err(ChannelError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_line_over_the_cap_fails_the_reader_without_reading_it_all() {
        let mut big = b"{\"type\":\"task\",\"data\":\"".to_vec();
        big.resize(5 * 1024 * 1024, b'a');
        big.extend_from_slice(b"\"}\n");
        let mut reader = EnvelopeReader::new(tokio::io::BufReader::new(&big[..]));
        assert_eq!(
            reader.next().await,
            Err(ChannelError::LineTooLong { limit: MAX_LINE })
        );
        let writer_refuses = encode_line(&Envelope::new("event", json!("x".repeat(MAX_LINE))));
        assert_eq!(
            writer_refuses,
            Err(ChannelError::LineTooLong { limit: MAX_LINE })
        );
    }

    #[tokio::test]
    async fn the_reader_skips_blank_lines_and_reports_the_end() {
        let input = b"\n{\"type\":\"a\"}\r\n{\"type\":\"b\",\"id\":\"1\"}\n";
        let mut reader = EnvelopeReader::new(tokio::io::BufReader::new(&input[..]));
        assert_eq!(reader.next().await.unwrap().kind, "a");
        assert_eq!(reader.next().await.unwrap().id.as_deref(), Some("1"));
        assert_eq!(reader.next().await, Err(ChannelError::Closed));
    }

    #[test]
    fn relayed_fields_are_clamped() {
        assert_eq!(clamp_text("héllo", 2), "h…[iterion: 5 bytes omitted]");
        assert_eq!(clamp_text("ok", 2), "ok");
        assert_eq!(
            clamp_json(json!("abcdef"), 4),
            json!({"_iterion_sandbox_relay_omitted_bytes": 8})
        );
    }
}

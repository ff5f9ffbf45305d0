//! The runner channel's envelope decoder (SANDBOX.md §13.1) on arbitrary bytes: `decode_line`
//! never panics, a decoded envelope re-encodes to a line that decodes again with the same type and
//! id, and
//! the streaming reader over the same bytes (split into lines) agrees with it, never holding a
//! line over the 4 MiB cap.
#![no_main]

#[path = "../../crates/agent/src/envelope.rs"]
#[allow(dead_code, missing_docs)]
mod envelope;

use envelope::{ChannelError, EnvelopeReader, MAX_LINE, decode_line, encode_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = decode_line(data) {
        assert!(!e.kind.is_empty());
        let line = encode_line(&e).expect("a decoded envelope re-encodes");
        assert_eq!(line.last(), Some(&b'\n'));
        // Kind and id survive exactly (numbers in `data` may move by one ULP without serde_json's
        // float_roundtrip, so `data` is only required to decode again).
        let again = decode_line(&line[..line.len() - 1]).expect("a re-encoded line decodes");
        assert_eq!((again.kind, again.id), (e.kind, e.id));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut reader = EnvelopeReader::new(tokio::io::BufReader::new(data));
        for _ in 0..64 {
            match reader.next().await {
                Ok(e) => assert!(!e.kind.is_empty()),
                Err(ChannelError::LineTooLong { limit }) => {
                    assert_eq!(limit, MAX_LINE);
                    break;
                }
                Err(ChannelError::Closed) => break,
                Err(_) => {}
            }
        }
    });
});

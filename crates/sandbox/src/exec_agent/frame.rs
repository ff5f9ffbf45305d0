//! The exec agent's wire: length-prefixed binary frames, `[kind u8][exec id u32 BE][len u32 BE]`
//! then `len` payload bytes. Both sides bound what they read ([`MAX_PAYLOAD`]): the engine reads
//! frames a hostile sandbox may have forged, so a length over the bound, an unknown kind or a
//! malformed payload ends the channel, never the engine.
//!
//! The engine speaks first (version 2): a [`Frame::Greet`] carries what belongs to the run (its
//! environment), the agent answers [`Frame::Hello`], and only then are execs started. So an agent
//! can be started before any run exists (a warm pool entry's own command, nobody attached yet)
//! and writes nothing until the run that claims it attaches and greets.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest payload either side accepts. Output is sent in chunks well under it.
pub const MAX_PAYLOAD: usize = 256 * 1024;

/// The size of the output chunks the agent sends.
pub const CHUNK: usize = 64 * 1024;

/// The protocol version the agent announces in its hello; the engine refuses any other.
pub const PROTOCOL_VERSION: u32 = 2;

/// What a `Greet` frame carries: what belongs to the run that talks to the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Greeting {
    /// Put in front of every exec's own env (an exec's own pair wins over a pair of the same
    /// key here): the run's container env when the sandbox was created without it (a warm pool
    /// entry). Never written into the agent's own environment.
    pub env: Vec<(String, String)>,
}

/// What a `Start` frame asks for: one process, like a driver's exec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRequest {
    /// The program and its arguments; never empty.
    pub argv: Vec<String>,
    /// Appended to the agent's environment (the sandbox's), in order.
    pub env: Vec<(String, String)>,
    /// The working directory; `None` = the agent's (the workspace folder).
    pub workdir: Option<String>,
    /// Whether stdin frames will follow; without, the process's stdin is `/dev/null`.
    pub stdin: bool,
}

/// One frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Engine → agent, exec id 0, first frame: the run's greeting; the agent answers `Hello`.
    Greet(Greeting),
    /// Agent → engine, exec id 0, first frame: the agent is ready. Payload: the version.
    Hello(u32),
    /// Engine → agent: start exec `id`.
    Start(u32, StartRequest),
    /// Engine → agent: bytes for exec `id`'s stdin.
    Stdin(u32, Vec<u8>),
    /// Engine → agent: exec `id`'s stdin ends.
    StdinEnd(u32),
    /// Engine → agent: kill exec `id`'s process group.
    Kill(u32),
    /// Agent → engine: exec `id` wrote to stdout.
    Stdout(u32, Vec<u8>),
    /// Agent → engine: exec `id` wrote to stderr.
    Stderr(u32, Vec<u8>),
    /// Agent → engine: exec `id` ended with this code (128 + signal when killed by one).
    Exit(u32, i64),
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The stream failed or ended inside a frame.
    #[error("exec agent channel: {0}")]
    Io(#[from] std::io::Error),
    /// A frame announced more than [`MAX_PAYLOAD`] bytes.
    #[error("exec agent frame of {0} bytes is over the {MAX_PAYLOAD}-byte bound")]
    TooLong(usize),
    /// An unknown kind, or a payload of the wrong shape.
    #[error("exec agent frame malformed: {0}")]
    Malformed(String),
}

const HELLO: u8 = 0x01;
const GREET: u8 = 0x06;
const START: u8 = 0x02;
const STDIN: u8 = 0x03;
const STDIN_END: u8 = 0x04;
const KILL: u8 = 0x05;
const STDOUT: u8 = 0x11;
const STDERR: u8 = 0x12;
const EXIT: u8 = 0x13;

impl Frame {
    fn parts(&self) -> (u8, u32, std::borrow::Cow<'_, [u8]>) {
        use std::borrow::Cow;
        match self {
            Frame::Hello(version) => (HELLO, 0, Cow::Owned(version.to_be_bytes().to_vec())),
            // A greeting of strings always serialises.
            Frame::Greet(greeting) => (
                GREET,
                0,
                Cow::Owned(serde_json::to_vec(greeting).unwrap_or_default()),
            ),
            Frame::Start(id, request) => (
                START,
                *id,
                // A request of strings always serialises.
                Cow::Owned(serde_json::to_vec(request).unwrap_or_default()),
            ),
            Frame::Stdin(id, bytes) => (STDIN, *id, Cow::Borrowed(bytes.as_slice())),
            Frame::StdinEnd(id) => (STDIN_END, *id, Cow::Borrowed(&[][..])),
            Frame::Kill(id) => (KILL, *id, Cow::Borrowed(&[][..])),
            Frame::Stdout(id, bytes) => (STDOUT, *id, Cow::Borrowed(bytes.as_slice())),
            Frame::Stderr(id, bytes) => (STDERR, *id, Cow::Borrowed(bytes.as_slice())),
            Frame::Exit(id, code) => (EXIT, *id, Cow::Owned(code.to_be_bytes().to_vec())),
        }
    }

    /// Writes the frame (header and payload in one buffer, so concurrent writers that hold the
    /// sink's lock never interleave).
    ///
    /// # Errors
    ///
    /// The sink's, or [`FrameError::TooLong`] for a payload over the bound.
    pub async fn write<W: AsyncWrite + Unpin + ?Sized>(
        &self,
        sink: &mut W,
    ) -> Result<(), FrameError> {
        let (kind, id, payload) = self.parts();
        if payload.len() > MAX_PAYLOAD {
            return Err(FrameError::TooLong(payload.len()));
        }
        let mut buffer = Vec::with_capacity(9 + payload.len());
        buffer.push(kind);
        buffer.extend_from_slice(&id.to_be_bytes());
        // Bounded above by MAX_PAYLOAD, so it fits a u32.
        buffer.extend_from_slice(
            &u32::try_from(payload.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        buffer.extend_from_slice(&payload);
        sink.write_all(&buffer).await?;
        sink.flush().await?;
        Ok(())
    }

    /// Reads one frame; `Ok(None)` at a clean end of stream (between frames).
    ///
    /// # Errors
    ///
    /// [`FrameError`]: the stream's, a length over the bound, a malformed frame.
    pub async fn read<R: AsyncRead + Unpin + ?Sized>(
        source: &mut R,
    ) -> Result<Option<Frame>, FrameError> {
        let mut header = [0u8; 9];
        let mut filled = 0;
        while filled < header.len() {
            let n = source.read(&mut header[filled..]).await?;
            if n == 0 {
                if filled == 0 {
                    return Ok(None);
                }
                return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            filled += n;
        }
        let kind = header[0];
        let id = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(FrameError::TooLong(len));
        }
        let mut payload = vec![0u8; len];
        source.read_exact(&mut payload).await?;
        let fixed = |payload: &[u8]| -> Result<[u8; 8], FrameError> {
            payload.try_into().map_err(|_| {
                FrameError::Malformed(format!("kind {kind:#x} needs 8 bytes, got {len}"))
            })
        };
        let frame = match kind {
            HELLO => {
                let bytes: [u8; 4] = payload.as_slice().try_into().map_err(|_| {
                    FrameError::Malformed(format!("hello needs 4 bytes, got {len}"))
                })?;
                Frame::Hello(u32::from_be_bytes(bytes))
            }
            GREET => Frame::Greet(
                serde_json::from_slice(&payload)
                    .map_err(|e| FrameError::Malformed(format!("greeting: {e}")))?,
            ),
            START => {
                let request: StartRequest = serde_json::from_slice(&payload)
                    .map_err(|e| FrameError::Malformed(format!("start request: {e}")))?;
                if request.argv.is_empty() {
                    return Err(FrameError::Malformed(
                        "start request with an empty argv".into(),
                    ));
                }
                Frame::Start(id, request)
            }
            STDIN => Frame::Stdin(id, payload),
            STDIN_END => Frame::StdinEnd(id),
            KILL => Frame::Kill(id),
            STDOUT => Frame::Stdout(id, payload),
            STDERR => Frame::Stderr(id, payload),
            EXIT => Frame::Exit(id, i64::from_be_bytes(fixed(&payload)?)),
            other => return Err(FrameError::Malformed(format!("unknown kind {other:#x}"))),
        };
        Ok(Some(frame))
    }
}

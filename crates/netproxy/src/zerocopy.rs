//! The zero-copy tunnel relay (Linux `splice(2)`): bytes of a spliced CONNECT tunnel move from
//! one socket to a pipe and from the pipe to the other socket inside the kernel, never through a
//! user-space buffer.
//!
//! Why: a tunnel relays every byte twice (client → proxy → upstream), and on a loaded host the
//! two user-space copies of the generic relay cost throughput that the client and the upstream
//! need (BENCHMARKS.md, "Egress proxy"). Readiness still comes from tokio (`readable`/`writable`
//! then `try_io`, so a spurious wake-up clears the readiness and waits again), and the calls are
//! nix's safe wrappers: no `unsafe` here.
//!
//! Each direction owns one non-blocking pipe and drains it completely before refilling it, so an
//! `EAGAIN` on the way in always means the source has nothing, and on the way out that the
//! destination is full.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{OFlag, SpliceFFlags, splice};
use nix::sys::socket::{Shutdown, shutdown};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// Bytes asked of one `splice` call.
const CHUNK: usize = 1 << 20;

/// A tokio socket whose readiness can drive raw `splice` calls.
pub(crate) trait SpliceSocket {
    /// The socket's descriptor.
    fn fd(&self) -> BorrowedFd<'_>;
    /// Waits until the socket may be ready for `interest`.
    fn ready_for(&self, interest: Interest) -> impl Future<Output = io::Result<()>> + Send;
    /// Runs `f`; a `WouldBlock` clears the readiness.
    fn try_io_with<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R>;
}

macro_rules! splice_socket {
    ($ty:ty) => {
        impl SpliceSocket for $ty {
            fn fd(&self) -> BorrowedFd<'_> {
                self.as_fd()
            }

            async fn ready_for(&self, interest: Interest) -> io::Result<()> {
                self.ready(interest).await.map(|_| ())
            }

            fn try_io_with<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                self.try_io(interest, f)
            }
        }
    };
}

splice_socket!(TcpStream);
splice_socket!(UnixStream);

fn splice_once(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    splice(
        from,
        None,
        to,
        None,
        len,
        // No SPLICE_F_MORE: like MSG_MORE it corks the socket, and a request/response exchange
        // then waits for the 200 ms cork timer.
        SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK,
    )
    .map_err(io::Error::from)
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).map_err(io::Error::from)
}

/// Relays `src` → `dst` until `src` ends, then shuts `dst`'s write half. Returns the bytes moved.
pub(crate) async fn relay<S, D>(src: &S, dst: &D) -> io::Result<u64>
where
    S: SpliceSocket,
    D: SpliceSocket,
{
    let (pipe_r, pipe_w) = pipe()?;
    let mut total = 0u64;
    loop {
        let filled = loop {
            src.ready_for(Interest::READABLE).await?;
            match src.try_io_with(Interest::READABLE, || {
                splice_once(src.fd(), pipe_w.as_fd(), CHUNK)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        };
        if filled == 0 {
            // The descriptor stays owned by `dst`; shutdown(2) does not close it.
            let _ = shutdown(dst.fd().as_raw_fd(), Shutdown::Write);
            return Ok(total);
        }
        let mut left = filled;
        while left > 0 {
            dst.ready_for(Interest::WRITABLE).await?;
            match dst.try_io_with(Interest::WRITABLE, || {
                splice_once(pipe_r.as_fd(), dst.fd(), left)
            }) {
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        total += filled as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (a.unwrap(), b.unwrap().0)
    }

    /// Sends `bytes` then half-closes, while reading everything the other side sends.
    async fn send_and_receive(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        let (mut r, mut w) = stream.split();
        let send = async {
            w.write_all(bytes).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let (_, n) = tokio::join!(send, r.read_to_end(&mut got));
        n.unwrap();
        got
    }

    /// Every byte of a large, patterned stream arrives in order through the spliced relay, in
    /// both directions at once, and EOF propagates as a half-close.
    #[tokio::test]
    async fn a_relay_moves_every_byte_both_ways_and_propagates_eof() {
        let (mut client, proxy_in) = pair().await;
        let (proxy_out, mut upstream) = pair().await;
        let down: Vec<u8> = (0..8_000_000u32).map(|i| (i % 251) as u8).collect();
        let up: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
        let relays =
            async { tokio::join!(relay(&proxy_in, &proxy_out), relay(&proxy_out, &proxy_in)) };
        let upstream_side = send_and_receive(&mut upstream, &down);
        let client_side = send_and_receive(&mut client, &up);
        let ((a, b), at_upstream, at_client) = tokio::join!(relays, upstream_side, client_side);
        assert_eq!(a.unwrap(), up.len() as u64);
        assert_eq!(b.unwrap(), down.len() as u64);
        assert!(at_upstream == up, "upstream got other bytes");
        assert!(at_client == down, "client got other bytes");
    }
}

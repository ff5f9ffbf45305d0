//! Relaying two byte streams until both are done: a tunnel without inspection, a WebSocket after
//! its handshake.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

/// After one direction of a tunnel ends, the other gets this long before both close.
pub(crate) const CLOSE_BACKSTOP: Duration = Duration::from_secs(5);
const COPY_BUF: usize = 64 * 1024;

/// Copies both ways; when one direction finishes, the other gets [`CLOSE_BACKSTOP`], then both
/// close. Cancellation (shutdown) closes at once.
pub(crate) async fn splice<A, B>(client: A, upstream: B, cancel: &CancellationToken)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (cr, mut cw) = tokio::io::split(client);
    let (ur, mut uw) = tokio::io::split(upstream);
    let mut cr = BufReader::with_capacity(COPY_BUF, cr);
    let mut ur = BufReader::with_capacity(COPY_BUF, ur);
    let up = async {
        let r = tokio::io::copy_buf(&mut cr, &mut uw).await;
        let _ = uw.shutdown().await;
        r
    };
    let down = async {
        let r = tokio::io::copy_buf(&mut ur, &mut cw).await;
        let _ = cw.shutdown().await;
        r
    };
    close_together(up, down, cancel).await;
}

/// Runs both directions; when one finishes, the other gets [`CLOSE_BACKSTOP`]. Cancellation ends
/// both at once.
pub(crate) async fn close_together<U, D, T, E>(up: U, down: D, cancel: &CancellationToken)
where
    U: Future<Output = Result<T, E>>,
    D: Future<Output = Result<T, E>>,
{
    tokio::pin!(up, down);
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = &mut up => {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::timeout(CLOSE_BACKSTOP, &mut down) => {}
            }
        }
        _ = &mut down => {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::timeout(CLOSE_BACKSTOP, &mut up) => {}
            }
        }
    }
}

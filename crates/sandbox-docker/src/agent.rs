//! The exec agent as the container's own command (issue 18): attached (before the start of a
//! cold container, at claim for a warm pool entry), greeted here with what the container was
//! created without (a pool entry's run env), the greeted channel handed to the engine
//! ([`SandboxRun::take_attached_agent`](iterion_sandbox::SandboxRun::take_attached_agent)).
//! The container's stdout carries the agent's frames; what it writes on stderr explains a
//! failed start and is otherwise only traced.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use iterion_sandbox::exec_agent::frame::{CHUNK, Greeting};
use iterion_sandbox::exec_agent::{AttachedAgent, handshake};
use tokio::io::AsyncWriteExt;

use crate::api::{ContainerApi, ExecAttachment, ExecChunk};

/// How long the agent has to greet once its container started (a static binary on a local
/// engine greets in milliseconds).
pub(crate) const GREET_WITHIN: Duration = Duration::from_secs(10);

/// How long a claimed warm pool entry's agent, running since the entry was made, has to answer.
pub(crate) const CLAIMED_GREET_WITHIN: Duration = Duration::from_secs(3);

/// The most bytes of the agent's stderr kept to explain why it did not greet.
const STDERR_TAIL: usize = 2048;

/// Resolves with the container's exit code once it ended (`None`: the engine could not say).
pub(crate) type ExitCode = std::pin::Pin<Box<dyn std::future::Future<Output = Option<i64>> + Send>>;

/// The exit code of container `id`'s own command, asked for now (while it runs), so that an
/// auto-removed container still reports it.
pub(crate) fn exit_code(api: Arc<dyn ContainerApi>, id: String) -> ExitCode {
    let waited = tokio::spawn(async move {
        api.wait_container(&id)
            .await
            .map_err(|error| tracing::debug!("sandbox: wait for container {id}: {error}"))
            .ok()
    });
    Box::pin(async move { waited.await.ok().flatten() })
}

/// Greets the agent on `attachment` (its container started) with `greeting` and reads its hello
/// within `within`.
///
/// # Errors
///
/// Why the agent is not there: its container ended, it said something else, or nothing in time.
pub(crate) async fn greet(
    attachment: ExecAttachment,
    exit_code: ExitCode,
    greeting: &Greeting,
    within: Duration,
) -> Result<AttachedAgent, String> {
    let ExecAttachment {
        mut output,
        mut input,
    } = attachment;
    let (mut out_w, mut out_r) = tokio::io::duplex(4 * CHUNK);
    let tail = Arc::new(Mutex::new(Vec::new()));
    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel::<()>();
    let tail_writer = Arc::clone(&tail);
    tokio::spawn(async move {
        while let Some(chunk) = output.next().await {
            match chunk {
                Ok(ExecChunk::Stdout(bytes)) => {
                    if out_w.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                Ok(ExecChunk::Stderr(bytes)) => {
                    tracing::debug!(
                        "sandbox: exec agent stderr: {}",
                        iterion_vocab::escape_controls(String::from_utf8_lossy(&bytes).trim())
                    );
                    let mut tail = tail_writer.lock().unwrap_or_else(PoisonError::into_inner);
                    tail.extend_from_slice(&bytes);
                    let excess = tail.len().saturating_sub(STDERR_TAIL);
                    tail.drain(..excess);
                }
                Err(error) => {
                    tracing::debug!("sandbox: exec agent attach: {error}");
                    break;
                }
            }
        }
        // The attach ends with the container: the engine's side sees the agent's stdout end.
        drop(out_w);
        let _ = ended_tx.send(());
    });
    let why = handshake(&mut input, &mut out_r, greeting, within)
        .await
        .err();
    if let Some(why) = why {
        let tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        let tail = String::from_utf8_lossy(&tail);
        let tail = iterion_vocab::escape_controls(tail.trim());
        return Err(if tail.is_empty() {
            why
        } else {
            format!("{why}: {tail}")
        });
    }
    Ok(AttachedAgent {
        to_agent: input,
        from_agent: Box::pin(out_r),
        // The container's end is the agent's; the engine's wait says with which code.
        exited: Box::pin(async move {
            let _ = ended_rx.await;
            exit_code.await
        }),
    })
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is the assertion.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use bytes::Bytes;
    use futures_util::StreamExt;
    use iterion_sandbox::exec_agent::frame::{Frame, Greeting, PROTOCOL_VERSION};

    use super::*;

    /// An attachment whose container prints `chunks` and then stays attached (its output does
    /// not end), and the engine's side of its stdin.
    fn attached(chunks: Vec<ExecChunk>) -> (ExecAttachment, tokio::io::DuplexStream) {
        let (stdin_w, stdin_r) = tokio::io::duplex(1 << 16);
        let output = futures_util::stream::iter(chunks.into_iter().map(Ok))
            .chain(futures_util::stream::pending())
            .boxed();
        (
            ExecAttachment {
                output,
                input: Box::pin(stdin_w),
            },
            stdin_r,
        )
    }

    fn no_exit() -> ExitCode {
        Box::pin(async { None })
    }

    async fn wire(frame: Frame) -> Bytes {
        let mut bytes = Vec::new();
        frame.write(&mut bytes).await.unwrap();
        Bytes::from(bytes)
    }

    #[tokio::test]
    async fn a_claimed_agent_is_greeted_with_the_runs_env_before_it_is_used() {
        let (attachment, mut stdin) = attached(vec![ExecChunk::Stdout(
            wire(Frame::Hello(PROTOCOL_VERSION)).await,
        )]);
        let greeting = Greeting {
            env: vec![(
                "HTTPS_PROXY".to_owned(),
                "http://t:tok@127.0.0.1:3128".to_owned(),
            )],
        };
        let agent = greet(attachment, no_exit(), &greeting, Duration::from_secs(5))
            .await
            .expect("greeted");
        drop(agent);
        assert_eq!(
            Frame::read(&mut stdin).await.unwrap(),
            Some(Frame::Greet(greeting)),
            "the first bytes the agent gets are the greeting with the run's env"
        );
    }

    #[tokio::test]
    async fn a_hostile_containers_garbage_instead_of_a_hello_is_refused_with_its_stderr_tail() {
        // A header announcing 4 GiB, then more than the tail keeps on stderr.
        let (attachment, _stdin) = attached(vec![
            ExecChunk::Stderr(Bytes::from(vec![b'e'; 3 * STDERR_TAIL])),
            ExecChunk::Stderr(Bytes::from_static(b"\x1b[31mI am not an agent")),
            ExecChunk::Stdout(Bytes::from_static(&[
                0x01, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
            ])),
        ]);
        let started = std::time::Instant::now();
        let why = greet(
            attachment,
            no_exit(),
            &Greeting::default(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "refused at once"
        );
        assert!(why.contains("over the"), "{why}");
        assert!(why.ends_with("I am not an agent"), "{why}");
        assert!(!why.contains('\x1b'), "control bytes are escaped: {why:?}");
        assert!(
            why.len() < STDERR_TAIL * 2 + 200,
            "bounded: {} bytes",
            why.len()
        );
    }

    #[tokio::test]
    async fn an_agent_that_output_something_before_its_hello_or_nothing_is_refused() {
        let (attachment, _stdin) = attached(vec![ExecChunk::Stdout(
            wire(Frame::Stdout(1, b"x".to_vec())).await,
        )]);
        let why = greet(
            attachment,
            no_exit(),
            &Greeting::default(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(why.contains("did not answer the greeting"), "{why}");
        let (attachment, _stdin) = attached(Vec::new());
        let why = greet(
            attachment,
            no_exit(),
            &Greeting::default(),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
        assert!(why.contains("not ready within 100 ms"), "{why}");
    }
}

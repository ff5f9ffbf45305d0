use std::sync::Arc;

use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;

use super::*;
use crate::records::secrets::Redactor;

async fn listener(dir: &Path) -> AskUserListener {
    AskUserListener::bind(
        dir,
        &Redactor::default(),
        Arc::new(iterion_sandbox::NullRunLog),
    )
    .await
    .unwrap()
}

/// Sends `line` (a newline is added) and reads the reply.
async fn send(path: &Path, line: &[u8]) -> AskReply {
    let mut stream = UnixStream::connect(path).await.unwrap();
    let mut bytes = line.to_vec();
    bytes.push(b'\n');
    // The listener may answer (and close) before it read everything: a refused oversized line.
    let _ = stream.write_all(&bytes).await;
    let mut out = Vec::new();
    // A request that reached a slot waits for its reply: nobody gives one here.
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_end(&mut out),
    )
    .await
    .expect("the listener answered at once (a refusal)")
    .unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn request(token: &str, node: &str, question: &str) -> Vec<u8> {
    serde_json::to_vec(&AskRequest {
        token: token.to_owned(),
        node: node.to_owned(),
        question: question.to_owned(),
    })
    .unwrap()
}

fn refused(reply: &AskReply) -> &str {
    match reply {
        AskReply::Refused { reason } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_question_reaches_the_open_slot_of_its_node_and_its_reply_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let l = listener(dir.path()).await;
    let mut asking = l.open("asker");
    let mut other = l.open("other");
    let path = l.path().to_owned();
    let token = l.token().to_owned();
    let client =
        tokio::spawn(async move { send(&path, &request(&token, "asker", "Which env?")).await });
    let asked = asking.asked.recv().await.unwrap();
    assert_eq!(asked.question, "Which env?");
    asked
        .reply
        .send(AskReply::Answer {
            text: "staging".to_owned(),
        })
        .unwrap();
    assert_eq!(
        client.await.unwrap(),
        AskReply::Answer {
            text: "staging".to_owned()
        }
    );
    // The other node's slot saw nothing.
    assert!(other.asked.try_recv().is_err());
    l.shutdown().await;
    assert!(!l.path().exists());
}

#[tokio::test]
async fn a_wrong_token_and_a_second_runs_token_are_refused() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (listener(a_dir.path()).await, listener(b_dir.path()).await);
    assert_ne!(a.token(), b.token());
    let mut slot = a.open("asker");
    for token in [b.token(), "", "0000", &a.token()[..a.token().len() - 1]] {
        let reply = send(a.path(), &request(token, "asker", "Which env?")).await;
        assert_eq!(refused(&reply), "the token is not this run's");
    }
    assert!(
        slot.asked.try_recv().is_err(),
        "no refused question reached the node"
    );
}

#[tokio::test]
async fn an_oversized_question_or_request_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let l = listener(dir.path()).await;
    let mut slot = l.open("asker");
    let big = "q".repeat(QUESTION_MAX_BYTES + 1);
    let reply = send(l.path(), &request(l.token(), "asker", &big)).await;
    assert_eq!(
        refused(&reply),
        format!(
            "the question is over {QUESTION_MAX_BYTES} bytes ({} bytes)",
            QUESTION_MAX_BYTES + 1
        )
    );
    let huge = vec![b'x'; REQUEST_MAX_BYTES * 2];
    let reply = send(l.path(), &huge).await;
    assert_eq!(
        refused(&reply),
        format!("the request is over {REQUEST_MAX_BYTES} bytes")
    );
    let reply = send(l.path(), &request(l.token(), "asker", "  ")).await;
    assert_eq!(refused(&reply), "the question is empty");
    assert!(slot.asked.try_recv().is_err());
}

#[tokio::test]
async fn a_node_without_an_open_slot_is_refused_even_with_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let l = listener(dir.path()).await;
    let reply = send(l.path(), &request(l.token(), "quiet", "Which env?")).await;
    assert_eq!(
        refused(&reply),
        "node \"quiet\" may not ask: it is not an interaction: ask delegate node running now"
    );
    // A slot, once closed, refuses too.
    drop(l.open("asker"));
    let reply = send(l.path(), &request(l.token(), "asker", "Which env?")).await;
    assert!(
        refused(&reply).starts_with("node \"asker\" may not ask"),
        "{reply:?}"
    );
}

#[tokio::test]
async fn the_token_is_redacted_and_the_socket_is_connectable_by_anyone() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let redactor = Redactor::default();
    let l = AskUserListener::bind(
        &dir.path().join("net"),
        &redactor,
        Arc::new(iterion_sandbox::NullRunLog),
    )
    .await
    .unwrap();
    assert!(
        !redactor
            .redact(&format!("x {} y", l.token()))
            .contains(l.token())
    );
    let mode = std::fs::metadata(l.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666);
}

use std::sync::Arc;

use pretty_assertions::assert_eq;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::UnixStream;

use super::*;
use crate::records::secrets::Redactor;

async fn listener(dir: &Path) -> AskUserListener {
    AskUserListener::bind(
        dir,
        None,
        &Redactor::default(),
        Arc::new(iterion_sandbox::NullRunLog),
    )
    .await
    .unwrap()
}

/// The run every test's nodes belong to, unless it says otherwise.
const RUN: &str = "019300aa-bbbb-7ccc-8ddd-eeeeffff0001";

/// Sends `line` (a newline is added) to `l` however it listens, and reads the reply.
async fn send(l: &AskUserListener, line: &[u8]) -> AskReply {
    match l.reach() {
        Reach::Unix(path) => {
            let stream = UnixStream::connect(path).await.unwrap();
            exchange(stream, line).await
        }
        Reach::Tcp(addr) => {
            let stream = tokio::net::TcpStream::connect(addr.as_str()).await.unwrap();
            exchange(stream, line).await
        }
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, line: &[u8]) -> AskReply {
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
    request_of(token, RUN, node, question)
}

fn request_of(token: &str, run: &str, node: &str, question: &str) -> Vec<u8> {
    serde_json::to_vec(&AskRequest {
        token: token.to_owned(),
        run: run.to_owned(),
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
    let mut asking = l.open(RUN, "asker");
    let mut other = l.open(RUN, "other");
    let l = Arc::new(l);
    let token = l.token().to_owned();
    let client = {
        let l = Arc::clone(&l);
        tokio::spawn(async move { send(&l, &request(&token, "asker", "Which env?")).await })
    };
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
    assert!(!l.path().unwrap().exists());
}

#[tokio::test]
async fn a_wrong_token_and_a_second_runs_token_are_refused() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (listener(a_dir.path()).await, listener(b_dir.path()).await);
    assert_ne!(a.token(), b.token());
    let mut slot = a.open(RUN, "asker");
    for token in [b.token(), "", "0000", &a.token()[..a.token().len() - 1]] {
        let reply = send(&a, &request(token, "asker", "Which env?")).await;
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
    let mut slot = l.open(RUN, "asker");
    let big = "q".repeat(QUESTION_MAX_BYTES + 1);
    let reply = send(&l, &request(l.token(), "asker", &big)).await;
    assert_eq!(
        refused(&reply),
        format!(
            "the question is over {QUESTION_MAX_BYTES} bytes ({} bytes)",
            QUESTION_MAX_BYTES + 1
        )
    );
    let huge = vec![b'x'; REQUEST_MAX_BYTES * 2];
    let reply = send(&l, &huge).await;
    assert_eq!(
        refused(&reply),
        format!("the request is over {REQUEST_MAX_BYTES} bytes")
    );
    let reply = send(&l, &request(l.token(), "asker", "  ")).await;
    assert_eq!(refused(&reply), "the question is empty");
    assert!(slot.asked.try_recv().is_err());
}

#[tokio::test]
async fn a_node_without_an_open_slot_is_refused_even_with_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let l = listener(dir.path()).await;
    let reply = send(&l, &request(l.token(), "quiet", "Which env?")).await;
    assert_eq!(
        refused(&reply),
        format!(
            "node \"quiet\" of run \"{RUN}\" may not ask: it is not an interaction: ask delegate node running now"
        )
    );
    // A slot, once closed, refuses too.
    drop(l.open(RUN, "asker"));
    let reply = send(&l, &request(l.token(), "asker", "Which env?")).await;
    assert!(
        refused(&reply).starts_with("node \"asker\" of run"),
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
        Some(CONTAINER_SOCKET),
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
    let mode = std::fs::metadata(l.path().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o666);
    // The CLI in the sandbox is told the path it sees there.
    assert_eq!(l.reach().env(), (SOCKET_ENV, CONTAINER_SOCKET.to_owned()));
}

#[tokio::test]
async fn a_child_runs_node_cannot_ask_as_its_parents_node_or_a_siblings() {
    // One listener for the tree: the parent (RUN) and two adopted children share it, and all
    // three have a node named "asker"; only the child "kid-1"'s is running.
    let dir = tempfile::tempdir().unwrap();
    let l = listener(dir.path()).await;
    let mut kid = l.open("kid-1", "asker");
    for run in [RUN, "kid-2", ""] {
        let reply = send(&l, &request_of(l.token(), run, "asker", "Which env?")).await;
        assert_eq!(
            refused(&reply),
            format!(
                "node \"asker\" of run \"{run}\" may not ask: it is not an interaction: ask delegate node running now"
            )
        );
    }
    assert!(
        kid.asked.try_recv().is_err(),
        "no refused question reached the child"
    );
    // The parent's own node opening later does not replace the child's slot, nor the reverse.
    let mut parent = l.open(RUN, "asker");
    let l = Arc::new(l);
    let ask = |run: &'static str| {
        let l = Arc::clone(&l);
        tokio::spawn(async move {
            send(
                &l,
                &request_of(l.token(), run, "asker", &format!("from {run}")),
            )
            .await
        })
    };
    let (from_kid, from_parent) = (ask("kid-1"), ask(RUN));
    let to_kid = kid.asked.recv().await.unwrap();
    let to_parent = parent.asked.recv().await.unwrap();
    assert_eq!(
        (to_kid.question.as_str(), to_parent.question.as_str()),
        ("from kid-1", &*format!("from {RUN}"))
    );
    to_kid
        .reply
        .send(AskReply::Answer {
            text: "kid".to_owned(),
        })
        .unwrap();
    to_parent
        .reply
        .send(AskReply::Answer {
            text: "parent".to_owned(),
        })
        .unwrap();
    assert_eq!(
        from_kid.await.unwrap(),
        AskReply::Answer {
            text: "kid".to_owned()
        }
    );
    assert_eq!(
        from_parent.await.unwrap(),
        AskReply::Answer {
            text: "parent".to_owned()
        }
    );
}

async fn tcp_listener() -> AskUserListener {
    AskUserListener::bind_tcp(
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        "127.0.0.1",
        &Redactor::default(),
        Arc::new(iterion_sandbox::NullRunLog),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn over_tcp_a_question_reaches_its_slot_and_a_second_runs_connection_is_refused() {
    let (a, b) = (tcp_listener().await, tcp_listener().await);
    let Reach::Tcp(addr) = a.reach().clone() else {
        panic!("{:?}", a.reach())
    };
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );
    assert_eq!(a.reach().env().0, ADDR_ENV);
    assert_eq!(a.path(), None);
    let mut slot = a.open(RUN, "asker");
    // A second run (its own listener, its own token) connecting to this one: refused, even
    // naming a node that is asking right now; and a node of that second run is not asked for.
    let _b_slot = b.open("second-run", "asker");
    let reply = send(&a, &request_of(b.token(), RUN, "asker", "Which env?")).await;
    assert_eq!(refused(&reply), "the token is not this run's");
    let reply = send(
        &a,
        &request_of(a.token(), "second-run", "asker", "Which env?"),
    )
    .await;
    assert!(
        refused(&reply).starts_with("node \"asker\" of run \"second-run\" may not ask"),
        "{reply:?}"
    );
    // Over the size bound, over TCP too.
    let reply = send(&a, &vec![b'x'; REQUEST_MAX_BYTES * 2]).await;
    assert_eq!(
        refused(&reply),
        format!("the request is over {REQUEST_MAX_BYTES} bytes")
    );
    assert!(slot.asked.try_recv().is_err());
    // The asking node itself is answered.
    let a = Arc::new(a);
    let client = {
        let a = Arc::clone(&a);
        tokio::spawn(async move { send(&a, &request(a.token(), "asker", "Which env?")).await })
    };
    let asked = slot.asked.recv().await.unwrap();
    asked.reply.send(AskReply::Paused).unwrap();
    assert_eq!(client.await.unwrap(), AskReply::Paused);
    a.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr.as_str()).await.is_err());
}

/// The workflow of `p.iter` in `dir`, whose one node is a subbot of `c.iter` (`child`), that
/// child's own subbot of `g.iter` (`grandchild`).
fn tree(dir: &Path, child: &str, grandchild: &str) -> iterion_dsl::ir::Workflow {
    std::fs::write(dir.join("g.iter"), grandchild).unwrap();
    std::fs::write(dir.join("c.iter"), child).unwrap();
    std::fs::write(
        dir.join("p.iter"),
        "subbot kid:\n  source: \"c.iter\"\n\nworkflow p:\n  entry: kid\n  kid -> done\n",
    )
    .unwrap();
    let compiled =
        iterion_dsl::compile_file(&dir.join("p.iter"), &iterion_dsl::CompileOptions::default())
            .unwrap();
    compiled
        .workflow
        .unwrap_or_else(|| panic!("{:#?}", compiled.diagnostics))
}

#[test]
fn wanted_counts_an_asking_delegate_node_in_an_adopting_child_but_not_in_a_declaring_one() {
    let asker = |interaction: &str, sandbox: &str| {
        format!(
            "agent a:\n  model: \"anthropic/claude-x\"\n  backend: claude_code\n  user: \"hi\"\n  interaction: {interaction}\n\nworkflow g:\n  entry: a\n{sandbox}  a -> done\n"
        )
    };
    let via = |sandbox: &str| {
        format!(
            "subbot deeper:\n  source: \"g.iter\"\n\nworkflow c:\n  entry: deeper\n{sandbox}  deeper -> done\n"
        )
    };
    let image = "  sandbox:\n    image: \"alpine:3\"\n";
    // (case, child, grandchild, wanted)
    let cases = [
        (
            "an asking grandchild, both adopting",
            via(""),
            asker("ask", ""),
            true,
        ),
        (
            "a grandchild that does not ask",
            via(""),
            asker("none", ""),
            false,
        ),
        (
            "the grandchild declares its own sandbox",
            via(""),
            asker("ask", image),
            false,
        ),
        (
            "the child declares its own sandbox",
            via(image),
            asker("ask", ""),
            false,
        ),
    ];
    let mut got = Vec::new();
    for (case, child, grandchild, _) in &cases {
        let dir = tempfile::tempdir().unwrap();
        got.push((*case, wanted(&tree(dir.path(), child, grandchild))));
    }
    let want: Vec<_> = cases.iter().map(|(case, _, _, w)| (*case, *w)).collect();
    assert_eq!(got, want);
}

/// Whether `stream` is closed by the listener within `wait` (end of file, or a reset).
async fn closed_within<S: AsyncRead + Unpin>(stream: &mut S, wait: std::time::Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(wait, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn attack_a_sandbox_opening_connections_by_the_hundred_holds_at_most_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let l = listener(dir.path()).await;
    let mut slot = l.open(RUN, "asker");
    let Reach::Unix(path) = l.reach().clone() else {
        panic!("a unix listener")
    };
    // Idle connections that never send a request: each would be held for REQUEST_TIMEOUT (10 s),
    // and each holds one of the engine's file descriptors meanwhile.
    let mut idle = Vec::new();
    for _ in 0..(MAX_CONNECTIONS * 6) {
        idle.push(UnixStream::connect(&path).await.unwrap());
    }
    let mut held = 0;
    for stream in &mut idle {
        if !closed_within(stream, std::time::Duration::from_millis(100)).await {
            held += 1;
        }
    }
    assert!(
        held <= MAX_CONNECTIONS,
        "the listener held {held} idle connections; the bound is {MAX_CONNECTIONS}"
    );
    // Once they are gone, the node asks again as before.
    drop(idle);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let l = Arc::new(l);
    let client = {
        let (l, token) = (Arc::clone(&l), l.token().to_owned());
        tokio::spawn(async move { send(&l, &request(&token, "asker", "Which env?")).await })
    };
    let asked = slot.asked.recv().await.unwrap();
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
}

#[tokio::test]
async fn attack_a_refusal_quotes_a_bounded_part_of_a_hostile_node_name() {
    let dir = tempfile::tempdir().unwrap();
    let l = listener(dir.path()).await;
    let node = "n".repeat(40 * 1024);
    let reply = send(&l, &request(l.token(), &node, "Which env?")).await;
    let reason = refused(&reply);
    assert!(reason.contains("may not ask"), "{reason}");
    assert!(
        reason.len() < 512,
        "the refusal (and its run-log line) quotes {} bytes of the sandbox's node name",
        reason.len()
    );
}

/// A run log that keeps its lines.
#[derive(Default)]
struct Lines(std::sync::Mutex<Vec<String>>);

impl RunLog for Lines {
    fn line(&self, _level: LogLevel, line: &str) {
        self.0.lock().unwrap().push(line.to_owned());
    }
}

#[tokio::test]
async fn attack_refusals_by_the_thousand_write_a_bounded_run_log() {
    let dir = tempfile::tempdir().unwrap();
    let lines = Arc::new(Lines::default());
    let l = AskUserListener::bind(
        dir.path(),
        None,
        &Redactor::default(),
        Arc::clone(&lines) as Arc<dyn RunLog>,
    )
    .await
    .unwrap();
    for _ in 0..(LOGGED_REFUSALS_MAX * 3) {
        let reply = send(&l, &request("wrong", "asker", "Which env?")).await;
        assert_eq!(refused(&reply), "the token is not this run's");
    }
    let lines = lines.0.lock().unwrap();
    assert_eq!(
        lines.len(),
        LOGGED_REFUSALS_MAX + 1,
        "every refusal is answered, the run log keeps the first ones and one line saying so"
    );
    assert!(lines.last().unwrap().contains("further ones are refused"));
}

/// Over TCP (kubernetes: any pod that reaches the runner can connect) one peer holding idle
/// connections gets its share and no more, so the sandbox's own node, another peer, still asks.
#[tokio::test]
async fn attack_a_network_peer_holding_connections_cannot_take_the_asking_nodes() {
    let l = Arc::new(tcp_listener().await);
    let mut slot = l.open(RUN, "asker");
    let Reach::Tcp(addr) = l.reach().clone() else {
        panic!("{:?}", l.reach())
    };
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    // The hostile peer: 127.0.0.2, a loopback address of its own.
    let mut idle = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        idle.push(socket.connect(addr).await.unwrap());
    }
    let mut held = 0;
    for stream in &mut idle {
        if !closed_within(stream, std::time::Duration::from_millis(100)).await {
            held += 1;
        }
    }
    assert_eq!(held, MAX_CONNECTIONS_PER_PEER, "the peer's share");
    // The asking node (127.0.0.1) is served while the hostile peer holds its share.
    let client = {
        let (l, token) = (Arc::clone(&l), l.token().to_owned());
        tokio::spawn(async move { send(&l, &request(&token, "asker", "Which env?")).await })
    };
    let asked = tokio::time::timeout(std::time::Duration::from_secs(5), slot.asked.recv())
        .await
        .expect("the asking node got through")
        .unwrap();
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
    drop(idle);
}

//! The MCP client against in-memory servers, hostile ones included.
use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::*;

type Handler = Arc<dyn Fn(&Value) -> Vec<String> + Send + Sync>;
/// What each spawn was given: argv and env.
type Seen = Arc<std::sync::Mutex<Vec<(Vec<String>, Vec<(String, String)>)>>>;

/// A "process" that is a task answering each request line with what `handler` returns.
struct FakeSpawn {
    handler: Handler,
    seen: Seen,
}

#[async_trait]
impl Spawn for FakeSpawn {
    async fn spawn(
        &self,
        argv: &[String],
        env: &[(String, String)],
        _workdir: &Path,
    ) -> Result<Pipes, std::io::Error> {
        self.seen
            .lock()
            .unwrap()
            .push((argv.to_vec(), env.to_vec()));
        let (client_in, server_out) = tokio::io::duplex(4 << 20);
        let (server_in, client_out) = tokio::io::duplex(4 << 20);
        let handler = self.handler.clone();
        let task = tokio::spawn(async move {
            let mut lines = BufReader::new(server_out).lines();
            let mut out = server_in;
            while let Ok(Some(line)) = lines.next_line().await {
                let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                for reply in handler(&msg) {
                    if out.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = out.write_all(b"\n").await;
                }
            }
        });
        struct Abort(tokio::task::JoinHandle<()>);
        impl Drop for Abort {
            fn drop(&mut self) {
                self.0.abort();
            }
        }
        Ok(Pipes {
            stdin: Box::pin(client_in),
            stdout: Box::pin(client_out),
            guard: Box::new(Abort(task)),
        })
    }
}

fn answer(msg: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string()
}

fn server(tools: Value) -> Handler {
    Arc::new(move |msg: &Value| match msg["method"].as_str() {
        Some("initialize") => vec![
            "this server logs on stdout".to_owned(),
            json!({"jsonrpc": "2.0", "method": "notifications/message"}).to_string(),
            answer(msg, json!({"protocolVersion": PROTOCOL_VERSION})),
        ],
        Some("tools/list") => vec![answer(msg, json!({"tools": tools.clone()}))],
        Some("tools/call") => match msg["params"]["name"].as_str() {
            Some("echo") => vec![answer(
                msg,
                json!({"content": [{"type": "text", "text": msg["params"]["arguments"]["say"]}]}),
            )],
            Some("huge") => vec!["x".repeat(MAX_LINE + 10)],
            _ => vec![answer(
                msg,
                json!({"content": [{"type": "text", "text": "no such tool"}], "isError": true}),
            )],
        },
        _ => vec![],
    })
}

fn spec(name: &str) -> McpServerSpec {
    McpServerSpec {
        name: name.to_owned(),
        command: "${SERVER_BIN}".to_owned(),
        args: vec!["--flag".to_owned()],
        env: [("MODE".to_owned(), "${MODE:-plain}".to_owned())].into(),
        only: None,
    }
}

#[tokio::test]
async fn a_server_limited_to_named_tools_offers_only_those() {
    let tools = json!([{"name": "echo"}, {"name": "huge"}, {"name": "fails"}]);
    let spawn = FakeSpawn {
        handler: server(tools),
        seen: Arc::default(),
    };
    let mut limited = spec("srv");
    limited.only = Some(vec!["echo".to_owned(), "absent".to_owned()]);
    let clients = McpClients::start(&[limited], Some(&spawn), Path::new("/"), &expand)
        .await
        .unwrap();
    let names: Vec<&str> = clients.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["mcp__srv__echo"]);
    assert!(!clients.owns("mcp__srv__huge"));
}

fn expand(v: &str) -> String {
    let env = |k: &str| (k == "SERVER_BIN").then(|| "/bin/srv".to_owned());
    iterion_dsl::template::expand_host(v, env).unwrap()
}

#[tokio::test]
async fn tools_are_listed_prefixed_called_and_hostile_names_dropped() {
    let tools = json!([
        {"name": "echo", "description": "Echoes", "inputSchema": {"type": "object"}},
        {"name": "huge"},
        {"name": "fails"},
        {"name": "bad name; rm -rf /"},
        {"name": "x".repeat(80)},
        {"description": "no name"},
    ]);
    let spawn = FakeSpawn {
        handler: server(tools),
        seen: Arc::default(),
    };
    let clients = McpClients::start(&[spec("srv")], Some(&spawn), Path::new("/"), &expand)
        .await
        .unwrap();
    let names: Vec<&str> = clients.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["mcp__srv__echo", "mcp__srv__huge", "mcp__srv__fails"]
    );
    assert_eq!(clients.specs()[1].input_schema, json!({"type": "object"}));
    // `${…}` was expanded by the given function (the container's environment), not the host's.
    assert_eq!(
        spawn.seen.lock().unwrap()[0],
        (
            vec!["/bin/srv".to_owned(), "--flag".to_owned()],
            vec![("MODE".to_owned(), "plain".to_owned())]
        )
    );
    assert_eq!(
        clients.call("mcp__srv__echo", &json!({"say": "hi"})).await,
        Ok("hi".to_owned())
    );
    assert_eq!(
        clients.call("mcp__srv__fails", &json!({})).await,
        Err("no such tool".to_owned())
    );
    assert!(!clients.owns("mcp__srv__bad"));
    // A line over the bound ends that request with an error, not an allocation without end.
    let err = clients
        .call("mcp__srv__huge", &json!({}))
        .await
        .unwrap_err();
    assert!(err.contains("over"), "{err}");
}

#[tokio::test]
async fn servers_without_a_spawner_are_refused_and_none_need_none() {
    let started = McpClients::start(&[spec("s")], None, Path::new("/"), &expand).await;
    assert!(matches!(started, Err(McpError::NoSpawner)));
    let none = McpClients::start(&[], None, Path::new("/"), &expand)
        .await
        .unwrap();
    assert!(none.specs().is_empty());
}

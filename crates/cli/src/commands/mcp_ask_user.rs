//! `iterion __mcp-ask-user` (hidden): the stdio MCP server a delegate CLI (`claude`, `codex`) of
//! an `interaction: ask` node runs, where the CLI runs (inside the sandbox as
//! `/run/iterion/bin/iterion __mcp-ask-user`). It offers one tool, `ask_user {question}`
//! (claude shows it as `mcp__iterion__ask_user`), and sends each call to the run's ask-user
//! listener — a Unix socket `$ITERION_ASK_USER_SOCKET`, or a TCP address
//! `$ITERION_ASK_USER_ADDR` (`IP:PORT`, where no socket can be shared: kubernetes) — with
//! `$ITERION_ASK_USER_TOKEN`, the run `$ITERION_ASK_USER_RUN` and the node
//! `$ITERION_ASK_USER_NODE`, all set by the engine in the CLI's MCP config:
//!
//! - an answer (an operator at a terminal) is the tool's result, and the CLI goes on;
//! - `paused` (nobody can answer now): it ends the CLI — SIGTERM to its parent, SIGKILL 10 s
//!   later if it is still there — and answers nothing: the engine keeps the CLI's session and
//!   pauses the run, and the resume continues that session with the answer;
//! - a refusal (wrong token, oversized question, a node that may not ask) is a tool error.
//!
//! JSON-RPC 2.0, one message a line. It reads nothing else from the environment, resolves no
//! name and no user (the binary is static and has no NSS), and writes nothing but JSON-RPC to
//! stdout.
use std::io::{BufRead, Read as _, Write};

use iterion_engine::ask_user::{
    ADDR_ENV, AskReply, AskRequest, NODE_ENV, RUN_ENV, Reach, SOCKET_ENV, TOKEN_ENV,
};
use serde_json::{Value, json};

use crate::exit::Exit;

/// The longest JSON-RPC line read from the CLI.
const LINE_MAX_BYTES: u64 = 4 * 1024 * 1024;
/// The longest reply read from the listener.
const REPLY_MAX_BYTES: u64 = 1024 * 1024;
/// How long the CLI has to go after SIGTERM before SIGKILL.
const END_GRACE: std::time::Duration = std::time::Duration::from_secs(10);
/// The tool's name.
const TOOL: &str = "ask_user";
/// How long connecting to a TCP listener may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where questions go.
struct Listener {
    /// The listener, or why it is not named right.
    reach: Result<Reach, String>,
    token: String,
    run: String,
    node: String,
}

/// The listener the environment names: exactly one of [`SOCKET_ENV`] (a path) and
/// [`ADDR_ENV`] (an `IP:PORT`: no name is resolved).
fn reach_of(socket: Option<String>, addr: Option<String>) -> Result<Reach, String> {
    let (socket, addr) = (
        socket.filter(|s| !s.is_empty()),
        addr.filter(|a| !a.is_empty()),
    );
    match (socket, addr) {
        (Some(path), None) => Ok(Reach::Unix(path)),
        (None, Some(addr)) => addr
            .parse::<std::net::SocketAddr>()
            .map(|_| Reach::Tcp(addr.clone()))
            .map_err(|_| format!("{ADDR_ENV}={addr:?} is not an IP:PORT address")),
        (None, None) => Err(format!("neither {SOCKET_ENV} nor {ADDR_ENV} is set")),
        (Some(_), Some(_)) => Err(format!(
            "both {SOCKET_ENV} and {ADDR_ENV} are set; the engine sets one"
        )),
    }
}

/// One request over a connected stream; the reply, or why there is none.
fn exchange<S: std::io::Read + Write>(mut stream: S, line: &[u8]) -> AskReply {
    let refused = |reason: String| AskReply::Refused { reason };
    // A refusal may come (and the socket close) before the whole line is written.
    let _ = stream.write_all(line);
    let mut reply = Vec::new();
    if let Err(e) = (&mut stream).take(REPLY_MAX_BYTES).read_to_end(&mut reply) {
        return refused(format!("the listener's reply could not be read: {e}"));
    }
    serde_json::from_slice(&reply)
        .unwrap_or_else(|e| refused(format!("the listener's reply is unreadable: {e}")))
}

impl Listener {
    /// Sends `question` and reads the reply; a transport failure is a refusal naming it.
    fn ask(&self, question: &str) -> AskReply {
        let refused = |reason: String| AskReply::Refused { reason };
        let reach = match &self.reach {
            Ok(reach) => reach,
            Err(why) => return refused(format!("the run's ask-user listener is not named: {why}")),
        };
        let request = AskRequest {
            token: self.token.clone(),
            run: self.run.clone(),
            node: self.node.clone(),
            question: question.to_owned(),
        };
        let mut line = serde_json::to_vec(&request).unwrap_or_default();
        line.push(b'\n');
        let timeout = Some(std::time::Duration::from_secs(10));
        let unreachable = |what: &str, e: std::io::Error| {
            refused(format!(
                "the run's ask-user listener {what} cannot be reached: {e}"
            ))
        };
        match reach {
            Reach::Unix(path) => match std::os::unix::net::UnixStream::connect(path) {
                Ok(stream) => {
                    let _ = stream.set_write_timeout(timeout);
                    exchange(stream, &line)
                }
                Err(e) => unreachable(path, e),
            },
            Reach::Tcp(addr) => {
                let Ok(parsed) = addr.parse::<std::net::SocketAddr>() else {
                    return refused(format!("{ADDR_ENV}={addr:?} is not an IP:PORT address"));
                };
                match std::net::TcpStream::connect_timeout(&parsed, CONNECT_TIMEOUT) {
                    Ok(stream) => {
                        let _ = stream.set_write_timeout(timeout);
                        exchange(stream, &line)
                    }
                    Err(e) => unreachable(addr, e),
                }
            }
        }
    }
}

/// Runs the server on stdin/stdout until stdin ends.
pub fn run(env: &iterion_vocab::Environment) -> Exit {
    let listener = Listener {
        reach: reach_of(env.get(SOCKET_ENV), env.get(ADDR_ENV)),
        token: env.get(TOKEN_ENV).unwrap_or_default(),
        run: env.get(RUN_ENV).unwrap_or_default(),
        node: env.get(NODE_ENV).unwrap_or_default(),
    };
    let parent = std::os::unix::process::parent_id();
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    serve(
        &mut stdin.lock(),
        &mut stdout.lock(),
        &|q| listener.ask(q),
        &|| end_parent(parent),
    );
    Exit::Success
}

/// Ends the CLI that started this server: SIGTERM, then SIGKILL after [`END_GRACE`] unless it
/// went (this process then sees stdin end and exits first).
fn end_parent(parent: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(parent) else {
        return;
    };
    if raw <= 1 {
        return;
    }
    let pid = Pid::from_raw(raw);
    let _ = kill(pid, Signal::SIGTERM);
    std::thread::spawn(move || {
        std::thread::sleep(END_GRACE);
        if kill(pid, None).is_ok() {
            let _ = kill(pid, Signal::SIGKILL);
        }
    });
}

/// The JSON-RPC loop: one reply a request, none for a notification; after a pause it answers
/// nothing more (its CLI is being ended) and reads to the end.
fn serve(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    ask: &dyn Fn(&str) -> AskReply,
    pause: &dyn Fn(),
) {
    let mut paused = false;
    loop {
        let mut line = Vec::new();
        match input.take(LINE_MAX_BYTES).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if paused || (line.last() != Some(&b'\n') && line.len() as u64 >= LINE_MAX_BYTES) {
            // Over the bound: drop the rest of that line too.
            if !paused {
                let mut rest = Vec::new();
                let _ = input.read_until(b'\n', &mut rest);
            }
            continue;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            write(output, &error(Value::Null, -32700, "parse error"));
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue; // a notification
        };
        let method = message["method"].as_str().unwrap_or_default();
        let reply = match method {
            "initialize" => result(
                id,
                json!({
                    "protocolVersion": message["params"]["protocolVersion"]
                        .as_str()
                        .unwrap_or("2024-11-05"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "iterion-ask-user", "version": env!("CARGO_PKG_VERSION")},
                }),
            ),
            "ping" => result(id, json!({})),
            "tools/list" => result(id, json!({"tools": [tool_spec()]})),
            "tools/call" => {
                let params = &message["params"];
                if params["name"].as_str() != Some(TOOL) {
                    error(id, -32602, "unknown tool")
                } else {
                    match params["arguments"]["question"].as_str() {
                        None => {
                            tool_text(id, "input field \"question\" (a string) is required", true)
                        }
                        Some(question) => match ask(question) {
                            AskReply::Answer { text } => tool_text(id, &text, false),
                            AskReply::Refused { reason } => {
                                tool_text(id, &format!("ask_user refused: {reason}"), true)
                            }
                            AskReply::Paused => {
                                paused = true;
                                pause();
                                continue;
                            }
                        },
                    }
                }
            }
            _ => error(id, -32601, "method not found"),
        };
        write(output, &reply);
    }
}

fn tool_spec() -> Value {
    json!({
        "name": TOOL,
        "description": "Ask the person running this workflow a question and wait for the answer. Use it when you need information, a decision or an approval you cannot work out yourself.",
        "inputSchema": {
            "type": "object",
            "properties": {"question": {"type": "string", "description": "The question, on its own."}},
            "required": ["question"],
            "additionalProperties": false,
        },
    })
}

fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn tool_text(id: Value, text: &str, is_error: bool) -> Value {
    result(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": is_error}),
    )
}

fn write(output: &mut dyn Write, message: &Value) {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    let _ = output.write_all(&line);
    let _ = output.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_listener_is_a_socket_or_an_ip_address_never_both_never_a_name() {
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            reach_of(s("/run/iterion/net/ask-user.sock"), None),
            Ok(Reach::Unix("/run/iterion/net/ask-user.sock".to_owned()))
        );
        assert_eq!(
            reach_of(None, s("10.0.0.7:40111")),
            Ok(Reach::Tcp("10.0.0.7:40111".to_owned()))
        );
        assert_eq!(
            reach_of(s(""), s("[fd00::7]:40111")),
            Ok(Reach::Tcp("[fd00::7]:40111".to_owned()))
        );
        assert_eq!(
            reach_of(None, s("runner.svc:40111")),
            Err("ITERION_ASK_USER_ADDR=\"runner.svc:40111\" is not an IP:PORT address".to_owned())
        );
        assert_eq!(
            reach_of(None, None),
            Err("neither ITERION_ASK_USER_SOCKET nor ITERION_ASK_USER_ADDR is set".to_owned())
        );
        assert!(reach_of(s("/x"), s("127.0.0.1:1")).is_err());
    }

    fn lines(out: &[u8]) -> Vec<Value> {
        String::from_utf8_lossy(out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn the_server_lists_one_tool_and_relays_answers_and_refusals() {
        let input = [
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask_user","arguments":{"question":"Which env?"}}}),
            json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask_user","arguments":{"question":"bad"}}}),
        ]
        .iter()
        .map(|v| format!("{v}\n"))
        .collect::<String>();
        let mut out = Vec::new();
        let ask = |q: &str| match q {
            "Which env?" => AskReply::Answer {
                text: "staging".to_owned(),
            },
            _ => AskReply::Refused {
                reason: "the token is not this run's".to_owned(),
            },
        };
        serve(&mut input.as_bytes(), &mut out, &ask, &|| {
            panic!("no pause")
        });
        let got = lines(&out);
        assert_eq!(got.len(), 4, "{got:#?}");
        assert_eq!(got[0]["result"]["protocolVersion"], json!("2025-06-18"));
        assert_eq!(got[1]["result"]["tools"][0]["name"], json!("ask_user"));
        assert_eq!(
            got[2]["result"],
            json!({"content": [{"type": "text", "text": "staging"}], "isError": false})
        );
        assert_eq!(
            got[3]["result"],
            json!({"content": [{"type": "text", "text": "ask_user refused: the token is not this run's"}], "isError": true})
        );
    }

    #[test]
    fn a_pause_ends_the_cli_and_answers_nothing_more() {
        let input = [
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_user","arguments":{"question":"Which env?"}}}),
            json!({"jsonrpc":"2.0","id":8,"method":"tools/list"}),
        ]
        .iter()
        .map(|v| format!("{v}\n"))
        .collect::<String>();
        let mut out = Vec::new();
        let ended = std::cell::Cell::new(0);
        serve(
            &mut input.as_bytes(),
            &mut out,
            &|_| AskReply::Paused,
            &|| ended.set(ended.get() + 1),
        );
        assert_eq!(ended.get(), 1);
        assert_eq!(lines(&out), Vec::<Value>::new());
    }
}

//! A **fake** model server for tests: a real HTTP/1.1 server on a loopback port that speaks the
//! Anthropic Messages API (`POST /v1/messages`, as one JSON body or, when the request says
//! `"stream": true`, as the server-sent events the `claude` CLI reads), the Chat Completions API
//! (`POST /v1/chat/completions`) and the OpenAI Responses API (`POST /v1/responses`, server-sent
//! events, what the `codex` CLI reads), answers each request with the next reply of a fixed
//! script, and records every request it got (path, headers, JSON body).
//!
//! It runs on its own thread (blocking std I/O), so synchronous `assert_cmd` tests and async
//! tests use it alike. Past the end of the script it answers `400 script exhausted`, so a loop
//! that asks more than the test expected fails instead of hanging. Dropping it stops it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// Which API the replies are rendered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages.
    Anthropic,
    /// Chat Completions (openai, openai_compatible).
    OpenAi,
    /// OpenAI Responses, streamed (the `codex` CLI).
    Responses,
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A final text answer.
    Text(String),
    /// An answer calling these tools, in order: `(name, input)`.
    Tools(Vec<(String, Value)>),
    /// Some text, then these tool calls, in one answer.
    TextAndTools(String, Vec<(String, Value)>),
    /// An error status with an optional `retry-after` in seconds.
    Status(u16, Option<u32>),
}

impl Reply {
    /// A final text answer.
    pub fn text(t: impl Into<String>) -> Reply {
        Reply::Text(t.into())
    }

    /// An answer calling one tool.
    pub fn tool(name: &str, input: Value) -> Reply {
        Reply::Tools(vec![(name.to_owned(), input)])
    }
}

/// A request the fake got.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The request path.
    pub path: String,
    /// Headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body, parsed (`Null` when it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The running fake.
pub struct FakeModel {
    addr: SocketAddr,
    api: Api,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeModel {
    /// Starts a fake on `127.0.0.1:0` answering with `script`.
    pub fn start(api: Api, script: Vec<Reply>) -> FakeModel {
        FakeModel::start_on("127.0.0.1:0", api, script)
    }

    /// Starts a fake on `bind` (e.g. `0.0.0.0:0` to be reached from a container's gateway).
    pub fn start_on(bind: &str, api: Api, script: Vec<Reply>) -> FakeModel {
        let listener = TcpListener::bind(bind).expect("bind the fake model server");
        let addr = listener.local_addr().expect("fake model address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let thread = {
            let (requests, stop) = (Arc::clone(&requests), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut counter = 0usize;
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    counter += 1;
                    serve(stream, api, &script, &requests, counter);
                }
            })
        };
        FakeModel {
            addr,
            api,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The base URL for `ITERION_*_BASE_URL`: `http://127.0.0.1:<port>` for Anthropic,
    /// `…/v1` for Chat Completions.
    pub fn base_url(&self) -> String {
        self.base_url_at("127.0.0.1")
    }

    /// The base URL with another host name (a container reaching the host).
    pub fn base_url_at(&self, host: &str) -> String {
        match self.api {
            Api::Anthropic => format!("http://{host}:{}", self.addr.port()),
            Api::OpenAi | Api::Responses => format!("http://{host}:{}/v1", self.addr.port()),
        }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("fake model requests").clone()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    stream: TcpStream,
    api: Api,
    script: &Mutex<VecDeque<Reply>>,
    requests: &Mutex<Vec<Recorded>>,
    counter: usize,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    // An absolute-form target (a proxy forwarding plain HTTP) keeps only its path.
    let path = match path.strip_prefix("http://") {
        Some(rest) => rest
            .find('/')
            .map_or("/".to_owned(), |i| rest[i..].to_owned()),
        None => path,
    };
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            let (n, v) = (n.trim().to_ascii_lowercase(), v.trim().to_owned());
            if n == "content-length" {
                length = v.parse().unwrap_or(0);
            }
            headers.push((n, v));
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut out = stream;
    // codex on a ChatGPT login lists the models first (`GET …/models`): an empty list, outside
    // the script and the record.
    if matches!(api, Api::Responses) && line.starts_with("GET ") && path.contains("/models") {
        let text = "{\"models\":[]}";
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        );
        return;
    }
    let streamed = body.get("stream").and_then(Value::as_bool) == Some(true);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake")
        .to_owned();
    requests
        .lock()
        .expect("fake model requests")
        .push(Recorded {
            path,
            headers,
            body,
        });
    let reply = script.lock().expect("fake model script").pop_front();
    if streamed && let Some(reply) = reply.as_ref().filter(|r| !matches!(r, Reply::Status(..))) {
        let events = match api {
            Api::Responses => sse_responses(reply, counter),
            _ => sse_messages(reply, counter, &model),
        };
        let mut text = String::new();
        for (name, data) in events {
            text.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        }
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        );
        let _ = out.flush();
        return;
    }
    let (status, extra, text) = match reply {
        None => (
            400,
            String::new(),
            r#"{"error":"fake model: script exhausted"}"#.to_owned(),
        ),
        Some(Reply::Status(code, retry)) => (
            code,
            retry.map_or_else(String::new, |s| format!("retry-after: {s}\r\n")),
            format!(r#"{{"error":"fake model: scripted status {code}"}}"#),
        ),
        Some(reply) => (200, String::new(), render(api, &reply, counter).to_string()),
    };
    let _ = write!(
        out,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = out.flush();
}

/// A reply's text and tool calls.
fn parts(reply: &Reply) -> (String, Vec<(String, Value)>) {
    match reply {
        Reply::Text(t) => (t.clone(), Vec::new()),
        Reply::Tools(calls) => (String::new(), calls.clone()),
        Reply::TextAndTools(t, calls) => (t.clone(), calls.clone()),
        Reply::Status(..) => (String::new(), Vec::new()),
    }
}

/// A reply as the Messages API's stream: `message_start`, one `content_block_*` run per text
/// or tool call, `message_delta` with the stop reason, `message_stop`.
fn sse_messages(reply: &Reply, n: usize, model: &str) -> Vec<(&'static str, Value)> {
    let (text, calls) = parts(reply);
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if !text.is_empty() {
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
        ));
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for (i, (name, input)) in calls.iter().enumerate() {
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": name, "input": {}}}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {
                "type": "input_json_delta", "partial_json": input.to_string()}}),
        ));
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {
            "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" }, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
}

/// A reply as the Responses API's stream: `response.created`, each output item added and done
/// (a message with its text delta, or a `function_call`), `response.completed` with usage.
fn sse_responses(reply: &Reply, n: usize) -> Vec<(&'static str, Value)> {
    let (text, calls) = parts(reply);
    let id = format!("resp_{n}");
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress", "output": []}}),
    )];
    let mut items = Vec::new();
    if !text.is_empty() {
        let item_id = format!("msg_{n}");
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": items.len(), "item": {
                "type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}}),
        ));
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": items.len(),
                   "content_index": 0, "delta": text}),
        ));
        let item = json!({"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": text, "annotations": []}]});
        events.push((
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": items.len(), "item": item}),
        ));
        items.push(item);
    }
    for (i, (name, input)) in calls.iter().enumerate() {
        let mut item = json!({"type": "function_call", "id": format!("fc_{n}_{i}"), "call_id": format!("call_{n}_{i}"),
                          "name": name, "arguments": input.to_string(), "status": "completed"});
        // `NAMESPACE/tool`: a tool of a `namespace` tool (codex offers MCP tools that way).
        if let Some((namespace, tool)) = name.split_once('/') {
            item["namespace"] = json!(namespace);
            item["name"] = json!(tool);
        }
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": items.len(), "item": item}),
        ));
        events.push((
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": items.len(), "item": item}),
        ));
        items.push(item);
    }
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": {
            "id": id, "object": "response", "status": "completed", "output": items,
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 15}}}),
    ));
    events
}

fn render(api: Api, reply: &Reply, n: usize) -> Value {
    let (text, calls) = parts(reply);
    match api {
        Api::Anthropic => {
            let mut content = Vec::new();
            if !text.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            for (i, (name, input)) in calls.iter().enumerate() {
                content.push(
                    json!({"type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": name, "input": input}),
                );
            }
            json!({
                "id": format!("msg_{n}"), "type": "message", "role": "assistant",
                "content": content,
                "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
                "usage": {"input_tokens": 10, "output_tokens": 5},
            })
        }
        Api::Responses => {
            json!({"id": format!("resp_{n}"), "object": "response", "status": "completed",
                                 "output": sse_responses(reply, n).last().map(|e| e.1["response"]["output"].clone())})
        }
        Api::OpenAi => {
            let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(
                    calls
                        .iter()
                        .enumerate()
                        .map(|(i, (name, input))| {
                            json!({"id": format!("call_{n}_{i}"), "type": "function",
                                   "function": {"name": name, "arguments": input.to_string()}})
                        })
                        .collect(),
                );
            }
            json!({
                "id": format!("chatcmpl-{n}"), "object": "chat.completion",
                "choices": [{"index": 0, "message": message,
                             "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            })
        }
    }
}

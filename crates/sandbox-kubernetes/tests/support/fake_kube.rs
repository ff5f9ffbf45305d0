//! A FAKE Kubernetes API server for tests: a real HTTP/1.1 server on loopback that answers the
//! endpoints the kubernetes driver and the cloud reaper use, records every request, and serves the
//! pod exec subresource over websocket (`v5.channel.k8s.io`, or `v4.channel.k8s.io`, with the
//! stdin/stdout/stderr channels and the status JSON carrying the exit code).
//!
//! It is not a cluster: there is no scheduler, kubelet or admission. A pod's status is set when it
//! is applied, from the [`PodBehaviour`] the test chose; an exec runs its argv **on the host**
//! (so a test points the workspace folder at a temp dir), except for commands scripted with
//! [`FakeKube::script_exec`]. Failures are scripted with [`FakeKube::fail`].
//!
//! Shared by the sandbox integration tests and the engine's reaper benchmark (`#[path]`-included).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

/// What a pod does once applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodBehaviour {
    /// `Running`, `Ready=True` at once.
    Ready,
    /// `Pending`, `PodScheduled=False` / `Unschedulable` forever.
    Unschedulable,
    /// `Running` but never `Ready` (a stalled phase).
    Stalled,
    /// `Pending`, scheduled, the container waiting in `ImagePullBackOff`.
    ImagePullBackOff,
    /// `Failed` at once.
    Failed,
}

/// An object kind the fake serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `pods`.
    Pod,
    /// `secrets`.
    Secret,
    /// `networkpolicies`.
    NetworkPolicy,
}

impl Kind {
    fn parse(plural: &str) -> Option<Kind> {
        match plural {
            "pods" => Some(Kind::Pod),
            "secrets" => Some(Kind::Secret),
            "networkpolicies" => Some(Kind::NetworkPolicy),
            _ => None,
        }
    }

    /// The singular, as recorded (`pod`, `secret`, `networkpolicy`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "pod",
            Kind::Secret => "secret",
            Kind::NetworkPolicy => "networkpolicy",
        }
    }

    fn list_kind(self) -> &'static str {
        match self {
            Kind::Pod => "PodList",
            Kind::Secret => "SecretList",
            Kind::NetworkPolicy => "NetworkPolicyList",
        }
    }

    fn api_version(self) -> &'static str {
        match self {
            Kind::NetworkPolicy => "networking.k8s.io/v1",
            _ => "v1",
        }
    }
}

/// A scripted exec answer.
#[derive(Clone, Debug)]
pub struct ScriptedExec {
    /// The exit code.
    pub exit_code: i32,
    /// What it prints on stdout.
    pub stdout: Vec<u8>,
}

/// What an exec received on stdin (channel 0), frame by frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StdinStats {
    /// Stdin frames received.
    pub frames: usize,
    /// Their payload bytes in total.
    pub bytes: u64,
    /// The largest frame's payload: how much the client ever sent at once.
    pub largest_frame: usize,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<(Kind, String), Value>,
    requests: Vec<String>,
    pod_behaviour: Option<PodBehaviour>,
    /// `(verb, kind, name)` → HTTP status to answer, once each.
    failures: Vec<(String, Kind, String, u16)>,
    /// argv[0] → answer.
    scripted: BTreeMap<String, ScriptedExec>,
    exec_argv: Vec<Vec<String>>,
    /// Per exec, in the order of `exec_argv`.
    exec_stdin: Vec<StdinStats>,
    force_v4: bool,
}

/// The fake server. Dropping it stops accepting connections.
#[derive(Clone)]
pub struct FakeKube {
    addr: SocketAddr,
    namespace: String,
    state: Arc<Mutex<State>>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl FakeKube {
    /// Starts a fake API server for namespace `namespace` on `127.0.0.1:0`.
    pub async fn start(namespace: &str) -> FakeKube {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State {
            pod_behaviour: Some(PodBehaviour::Ready),
            ..State::default()
        }));
        let serve_state = Arc::clone(&state);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = Arc::clone(&serve_state);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(handle(state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        FakeKube {
            addr,
            namespace: namespace.to_owned(),
            state,
            task: Arc::new(task),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client for this server, scoped to its namespace.
    pub fn client(&self) -> kube::Client {
        let mut config = kube::Config::new(self.url().parse().unwrap());
        config.default_namespace = self.namespace.clone();
        kube::Client::try_from(config).unwrap()
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// How pods applied from now on behave.
    pub fn set_pod_behaviour(&self, behaviour: PodBehaviour) {
        self.state.lock().unwrap().pod_behaviour = Some(behaviour);
    }

    /// Offer only `v4.channel.k8s.io` for exec (no stdin close).
    pub fn force_v4(&self) {
        self.state.lock().unwrap().force_v4 = true;
    }

    /// Answer the next `verb` (`apply`, `delete`, `get`, `list`) on `kind`/`name` with `status`.
    pub fn fail(&self, verb: &str, kind: Kind, name: &str, status: u16) {
        self.state
            .lock()
            .unwrap()
            .failures
            .push((verb.to_owned(), kind, name.to_owned(), status));
    }

    /// Answer execs whose argv[0] is `program` with `answer` instead of running them.
    pub fn script_exec(&self, program: &str, answer: ScriptedExec) {
        self.state
            .lock()
            .unwrap()
            .scripted
            .insert(program.to_owned(), answer);
    }

    /// Every request so far, as `VERB kind/name` (`APPLY secret/x`, `DELETE pod/y`, `GET pod/y`,
    /// `LIST pod`, `EXEC pod/y`).
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The argv of every exec, in order.
    pub fn exec_argvs(&self) -> Vec<Vec<String>> {
        self.state.lock().unwrap().exec_argv.clone()
    }

    /// What every exec received on stdin, in the order of [`FakeKube::exec_argvs`].
    pub fn exec_stdin(&self) -> Vec<StdinStats> {
        self.state.lock().unwrap().exec_stdin.clone()
    }

    /// The stored object, as JSON.
    pub fn object(&self, kind: Kind, name: &str) -> Option<Value> {
        self.state
            .lock()
            .unwrap()
            .objects
            .get(&(kind, name.to_owned()))
            .cloned()
    }

    /// The names of the stored objects of `kind`.
    pub fn names(&self, kind: Kind) -> Vec<String> {
        self.state
            .lock()
            .unwrap()
            .objects
            .keys()
            .filter(|(k, _)| *k == kind)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// Stores an object directly (seeding, benchmarks).
    pub fn insert(&self, kind: Kind, name: &str, labels: BTreeMap<String, String>) {
        let object = json!({
            "apiVersion": kind.api_version(),
            "kind": match kind { Kind::Pod => "Pod", Kind::Secret => "Secret", Kind::NetworkPolicy => "NetworkPolicy" },
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
        });
        self.state
            .lock()
            .unwrap()
            .objects
            .insert((kind, name.to_owned()), object);
    }
}

fn respond(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn status(code: u16, reason: &str, message: &str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn matches_selector(object: &Value, selector: &str) -> bool {
    let labels = &object["metadata"]["labels"];
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => labels[k.trim()].as_str() == Some(v.trim()),
            None => labels.get(term.trim()).is_some(),
        })
}

fn pod_status(behaviour: &PodBehaviour) -> Value {
    match behaviour {
        PodBehaviour::Ready => json!({"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}),
        PodBehaviour::Unschedulable => json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available: 3 Insufficient cpu."}]}),
        PodBehaviour::Stalled => json!({"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}),
        PodBehaviour::ImagePullBackOff => json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "workload", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff",
                "message": "Back-off pulling image"}}}]}),
        PodBehaviour::Failed => {
            json!({"phase": "Failed", "reason": "Evicted", "message": "node pressure"})
        }
    }
}

/// Splits `/api/v1/namespaces/<ns>/<plural>[/<name>[/<sub>]]` (or the networking group's path).
fn route(path: &str) -> Option<(Kind, Option<String>, Option<String>)> {
    let rest = path
        .strip_prefix("/api/v1/namespaces/")
        .or_else(|| path.strip_prefix("/apis/networking.k8s.io/v1/namespaces/"))?;
    let mut parts = rest.split('/');
    let _namespace = parts.next()?;
    let kind = Kind::parse(parts.next()?)?;
    let name = parts.next().map(str::to_owned);
    let sub = parts.next().map(str::to_owned);
    Some((kind, name, sub))
}

fn take_failure(state: &mut State, verb: &str, kind: Kind, name: &str) -> Option<u16> {
    let index = state
        .failures
        .iter()
        .position(|(v, k, n, _)| v == verb && *k == kind && n == name)?;
    Some(state.failures.remove(index).3)
}

async fn handle(state: Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let query = query_pairs(req.uri().query().unwrap_or(""));
    let Some((kind, name, sub)) = route(&path) else {
        return status(404, "NotFound", &format!("no route {path}"));
    };
    let method = req.method().clone();
    if sub.as_deref() == Some("exec") && method == Method::GET {
        let name = name.unwrap_or_default();
        return exec(state, req, &name, &query);
    }
    let verb = match (&method, &name) {
        (&Method::PATCH, Some(_)) => "apply",
        (&Method::DELETE, Some(_)) => "delete",
        (&Method::GET, Some(_)) => "get",
        (&Method::GET, None) => "list",
        _ => return status(405, "MethodNotAllowed", "not served by the fake"),
    };
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut state = state.lock().unwrap();
    let name = name.unwrap_or_default();
    state.requests.push(match verb {
        "list" => format!("LIST {}", kind.as_str()),
        v => format!("{} {}/{name}", v.to_uppercase(), kind.as_str()),
    });
    if let Some(code) = take_failure(&mut state, verb, kind, &name) {
        return status(code, "Scripted", &format!("scripted {verb} failure"));
    }
    match verb {
        "apply" => {
            let Ok(mut object) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "apply body is not JSON");
            };
            if query
                .iter()
                .all(|(k, v)| !(k == "fieldManager" && v == "iterion"))
            {
                return status(422, "Invalid", "fieldManager is required for apply");
            }
            if kind == Kind::Pod {
                let behaviour = state.pod_behaviour.clone().unwrap_or(PodBehaviour::Ready);
                object["status"] = pod_status(&behaviour);
            }
            state.objects.insert((kind, name), object.clone());
            respond(StatusCode::OK, object)
        }
        "get" => match state.objects.get(&(kind, name.clone())) {
            Some(object) => respond(StatusCode::OK, object.clone()),
            None => status(
                404,
                "NotFound",
                &format!("{} \"{name}\" not found", kind.as_str()),
            ),
        },
        "delete" => match state.objects.remove(&(kind, name.clone())) {
            Some(_) => respond(
                StatusCode::OK,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                       "details": {"name": name, "kind": kind.as_str()}}),
            ),
            None => status(
                404,
                "NotFound",
                &format!("{} \"{name}\" not found", kind.as_str()),
            ),
        },
        _ => {
            let selector = query
                .iter()
                .find(|(k, _)| k == "labelSelector")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let items: Vec<Value> = state
                .objects
                .iter()
                .filter(|((k, _), o)| *k == kind && matches_selector(o, &selector))
                .map(|(_, o)| json!({"metadata": o["metadata"].clone()}))
                .collect();
            respond(
                StatusCode::OK,
                json!({"apiVersion": kind.api_version(), "kind": kind.list_kind(),
                       "metadata": {}, "items": items}),
            )
        }
    }
}

fn exec(
    state: Arc<Mutex<State>>,
    mut req: Request<Incoming>,
    pod: &str,
    query: &[(String, String)],
) -> Response<Full<Bytes>> {
    let argv: Vec<String> = query
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let stdin = query.iter().any(|(k, v)| k == "stdin" && v == "true");
    let (offered, key) = {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        (
            header("sec-websocket-protocol"),
            header("sec-websocket-key"),
        )
    };
    let (scripted, force_v4, index) = {
        let mut guard = state.lock().unwrap();
        guard.requests.push(format!("EXEC pod/{pod}"));
        guard.exec_argv.push(argv.clone());
        guard.exec_stdin.push(StdinStats::default());
        let index = guard.exec_stdin.len() - 1;
        if !guard.objects.contains_key(&(Kind::Pod, pod.to_owned())) {
            return status(404, "NotFound", &format!("pod \"{pod}\" not found"));
        }
        (
            argv.first().and_then(|p| guard.scripted.get(p)).cloned(),
            guard.force_v4,
            index,
        )
    };
    let v5 = offered.contains("v5.channel.k8s.io") && !force_v4;
    let protocol = if v5 {
        "v5.channel.k8s.io"
    } else {
        "v4.channel.k8s.io"
    };
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        run_exec(ws, argv, stdin, scripted, state, index).await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .header("sec-websocket-accept", derive_accept_key(key.as_bytes()))
        .header("sec-websocket-protocol", protocol)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

fn channel(id: u8, data: &[u8]) -> Message {
    let mut frame = Vec::with_capacity(data.len() + 1);
    frame.push(id);
    frame.extend_from_slice(data);
    Message::Binary(Bytes::from(frame))
}

fn exit_status(code: i32) -> Vec<u8> {
    let status = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({"metadata": {}, "status": "Failure",
               "message": format!("command terminated with non-zero exit code: {code}"),
               "reason": "NonZeroExitCode",
               "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
    };
    status.to_string().into_bytes()
}

async fn run_exec<S>(
    ws: WebSocketStream<S>,
    argv: Vec<String>,
    stdin: bool,
    scripted: Option<ScriptedExec>,
    state: Arc<Mutex<State>>,
    index: usize,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = ws.split();
    if let Some(answer) = scripted {
        let _ = sink.send(channel(1, &answer.stdout)).await;
        let _ = sink.send(channel(3, &exit_status(answer.exit_code))).await;
        let _ = sink.close().await;
        return;
    }
    let Some((program, args)) = argv.split_first() else {
        let _ = sink.send(channel(3, &exit_status(127))).await;
        return;
    };
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(if stdin {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            let _ = sink
                .send(channel(2, format!("exec: {program}: {error}\n").as_bytes()))
                .await;
            let _ = sink.send(channel(3, &exit_status(127))).await;
            let _ = sink.close().await;
            return;
        }
    };
    let mut child_stdin = child.stdin.take();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(64);
    let out_tx = tx.clone();
    let out = tokio::spawn(async move {
        let mut buffer = vec![0u8; 32 * 1024];
        while let Ok(n) = stdout.read(&mut buffer).await {
            if n == 0 || out_tx.send(channel(1, &buffer[..n])).await.is_err() {
                break;
            }
        }
    });
    let err_tx = tx.clone();
    let err = tokio::spawn(async move {
        let mut buffer = vec![0u8; 32 * 1024];
        while let Ok(n) = stderr.read(&mut buffer).await {
            if n == 0 || err_tx.send(channel(2, &buffer[..n])).await.is_err() {
                break;
            }
        }
    });
    drop(tx);
    let feed = tokio::spawn(async move {
        while let Some(Ok(message)) = source.next().await {
            let Message::Binary(data) = message else {
                continue;
            };
            match data.first() {
                Some(0) => {
                    if let Some(stats) = state.lock().unwrap().exec_stdin.get_mut(index) {
                        stats.frames += 1;
                        stats.bytes += (data.len() - 1) as u64;
                        stats.largest_frame = stats.largest_frame.max(data.len() - 1);
                    }
                    if let Some(stdin) = child_stdin.as_mut()
                        && stdin.write_all(&data[1..]).await.is_err()
                    {
                        child_stdin = None;
                    }
                }
                // v5: close of channel 0 (stdin).
                Some(255) if data.get(1) == Some(&0) => child_stdin = None,
                _ => {}
            }
        }
    });
    while let Some(message) = rx.recv().await {
        if sink.send(message).await.is_err() {
            break;
        }
    }
    let _ = out.await;
    let _ = err.await;
    let code = child
        .wait()
        .await
        .map(|s| s.code().unwrap_or(137))
        .unwrap_or(137);
    // The status goes out while stdin is still being read and dropped: a client still writing
    // (a process that exited without reading all its input) must not be blocked on a full
    // socket while the status waits behind it. Then the feed gets a moment to see the close.
    let _ = sink.send(channel(3, &exit_status(code))).await;
    let _ = sink.close().await;
    let stop_feed = feed.abort_handle();
    if tokio::time::timeout(std::time::Duration::from_secs(5), feed)
        .await
        .is_err()
    {
        stop_feed.abort();
    }
}

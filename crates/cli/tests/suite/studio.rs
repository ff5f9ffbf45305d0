//! `iterion studio` against a store of real runs: the JSON API's shapes, the follow stream, the
//! access rules (a loopback Host, the token off loopback, token and same origin for a write),
//! escaping of hostile run data, and — under a real browser (Playwright driving Debian's
//! chromium, `tests/studio/studio.mjs`) — the pages: the runs list with a subbot child nested,
//! the failed node marked on the graph, the sandbox panel's blocked host, answering a paused run
//! until it finishes, and a run started meanwhile appearing without a reload.
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use iterion_store::{NewEvent, NewRun, SqliteOptions, SqliteStore, Store};
use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::egress::runtime_dir;
use crate::suite::support::{Env, IMAGE, docker_or_skip, stderr_of};

const KEY: &str = "sk-test-0123456789abcdef";

/// A workflow whose first node prints HTML and whose second fails with exit 3.
const FAILING: &str = "tool hello:\n  command: \"echo '<script>window.__xss=1</script><img src=x onerror=window.__xss=2>'\"\n\ntool boom:\n  command: \"exit 3\"\n\nworkflow failing:\n  entry: hello\n  hello -> boom\n  boom -> done\n";

const HOSTILE_NAME: &str = "<img src=x onerror=window.__xss=3>";
const HOSTILE_HOST: &str = "<svg onload=window.__xss=4>.invalid";

/// A running `iterion studio`, killed on drop.
struct Studio {
    child: Child,
    addr: SocketAddr,
    start: Value,
}

impl Drop for Studio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn studio(env: &Env, listen: &str, extra: &[(&str, &str)]) -> Studio {
    let mut cmd = env.std_cmd();
    cmd.args(["studio", "--listen", listen, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let start: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let listen: SocketAddr = start["listen"].as_str().unwrap().parse().unwrap();
    // An unspecified listen address is reached on loopback.
    let addr = SocketAddr::new("127.0.0.1".parse().unwrap(), listen.port());
    Studio { child, addr, start }
}

/// One HTTP/1.1 exchange: `(status, head, body)`. The body is read to the end (the server
/// closes: `Connection: close`), so a follow stream is read until it ends.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
) -> (u16, String, String) {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some((ctype, b)) = body {
        req.push_str(&format!(
            "Content-Type: {ctype}\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some((_, b)) = body {
        req.push_str(b);
    }
    conn.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

fn get_json(addr: SocketAddr, path: &str) -> Value {
    let (status, _, body) = http(addr, "GET", path, &[], None);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A run written straight into the store, as a hostile writer could shape its record: a workflow
/// name and a blocked host made of HTML.
fn hostile_run(env: &Env) -> String {
    runtime().block_on(async {
        let store = SqliteStore::open(env.db(), SqliteOptions::default())
            .await
            .unwrap();
        let run = store
            .create_run(NewRun::new(
                HOSTILE_NAME,
                "sha256:00",
                "/nonexistent/x.iter",
            ))
            .await
            .unwrap();
        for (kind, data) in [
            (
                "node_started",
                json!({"node": "<b>n</b>", "kind": "tool", "attempt": 1}),
            ),
            (
                "network_blocked",
                json!({"host": HOSTILE_HOST, "reason": "not allowed", "run_id": run.id}),
            ),
            ("edge_selected", json!({"from": "<b>n</b>", "to": "done"})),
        ] {
            store
                .append_event(&run.id, NewEvent::new(kind, data))
                .await
                .unwrap();
        }
        run.id.to_string()
    })
}

fn run_failing(env: &Env) -> String {
    env.write("failing.iter", FAILING);
    let out = env
        .cmd()
        .args(["run", "failing.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["failure_code"], json!("EXECUTION_FAILED"));
    summary["run_id"].as_str().unwrap().to_owned()
}

#[test]
fn studio_api_shapes_follow_stream_and_escaping_over_real_runs() {
    let env = Env::new();
    let failed = run_failing(&env);
    let hostile = hostile_run(&env);
    let s = studio(&env, "127.0.0.1:0", &[]);
    assert_eq!(s.start["token_required"], json!(false));
    assert_eq!(
        s.start["token"],
        Value::Null,
        "no token printed on loopback"
    );

    // The list: newest first, every documented key.
    let list = get_json(s.addr, "/api/runs");
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["id"], json!(hostile));
    let row = &runs[1];
    let mut keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "children",
            "driver",
            "duration_ms",
            "failure_code",
            "finished",
            "id",
            "parent_run_id",
            "short_id",
            "started",
            "status",
            "trust",
            "workflow"
        ]
    );
    assert_eq!(row["status"], json!("failed_resumable"));
    assert_eq!(row["failure_code"], json!("EXECUTION_FAILED"));
    assert_eq!(row["driver"], json!("none"), "--sandbox none: unsandboxed");
    // Two runs made in the same second share their first 8 digits (UUIDv7 starts with the time):
    // the list's short ids are the shortest prefixes that tell its runs apart.
    let short = row["short_id"].as_str().unwrap();
    assert!(failed.starts_with(short) && short.len() >= 8, "{short}");
    assert_ne!(short, runs[0]["short_id"].as_str().unwrap());
    // Filters.
    let only = get_json(s.addr, "/api/runs?workflow=failing");
    assert_eq!(only["runs"].as_array().unwrap().len(), 1);
    let none = get_json(s.addr, "/api/runs?status=finished");
    assert_eq!(none["runs"], json!([]));
    let (status, _, body) = http(s.addr, "GET", "/api/runs?status=bogus", &[], None);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("BAD_STATUS"), "{body}");

    // One run, by a prefix of its id (an ambiguous one is refused): graph from the workflow
    // file, node states, failure.
    let (status, _, body) = http(
        s.addr,
        "GET",
        &format!("/api/runs/{}", &failed[..6]),
        &[],
        None,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("AMBIGUOUS_RUN_ID"), "{body}");
    let view = get_json(s.addr, &format!("/api/runs/{}", &failed[..24]));
    assert_eq!(view["run"]["id"], json!(failed));
    assert_eq!(view["graph"]["origin"], json!({"kind": "workflow"}));
    let nodes: Vec<(&str, &str)> = view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n["state"].as_str().unwrap()))
        .collect();
    assert_eq!(nodes, [("hello", "finished"), ("boom", "failed")]);
    assert_eq!(view["nodes"][1]["failure"]["exit_code"], json!(3));
    assert_eq!(view["failure"]["code"], json!("EXECUTION_FAILED"));
    assert_eq!(view["failure"]["phase"], json!("execution"));
    assert!(
        view["failure"]["remedy"]
            .as_str()
            .unwrap()
            .contains(&format!("iterion resume {failed}")),
        "{view:#}"
    );
    assert_eq!(view["taken"], json!([["hello", "boom"]]));
    // Each node's own output, from the node log.
    let hello_logs = view["nodes"][0]["logs"].as_array().unwrap();
    assert!(
        hello_logs.iter().any(|c| c["stream"] == json!("stdout")
            && c["text"]
                .as_str()
                .unwrap()
                .contains("<script>window.__xss=1</script>")),
        "{view:#}"
    );
    let chunks = get_json(s.addr, &format!("/api/runs/{failed}/logs?node=hello"));
    let chunks = chunks["node_logs"].as_array().unwrap();
    assert!(
        !chunks.is_empty() && chunks.iter().all(|c| c["node"] == json!("hello")),
        "{chunks:?}"
    );
    let all = get_json(s.addr, &format!("/api/runs/{failed}/logs?node=*"));
    assert!(all["node_logs"].as_array().unwrap().len() >= chunks.len());
    let run_log = get_json(s.addr, &format!("/api/runs/{failed}/logs"));
    assert!(run_log["logs"].is_array());
    // The hostile run's graph comes from its events, and says why.
    let hv = get_json(s.addr, &format!("/api/runs/{hostile}"));
    assert_eq!(hv["graph"]["origin"]["kind"], json!("events"));
    assert_eq!(
        hv["sandbox"]["blocked"],
        json!([{"host": HOSTILE_HOST, "reason": "not allowed"}])
    );
    let (status, _, _) = http(
        s.addr,
        "GET",
        "/api/runs/0190a000-0000-7000-8000-00000000dead",
        &[],
        None,
    );
    assert_eq!(status, 404);
    let (status, _, _) = http(s.addr, "GET", "/api/runs/zz", &[], None);
    assert_eq!(status, 400);

    // Events: the array, then the follow stream of a finished run ends with `end`.
    let events = get_json(s.addr, &format!("/api/runs/{failed}/events"));
    let count = events["events"].as_array().unwrap().len();
    assert!(count >= 6, "{events:#}");
    let after = get_json(s.addr, &format!("/api/runs/{failed}/events?after=2"));
    assert_eq!(after["events"][0]["seq"], json!(3));
    let (status, head, body) = http(
        s.addr,
        "GET",
        &format!("/api/runs/{failed}/events?follow=1&after=1"),
        &[],
        None,
    );
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    assert_eq!(body.matches("event: event").count(), count - 1, "{body}");
    assert!(body.contains("event: end"), "{body}");
    assert!(body.contains(r#"{"status":"failed_resumable"}"#), "{body}");

    // Pages: run data is text, never markup.
    let (_, head, page) = http(s.addr, "GET", &format!("/runs/{failed}"), &[], None);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{head}"
    );
    assert!(
        page.contains("&lt;script&gt;window.__xss=1&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script>window"), "{page}");
    assert!(!page.contains("<img src=x"), "{page}");
    assert!(
        page.contains(r#"data-node="boom" data-state="failed""#),
        "{page}"
    );
    for path in ["/".to_owned(), format!("/runs/{hostile}")] {
        let (status, _, page) = http(s.addr, "GET", &path, &[], None);
        assert_eq!(status, 200);
        assert!(
            page.contains("&lt;img src=x onerror=window.__xss=3&gt;"),
            "{path}: {page}"
        );
        assert!(!page.contains(HOSTILE_NAME), "{path}");
        assert!(!page.contains("<svg onload"), "{path}");
        assert!(!page.contains("<b>n</b>"), "{path}");
    }

    // A loopback studio answers only a loopback Host (DNS rebinding).
    let (status, _, _) = http(
        s.addr,
        "GET",
        "/api/runs",
        &[("Host", "attacker.example")],
        None,
    );
    assert_eq!(status, 421);
    // A write needs the token, and a form write the same origin.
    let (status, _, body) = http(
        s.addr,
        "POST",
        &format!("/runs/{failed}/answer"),
        &[],
        Some(("application/x-www-form-urlencoded", "answer=x")),
    );
    assert_eq!(status, 401, "{body}");
    assert!(
        !page.contains(r#"id="answer-form""#),
        "no answer form on a run that is not paused"
    );
    // A failed_resumable run is not over: it offers the cancel form (with the token).
    assert!(page.contains(r#"id="cancel-form""#), "{page}");
    let token = page
        .split(r#"name="token" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no token in the cancel form: {page}"))
        .to_owned();
    // A cancel from another site (the token leaked, but not the origin), or without the token,
    // is refused and the run left alone.
    let form = format!("token={token}");
    for (path, headers, body) in [
        (
            format!("/runs/{failed}/cancel"),
            vec![("Origin", "http://attacker.example")],
            Some(("application/x-www-form-urlencoded", form.as_str())),
        ),
        (
            format!("/runs/{failed}/cancel"),
            vec![("Sec-Fetch-Site", "cross-site")],
            Some(("application/x-www-form-urlencoded", form.as_str())),
        ),
        (
            format!("/runs/{failed}/cancel"),
            vec![],
            Some(("application/x-www-form-urlencoded", "")),
        ),
        (format!("/api/runs/{failed}/cancel"), vec![], None),
    ] {
        let (status, _, body) = http(s.addr, "POST", &path, &headers, body);
        assert!(
            status == 401 || status == 403,
            "{path} {headers:?}: {status} {body}"
        );
    }
    let still = get_json(s.addr, &format!("/api/runs/{failed}"));
    assert_eq!(still["run"]["status"], json!("failed_resumable"));
    assert_eq!(still["last_seq"], view["last_seq"], "nothing recorded");
    // With the token: cancelled at once (nobody executes it), then it is over.
    let bearer = format!("Bearer {token}");
    let (status, _, body) = http(
        s.addr,
        "POST",
        &format!("/api/runs/{failed}/cancel"),
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(status, 200, "{body}");
    let done: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        done,
        json!({"run_id": failed, "status": "cancelled", "failure_code": "CANCELLED"})
    );
    let (_, _, page) = http(s.addr, "GET", &format!("/runs/{failed}"), &[], None);
    assert!(!page.contains(r#"id="cancel-form""#), "{page}");
    let (status, _, body) = http(
        s.addr,
        "POST",
        &format!("/api/runs/{failed}/cancel"),
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("RUN_OVER"), "{body}");
}

#[test]
fn studio_off_loopback_needs_the_token_for_every_request() {
    let env = Env::new();
    let failed = run_failing(&env);
    let s = studio(&env, "0.0.0.0:0", &[]);
    assert_eq!(s.start["token_required"], json!(true));
    let token = s.start["token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 64);
    assert!(
        s.start["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("?token={token}"))
    );
    for path in [
        "/",
        "/api/runs",
        &format!("/api/runs/{failed}"),
        &format!("/api/runs/{failed}/events?follow=1"),
        "/static/studio.js",
    ] {
        let (status, _, body) = http(s.addr, "GET", path, &[], None);
        assert_eq!(status, 401, "{path}: {body}");
        assert!(body.contains("ITERION_STUDIO_TOKEN"), "{body}");
        let (status, _, _) = http(
            s.addr,
            "GET",
            path,
            &[("Authorization", "Bearer wrong")],
            None,
        );
        assert_eq!(status, 401, "{path}");
    }
    let bearer = format!("Bearer {token}");
    let (status, _, _) = http(
        s.addr,
        "GET",
        "/api/runs",
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(status, 200);
    // ?token= once sets an HttpOnly, SameSite=Strict cookie that then suffices.
    let (status, head, _) = http(s.addr, "GET", &format!("/?token={token}"), &[], None);
    assert_eq!(status, 200);
    let cookie_line = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("{head}"));
    assert!(
        cookie_line.contains("HttpOnly") && cookie_line.contains("SameSite=Strict"),
        "{cookie_line}"
    );
    let cookie = format!("iterion_studio_token={token}");
    let (status, _, _) = http(s.addr, "GET", "/api/runs", &[("Cookie", &cookie)], None);
    assert_eq!(status, 200);
    // A write with the cookie alone (what a cross-site form would carry) is refused.
    let (status, _, _) = http(
        s.addr,
        "POST",
        &format!("/runs/{failed}/answer"),
        &[("Cookie", &cookie)],
        Some(("application/x-www-form-urlencoded", "answer=x")),
    );
    assert_eq!(status, 401);
    // With the token from the environment: it works, and is not echoed.
    drop(s);
    let mine = "a-token-of-my-own-0123456789";
    let s = studio(&env, "0.0.0.0:0", &[("ITERION_STUDIO_TOKEN", mine)]);
    assert_eq!(s.start["token"], Value::Null);
    let (status, _, _) = http(
        s.addr,
        "GET",
        "/api/runs",
        &[("Authorization", &format!("Bearer {mine}"))],
        None,
    );
    assert_eq!(status, 200);
    drop(s);
    // A short token is refused with the knob's name.
    let out = env
        .cmd()
        .env("ITERION_STUDIO_TOKEN", "short")
        .args(["studio", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("ITERION_STUDIO_TOKEN"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn studio_answering_a_paused_run_through_the_api_resumes_it() {
    let env = Env::new();
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool(
                "ask_user",
                json!({"question": "Which greeting?", "options": ["hello", "hi"]}),
            ),
            Reply::text("used hi"),
        ],
    );
    let paused = run_paused(&env, &fake);
    let base_url = fake.base_url();
    let model_env = [
        ("ANTHROPIC_API_KEY", KEY),
        ("ITERION_ANTHROPIC_BASE_URL", base_url.as_str()),
    ];
    let s = studio(&env, "127.0.0.1:0", &model_env);
    let view = get_json(s.addr, &format!("/api/runs/{paused}"));
    assert_eq!(
        view["question"],
        json!({"node": "asker", "question": "Which greeting?", "options": ["hello", "hi"]})
    );
    // The page's form carries the token; a cross-origin post with it is still refused.
    let (_, _, page) = http(s.addr, "GET", &format!("/runs/{paused}"), &[], None);
    let token = page
        .split(r#"name="token" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no token in the form: {page}"))
        .to_owned();
    let form = format!("token={token}&answer=hi");
    let (status, _, _) = http(
        s.addr,
        "POST",
        &format!("/runs/{paused}/answer"),
        &[("Origin", "http://attacker.example")],
        Some(("application/x-www-form-urlencoded", &form)),
    );
    assert_eq!(status, 403);
    // Not one of the options: refused, the run still waits.
    let bearer = format!("Bearer {token}");
    let (status, _, body) = http(
        s.addr,
        "POST",
        &format!("/api/runs/{paused}/answer"),
        &[("Authorization", &bearer)],
        Some(("application/json", r#"{"answer":"bonjour"}"#)),
    );
    assert_eq!(status, 400, "{body}");
    // Follow the paused run from its last event: the stream stays open while it waits, then
    // carries what the answer sets off, and ends with the final status.
    let last = view["last_seq"].as_u64().unwrap();
    let addr = s.addr;
    let follow_path = format!("/api/runs/{paused}/events?follow=1&after={last}");
    let follower = std::thread::spawn(move || http(addr, "GET", &follow_path, &[], None));
    std::thread::sleep(Duration::from_millis(700));
    assert!(!follower.is_finished(), "a paused run's stream stays open");
    let (status, _, body) = http(
        s.addr,
        "POST",
        &format!("/api/runs/{paused}/answer"),
        &[("Authorization", &bearer)],
        Some(("application/json", r#"{"answer":"hi"}"#)),
    );
    assert_eq!(status, 202, "{body}");
    let (status, _, stream) = follower.join().unwrap();
    assert_eq!(status, 200);
    let started = stream
        .find(r#""type":"run_started""#)
        .unwrap_or_else(|| panic!("{stream}"));
    let finished = stream
        .find(r#""type":"run_finished""#)
        .unwrap_or_else(|| panic!("{stream}"));
    assert!(started < finished, "{stream}");
    assert!(stream.contains(r#"{"status":"finished"}"#), "{stream}");
    assert!(
        !stream.contains(&format!("id: {last}\n")),
        "only events after {last}: {stream}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = get_json(s.addr, &format!("/api/runs/{paused}"));
        if v["run"]["status"] == json!("finished") {
            assert_eq!(v["question"], Value::Null);
            assert_eq!(v["nodes"][0]["output"], json!({"text": "used hi"}));
            break;
        }
        assert!(Instant::now() < deadline, "not finished: {v:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Answering again: the run no longer waits.
    let (status, _, _) = http(
        s.addr,
        "POST",
        &format!("/api/runs/{paused}/answer"),
        &[("Authorization", &bearer)],
        Some(("application/json", r#"{"answer":"hi"}"#)),
    );
    assert_eq!(status, 409);
    // Cancelling it: over, refused with its code, left alone; a cancel needs the token, and a
    // form cancel the same origin, like an answer.
    let version = get_json(s.addr, &format!("/api/runs/{paused}"))["last_seq"].clone();
    let (status, _, body) = http(
        s.addr,
        "POST",
        &format!("/api/runs/{paused}/cancel"),
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("RUN_OVER") && body.contains("nothing to cancel"),
        "{body}"
    );
    let (status, _, _) = http(
        s.addr,
        "POST",
        &format!("/api/runs/{paused}/cancel"),
        &[],
        None,
    );
    assert_eq!(status, 401);
    let (status, _, _) = http(
        s.addr,
        "POST",
        &format!("/runs/{paused}/cancel"),
        &[("Origin", "http://attacker.example")],
        Some((
            "application/x-www-form-urlencoded",
            &format!("token={token}"),
        )),
    );
    assert_eq!(status, 403);
    let after = get_json(s.addr, &format!("/api/runs/{paused}"));
    assert_eq!(after["last_seq"], version, "nothing recorded");
    assert_eq!(after["run"]["status"], json!("finished"));
}

const ASKER: &str = "prompt task:\n  Ask.\n\nagent asker:\n  model: \"anthropic/claude-test\"\n  user: task\n  interaction: ask\n\nworkflow asking:\n  entry: asker\n  asker -> done\n";

fn run_paused(env: &Env, fake: &FakeModel) -> String {
    env.write("asking.iter", ASKER);
    let out = env
        .cmd()
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .args(["run", "asking.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    summary["run_id"].as_str().unwrap().to_owned()
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Node, chromium and playwright-core (scripts/test.sh installs them), or a skip — a failure
/// under ITERION_IT_DOCKER=1.
#[allow(clippy::print_stderr)] // the skip says why, as docker_or_skip does
fn browser_or_skip(test: &str) -> Option<PathBuf> {
    let modules = target_dir().join("node/node_modules");
    let missing: Vec<String> = [
        (
            Path::new("/usr/bin/chromium").is_file(),
            "/usr/bin/chromium (apt-get install chromium)".to_owned(),
        ),
        (
            std::process::Command::new("node")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success()),
            "node".to_owned(),
        ),
        (
            modules.join("playwright-core/package.json").is_file(),
            format!(
                "{} (npm install playwright-core)",
                modules.join("playwright-core").display()
            ),
        ),
    ]
    .into_iter()
    .filter(|(ok, _)| !ok)
    .map(|(_, what)| what)
    .collect();
    if missing.is_empty() {
        return Some(modules);
    }
    assert!(
        std::env::var_os("ITERION_IT_DOCKER").is_none(),
        "{test}: the browser test needs {} (scripts/test.sh installs them)",
        missing.join(", ")
    );
    eprintln!("{test}: skipped, missing {}", missing.join(", "));
    None
}

/// A file secret's value the tool prints: the store holds it redacted, so no page shows it.
const SECRET_VALUE: &str = "studio-s3cret-8f2c41d9e7";

const BLOCKING: &str = "secrets:\n  deploy_key:\n    value: \"${ITERION_TEST_KEY}\"\n    as: file\n    env: \"KEY_FILE\"\n\ntool fetch:\n  command: `cat \"$KEY_FILE\"; echo; curl -s -o /dev/null --max-time 10 http://blocked.invalid/ ; echo fetched`\n\nworkflow blocking:\n  entry: fetch\n  sandbox:\n    image: \"IMAGE\"\n    network:\n      mode: allowlist\n      rules: [\"allowed.invalid\"]\n  fetch -> done\n";

const PARENT: &str = "tool start:\n  command: `echo parent`\n\nsubbot sub:\n  source: \"child.iter\"\n\nworkflow parent:\n  entry: start\n  start -> sub\n  sub -> done\n";
const CHILD: &str =
    "tool step:\n  command: `echo child`\n\nworkflow child:\n  entry: step\n  step -> done\n";
const NAPPING: &str = "tool nap:\n  command: `sleep 120`\n\nworkflow napping:\n  entry: nap\n  sandbox:\n    image: \"IMAGE\"\n  nap -> done\n";
const SLOW: &str = "tool wait:\n  command: \"sleep 5; echo slept\"\n\nworkflow slow:\n  entry: wait\n  wait -> done\n";

#[test]
fn docker_studio_in_a_real_browser() {
    const TEST: &str = "cli::studio::docker_studio_in_a_real_browser";
    if !docker_or_skip(TEST) {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip(TEST) else {
        return;
    };
    let Some(modules) = browser_or_skip(TEST) else {
        return;
    };
    let env = Env::new();
    let xdg = runtime_dir(&env);
    let static_bin = static_bin.display().to_string();
    let xdg = xdg.display().to_string();
    let sandbox_env = [
        ("ITERION_BIN", static_bin.as_str()),
        ("XDG_RUNTIME_DIR", xdg.as_str()),
    ];

    // A finished sandboxed run whose tool was refused a host by the proxy.
    env.write("blocking.iter", &BLOCKING.replace("IMAGE", IMAGE));
    let mut cmd = env.cmd();
    cmd.args(["run", "blocking.iter", "--json"])
        .envs(sandbox_env)
        .env("ITERION_TEST_KEY", SECRET_VALUE);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let finished = serde_json::from_slice::<Value>(&out.stdout).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A failed one with a typed code, a paused one, a parent with an adopting subbot child.
    let failed = run_failing(&env);
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool(
                "ask_user",
                json!({"question": "Which greeting?", "options": ["hello", "hi"]}),
            ),
            Reply::text("used hi"),
        ],
    );
    let paused = run_paused(&env, &fake);
    env.write("parent.iter", PARENT);
    env.write("child.iter", CHILD);
    let mut cmd = env.cmd();
    cmd.args([
        "run",
        "parent.iter",
        "--sandbox-default-image",
        IMAGE,
        "--json",
    ])
    .envs(sandbox_env);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let parent = serde_json::from_slice::<Value>(&out.stdout).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hostile = hostile_run(&env);
    env.write("slow.iter", SLOW);

    let base_url = fake.base_url();
    let model_env = [
        ("ANTHROPIC_API_KEY", KEY),
        ("ITERION_ANTHROPIC_BASE_URL", base_url.as_str()),
    ];
    let s = studio(&env, "127.0.0.1:0", &model_env);
    // The secret is named in the sandbox panel and its value is nowhere: not in the page, not in
    // the API.
    let (_, _, page) = http(s.addr, "GET", &format!("/runs/{finished}"), &[], None);
    assert!(
        page.contains(r#"<code class="secret">deploy_key</code>"#),
        "{page}"
    );
    let (_, _, api) = http(s.addr, "GET", &format!("/api/runs/{finished}"), &[], None);
    let (_, _, logs) = http(
        s.addr,
        "GET",
        &format!("/api/runs/{finished}/logs"),
        &[],
        None,
    );
    assert!(logs.contains("fetched"), "{logs}");
    for (what, text) in [("page", &page), ("api", &api), ("logs", &logs)] {
        assert!(
            !text.contains(SECRET_VALUE),
            "the secret's value in the {what}: {text}"
        );
    }
    let runs = get_json(s.addr, "/api/runs");
    let parent_row = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == json!(parent))
        .unwrap()
        .clone();
    let child = parent_row["children"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{runs:#}"))
        .to_owned();

    let shots = target_dir().join("test-artefacts/studio");
    std::fs::create_dir_all(&shots).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/studio/studio.mjs");
    let iterion = assert_cmd::cargo::cargo_bin("iterion");
    let spawn = json!({
        "argv": [iterion, "run", "slow.iter", "--sandbox", "none"],
        "cwd": env.ws.path(),
        "home": env.home.path(),
    });
    env.write("napping.iter", &NAPPING.replace("IMAGE", IMAGE));
    let to_cancel = json!({
        "argv": [iterion, "run", "napping.iter"],
        "cwd": env.ws.path(),
        "home": env.home.path(),
        "env": {"ITERION_BIN": static_bin, "XDG_RUNTIME_DIR": xdg},
        "workflow": "napping",
    });
    let out = std::process::Command::new("node")
        .arg(&script)
        .env("STUDIO_URL", format!("http://{}/", s.addr))
        .env("STUDIO_NODE_MODULES", &modules)
        .env("STUDIO_SHOTS", &shots)
        .env("STUDIO_PROFILE", profile.path())
        .env("STUDIO_SPAWN", spawn.to_string())
        .env("STUDIO_CANCEL", to_cancel.to_string())
        .env(
            "STUDIO_RUNS",
            json!({"finished": finished, "failed": failed, "paused": paused, "parent": parent, "child": child, "hostile": hostile, "hostile_name": HOSTILE_NAME, "hostile_host": HOSTILE_HOST}).to_string(),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("STUDIO_OK"),
        "the browser script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for shot in [
        "runs.png",
        "failed.png",
        "sandbox.png",
        "answered.png",
        "live.png",
        "live-run.png",
        "cancel-before.png",
        "cancelled.png",
        "hostile.png",
    ] {
        let len = std::fs::metadata(shots.join(shot))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 1000, "screenshot {shot}: {len} bytes");
    }
    // The answer given in the browser finished the run.
    let v = get_json(s.addr, &format!("/api/runs/{paused}"));
    assert_eq!(v["run"]["status"], json!("finished"));
    // The run cancelled in the browser: cancelled by its own process, its container gone.
    let napping = get_json(s.addr, "/api/runs?workflow=napping");
    let row = &napping["runs"][0];
    assert_eq!(
        (&row["status"], &row["failure_code"]),
        (&json!("cancelled"), &json!("CANCELLED"))
    );
    assert_eq!(
        env.containers(),
        Vec::<String>::new(),
        "nothing left behind"
    );
}

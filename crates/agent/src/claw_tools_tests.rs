use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::http::{HttpClient, ProxyUrl, Route};
use crate::tools::{LocalTools, ToolReply};

/// A 1×1 PNG.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\0\x05\0\x01\xff\x89\x99=\x1d\0\0\0\0IEND\xaeB`\x82";

fn local(dir: &Path) -> LocalTools {
    LocalTools::new(dir, Arc::new(crate::test_shell::ProcessShell), Vec::new())
}

async fn call(t: &LocalTools, name: &str, input: Value) -> Result<ToolReply, String> {
    t.call_reply(name, &input).await.map_err(|e| e.to_string())
}

/// An HTTP server on 127.0.0.1 answering every request with `status`, `content_type`, `body`
/// (and `location` when given); it records each request line.
async fn server(
    status: &'static str,
    content_type: &'static str,
    body: &'static str,
    location: Option<&'static str>,
) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if tcp.read(&mut byte).await.unwrap_or(0) == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let line = String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            log.lock().unwrap().push(line);
            let extra = location.map_or(String::new(), |l| format!("Location: {l}\r\n"));
            let answer = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tcp.write_all(answer.as_bytes()).await;
        }
    });
    (port, seen)
}

fn direct() -> HttpClient {
    HttpClient::new(
        Route::HostEnv,
        FETCH_TIMEOUT,
        &iterion_vocab::Environment::empty(),
    )
    .unwrap()
}

#[tokio::test]
async fn sleep_waits_within_its_bound_and_refuses_more() {
    let dir = tempfile::tempdir().unwrap();
    let t = local(dir.path());
    let started = std::time::Instant::now();
    let slept = call(&t, "sleep", json!({"duration_ms": 30})).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(30));
    assert_eq!(
        serde_json::from_str::<Value>(&slept.text).unwrap(),
        json!({"duration_ms": 30, "message": "Slept for 30 ms"})
    );
    for bad in [
        json!({"duration_ms": 300_001}),
        json!({"duration_ms": -1}),
        json!({}),
    ] {
        assert_eq!(
            call(&t, "sleep", bad).await,
            Err("duration_ms must be an integer from 0 to 300000".to_owned())
        );
    }
}

#[tokio::test]
async fn todo_write_keeps_the_list_for_the_loop_and_checks_each_item() {
    let dir = tempfile::tempdir().unwrap();
    let t = local(dir.path());
    assert_eq!(
        call(&t, "todo_write", json!({"action": "read"}))
            .await
            .unwrap()
            .text,
        "[]"
    );
    let wrote = call(
        &t,
        "todo_write",
        json!({"action": "write", "todos": [
            {"content": "probe", "status": "completed", "activeForm": "probing"},
            {"id": "b", "content": "ship", "status": "pending", "priority": "high"}
        ]}),
    )
    .await
    .unwrap();
    let list = json!([
        {"id": "1", "content": "probe", "status": "completed", "activeForm": "probing"},
        {"id": "b", "content": "ship", "status": "pending", "priority": "high"}
    ]);
    assert_eq!(serde_json::from_str::<Value>(&wrote.text).unwrap(), list);
    let read = call(&t, "todo_write", json!({"action": "read"}))
        .await
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&read.text).unwrap(), list);
    // Nothing was written to the workspace.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_eq!(
        call(
            &t,
            "todo_write",
            json!({"action": "write", "todos": [{"content": "x", "status": "maybe"}]})
        )
        .await,
        Err("item 0: status must be pending, in_progress, completed or done".to_owned())
    );
    let many: Vec<Value> = (0..=TODO_MAX)
        .map(|_| json!({"content": "x", "status": "pending"}))
        .collect();
    assert_eq!(
        call(&t, "todo_write", json!({"action": "write", "todos": many})).await,
        Err(format!("at most {TODO_MAX} items"))
    );
    assert_eq!(
        call(&t, "todo_write", json!({"action": "delete"})).await,
        Err("action must be \"read\" or \"write\"".to_owned())
    );
}

#[tokio::test]
async fn structured_output_echoes_its_input_and_refuses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = local(dir.path());
    let input = json!({"payload": {"probe": "claw-coverage", "ok": true}});
    let out = call(&t, "structured_output", input.clone()).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out.text).unwrap(),
        json!({"data": "Structured output provided successfully", "structured_output": input})
    );
    assert!(call(&t, "structured_output", json!({})).await.is_err());
}

#[tokio::test]
async fn send_user_message_lists_workspace_attachments_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("report.md"), "hello").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
    let t = local(dir.path());
    let sent = call(
        &t,
        "send_user_message",
        json!({"message": "probe-step-6", "status": "normal", "attachments": ["report.md"]}),
    )
    .await
    .unwrap();
    let v: Value = serde_json::from_str(&sent.text).unwrap();
    assert_eq!(v["message"], json!("probe-step-6"));
    assert_eq!(
        v["attachments"],
        json!([{"path": "report.md", "size": 5, "isImage": false}])
    );
    assert_eq!(v["sentAt"].as_str().unwrap().len(), 20, "{v}");
    for escape in ["../x", "/etc/passwd", "link"] {
        let refused = call(
            &t,
            "send_user_message",
            json!({"message": "m", "attachments": [escape]}),
        )
        .await
        .unwrap_err();
        assert!(
            refused.contains("outside the workspace"),
            "{escape}: {refused}"
        );
    }
    assert!(
        call(&t, "send_user_message", json!({"message": "  "}))
            .await
            .is_err()
    );
}

#[test]
fn rfc3339_is_the_civil_date() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_780_000_000), "2026-05-28T20:26:40Z");
}

#[tokio::test]
async fn read_image_gives_the_model_the_image_of_a_workspace_file_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("probe.png"), PNG).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not an image").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.png"), PNG).unwrap();
    std::os::unix::fs::symlink(outside.path().join("x.png"), dir.path().join("out.png")).unwrap();
    let big = std::fs::File::create(dir.path().join("big.png")).unwrap();
    big.set_len(IMAGE_MAX + 1).unwrap();
    let t = local(dir.path());
    let reply = call(&t, "read_image", json!({"path": "probe.png"}))
        .await
        .unwrap();
    assert_eq!(
        reply.text,
        format!("image probe.png (image/png, {} bytes)", PNG.len())
    );
    let image = reply.image.unwrap();
    assert_eq!(image.media_type, "image/png");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&image.data)
            .unwrap(),
        PNG
    );
    for (path, why) in [
        ("out.png", "outside the workspace"),
        ("../x.png", "outside the workspace"),
        ("notes.txt", "is not a PNG, JPEG, GIF or WebP image"),
        ("big.png", "read_image reads images up to 5242880 bytes"),
    ] {
        let refused = call(&t, "read_image", json!({"path": path}))
            .await
            .unwrap_err();
        assert!(refused.contains(why), "{path}: {refused}");
    }
}

#[tokio::test]
async fn web_fetch_gets_the_page_as_text_and_reports_redirects_without_following() {
    let dir = tempfile::tempdir().unwrap();
    let t = local(dir.path()).with_web(direct());
    let (port, seen) = server(
        "200 OK",
        "text/html; charset=utf-8",
        "<html><head><style>p{}</style><script>var x=1;</script></head><body><h1>Title</h1><p>iterion-web-fetch-probe &amp; more</p></body></html>",
        None,
    )
    .await;
    let page = call(
        &t,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/probe")}),
    )
    .await
    .unwrap();
    assert_eq!(
        page.text,
        "status: 200\ncontent-type: text/html; charset=utf-8\n\nTitle\niterion-web-fetch-probe & more"
    );
    assert_eq!(seen.lock().unwrap()[0], "GET /probe HTTP/1.1");
    let (port, seen) = server(
        "302 Found",
        "text/plain",
        "",
        Some("http://elsewhere.test/"),
    )
    .await;
    let moved = call(
        &t,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/")}),
    )
    .await
    .unwrap();
    assert_eq!(
        moved.text,
        "status: 302\nredirect to: http://elsewhere.test/\n(not followed; fetch it if you need it)"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    let (port, _) = server("404 Not Found", "text/plain", "gone", None).await;
    assert_eq!(
        call(
            &t,
            "web_fetch",
            json!({"url": format!("http://127.0.0.1:{port}/")})
        )
        .await,
        Err("status: 404\ncontent-type: text/plain\n\ngone".to_owned())
    );
    for url in ["file:///etc/passwd", "ftp://x/", "gopher://127.0.0.1/"] {
        let refused = call(&t, "web_fetch", json!({"url": url}))
            .await
            .unwrap_err();
        assert_eq!(refused, format!("{url} is not an http:// or https:// URL"));
    }
    // Without a client (a host that gives none) the tool is refused, never direct.
    assert_eq!(
        call(
            &local(dir.path()),
            "web_fetch",
            json!({"url": "http://127.0.0.1:1/"})
        )
        .await,
        Err("web_fetch is not available here".to_owned())
    );
}

#[tokio::test]
async fn web_fetch_goes_through_the_proxy_it_is_given() {
    // A "proxy" that records the absolute-form request line: a direct request would not reach
    // it (and its target port is closed).
    let (proxy_port, seen) = server("200 OK", "text/plain", "via proxy", None).await;
    let dir = tempfile::tempdir().unwrap();
    let client = HttpClient::with_roots(
        Route::Proxy(ProxyUrl::parse(&format!("http://127.0.0.1:{proxy_port}")).unwrap()),
        FETCH_TIMEOUT,
        b"",
    )
    .unwrap();
    let t = local(dir.path()).with_web(client);
    let page = call(&t, "web_fetch", json!({"url": "http://denied.test:9/page"}))
        .await
        .unwrap();
    assert_eq!(
        page.text,
        "status: 200\ncontent-type: text/plain\n\nvia proxy"
    );
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        ["GET http://denied.test:9/page HTTP/1.1"]
    );
}

#[test]
fn html_to_text_drops_markup_and_scripts() {
    assert_eq!(
        html_to_text("<div>a<br>b</div>\n\n\n<SCRIPT>evil()</SCRIPT><p>c &lt;d&gt;</p>"),
        "a\nb\nc <d>"
    );
    assert_eq!(html_to_text("no tags"), "no tags");
    assert_eq!(html_to_text("<p>unclosed <b"), "unclosed");
}

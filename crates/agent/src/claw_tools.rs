//! The claw loop's tools beyond the workspace ones, under upstream's claw names: `web_fetch`,
//! `read_image`, `sleep`, `todo_write`, `structured_output` and `send_user_message`
//! (docs/language.md, "agent"). Each is bounded: the time it may wait, the bytes it reads, the
//! text it gives back. They take what the caller resolved (a workspace path, the HTTP client of
//! the node's route) and return text for the model, or why not.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::http::HttpClient;
use crate::wire::Image;

/// The longest `sleep` (upstream's bound).
pub const SLEEP_MAX_MS: u64 = 300_000;
/// The largest image `read_image` sends (the providers' own limit per image).
pub const IMAGE_MAX: u64 = 5 * 1024 * 1024;
/// The most bytes `web_fetch` reads from the server; a longer answer is refused.
pub const FETCH_MAX: usize = 4 * 1024 * 1024;
/// How long one `web_fetch` may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// The most items `todo_write` keeps.
pub const TODO_MAX: usize = 200;

/// `sleep {duration_ms}`: waits, then says how long.
pub async fn sleep(input: &Value) -> Result<String, String> {
    let ms = input
        .get("duration_ms")
        .and_then(Value::as_u64)
        .filter(|ms| *ms <= SLEEP_MAX_MS)
        .ok_or_else(|| format!("duration_ms must be an integer from 0 to {SLEEP_MAX_MS}"))?;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(json!({"duration_ms": ms, "message": format!("Slept for {ms} ms")}).to_string())
}

/// `structured_output {payload}`: the input echoed back under `structured_output`, as upstream's
/// tool does (a model that reports through a tool call rather than its final text).
pub fn structured_output(input: &Value) -> Result<String, String> {
    match input {
        Value::Object(map) if !map.is_empty() => Ok(json!({
            "data": "Structured output provided successfully",
            "structured_output": input,
        })
        .to_string()),
        _ => Err("structured_output needs a non-empty object (put it under \"payload\")".into()),
    }
}

/// `send_user_message {message, status?, attachments?}`: the message for the operator. The tool
/// call is recorded with the run (`agent_tool_call`, the run log); each attachment must be a
/// file of the workspace (`resolve` says where, or why not) and is listed with its size.
pub fn send_user_message(
    input: &Value,
    resolve: impl Fn(&str) -> Result<std::path::PathBuf, String>,
) -> Result<String, String> {
    let message = input
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .ok_or("message (a non-empty string) is required")?;
    let status = input
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("normal");
    let mut attachments = Vec::new();
    for item in input
        .get("attachments")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let Some(rel) = item.as_str() else {
            return Err("attachments must be workspace paths (strings)".into());
        };
        let path = resolve(rel)?;
        let meta = std::fs::metadata(&path).map_err(|e| format!("attachment {rel}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("attachment {rel} is not a file"));
        }
        attachments.push(json!({"path": rel, "size": meta.len(), "isImage": image_extension(rel)}));
    }
    Ok(json!({
        "message": message,
        "status": status,
        "sentAt": now_rfc3339(),
        "attachments": attachments,
    })
    .to_string())
}

fn image_extension(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".svg"]
        .iter()
        .any(|e| lower.ends_with(e))
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the civil-from-days conversion).
fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The node's task list for `todo_write`, kept for the node's loop (never written to the
/// workspace).
#[derive(Debug, Default)]
pub struct TodoList(Mutex<Vec<Value>>);

impl TodoList {
    /// `todo_write {action: "read"}` gives the list; `{action: "write", todos: [...]}` replaces
    /// it. Each item needs `content` and a `status` (`pending`, `in_progress`, `completed` or
    /// upstream's `done`); `id` (given one when absent), `priority` and `activeForm` are kept.
    pub fn call(&self, input: &Value) -> Result<String, String> {
        let mut list = self.0.lock().map_err(|_| "the task list is unavailable")?;
        match input.get("action").and_then(Value::as_str) {
            Some("read") => {}
            Some("write") => {
                let items = input
                    .get("todos")
                    .and_then(Value::as_array)
                    .ok_or("todos (a list) is required for action=write")?;
                if items.len() > TODO_MAX {
                    return Err(format!("at most {TODO_MAX} items"));
                }
                let mut next = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    next.push(todo_item(i, item)?);
                }
                *list = next;
            }
            _ => return Err("action must be \"read\" or \"write\"".into()),
        }
        Ok(Value::Array(list.clone()).to_string())
    }
}

fn todo_item(i: usize, item: &Value) -> Result<Value, String> {
    let field = |k: &str| item.get(k).and_then(Value::as_str);
    let content = field("content")
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| format!("item {i}: content (a non-empty string) is required"))?;
    let status = field("status")
        .filter(|s| ["pending", "in_progress", "completed", "done"].contains(s))
        .ok_or_else(|| {
            format!("item {i}: status must be pending, in_progress, completed or done")
        })?;
    let mut out = json!({
        "id": field("id").map_or_else(|| (i + 1).to_string(), str::to_owned),
        "content": content,
        "status": status,
    });
    for key in ["priority", "activeForm"] {
        if let Some(v) = field(key) {
            out[key] = json!(v);
        }
    }
    Ok(out)
}

/// `web_fetch {url}`: `GET` an `http://` or `https://` URL through `client` (the node's route:
/// under a sandbox the run's egress proxy, which applies the network policy). HTML comes back as
/// text; a redirect is reported, not followed (the model may fetch the new address, which the
/// policy checks again).
pub async fn web_fetch(client: Option<&HttpClient>, input: &Value) -> Result<String, String> {
    let client = client.ok_or("web_fetch is not available here")?;
    let url = input
        .get("url")
        .and_then(Value::as_str)
        .ok_or("url (a string) is required")?;
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!("{url} is not an http:// or https:// URL"));
    }
    let headers = [
        ("user-agent", "iterion-web-fetch".to_owned()),
        (
            "accept",
            "text/html, text/plain, application/json, */*".to_owned(),
        ),
    ];
    let response = client
        .get(url, &headers, FETCH_MAX)
        .await
        .map_err(|e| format!("fetching {url} failed: {e}"))?;
    let kind = response.content_type.clone().unwrap_or_default();
    if (300..400).contains(&response.status) {
        let to = response.location.unwrap_or_default();
        return Ok(format!(
            "status: {}\nredirect to: {to}\n(not followed; fetch it if you need it)",
            response.status
        ));
    }
    let body = String::from_utf8_lossy(&response.body);
    let text = if kind.to_ascii_lowercase().contains("html") {
        html_to_text(&body)
    } else {
        body.into_owned()
    };
    let head = format!("status: {}\ncontent-type: {kind}\n\n", response.status);
    if response.status >= 400 {
        return Err(format!("{head}{text}"));
    }
    Ok(format!("{head}{text}"))
}

/// HTML as readable text: `script`/`style` dropped, tags removed (block tags become line
/// breaks), the common entities decoded, lines trimmed and blank ones dropped.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        let Some(rel) = html.get(i..).and_then(|s| s.find('<')) else {
            out.push_str(html.get(i..).unwrap_or_default());
            break;
        };
        out.push_str(html.get(i..i + rel).unwrap_or_default());
        let start = i + rel;
        let Some(end) = html
            .get(start..)
            .and_then(|s| s.find('>'))
            .map(|e| start + e + 1)
        else {
            break;
        };
        let tag = lower.get(start + 1..end - 1).unwrap_or_default();
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        i = end;
        if (name == "script" || name == "style") && !tag.starts_with('/') {
            let close = format!("</{name}");
            match lower.get(end..).and_then(|s| s.find(&close)) {
                Some(c) => {
                    let after = end + c;
                    i = lower
                        .get(after..)
                        .and_then(|s| s.find('>'))
                        .map_or(html.len(), |e| after + e + 1);
                }
                None => i = html.len(),
            }
            continue;
        }
        if matches!(
            name.as_str(),
            "p" | "div" | "br" | "li" | "tr" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "pre"
        ) {
            out.push('\n');
        }
    }
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    decoded
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `read_image {path}`: the image at `path` (a workspace file the caller resolved; `shown` is the
/// path as the model wrote it), at most [`IMAGE_MAX`] bytes, PNG, JPEG, GIF or WebP by its first
/// bytes: a line of text for the model and the image itself.
pub async fn read_image(path: &Path, shown: &str) -> Result<(String, Image), String> {
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a file"));
    }
    if meta.len() > IMAGE_MAX {
        return Err(format!(
            "{shown} is {} bytes; read_image reads images up to {IMAGE_MAX} bytes",
            meta.len()
        ));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > IMAGE_MAX {
        return Err(format!("{shown} grew past {IMAGE_MAX} bytes while read"));
    }
    let media_type = image_type(&bytes)
        .ok_or_else(|| format!("{shown} is not a PNG, JPEG, GIF or WebP image"))?;
    let text = format!("image {shown} ({media_type}, {} bytes)", bytes.len());
    Ok((
        text,
        Image {
            media_type: media_type.to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(&bytes),
        },
    ))
}

/// The media type of an image by its signature.
fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
#[path = "claw_tools_tests.rs"]
mod tests;

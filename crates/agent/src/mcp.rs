//! A small stdio MCP client for the runner (docs/language.md "MCP servers"): the node's declared
//! servers are started **inside the sandbox** (the runner is in the container), their tools are
//! listed once and offered to the loop as `mcp__<server>__<tool>`, and each call is one
//! `tools/call` request.
//!
//! Everything a server writes is hostile (it runs next to the workload, from a command the
//! workflow names): lines are bounded ([`MAX_LINE`]), so are the tools a server may list
//! ([`MAX_TOOLS`]) and their names (the model APIs' `[A-Za-z0-9_-]{1,64}`), each request has a
//! deadline ([`REQUEST_TIMEOUT`]), and a result's text is clamped before the loop sees it. The
//! process is started by the embedder's [`Spawn`] (this crate starts no process of its own) and
//! killed when the client is dropped.

use std::collections::BTreeMap;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::wire::ToolSpec;

/// The longest line a server may write (bytes); a longer one ends the session.
pub const MAX_LINE: usize = 1 << 20;
/// The most tools one server may offer; the rest are ignored.
pub const MAX_TOOLS: usize = 128;
/// The deadline of one request (initialize, list, call).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The most bytes of a tool result passed to the loop.
pub const MAX_RESULT: usize = 256 * 1024;
/// The protocol revision the client asks for.
pub const PROTOCOL_VERSION: &str = "2024-11-05";

/// One server the task names: what to start. `${VAR}` in `command`, `args` and `env` is expanded
/// by the runner against **the container's** environment, never the host's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerSpec {
    /// The declared name (the tools' prefix).
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Only these of its tools are offered (the node's `mcp.SERVER.TOOL` entries); `None`: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<String>>,
}

/// The pipes of a started server.
pub struct Pipes {
    /// Its stdin.
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    /// Its stdout.
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    /// Kept alive while the client lives; dropping it must kill the process.
    pub guard: Box<dyn Send + Sync>,
}

/// Starts a server process where the runner runs (the embedder's side).
#[async_trait]
pub trait Spawn: Send + Sync {
    /// Starts `argv` in `workdir` with `env` added to the environment, stdin and stdout piped.
    async fn spawn(
        &self,
        argv: &[String],
        env: &[(String, String)],
        workdir: &Path,
    ) -> Result<Pipes, std::io::Error>;
}

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The process did not start.
    #[error("mcp server {server:?}: cannot start {command:?}: {source}")]
    Spawn {
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server broke the protocol, closed its stdout, or did not answer in time.
    #[error("mcp server {server:?}: {reason}")]
    Protocol {
        /// The server.
        server: String,
        /// What happened.
        reason: String,
    },
    /// The embedder gave no way to start processes.
    #[error("this runner cannot start MCP servers")]
    NoSpawner,
}

/// The `mcp__<server>__<tool>` name of a server's tool, when it is a valid model tool name.
pub fn tool_name(server: &str, tool: &str) -> Option<String> {
    let name = format!("mcp__{server}__{tool}");
    let valid = !tool.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then_some(name)
}

struct Session {
    stdin: Pin<Box<dyn AsyncWrite + Send>>,
    stdout: BufReader<Pin<Box<dyn AsyncRead + Send>>>,
    next_id: u64,
}

/// One running server.
struct Server {
    name: String,
    session: Mutex<Session>,
    _guard: Box<dyn Send + Sync>,
}

impl Server {
    fn error(&self, reason: impl Into<String>) -> McpError {
        McpError::Protocol {
            server: self.name.clone(),
            reason: reason.into(),
        }
    }

    /// One request and its response (notifications and other ids in between are skipped).
    async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let mut s = self.session.lock().await;
        s.next_id += 1;
        let id = s.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let exchange = async {
            write_line(&mut s.stdin, &line)
                .await
                .map_err(|e| self.error(format!("write: {e}")))?;
            loop {
                let msg = read_message(&mut s.stdout)
                    .await
                    .map_err(|r| self.error(r))?;
                if msg.get("id").and_then(Value::as_u64) != Some(id) {
                    continue;
                }
                if let Some(err) = msg.get("error") {
                    let text = err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    return Err(self.error(format!(
                        "{method}: {}",
                        crate::text::truncate_bytes(text, 512)
                    )));
                }
                return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
            }
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| self.error(format!("{method}: no answer within {REQUEST_TIMEOUT:?}")))?
    }

    async fn notify(&self, method: &str) -> Result<(), McpError> {
        let mut s = self.session.lock().await;
        let line = json!({"jsonrpc": "2.0", "method": method});
        write_line(&mut s.stdin, &line)
            .await
            .map_err(|e| self.error(format!("write: {e}")))
    }
}

async fn write_line(w: &mut Pin<Box<dyn AsyncWrite + Send>>, v: &Value) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(v)?;
    bytes.push(b'\n');
    w.write_all(&bytes).await?;
    w.flush().await
}

/// The next JSON object line (blank lines and lines that are not JSON objects are skipped: a
/// server may log on stdout).
async fn read_message(r: &mut BufReader<Pin<Box<dyn AsyncRead + Send>>>) -> Result<Value, String> {
    loop {
        let mut line = Vec::new();
        let mut limited = (&mut *r).take(MAX_LINE as u64 + 1);
        let n = limited
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed its stdout".to_owned());
        }
        if line.len() > MAX_LINE {
            return Err(format!("wrote a line over {MAX_LINE} bytes"));
        }
        if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(&line) {
            return Ok(v);
        }
    }
}

/// The node's started servers and the tools they offer.
#[derive(Default)]
pub struct McpClients {
    servers: Vec<Server>,
    /// Offered name → (server index, the server's own tool name).
    tools: BTreeMap<String, (usize, String)>,
    specs: Vec<ToolSpec>,
}

impl McpClients {
    /// Starts each server in `workdir`, initializes it and lists its tools; `expand` expands a
    /// `${VAR}` of a spec's values (the container's environment).
    ///
    /// # Errors
    ///
    /// The first server that does not start or answer.
    pub async fn start(
        specs: &[McpServerSpec],
        spawner: Option<&dyn Spawn>,
        workdir: &Path,
        expand: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<McpClients, McpError> {
        let mut out = McpClients::default();
        if specs.is_empty() {
            return Ok(out);
        }
        let spawner = spawner.ok_or(McpError::NoSpawner)?;
        for spec in specs {
            let command = expand(&spec.command);
            let mut argv = vec![command.clone()];
            argv.extend(spec.args.iter().map(|a| expand(a)));
            let env: Vec<(String, String)> = spec
                .env
                .iter()
                .map(|(k, v)| (k.clone(), expand(v)))
                .collect();
            let pipes = spawner
                .spawn(&argv, &env, workdir)
                .await
                .map_err(|source| McpError::Spawn {
                    server: spec.name.clone(),
                    command: command.clone(),
                    source,
                })?;
            let server = Server {
                name: spec.name.clone(),
                session: Mutex::new(Session {
                    stdin: pipes.stdin,
                    stdout: BufReader::new(pipes.stdout),
                    next_id: 0,
                }),
                _guard: pipes.guard,
            };
            server
                .request(
                    "initialize",
                    json!({
                        "protocolVersion": PROTOCOL_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "iterion", "version": env!("CARGO_PKG_VERSION")},
                    }),
                )
                .await?;
            server.notify("notifications/initialized").await?;
            let listed = server.request("tools/list", json!({})).await?;
            let index = out.servers.len();
            let tools = listed
                .get("tools")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for tool in tools.iter().take(MAX_TOOLS) {
                let Some(own) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                if spec
                    .only
                    .as_ref()
                    .is_some_and(|only| !only.iter().any(|t| t == own))
                {
                    continue;
                }
                let Some(name) = tool_name(&spec.name, own) else {
                    tracing::warn!(
                        "mcp server {:?}: tool {:?} has no valid model tool name; skipped",
                        spec.name,
                        crate::text::truncate_bytes(own, 80)
                    );
                    continue;
                };
                if out.tools.contains_key(&name) {
                    continue;
                }
                let schema = match tool.get("inputSchema") {
                    Some(s @ Value::Object(_)) => s.clone(),
                    _ => json!({"type": "object"}),
                };
                let description = tool
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                out.specs.push(ToolSpec {
                    name: name.clone(),
                    description: crate::text::truncate_bytes(description, 2048).to_owned(),
                    input_schema: schema,
                });
                out.tools.insert(name, (index, own.to_owned()));
            }
            out.servers.push(server);
        }
        Ok(out)
    }

    /// The tools to offer the model.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// Whether `name` is one of these servers' tools.
    pub fn owns(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Calls tool `name` with `input`: its text content, or the error the model sees.
    pub async fn call(&self, name: &str, input: &Value) -> Result<String, String> {
        let Some((index, own)) = self.tools.get(name) else {
            return Err(format!("no MCP tool {name:?}"));
        };
        let Some(server) = self.servers.get(*index) else {
            return Err(format!("no MCP tool {name:?}"));
        };
        let result = server
            .request("tools/call", json!({"name": own, "arguments": input}))
            .await
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        for block in result
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match block.get("text").and_then(Value::as_str) {
                Some(t) => text.push_str(t),
                None => text.push_str(&block.to_string()),
            }
            if text.len() > MAX_RESULT {
                break;
            }
        }
        let text = crate::text::truncate_bytes(&text, MAX_RESULT).to_owned();
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(text);
        }
        Ok(text)
    }
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;

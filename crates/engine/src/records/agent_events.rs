//! Payloads of the agent transcript events: one `agent_turn` per model turn and one
//! `agent_tool_call` per tool call, for every agent backend (claw in the engine or through the
//! in-container runner, and the delegate CLIs). Texts are bounded and redacted by the emitter
//! before they are built, like every other payload (SANDBOX.md §6.10).

use iterion_agent::text::truncate_bytes;
use serde::{Deserialize, Serialize};

/// The most bytes of a tool call's input or result kept in an event.
pub const TRANSCRIPT_TEXT_MAX: usize = 4 * 1024;

/// `agent_turn`: the model answered once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTurn {
    /// The node id.
    pub node: String,
    /// The backend: `claw`, `claude_code`, `codex`.
    pub backend: String,
    /// 1 for the node's first turn.
    pub turn: u32,
    /// The model that answered, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the model stopped (`end_turn`, `tool_use`, `max_tokens`, …), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Input tokens of this turn, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens of this turn, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
}

/// `agent_tool_call`: the agent called a tool (claw's `bash`, a delegate CLI's Bash/Edit/Write…).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentToolCall {
    /// The node id.
    pub node: String,
    /// The backend: `claw`, `claude_code`, `codex`.
    pub backend: String,
    /// The turn that asked for the call.
    pub turn: u32,
    /// The tool's name as the agent spelled it.
    pub tool: String,
    /// The call's input (JSON text), redacted, at most [`TRANSCRIPT_TEXT_MAX`] bytes.
    pub input: String,
    /// The result the agent got back, redacted, at most [`TRANSCRIPT_TEXT_MAX`] bytes; absent
    /// when the backend reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Whether the result was an error.
    pub is_error: bool,
    /// A command's exit code, when the tool ran one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// How long the call took, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// `text` cut to [`TRANSCRIPT_TEXT_MAX`] bytes on a char boundary, with a note when cut.
pub fn bound_transcript_text(text: &str) -> String {
    let kept = truncate_bytes(text, TRANSCRIPT_TEXT_MAX);
    if kept.len() == text.len() {
        return text.to_string();
    }
    format!("{kept}… [{} bytes cut]", text.len() - kept.len())
}

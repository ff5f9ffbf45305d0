//! The conversation, provider-neutral, and its encoding for the two APIs (SANDBOX.md §13.1b).
//!
//! The loop keeps one [`Conversation`]; each request renders it for the node's provider, and each
//! answer is decoded into a `Turn`. The conversation is what a paused `ask_user` stores, so it
//! is plain serialisable data.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::provider::Provider;

/// The tokens asked for per answer (Anthropic requires a value).
pub(crate) const MAX_OUTPUT_TOKENS: u32 = 8192;

/// Token counts of an agent node (recorded in `node_finished.usage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// What the run cost, in US dollars, when the backend reports it (a delegate CLI: `claude`
    /// does, `codex` does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Dollars>,
}

/// An amount in US dollars as a CLI reports it. Compared by its bits, so [`Usage`] stays `Eq`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Dollars(pub f64);

impl PartialEq for Dollars {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Dollars {}

/// One tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its input object.
    pub input: Value,
}

/// A tool call's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call it answers.
    pub id: String,
    /// The text given back to the model.
    pub content: String,
    /// Whether it is an error.
    pub is_error: bool,
    /// An image the tool gives the model with its text (`read_image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
}

/// An image for the model: its media type and its bytes in base64.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The bytes, base64 (standard alphabet, padded).
    pub data: String,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("media_type", &self.media_type)
            .field("base64_len", &self.data.len())
            .finish()
    }
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The operator side: the prompt, a correction request.
    User {
        /// The text.
        text: String,
    },
    /// A model answer.
    Assistant {
        /// Its text (may be empty).
        text: String,
        /// Its tool calls.
        calls: Vec<ToolCall>,
    },
    /// The results of the previous answer's tool calls, in call order.
    Tools {
        /// The results.
        results: Vec<ToolResult>,
    },
}

/// The conversation so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// The system prompt.
    pub system: Option<String>,
    /// The messages, oldest first.
    pub messages: Vec<Message>,
}

/// Whether the model may call tools in this request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolChoice {
    /// It may.
    Auto,
    /// Tools are withdrawn (`tool_max_steps` reached, or the schema repair): the tools stay
    /// declared, because the history holds tool calls, but none may be called.
    None,
}

/// A decoded answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Turn {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub usage: Usage,
    /// Why the model stopped (`stop_reason`, or OpenAI's `finish_reason`), when it said.
    pub stop_reason: Option<String>,
}

/// A node's `max_tokens` and `reasoning_effort` (docs/language.md "agent"), as every request of
/// its loop carries them. The default sets neither: the request then has this crate's own
/// output cap and no effort.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Generation {
    /// The most output tokens per answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The effort word as the workflow wrote it (expanded): `minimal`, `low`, `medium`, `high`,
    /// `xhigh` or `max`; mapped to what each API takes by [`effort_for`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

impl Generation {
    /// Whether neither is set.
    pub fn is_unset(&self) -> bool {
        self.max_tokens.is_none() && self.reasoning_effort.is_none()
    }
}

/// The effort word the provider's API takes for `effort`: Anthropic's `output_config.effort`
/// takes `low`, `medium`, `high`; Chat Completions' `reasoning_effort` also `minimal`. A word
/// above the range (`xhigh`, `max`) is the highest, below it the lowest; an unknown word is
/// passed as written (the provider then answers with its own error).
pub fn effort_for(provider: Provider, effort: &str) -> String {
    let messages = provider.is_messages_api();
    match effort {
        "minimal" if messages => "low".to_owned(),
        "xhigh" | "max" => "high".to_owned(),
        other => other.to_owned(),
    }
}

/// The request path under the base URL and the JSON body.
pub(crate) fn encode(
    provider: Provider,
    model: &str,
    conversation: &Conversation,
    tools: &[ToolSpec],
    choice: ToolChoice,
    generation: &Generation,
) -> (&'static str, Value) {
    if provider.is_messages_api() {
        let mut body = anthropic_body(model, conversation, tools, choice);
        if let Some(n) = generation.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(effort) = &generation.reasoning_effort {
            body["output_config"] = json!({"effort": effort_for(provider, effort)});
        }
        ("/v1/messages", body)
    } else {
        let mut body = openai_body(model, conversation, tools, choice);
        if let Some(n) = generation.max_tokens {
            // OpenAI's reasoning models take only the newer name; other servers the older one.
            let key = match provider {
                Provider::Openai => "max_completion_tokens",
                Provider::Anthropic | Provider::OpenaiCompatible => "max_tokens",
            };
            body[key] = json!(n);
        }
        if let Some(effort) = &generation.reasoning_effort {
            body["reasoning_effort"] = json!(effort_for(provider, effort));
        }
        ("/chat/completions", body)
    }
}

/// The `anthropic-beta` value a Messages request with an effort carries.
pub(crate) const EFFORT_BETA: &str = "effort-2025-11-24";

/// The headers carrying the key.
pub(crate) fn auth_headers(provider: Provider, key: &str) -> Vec<(&'static str, String)> {
    if provider.is_messages_api() {
        vec![
            ("x-api-key", key.to_owned()),
            ("anthropic-version", "2023-06-01".to_owned()),
        ]
    } else {
        vec![("authorization", format!("Bearer {key}"))]
    }
}

fn anthropic_body(
    model: &str,
    conversation: &Conversation,
    tools: &[ToolSpec],
    choice: ToolChoice,
) -> Value {
    let messages: Vec<Value> = conversation
        .messages
        .iter()
        .map(|m| match m {
            Message::User { text } => json!({"role": "user", "content": text}),
            Message::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}),
                    );
                }
                json!({"role": "assistant", "content": blocks})
            }
            Message::Tools { results } => {
                let blocks: Vec<Value> = results
                    .iter()
                    .map(|r| match &r.image {
                        None => json!({"type": "tool_result", "tool_use_id": r.id,
                               "content": r.content, "is_error": r.is_error}),
                        // A tool result may hold image blocks in the Messages API.
                        Some(img) => json!({"type": "tool_result", "tool_use_id": r.id,
                            "content": [
                                {"type": "text", "text": r.content},
                                {"type": "image", "source": {"type": "base64",
                                    "media_type": img.media_type, "data": img.data}},
                            ],
                            "is_error": r.is_error}),
                    })
                    .collect();
                json!({"role": "user", "content": blocks})
            }
        })
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": MAX_OUTPUT_TOKENS,
        "messages": messages,
    });
    if let Some(system) = &conversation.system {
        body["system"] = json!(system);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(
            tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                           "input_schema": t.input_schema})
                })
                .collect(),
        );
        if choice == ToolChoice::None {
            body["tool_choice"] = json!({"type": "none"});
        }
    }
    body
}

fn openai_body(
    model: &str,
    conversation: &Conversation,
    tools: &[ToolSpec],
    choice: ToolChoice,
) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &conversation.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in &conversation.messages {
        match m {
            Message::User { text } => messages.push(json!({"role": "user", "content": text})),
            Message::Assistant { text, calls } => {
                let mut msg = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(
                        calls
                            .iter()
                            .map(|c| {
                                json!({"id": c.id, "type": "function", "function": {
                                    "name": c.name,
                                    "arguments": c.input.to_string(),
                                }})
                            })
                            .collect(),
                    );
                }
                messages.push(msg);
            }
            Message::Tools { results } => {
                for r in results {
                    messages
                        .push(json!({"role": "tool", "tool_call_id": r.id, "content": r.content}));
                }
                // A tool message is text only in Chat Completions: the images follow as one
                // user message, after every tool message of the turn.
                let images: Vec<Value> = results
                    .iter()
                    .filter_map(|r| r.image.as_ref().map(|img| (r, img)))
                    .flat_map(|(r, img)| {
                        [
                            json!({"type": "text", "text": format!("the image of tool call {}:", r.id)}),
                            json!({"type": "image_url", "image_url": {
                                "url": format!("data:{};base64,{}", img.media_type, img.data)}}),
                        ]
                    })
                    .collect();
                if !images.is_empty() {
                    messages.push(json!({"role": "user", "content": images}));
                }
            }
        }
    }
    let mut body = json!({"model": model, "messages": messages});
    if !tools.is_empty() {
        body["tools"] = Value::Array(
            tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    }})
                })
                .collect(),
        );
        body["tool_choice"] = json!(match choice {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
        });
    }
    body
}

/// What is wrong with a model's answer body.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("the answer is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A required part is missing; the text names it.
    #[error("{0}")]
    Missing(&'static str),
}

/// Decodes an answer body; `Err` says what was wrong with it.
pub(crate) fn decode(provider: Provider, body: &[u8]) -> Result<Turn, DecodeError> {
    let value: Value = serde_json::from_slice(body).map_err(DecodeError::NotJson)?;
    if provider.is_messages_api() {
        decode_anthropic(&value)
    } else {
        decode_openai(&value)
    }
}

/// A stop reason as the model spelled it, bounded (it is the model's text).
fn stop_reason(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(|s| crate::text::truncate_bytes(s, 64).to_owned())
}

fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn decode_anthropic(v: &Value) -> Result<Turn, DecodeError> {
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or(DecodeError::Missing("the answer has no content array"))?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => calls.push(ToolCall {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or(DecodeError::Missing("a tool_use block has no id"))?
                    .to_owned(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or(DecodeError::Missing("a tool_use block has no name"))?
                    .to_owned(),
                input: b.get("input").cloned().unwrap_or_else(|| json!({})),
            }),
            _ => {}
        }
    }
    let usage = v.get("usage").cloned().unwrap_or(Value::Null);
    Ok(Turn {
        text,
        calls,
        usage: Usage {
            input_tokens: count(&usage, "input_tokens"),
            output_tokens: count(&usage, "output_tokens"),
            cost_usd: None,
        },
        stop_reason: stop_reason(v.get("stop_reason")),
    })
}

fn decode_openai(v: &Value) -> Result<Turn, DecodeError> {
    let message = v
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
        .ok_or(DecodeError::Missing("the answer has no choices[0].message"))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut calls = Vec::new();
    for c in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = c
            .get("function")
            .ok_or(DecodeError::Missing("a tool call has no function"))?;
        let arguments = function
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}");
        calls.push(ToolCall {
            id: c
                .get("id")
                .and_then(Value::as_str)
                .ok_or(DecodeError::Missing("a tool call has no id"))?
                .to_owned(),
            name: function
                .get("name")
                .and_then(Value::as_str)
                .ok_or(DecodeError::Missing("a tool call has no name"))?
                .to_owned(),
            // Arguments that are not JSON reach the tool as a string; it refuses them.
            input: serde_json::from_str(arguments)
                .unwrap_or_else(|_| Value::String(arguments.to_owned())),
        });
    }
    let usage = v.get("usage").cloned().unwrap_or(Value::Null);
    Ok(Turn {
        text,
        calls,
        usage: Usage {
            input_tokens: count(&usage, "prompt_tokens"),
            output_tokens: count(&usage, "completion_tokens"),
            cost_usd: None,
        },
        stop_reason: stop_reason(
            v.get("choices")
                .and_then(|c| c.get(0))
                .and_then(|c| c.get("finish_reason")),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn convo() -> Conversation {
        Conversation {
            system: Some("sys".into()),
            messages: vec![
                Message::User { text: "hi".into() },
                Message::Assistant {
                    text: String::new(),
                    calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        input: json!({"command": "ls"}),
                    }],
                },
                Message::Tools {
                    results: vec![ToolResult {
                        id: "c1".into(),
                        content: "a\n".into(),
                        is_error: false,
                        image: None,
                    }],
                },
            ],
        }
    }

    /// A conversation whose one tool result carries an image (`read_image`).
    fn convo_with_image() -> Conversation {
        let mut c = convo();
        if let Some(Message::Tools { results }) = c.messages.last_mut() {
            results[0].content = "image a.png (image/png, 3 bytes)".into();
            results[0].image = Some(Image {
                media_type: "image/png".into(),
                data: "AAAA".into(),
            });
        }
        c
    }

    #[test]
    fn an_image_result_is_an_image_block_or_a_following_user_message() {
        let (_, body) = encode(
            Provider::Anthropic,
            "m",
            &convo_with_image(),
            &[],
            ToolChoice::Auto,
            &Generation::default(),
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                "content": [
                    {"type": "text", "text": "image a.png (image/png, 3 bytes)"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}],
                "is_error": false}]})
        );
        let (_, body) = encode(
            Provider::Openai,
            "m",
            &convo_with_image(),
            &[],
            ToolChoice::Auto,
            &Generation::default(),
        );
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(
            messages[3..],
            [
                json!({"role": "tool", "tool_call_id": "c1", "content": "image a.png (image/png, 3 bytes)"}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "the image of tool call c1:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}),
            ]
        );
        // The image is not printed in debug output.
        let debug = format!("{:?}", convo_with_image());
        assert!(
            debug.contains("base64_len: 4") && !debug.contains("AAAA"),
            "{debug}"
        );
    }

    #[test]
    fn anthropic_bodies_carry_tool_use_and_tool_result_blocks() {
        let tools = [ToolSpec {
            name: "bash".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }];
        let (path, body) = encode(
            Provider::Anthropic,
            "m",
            &convo(),
            &tools,
            ToolChoice::None,
            &Generation::default(),
        );
        assert_eq!(path, "/v1/messages");
        assert_eq!(
            body,
            json!({
                "model": "m", "max_tokens": MAX_OUTPUT_TOKENS, "system": "sys",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "ls"}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "c1", "content": "a\n", "is_error": false}]},
                ],
                "tools": [{"name": "bash", "description": "d", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "none"},
            })
        );
    }

    #[test]
    fn openai_bodies_use_function_calls_and_tool_messages() {
        let (path, body) = encode(
            Provider::Openai,
            "m",
            &convo(),
            &[],
            ToolChoice::Auto,
            &Generation::default(),
        );
        assert_eq!(path, "/chat/completions");
        assert_eq!(
            body,
            json!({"model": "m", "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "a\n"},
            ]})
        );
    }

    #[test]
    fn max_tokens_and_reasoning_effort_reach_each_api_in_its_own_words() {
        let generation = |effort: &str| Generation {
            max_tokens: Some(777),
            reasoning_effort: Some(effort.to_owned()),
        };
        let (_, body) = encode(
            Provider::Anthropic,
            "m",
            &convo(),
            &[],
            ToolChoice::Auto,
            &generation("xhigh"),
        );
        assert_eq!(
            (&body["max_tokens"], &body["output_config"]),
            (&json!(777), &json!({"effort": "high"}))
        );
        let (_, body) = encode(
            Provider::Openai,
            "m",
            &convo(),
            &[],
            ToolChoice::Auto,
            &generation("minimal"),
        );
        assert_eq!(
            (&body["max_completion_tokens"], &body["reasoning_effort"]),
            (&json!(777), &json!("minimal"))
        );
        assert!(body.get("max_tokens").is_none());
        let (_, body) = encode(
            Provider::OpenaiCompatible,
            "m",
            &convo(),
            &[],
            ToolChoice::Auto,
            &generation("low"),
        );
        assert_eq!(
            (&body["max_tokens"], &body["reasoning_effort"]),
            (&json!(777), &json!("low"))
        );
        assert_eq!(effort_for(Provider::Anthropic, "minimal"), "low");
        assert_eq!(effort_for(Provider::Openai, "max"), "high");
    }

    #[test]
    fn answers_decode_with_usage() {
        let a = br#"{"content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t","name":"glob","input":{"pattern":"*"}}],"usage":{"input_tokens":3,"output_tokens":4}}"#;
        let turn = decode(Provider::Anthropic, a).unwrap();
        assert_eq!(
            turn,
            Turn {
                text: "ok".into(),
                calls: vec![ToolCall {
                    id: "t".into(),
                    name: "glob".into(),
                    input: json!({"pattern": "*"})
                }],
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    cost_usd: None,
                },
                stop_reason: None,
            }
        );
        let o = br#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"bash","arguments":"{\"command\":\"id\"}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":6}}"#;
        let turn = decode(Provider::Openai, o).unwrap();
        assert_eq!(turn.calls[0].input, json!({"command": "id"}));
        assert_eq!(turn.usage.output_tokens, 6);
        assert!(decode(Provider::Openai, b"{}").is_err());
    }
}

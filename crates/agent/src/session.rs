//! The tool-use loop (DSL.md §6.2), the same in the engine process and in the runner.
//!
//! Call the model with the allowed tools; run each tool call through a [`ToolHost`] and give the
//! results back; stop when an answer calls no tool. After `max_turns` answers that called tools,
//! one more request is made with tools withdrawn (`tool_choice: none`). The final answer becomes
//! the output: `{"text": …}`, or — with an output schema — a conforming JSON object, with one
//! correction request quoting the violation before the node fails with `SCHEMA_VALIDATION`.
//!
//! Model calls are retried on 429, 5xx and transport errors: at most `MAX_RETRIES` times, with
//! exponential backoff from `RETRY_BASE` (capped at `RETRY_CAP`), or after the answer's
//! `retry-after` when it gives one (capped at `RETRY_AFTER_CAP`).
//!
//! `ask_user` does not block the loop: the host answers [`ToolOutcome::Ask`] and the loop ends
//! [`LoopEnd::Paused`] with a [`Snapshot`] to resume from once the operator answered.

use std::time::Duration;

use async_trait::async_trait;
use iterion_dsl::ir::Schema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::http::{HttpClient, HttpError};
use crate::provider::Endpoint;
use crate::wire::Usage;
use crate::wire::{self, Conversation, Message, ToolCall, ToolChoice, ToolResult, ToolSpec, Turn};

/// Retries after the first attempt.
pub(crate) const MAX_RETRIES: u32 = 4;
/// The first backoff.
pub(crate) const RETRY_BASE: Duration = Duration::from_millis(500);
/// The longest computed backoff.
pub(crate) const RETRY_CAP: Duration = Duration::from_secs(30);
/// The longest `retry-after` honoured.
pub(crate) const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// A question for the operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// The question.
    pub question: String,
    /// Choices offered, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// What a tool call came to.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolOutcome {
    /// Text for the model.
    Output(String),
    /// Text and an image for the model (`read_image`).
    Image(String, crate::wire::Image),
    /// An error for the model (the loop goes on).
    Error(String),
    /// `ask_user` without an answer at hand: the loop pauses.
    Ask(Question),
    /// The host can run no more tools (the runner channel broke): the loop fails.
    Fatal(String),
}

/// Runs tool calls for the loop.
#[async_trait]
pub trait ToolHost: Send + Sync {
    /// Runs one call.
    async fn call(&self, call: &ToolCall) -> ToolOutcome;
}

/// Receives the loop's progress notes (`llm_request`, `llm_step_finished`, `tool_started`,
/// `tool_called`, `llm_retry`; SANDBOX.md §13.1) and its transcript: each model turn and each
/// tool call, as they end.
pub trait LoopObserver: Send + Sync {
    /// One note.
    fn note(&self, kind: &'static str, payload: Value);

    /// The model answered (the engine records it as `agent_turn`).
    fn turn(&self, _turn: &TurnRecord) {}

    /// A tool call ended (the engine records it as `agent_tool_call`).
    fn tool_call(&self, _call: &ToolCallRecord) {}
}

/// The most bytes of a tool call's input or result a [`ToolCallRecord`] carries. The engine
/// redacts, then cuts again to the event's own bound; this one only keeps the runner channel's
/// lines small.
pub const RECORD_TEXT_MAX: usize = 64 * 1024;

/// One model turn of the transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// 1 for the loop's first answer.
    pub turn: u32,
    /// The model, without its provider.
    pub model: String,
    /// Why the model stopped, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Input tokens of this turn.
    pub input_tokens: u64,
    /// Output tokens of this turn.
    pub output_tokens: u64,
}

/// One tool call of the transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The turn whose answer asked for it.
    pub turn: u32,
    /// The tool's name as the model spelled it.
    pub tool: String,
    /// The call's input as JSON text, at most [`RECORD_TEXT_MAX`] bytes.
    pub input: String,
    /// What the model got back, at most [`RECORD_TEXT_MAX`] bytes.
    pub result: String,
    /// Whether that was an error.
    pub is_error: bool,
    /// `bash`'s exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// How long the call took.
    pub duration_ms: u64,
}

impl ToolCallRecord {
    fn of(turn: u32, call: &ToolCall, result: &str, is_error: bool, took: Duration) -> Self {
        let input = serde_json::to_string(&call.input).unwrap_or_default();
        // `bash` answers "exit code: N\n…" (`LocalTools::bash`); the first line is ours.
        let exit_code = (call.name == "bash")
            .then(|| result.strip_prefix("exit code: "))
            .flatten()
            .and_then(|rest| rest.split('\n').next())
            .and_then(|code| code.trim().parse().ok());
        ToolCallRecord {
            turn,
            tool: crate::text::truncate_bytes(&call.name, 256).to_owned(),
            input: crate::text::truncate_bytes(&input, RECORD_TEXT_MAX).to_owned(),
            result: crate::text::truncate_bytes(result, RECORD_TEXT_MAX).to_owned(),
            is_error,
            exit_code,
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Where the loop stood when it paused on `ask_user`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The conversation, the answer holding the calls included.
    pub conversation: Conversation,
    /// Results of that answer's calls that already ran.
    pub done: Vec<ToolResult>,
    /// The `ask_user` call waiting for the operator.
    pub pending: ToolCall,
    /// The calls after it, still to run.
    pub rest: Vec<ToolCall>,
    /// Answers that called tools so far.
    pub steps: u32,
    /// Tokens so far.
    pub usage: Usage,
}

/// Everything one loop needs.
#[derive(Clone, Debug)]
pub struct LoopSpec {
    /// The provider, its base URL and key (a gateway placeholder in the runner).
    pub endpoint: Endpoint,
    /// The model, without its provider.
    pub model: String,
    /// The system prompt, rendered.
    pub system: Option<String>,
    /// The user prompt, rendered.
    pub prompt: String,
    /// The advertised tools.
    pub tools: Vec<ToolSpec>,
    /// `tool_max_steps`: answers that may call tools before tools are withdrawn.
    pub max_turns: u32,
    /// The output schema, by name.
    pub output: Option<(String, Schema)>,
    /// `max_tokens` and `reasoning_effort`, on every request.
    pub generation: wire::Generation,
    /// The tool-permission gate: every call is decided before it reaches the host.
    pub tool_gate: Option<iterion_dsl::permission::Permission>,
}

/// How a loop ended well.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopEnd {
    /// The output, and the tokens used.
    Done {
        /// The node's output.
        output: Value,
        /// The tokens used.
        usage: Usage,
    },
    /// Waiting for the operator.
    Paused {
        /// The pending `ask_user`.
        question: Question,
        /// Where the loop stood, to resume from.
        snapshot: Box<Snapshot>,
    },
}

/// How a loop failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    /// A model or transport error (`EXECUTION_FAILED`).
    #[error("{0}")]
    Model(String),
    /// The final answer did not conform, twice (`SCHEMA_VALIDATION`).
    #[error("{0}")]
    Schema(String),
}

/// Runs the loop from the prompt, or from `resume` with the operator's `answer`.
pub async fn run_loop(
    spec: &LoopSpec,
    client: &HttpClient,
    host: &dyn ToolHost,
    observer: &dyn LoopObserver,
    resume: Option<(Snapshot, String)>,
) -> Result<LoopEnd, LoopError> {
    let mut usage = Usage {
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: None,
    };
    let mut steps = 0u32;
    let mut turn_no = 0u32;
    let mut conversation;
    let mut pending_calls: Option<(Vec<ToolResult>, Vec<ToolCall>)> = None;
    match resume {
        Some((snap, answer)) => {
            conversation = snap.conversation;
            usage = snap.usage;
            steps = snap.steps;
            turn_no = snap.steps;
            let mut done = snap.done;
            done.push(ToolResult {
                id: snap.pending.id,
                content: answer,
                is_error: false,
                image: None,
            });
            pending_calls = Some((done, snap.rest));
        }
        None => {
            conversation = Conversation {
                system: spec.system.clone(),
                messages: vec![Message::User {
                    text: spec.prompt.clone(),
                }],
            };
        }
    }
    loop {
        if let Some((mut results, calls)) = pending_calls.take() {
            let mut queue = calls.into_iter();
            while let Some(call) = queue.next() {
                observer.note("tool_started", json!({"name": call.name, "id": call.id}));
                let started = std::time::Instant::now();
                let gate = spec
                    .tool_gate
                    .as_ref()
                    .map(|g| g.decide(&call.name, &call.input));
                let outcome = match gate {
                    Some(iterion_dsl::permission::Decision::Deny(why)) => {
                        observer.note(
                            "tool_denied",
                            json!({"name": call.name, "id": call.id, "reason": why}),
                        );
                        ToolOutcome::Error(why)
                    }
                    _ => host.call(&call).await,
                };
                let (content, is_error, image) = match outcome {
                    ToolOutcome::Output(text) => (text, false, None),
                    ToolOutcome::Image(text, image) => (text, false, Some(image)),
                    ToolOutcome::Error(text) => (text, true, None),
                    ToolOutcome::Fatal(reason) => return Err(LoopError::Model(reason)),
                    ToolOutcome::Ask(question) => {
                        return Ok(LoopEnd::Paused {
                            question,
                            snapshot: Box::new(Snapshot {
                                conversation,
                                done: results,
                                pending: call,
                                rest: queue.collect(),
                                steps,
                                usage,
                            }),
                        });
                    }
                };
                observer.note(
                    "tool_called",
                    json!({"name": call.name, "id": call.id, "is_error": is_error}),
                );
                observer.tool_call(&ToolCallRecord::of(
                    turn_no,
                    &call,
                    &content,
                    is_error,
                    started.elapsed(),
                ));
                results.push(ToolResult {
                    id: call.id,
                    content,
                    is_error,
                    image,
                });
            }
            conversation.messages.push(Message::Tools { results });
        }
        let choice = if steps < spec.max_turns {
            ToolChoice::Auto
        } else {
            ToolChoice::None
        };
        let turn = call_model(spec, client, observer, &conversation, choice).await?;
        turn_no += 1;
        observer.turn(&TurnRecord::of(turn_no, spec, &turn));
        add(&mut usage, turn.usage);
        let calls = if choice == ToolChoice::Auto {
            turn.calls.clone()
        } else {
            Vec::new()
        };
        conversation.messages.push(Message::Assistant {
            text: turn.text.clone(),
            calls: calls.clone(),
        });
        if calls.is_empty() {
            let output = finish(
                spec,
                client,
                observer,
                &mut conversation,
                (&turn, turn_no),
                &mut usage,
            )
            .await?;
            return Ok(LoopEnd::Done { output, usage });
        }
        steps += 1;
        pending_calls = Some((Vec::new(), calls));
    }
}

impl TurnRecord {
    fn of(turn: u32, spec: &LoopSpec, answer: &Turn) -> Self {
        TurnRecord {
            turn,
            model: spec.model.clone(),
            stop_reason: answer.stop_reason.clone(),
            input_tokens: answer.usage.input_tokens,
            output_tokens: answer.usage.output_tokens,
        }
    }
}

fn add(total: &mut Usage, more: Usage) {
    total.input_tokens = total.input_tokens.saturating_add(more.input_tokens);
    total.output_tokens = total.output_tokens.saturating_add(more.output_tokens);
}

/// The output of the final answer, with one correction request when it does not conform.
async fn finish(
    spec: &LoopSpec,
    client: &HttpClient,
    observer: &dyn LoopObserver,
    conversation: &mut Conversation,
    (turn, turn_no): (&Turn, u32),
    usage: &mut Usage,
) -> Result<Value, LoopError> {
    let Some((name, schema)) = &spec.output else {
        return Ok(json!({"text": turn.text}));
    };
    let violation = match conforming(schema, &turn.text) {
        Ok(value) => return Ok(value),
        Err(violation) => violation,
    };
    let fields: Vec<String> = schema
        .fields
        .iter()
        .map(|f| format!("{}: {}", f.name, f.ty.as_str()))
        .collect();
    conversation.messages.push(Message::User {
        text: format!(
            "Your answer does not conform to the output schema \"{name}\": {violation}. Answer again with only a JSON object with the fields {}.",
            fields.join(", ")
        ),
    });
    let retry = call_model(spec, client, observer, conversation, ToolChoice::None).await?;
    observer.turn(&TurnRecord::of(turn_no + 1, spec, &retry));
    add(usage, retry.usage);
    conversation.messages.push(Message::Assistant {
        text: retry.text.clone(),
        calls: Vec::new(),
    });
    conforming(schema, &retry.text).map_err(|violation| {
        LoopError::Schema(format!(
            "the final answer does not conform to schema \"{name}\" after one correction: {violation}"
        ))
    })
}

/// Why an answer does not give the node's output.
#[derive(Debug, thiserror::Error)]
pub enum Nonconforming {
    /// No JSON object in the text.
    #[error("the answer holds no JSON object")]
    NoObject,
    /// An object that breaks the schema.
    #[error(transparent)]
    Schema(#[from] crate::schema::Violation),
}

/// The JSON object in an answer (the whole text, a fenced block, or the outermost braces),
/// checked against the schema.
pub fn conforming(schema: &Schema, text: &str) -> Result<Value, Nonconforming> {
    let trimmed = text.trim();
    let fenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|t| t.trim_end().strip_suffix("```"))
        .map(str::trim);
    let braces = match (trimmed.find('{'), trimmed.rfind('}')) {
        (Some(a), Some(b)) if a < b => Some(&trimmed[a..=b]),
        _ => None,
    };
    let value = [Some(trimmed), fenced, braces]
        .into_iter()
        .flatten()
        .find_map(|t| {
            serde_json::from_str::<Value>(t)
                .ok()
                .filter(Value::is_object)
        })
        .ok_or(Nonconforming::NoObject)?;
    Ok(crate::schema::conform(schema, value)?)
}

/// One model request, with retries.
async fn call_model(
    spec: &LoopSpec,
    client: &HttpClient,
    observer: &dyn LoopObserver,
    conversation: &Conversation,
    choice: ToolChoice,
) -> Result<Turn, LoopError> {
    let provider = spec.endpoint.provider;
    let (path, body) = wire::encode(
        provider,
        &spec.model,
        conversation,
        &spec.tools,
        choice,
        &spec.generation,
    );
    let url = format!("{}{path}", spec.endpoint.base_url);
    let mut headers = wire::auth_headers(provider, &spec.endpoint.api_key);
    if provider.is_messages_api() && spec.generation.reasoning_effort.is_some() {
        headers.push(("anthropic-beta", wire::EFFORT_BETA.to_owned()));
    }
    let headers: Vec<(&str, String)> = headers.into_iter().collect();
    let body = serde_json::to_vec(&body).map_err(|e| LoopError::Model(e.to_string()))?;
    let mut attempt = 0u32;
    loop {
        observer.note(
            "llm_request",
            json!({"model": spec.model, "provider": provider.as_str(), "attempt": attempt + 1}),
        );
        let result = client.post_json(&url, &headers, body.clone()).await;
        let (retry_after, why) = match result {
            Ok(r) if (200..300).contains(&r.status) => {
                let turn = wire::decode(provider, &r.body).map_err(|e| {
                    LoopError::Model(format!(
                        "{} answered with an unreadable body: {e}",
                        provider.as_str()
                    ))
                })?;
                observer.note(
                    "llm_step_finished",
                    json!({"tool_calls": turn.calls.len(), "input_tokens": turn.usage.input_tokens, "output_tokens": turn.usage.output_tokens}),
                );
                return Ok(turn);
            }
            Ok(r) if r.status == 429 || r.status >= 500 => {
                (r.retry_after, format!("HTTP {}", r.status))
            }
            Ok(r) => {
                let text = String::from_utf8_lossy(&r.body);
                return Err(LoopError::Model(format!(
                    "{} answered HTTP {}: {}",
                    provider.as_str(),
                    r.status,
                    crate::text::truncate_bytes(text.trim(), 1024)
                )));
            }
            Err(e) if e.is_transient() => (None, e.to_string()),
            Err(e) => return Err(model_error(provider.as_str(), &e)),
        };
        if attempt >= MAX_RETRIES {
            return Err(LoopError::Model(format!(
                "{} failed after {} attempts: {why}",
                provider.as_str(),
                attempt + 1
            )));
        }
        let delay = match retry_after {
            Some(d) => d.min(RETRY_AFTER_CAP),
            None => RETRY_BASE
                .saturating_mul(2u32.saturating_pow(attempt))
                .min(RETRY_CAP),
        };
        observer.note(
            "llm_retry",
            json!({"attempt": attempt + 1, "reason": why, "delay_ms": u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)}),
        );
        tokio::time::sleep(delay).await;
        attempt += 1;
    }
}

fn model_error(provider: &str, e: &HttpError) -> LoopError {
    LoopError::Model(format!("{provider}: {e}"))
}

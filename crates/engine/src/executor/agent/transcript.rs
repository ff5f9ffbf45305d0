//! The claw transcript as events (issue 19): each model turn an `agent_turn`, each tool call an
//! `agent_tool_call`, whether the loop runs in this process or in the container's runner.
//!
//! The loop reports [`TurnRecord`]s and [`ToolCallRecord`]s; [`turn_event`] and
//! [`tool_call_event`] turn them into the events, naming the node and the backend themselves,
//! redacting the texts *before* cutting them to [`TRANSCRIPT_TEXT_MAX`] (a secret cut in two
//! would no longer match the redactor). A record from the runner is the container's word:
//! [`from_runner`] decodes it strictly and treats it the same way.
//!
//! The loop's observer is synchronous and event sinks are not, so in this process a
//! [`Transcript`] hands the events to a task that emits them in order; [`Transcript::finish`]
//! waits until all are recorded, before the node's own end is.

use std::sync::Arc;

use iterion_agent::session::{ToolCallRecord, TurnRecord};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::records::agent_events::{AgentToolCall, AgentTurn, bound_transcript_text};
use crate::records::events::Event;
use crate::records::secrets::Redactor;
use crate::records::sink::EventSink;

#[cfg(doc)]
use crate::records::agent_events::TRANSCRIPT_TEXT_MAX;

/// The backend name the claw loop's events carry.
pub(crate) const CLAW: &str = "claw";

/// `agent_turn` for `record` of node `node`.
pub(crate) fn turn_event(node: &str, record: &TurnRecord, redactor: &Redactor) -> Event {
    Event::AgentTurn(AgentTurn {
        node: node.to_owned(),
        backend: CLAW.to_owned(),
        turn: record.turn,
        model: Some(bound_transcript_text(&redactor.redact(&record.model))),
        stop_reason: record
            .stop_reason
            .as_deref()
            .map(|s| bound_transcript_text(&redactor.redact(s))),
        input_tokens: Some(record.input_tokens),
        output_tokens: Some(record.output_tokens),
    })
}

/// `agent_tool_call` for `record` of node `node`: input and result redacted, then bounded.
pub(crate) fn tool_call_event(node: &str, record: &ToolCallRecord, redactor: &Redactor) -> Event {
    Event::AgentToolCall(AgentToolCall {
        node: node.to_owned(),
        backend: CLAW.to_owned(),
        turn: record.turn,
        tool: bound_transcript_text(&redactor.redact(&record.tool)),
        input: bound_transcript_text(&redactor.redact(&record.input)),
        result: Some(bound_transcript_text(&redactor.redact(&record.result))),
        is_error: record.is_error,
        exit_code: record.exit_code,
        duration_ms: Some(record.duration_ms),
    })
}

/// The event a runner's `transcript` envelope stands for, or `None` when it is not one the
/// engine knows (ignored, like an unknown envelope).
pub(crate) fn from_runner(node: &str, data: &Value, redactor: &Redactor) -> Option<Event> {
    let record = data.get("record")?.clone();
    match data.get("type").and_then(Value::as_str)? {
        "agent_turn" => serde_json::from_value::<TurnRecord>(record)
            .ok()
            .map(|r| turn_event(node, &r, redactor)),
        "agent_tool_call" => serde_json::from_value::<ToolCallRecord>(record)
            .ok()
            .map(|r| tool_call_event(node, &r, redactor)),
        _ => None,
    }
}

/// Emits the in-process loop's transcript events in order (see the module doc).
pub(crate) struct Transcript {
    tx: mpsc::UnboundedSender<Event>,
    task: JoinHandle<()>,
}

impl Transcript {
    /// A transcript emitting into `events`.
    pub(crate) fn start(events: Arc<dyn EventSink>) -> Transcript {
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        let task = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                events.emit(event).await;
            }
        });
        Transcript { tx, task }
    }

    /// Queues one event.
    pub(crate) fn emit(&self, event: Event) {
        // The task lives until `finish`.
        let _ = self.tx.send(event);
    }

    /// Waits until every queued event is recorded.
    pub(crate) async fn finish(self) {
        let Transcript { tx, task } = self;
        drop(tx);
        if let Err(error) = task.await {
            tracing::warn!("agent transcript writer stopped: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::agent_events::TRANSCRIPT_TEXT_MAX;
    use crate::records::secrets::ResolvedSecret;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn redactor() -> Redactor {
        Redactor::new(&[ResolvedSecret::new("TOKEN", "s3cr3t-value-123")])
    }

    #[test]
    fn a_tool_call_is_redacted_before_it_is_bounded() {
        // The secret straddles the cut: redacting after cutting would leave its head.
        let pad = "x".repeat(TRANSCRIPT_TEXT_MAX - 4);
        let record = ToolCallRecord {
            turn: 2,
            tool: "bash".into(),
            input: r#"{"command":"echo s3cr3t-value-123"}"#.into(),
            result: format!("{pad}s3cr3t-value-123"),
            is_error: false,
            exit_code: Some(0),
            duration_ms: 5,
        };
        let Event::AgentToolCall(call) = tool_call_event("fix", &record, &redactor()) else {
            panic!("not a tool call");
        };
        assert!(!call.input.contains("s3cr3t"), "{}", call.input);
        let result = call.result.unwrap();
        assert!(!result.contains("s3cr"), "{}", &result[result.len() - 40..]);
        assert!(result.len() <= TRANSCRIPT_TEXT_MAX + 32);
        assert_eq!(
            (call.node, call.backend, call.turn),
            ("fix".into(), "claw".into(), 2)
        );
    }

    #[test]
    fn a_runner_record_is_decoded_strictly_and_named_by_the_engine() {
        let r = redactor();
        let turn = json!({"type": "agent_turn", "record": {
            "turn": 1, "model": "m", "stop_reason": "tool_use", "input_tokens": 3, "output_tokens": 4,
            "node": "forged"}});
        let Some(Event::AgentTurn(t)) = from_runner("fix", &turn, &r) else {
            panic!("no turn");
        };
        assert_eq!(
            (t.node.as_str(), t.stop_reason.as_deref(), t.output_tokens),
            ("fix", Some("tool_use"), Some(4))
        );
        let bad = json!({"type": "agent_tool_call", "record": {"turn": "one"}});
        assert_eq!(from_runner("fix", &bad, &r), None);
        let unknown = json!({"type": "node_finished", "record": {}});
        assert_eq!(from_runner("fix", &unknown, &r), None);
    }
}

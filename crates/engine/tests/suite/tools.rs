//! Tool nodes (§6.1), the agent refusal, secrets and the run log.

use iterion_engine::{
    Event, FailureCode, LogLine, LogStream, NodeFailed, NodeKindLabel, OutcomeStatus,
    ResolvedSecret,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;

fn one_tool(command: &str, extra: &str) -> String {
    format!("{extra}tool t:\n  command: `{command}`\nworkflow w:\n  entry: t\n  t -> done\n")
}

#[tokio::test]
async fn a_non_zero_exit_fails_with_its_status_and_stderr_tail() {
    let (ran, _host) = run_src(&one_tool("echo partial; echo oops >&2; exit 3", "")).await;
    assert_eq!(
        ran.events,
        vec![
            tool("t"),
            Event::NodeFailed(NodeFailed {
                node: "t".into(),
                code: FailureCode::ExecutionFailed,
                message: "command exited with status 3".into(),
                exit_code: Some(3),
                stderr_tail: Some("oops\n".into()),
                declared_code: None,
            }),
        ]
    );
    let o = &ran.report.outcome;
    assert_eq!(
        (o.status, o.failure_code, o.message.as_deref()),
        (
            OutcomeStatus::FailedResumable,
            Some(FailureCode::ExecutionFailed),
            Some(
                "node \"t\": command exited with status 3\n--- stderr (tail) ---\noops\n\n--- stdout (tail) ---\npartial\n"
            )
        )
    );
}

#[tokio::test]
async fn stdout_that_is_not_a_json_object_becomes_result() {
    for (command, want) in [
        ("echo '  plain text  '", json!({"result": "plain text"})),
        ("echo '[1, 2]'", json!({"result": "[1, 2]"})),
        ("echo '{\"broken\": '", json!({"result": "{\"broken\":"})),
        ("true", json!({"result": ""})),
        ("printf ' {\"k\": [1]} '", json!({"k": [1]})),
    ] {
        let (ran, _host) = run_src(&one_tool(command, "")).await;
        assert_eq!(ran.report.outcome.final_output, Some(want), "{command}");
    }
}

#[tokio::test]
async fn an_output_that_does_not_conform_fails_schema_validation() {
    let (ran, _host) = run_src(
        &one_tool(
            r#"echo '{"message": 1, "extra": true}'"#,
            "schema greeting:\n  message: string\n",
        )
        .replace("  command:", "  output: greeting\n  command:"),
    )
    .await;
    let message = "the output does not conform to schema \"greeting\": field \"message\" must be string, found number";
    assert_eq!(
        ran.events,
        vec![
            tool("t"),
            failed("t", FailureCode::SchemaValidation, message),
        ]
    );
    assert_eq!(
        (
            ran.report.outcome.status,
            ran.report.checkpoint.next.map(|n| n.node)
        ),
        (OutcomeStatus::FailedResumable, Some("t".to_owned()))
    );
}

#[tokio::test]
async fn conforming_output_is_normalised() {
    let (ran, _host) = run_src(
        &one_tool(r#"echo '{"n": 2.0}'"#, "schema s:\n  n: int\n")
            .replace("  command:", "  output: s\n  command:"),
    )
    .await;
    assert_eq!(ran.report.outcome.final_output, Some(json!({"n": 2})));
}

#[tokio::test]
async fn an_unresolved_reference_fails_before_anything_runs() {
    let (ran, host) = run_src(&one_tool("touch ran; echo {{input.nope}}", "")).await;
    assert_eq!(
        ran.events,
        vec![
            tool("t"),
            failed(
                "t",
                FailureCode::TemplateUnresolved,
                "reference {{input.nope}} cannot be resolved"
            ),
        ]
    );
    assert_eq!(ran.report.outcome.status, OutcomeStatus::Failed);
    assert!(!host.file("ran").exists(), "nothing executed");
}

#[tokio::test]
async fn stdout_over_16_mib_fails_the_node() {
    let (ran, _host) = run_src(&one_tool("head -c 17000000 /dev/zero", "")).await;
    assert_eq!(
        ran.events,
        vec![
            tool("t"),
            failed(
                "t",
                FailureCode::ExecutionFailed,
                "stdout went over the 16 MiB limit"
            ),
        ]
    );
}

#[tokio::test]
async fn stdout_at_the_cap_is_accepted() {
    let (ran, _host) = run_src(&one_tool("head -c 16777216 /dev/zero | tr '\\0' a", "")).await;
    assert_eq!(ran.report.outcome.status, OutcomeStatus::Finished);
    // The event keeps a clamped preview; the outcome keeps the whole output.
    let Some(Event::NodeFinished(f)) = ran.events.get(1) else {
        panic!("{:?}", ran.events.get(1));
    };
    let preview = f.output.as_str().unwrap_or_default();
    assert_eq!(
        (
            preview.len() < 70 * 1024,
            preview.ends_with("… [truncated: 16777229 bytes of compact JSON]")
        ),
        (true, true)
    );
}

#[tokio::test]
async fn agent_nodes_without_an_agent_environment_are_refused_at_dispatch() {
    let (ran, _host) = run_src(
        "agent writer:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"write\"\nworkflow w:\n  entry: writer\n  writer -> done\n",
    )
    .await;
    let message = "agent node \"writer\" cannot run: this execution has no agent environment";
    assert_eq!(
        ran.events,
        vec![
            started("writer", NodeKindLabel::Agent, 1),
            failed("writer", FailureCode::CapabilityUnsupported, message),
        ]
    );
    assert_eq!(
        (ran.report.outcome.status, ran.report.outcome.failure_code),
        (
            OutcomeStatus::Failed,
            Some(FailureCode::CapabilityUnsupported)
        )
    );
}

#[tokio::test]
async fn secrets_render_as_placeholders_and_real_values_are_redacted() {
    let src = r#"
secrets:
  API: "${ITERION_TEST_API}"
  KEY:
    as: file
tool t:
  command: `echo {{secrets.API}} {{secrets.KEY.path}}; echo "leaked hunter22" >&2; printf '{"seen": "%s"}' "hunter22"`
workflow w:
  entry: t
  t -> done
"#;
    let wf = workflow(src);
    let host = Host::new().await;
    let ran = run_with(&wf, &host, |e| {
        e.secrets(vec![ResolvedSecret::new("API", "hunter22")])
    })
    .await;
    assert_eq!(
        ran.events,
        vec![
            tool("t"),
            finished(
                "t",
                json!({"result": "__ITERION_SECRET_API__ /run/iterion/secrets/KEY\n{\"seen\": \"[REDACTED:API]\"}"})
            ),
            edge("t", "done"),
        ]
    );
    let line = |stream, text: &str| LogLine {
        node: "t".into(),
        stream,
        text: text.into(),
    };
    let mut logs = ran.logs.clone();
    logs.sort_by_key(|l| l.stream.as_str());
    assert_eq!(
        logs,
        vec![
            line(LogStream::Stderr, "leaked [REDACTED:API]"),
            line(
                LogStream::Stdout,
                "__ITERION_SECRET_API__ /run/iterion/secrets/KEY"
            ),
            line(LogStream::Stdout, "{\"seen\": \"[REDACTED:API]\"}"),
            line(
                LogStream::System,
                "$ echo '__ITERION_SECRET_API__' '/run/iterion/secrets/KEY'; echo \"leaked [REDACTED:API]\" >&2; printf '{\"seen\": \"%s\"}' \"[REDACTED:API]\""
            ),
        ]
    );
    assert_eq!(
        ran.report.outcome.outputs["t"]["result"]
            .as_str()
            .map(|s| s.contains("hunter22")),
        Some(false)
    );
}

#[tokio::test]
async fn a_failure_never_records_a_secret_value() {
    let wf = workflow(&one_tool(
        "echo token=hunter22; echo hunter22 is wrong >&2; exit 1",
        "",
    ));
    let host = Host::new().await;
    let ran = run_with(&wf, &host, |e| {
        e.secrets(vec![ResolvedSecret::new("API", "hunter22")])
    })
    .await;
    assert_eq!(
        ran.events[1],
        Event::NodeFailed(NodeFailed {
            node: "t".into(),
            code: FailureCode::ExecutionFailed,
            message: "command exited with status 1".into(),
            exit_code: Some(1),
            stderr_tail: Some("[REDACTED:API] is wrong\n".into()),
            declared_code: None,
        })
    );
    assert_eq!(
        ran.report.outcome.message.as_deref(),
        Some(
            "node \"t\": command exited with status 1\n--- stderr (tail) ---\n[REDACTED:API] is wrong\n\n--- stdout (tail) ---\ntoken=[REDACTED:API]\n"
        )
    );
}

#[tokio::test]
async fn an_expression_that_is_not_a_bool_is_a_condition_error() {
    let (ran, _host) = run_src(
        "tool a:\n  command: `echo '{\"n\": 1}'`\nworkflow w:\n  entry: a\n  a -> fail when \"n\"\n  a -> done\n",
    )
    .await;
    assert_eq!(
        ran.events[2..],
        [
            Event::EdgeConditionError(iterion_engine::EdgeConditionError {
                from: "a".into(),
                to: "fail".into(),
                condition: "n".into(),
                reason: "the condition is number, not bool".into(),
            }),
            edge("a", "done"),
        ]
    );
}

//! Attack test of issue 15 item 8: a tool node that prints a secret value plainly, base64-encoded
//! (at each alignment), as hex, reversed and upper-cased, in its output, its stderr and its
//! failure, leaves none of those forms in the SQLite record: not in the events, the run log, the
//! checkpoint, the failure message, nor anywhere in the database file.

use std::sync::Arc;

use base64::Engine as _;
use iterion_engine::{Engine, ResolvedSecret};
use iterion_store::{RunId, SqliteOptions, SqliteStore};

use super::support::*;

const VALUE: &str = "sv-Zq81LmX0pR7tK4wB";

/// Every form the tool prints, as the test computes it (independently of the redactor).
fn printed_forms() -> Vec<(String, String)> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let url = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    vec![
        ("plain".into(), VALUE.to_owned()),
        ("upper".into(), VALUE.to_ascii_uppercase()),
        ("reversed".into(), VALUE.chars().rev().collect()),
        (
            "hex".into(),
            VALUE.bytes().map(|b| format!("{b:02x}")).collect(),
        ),
        ("base64@0".into(), b64(VALUE)),
        ("base64@1".into(), b64(&format!("x{VALUE}"))),
        ("base64url@2".into(), url(&format!("xy{VALUE}"))),
        (
            "od hex".into(),
            VALUE.bytes().map(|b| format!(" {b:02x}")).collect(),
        ),
        ("first half".into(), VALUE[..10].to_owned()),
        ("second half".into(), VALUE[9..].to_owned()),
    ]
}

/// The forms of which a 10-character piece of the interior shows in `text` (any case).
fn leaks(text: &str) -> Vec<String> {
    let text = text.to_ascii_lowercase();
    printed_forms()
        .into_iter()
        .filter(|(_, form)| {
            let form = form.to_ascii_lowercase();
            let inner = &form.as_bytes()[2.min(form.len())..form.len().saturating_sub(2)];
            inner
                .windows(10.min(inner.len()))
                .any(|w| text.contains(std::str::from_utf8(w).unwrap()))
        })
        .map(|(name, _)| name)
        .collect()
}

#[tokio::test]
async fn a_node_printing_a_secret_in_any_encoding_leaves_no_form_of_it_in_the_store() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let store = sqlite_store(home.path()).await;
    let engine = Engine::new(Arc::clone(&store), home.path());
    let print = "v='VALUE'; printf '%s\\n' \"$v\"; printf '%s\\n' \"$v\" | tr a-z A-Z; \
         printf '%s' \"$v\" | base64; printf 'x%s' \"$v\" | base64; \
         printf 'xy%s' \"$v\" | base64 -w0 | tr '+/' '-_' | tr -d '='; echo; \
         printf '%s' \"$v\" | od -An -tx1 | tr -d ' \\n'; echo; printf '%s' \"$v\" | od -An -tx1; printf '%s\\n' \"$v\" | rev; \
         printf '%s\\n' \"$v\" | cut -c1-10; printf '%s\\n' \"$v\" | cut -c10-"
        .replace("VALUE", VALUE);
    let src = format!(
        "secrets:\n  KEY:\n    as: file\ntool show:\n  command: `{print}`\ntool oops:\n  command: `({print}) >&2; exit 1`\nworkflow w:\n  entry: show\n  show -> oops\n  oops -> done\n"
    );
    let wf = workflow(&src);
    let mut request = run_request(wf, ws.path(), "w.iter");
    request.secrets = vec![ResolvedSecret::new("KEY", VALUE)];
    let summary = run_to_end(&engine, request).await;
    assert!(summary.failure_code.is_some(), "{summary:?}");
    let id = RunId::parse(&summary.run_id).unwrap();
    let events = store.events(&id, 0).await.unwrap();
    let logs = store.logs(&id, 0).await.unwrap();
    let run = store.get_run(&id).await.unwrap().unwrap();
    let events_text =
        serde_json::to_string(&events.iter().map(|e| &e.data).collect::<Vec<_>>()).unwrap();
    // The node output the tools printed (node_logs) with the engine's own lines (run_logs).
    let output = store
        .node_logs(&id, &iterion_store::NodeLogQuery::default())
        .await
        .unwrap();
    assert!(!output.is_empty(), "the tools' output was stored");
    let logs_text = logs
        .iter()
        .map(|l| l.line.as_str())
        .chain(output.iter().map(|c| c.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    // The tool really printed every form (the record shows where each went, redacted).
    assert!(logs_text.contains("[REDACTED:KEY]"), "{logs_text}");
    assert!(
        events_text.contains("node_finished") || events.iter().any(|e| e.kind == "node_finished")
    );
    let mut failures = Vec::new();
    for (what, text) in [
        ("events", events_text),
        ("run log", logs_text),
        (
            "checkpoint",
            serde_json::to_string(&run.checkpoint).unwrap(),
        ),
        (
            "failure message",
            run.failure_message.clone().unwrap_or_default(),
        ),
        (
            "summary",
            format!("{:?} {:?}", summary.message, summary.output),
        ),
    ] {
        let found = leaks(&text);
        if !found.is_empty() {
            failures.push(format!("{what}: {found:?} in {text}"));
        }
    }
    assert_eq!(failures, Vec::<String>::new());
    // Nothing in the database files either (free pages, WAL).
    drop(engine);
    drop(store);
    let reopened = SqliteStore::open(home.path().join("iterion.db"), SqliteOptions::default())
        .await
        .unwrap();
    drop(reopened);
    for entry in std::fs::read_dir(home.path()).unwrap().flatten() {
        let path = entry.path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            let found = leaks(&String::from_utf8_lossy(&bytes));
            assert!(found.is_empty(), "{}: {found:?}", path.display());
        }
    }
}

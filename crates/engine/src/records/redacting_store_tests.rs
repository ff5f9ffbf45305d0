use base64::Engine as _;
use iterion_store::{RunStatus, SqliteOptions, SqliteStore};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::records::secrets::ResolvedSecret;

const VALUE: &str = "sv-9f8e7d6c5b4a-value";
const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn forms() -> Vec<String> {
    let rev: String = VALUE.chars().rev().collect();
    vec![
        VALUE.to_owned(),
        base64::engine::general_purpose::STANDARD.encode(format!("x{VALUE}")),
        VALUE.bytes().map(|b| format!("{b:02x}")).collect(),
        rev,
        format!("http://{}.nope.test/", VALUE.to_ascii_lowercase()),
        TOKEN.to_owned(),
        base64::engine::general_purpose::STANDARD.encode(format!("t:{TOKEN}")),
    ]
}

fn leaked(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for needle in [VALUE, &VALUE[..10], &VALUE[VALUE.len() - 10..], TOKEN] {
        let rev: String = needle.chars().rev().collect();
        let hex: String = needle.bytes().map(|b| format!("{b:02x}")).collect();
        for form in [needle.to_owned(), rev, hex] {
            if text
                .to_ascii_lowercase()
                .contains(&form.to_ascii_lowercase())
            {
                found.push(form);
            }
        }
    }
    found
}

#[tokio::test]
async fn every_write_is_redacted_in_every_form_and_reads_pass_through() {
    let inner: Arc<dyn Store> = Arc::new(
        SqliteStore::in_memory(SqliteOptions::default())
            .await
            .unwrap(),
    );
    let redactor = Arc::new(Redactor::new(&[ResolvedSecret::new("KEY", VALUE)]));
    let store = RedactingStore::wrap(Arc::clone(&inner), Arc::clone(&redactor));
    // The token is minted after the store is wrapped; it is redacted from then on.
    redactor.add_token(TOKEN);
    let all = forms().join(" | ");
    let mut new = NewRun::new("w", "sha256:0", "/w.iter");
    new.vars.insert("input".into(), json!(all));
    let run = store.create_run(new).await.unwrap();
    store
        .append_event(
            &run.id,
            NewEvent::new("network_blocked", json!({"host": all, "nested": [all]})),
        )
        .await
        .unwrap();
    store
        .append_events(
            &run.id,
            vec![NewEvent::new("node_finished", json!({ "output": all }))],
        )
        .await
        .unwrap();
    store
        .append_log(&run.id, LogStream::Stdout, all.clone())
        .await
        .unwrap();
    store
        .append_logs(
            &run.id,
            vec![NewLogLine::new(LogStream::Stderr, all.clone())],
        )
        .await
        .unwrap();
    let mut next = run.clone();
    next.status = RunStatus::Failed;
    next.failure_code = Some("EXECUTION_FAILED".into());
    next.failure_message = Some(all.clone());
    next.checkpoint = Some(json!({"outputs": {"n": all}, "placeholder": "__ITERION_SECRET_KEY__"}));
    store.save_run(&next, run.version).await.unwrap();

    let saved = inner.get_run(&run.id).await.unwrap().unwrap();
    let record = [
        serde_json::to_string(
            &inner
                .events(&run.id, 0)
                .await
                .unwrap()
                .iter()
                .map(|e| &e.data)
                .collect::<Vec<_>>(),
        )
        .unwrap(),
        inner
            .logs(&run.id, 0)
            .await
            .unwrap()
            .iter()
            .map(|l| l.line.clone())
            .collect::<Vec<_>>()
            .join("\n"),
        serde_json::to_string(&saved.checkpoint).unwrap(),
        saved.failure_message.clone().unwrap_or_default(),
        serde_json::to_string(&saved.vars).unwrap(),
    ]
    .join("\n");
    assert_eq!(leaked(&record), Vec::<String>::new(), "{record}");
    assert!(record.contains("[REDACTED:KEY]"), "{record}");
    assert!(record.contains("***"), "{record}");
    // What the engine keeps for itself stays.
    assert!(record.contains("__ITERION_SECRET_KEY__"));
    assert_eq!(store.get_run(&run.id).await.unwrap(), Some(saved));
}

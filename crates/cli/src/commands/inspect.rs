//! `iterion inspect [RUN_ID] [--json]`: the newest runs, or one run with its status, failure
//! code, admission and published artifacts.
use iterion_store::{Run, RunId, RunQuery};

use crate::args::InspectArgs;
use crate::commands::{Failure, open_store};
use crate::exit::Exit;

/// Runs the command.
pub async fn run(args: InspectArgs, env: &iterion_vocab::Environment) -> Exit {
    match inspect(args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

async fn inspect(args: InspectArgs, env: &iterion_vocab::Environment) -> Result<Exit, Failure> {
    let (_, store) = open_store(env).await?;
    let id: Option<RunId> = match &args.run_id {
        Some(text) => Some(crate::commands::runs::resolve(store.as_ref(), text).await?),
        None => None,
    };
    let Some(id) = id else {
        let runs = store
            .list_runs(&RunQuery::newest(50))
            .await
            .map_err(Failure::failed)?;
        if args.json {
            crate::output::outln!(
                "{}",
                serde_json::to_string(&runs).unwrap_or_else(|_| "[]".to_owned())
            );
        } else if runs.is_empty() {
            crate::output::outln!("no runs yet (`iterion run FILE` starts one)");
        } else {
            crate::output::outln!(
                "{:<36}  {:<16}  {:<24}  {:<24}  CODE",
                "RUN",
                "STATUS",
                "WORKFLOW",
                "CREATED"
            );
            for run in &runs {
                crate::output::outln!(
                    "{:<36}  {:<16}  {:<24}  {:<24}  {}",
                    run.id,
                    run.status.as_str(),
                    crate::terminal::terminal_safe(&run.workflow),
                    run.created_at.to_string(),
                    run.failure_code.as_deref().unwrap_or("-")
                );
            }
        }
        return Ok(Exit::Success);
    };
    let Some(run) = store.get_run(&id).await.map_err(Failure::failed)? else {
        return Err(Failure::failed(iterion_store::Error::RunNotFound {
            run_id: id,
        }));
    };
    let events = store.events(&id, 0).await.map_err(Failure::failed)?;
    let artifacts = artifacts(&events);
    if args.json {
        let mut doc = serde_json::to_value(&run).unwrap_or_default();
        if let Some(map) = doc.as_object_mut() {
            map.insert("artifacts".to_owned(), serde_json::Value::Array(artifacts));
        }
        crate::output::outln!("{doc}");
    } else {
        crate::output::out!("{}", human(&run, &artifacts));
    }
    Ok(Exit::Success)
}

/// The run's published artifacts (`artifact_published` events): the latest publication of each
/// name, in the order the names were first published, as `{name, node, version, value}`.
fn artifacts(events: &[iterion_store::Event]) -> Vec<serde_json::Value> {
    let mut out: Vec<serde_json::Value> = Vec::new();
    for e in events.iter().filter(|e| e.kind == "artifact_published") {
        let name = e.data.get("name").cloned().unwrap_or_default();
        match out.iter_mut().find(|a| a.get("name") == Some(&name)) {
            Some(slot) => *slot = e.data.clone(),
            None => out.push(e.data.clone()),
        }
    }
    out
}

/// The longest artifact value `inspect` prints in its human form (the JSON form has it whole).
const ARTIFACT_PREVIEW_CHARS: usize = 200;

fn human(run: &Run, artifacts: &[serde_json::Value]) -> String {
    let mut out = String::new();
    let mut line = |key: &str, value: &str| {
        out.push_str(&format!(
            "{key:<20} {}\n",
            crate::terminal::terminal_safe(value)
        ));
    };
    line("run", run.id.as_str());
    line("workflow", &run.workflow);
    line("file", &run.file_path.display().to_string());
    line("status", run.status.as_str());
    line("trust", run.trust.as_str());
    if let Some(code) = &run.failure_code {
        line("failure code", code);
    }
    if let Some(message) = &run.failure_message {
        line("failure", message);
    }
    match &run.admission {
        Some(a) => {
            line(
                "admission",
                &format!("{} ({}, {})", a.decision.as_str(), a.code, a.phase),
            );
            line("admission reason", &a.reason);
            line("admission checked", &a.checked_at.to_string());
        }
        None => line("admission", "not yet decided"),
    }
    if let Some(node) = &run.last_completed_node {
        line("last completed", node);
    }
    if let Some(path) = &run.worktree_path {
        line("worktree", &path.display().to_string());
    }
    line("created", &run.created_at.to_string());
    line("updated", &run.updated_at.to_string());
    if let Some(at) = &run.finished_at {
        line("finished", &at.to_string());
    }
    for a in artifacts {
        let text = |k: &str| match a.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        let value = a.get("value").map(ToString::to_string).unwrap_or_default();
        let mut preview: String = value.chars().take(ARTIFACT_PREVIEW_CHARS).collect();
        if value.chars().count() > ARTIFACT_PREVIEW_CHARS {
            preview.push('…');
        }
        line(
            "artifact",
            &format!(
                "{} (v{}, from {}): {preview}",
                text("name"),
                text("version"),
                text("node")
            ),
        );
    }
    out
}

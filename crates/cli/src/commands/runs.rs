//! `iterion ps` and `iterion rm`, and [`resolve`], how every command turns what a person typed
//! (`0190b4`, `last`, a whole id) into a run id.
use std::path::Path;

use iterion_store::{Run, RunId, RunQuery, RunStatus, Store};
use serde_json::json;

use crate::args::{PsArgs, RmArgs};
use crate::commands::{Failure, open_store};
use crate::exit::Exit;
use crate::output::outln;

/// The run `text` names, through [`iterion_store::resolve_run`] (the one resolution every
/// command uses). Text that cannot name a run is bad input (exit 2); a run the store does not
/// have, or an ambiguous prefix, fails (exit 1) with the candidates listed.
pub async fn resolve(store: &dyn Store, text: &str) -> Result<RunId, Failure> {
    iterion_store::resolve_run(store, text)
        .await
        .map_err(|error| match error {
            iterion_store::Error::InvalidRunRef { .. } => Failure::bad_input(error),
            other => Failure::failed(other),
        })
}

/// The statuses `ps` shows without `--all`: the runs that are not over.
const LIVE: [RunStatus; 3] = [RunStatus::Running, RunStatus::Paused, RunStatus::Queued];

/// Runs `iterion ps`.
pub async fn ps(args: PsArgs, env: &iterion_vocab::Environment) -> Exit {
    match list(&args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

async fn list(args: &PsArgs, env: &iterion_vocab::Environment) -> Result<Exit, Failure> {
    let (_, store) = open_store(env).await?;
    // A run whose process died is `running` until crash recovery notices its lapsed lease; ps
    // shows what is true (every `run` and `resume` recovers the same way).
    iterion_engine::recover_interrupted(store.as_ref()).await;
    let mut runs: Vec<Run> = if args.all {
        store
            .list_runs(&RunQuery::newest(args.limit))
            .await
            .map_err(Failure::failed)?
    } else {
        let mut live = Vec::new();
        for status in LIVE {
            live.extend(
                store
                    .list_runs(&RunQuery::newest(args.limit).status(status))
                    .await
                    .map_err(Failure::failed)?,
            );
        }
        live
    };
    runs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    runs.truncate(args.limit);
    if args.json {
        let rows: Vec<_> = runs.iter().map(row_json).collect();
        outln!("{}", serde_json::Value::Array(rows));
        return Ok(Exit::Success);
    }
    if runs.is_empty() {
        if args.all {
            outln!("no runs yet (`iterion run FILE` starts one)");
        } else {
            outln!("no run is running, paused or queued (`iterion ps --all` lists every run)");
        }
        return Ok(Exit::Success);
    }
    outln!(
        "{:<36}  {:<16}  {:<24}  {:<20}  CODE",
        "RUN",
        "STATUS",
        "WORKFLOW",
        "CREATED"
    );
    for run in &runs {
        let child = if run.parent_run_id.is_some() {
            "↳ "
        } else {
            ""
        };
        outln!(
            "{:<36}  {:<16}  {:<24}  {:<20}  {}",
            run.id,
            run.status.as_str(),
            crate::terminal::terminal_safe(&format!("{child}{}", run.workflow)),
            short_time(&run.created_at.to_string()),
            run.failure_code.as_deref().unwrap_or("-")
        );
    }
    Ok(Exit::Success)
}

/// `2026-11-01T09:30:00.000Z` → `2026-11-01 09:30:00`.
fn short_time(rfc3339: &str) -> String {
    rfc3339
        .get(..19)
        .map(|t| t.replace('T', " "))
        .unwrap_or_else(|| rfc3339.to_owned())
}

fn row_json(run: &Run) -> serde_json::Value {
    json!({
        "run_id": run.id.as_str(),
        "status": run.status.as_str(),
        "workflow": run.workflow,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "finished_at": run.finished_at,
        "failure_code": run.failure_code,
        "parent_run_id": run.parent_run_id,
    })
}

/// What removing one run did.
#[derive(Debug)]
pub struct Removed {
    /// The runs whose records went (the run first, then its children).
    pub runs: Vec<RunId>,
    /// The worktree the run kept, left in place (it holds the run's work).
    pub worktree: Option<std::path::PathBuf>,
}

/// Removes run `id` — its records (and its children's) in one store transaction, then its
/// `runs/<id>` dirs under `home` — or nothing when the store refuses (running, queued, leased).
///
/// Nothing is left half-removed: each dir is first renamed aside (`runs/.removing-<id>`, one
/// atomic step that cannot fail half-way), and put back when the store refuses; a dir that
/// cannot then be deleted is named in the error, and the next `rm` or `prune` finishes it.
pub async fn remove_run(store: &dyn Store, home: &Path, id: &RunId) -> Result<Removed, Failure> {
    let run = store
        .get_run(id)
        .await
        .map_err(Failure::failed)?
        .ok_or_else(|| Failure::failed(iterion_store::Error::RunNotFound { run_id: id.clone() }))?;
    // A queued or running root is refused before anything moves (the store checks again, and
    // checks the children, in its transaction).
    if matches!(run.status, RunStatus::Queued | RunStatus::Running) {
        return Err(Failure::failed(iterion_store::Error::RunActive {
            run_id: id.clone(),
            status: run.status,
        }));
    }
    let runs_dir = home.join("runs");
    let aside = park(&runs_dir, id)?;
    match store.delete_run(id).await {
        Ok(deleted) => {
            let mut leftover = Vec::new();
            for run_id in &deleted {
                // The children's dirs: parked and deleted one by one (their records are gone).
                let parked = if run_id == id {
                    aside.clone()
                } else {
                    match park(&runs_dir, run_id) {
                        Ok(parked) => parked,
                        Err(failure) => {
                            leftover.push(failure.message());
                            None
                        }
                    }
                };
                if let Some(dir) = parked
                    && let Err(error) = remove_dir(&dir)
                {
                    leftover.push(format!("{}: {error}", dir.display()));
                }
            }
            if !leftover.is_empty() {
                return Err(Failure::failed(anyhow::anyhow!(
                    "run {id}: the records are removed but not every run dir could be ({}); \
                     remove it by hand or run `iterion prune`",
                    leftover.join("; ")
                )));
            }
            Ok(Removed {
                runs: deleted,
                worktree: run.worktree_path,
            })
        }
        Err(error) => {
            if let Some(dir) = aside {
                let _ = std::fs::rename(&dir, runs_dir.join(id.as_str()));
            }
            Err(Failure::failed(error))
        }
    }
}

/// The name a run dir is parked under while its run is removed.
pub const PARKED_PREFIX: &str = ".removing-";

/// Renames `runs/<id>` to `runs/.removing-<id>`; `None` when there is no such dir. The id is a
/// validated UUID, so the name is never a path.
fn park(runs_dir: &Path, id: &RunId) -> Result<Option<std::path::PathBuf>, Failure> {
    let dir = runs_dir.join(id.as_str());
    match std::fs::symlink_metadata(&dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(Failure::failed(anyhow::anyhow!(
                "cannot read {}: {error}",
                dir.display()
            )));
        }
        Ok(_) => {}
    }
    let aside = runs_dir.join(format!("{PARKED_PREFIX}{}", id.as_str()));
    std::fs::rename(&dir, &aside).map_err(|error| {
        Failure::failed(anyhow::anyhow!(
            "cannot move {} aside to remove it: {error}; nothing was removed",
            dir.display()
        ))
    })?;
    Ok(Some(aside))
}

/// Deletes a parked run dir. Never follows a symlink a container planted inside it (std's
/// `remove_dir_all` unlinks links, it does not descend into them); staged mounts are detached
/// by the sandbox core's [`iterion_sandbox::remove_run_dir`].
fn remove_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(dir),
        Ok(_) => std::fs::remove_file(dir),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// Deletes the run dirs a removal left parked (`runs/.removing-*`) whose run is gone from the
/// store, returning their paths. A parked dir whose run is still there belongs to a removal in
/// progress (or one the store refused, about to put it back), and is left alone.
pub async fn sweep_parked(store: &dyn Store, home: &Path) -> Vec<std::path::PathBuf> {
    let mut swept = Vec::new();
    let Ok(entries) = std::fs::read_dir(home.join("runs")) else {
        return swept;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PARKED_PREFIX))
            .and_then(|id| RunId::parse(id).ok())
        else {
            continue;
        };
        if matches!(store.get_run(&id).await, Ok(None)) && remove_dir(&entry.path()).is_ok() {
            swept.push(entry.path());
        }
    }
    swept
}

/// Runs `iterion rm`.
pub async fn rm(args: RmArgs, env: &iterion_vocab::Environment) -> Exit {
    match remove(&args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

async fn remove(args: &RmArgs, env: &iterion_vocab::Environment) -> Result<Exit, Failure> {
    let (home, store) = open_store(env).await?;
    // A run whose process died is `running` until crash recovery notices its lapsed lease.
    iterion_engine::recover_interrupted(store.as_ref()).await;
    sweep_parked(store.as_ref(), &home).await;
    let mut removed = Vec::new();
    let mut refused = Vec::new();
    let mut exit = Exit::Success;
    for text in &args.runs {
        let outcome = match resolve(store.as_ref(), text).await {
            Ok(id) => remove_run(store.as_ref(), &home, &id).await,
            Err(failure) => Err(failure),
        };
        match outcome {
            Ok(done) => {
                if !args.json {
                    for run in &done.runs {
                        outln!("removed {run}");
                    }
                    if let Some(path) = &done.worktree {
                        outln!(
                            "  its worktree is kept at {} (`git worktree remove` it when its work is landed)",
                            path.display()
                        );
                    }
                }
                removed.push(json!({
                    "runs": done.runs,
                    "worktree_kept": done.worktree,
                }));
            }
            Err(failure) => {
                if failure.exit == Exit::BadInput || exit == Exit::Success {
                    exit = failure.exit;
                }
                let message = format!("{:#}", failure.error);
                refused.push(json!({"run": text, "code": failure.code(), "message": message}));
                if !args.json {
                    crate::output::errln!("error: {}", crate::terminal::terminal_safe(&message));
                }
            }
        }
    }
    if args.json {
        outln!("{}", json!({"removed": removed, "refused": refused}));
    }
    Ok(exit)
}

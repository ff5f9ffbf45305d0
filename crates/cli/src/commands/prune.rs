//! `iterion prune [--older-than 7d] [--dry-run] [--json]`: finished runs older than a bound go
//! (records, events, logs, `runs/<id>` dirs, like `iterion rm`), then whatever iterion made
//! locally that no run needs any more: containers, built images, `/nix` volumes whose image is
//! gone, per-run host dirs — the reaper's own pass, judged by the same predicate. `--dry-run`
//! asks the same questions, as if the runs were gone, and removes nothing.
use std::sync::Arc;

use iterion_sandbox::ResourceKind;
use iterion_store::{RunId, Timestamp};
use serde_json::json;

use crate::args::PruneArgs;
use crate::commands::runs::{remove_run, sweep_parked};
use crate::commands::{Failure, open_store};
use crate::exit::Exit;
use crate::output::outln;

/// At most this many runs per prune.
const MAX_RUNS: usize = 100_000;

/// Runs the command.
pub async fn run(args: PruneArgs, env: &iterion_vocab::Environment) -> Exit {
    let json = args.json;
    match prune(args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report_json(json, None),
    }
}

async fn prune(args: PruneArgs, env: &iterion_vocab::Environment) -> Result<Exit, Failure> {
    let (home, store) = open_store(env).await?;
    let now = Timestamp::now();
    let cutoff = Timestamp::from_millis(
        now.as_millis()
            .saturating_sub(i64::try_from(args.older_than.as_millis()).unwrap_or(i64::MAX)),
    );
    let old = store
        .runs_finished_before(cutoff, MAX_RUNS)
        .await
        .map_err(Failure::failed)?;
    let reapers = iterion_engine::local_reapers(env);
    let mut removed: Vec<RunId> = Vec::new();
    let mut refused = Vec::new();
    let report = if args.dry_run {
        // The children go with their roots: the reaper is told about every run of each tree.
        let every = store
            .list_runs(&iterion_store::RunQuery::newest(MAX_RUNS))
            .await
            .map_err(Failure::failed)?;
        let mut doomed: Vec<RunId> = Vec::new();
        for run in &old {
            doomed.push(run.id.clone());
            doomed.extend(descendants(&every, &run.id));
        }
        removed = doomed;
        iterion_engine::survey_local(Arc::clone(&store), &reapers, env, &removed).await
    } else {
        sweep_parked(store.as_ref(), &home).await;
        for run in &old {
            match remove_run(store.as_ref(), &home, &run.id).await {
                Ok(done) => removed.extend(done.runs),
                Err(failure) => refused.push(json!({
                    "run": run.id.as_str(),
                    "code": failure.code(),
                    "message": failure.message(),
                })),
            }
        }
        iterion_engine::reap_local(Arc::clone(&store), &reapers, env).await
    };
    let of = |kind: ResourceKind| -> Vec<&str> {
        report
            .deleted
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, id)| id.as_str())
            .collect()
    };
    let (containers, images, volumes, cgroups) = (
        of(ResourceKind::Container),
        of(ResourceKind::Image),
        of(ResourceKind::Volume),
        of(ResourceKind::Cgroup),
    );
    if args.json {
        outln!(
            "{}",
            json!({
                "dry_run": args.dry_run,
                "older_than_s": args.older_than.as_secs(),
                "runs": removed,
                "refused": refused,
                "containers": containers,
                "images": images,
                "volumes": volumes,
                "cgroups": cgroups,
                "run_dirs": report.run_dirs,
            })
        );
    } else {
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        for run in &removed {
            outln!("{verb} run {run}");
        }
        for (kind, list) in [
            ("container", &containers),
            ("image", &images),
            ("volume", &volumes),
            ("cgroup", &cgroups),
        ] {
            for id in list.iter() {
                outln!("{verb} {kind} {id}");
            }
        }
        for dir in &report.run_dirs {
            outln!("{verb} run dir {dir}");
        }
        for refusal in &refused {
            crate::output::errln!(
                "kept: {}",
                crate::terminal::terminal_safe(refusal["message"].as_str().unwrap_or_default())
            );
        }
        outln!(
            "{} {} run(s), {} container(s), {} image(s), {} volume(s), {} run dir(s){}",
            if args.dry_run {
                "would remove"
            } else {
                "removed"
            },
            removed.len(),
            containers.len(),
            images.len(),
            volumes.len(),
            report.run_dirs.len(),
            if args.dry_run {
                " (dry run: nothing was removed)"
            } else {
                ""
            }
        );
    }
    Ok(if refused.is_empty() {
        Exit::Success
    } else {
        Exit::Failed
    })
}

/// The runs of `runs` below `root` (children, theirs, …), for a dry run's accounting.
fn descendants(runs: &[iterion_store::Run], root: &RunId) -> Vec<RunId> {
    let mut found = vec![root.clone()];
    let mut grew = true;
    while grew {
        grew = false;
        for run in runs {
            if let Some(parent) = &run.parent_run_id
                && found.contains(parent)
                && !found.contains(&run.id)
            {
                found.push(run.id.clone());
                grew = true;
            }
        }
    }
    found.remove(0);
    found
}

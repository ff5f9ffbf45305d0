//! `fan_out_all` routers and their joins (DSL.md §5.6, run time).
//!
//! Every branch starts concurrently as a future of the current task, sharing the run's sandbox,
//! state and budget. A branch runs with the ordinary edge rule until it takes an edge into the
//! join (it *arrives*) or fails. Under `wait_all` the first failure cancels the fan-out's token:
//! the other branches' running commands are killed (their exec futures are dropped), and the
//! run fails with `JOIN_FAILED`. Under `best_effort` every branch runs to its end, and the join
//! runs if at least one arrived, with `_failed_branches` in its input.
//!
//! A branch edge with `when` starts its branch only when the condition holds on the router's
//! output; a skipped branch is no failure, and the join sees its keys as `null`. A join may be
//! a `fan_out_all` router itself (a chained fan-out): it waits for all branches, then fans out.
//!
//! A run-level stop (cancellation, budget) cancels the fan-out too, and then its own reason wins
//! over `JOIN_FAILED`.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use iterion_dsl::ir::{AwaitMode, Target};
use serde_json::{Map, Value, json};

use crate::executor::checkpoint::NextNode;
use crate::executor::ctx::{BranchCtx, Ctx, LineEnd};
use crate::executor::outcome::Failure;
use crate::executor::select;
use crate::records::events::{EdgeSelected, Event};
use iterion_vocab::FailureCode;

/// What a fan-out needs from the driver: a branch is a line of execution like the main one.
pub(crate) trait Lines: Sync {
    /// Runs the line of `branch` from `start` until it arrives at its join or ends otherwise.
    fn branch<'b>(&'b self, start: NextNode, branch: &'b BranchCtx) -> BoxFuture<'b, LineEnd>;
}

/// Runs the branches of fan-out router `router` (whose output is recorded), each a line run by
/// `lines`, and returns the join with its input.
pub(crate) async fn fan_out(
    ctx: &Ctx<'_>,
    router: &str,
    lines: &dyn Lines,
) -> Result<NextNode, Failure> {
    let (join, mode) = join_of(ctx, router)?;
    let token = ctx.stop.child_token();
    let mut branches = Vec::new();
    let mut starts = Vec::new();
    let mut immediate = Vec::new();
    for (index, edge) in ctx.wf.edges.iter().enumerate() {
        if edge.from != router {
            continue;
        }
        let Target::Node(first) = &edge.to else {
            continue;
        };
        // A branch whose `when` does not hold on the router's output (its input) is skipped;
        // the join sees its keys as `null`. A condition that fails to evaluate skips it too,
        // with its `edge_condition_error`.
        let holds = {
            let state = ctx.lock_state();
            let output = state.outputs.get(router).cloned().unwrap_or(Value::Null);
            select::holds(
                &select::WalkInput {
                    wf: ctx.wf,
                    graph: &ctx.graph,
                    state: &state,
                    vars: &ctx.vars,
                    run: ctx.run_scope(),
                },
                index,
                &output,
            )
        };
        match holds {
            Ok(true) => {}
            Ok(false) => continue,
            Err(reason) => {
                ctx.emit(select::condition_error(edge, reason)).await;
                continue;
            }
        }
        ctx.emit(Event::EdgeSelected(EdgeSelected {
            from: router.to_owned(),
            to: first.clone(),
            condition: None,
            loop_: None,
            iteration: None,
        }))
        .await;
        // An edge straight into the join: a branch with no node, arrived with its mapping.
        if first == join {
            let state = ctx.lock_state();
            let loops = crate::executor::input::loop_scope(&ctx.graph, &state, &ctx.vars);
            immediate.push(
                ctx.inputs()
                    .edge_mapping(&state, &loops, index)
                    .unwrap_or_default(),
            );
            continue;
        }
        let input = ctx
            .inputs()
            .node_input(&ctx.lock_state(), first, Some(index));
        branches.push(BranchCtx {
            first: first.clone(),
            join: join.to_owned(),
            token: token.clone(),
            item: None,
        });
        starts.push(NextNode {
            node: first.clone(),
            input,
        });
    }

    // `max_parallel_branches`: a branch waits for a slot before its first node starts; the
    // slot is freed when its line ends (fan-outs do not nest, C907, so one fan-out runs at a
    // time and its cap is the run's).
    let slots = ctx
        .budget
        .max_parallel_branches
        .map(|n| std::sync::Arc::new(tokio::sync::Semaphore::new(n.max(1) as usize)));
    let mut running: FuturesUnordered<_> = branches
        .iter()
        .zip(starts)
        .enumerate()
        .map(|(i, (branch, start))| {
            let slots = slots.clone();
            async move {
                let _slot = match &slots {
                    Some(s) => s.clone().acquire_owned().await.ok(),
                    None => None,
                };
                (i, lines.branch(start, branch).await)
            }
        })
        .collect();
    let mut ends: Vec<Option<LineEnd>> = branches.iter().map(|_| None).collect();
    let mut first_failed = None;
    while let Some((i, end)) = running.next().await {
        if !matches!(end, LineEnd::Arrived { .. }) && first_failed.is_none() {
            first_failed = Some(i);
            if mode == AwaitMode::WaitAll {
                token.cancel();
            }
        }
        if let Some(slot) = ends.get_mut(i) {
            *slot = Some(end);
        }
    }
    drop(running);
    if ctx.stop.is_cancelled() {
        return Err(ctx.stopped());
    }

    let settled = settle(ctx, join, mode, &branches, ends, first_failed, None)?;
    let mut arrivals = immediate;
    arrivals.extend(settled.arrivals.into_iter().flatten());
    let failed_branches = settled.failed_branches;
    Ok(NextNode {
        node: join.to_owned(),
        input: ctx.inputs().join_input(join, arrivals, failed_branches),
    })
}

/// The join of fan-out router `router` and how it waits (`wait_all` unless it says
/// `best_effort`).
pub(crate) fn join_of<'c>(ctx: &'c Ctx<'_>, router: &str) -> Result<(&'c str, AwaitMode), Failure> {
    let Some(join) = ctx.graph.join_of(router) else {
        return Err(Failure::new(
            FailureCode::JoinFailed,
            format!("fan-out router \"{router}\" has no join"),
        ));
    };
    let mode = ctx
        .wf
        .node(join)
        .and_then(|n| n.await_mode)
        .unwrap_or(AwaitMode::WaitAll);
    Ok((join, mode))
}

/// The branches' ends as a join takes them ([`settle`]).
pub(crate) struct Settled {
    /// Each branch's arrival mapping, in branch order; `None` when it did not arrive.
    pub arrivals: Vec<Option<Map<String, Value>>>,
    /// `_failed_branches`, under `best_effort`.
    pub failed_branches: Option<Vec<Value>>,
}

/// What a join makes of its branches' ends (DSL.md §5.6), for `fan_out_all` and `fan_out_each`
/// alike: each branch's arrival mapping (`None` when it did not arrive), and under
/// `best_effort` the `_failed_branches` list. Under `wait_all` the first failure (`first_failed`,
/// an index into `branches`) fails the fan-out with `JOIN_FAILED`; under `best_effort` only no
/// arrival at all does. A failure naming no node is placed at `default_node`, else at the
/// branch's first node.
pub(crate) fn settle(
    ctx: &Ctx<'_>,
    join: &str,
    mode: AwaitMode,
    branches: &[BranchCtx],
    ends: Vec<Option<LineEnd>>,
    first_failed: Option<usize>,
    default_node: Option<&str>,
) -> Result<Settled, Failure> {
    let mut arrivals = Vec::with_capacity(branches.len());
    let mut failures: Vec<(&BranchCtx, Failure)> = Vec::new();
    for (branch, end) in branches.iter().zip(ends) {
        let failure = match end {
            Some(LineEnd::Arrived { mapping }) => {
                arrivals.push(Some(mapping));
                continue;
            }
            Some(LineEnd::Failed(failure)) => failure,
            Some(LineEnd::Done { node }) => Failure::new(
                FailureCode::JoinFailed,
                "the branch reached done before its join",
            )
            .at(&node),
            None => Failure::new(FailureCode::JoinFailed, "the branch did not end"),
        };
        arrivals.push(None);
        failures.push((branch, failure));
    }
    let node_of = |branch: &'_ BranchCtx, failure: &Failure| -> String {
        failure
            .node
            .clone()
            .unwrap_or_else(|| default_node.unwrap_or(&branch.first).to_owned())
    };
    let describe = |(branch, failure): &(&BranchCtx, Failure)| {
        format!(
            "branch \"{}\" failed at node \"{}\": {}: {}",
            branch.first,
            node_of(branch, failure),
            failure.code,
            failure.message
        )
    };
    match mode {
        AwaitMode::WaitAll => {
            let first = first_failed
                .and_then(|i| branches.get(i))
                .and_then(|b| failures.iter().find(|(f, _)| std::ptr::eq(*f, b)))
                .or(failures.first());
            match first {
                Some(f) => Err(Failure::new(
                    FailureCode::JoinFailed,
                    format!("join \"{join}\": {}", describe(f)),
                )),
                None => Ok(Settled {
                    arrivals,
                    failed_branches: None,
                }),
            }
        }
        AwaitMode::BestEffort => {
            if arrivals.iter().all(Option::is_none) && !failures.is_empty() {
                let all: Vec<String> = failures.iter().map(describe).collect();
                return Err(Failure::new(
                    FailureCode::JoinFailed,
                    format!("join \"{join}\": no branch arrived; {}", all.join("; ")),
                ));
            }
            let failed = failures
                .iter()
                .map(|(branch, failure)| {
                    json!({
                        "branch": branch.first,
                        "node": node_of(branch, failure),
                        "code": failure.code.as_str(),
                        "message": ctx.redactor.redact(&failure.message),
                    })
                })
                .collect();
            Ok(Settled {
                arrivals,
                failed_branches: Some(failed),
            })
        }
    }
}

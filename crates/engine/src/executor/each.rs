//! `fan_out_each` routers (upstream's per-item fan-out, docs/language.md): the router's one
//! outgoing edge heads a branch that runs once per item of `over`, all sharing the run's sandbox,
//! budget and `max_parallel_branches` slots, as `fan_out_all` branches do ([`crate::executor::fanout`]).
//!
//! Each item's branch sees the run's outputs with its own over them ([`BranchCtx::item`]): the
//! router's output holds the item under its `as` name (`{{outputs.ROUTER.item}}`), and the
//! branch's nodes record their outputs there, so siblings never read each other's. When every
//! branch has ended, the run's outputs of the branch's nodes become lists in item order (`null`
//! for an item that did not reach it), and the join's input holds each `with` key of the edge
//! into it as a list in item order (`null` for an item that did not arrive).
//!
//! With `key` and `depends_on`, an item starts only when every item it names arrived; one whose
//! prerequisite did not arrive does not run (it counts as failed). Duplicate or unknown keys and
//! cycles fail the router before any item runs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use iterion_dsl::ir::{AwaitMode, RouterNode, Target};
use serde_json::Value;

use crate::executor::checkpoint::NextNode;
use crate::executor::ctx::{BranchCtx, Ctx, LineEnd};
use crate::executor::fanout::Lines;
use crate::executor::outcome::Failure;
use crate::records::events::{EdgeSelected, Event};
use iterion_vocab::FailureCode;

/// The most items one `fan_out_each` runs: a longer list fails the router (a list from a tool or
/// a model is data the workflow does not control).
pub(crate) const MAX_ITEMS: usize = 1000;

/// Runs the branches of `fan_out_each` router `router` (whose output is recorded) and returns
/// the join with its input.
pub(crate) async fn fan_out_each(
    ctx: &Ctx<'_>,
    router: &str,
    node: &RouterNode,
    lines: &dyn Lines,
) -> Result<NextNode, Failure> {
    let failed = |message: String| Failure::new(FailureCode::ExecutionFailed, message).at(router);
    let (join, mode) = crate::executor::fanout::join_of(ctx, router)?;
    let Some((index, Target::Node(first))) = ctx
        .wf
        .edges
        .iter()
        .enumerate()
        .find(|(_, e)| e.from == router)
        .map(|(i, e)| (i, &e.to))
    else {
        return Err(failed(format!(
            "fan_out_each router \"{router}\" has no branch edge"
        )));
    };
    let router_output = ctx
        .lock_state()
        .outputs
        .get(router)
        .cloned()
        .unwrap_or(Value::Null);
    let items = items(ctx, router, node, &router_output).map_err(failed)?;
    let prerequisites = prerequisites(node, &items).map_err(failed)?;

    let token = ctx.stop.child_token();
    let branches: Vec<BranchCtx> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let mut own = router_output.as_object().cloned().unwrap_or_default();
            own.insert(node.item_name().to_owned(), item.clone());
            BranchCtx {
                first: format!("{first}[{i}]"),
                join: join.to_owned(),
                token: token.clone(),
                item: Some(Mutex::new(BTreeMap::from([(
                    router.to_owned(),
                    Value::Object(own),
                )]))),
            }
        })
        .collect();

    let slots = ctx
        .budget
        .max_parallel_branches
        .map(|n| std::sync::Arc::new(tokio::sync::Semaphore::new(n.max(1) as usize)));
    let start = |i: usize| {
        let slots = slots.clone();
        let branch = branches.get(i);
        async move {
            let Some(branch) = branch else {
                return (
                    i,
                    LineEnd::Failed(Failure::new(FailureCode::JoinFailed, "no branch")),
                );
            };
            let _slot = match &slots {
                Some(s) => s.clone().acquire_owned().await.ok(),
                None => None,
            };
            ctx.emit(Event::EdgeSelected(EdgeSelected {
                from: router.to_owned(),
                to: first.clone(),
                condition: None,
                loop_: None,
                iteration: None,
            }))
            .await;
            let input = ctx
                .inputs()
                .node_input(&ctx.state_for(Some(branch)), first, Some(index));
            let start = NextNode {
                node: first.clone(),
                input,
            };
            (i, lines.branch(start, branch).await)
        }
    };
    let mut ends: Vec<Option<LineEnd>> = items.iter().map(|_| None).collect();
    let mut started = vec![false; items.len()];
    let mut running = FuturesUnordered::new();
    let mut first_failed = None;
    loop {
        // Start every item whose prerequisites all arrived; one whose prerequisite ended
        // otherwise does not run.
        let mut moved = false;
        for (i, is_started) in started.iter_mut().enumerate() {
            if *is_started {
                continue;
            }
            let needs = prerequisites.get(i).map_or(&[][..], Vec::as_slice);
            let blocked = needs.iter().find(|&&p| {
                ends.get(p).is_some_and(
                    |e| matches!(e, Some(end) if !matches!(end, LineEnd::Arrived { .. })),
                )
            });
            if let Some(&p) = blocked {
                *is_started = true;
                moved = true;
                let label = branches.get(p).map_or("", |b| b.first.as_str());
                if let Some(slot) = ends.get_mut(i) {
                    *slot = Some(LineEnd::Failed(Failure::new(
                        FailureCode::JoinFailed,
                        format!("not run: its prerequisite \"{label}\" did not arrive"),
                    )));
                }
                continue;
            }
            let ready = needs
                .iter()
                .all(|&p| matches!(ends.get(p), Some(Some(LineEnd::Arrived { .. }))));
            if ready {
                *is_started = true;
                moved = true;
                running.push(start(i));
            }
        }
        let Some((i, end)) = running.next().await else {
            // Nothing runs: every item has started, or (a cycle is refused before) nothing
            // more can.
            if started.iter().all(|s| *s) || !moved {
                break;
            }
            continue;
        };
        if !matches!(end, LineEnd::Arrived { .. }) && first_failed.is_none() {
            first_failed = Some(i);
            if mode == AwaitMode::WaitAll {
                token.cancel();
            }
        }
        if let Some(slot) = ends.get_mut(i) {
            *slot = Some(end);
        }
        if mode == AwaitMode::WaitAll && first_failed.is_some() && running.is_empty() {
            break;
        }
    }
    drop(running);
    if ctx.stop.is_cancelled() {
        return Err(ctx.stopped());
    }

    // The branch nodes' outputs, as lists in item order, on the run's outputs.
    let mut lists: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (i, branch) in branches.iter().enumerate() {
        let own = branch
            .item
            .as_ref()
            .map(|m| {
                m.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
            })
            .unwrap_or_default();
        for (node_id, output) in own {
            if node_id == router {
                continue;
            }
            let list = lists
                .entry(node_id)
                .or_insert_with(|| vec![Value::Null; items.len()]);
            if let Some(slot) = list.get_mut(i) {
                *slot = output;
            }
        }
    }
    {
        let mut state = ctx.lock_state();
        for (node_id, list) in lists {
            state.outputs.insert(node_id, Value::Array(list));
        }
    }

    let settled = crate::executor::fanout::settle(
        ctx,
        join,
        mode,
        &branches,
        ends,
        first_failed,
        Some(first),
    )?;
    Ok(NextNode {
        node: join.to_owned(),
        input: ctx
            .inputs()
            .join_input_each(join, &settled.arrivals, settled.failed_branches),
    })
}

/// The list `over` names: a JSON list, or text holding one (a tool's output field is often
/// text). At most [`MAX_ITEMS`].
fn items(
    ctx: &Ctx<'_>,
    router: &str,
    node: &RouterNode,
    router_output: &Value,
) -> Result<Vec<Value>, String> {
    let text = node.over.as_deref().unwrap_or_default();
    let value = ctx
        .resolve_one(text, router_output)
        .ok_or_else(|| format!("over of \"{router}\": {text} does not resolve"))?;
    let list = match value {
        Value::Array(items) => items,
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Array(items)) => items,
            _ => return Err(format!("over of \"{router}\": {text} is text, not a list")),
        },
        other => {
            return Err(format!(
                "over of \"{router}\": {text} is {}, not a list",
                iterion_dsl::expr::type_name(&other)
            ));
        }
    };
    if list.len() > MAX_ITEMS {
        return Err(format!(
            "over of \"{router}\": {text} holds {} items; a fan_out_each runs at most {MAX_ITEMS}",
            list.len()
        ));
    }
    Ok(list)
}

/// Each item's prerequisites (indices), from `key` and `depends_on`; refuses duplicate and
/// unknown keys and cycles.
fn prerequisites(node: &RouterNode, items: &[Value]) -> Result<Vec<Vec<usize>>, String> {
    let (Some(key), Some(depends_on)) = (&node.key, &node.depends_on) else {
        return Ok(vec![Vec::new(); items.len()]);
    };
    let key_of = |item: &Value| match item.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let k =
            key_of(item).ok_or_else(|| format!("item {i} has no \"{key}\" (string or number)"))?;
        if index.insert(k.clone(), i).is_some() {
            return Err(format!("two items have {key} \"{k}\""));
        }
    }
    let mut needs = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut own = Vec::new();
        for dep in item
            .get(depends_on)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let k = match dep {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => iterion_dsl::template::compact_json(other),
            };
            let &p = index
                .get(&k)
                .ok_or_else(|| format!("item {i} depends on {key} \"{k}\", which no item has"))?;
            own.push(p);
        }
        needs.push(own);
    }
    // Kahn: every item must become ready.
    let mut remaining: Vec<usize> = needs.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..items.len()).filter(|&i| remaining[i] == 0).collect();
    let mut done = 0;
    while let Some(p) = ready.pop() {
        done += 1;
        for (i, own) in needs.iter().enumerate() {
            for _ in own.iter().filter(|&&d| d == p) {
                remaining[i] -= 1;
                if remaining[i] == 0 {
                    ready.push(i);
                }
            }
        }
    }
    if done < items.len() {
        let stuck: Vec<String> = (0..items.len())
            .filter(|&i| remaining[i] > 0)
            .filter_map(|i| items.get(i).and_then(key_of))
            .collect();
        return Err(format!(
            "the items' {depends_on} form a cycle among {}",
            stuck.join(", ")
        ));
    }
    Ok(needs)
}

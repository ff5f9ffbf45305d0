//! Routers that pick one outgoing edge themselves: `round_robin` (the next edge in declaration
//! order at each visit; the counter lives in the checkpoint, so it survives pause and resume) and
//! `llm` (a model picks; the router's output is its input with `selected_route` and `reasoning`
//! set, and the edge to `selected_route` is taken).

use iterion_dsl::ir::{AgentNode, RouterNode, Target};
use serde_json::Value;

use crate::executor::agent::operator::AgentResult;
use crate::executor::ctx::{BranchCtx, Ctx};
use crate::executor::outcome::Failure;
use crate::executor::select::target_name;
use iterion_vocab::FailureCode;

/// What the model reads when the router has no `user` prompt: the router's input.
const INPUT_ONLY: &str = "{{input}}";

/// The indices of `router`'s outgoing edges, in declaration order.
fn out_edges(ctx: &Ctx<'_>, router: &str) -> Vec<usize> {
    ctx.wf
        .edges
        .iter()
        .enumerate()
        .filter(|(_, e)| e.from == router)
        .map(|(i, _)| i)
        .collect()
}

/// The route names an `llm` router offers: its edges' targets, in declaration order, once each.
pub(crate) fn candidates(ctx: &Ctx<'_>, router: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for i in out_edges(ctx, router) {
        let name = target_name(&ctx.wf.edges[i].to).to_owned();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// `round_robin`: the edge for this visit, advancing the router's counter.
pub(crate) fn round_robin(ctx: &Ctx<'_>, router: &str) -> Option<usize> {
    let edges = out_edges(ctx, router);
    if edges.is_empty() {
        return None;
    }
    let mut state = ctx.lock_state();
    let counter = state.round_robin.entry(router.to_owned()).or_default();
    let len = u64::try_from(edges.len()).unwrap_or(u64::MAX);
    let pick = usize::try_from(*counter % len).unwrap_or(0);
    *counter = counter.saturating_add(1);
    edges.get(pick).copied()
}

/// `llm`: the first edge into the route the model selected (the router's `output`).
pub(crate) fn selected_edge(ctx: &Ctx<'_>, router: &str, output: &Value) -> Option<usize> {
    let route = output.get("selected_route")?.as_str()?;
    out_edges(ctx, router)
        .into_iter()
        .find(|&i| match &ctx.wf.edges[i].to {
            Target::Node(n) => n == route,
            t => target_name(t) == route,
        })
}

/// Runs `llm` router `id`: asks its model to pick one of its routes; the output is `input` with
/// `selected_route` and `reasoning` set. A pick outside the routes fails the node.
pub(crate) async fn llm(
    ctx: &Ctx<'_>,
    id: &str,
    router: &RouterNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> Result<(Value, Option<iterion_agent::wire::Usage>), Failure> {
    let routes = candidates(ctx, id);
    let instruction = format!(
        "You route a workflow. Pick exactly one of these routes: {}. Answer with only a JSON \
         object: {{\"selected_route\": \"<one of the routes>\", \"reasoning\": \"<one sentence>\"}}.",
        routes.join(", ")
    );
    let system = match &router.system {
        Some(s) => format!("{s}\n\n{instruction}"),
        None => instruction,
    };
    // The router's model answers through its backend: the claw loop, or a delegate CLI
    // (`backend: claude_code` / `codex`), exactly as an agent without tools would.
    let agent = AgentNode {
        model: router.model.clone().unwrap_or_default(),
        system: Some(system),
        user: router.user.clone().unwrap_or_else(|| INPUT_ONLY.to_owned()),
        tool_max_steps: 1,
        backend: router.backend,
        provider: router.provider.clone(),
        reasoning_effort: router.reasoning_effort.clone(),
        ..AgentNode::default()
    };
    let (answer, usage) =
        match crate::executor::agent::node::run(ctx, id, &agent, input, branch).await? {
            AgentResult::Done(output, usage) => (output, usage),
            AgentResult::Paused(_) => {
                return Err(Failure::new(
                    FailureCode::ExecutionFailed,
                    "the routing model asked a question; an llm router cannot ask",
                ));
            }
        };
    let text = answer.get("text").and_then(Value::as_str).unwrap_or("");
    let (route, reasoning) = parse_pick(text);
    let Some(route) = route.filter(|r| routes.contains(r)) else {
        return Err(Failure::new(
            FailureCode::ExecutionFailed,
            format!(
                "the routing model picked no route of [{}]; it answered: {}",
                routes.join(", "),
                iterion_agent::text::tail_bytes(text, 512)
            ),
        ));
    };
    let mut output = match input {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    output.insert("selected_route".to_owned(), Value::String(route));
    output.insert(
        "reasoning".to_owned(),
        reasoning.map_or(Value::Null, Value::String),
    );
    Ok((Value::Object(output), Some(usage)))
}

/// The route and reasoning of the model's answer: a JSON object (possibly fenced or with text
/// around it) with `selected_route`, or the bare route name.
fn parse_pick(text: &str) -> (Option<String>, Option<String>) {
    let object = text
        .find('{')
        .zip(text.rfind('}'))
        .filter(|(a, b)| a < b)
        .and_then(|(a, b)| serde_json::from_str::<Value>(&text[a..=b]).ok());
    if let Some(obj) = object {
        let route = obj
            .get("selected_route")
            .and_then(Value::as_str)
            .map(|s| s.trim().to_owned());
        let reasoning = obj
            .get("reasoning")
            .and_then(Value::as_str)
            .map(str::to_owned);
        return (route, reasoning);
    }
    let bare = text
        .trim()
        .trim_matches(|c| c == '`' || c == '"' || c == '\'');
    (Some(bare.to_owned()), None)
}

#[cfg(test)]
mod tests {
    use super::parse_pick;

    #[test]
    fn a_pick_is_read_from_an_object_or_a_bare_name() {
        assert_eq!(
            parse_pick(
                "```json\n{\"selected_route\": \"fix\", \"reasoning\": \"tests fail\"}\n```"
            ),
            (Some("fix".to_owned()), Some("tests fail".to_owned()))
        );
        assert_eq!(parse_pick(" `docs` "), (Some("docs".to_owned()), None));
        assert_eq!(parse_pick("{\"route\": 1}"), (None, None));
    }
}

//! Compute nodes: every `expr` entry, in order, evaluated against vars, the node's input,
//! outputs, loops and the run ([`iterion_dsl::expr::Expr::eval_compute`]); the map of results is
//! the output, checked against the output schema. No model, no process: nothing leaves the
//! engine.

use iterion_dsl::ir::ComputeNode;
use serde_json::{Map, Value, json};

use crate::executor::ctx::{BranchCtx, Ctx};
use crate::executor::input::loop_scope;
use crate::executor::outcome::Failure;
use crate::executor::schema;
use iterion_vocab::FailureCode;

/// Runs compute node `node` on `input`. An expression that does not evaluate fails the node
/// (`EXECUTION_FAILED`, naming the field); a result that does not conform is
/// `SCHEMA_VALIDATION`.
pub(crate) fn run(
    ctx: &Ctx<'_>,
    node: &ComputeNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> Result<Value, Failure> {
    let scope = {
        let state = ctx.state_for(branch);
        let outputs: Map<String, Value> = state
            .outputs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        json!({
            "vars": ctx.vars,
            "input": input,
            "outputs": outputs,
            "loop": loop_scope(&ctx.graph, &state, &ctx.vars),
            "run": ctx.run_scope(),
        })
    };
    let mut out = Map::new();
    for (field, text) in &node.expr {
        let failed = |reason: String| {
            Failure::new(
                FailureCode::ExecutionFailed,
                format!("field \"{field}\": {reason}"),
            )
        };
        let expr = iterion_dsl::expr::parse(text).map_err(|e| failed(e.to_string()))?;
        let value = expr
            .eval_compute(&scope)
            .map_err(|e| failed(e.to_string()))?;
        out.insert(field.clone(), value);
    }
    let output = Value::Object(out);
    match &node.output {
        Some(name) => schema::conform_output(ctx.wf, name, output, "the output"),
        None => Ok(output),
    }
}

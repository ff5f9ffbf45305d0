//! Human nodes. `interaction: human` asks the operator the node's rendered `instructions`: on an
//! interactive terminal at once ([`Operator`](crate::executor::agent::operator::Operator)),
//! otherwise by pausing the run exactly as an agent's `ask_user` does (the run's checkpoint holds
//! the question; `iterion resume RUN --answer TEXT` brings the answer back to this node). The
//! model modes run the built-in agent loop in the node's place: `llm` answers without tools,
//! `llm_or_human` is also offered `ask_user` and may pause the same way.

use iterion_agent::session::Question;
use iterion_agent::wire::Usage;
use iterion_dsl::ir::{AgentNode, HumanMode, HumanNode, Interaction, ValueType, Workflow};
use serde_json::{Map, Value};

use crate::executor::agent::operator::{AgentResult, PausedAgent};
use crate::executor::ctx::{BranchCtx, Ctx};
use crate::executor::outcome::Failure;
use crate::executor::schema;
use iterion_vocab::FailureCode;

/// What the model reads when the node has no `instructions`: the node's input.
const INPUT_ONLY: &str = "{{input}}";

/// Most turns the model modes may spend on `ask_user` before answering.
const MODEL_TURNS: u32 = 3;

/// Runs human node `id` on `input`.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    id: &str,
    node: &HumanNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> Result<AgentResult, Failure> {
    match node.mode {
        HumanMode::Human => ask_person(ctx, id, node, input, branch).await,
        HumanMode::Llm | HumanMode::LlmOrHuman => {
            crate::executor::agent::node::run(ctx, id, &stand_in(node), input, branch).await
        }
    }
}

/// The agent that answers in the node's place in the model modes.
fn stand_in(node: &HumanNode) -> AgentNode {
    AgentNode {
        model: node.model.clone().unwrap_or_default(),
        system: node.system.clone(),
        user: node
            .instructions
            .clone()
            .unwrap_or_else(|| INPUT_ONLY.to_owned()),
        input: node.input.clone(),
        output: node.output.clone(),
        tool_max_steps: MODEL_TURNS,
        interaction: if node.mode == HumanMode::LlmOrHuman {
            Interaction::Ask
        } else {
            Interaction::None
        },
        ..AgentNode::default()
    }
}

/// `interaction: human`: the answer a resumed run brought for this node, or the operator's at
/// once, or a pause.
async fn ask_person(
    ctx: &Ctx<'_>,
    id: &str,
    node: &HumanNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> Result<AgentResult, Failure> {
    let env = ctx.agents.clone();
    let resumed = {
        let mut state = ctx.lock_state();
        let was_asked = state.paused.take_if(|p| p.node == id).is_some();
        if was_asked {
            env.as_ref().and_then(|e| e.answer.clone())
        } else {
            None
        }
    };
    let answer = match resumed {
        Some(answer) => answer,
        None => {
            let question = question_text(ctx, id, node, input, branch);
            let operator = env.as_ref().and_then(|e| e.operator.clone());
            let now = match &operator {
                Some(op) => op.ask(id, &question, &[]).await,
                None => None,
            };
            match now {
                Some(answer) => answer,
                None => {
                    return Ok(AgentResult::Paused(Box::new(PausedAgent {
                        node: id.to_owned(),
                        question: Question {
                            question,
                            options: Vec::new(),
                        },
                        snapshot: None,
                        delegate: None,
                        child: None,
                    })));
                }
            }
        }
    };
    let output = answer_output(ctx.wf, node.output.as_deref(), &answer)?;
    Ok(AgentResult::Done(
        output,
        Usage {
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
        },
    ))
}

/// The question shown to the operator: the rendered `instructions` (text form; an unresolvable
/// reference stays as written), or a line naming the node.
fn question_text(
    ctx: &Ctx<'_>,
    id: &str,
    node: &HumanNode,
    input: &Value,
    branch: Option<&BranchCtx>,
) -> String {
    let Some(instructions) = &node.instructions else {
        return format!("Node \"{id}\" waits for your answer.");
    };
    ctx.render_text(instructions, input, branch)
}

/// The node's output from the operator's answer: a JSON object as it is; otherwise, with an
/// output schema of one field, that field (a string field takes the text, another type its
/// JSON); without a schema, `{"answer": TEXT}`. The result must conform to the schema.
pub(crate) fn answer_output(
    wf: &Workflow,
    output: Option<&str>,
    answer: &str,
) -> Result<Value, Failure> {
    let trimmed = answer.trim();
    let value = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => match output {
            None => Value::Object(Map::from_iter([(
                "answer".to_owned(),
                Value::String(answer.to_owned()),
            )])),
            Some(name) => {
                let declared = schema::declared(wf, name)?;
                let [field] = declared.fields.as_slice() else {
                    let names: Vec<&str> =
                        declared.fields.iter().map(|f| f.name.as_str()).collect();
                    return Err(Failure::new(
                        FailureCode::SchemaValidation,
                        format!(
                            "the answer must be a JSON object with the fields of schema \"{name}\" ({})",
                            names.join(", ")
                        ),
                    ));
                };
                let v = match field.ty {
                    ValueType::String => Value::String(answer.to_owned()),
                    _ => serde_json::from_str(trimmed)
                        .unwrap_or_else(|_| Value::String(answer.to_owned())),
                };
                Value::Object(Map::from_iter([(field.name.clone(), v)]))
            }
        },
    };
    match output {
        Some(name) => schema::conform_output(wf, name, value, "the answer"),
        None => Ok(value),
    }
}

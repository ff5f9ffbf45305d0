//! `reasoning_effort` as a node starts (docs/language.md "agent"): the one reading shared by
//! claw nodes (the model request) and delegate nodes (the CLI's flag).

use crate::executor::ctx::Ctx;
use crate::executor::outcome::Failure;
use iterion_vocab::FailureCode;

/// `reasoning_effort` with its `${…}` (the run's environment) and `{{vars.X}}` expanded: `None`
/// when that leaves nothing, one word otherwise (`BAD_INPUT` for anything else).
pub(crate) fn effort(ctx: &Ctx<'_>, id: &str, text: &str) -> Result<Option<String>, Failure> {
    let empty = serde_json::Map::new();
    let vars = ctx.vars.as_object().unwrap_or(&empty);
    let value = iterion_agent::provider::expand_property(text, vars, |k| ctx.environment.get(k))
        .map_err(|m| {
            Failure::new(
                FailureCode::ExecutionFailed,
                format!("node \"{id}\": reasoning_effort: {m}"),
            )
        })?;
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(Failure::new(
            FailureCode::ExecutionFailed,
            format!("node \"{id}\": reasoning_effort {value:?} is not one word"),
        ));
    }
    Ok(Some(value.to_owned()))
}

//! A node's output against its declared schema (DSL.md §3.4): the schema looked up by name, the
//! check itself ([`iterion_agent::schema::conform`], shared with the agent loop) turned into the
//! node's `SCHEMA_VALIDATION` failure.

use iterion_agent::schema::conform;
use iterion_dsl::ir::{Schema, Workflow};
use serde_json::Value;

use crate::executor::outcome::Failure;
use iterion_vocab::FailureCode;

/// The output schema `name` of `wf`; `SCHEMA_VALIDATION` when it is not declared.
pub(crate) fn declared<'w>(wf: &'w Workflow, name: &str) -> Result<&'w Schema, Failure> {
    wf.schemas.get(name).ok_or_else(|| {
        Failure::new(
            FailureCode::SchemaValidation,
            format!("output schema \"{name}\" is not declared"),
        )
    })
}

/// A node's result checked against its output schema `name` ([`conform`]); a violation is
/// `SCHEMA_VALIDATION`: "`subject` does not conform to schema …".
pub(crate) fn conform_output(
    wf: &Workflow,
    name: &str,
    value: Value,
    subject: &str,
) -> Result<Value, Failure> {
    conform(declared(wf, name)?, value).map_err(|violation| {
        Failure::new(
            FailureCode::SchemaValidation,
            format!("{subject} does not conform to schema \"{name}\": {violation}"),
        )
    })
}

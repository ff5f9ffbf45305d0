//! The compiled workflow the engine executes. OWNER: declaration checks + IR.
use crate::ast;

/// A compiled workflow.
#[derive(Clone, Debug, PartialEq)]
pub struct Workflow {
    /// The workflow's name.
    pub name: String,
}

/// Lowers a tree that passed every check.
pub(crate) fn lower(_file: &ast::File) -> Option<Workflow> {
    todo!("ir")
}

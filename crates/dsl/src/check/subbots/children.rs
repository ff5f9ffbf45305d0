//! What the subbot check hands back to the pipeline.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use crate::ir;

/// What the subbot check hands back to the pipeline.
#[derive(Debug, Default)]
pub(crate) struct Children {
    /// The compiled child of each subbot node that compiled, by node name.
    pub compiled: HashMap<String, ir::Workflow>,
    /// The chain text of the first cycle found in this file or below it (`a -> b -> a`), so each
    /// ancestor reports C913 too rather than a bare C910.
    pub cycle: Option<String>,
    /// Every canonical path tested against the chain of ancestors (C913), in this file or below
    /// it: what a compile without a cycle depends on of the chain (`session.rs`).
    pub footprint: BTreeSet<PathBuf>,
}

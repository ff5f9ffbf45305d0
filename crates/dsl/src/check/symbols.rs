//! Name tables for the checks: one namespace per kind of name (DSL.md §2.3). For each name the
//! first declaration counts (C041, C090 report the later ones).
use std::collections::HashMap;

use crate::ast::{self, Decl};

/// Every declared name, first declaration wins.
#[derive(Debug, Default)]
pub(crate) struct Symbols<'a> {
    /// Nodes in declaration order, duplicates included (C041 needs them).
    pub node_list: Vec<&'a ast::Node>,
    /// Nodes by name; the first declaration.
    pub nodes: HashMap<&'a str, &'a ast::Node>,
    /// Schemas by name.
    pub schemas: HashMap<&'a str, &'a ast::Schema>,
    /// Prompts by name.
    pub prompts: HashMap<&'a str, &'a ast::Prompt>,
    /// Vars by name: top-level block and the workflow's block merged.
    pub vars: HashMap<&'a str, &'a ast::VarDef>,
    /// Secrets in declaration order, duplicates included (C090 needs them).
    pub secret_list: Vec<&'a ast::SecretDef>,
    /// Secrets by name; the first declaration.
    pub secrets: HashMap<&'a str, &'a ast::SecretDef>,
    /// Every workflow in order (C006/C007); the first is *the* workflow.
    pub workflows: Vec<&'a ast::Workflow>,
    /// `cursor` declarations in order, duplicates included (C086).
    pub cursor_list: Vec<&'a ast::CursorDecl>,
    /// `mcp_server` declarations in order, duplicates included (C024).
    pub mcp_list: Vec<&'a ast::McpServerDecl>,
    /// `presets:` blocks.
    pub presets: Vec<&'a ast::PresetsBlock>,
    /// Top-level `attachments:` blocks (the workflow's own is on the workflow).
    pub attachment_blocks: Vec<&'a ast::AttachmentsBlock>,
}

impl<'a> Symbols<'a> {
    /// Builds the tables from a parsed file.
    pub(crate) fn build(file: &'a ast::File) -> Self {
        let mut s = Symbols::default();
        // The first declaration in a block counts; a workflow's var replaces a top-level one.
        let add_vars = |s: &mut Symbols<'a>, block: &'a ast::VarsBlock, overrides: bool| {
            let mut own = std::collections::HashSet::new();
            for v in &block.vars {
                if !own.insert(v.name.name.as_str()) {
                    continue;
                }
                if overrides {
                    s.vars.insert(v.name.name.as_str(), v);
                } else {
                    s.vars.entry(v.name.name.as_str()).or_insert(v);
                }
            }
        };
        for decl in &file.decls {
            match decl {
                Decl::Vars(b) => add_vars(&mut s, b, false),
                Decl::Secrets(b) => {
                    for sec in &b.secrets {
                        s.secret_list.push(sec);
                        s.secrets.entry(sec.name.name.as_str()).or_insert(sec);
                    }
                }
                Decl::Prompt(p) => {
                    s.prompts.entry(p.name.name.as_str()).or_insert(p);
                }
                Decl::Schema(sc) => {
                    s.schemas.entry(sc.name.name.as_str()).or_insert(sc);
                }
                Decl::Node(n) => {
                    s.node_list.push(n);
                    s.nodes.entry(n.name.name.as_str()).or_insert(n);
                }
                Decl::Workflow(w) => {
                    if let (true, Some(b)) = (s.workflows.is_empty(), &w.vars) {
                        add_vars(&mut s, b, true);
                    }
                    s.workflows.push(w);
                }
                Decl::Cursor(c) => s.cursor_list.push(c),
                Decl::McpServer(m) => s.mcp_list.push(m),
                Decl::Presets(p) => s.presets.push(p),
                Decl::Attachments(a) => s.attachment_blocks.push(a),
            }
        }
        s
    }

    /// Whether an attachment `name` is declared (top level or in the workflow).
    pub(crate) fn has_attachment(&self, name: &str) -> bool {
        self.attachment_names().any(|a| a == name)
    }

    /// Every declared attachment name, top level then the workflow's.
    pub(crate) fn attachment_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.attachment_blocks
            .iter()
            .copied()
            .chain(self.workflow().and_then(|w| w.attachments.as_ref()))
            .flat_map(|b| &b.items)
            .map(|a| a.name.name.as_str())
    }

    /// The workflow the checks use: the first one declared (DSL.md §8.3).
    pub(crate) fn workflow(&self) -> Option<&'a ast::Workflow> {
        self.workflows.first().copied()
    }
}

//! Hand-built syntax trees for unit tests of the checks and of `ir::lower`, usable before (and
//! independently of) the parser. Every span is one column wide, at (line, col).
use crate::ast::*;

pub(crate) fn at(line: u32, col: u32) -> Span {
    Span::new(line, col, 1)
}

pub(crate) fn st(value: &str, line: u32, col: u32) -> StrLit {
    StrLit {
        value: value.to_owned(),
        kind: StrKind::Quoted,
        span: at(line, col),
        lines: vec![LineStart {
            value_offset: 0,
            line,
            col: col + 1,
        }],
    }
}

pub(crate) fn id(name: &str, line: u32, col: u32) -> Ident {
    Ident {
        name: name.to_owned(),
        span: at(line, col),
    }
}

pub(crate) fn wd(text: &str, line: u32, col: u32) -> Word {
    Word {
        text: text.to_owned(),
        span: at(line, col),
    }
}

pub(crate) fn agent_props(line: u32) -> AgentProps {
    AgentProps {
        model: Some(st("anthropic/claude-sonnet-4-5", line + 1, 10)),
        delegate: Box::default(),
        system: None,
        user: Some(PromptRef::Inline(st("hello", line + 2, 9))),
        input: None,
        output: None,
        tools: None,
        tool_max_steps: None,
        interaction: None,
        await_: None,
        sandbox: None,
        publish: None,
        readonly: None,
        extras: Box::default(),
    }
}

/// `agent NAME:` at `line` (name at column 7), model on the next line, user after it.
pub(crate) fn agent(name: &str, line: u32, f: impl FnOnce(&mut AgentProps)) -> Decl {
    let mut props = agent_props(line);
    f(&mut props);
    Decl::Node(Node {
        kind: NodeKind::Agent,
        kind_span: at(line, 1),
        name: id(name, line, 7),
        body: NodeBody::Agent(props),
    })
}

/// `tool NAME:` at `line` (name at column 6), command on the next line.
pub(crate) fn tool(name: &str, line: u32, f: impl FnOnce(&mut ToolProps)) -> Decl {
    let mut props = ToolProps {
        command: st("echo hi", line + 1, 12),
        script: None,
        publish: None,
        input: None,
        output: None,
        await_: None,
        sandbox: None,
    };
    f(&mut props);
    Decl::Node(Node {
        kind: NodeKind::Tool,
        kind_span: at(line, 1),
        name: id(name, line, 6),
        body: NodeBody::Tool(props),
    })
}

/// `workflow w:` at line 100, `entry: a`.
pub(crate) fn workflow(f: impl FnOnce(&mut Workflow)) -> Decl {
    let mut w = Workflow {
        name: id("w", 100, 10),
        entry: Some(wd("a", 101, 10)),
        vars: None,
        sandbox: None,
        worktree: None,
        repo_devbox: None,
        workspace_checkpoint: None,
        budget: None,
        default_backend: None,
        permission: Default::default(),
        mcp: None,
        attachments: None,
        unenforced: vec![],
        edges: vec![],
    };
    f(&mut w);
    Decl::Workflow(w)
}

pub(crate) fn schema(name: &str, line: u32, fields: &[(&str, VarType)]) -> Decl {
    Decl::Schema(Schema {
        name: id(name, line, 8),
        fields: fields
            .iter()
            .zip(1..)
            .map(|((n, ty), i)| Field {
                name: id(n, line + i, 3),
                ty: *ty,
                ty_span: at(line + i, 10),
                enum_values: None,
            })
            .collect(),
    })
}

pub(crate) fn secret(name: &str, line: u32) -> SecretDef {
    SecretDef {
        name: id(name, line, 3),
        value: None,
        as_: None,
        mount_path: None,
        env: None,
        hosts: None,
        optional: None,
        description: None,
    }
}

pub(crate) fn hosts(items: &[&str], line: u32) -> StrList {
    StrList {
        items: items
            .iter()
            .zip(0..)
            .map(|(h, i)| st(h, line, 13 + 20 * i))
            .collect(),
        span: at(line, 12),
    }
}

pub(crate) fn secrets(list: Vec<SecretDef>) -> Decl {
    Decl::Secrets(SecretsBlock {
        keyword: at(1, 1),
        secrets: list,
    })
}

pub(crate) fn file(decls: Vec<Decl>) -> File {
    File {
        strict_escape: false,
        decls,
        backslash_quote_strings: vec![],
    }
}

/// A sandbox block whose key is at (line, 3); set fields in `f`.
pub(crate) fn block(line: u32, f: impl FnOnce(&mut SandboxBlock)) -> SandboxDecl {
    let mut b = SandboxBlock {
        key: at(line, 3),
        ..SandboxBlock::default()
    };
    f(&mut b);
    SandboxDecl::Block(b)
}

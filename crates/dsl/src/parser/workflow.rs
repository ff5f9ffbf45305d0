//! `workflow NAME:` (DSL.md §3.8): members in any order, `budget`, and edges (§5.1).

use std::collections::HashMap;

use super::preview;
use super::values::{PVal, duration_ms, kind_error};
use super::{PResult, Parser, check_reserved, diag};
use crate::ast::{self, Span, Value};
use crate::diag::Code;
use crate::lexer::Tok;

/// Workflow members (§3.8), in table order.
const WORKFLOW_PROPS: &[&str] = &[
    "entry",
    "vars",
    "sandbox",
    "worktree",
    "repo_devbox",
    "workspace_checkpoint",
    "budget",
    "default_backend",
    "permission",
    "allow",
    "ask",
    "deny",
    "mcp",
    "attachments",
    "compaction",
    "interaction",
];

/// `budget:` fields (§3.8).
const BUDGET_PROPS: &[&str] = &[
    "max_duration",
    "max_iterations",
    "max_parallel_branches",
    "max_tokens",
    "max_cost_usd",
];

/// The four clause kinds of an edge (E030 names them).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clause {
    When,
    Else,
    As,
    With,
}

impl Clause {
    fn as_str(self) -> &'static str {
        match self {
            Clause::When => "when",
            Clause::Else => "else",
            Clause::As => "as",
            Clause::With => "with",
        }
    }
}

impl Parser<'_> {
    /// `workflow NAME:` and at least one member.
    pub(super) fn workflow(&mut self) -> PResult<ast::Workflow> {
        self.bump();
        let name = self.name("a workflow name")?;
        self.expect_colon()?;
        self.require_block(&format!("workflow {}:", name.name))?;
        let mut w = ast::Workflow {
            name,
            entry: None,
            vars: None,
            sandbox: None,
            worktree: None,
            repo_devbox: None,
            workspace_checkpoint: None,
            budget: None,
            default_backend: None,
            permission: Box::default(),
            mcp: None,
            attachments: None,
            edges: Vec::new(),
            unenforced: Vec::new(),
        };
        let mut seen = HashMap::new();
        let mut vars_seen = false;
        self.block_lines(|p| {
            if matches!(p.peek_at(1).tok, Tok::Arrow) {
                w.edges.push(p.edge()?);
                return Ok(());
            }
            let key = p.prop_key()?;
            if key.name == "vars" {
                if vars_seen {
                    return Err(diag(
                        Code::E014,
                        key.span,
                        "only one vars block is allowed here",
                    ));
                }
                vars_seen = true;
                // A workflow's vars may redeclare top-level ones: the workflow's win (§3.1).
                let mut own = HashMap::new();
                w.vars = Some(p.vars_body(key.span, &mut own)?);
                return Ok(());
            }
            Self::check_key("workflow", WORKFLOW_PROPS, &mut seen, &key)?;
            match key.name.as_str() {
                "entry" => w.entry = Some(p.word_prop(&key, "a node name")?),
                "sandbox" => w.sandbox = Some(p.sandbox_prop(&key)?),
                "worktree" => w.worktree = Some(p.word_prop(&key, "a word")?),
                "repo_devbox" => w.repo_devbox = Some(p.word_prop(&key, "on or off")?),
                "workspace_checkpoint" => {
                    w.workspace_checkpoint = Some(p.word_prop(&key, "on or off")?);
                }
                "default_backend" => w.default_backend = Some(p.backend_prop(&key)?),
                "permission" | "allow" | "ask" | "deny" => {
                    p.permission_prop(&key, &mut w.permission)?;
                }
                "mcp" => w.mcp = Some(p.mcp_prop(&key)?),
                "attachments" => {
                    p.expect_colon()?;
                    w.attachments = Some(p.attachments_after_colon(key.span)?);
                }
                "compaction" | "interaction" => {
                    p.unenforced_prop(&key)?;
                    w.unenforced.push(key);
                }
                _ => w.budget = Some(p.budget_prop(&key)?),
            }
            Ok(())
        })?;
        Ok(w)
    }

    fn budget_prop(&mut self, key: &ast::Ident) -> PResult<ast::Budget> {
        let mut b = ast::Budget {
            key: key.span,
            ..Default::default()
        };
        self.block_prop(key, BUDGET_PROPS, |p, k| {
            if k.name == "max_duration" {
                let s = p.str_prop(&k)?;
                if !s.value.contains("${") && duration_ms(&s.value).is_none() {
                    return Err(kind_error(
                        &k.name,
                        "a duration such as \"90s\" or \"1h30m\"",
                        s.span,
                        &preview(&s),
                    ));
                }
                b.max_duration = Some(s);
            } else if k.name == "max_cost_usd" {
                let v = p.scalar_prop(&k, "a number of dollars", |v| {
                    let v = v.into_value();
                    let ok = matches!(v, Value::Int(n, _) if n >= 0)
                        || matches!(v, Value::Float(f, _) if f >= 0.0);
                    if ok {
                        Ok(v)
                    } else {
                        Err(kind_error(
                            "max_cost_usd",
                            "a number of dollars",
                            v.span(),
                            "another value",
                        ))
                    }
                })?;
                b.max_cost_usd = Some(v);
            } else {
                let n = p.int_prop(&k, Some(1))?;
                match k.name.as_str() {
                    "max_iterations" => b.max_iterations = Some(n),
                    "max_parallel_branches" => b.max_parallel_branches = Some(n),
                    _ => b.max_tokens = Some(n),
                }
            }
            Ok(())
        })?;
        Ok(b)
    }

    /// `FROM -> TO {clause} NEWLINE` (§2.1, §5.1).
    fn edge(&mut self) -> PResult<ast::Edge> {
        let from = self.edge_end("a node name")?;
        self.bump(); // `->`, seen by the caller
        let to = self.edge_end("a node name after \"->\"")?;
        let mut edge = ast::Edge {
            from,
            to,
            when: None,
            else_: None,
            loop_: None,
            with: None,
        };
        let mut seen: Vec<Clause> = Vec::new();
        loop {
            let t = self.peek();
            let span = t.span;
            let clause = match &t.tok {
                Tok::Newline => {
                    self.bump();
                    break;
                }
                Tok::Eof => break,
                Tok::Arrow => {
                    return Err(diag(
                        Code::E001,
                        span,
                        "unexpected \"->\": edge chains (a -> b -> c) are not supported yet",
                    ));
                }
                Tok::Ident(w) => match w.as_str() {
                    "when" => Clause::When,
                    "else" => Clause::Else,
                    "as" => Clause::As,
                    "with" => Clause::With,
                    _ => return Err(self.unexpected(None)),
                },
                _ => return Err(self.unexpected(None)),
            };
            if seen.contains(&clause) {
                return Err(diag(
                    Code::E030,
                    span,
                    format!(
                        "duplicate {} on edge \"{} -> {}\"",
                        clause.as_str(),
                        edge.from.name,
                        edge.to.name
                    ),
                ));
            }
            let else_at = match clause {
                Clause::When => edge.else_,
                Clause::Else if edge.when.is_some() => Some(span),
                _ => None,
            };
            if let Some(at) = else_at {
                return Err(diag(
                    Code::E031,
                    at,
                    "an edge cannot have both when and else",
                ));
            }
            seen.push(clause);
            self.bump();
            match clause {
                Clause::When => edge.when = Some(self.when_clause(span)?),
                Clause::Else => edge.else_ = Some(span),
                Clause::As => edge.loop_ = Some(self.loop_clause(span)?),
                Clause::With => edge.with = Some(self.with_clause(span)?),
            }
        }
        Ok(edge)
    }

    /// After `when`: `[not] FIELD` or an expression string.
    fn when_clause(&mut self, span: Span) -> PResult<ast::When> {
        let t = self.peek();
        match &t.tok {
            Tok::Ident(n) if n == "not" => {
                self.bump();
                let field = self.field_name("a field name after \"when not\"")?;
                Ok(ast::When::Field {
                    negated: true,
                    field,
                    span,
                })
            }
            Tok::Ident(_) => {
                let field = self.field_name("a field name")?;
                Ok(ast::When::Field {
                    negated: false,
                    field,
                    span,
                })
            }
            Tok::Str(_) => {
                let Tok::Str(text) = self.bump().tok else {
                    return Err(diag(Code::E001, span, "unexpected token"));
                };
                Ok(ast::When::Expr { text, span })
            }
            _ => Err(self.unexpected(Some("a field name or an expression after \"when\""))),
        }
    }

    /// After `as`: `L(N)`.
    fn loop_clause(&mut self, span: Span) -> PResult<ast::LoopClause> {
        let name = self.name("a loop name")?;
        if !matches!(self.peek().tok, Tok::LParen) {
            return Err(self.unexpected(Some("\"(\"")));
        }
        self.bump();
        let t = self.peek();
        let cap_span = t.span;
        let mut cap_template = None;
        let cap = match &t.tok {
            Tok::Int { value: Some(v), .. } => *v,
            Tok::Str(lit) => {
                cap_template = Some(lit.clone());
                0
            }
            Tok::Int { value: None, text } => {
                return Err(kind_error(
                    "loop cap",
                    "an int in i64 range",
                    cap_span,
                    text,
                ));
            }
            _ => return Err(self.unexpected(Some("the loop cap"))),
        };
        self.bump();
        if !matches!(self.peek().tok, Tok::RParen) {
            return Err(self.unexpected(Some("\")\"")));
        }
        self.bump();
        Ok(ast::LoopClause {
            name,
            cap,
            cap_template,
            span,
        })
    }

    /// After `with`: `{ key: value, … }` with string, int, float or bool values.
    pub(super) fn with_clause(&mut self, span: Span) -> PResult<ast::WithMap> {
        if !matches!(self.peek().tok, Tok::LBrace) {
            return Err(self.unexpected(Some("\"{\"")));
        }
        let PVal::Map(entries, _) = self.value("with", 0)? else {
            return Err(diag(Code::E001, span, "unexpected token"));
        };
        let mut out = Vec::with_capacity(entries.len());
        for (k, v, _) in entries {
            check_reserved(&k)?;
            if matches!(v, Value::List(..) | Value::Map(..)) {
                let found = if matches!(v, Value::List(..)) {
                    "a list"
                } else {
                    "a map"
                };
                return Err(kind_error(
                    &k.name,
                    "a string, int, float or bool",
                    v.span(),
                    found,
                ));
            }
            out.push((k, v));
        }
        Ok(ast::WithMap { entries: out, span })
    }
}

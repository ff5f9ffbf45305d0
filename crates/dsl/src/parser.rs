//! Tokens → [`crate::ast::File`] with parse-stage diagnostics (DSL.md §2–§3). OWNER: parse stage.
//!
//! A recursive-descent parser over the pulled token stream of [`crate::lexer`]. Every parse
//! function returns `Err` with the first error it meets; the top-level loop reports it, drops the
//! declaration, and resumes at the next line at indentation 0 (§2.2), so each top-level
//! declaration reports at most one error. Property tables (§3) are checked as each key is read,
//! so the error reported is the first one in source order.
//!
//! Submodules: `values` (values, kinds, E021/E020 conversions), `decls` (vars, secrets, prompts,
//! schemas, nodes, sandbox blocks), `workflow` (workflow members, budget, edges).
//!
//! Bounds that keep hostile input cheap: values nest at most [`MAX_NESTING`] levels (so the
//! recursion is shallow), and after [`MAX_ERRORS`] diagnostics parsing stops.

use std::collections::{HashMap, VecDeque};

use crate::ast::{self, Span};
use crate::diag::{Code, Diagnostic};
use crate::lexer::{Lexer, Tok, Token};

mod decls;
mod extras;
mod values;
mod workflow;

/// A parse result; the error is the declaration's one diagnostic.
type PResult<T> = Result<T, Box<Diagnostic>>;

/// After this many diagnostics the parser stops (a file of garbage would otherwise produce one
/// per line).
const MAX_ERRORS: usize = 1000;

/// Lists and maps nest at most this deep (DSL.md values never need more than two levels).
const MAX_NESTING: u32 = 32;

/// Reserved words: never a name (DSL.md §2.3).
const RESERVED: &[&str] = &[
    "done", "fail", "true", "false", "when", "not", "else", "as", "with",
];

/// Upstream declaration kinds at indentation 0 that this subset does not support (§2.3, §11).
const UPSTREAM_KINDS: &[&str] = &[
    "mcp",
    "emit",
    "wait",
    "await_answers",
    "group",
    "use",
    "cursors",
    "supervisor",
    "contract",
    "include",
];

/// Declaration keywords, for the E001 hint.
const DECL_KEYWORDS: &[&str] = &[
    "vars",
    "secrets",
    "prompt",
    "schema",
    "agent",
    "judge",
    "tool",
    "router",
    "subbot",
    "compute",
    "human",
    "workflow",
    "cursor",
    "mcp_server",
    "presets",
    "attachments",
];

/// Upstream properties outside the subset: E012 "not supported yet" in any block where they are
/// not valid (§3, §11).
const UNSUPPORTED_PROPS: &[&str] = &[
    "readonly",
    "provider",
    "session",
    "publish",
    "tool_policy",
    "permission",
    "capabilities",
    "skills",
    "max_tokens",
    "reasoning_effort",
    "timeout",
    "interaction_prompt",
    "interaction_model",
    "compaction",
    "compress",
    "memory",
    "auto_memory",
    "fallbacks",
    "needs",
    "description",
    "script",
    "language",
    "action",
    "goal",
    "postcondition",
    "policy",
    "recovery",
    "default_backend",
    "resources",
    "loop_budget_guard",
    "max_parallel_branches",
    "max_cost_usd",
    "warn_tokens",
    "artifact_labels",
    "instructions",
    "strategy",
    "require",
    "interaction",
    "command",
    "backend",
    "source",
];

/// The end-of-input token returned when the buffer is somehow empty.
static EOF_TOKEN: Token = Token {
    tok: Tok::Eof,
    span: Span {
        line: 1,
        col: 1,
        width: 1,
    },
    bol: false,
};

/// Parses normalised text.
pub(crate) fn parse(text: &str) -> (ast::File, Vec<Diagnostic>) {
    let mut p = Parser::new(text);
    p.run();
    let file = ast::File {
        strict_escape: p.lx.strict_escape(),
        decls: std::mem::take(&mut p.decls),
        backslash_quote_strings: p.lx.take_backslash_quotes(),
    };
    (file, p.diags)
}

/// Parser state.
struct Parser<'a> {
    lx: Lexer<'a>,
    /// Lookahead.
    buf: VecDeque<Token>,
    diags: Vec<Diagnostic>,
    decls: Vec<ast::Decl>,
    /// Position of the first token of the declaration being parsed.
    decl_start: (u32, u32),
    /// Prompt names → line of their declaration (E010).
    prompts: HashMap<String, u32>,
    /// Schema names → line (E010).
    schemas: HashMap<String, u32>,
    /// Var names → line, top level and workflow blocks merged (E010).
    vars: HashMap<String, u32>,
    /// A top-level `vars:` was seen (E014).
    top_vars: bool,
    /// A `secrets:` was seen (E014).
    top_secrets: bool,
}

/// The E001 / E002 / E003 diagnostic for an unwanted token (a lexer error is passed through).
fn error_for(t: &Token, expected: Option<&str>) -> Box<Diagnostic> {
    match &t.tok {
        Tok::Error(d) => d.clone(),
        Tok::Indent => Box::new(Diagnostic::new(
            Code::E003,
            t.span,
            "unexpected indentation",
        )),
        _ => match expected {
            Some(what) => Box::new(Diagnostic::new(
                Code::E002,
                t.span,
                format!("expected {what}, found {}", describe(t)),
            )),
            None => Box::new(Diagnostic::new(
                Code::E001,
                t.span,
                format!("unexpected {}", describe(t)),
            )),
        },
    }
}

/// A token as shown in messages.
fn describe(t: &Token) -> String {
    let quoted = |s: &str| format!("\"{s}\"");
    match &t.tok {
        Tok::Ident(s) => quoted(s),
        Tok::Int { text, .. } | Tok::Float { text, .. } => quoted(text),
        Tok::TypeList => quoted("string[]"),
        Tok::Colon => quoted(":"),
        Tok::Arrow => quoted("->"),
        Tok::Eq => quoted("="),
        Tok::Comma => quoted(","),
        Tok::LBracket => quoted("["),
        Tok::RBracket => quoted("]"),
        Tok::LBrace => quoted("{"),
        Tok::RBrace => quoted("}"),
        Tok::LParen => quoted("("),
        Tok::RParen => quoted(")"),
        Tok::Str(s) => format!("string {}", preview(s)),
        Tok::Block(_) => "a block scalar".to_owned(),
        Tok::PromptBody(_) => "a prompt body".to_owned(),
        Tok::Newline => "end of line".to_owned(),
        Tok::Indent => "an indented block".to_owned(),
        Tok::Dedent => "end of block".to_owned(),
        Tok::Eof => "end of file".to_owned(),
        Tok::Error(_) => "an invalid token".to_owned(),
    }
}

/// A boxed diagnostic.
fn diag(code: Code, span: Span, message: impl Into<String>) -> Box<Diagnostic> {
    Box::new(Diagnostic::new(code, span, message))
}

/// E011 when `name` is reserved.
fn check_reserved(name: &ast::Ident) -> PResult<()> {
    if RESERVED.contains(&name.name.as_str()) {
        return Err(diag(
            Code::E011,
            name.span,
            format!("\"{}\" is reserved", name.name),
        ));
    }
    Ok(())
}

/// The closest of `candidates` within edit distance 2 (ties: the first).
fn closest<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(word, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// E012 for `key` in a block of `kind` whose valid properties are `valid`.
fn unknown_prop(kind: &str, key: &ast::Ident, valid: &[&str]) -> Box<Diagnostic> {
    if UNSUPPORTED_PROPS.contains(&key.name.as_str()) {
        return diag(
            Code::E012,
            key.span,
            format!("\"{}\" is not supported yet", key.name),
        );
    }
    let mut d = Diagnostic::new(
        Code::E012,
        key.span,
        format!("unknown property \"{}\" in {kind}", key.name),
    );
    if kind == "router" && key.name == "await" {
        // The usual slip: the join's `await` written on the fan-out router (issue 19).
        d = d.with_hint(
            "await belongs on the join, the node where a fan_out_all router's branches meet (await: wait_all or best_effort), not on the router",
        );
    } else if let Some(p) = closest(&key.name, valid) {
        d = d.with_hint(format!("did you mean \"{p}\"?"));
    }
    Box::new(d)
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            lx: Lexer::new(text),
            buf: VecDeque::new(),
            diags: Vec::new(),
            decls: Vec::new(),
            decl_start: (0, 0),
            prompts: HashMap::new(),
            schemas: HashMap::new(),
            vars: HashMap::new(),
            top_vars: false,
            top_secrets: false,
        }
    }

    // ----- tokens -------------------------------------------------------------------------

    /// The token `n` places ahead (0 = current).
    fn peek_at(&mut self, n: usize) -> &Token {
        while self.buf.len() <= n {
            let t = self.lx.next_token();
            self.buf.push_back(t);
        }
        self.buf.get(n).unwrap_or(&EOF_TOKEN)
    }

    /// The current token.
    fn peek(&mut self) -> &Token {
        self.peek_at(0)
    }

    /// Consumes the current token.
    fn bump(&mut self) -> Token {
        self.peek_at(0);
        self.buf.pop_front().unwrap_or_else(|| EOF_TOKEN.clone())
    }

    /// The diagnostic for the current token (not consumed).
    fn unexpected(&mut self, expected: Option<&str>) -> Box<Diagnostic> {
        let t = self.peek();
        error_for(t, expected)
    }

    /// The current token's error, if it is a lexical error (checked wherever a token is
    /// optional, so an error on the next line is not mistaken for "nothing there").
    fn lexer_error(&mut self) -> PResult<()> {
        match &self.peek().tok {
            Tok::Error(d) => Err(d.clone()),
            _ => Ok(()),
        }
    }

    /// Consumes a `:`, or E002.
    fn expect_colon(&mut self) -> PResult<Span> {
        if matches!(self.peek().tok, Tok::Colon) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(Some("\":\"")))
        }
    }

    /// The end of a logical line: NEWLINE (consumed) or the end of the file; anything else is
    /// E001.
    fn end_line(&mut self) -> PResult<()> {
        match self.peek().tok {
            Tok::Newline => {
                self.bump();
                Ok(())
            }
            Tok::Eof => Ok(()),
            _ => Err(self.unexpected(None)),
        }
    }

    /// After `header:`: the end of the line, then a required indented block (E002 when
    /// missing, anchored at the end of the header line).
    fn require_block(&mut self, header: &str) -> PResult<()> {
        let end = self.peek().span;
        self.end_line()?;
        if matches!(self.peek().tok, Tok::Indent) {
            return Ok(());
        }
        let found = describe(self.peek());
        if matches!(self.peek().tok, Tok::Error(_)) {
            return Err(self.unexpected(None));
        }
        Err(diag(
            Code::E002,
            end,
            format!("expected an indented block after \"{header}\", found {found}"),
        ))
    }

    /// An IDENT used as a name (E011 when reserved, E002 when absent).
    fn name(&mut self, what: &str) -> PResult<ast::Ident> {
        let t = self.peek();
        let Tok::Ident(n) = &t.tok else {
            return Err(self.unexpected(Some(what)));
        };
        let ident = ast::Ident {
            name: n.clone(),
            span: t.span,
        };
        check_reserved(&ident)?;
        self.bump();
        Ok(ident)
    }

    /// A schema field's name, or the field a `when [not] F` reads: a name, where `done` and
    /// `fail` are allowed too (upstream accepts them there, and a result field called `done`
    /// is natural: `when not done`). Other reserved words are E011.
    fn field_name(&mut self, what: &str) -> PResult<ast::Ident> {
        let t = self.peek();
        if let Tok::Ident(n) = &t.tok
            && (n == "done" || n == "fail")
        {
            let ident = ast::Ident {
                name: n.clone(),
                span: t.span,
            };
            self.bump();
            return Ok(ident);
        }
        self.name(what)
    }

    /// A property key (any IDENT).
    fn prop_key(&mut self) -> PResult<ast::Ident> {
        let t = self.peek();
        let Tok::Ident(n) = &t.tok else {
            return Err(self.unexpected(Some("a property name")));
        };
        let ident = ast::Ident {
            name: n.clone(),
            span: t.span,
        };
        self.bump();
        Ok(ident)
    }

    /// Runs `each` once per line of an optional INDENT … DEDENT block.
    fn block_lines(&mut self, mut each: impl FnMut(&mut Self) -> PResult<()>) -> PResult<()> {
        self.lexer_error()?;
        if !matches!(self.peek().tok, Tok::Indent) {
            return Ok(());
        }
        self.bump();
        loop {
            match self.peek().tok {
                Tok::Dedent => {
                    self.bump();
                    return Ok(());
                }
                Tok::Eof => return Ok(()),
                _ => each(self)?,
            }
        }
    }

    /// E012 / E010 for `key` in a block of `kind`.
    fn check_key(
        kind: &str,
        valid: &[&str],
        seen: &mut HashMap<String, u32>,
        key: &ast::Ident,
    ) -> PResult<()> {
        if !valid.contains(&key.name.as_str()) {
            return Err(unknown_prop(kind, key, valid));
        }
        if let Some(line) = seen.get(&key.name) {
            return Err(diag(
                Code::E010,
                key.span,
                format!("property \"{}\" already declared at line {line}", key.name),
            ));
        }
        seen.insert(key.name.clone(), key.span.line);
        Ok(())
    }

    /// A block of `key: value` properties from the table `valid`; `each` parses the value of a
    /// known, first-seen key (the key is consumed, the `:` is not).
    fn props(
        &mut self,
        kind: &str,
        valid: &[&str],
        mut each: impl FnMut(&mut Self, ast::Ident) -> PResult<()>,
    ) -> PResult<()> {
        let mut seen = HashMap::new();
        self.block_lines(|p| {
            let key = p.prop_key()?;
            Self::check_key(kind, valid, &mut seen, &key)?;
            each(p, key)
        })
    }

    // ----- file ---------------------------------------------------------------------------

    fn run(&mut self) {
        let mut first = true;
        while self.diags.len() < MAX_ERRORS {
            match self.peek().tok {
                Tok::Eof => break,
                Tok::Newline | Tok::Dedent => {
                    self.bump();
                    continue;
                }
                _ => {}
            }
            let start = self.peek().span;
            self.decl_start = (start.line, start.col);
            match self.decl(first) {
                Ok(Some(d)) => self.decls.push(d),
                Ok(None) => {}
                Err(d) => {
                    self.diags.push(*d);
                    self.recover();
                }
            }
            first = false;
        }
    }

    /// Skips to the next line at indentation 0 after the failed declaration (§2.2).
    fn recover(&mut self) {
        if self.lx.in_bracket() {
            self.buf.clear();
            self.lx.recover_after_bracket();
            return;
        }
        while let Some(t) = self.buf.front() {
            let at_decl = t.bol && t.span.col == 1 && (t.span.line, t.span.col) > self.decl_start;
            if matches!(t.tok, Tok::Eof) || at_decl {
                return;
            }
            self.buf.pop_front();
        }
        self.lx.recover();
    }

    /// One top-level declaration; `None` for the header.
    fn decl(&mut self, first: bool) -> PResult<Option<ast::Decl>> {
        let t = self.peek();
        let span = t.span;
        let Tok::Ident(word) = &t.tok else {
            return Err(self.unexpected(None));
        };
        let word = word.clone();
        let decl = match word.as_str() {
            "dsl" if first => {
                self.header()?;
                return Ok(None);
            }
            "vars" => ast::Decl::Vars(self.top_vars()?),
            "secrets" => ast::Decl::Secrets(self.secrets()?),
            "prompt" => ast::Decl::Prompt(self.prompt()?),
            "schema" => ast::Decl::Schema(self.schema()?),
            "agent" => ast::Decl::Node(self.node(ast::NodeKind::Agent)?),
            "judge" => ast::Decl::Node(self.node(ast::NodeKind::Judge)?),
            "tool" => ast::Decl::Node(self.node(ast::NodeKind::Tool)?),
            "router" => ast::Decl::Node(self.node(ast::NodeKind::Router)?),
            "subbot" => ast::Decl::Node(self.node(ast::NodeKind::Subbot)?),
            "compute" => ast::Decl::Node(self.node(ast::NodeKind::Compute)?),
            "human" => ast::Decl::Node(self.node(ast::NodeKind::Human)?),
            "fail" => ast::Decl::Node(self.node(ast::NodeKind::Fail)?),
            "join" => ast::Decl::Node(self.join_decl()?),
            "workflow" => ast::Decl::Workflow(self.workflow()?),
            "cursor" => ast::Decl::Cursor(self.cursor_decl()?),
            "mcp_server" => ast::Decl::McpServer(self.mcp_server_decl()?),
            "presets" => ast::Decl::Presets(self.presets_decl()?),
            "attachments" => {
                let keyword = self.bump().span;
                ast::Decl::Attachments(self.attachments_body(keyword)?)
            }
            // A well-formed import line was read before parsing (`import.rs`) and blanked.
            "import" => {
                return Err(Box::new(
                    diag(Code::E001, span, "malformed or misplaced import").with_hint(
                        "imports come first, before every declaration, one quoted path alone on \
                         its line: import \"lib/nodes.bot\"",
                    ),
                ));
            }
            w if UPSTREAM_KINDS.contains(&w) => {
                return Err(diag(
                    Code::E001,
                    span,
                    format!("`{w}` declarations are not supported yet"),
                ));
            }
            w => {
                let mut d = Diagnostic::new(Code::E001, span, format!("unexpected \"{w}\""));
                if w == "dsl" {
                    d = d.with_hint("the dsl: header must be the first line");
                } else if let Some(k) = closest(w, DECL_KEYWORDS) {
                    d = d.with_hint(format!("did you mean \"{k}\"?"));
                }
                return Err(Box::new(d));
            }
        };
        Ok(Some(decl))
    }

    /// `dsl: 1` (§1.3), or upstream's `dsl: 2` (the lexer read it first: strings decode escapes).
    fn header(&mut self) -> PResult<()> {
        let profile_2 = self.lx.profile_2();
        self.bump();
        self.expect_colon()?;
        let t = self.peek();
        let span = t.span;
        let shown = match &t.tok {
            Tok::Int { value: Some(1), .. } => None,
            Tok::Int { value: Some(2), .. } if profile_2 => None,
            Tok::Int { text, .. } | Tok::Float { text, .. } => Some(text.clone()),
            Tok::Ident(s) => Some(s.clone()),
            Tok::Str(s) => Some(preview(s)),
            _ => return Err(self.unexpected(Some("a profile number"))),
        };
        if let Some(v) = shown {
            return Err(diag(
                Code::E040,
                span,
                format!("dsl profile {v} is not supported (only 1 and 2)"),
            ));
        }
        if let Some(at) = self.lx.directive_under_profile_2() {
            return Err(Box::new(
                diag(
                    Code::E040,
                    at,
                    "## strict-escape is not read under dsl: 2".to_owned(),
                )
                .with_hint(
                    "remove the directive: under dsl: 2 every quoted string decodes escapes",
                ),
            ));
        }
        self.bump();
        self.end_line()
    }
}

/// At most this many chars of a string are quoted in messages.
const PREVIEW_CHARS: usize = 40;

/// A string shown in a message: quoted, first line only, truncated.
fn preview(s: &ast::StrLit) -> String {
    let first = s.value.split('\n').next().unwrap_or("");
    let mut shown: String = first.chars().take(PREVIEW_CHARS).collect();
    if shown.len() < s.value.len() {
        shown.push('…');
    }
    match s.kind {
        ast::StrKind::Raw => format!("`{shown}`"),
        _ => format!("\"{shown}\""),
    }
}

#[cfg(test)]
#[path = "parser_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "parser_error_tests.rs"]
mod error_tests;

#[cfg(test)]
#[path = "parser_robustness_tests.rs"]
mod robustness_tests;

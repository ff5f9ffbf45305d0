//! Tokens, indentation, strings, block scalars, prompt bodies (DSL.md §1). OWNER: parse stage.
//!
//! The parser pulls tokens one at a time ([`Lexer::next_token`]). Layout is resolved here, so the
//! parser only sees NEWLINE / INDENT / DEDENT (§1.2), with bracket joining applied (no layout
//! tokens inside `[ { (`). Block scalars (§1.5) and prompt bodies (§1.6) are read whole by the
//! lexer, because their lines do not take part in indentation: a block arrives as one
//! [`Tok::Block`] followed by the NEWLINE of its `key: |` line.
//!
//! Errors are tokens ([`Tok::Error`]): the parser reports the first one of a declaration and
//! then calls [`Lexer::recover`], which skips to the next line at indentation 0 and resets the
//! indentation and bracket stacks (§2.2). The lexer never panics and always advances: every
//! call either consumes input or, at the end, yields [`Tok::Eof`] again.
//!
//! Positions are 1-based lines and columns counted in chars (a tab is one column). The cursor
//! tracks them incrementally, so lexing is linear in the size of the text.

use std::collections::VecDeque;

use crate::ast::{LineStart, Span, StrKind, StrLit};
use crate::diag::{Code, Diagnostic};

mod body;
mod recover;

/// More indentation levels than this is E003 (DSL.md §1.2).
const MAX_INDENT_LEVELS: usize = 100;

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_]*`, keywords and `true`/`false` included.
    Ident(String),
    /// `[0-9]+`; `value` is `None` when it does not fit in i64 (E021, reported by the parser,
    /// which knows the key).
    Int {
        /// The value, if in range.
        value: Option<i64>,
        /// The spelling.
        text: String,
    },
    /// `[0-9]+\.[0-9]+`.
    Float {
        /// The value.
        value: f64,
        /// The spelling.
        text: String,
    },
    /// `string[]`.
    TypeList,
    /// `:`.
    Colon,
    /// `->`.
    Arrow,
    /// `=`.
    Eq,
    /// `,`.
    Comma,
    /// `[`.
    LBracket,
    /// `]`.
    RBracket,
    /// `{`.
    LBrace,
    /// `}`.
    RBrace,
    /// `(`.
    LParen,
    /// `)`.
    RParen,
    /// A quoted or raw string.
    Str(StrLit),
    /// A `key: |` block scalar (always followed by the NEWLINE of its key line).
    Block(StrLit),
    /// A `prompt NAME:` body (always followed by the NEWLINE of the header line).
    PromptBody(StrLit),
    /// End of a logical line.
    Newline,
    /// Indentation increased.
    Indent,
    /// Indentation decreased by one level.
    Dedent,
    /// End of input (repeated forever).
    Eof,
    /// A lexical error; the parser reports it and recovers.
    Error(Box<Diagnostic>),
}

/// A token with its position.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    /// The token.
    pub(crate) tok: Tok,
    /// Where it starts; for NEWLINE and EOF, the position just after the last real token.
    pub(crate) span: Span,
    /// The first real token of a logical line (never set inside brackets). With `span.col == 1`
    /// it starts a line at indentation 0: a place the parser may resume at.
    pub(crate) bol: bool,
}

/// One physical line, looked at without moving the cursor.
#[derive(Clone, Copy)]
struct LineInfo {
    /// Byte offset of its first char.
    start: usize,
    /// Leading spaces (tabs not counted).
    spaces: u32,
    /// The char after the leading spaces, if the line has one.
    after_spaces: Option<char>,
    /// Only spaces and tabs.
    blank: bool,
    /// Byte offset of its `\n` (or the end of the text).
    end: usize,
    /// Byte offset of the next line (the end of the text for the last line).
    next: usize,
}

/// The lexer. See the module documentation.
pub(crate) struct Lexer<'a> {
    src: &'a str,
    /// Byte offset of the cursor (always on a char boundary).
    pos: usize,
    line: u32,
    col: u32,
    /// Byte offset of the start of the cursor's physical line.
    line_start: usize,
    indents: Vec<u32>,
    /// Open brackets: the token, its span, and the byte offset just after it.
    brackets: Vec<(Tok, Span, usize)>,
    /// The outermost bracket still open at the end of the text (after its E002).
    unclosed: Option<(usize, u32, u32)>,
    pending: VecDeque<Token>,
    /// The next significant line still has to be measured (outside brackets).
    at_line_start: bool,
    bol_next: bool,
    /// Indentation of the current logical line.
    line_indent: u32,
    /// Real tokens so far on the current logical line.
    line_tokens: u32,
    first_is_prompt: bool,
    second_is_ident: bool,
    prev_colon: bool,
    seen_token: bool,
    strict: bool,
    /// The file declares `dsl: 2` (its strings decode escapes; the directive is refused).
    profile_2: bool,
    /// Where a `## strict-escape: on` directive sits in a `dsl: 2` file (the header refuses it).
    directive: Option<Span>,
    /// (line, col) just after the last real token.
    last_end: (u32, u32),
    backslash_quotes: Vec<Span>,
}

/// Whether `c` may start an IDENT.
fn ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// Whether `c` may continue an IDENT.
fn ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `s` is exactly one IDENT.
pub(crate) fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(ident_start) && chars.all(ident_continue)
}

/// Length of `s` in chars, as a column count.
fn width_of(s: &str) -> u32 {
    u32::try_from(s.chars().count()).unwrap_or(u32::MAX)
}

/// How a char outside a string is shown in E001.
fn show_char(c: char) -> String {
    if c.is_control() || c.is_whitespace() || c == '\u{feff}' {
        format!("character U+{:04X}", u32::from(c))
    } else {
        format!("\"{c}\"")
    }
}

/// `## strict-escape: on` (spaces around the colon ignored), given a whole comment.
fn is_strict_directive(comment: &str) -> bool {
    let Some(rest) = comment.strip_prefix("##") else {
        return false;
    };
    let Some(rest) = rest.trim().strip_prefix("strict-escape") else {
        return false;
    };
    let Some(rest) = rest.trim_start().strip_prefix(':') else {
        return false;
    };
    rest.trim() == "on"
}

/// Whether the file's first significant line (not blank, not a comment) is the header
/// `dsl: 2`: upstream's syntax profile 2, under which a quoted string decodes the standard
/// escapes with no directive. Read before lexing, because it governs how every string after
/// it is read.
fn declares_profile_2(src: &str) -> bool {
    src.lines()
        .map(|l| l.trim_start_matches([' ', '\t']))
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .and_then(|l| l.strip_prefix("dsl"))
        .and_then(|r| r.trim_start_matches([' ', '\t']).strip_prefix(':'))
        .is_some_and(|r| {
            let value = r.split('#').next().unwrap_or("").trim_matches([' ', '\t']);
            value == "2"
        })
}

impl<'a> Lexer<'a> {
    /// A lexer over normalised text (LF line ends, no BOM).
    pub(crate) fn new(src: &'a str) -> Self {
        let profile_2 = declares_profile_2(src);
        Self {
            src,
            pos: 0,
            line: 1,
            col: 1,
            line_start: 0,
            indents: vec![0],
            brackets: Vec::new(),
            unclosed: None,
            pending: VecDeque::new(),
            at_line_start: true,
            bol_next: false,
            line_indent: 0,
            line_tokens: 0,
            first_is_prompt: false,
            second_is_ident: false,
            prev_colon: false,
            seen_token: false,
            strict: profile_2,
            profile_2,
            directive: None,
            last_end: (1, 1),
            backslash_quotes: Vec::new(),
        }
    }

    /// `## strict-escape: on` was seen before the first token, or the file is `dsl: 2`.
    pub(crate) fn strict_escape(&self) -> bool {
        self.strict
    }

    /// The file's first significant line is `dsl: 2`.
    pub(crate) fn profile_2(&self) -> bool {
        self.profile_2
    }

    /// A `## strict-escape: on` directive of a `dsl: 2` file, which that profile refuses.
    pub(crate) fn directive_under_profile_2(&self) -> Option<Span> {
        self.directive
    }

    /// Quoted strings (default profile) whose value contains `\"`, by opening quote.
    pub(crate) fn take_backslash_quotes(&mut self) -> Vec<Span> {
        std::mem::take(&mut self.backslash_quotes)
    }

    /// The next token.
    pub(crate) fn next_token(&mut self) -> Token {
        loop {
            if let Some(t) = self.pending.pop_front() {
                return t;
            }
            self.lex();
        }
    }

    // ----- cursor -------------------------------------------------------------------------

    fn rest(&self) -> &'a str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut chars = self.rest().chars();
        chars.next();
        chars.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 1;
            self.line_start = self.pos;
        } else {
            self.col = self.col.saturating_add(1);
        }
        Some(c)
    }

    /// Moves the cursor to `offset`, the start of physical line `line`.
    fn jump_to_line(&mut self, offset: usize, line: u32) {
        self.pos = offset.min(self.src.len());
        self.line = line;
        self.col = 1;
        self.line_start = self.pos;
    }

    /// Skips spaces and tabs.
    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    /// Skips to the `\n` ending the line (not consumed).
    fn skip_to_eol(&mut self) {
        let rest = self.rest();
        let len = rest.find('\n').unwrap_or(rest.len());
        let chars = width_of(rest.get(..len).unwrap_or(""));
        self.pos += len;
        self.col = self.col.saturating_add(chars);
    }

    /// Only blanks and an optional comment remain on this line.
    fn rest_of_line_is_empty(&self) -> bool {
        for c in self.rest().chars() {
            match c {
                ' ' | '\t' => {}
                '\n' | '#' => return true,
                _ => return false,
            }
        }
        true
    }

    fn line_info(&self, start: usize) -> LineInfo {
        let rest = self.src.get(start..).unwrap_or("");
        let nl = rest.find('\n');
        let text = match nl {
            Some(i) => rest.get(..i).unwrap_or(""),
            None => rest,
        };
        let spaces = text.bytes().take_while(|b| *b == b' ').count();
        let end = start + text.len();
        LineInfo {
            start,
            spaces: u32::try_from(spaces).unwrap_or(u32::MAX),
            after_spaces: text.get(spaces..).and_then(|s| s.chars().next()),
            blank: text.bytes().all(|b| b == b' ' || b == b'\t'),
            end,
            next: if nl.is_some() { end + 1 } else { end },
        }
    }

    // ----- emitting -----------------------------------------------------------------------

    /// Emits a real token; `start` is its first column and the cursor is just past it.
    fn emit(&mut self, tok: Tok, span: Span) {
        let bol = std::mem::take(&mut self.bol_next);
        match self.line_tokens {
            0 => self.first_is_prompt = matches!(&tok, Tok::Ident(s) if s == "prompt"),
            1 => self.second_is_ident = matches!(tok, Tok::Ident(_)),
            _ => {}
        }
        self.line_tokens = self.line_tokens.saturating_add(1);
        self.prev_colon = matches!(tok, Tok::Colon);
        self.seen_token = true;
        self.last_end = (self.line, self.col);
        self.pending.push_back(Token { tok, span, bol });
    }

    /// Emits a layout token or an error.
    fn emit_virtual(&mut self, tok: Tok, span: Span) {
        self.pending.push_back(Token {
            tok,
            span,
            bol: false,
        });
    }

    fn error(&mut self, code: Code, span: Span, message: impl Into<String>) {
        let d = Diagnostic::new(code, span, message);
        self.emit_virtual(Tok::Error(Box::new(d)), span);
    }

    fn end_span(&self) -> Span {
        Span::new(self.last_end.0, self.last_end.1, 1)
    }

    /// Ends the logical line: the next significant line is measured afresh.
    fn end_line(&mut self) {
        self.at_line_start = true;
        self.line_tokens = 0;
        self.prev_colon = false;
        self.first_is_prompt = false;
        self.second_is_ident = false;
        self.bol_next = false;
    }

    // ----- main loop ----------------------------------------------------------------------

    /// Lexes at least one token into `pending`.
    fn lex(&mut self) {
        if self.at_line_start && self.brackets.is_empty() {
            self.start_line();
            if !self.pending.is_empty() {
                return;
            }
        }
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else {
                self.finish();
                return;
            };
            match c {
                '#' => self.skip_to_eol(),
                '\n' => {
                    if self.brackets.is_empty() {
                        let span = self.end_span();
                        self.bump();
                        self.emit_virtual(Tok::Newline, span);
                        self.end_line();
                        return;
                    }
                    self.bump();
                }
                _ => {
                    self.token(c);
                    return;
                }
            }
        }
    }

    /// Measures the next significant line and emits its INDENT / DEDENTs (§1.2). Blank and
    /// comment-only lines are skipped; the directive is read from comment lines before the
    /// first token (§1.3).
    fn start_line(&mut self) {
        loop {
            let info = self.line_info(self.pos);
            let has_lf = info.next > info.end;
            let text = self.src.get(info.start..info.end).unwrap_or("");
            let lead = text.trim_start_matches([' ', '\t']);
            if lead.is_empty() || lead.starts_with('#') {
                if !self.seen_token && is_strict_directive(lead) {
                    if self.profile_2 && self.directive.is_none() {
                        let col = u32::try_from(text.len() - lead.len() + 1).unwrap_or(1);
                        self.directive = Some(Span::new(self.line, col, 2));
                    }
                    self.strict = true;
                }
                if !has_lf {
                    // The last line: nothing significant is left.
                    self.pos = info.end;
                    self.at_line_start = false;
                    return;
                }
                self.jump_to_line(info.next, self.line.saturating_add(1));
                continue;
            }
            self.at_line_start = false;
            let indent = text.len() - lead.len();
            let indent_chars = u32::try_from(indent).unwrap_or(u32::MAX);
            let has_tab = text.get(..indent).is_some_and(|i| i.contains('\t'));
            // Past the indentation (ASCII, so bytes = chars).
            for _ in 0..indent {
                self.bump();
            }
            let line_span = Span::new(self.line, 1, indent_chars);
            if has_tab {
                self.error(Code::E003, line_span, "tab in indentation");
                return;
            }
            let width = info.spaces;
            let top = self.indents.last().copied().unwrap_or(0);
            if width > top {
                if self.indents.len() > MAX_INDENT_LEVELS {
                    self.error(
                        Code::E003,
                        line_span,
                        format!("more than {MAX_INDENT_LEVELS} indentation levels"),
                    );
                    return;
                }
                self.indents.push(width);
                self.emit_virtual(Tok::Indent, line_span);
            } else if width < top {
                let mut pops = 0usize;
                while self.indents.last().is_some_and(|w| *w > width) {
                    self.indents.pop();
                    pops += 1;
                }
                if self.indents.last().copied().unwrap_or(0) != width {
                    self.error(
                        Code::E003,
                        line_span,
                        format!("indentation of {width} does not match any outer level"),
                    );
                    return;
                }
                let dedent_span = Span::new(self.line, 1, 1);
                for _ in 0..pops {
                    self.emit_virtual(Tok::Dedent, dedent_span);
                }
            }
            self.line_indent = width;
            self.bol_next = true;
            return;
        }
    }

    /// At the end of the text: the last NEWLINE, an unclosed bracket (E002), the DEDENTs, EOF.
    fn finish(&mut self) {
        let span = self.end_span();
        if let Some((open, at, offset)) = self.brackets.first().cloned() {
            self.unclosed = Some((offset, at.line, at.col.saturating_add(1)));
            self.brackets.clear();
            let close = match open {
                Tok::LBrace => "}",
                Tok::LParen => ")",
                _ => "]",
            };
            self.error(
                Code::E002,
                span,
                format!(
                    "expected \"{close}\" to close the bracket at line {}, found end of file",
                    at.line
                ),
            );
        }
        if self.line_tokens > 0 {
            self.emit_virtual(Tok::Newline, span);
            self.end_line();
        }
        while self.indents.len() > 1 {
            self.indents.pop();
            self.emit_virtual(Tok::Dedent, span);
        }
        self.emit_virtual(Tok::Eof, span);
    }

    /// Lexes one token starting with `c` (not a blank, `#` or newline).
    fn token(&mut self, c: char) {
        let (line, col) = (self.line, self.col);
        let at = |w: u32| Span::new(line, col, w);
        match c {
            '"' => self.quoted(),
            '`' => self.raw(),
            ':' => {
                self.bump();
                let prompt_header = self.brackets.is_empty()
                    && self.line_indent == 0
                    && self.line_tokens == 2
                    && self.first_is_prompt
                    && self.second_is_ident
                    && self.rest_of_line_is_empty();
                self.emit(Tok::Colon, at(1));
                if prompt_header {
                    self.prompt_body();
                }
            }
            '|' => {
                self.bump();
                if self.prev_colon && self.brackets.is_empty() && self.rest_of_line_is_empty() {
                    self.block_scalar(at(1));
                } else {
                    self.error(Code::E001, at(1), "unexpected \"|\"");
                }
            }
            '-' if self.peek2() == Some('>') => {
                self.bump();
                self.bump();
                self.emit(Tok::Arrow, at(2));
            }
            '=' | ',' => {
                self.bump();
                self.emit(if c == '=' { Tok::Eq } else { Tok::Comma }, at(1));
            }
            '[' | '{' | '(' => {
                self.bump();
                let tok = match c {
                    '[' => Tok::LBracket,
                    '{' => Tok::LBrace,
                    _ => Tok::LParen,
                };
                self.brackets.push((tok.clone(), at(1), self.pos));
                self.emit(tok, at(1));
            }
            ']' | '}' | ')' => {
                self.bump();
                // A mismatched closer still closes: the parser reports the mismatch.
                self.brackets.pop();
                let tok = match c {
                    ']' => Tok::RBracket,
                    '}' => Tok::RBrace,
                    _ => Tok::RParen,
                };
                self.emit(tok, at(1));
            }
            c if ident_start(c) => {
                let rest = self.rest();
                let mut len = rest
                    .find(|ch: char| !ident_continue(ch))
                    .unwrap_or(rest.len());
                // Inside `[…]` a dotted name (`board.read`, upstream's capability names) is one
                // IDENT; whatever list takes it judges it.
                // A dotted name may end in `.*` (`mcp.SERVER.*`, every tool of a server).
                if matches!(self.brackets.last(), Some((Tok::LBracket, ..))) {
                    while let Some(after) = rest.get(len..).and_then(|r| r.strip_prefix('.')) {
                        if after.starts_with('*') {
                            len += 2;
                            break;
                        }
                        if !after.chars().next().is_some_and(ident_start) {
                            break;
                        }
                        len += 1 + after
                            .find(|ch: char| !ident_continue(ch))
                            .unwrap_or(after.len());
                    }
                }
                let word = rest.get(..len).unwrap_or("");
                let type_list =
                    word == "string" && rest.get(len..).is_some_and(|r| r.starts_with("[]"));
                let word = word.to_owned();
                let n = if type_list { len + 2 } else { len };
                for _ in 0..n {
                    self.bump();
                }
                let w = u32::try_from(n).unwrap_or(u32::MAX);
                if type_list {
                    self.emit(Tok::TypeList, at(w));
                } else {
                    self.emit(Tok::Ident(word), at(w));
                }
            }
            c if c.is_ascii_digit() => {
                let rest = self.rest();
                let int_len = rest
                    .find(|ch: char| !ch.is_ascii_digit())
                    .unwrap_or(rest.len());
                let after = rest.get(int_len..).unwrap_or("");
                let frac_len = match after.strip_prefix('.') {
                    Some(frac) => frac
                        .find(|ch: char| !ch.is_ascii_digit())
                        .unwrap_or(frac.len()),
                    None => 0,
                };
                let n = if frac_len > 0 {
                    int_len + 1 + frac_len
                } else {
                    int_len
                };
                let text = rest.get(..n).unwrap_or("").to_owned();
                for _ in 0..n {
                    self.bump();
                }
                let w = u32::try_from(n).unwrap_or(u32::MAX);
                if frac_len > 0 {
                    let value = text.parse::<f64>().unwrap_or(f64::INFINITY);
                    self.emit(Tok::Float { value, text }, at(w));
                } else {
                    let value = text.parse::<i64>().ok();
                    self.emit(Tok::Int { value, text }, at(w));
                }
            }
            other => {
                self.bump();
                self.error(
                    Code::E001,
                    at(1),
                    format!("unexpected {}", show_char(other)),
                );
            }
        }
    }

    // ----- strings ------------------------------------------------------------------------

    /// `"…"` (§1.5): kept as written, or decoded under `strict-escape: on`.
    fn quoted(&mut self) {
        let (line, col) = (self.line, self.col);
        let open = Span::new(line, col, 1);
        self.bump();
        let mut value = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => {
                    self.error(Code::E004, open, "unterminated quoted string");
                    return;
                }
                Some('"') => {
                    self.bump();
                    break;
                }
                Some('\\') => {
                    let backslash = Span::new(self.line, self.col, 2);
                    self.bump();
                    let next = match self.peek() {
                        None | Some('\n') => {
                            self.error(Code::E004, open, "unterminated quoted string");
                            return;
                        }
                        Some(n) => n,
                    };
                    self.bump();
                    if self.strict {
                        let decoded = match next {
                            '"' => '"',
                            '\\' => '\\',
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            '0' => '\0',
                            other => {
                                self.error(
                                    Code::E005,
                                    backslash,
                                    format!("unknown escape \\{other}"),
                                );
                                return;
                            }
                        };
                        value.push(decoded);
                    } else {
                        value.push('\\');
                        value.push(next);
                    }
                }
                Some(c) => {
                    self.bump();
                    value.push(c);
                }
            }
        }
        let span = Span::new(line, col, self.col.saturating_sub(col));
        if !self.strict && value.contains("\\\"") {
            self.backslash_quotes.push(span);
        }
        let lit = StrLit {
            value,
            kind: StrKind::Quoted,
            span,
            lines: vec![LineStart {
                value_offset: 0,
                line,
                col: col.saturating_add(1),
            }],
        };
        self.emit(Tok::Str(lit), span);
    }

    /// `` `…` `` (§1.5): everything up to the next backtick, line breaks included.
    fn raw(&mut self) {
        let (line, col) = (self.line, self.col);
        let open = Span::new(line, col, 1);
        self.bump();
        let rest = self.rest();
        let Some(len) = rest.find('`') else {
            self.error(Code::E004, open, "unterminated raw string");
            // Nothing after an unterminated raw string is code: it runs to the end of the file.
            let end = self.src.len();
            while self.pos < end {
                self.bump();
            }
            return;
        };
        let value = rest.get(..len).unwrap_or("").to_owned();
        let mut lines = vec![LineStart {
            value_offset: 0,
            line,
            col: col.saturating_add(1),
        }];
        let mut cur_line = line;
        for (i, ch) in value.chars().enumerate() {
            if ch == '\n' {
                cur_line = cur_line.saturating_add(1);
                lines.push(LineStart {
                    value_offset: i + 1,
                    line: cur_line,
                    col: 1,
                });
            }
        }
        let first_line = value.split('\n').next().unwrap_or("");
        let width = if lines.len() > 1 {
            width_of(first_line).saturating_add(1)
        } else {
            width_of(first_line).saturating_add(2)
        };
        // Past the content and the closing backtick.
        let target = self.pos + len + 1;
        while self.pos < target && self.bump().is_some() {}
        let span = Span::new(line, col, width);
        let lit = StrLit {
            value,
            kind: StrKind::Raw,
            span,
            lines,
        };
        self.emit(Tok::Str(lit), span);
    }
}

#[cfg(test)]
#[path = "lexer_tests.rs"]
mod tests;

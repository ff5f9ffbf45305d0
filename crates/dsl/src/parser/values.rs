//! Values (DSL.md §2.1 `value`) and the value kinds of §3: string, word, int, bool, lists, map,
//! prompt and name references, with their E021 / E020 checks.

use super::{MAX_NESTING, PResult, Parser, check_reserved, diag, preview};
use crate::ast::{self, LineStart, Span, StrKind, StrLit, Value};
use crate::diag::{Code, Diagnostic};
use crate::lexer::{Tok, is_ident};

/// A parsed value. Scalars keep their source spelling, which a `map` property uses for numbers
/// and bools (§3).
#[derive(Debug)]
pub(super) enum PVal {
    /// A string, IDENT, INT, FLOAT or BOOL, with its spelling.
    Scalar(Value, String),
    /// `[ … ]`.
    List(Vec<Value>, Span),
    /// `{ … }`, entries with the spelling of scalar values.
    Map(Vec<(ast::Ident, Value, String)>, Span),
}

impl PVal {
    /// The first token's position.
    pub(super) fn span(&self) -> Span {
        match self {
            PVal::Scalar(v, _) => v.span(),
            PVal::List(_, s) | PVal::Map(_, s) => *s,
        }
    }

    /// As a syntax-tree value.
    pub(super) fn into_value(self) -> Value {
        match self {
            PVal::Scalar(v, _) => v,
            PVal::List(items, s) => Value::List(items, s),
            PVal::Map(entries, s) => {
                Value::Map(entries.into_iter().map(|(k, v, _)| (k, v)).collect(), s)
            }
        }
    }

    /// How the value is shown in E021 / E020.
    pub(super) fn show(&self) -> String {
        match self {
            PVal::Scalar(v, _) => show(v),
            PVal::List(..) => "a list".to_owned(),
            PVal::Map(..) => "a map".to_owned(),
        }
    }
}

/// A property's value after `key:` (§2.1 `property`).
pub(super) enum Prop {
    /// `key: value` (the NEWLINE is not consumed yet).
    Value(PVal),
    /// `key:` and an indented block (its INDENT not consumed); the span is the block's first
    /// token.
    Nested(Span),
    /// `key:` with nothing after it; the span is the end of the line.
    Empty(Span),
}

/// A value shown in a message.
fn show(v: &Value) -> String {
    match v {
        Value::Str(s) => preview(s),
        Value::Ident(i) => i.name.clone(),
        Value::Int(n, _) => n.to_string(),
        Value::Float(f, _) => f.to_string(),
        Value::Bool(b, _) => b.to_string(),
        Value::List(..) => "a list".to_owned(),
        Value::Map(..) => "a map".to_owned(),
    }
}

/// E021: `{key} expects {kind}, found {v}`.
pub(super) fn kind_error(key: &str, kind: &str, span: Span, found: &str) -> Box<Diagnostic> {
    diag(
        Code::E021,
        span,
        format!("{key} expects {kind}, found {found}"),
    )
}

fn mismatch(key: &str, kind: &str, v: &PVal) -> Box<Diagnostic> {
    kind_error(key, kind, v.span(), &v.show())
}

/// A string standing for an IDENT's (or a number's) spelling.
fn spelled(text: String, span: Span) -> StrLit {
    StrLit {
        value: text,
        kind: StrKind::Ident,
        span,
        lines: vec![LineStart {
            value_offset: 0,
            line: span.line,
            col: span.col,
        }],
    }
}

/// A word: an IDENT, or a quoted (or raw) string holding one.
fn as_word(v: &Value) -> Option<ast::Word> {
    match v {
        Value::Ident(i) => Some(ast::Word {
            text: i.name.clone(),
            span: i.span,
        }),
        Value::Str(s) if matches!(s.kind, StrKind::Quoted | StrKind::Raw) && is_ident(&s.value) => {
            Some(ast::Word {
                text: s.value.clone(),
                span: s.span,
            })
        }
        _ => None,
    }
}

/// A string value (§1.5: an IDENT stands for its spelling).
fn as_str(v: Value) -> Result<StrLit, Value> {
    match v {
        Value::Str(s) => Ok(s),
        Value::Ident(i) => Ok(spelled(i.name, i.span)),
        other => Err(other),
    }
}

/// `string`.
pub(super) fn to_str(key: &str, v: PVal) -> PResult<StrLit> {
    let kind = "a string";
    match v {
        PVal::Scalar(value, spelling) => {
            as_str(value).map_err(|other| mismatch(key, kind, &PVal::Scalar(other, spelling)))
        }
        other => Err(mismatch(key, kind, &other)),
    }
}

/// `word`; `kind` names what the word is (a node name, a schema name…).
pub(super) fn to_word(key: &str, kind: &str, v: &PVal) -> PResult<ast::Word> {
    if let PVal::Scalar(value, _) = v
        && let Some(w) = as_word(value)
    {
        return Ok(w);
    }
    Err(mismatch(key, kind, v))
}

/// A name reference (`schema`, `node`).
pub(super) fn to_ref(key: &str, kind: &str, v: &PVal) -> PResult<ast::Ident> {
    to_word(key, kind, v).map(|w| ast::Ident {
        name: w.text,
        span: w.span,
    })
}

/// `int`, at least `min` when given.
pub(super) fn to_int(key: &str, v: &PVal, min: Option<i64>) -> PResult<ast::IntLit> {
    let kind = match min {
        Some(m) => format!("an int of at least {m}"),
        None => "an int".to_owned(),
    };
    match v {
        PVal::Scalar(Value::Int(n, span), _) if min.is_none_or(|m| *n >= m) => Ok(ast::IntLit {
            value: *n,
            span: *span,
        }),
        _ => Err(mismatch(key, &kind, v)),
    }
}

/// `bool`.
pub(super) fn to_bool(key: &str, v: &PVal) -> PResult<ast::BoolLit> {
    match v {
        PVal::Scalar(Value::Bool(b, span), _) => Ok(ast::BoolLit {
            value: *b,
            span: *span,
        }),
        _ => Err(mismatch(key, "true or false", v)),
    }
}

/// `list of strings`.
pub(super) fn to_str_list(key: &str, v: PVal) -> PResult<ast::StrList> {
    let kind = "a list of strings";
    let PVal::List(items, span) = v else {
        return Err(mismatch(key, kind, &v));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match as_str(item) {
            Ok(s) => out.push(s),
            Err(other) => return Err(kind_error(key, kind, other.span(), &show(&other))),
        }
    }
    Ok(ast::StrList { items: out, span })
}

/// `list of words`.
pub(super) fn to_word_list(key: &str, v: &PVal) -> PResult<ast::WordList> {
    let kind = "a list of words";
    let PVal::List(items, span) = v else {
        return Err(mismatch(key, kind, v));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match as_word(item) {
            Some(w) => out.push(w),
            None => return Err(kind_error(key, kind, item.span(), &show(item))),
        }
    }
    Ok(ast::WordList {
        items: out,
        span: *span,
    })
}

/// `prompt`: an IDENT names a prompt, any string is inline text.
pub(super) fn to_prompt(key: &str, v: PVal) -> PResult<ast::PromptRef> {
    match v {
        PVal::Scalar(Value::Ident(i), _) => Ok(ast::PromptRef::Named(i)),
        PVal::Scalar(Value::Str(s), _) => Ok(ast::PromptRef::Inline(s)),
        other => Err(mismatch(key, "a prompt name or a string", &other)),
    }
}

/// A map entry's value: a string, or a number / bool taken as its spelling.
pub(super) fn map_entry_value(key: &ast::Ident, v: PVal) -> PResult<StrLit> {
    match v {
        PVal::Scalar(Value::Str(s), _) => Ok(s),
        PVal::Scalar(
            value @ (Value::Ident(_) | Value::Int(..) | Value::Float(..) | Value::Bool(..)),
            spelling,
        ) => Ok(spelled(spelling, value.span())),
        other => Err(mismatch(&key.name, "a string", &other)),
    }
}

/// Whether `at` starts a line at indentation 0 after the line of the bracket `open`.
fn starts_line(at: Span, open: Span) -> bool {
    at.col == 1 && at.line > open.line
}

/// Joins enumeration words: `a`, `a or b`, `a, b or c`.
fn one_of(words: &[&str]) -> String {
    match words.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// A word from an enumeration checked at parse stage (E020; E021 when not a word).
pub(super) fn to_enum<T: Copy>(key: &str, v: &PVal, options: &[(&str, T)]) -> PResult<(T, Span)> {
    let w = to_word(key, "a word", v)?;
    if let Some((_, t)) = options.iter().find(|(name, _)| *name == w.text) {
        return Ok((*t, w.span));
    }
    let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
    Err(diag(
        Code::E020,
        w.span,
        format!(
            "\"{}\" is not a valid {key}; expected {}",
            w.text,
            one_of(&names)
        ),
    ))
}

/// A literal model matches `[a-z0-9_]+/\S+`, or is a bare model name `\S+` without `/`
/// (§3.5: the provider then comes from `provider:`, the backend or the name).
pub(super) fn is_model_shape(s: &str) -> bool {
    let Some((provider, model)) = s.split_once('/') else {
        return !s.is_empty() && !s.chars().any(char::is_whitespace);
    };
    !provider.is_empty()
        && provider
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !model.is_empty()
        && !model.chars().any(char::is_whitespace)
}

/// A `max_duration` value (§3.8): one or more `INT unit` pairs, units `h`, `m`, `s`, `ms`, in
/// milliseconds; `None` when malformed, zero, or beyond `u64` milliseconds. Shared with the IR.
pub(crate) fn duration_ms(s: &str) -> Option<u64> {
    let mut rest = s;
    let mut total: u64 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest.get(..digits)?.parse().ok()?;
        rest = rest.get(digits..)?;
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('s') {
            (1_000, 1)
        } else {
            return None;
        };
        rest = rest.get(len..)?;
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    (total > 0).then_some(total)
}

impl Parser<'_> {
    /// One value; `key` names it in messages; `depth` counts enclosing lists and maps.
    pub(super) fn value(&mut self, key: &str, depth: u32) -> PResult<PVal> {
        let t = self.peek();
        let span = t.span;
        match &t.tok {
            Tok::LBracket => return self.list(key, depth, span),
            Tok::LBrace => return self.map(depth, span),
            Tok::Int { value: None, text } => {
                return Err(kind_error(key, "an int in i64 range", span, text));
            }
            Tok::Str(_) | Tok::Block(_) | Tok::Ident(_) | Tok::Int { .. } | Tok::Float { .. } => {}
            _ => return Err(self.unexpected(Some("a value"))),
        }
        let t = self.bump();
        Ok(match t.tok {
            Tok::Str(s) | Tok::Block(s) => {
                let text = s.value.clone();
                PVal::Scalar(Value::Str(s), text)
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => PVal::Scalar(Value::Bool(true, span), name),
                "false" => PVal::Scalar(Value::Bool(false, span), name),
                _ => PVal::Scalar(
                    Value::Ident(ast::Ident {
                        name: name.clone(),
                        span,
                    }),
                    name,
                ),
            },
            Tok::Int { value, text } => PVal::Scalar(Value::Int(value.unwrap_or(0), span), text),
            Tok::Float { value, text } => PVal::Scalar(Value::Float(value, span), text),
            _ => return Err(diag(Code::E001, span, "unexpected token")),
        })
    }

    fn too_deep(open: &str, span: Span) -> Box<Diagnostic> {
        diag(
            Code::E001,
            span,
            format!("unexpected \"{open}\": values nest at most {MAX_NESTING} levels deep"),
        )
    }

    /// E002 for a list or map that does not go on: when the token found starts a line at
    /// indentation 0 (or is the end of the file), the bracket was most likely never closed.
    /// `col1` says an item or key already started a line at indentation 0.
    fn unclosed(
        &mut self,
        expected: &str,
        bracket: &str,
        open: Span,
        col1: bool,
    ) -> Box<Diagnostic> {
        let t = self.peek();
        let likely = col1 || starts_line(t.span, open) || matches!(t.tok, Tok::Eof);
        let d = self.unexpected(Some(expected));
        if likely && d.code == Code::E002 {
            return Box::new(d.with_hint(format!(
                "the \"{bracket}\" at line {} is not closed",
                open.line
            )));
        }
        d
    }

    /// `[ v, … ]` (the `[` is current).
    fn list(&mut self, key: &str, depth: u32, open: Span) -> PResult<PVal> {
        if depth >= MAX_NESTING {
            return Err(Self::too_deep("[", open));
        }
        self.bump();
        let mut items = Vec::new();
        let mut col1 = false;
        loop {
            if matches!(self.peek().tok, Tok::RBracket) {
                self.bump();
                break;
            }
            let item = self.value(key, depth + 1)?;
            col1 |= starts_line(item.span(), open);
            items.push(item.into_value());
            match self.peek().tok {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RBracket => {
                    self.bump();
                    break;
                }
                _ => return Err(self.unclosed("\",\" or \"]\"", "[", open, col1)),
            }
        }
        Ok(PVal::List(items, open))
    }

    /// `{ K: v, … }` (the `{` is current). A key given twice is E010.
    fn map(&mut self, depth: u32, open: Span) -> PResult<PVal> {
        if depth >= MAX_NESTING {
            return Err(Self::too_deep("{", open));
        }
        self.bump();
        let mut entries: Vec<(ast::Ident, Value, String)> = Vec::new();
        let mut seen = std::collections::HashMap::new();
        let mut col1 = false;
        loop {
            if matches!(self.peek().tok, Tok::RBrace) {
                self.bump();
                break;
            }
            let t = self.peek();
            let Tok::Ident(name) = &t.tok else {
                return Err(self.unexpected(Some("a key")));
            };
            let k = ast::Ident {
                name: name.clone(),
                span: t.span,
            };
            if let Some(line) = seen.get(&k.name) {
                return Err(diag(
                    Code::E010,
                    k.span,
                    format!("key \"{}\" already declared at line {line}", k.name),
                ));
            }
            seen.insert(k.name.clone(), k.span.line);
            col1 |= starts_line(k.span, open);
            let line = k.span.line;
            self.bump();
            self.expect_colon()?;
            let v = self.value(&k.name, depth + 1)?;
            let spelling = match &v {
                PVal::Scalar(_, s) => s.clone(),
                _ => String::new(),
            };
            entries.push((k, v.into_value(), spelling));
            let next = self.peek();
            let next_line = next.span.line;
            match next.tok {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RBrace => {
                    self.bump();
                    break;
                }
                // Upstream's multi-line maps: a key starting a later line separates entries
                // as a comma does (`with {` one entry per line).
                Tok::Ident(_) if next_line > line => {}
                _ => return Err(self.unclosed("\",\" or \"}\"", "{", open, col1)),
            }
        }
        Ok(PVal::Map(entries, open))
    }

    /// After a property key: `:` then a value, a nested block, or nothing.
    pub(super) fn prop(&mut self, key: &ast::Ident) -> PResult<Prop> {
        self.expect_colon()?;
        let t = self.peek();
        let span = t.span;
        match t.tok {
            Tok::Newline => {
                self.bump();
                self.lexer_error()?;
                if matches!(self.peek().tok, Tok::Indent) {
                    Ok(Prop::Nested(self.peek_at(1).span))
                } else {
                    Ok(Prop::Empty(span))
                }
            }
            Tok::Eof => Ok(Prop::Empty(span)),
            _ => Ok(Prop::Value(self.value(&key.name, 0)?)),
        }
    }

    /// A property that takes one value (not a block): converts it with `conv`, then expects the
    /// end of the line.
    pub(super) fn scalar_prop<T>(
        &mut self,
        key: &ast::Ident,
        kind: &str,
        conv: impl FnOnce(PVal) -> PResult<T>,
    ) -> PResult<T> {
        match self.prop(key)? {
            Prop::Value(v) => {
                let out = conv(v)?;
                self.end_line()?;
                Ok(out)
            }
            Prop::Nested(span) => Err(kind_error(&key.name, kind, span, "a nested block")),
            Prop::Empty(span) => Err(diag(
                Code::E002,
                span,
                format!("expected {kind} after \"{}:\", found end of line", key.name),
            )),
        }
    }

    /// `string`.
    pub(super) fn str_prop(&mut self, key: &ast::Ident) -> PResult<StrLit> {
        self.scalar_prop(key, "a string", |v| to_str(&key.name, v))
    }

    /// `word`.
    pub(super) fn word_prop(&mut self, key: &ast::Ident, kind: &str) -> PResult<ast::Word> {
        self.scalar_prop(key, kind, |v| to_word(&key.name, kind, &v))
    }

    /// `schema` / `node` reference.
    pub(super) fn ref_prop(&mut self, key: &ast::Ident, kind: &str) -> PResult<ast::Ident> {
        self.scalar_prop(key, kind, |v| to_ref(&key.name, kind, &v))
    }

    /// `int ≥ min`.
    pub(super) fn int_prop(&mut self, key: &ast::Ident, min: Option<i64>) -> PResult<ast::IntLit> {
        self.scalar_prop(key, "an int", |v| to_int(&key.name, &v, min))
    }

    /// `bool`.
    pub(super) fn bool_prop(&mut self, key: &ast::Ident) -> PResult<ast::BoolLit> {
        self.scalar_prop(key, "true or false", |v| to_bool(&key.name, &v))
    }

    /// `list of strings`.
    pub(super) fn str_list_prop(&mut self, key: &ast::Ident) -> PResult<ast::StrList> {
        self.scalar_prop(key, "a list of strings", |v| to_str_list(&key.name, v))
    }

    /// `list of words`.
    pub(super) fn word_list_prop(&mut self, key: &ast::Ident) -> PResult<ast::WordList> {
        self.scalar_prop(key, "a list of words", |v| to_word_list(&key.name, &v))
    }

    /// `prompt`.
    pub(super) fn prompt_prop(&mut self, key: &ast::Ident) -> PResult<ast::PromptRef> {
        self.scalar_prop(key, "a prompt name or a string", |v| {
            to_prompt(&key.name, v)
        })
    }

    /// An enumeration checked at parse stage (E020).
    pub(super) fn enum_prop<T: Copy>(
        &mut self,
        key: &ast::Ident,
        options: &[(&str, T)],
    ) -> PResult<(T, Span)> {
        self.scalar_prop(key, "a word", |v| to_enum(&key.name, &v, options))
    }

    /// `map`: inline `{ … }`, or a nested block of `NAME: value` lines.
    pub(super) fn map_prop(&mut self, key: &ast::Ident) -> PResult<ast::MapValue> {
        match self.prop(key)? {
            Prop::Value(PVal::Map(entries, span)) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v, spelling) in entries {
                    let v = match v {
                        Value::List(items, span) => PVal::List(items, span),
                        Value::Map(_, span) => PVal::Map(Vec::new(), span),
                        scalar => PVal::Scalar(scalar, spelling),
                    };
                    let value = map_entry_value(&k, v)?;
                    out.push(ast::MapEntry { key: k, value });
                }
                self.end_line()?;
                Ok(ast::MapValue { entries: out, span })
            }
            Prop::Value(other) => Err(mismatch(&key.name, "a map", &other)),
            Prop::Empty(_) => Ok(ast::MapValue {
                entries: Vec::new(),
                span: key.span,
            }),
            Prop::Nested(_) => {
                let mut entries = Vec::new();
                let mut seen = std::collections::HashMap::new();
                self.block_lines(|p| {
                    let k = p.prop_key()?;
                    if let Some(line) = seen.get(&k.name) {
                        return Err(diag(
                            Code::E010,
                            k.span,
                            format!("key \"{}\" already declared at line {line}", k.name),
                        ));
                    }
                    seen.insert(k.name.clone(), k.span.line);
                    let value = p.scalar_prop(&k, "a string", |v| map_entry_value(&k, v))?;
                    entries.push(ast::MapEntry { key: k, value });
                    Ok(())
                })?;
                Ok(ast::MapValue {
                    entries,
                    span: key.span,
                })
            }
        }
    }

    /// A property that takes a nested block of properties from `valid` (an empty one
    /// included); a value instead is E021.
    pub(super) fn block_prop(
        &mut self,
        key: &ast::Ident,
        valid: &[&str],
        each: impl FnMut(&mut Self, ast::Ident) -> PResult<()>,
    ) -> PResult<()> {
        match self.prop(key)? {
            Prop::Value(v) => Err(mismatch(&key.name, "a block", &v)),
            Prop::Empty(_) => Ok(()),
            Prop::Nested(_) => self.props(&key.name, valid, each),
        }
    }

    /// A name used in an edge (any IDENT; `done` and `fail` are allowed, other reserved words
    /// are E011).
    pub(super) fn edge_end(&mut self, what: &str) -> PResult<ast::Ident> {
        let t = self.peek();
        let Tok::Ident(n) = &t.tok else {
            return Err(self.unexpected(Some(what)));
        };
        let ident = ast::Ident {
            name: n.clone(),
            span: t.span,
        };
        if ident.name != "done" && ident.name != "fail" {
            check_reserved(&ident)?;
        }
        self.bump();
        Ok(ident)
    }
}

//! The `when "…"` expression language (DSL.md §5.2): lexer, parser, static facts and evaluator.
//!
//! The checker parses every expression once ([`parse`]) and reports C040 / C138 from the
//! [`ExprError`]; it reads the [`Path`]s an expression uses ([`Expr::paths`]) for C014 and the
//! namespace checks. The engine evaluates a parsed expression against a scope object at run time
//! ([`Expr::eval`], [`Expr::eval_condition`]).
//!
//! The language is deliberately small (D12): no truthiness (`and`/`or`/`not` need bools), a few
//! builtins, and upstream's arithmetic (`+ - * / %` and unary `-`: integers stay integers and
//! overflow or division by zero is an evaluation error, `+` also joins strings). Nesting is bounded by [`MAX_DEPTH`] so a hostile expression is a
//! C040, never a stack overflow; `a or b or c …` chains are n-ary and do not nest.

use std::cmp::Ordering;

use serde_json::{Number, Value};

use crate::diag::Code;
use crate::template::Namespace;

/// The deepest nesting of `not`, parentheses and calls an expression may have (C040 beyond).
pub const MAX_DEPTH: usize = 64;

/// The builtins (§5.2). Anything else called is C040.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// `length(v)`.
    Length,
    /// `contains(a, b)`.
    Contains,
    /// `concat(list, …)`: the lists one after the other (`null` counts as `[]`).
    Concat,
    /// `unique(list)`: the list without repeated elements, first occurrence kept.
    Unique,
    /// `join(list, sep)`: the elements' text joined by `sep`.
    Join,
    /// `if(cond, then, else)`: only the chosen branch is evaluated.
    If,
    /// `floor(n)`: the largest integer not above `n`.
    Floor,
    /// `round(n)`: the nearest integer, halves away from zero.
    Round,
    /// `min(a, …)` / `min(list)`: the smallest number.
    Min,
    /// `max(a, …)` / `max(list)`: the largest number.
    Max,
    /// `sort(list)`: numbers or strings, ascending.
    Sort,
    /// `tail(list, n)`: the last `n` elements.
    Tail,
    /// `slice(list, from, to)`: elements `from..to` (clamped to the list).
    Slice,
}

impl Func {
    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            Func::Length => "length",
            Func::Contains => "contains",
            Func::Concat => "concat",
            Func::Unique => "unique",
            Func::Join => "join",
            Func::If => "if",
            Func::Floor => "floor",
            Func::Round => "round",
            Func::Min => "min",
            Func::Max => "max",
            Func::Sort => "sort",
            Func::Tail => "tail",
            Func::Slice => "slice",
        }
    }

    /// How many arguments it takes (C138 otherwise); `concat` takes at least this many.
    pub fn arity(self) -> usize {
        match self {
            Func::Length
            | Func::Unique
            | Func::Concat
            | Func::Floor
            | Func::Round
            | Func::Min
            | Func::Max
            | Func::Sort => 1,
            Func::Contains | Func::Join | Func::Tail => 2,
            Func::If | Func::Slice => 3,
        }
    }

    /// Whether it takes any number of arguments from [`Func::arity`] up.
    pub fn variadic(self) -> bool {
        matches!(self, Func::Concat | Func::Min | Func::Max)
    }

    fn from_name(name: &str) -> Option<Func> {
        [
            Func::Length,
            Func::Contains,
            Func::Concat,
            Func::Unique,
            Func::Join,
            Func::If,
            Func::Floor,
            Func::Round,
            Func::Min,
            Func::Max,
            Func::Sort,
            Func::Tail,
            Func::Slice,
        ]
        .into_iter()
        .find(|f| f.as_str() == name)
    }
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl CmpOp {
    /// The spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A path as written: `IDENT { "." IDENT }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The identifiers as written.
    pub segments: Vec<String>,
}

impl Path {
    /// The namespace: the first segment when it names one, otherwise `input` (a bare name is a
    /// field of the source's output, §5.2).
    pub fn namespace(&self) -> Namespace {
        self.segments
            .first()
            .and_then(|s| Namespace::from_word(s))
            .unwrap_or(Namespace::Input)
    }

    /// Whether the path is a bare field name (`approved` for `input.approved`).
    pub fn is_bare(&self) -> bool {
        self.segments
            .first()
            .is_none_or(|s| Namespace::from_word(s).is_none())
    }

    /// The segments after the namespace (all of them for a bare path).
    pub fn rest(&self) -> &[String] {
        if self.is_bare() {
            &self.segments
        } else {
            self.segments.get(1..).unwrap_or_default()
        }
    }

    /// The value in a scope object keyed by namespace; `None` when it cannot be resolved.
    pub fn lookup<'v>(&self, scope: &'v Value) -> Option<&'v Value> {
        let mut cur = scope.get(self.namespace().as_str())?;
        for seg in self.rest() {
            cur = cur.as_object()?.get(seg)?;
        }
        Some(cur)
    }

    /// The path as written, dotted.
    pub fn dotted(&self) -> String {
        self.segments.join(".")
    }
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number, string, `true`, `false` or `null`.
    Literal(Value),
    /// A path.
    Path(Path),
    /// `not e` / `!e`.
    Not(Box<Expr>),
    /// `a and b and …` (two or more operands).
    And(Vec<Expr>),
    /// `a or b or …` (two or more operands).
    Or(Vec<Expr>),
    /// `a OP b`.
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    /// A builtin call with the right number of arguments.
    Call(Func, Vec<Expr>),
    /// `a OP b` for an arithmetic operator.
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    /// `-e`.
    Neg(Box<Expr>),
}

/// An arithmetic operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    /// `+`: numbers, or two strings / a string and a number (joined as text).
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`: integer division on two integers.
    Div,
    /// `%`: integers only.
    Rem,
}

impl ArithOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Rem => "%",
        }
    }
}

/// Why an expression was refused at compile time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// Not in the grammar (C040).
    #[error("invalid expression: {detail}")]
    Syntax {
        /// What was expected and found.
        detail: String,
    },
    /// A call to something other than `length` / `contains` (C040).
    #[error("invalid expression: unknown function \"{name}\"")]
    UnknownFunction {
        /// The name called.
        name: String,
    },
    /// A string escape other than `\\`, `\'`, `\"`, `\n`, `\t` (C040).
    #[error("invalid expression: unknown escape \\{escape} in a string")]
    BadEscape {
        /// The character after the backslash.
        escape: char,
    },
    /// A path into `secrets`: secrets never take part in routing (C040).
    #[error("invalid expression: secrets cannot be read in an expression")]
    SecretsPath,
    /// Nested deeper than [`MAX_DEPTH`] (C040).
    #[error("invalid expression: nested more than {MAX_DEPTH} levels")]
    TooDeep,
    /// A builtin with the wrong number of arguments (C138).
    #[error("{}() takes {}{} argument(s)", func.as_str(), if func.variadic() { "at least " } else { "" }, func.arity())]
    Arity {
        /// The builtin.
        func: Func,
        /// How many were passed.
        found: usize,
    },
}

impl ExprError {
    /// C040, or C138 for a wrong argument count.
    pub fn code(&self) -> Code {
        match self {
            ExprError::Syntax { .. }
            | ExprError::UnknownFunction { .. }
            | ExprError::BadEscape { .. }
            | ExprError::SecretsPath
            | ExprError::TooDeep => Code::C040,
            ExprError::Arity { .. } => Code::C138,
        }
    }
}

/// Why an evaluation failed at run time. The edge is then *not taken* and an
/// `edge_condition_error` event carries this reason (§5.2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// `<` `<=` `>` `>=` on anything but two numbers or two strings.
    #[error("{op} needs two numbers or two strings, found {left} and {right}")]
    NotOrdered {
        /// The operator.
        op: &'static str,
        /// The left operand's type.
        left: &'static str,
        /// The right operand's type.
        right: &'static str,
    },
    /// `and` / `or` / `not` on a non-bool (null included).
    #[error("{op} needs bool operands, found {found}")]
    NotBool {
        /// The operator.
        op: &'static str,
        /// The operand's type.
        found: &'static str,
    },
    /// `length` of a bool or number.
    #[error("length() needs a string, list, map or null, found {found}")]
    Length {
        /// The argument's type.
        found: &'static str,
    },
    /// `contains` on anything but a list, two strings, or a null first argument.
    #[error("contains() needs a list, two strings or null, found {a} and {b}")]
    Contains {
        /// The first argument's type.
        a: &'static str,
        /// The second argument's type.
        b: &'static str,
    },
    /// `concat` / `unique` / `join` on something that is not a list (or null).
    #[error("{func}() needs a list (or null), found {found}")]
    NotAList {
        /// The builtin.
        func: &'static str,
        /// The argument's type.
        found: &'static str,
    },
    /// `join` with a separator that is not a string.
    #[error("join() needs a string separator, found {found}")]
    JoinSeparator {
        /// The separator's type.
        found: &'static str,
    },
    /// An arithmetic operator on operands it does not take.
    #[error("{op} needs two numbers{also}, found {left} and {right}")]
    NotArithmetic {
        /// The operator.
        op: &'static str,
        /// What else it takes.
        also: &'static str,
        /// The left operand's type.
        left: &'static str,
        /// The right operand's type.
        right: &'static str,
    },
    /// A numeric builtin given something that is not a number.
    #[error("{func}() needs numbers, found {found}")]
    NotANumber {
        /// The builtin.
        func: &'static str,
        /// The argument's type.
        found: &'static str,
    },
    /// `sort` of a list that is not all numbers or all strings.
    #[error("sort() needs a list of numbers or of strings")]
    Unsortable,
    /// Integer overflow, or division / remainder by zero.
    #[error("{0}")]
    Arithmetic(&'static str),
    /// The expression's result is not a bool.
    #[error("the condition is {found}, not bool")]
    NotACondition {
        /// The result's type.
        found: &'static str,
    },
}

/// The type name of a value in messages: `null`, `bool`, `number`, `string`, `list`, `map`.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(Number),
    Str(String),
    OrOr,
    AndAnd,
    Bang,
    Cmp(CmpOp),
    LParen,
    RParen,
    Comma,
    Dot,
    Arith(ArithOp),
    End,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("\"{s}\""),
        Tok::Num(n) => format!("number {n}"),
        Tok::Str(_) => "a string".to_string(),
        Tok::OrOr => "\"||\"".to_string(),
        Tok::AndAnd => "\"&&\"".to_string(),
        Tok::Bang => "\"!\"".to_string(),
        Tok::Cmp(op) => format!("\"{}\"", op.as_str()),
        Tok::LParen => "\"(\"".to_string(),
        Tok::RParen => "\")\"".to_string(),
        Tok::Comma => "\",\"".to_string(),
        Tok::Dot => "\".\"".to_string(),
        Tok::Arith(op) => format!("\"{}\"", op.as_str()),
        Tok::End => "the end".to_string(),
    }
}

fn syntax(detail: impl Into<String>) -> ExprError {
    ExprError::Syntax {
        detail: detail.into(),
    }
}

fn lex(text: &str) -> Result<Vec<Tok>, ExprError> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied();
    let mut toks = Vec::new();
    let mut i = 0;
    while let Some(c) = at(i) {
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let two = (c, at(i + 1));
        let (tok, len) = match two {
            ('|', Some('|')) => (Tok::OrOr, 2),
            ('&', Some('&')) => (Tok::AndAnd, 2),
            ('=', Some('=')) => (Tok::Cmp(CmpOp::Eq), 2),
            ('!', Some('=')) => (Tok::Cmp(CmpOp::Ne), 2),
            ('<', Some('=')) => (Tok::Cmp(CmpOp::Le), 2),
            ('>', Some('=')) => (Tok::Cmp(CmpOp::Ge), 2),
            ('<', _) => (Tok::Cmp(CmpOp::Lt), 1),
            ('>', _) => (Tok::Cmp(CmpOp::Gt), 1),
            ('!', _) => (Tok::Bang, 1),
            ('(', _) => (Tok::LParen, 1),
            (')', _) => (Tok::RParen, 1),
            (',', _) => (Tok::Comma, 1),
            ('.', _) => (Tok::Dot, 1),
            ('+', _) => (Tok::Arith(ArithOp::Add), 1),
            ('-', _) => (Tok::Arith(ArithOp::Sub), 1),
            ('*', _) => (Tok::Arith(ArithOp::Mul), 1),
            ('/', _) => (Tok::Arith(ArithOp::Div), 1),
            ('%', _) => (Tok::Arith(ArithOp::Rem), 1),
            ('\'' | '"', _) => {
                let mut s = String::new();
                let mut j = i + 1;
                loop {
                    match at(j) {
                        None => return Err(syntax("unterminated string")),
                        Some('\\') => match at(j + 1) {
                            Some(e @ ('\\' | '\'' | '"')) => {
                                s.push(e);
                                j += 2;
                            }
                            // As upstream's expressions: `join(xs, '\n')`.
                            Some(e @ ('n' | 't')) => {
                                s.push(if e == 'n' { '\n' } else { '\t' });
                                j += 2;
                            }
                            Some(e) => return Err(ExprError::BadEscape { escape: e }),
                            None => return Err(syntax("unterminated string")),
                        },
                        Some(q) if q == c => break,
                        Some(other) => {
                            s.push(other);
                            j += 1;
                        }
                    }
                }
                toks.push(Tok::Str(s));
                i = j + 1;
                continue;
            }
            _ if c.is_ascii_digit() => {
                let start = i;
                let mut j = i + 1;
                while at(j).is_some_and(|d| d.is_ascii_digit()) {
                    j += 1;
                }
                let mut float = false;
                if at(j) == Some('.') && at(j + 1).is_some_and(|d| d.is_ascii_digit()) {
                    float = true;
                    j += 1;
                    while at(j).is_some_and(|d| d.is_ascii_digit()) {
                        j += 1;
                    }
                }
                let spelled: String = chars.get(start..j).unwrap_or_default().iter().collect();
                let number = if float {
                    spelled.parse::<f64>().ok().and_then(Number::from_f64)
                } else {
                    spelled.parse::<i64>().ok().map(Number::from)
                };
                match number {
                    Some(n) => toks.push(Tok::Num(n)),
                    None => return Err(syntax(format!("number {spelled} is out of range"))),
                }
                i = j;
                continue;
            }
            _ if c.is_ascii_alphabetic() || c == '_' => {
                let mut j = i + 1;
                while at(j).is_some_and(|d| d.is_ascii_alphanumeric() || d == '_') {
                    j += 1;
                }
                toks.push(Tok::Ident(
                    chars.get(i..j).unwrap_or_default().iter().collect(),
                ));
                i = j;
                continue;
            }
            _ => return Err(syntax(format!("unexpected character {c:?}"))),
        };
        toks.push(tok);
        i += len;
    }
    toks.push(Tok::End);
    Ok(toks)
}

// ---------------------------------------------------------------------------------------------
// Parser

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).unwrap_or(&Tok::End)
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == kw)
    }

    fn enter(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(ExprError::TooDeep)
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut items = vec![self.and()?];
        while matches!(self.peek(), Tok::OrOr) || self.is_kw("or") {
            self.bump();
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.pop().unwrap_or(Expr::Literal(Value::Null))
        } else {
            Expr::Or(items)
        })
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut items = vec![self.not()?];
        while matches!(self.peek(), Tok::AndAnd) || self.is_kw("and") {
            self.bump();
            items.push(self.not()?);
        }
        Ok(if items.len() == 1 {
            items.pop().unwrap_or(Expr::Literal(Value::Null))
        } else {
            Expr::And(items)
        })
    }

    fn not(&mut self) -> Result<Expr, ExprError> {
        if matches!(self.peek(), Tok::Bang) || self.is_kw("not") {
            self.bump();
            self.enter()?;
            let inner = self.not()?;
            self.leave();
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let left = self.add()?;
        if let Tok::Cmp(op) = *self.peek() {
            self.bump();
            let right = self.operand_after(op.as_str(), Self::add)?;
            if let Tok::Cmp(again) = self.peek() {
                return Err(syntax(format!(
                    "comparisons do not chain: \"{}\" after \"{}\"",
                    again.as_str(),
                    op.as_str()
                )));
            }
            return Ok(Expr::Compare(op, Box::new(left), Box::new(right)));
        }
        Ok(left)
    }

    fn operand_after(
        &mut self,
        after: &str,
        next: fn(&mut Self) -> Result<Expr, ExprError>,
    ) -> Result<Expr, ExprError> {
        if matches!(self.peek(), Tok::End) {
            return Err(syntax(format!(
                "expected a value after \"{after}\", found the end"
            )));
        }
        next(self)
    }

    /// `mul ( ( "+" | "-" ) mul )*`, left-associative.
    fn add(&mut self) -> Result<Expr, ExprError> {
        self.binary(&[ArithOp::Add, ArithOp::Sub], Self::mul)
    }

    /// `unary ( ( "*" | "/" | "%" ) unary )*`, left-associative.
    fn mul(&mut self) -> Result<Expr, ExprError> {
        self.binary(&[ArithOp::Mul, ArithOp::Div, ArithOp::Rem], Self::unary)
    }

    fn binary(
        &mut self,
        ops: &[ArithOp],
        next: fn(&mut Self) -> Result<Expr, ExprError>,
    ) -> Result<Expr, ExprError> {
        let mut left = next(self)?;
        let mut nested = 0;
        while let Tok::Arith(op) = *self.peek() {
            if !ops.contains(&op) {
                break;
            }
            self.bump();
            let right = self.operand_after(op.as_str(), next)?;
            // A left-leaning chain nests one level per operator: bounded like the rest.
            self.enter()?;
            nested += 1;
            left = Expr::Arith(op, Box::new(left), Box::new(right));
        }
        for _ in 0..nested {
            self.leave();
        }
        Ok(left)
    }

    /// `"-" unary | primary`; `-` before a number literal is that negative literal.
    fn unary(&mut self) -> Result<Expr, ExprError> {
        if matches!(self.peek(), Tok::Arith(ArithOp::Sub)) {
            self.bump();
            if let Tok::Num(n) = self.peek().clone() {
                let negated = if let Some(i) = n.as_i64() {
                    i.checked_neg().map(Number::from)
                } else {
                    n.as_f64().and_then(|f| Number::from_f64(-f))
                };
                if let Some(m) = negated {
                    self.bump();
                    return Ok(Expr::Literal(Value::Number(m)));
                }
            }
            self.enter()?;
            let inner = self.operand_after("-", Self::unary)?;
            self.leave();
            return Ok(Expr::Neg(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        match self.bump() {
            Tok::Num(n) => Ok(Expr::Literal(Value::Number(n))),
            Tok::Str(s) => Ok(Expr::Literal(Value::String(s))),
            Tok::LParen => {
                self.enter()?;
                let inner = self.or()?;
                self.expect_rparen()?;
                self.leave();
                Ok(inner)
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => Ok(Expr::Literal(Value::Bool(true))),
                "false" => Ok(Expr::Literal(Value::Bool(false))),
                "null" => Ok(Expr::Literal(Value::Null)),
                "and" | "or" | "not" => Err(syntax(format!("expected a value, found \"{name}\""))),
                _ if matches!(self.peek(), Tok::LParen) => self.call(name),
                _ => self.path(name),
            },
            other => Err(syntax(format!(
                "expected a value, found {}",
                describe(&other)
            ))),
        }
    }

    fn expect_rparen(&mut self) -> Result<(), ExprError> {
        match self.bump() {
            Tok::RParen => Ok(()),
            other => Err(syntax(format!(
                "expected \")\", found {}",
                describe(&other)
            ))),
        }
    }

    fn call(&mut self, name: String) -> Result<Expr, ExprError> {
        let Some(func) = Func::from_name(&name) else {
            return Err(ExprError::UnknownFunction { name });
        };
        self.bump(); // `(`
        self.enter()?;
        let mut args = Vec::new();
        if !matches!(self.peek(), Tok::RParen) {
            loop {
                args.push(self.or()?);
                if matches!(self.peek(), Tok::Comma) {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect_rparen()?;
        self.leave();
        let fits = if func.variadic() {
            args.len() >= func.arity()
        } else {
            args.len() == func.arity()
        };
        if !fits {
            return Err(ExprError::Arity {
                func,
                found: args.len(),
            });
        }
        Ok(Expr::Call(func, args))
    }

    fn path(&mut self, first: String) -> Result<Expr, ExprError> {
        if first == "secrets" {
            return Err(ExprError::SecretsPath);
        }
        let mut segments = vec![first];
        while matches!(self.peek(), Tok::Dot) {
            self.bump();
            match self.bump() {
                Tok::Ident(s) => segments.push(s),
                other => {
                    return Err(syntax(format!(
                        "expected a name after \".\", found {}",
                        describe(&other)
                    )));
                }
            }
        }
        Ok(Expr::Path(Path { segments }))
    }
}

/// Parses an expression (§5.2). Errors are C040 or C138 ([`ExprError::code`]).
///
/// ```
/// use iterion_dsl::expr::parse;
/// use serde_json::json;
/// let e = parse("status >= 400 and status < 500").unwrap();
/// assert_eq!(e.eval_condition(&json!({"input": {"status": 404}})), Ok(true));
/// assert_eq!(parse("contains(x)").unwrap_err().to_string(), "contains() takes 2 argument(s)");
/// ```
pub fn parse(text: &str) -> Result<Expr, ExprError> {
    let toks = lex(text)?;
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
    };
    if matches!(p.peek(), Tok::End) {
        return Err(syntax("the expression is empty"));
    }
    let e = p.or()?;
    match p.peek() {
        Tok::End => Ok(e),
        other => Err(syntax(format!("unexpected {}", describe(other)))),
    }
}

// ---------------------------------------------------------------------------------------------
// Static facts and evaluation

impl Expr {
    /// Every path the expression reads, in source order.
    pub fn paths(&self) -> Vec<&Path> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Literal(_) => {}
                Expr::Path(p) => out.push(p),
                Expr::Not(inner) | Expr::Neg(inner) => stack.push(inner),
                Expr::And(items) | Expr::Or(items) | Expr::Call(_, items) => {
                    stack.extend(items.iter().rev());
                }
                Expr::Compare(_, l, r) | Expr::Arith(_, l, r) => {
                    stack.push(r);
                    stack.push(l);
                }
            }
        }
        out
    }

    /// Evaluates against a scope object keyed by namespace: `{"vars": …, "input": …,
    /// "outputs": …, "loop": …, "run": …}`. A bare name reads `input`. A path that cannot be
    /// resolved is `null`.
    pub fn eval(&self, scope: &Value) -> Result<Value, EvalError> {
        self.eval_in(scope, NullIs::Error)
    }

    /// Evaluates a `compute` entry: as [`Expr::eval`], except that `null` counts as `false`
    /// for `and`, `or`, `not` and `if` (upstream's compute nodes read fields that are absent
    /// before a loop's first crossing, such as `loop.L.previous_output.F`).
    pub fn eval_compute(&self, scope: &Value) -> Result<Value, EvalError> {
        self.eval_in(scope, NullIs::False)
    }

    fn eval_in(&self, scope: &Value, null: NullIs) -> Result<Value, EvalError> {
        let truth = |e: &Expr, op: &'static str| -> Result<bool, EvalError> {
            match (e.eval_in(scope, null)?, null) {
                (Value::Null, NullIs::False) => Ok(false),
                (v, _) => as_bool(&v, op),
            }
        };
        match self {
            Expr::Literal(v) => Ok(v.clone()),
            Expr::Path(p) => Ok(p.lookup(scope).cloned().unwrap_or(Value::Null)),
            Expr::Not(inner) => Ok(Value::Bool(!truth(inner, "not")?)),
            Expr::And(items) => {
                for item in items {
                    if !truth(item, "and")? {
                        return Ok(Value::Bool(false));
                    }
                }
                Ok(Value::Bool(true))
            }
            Expr::Or(items) => {
                for item in items {
                    if truth(item, "or")? {
                        return Ok(Value::Bool(true));
                    }
                }
                Ok(Value::Bool(false))
            }
            Expr::Compare(op, l, r) => {
                let (a, b) = (l.eval_in(scope, null)?, r.eval_in(scope, null)?);
                compare(*op, &a, &b).map(Value::Bool)
            }
            Expr::Arith(op, l, r) => {
                let (a, b) = (l.eval_in(scope, null)?, r.eval_in(scope, null)?);
                arith(*op, &a, &b)
            }
            Expr::Neg(inner) => {
                let v = inner.eval_in(scope, null)?;
                arith(ArithOp::Sub, &Value::from(0), &v)
            }
            Expr::Call(Func::If, args) => match args.as_slice() {
                [cond, then, otherwise] => {
                    if truth(cond, "if")? {
                        then.eval_in(scope, null)
                    } else {
                        otherwise.eval_in(scope, null)
                    }
                }
                _ => Ok(Value::Null),
            },
            Expr::Call(func, args) => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(a.eval_in(scope, null)?);
                }
                call(*func, &vals)
            }
        }
    }

    /// Evaluates a `when` condition: the result MUST be a bool (§5.2).
    pub fn eval_condition(&self, scope: &Value) -> Result<bool, EvalError> {
        match self.eval(scope)? {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError::NotACondition {
                found: type_name(&other),
            }),
        }
    }
}

/// How `and` / `or` / `not` / `if` take a `null` operand.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NullIs {
    /// An evaluation error (§5.2, `when` expressions).
    Error,
    /// `false` (compute entries).
    False,
}

/// Upstream's arithmetic: two integers give an integer (checked: overflow and division or
/// remainder by zero are errors), other numbers give a float (`%` takes integers only), and `+`
/// with a string on either side joins the two as text (a string and a number too).
fn arith(op: ArithOp, a: &Value, b: &Value) -> Result<Value, EvalError> {
    if op == ArithOp::Add {
        let text = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        if (matches!(a, Value::String(_)) || matches!(b, Value::String(_)))
            && let (Some(x), Some(y)) = (text(a), text(b))
        {
            return Ok(Value::String(x + &y));
        }
    }
    let refused = || EvalError::NotArithmetic {
        op: op.as_str(),
        also: if op == ArithOp::Add {
            " or strings"
        } else {
            ""
        },
        left: type_name(a),
        right: type_name(b),
    };
    let (Value::Number(x), Value::Number(y)) = (a, b) else {
        return Err(refused());
    };
    if let (Some(i), Some(j)) = (x.as_i64(), y.as_i64()) {
        let r = match op {
            ArithOp::Add => i
                .checked_add(j)
                .ok_or(EvalError::Arithmetic("integer overflow")),
            ArithOp::Sub => i
                .checked_sub(j)
                .ok_or(EvalError::Arithmetic("integer overflow")),
            ArithOp::Mul => i
                .checked_mul(j)
                .ok_or(EvalError::Arithmetic("integer overflow")),
            ArithOp::Div if j == 0 => Err(EvalError::Arithmetic("integer division by zero")),
            ArithOp::Rem if j == 0 => Err(EvalError::Arithmetic("integer remainder by zero")),
            ArithOp::Div => i
                .checked_div(j)
                .ok_or(EvalError::Arithmetic("integer overflow")),
            ArithOp::Rem => i
                .checked_rem(j)
                .ok_or(EvalError::Arithmetic("integer overflow")),
        }?;
        return Ok(Value::from(r));
    }
    let (Some(f), Some(g)) = (x.as_f64(), y.as_f64()) else {
        return Err(refused());
    };
    let r = match op {
        ArithOp::Add => f + g,
        ArithOp::Sub => f - g,
        ArithOp::Mul => f * g,
        ArithOp::Div if g == 0.0 => return Err(EvalError::Arithmetic("division by zero")),
        ArithOp::Div => f / g,
        ArithOp::Rem => return Err(EvalError::Arithmetic("% needs two integers")),
    };
    Number::from_f64(r)
        .map(Value::Number)
        .ok_or(EvalError::Arithmetic("the result is not a finite number"))
}

fn as_bool(v: &Value, op: &'static str) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(EvalError::NotBool {
            op,
            found: type_name(other),
        }),
    }
}

fn compare(op: CmpOp, a: &Value, b: &Value) -> Result<bool, EvalError> {
    let ordering = match op {
        CmpOp::Eq => return Ok(values_equal(a, b)),
        CmpOp::Ne => return Ok(!values_equal(a, b)),
        _ => match (a, b) {
            (Value::Number(x), Value::Number(y)) => number_cmp(x, y),
            (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
            _ => None,
        },
    };
    let Some(ord) = ordering else {
        return Err(EvalError::NotOrdered {
            op: op.as_str(),
            left: type_name(a),
            right: type_name(b),
        });
    };
    Ok(match op {
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ge => ord != Ordering::Less,
        CmpOp::Eq | CmpOp::Ne => false,
    })
}

fn call(func: Func, args: &[Value]) -> Result<Value, EvalError> {
    let null = Value::Null;
    let first = args.first().unwrap_or(&null);
    match func {
        Func::Length => {
            let n = match first {
                Value::String(s) => s.chars().count(),
                Value::Array(items) => items.len(),
                Value::Object(map) => map.len(),
                Value::Null => 0,
                other => {
                    return Err(EvalError::Length {
                        found: type_name(other),
                    });
                }
            };
            Ok(Value::Number(Number::from(n as u64)))
        }
        Func::Contains => {
            let second = args.get(1).unwrap_or(&null);
            match (first, second) {
                (Value::Array(items), b) => {
                    Ok(Value::Bool(items.iter().any(|i| values_equal(i, b))))
                }
                (Value::String(a), Value::String(b)) => Ok(Value::Bool(a.contains(b.as_str()))),
                (Value::Null, _) => Ok(Value::Bool(false)),
                (a, b) => Err(EvalError::Contains {
                    a: type_name(a),
                    b: type_name(b),
                }),
            }
        }
        Func::Concat => {
            let mut out = Vec::new();
            for a in args {
                out.extend(list_arg("concat", a)?.iter().cloned());
            }
            Ok(Value::Array(out))
        }
        Func::Unique => {
            let mut out: Vec<Value> = Vec::new();
            for v in list_arg("unique", first)? {
                if !out.iter().any(|seen| values_equal(seen, v)) {
                    out.push(v.clone());
                }
            }
            Ok(Value::Array(out))
        }
        Func::Join => {
            let sep = match args.get(1).unwrap_or(&null) {
                Value::String(s) => s.as_str(),
                other => {
                    return Err(EvalError::JoinSeparator {
                        found: type_name(other),
                    });
                }
            };
            let parts: Vec<String> = list_arg("join", first)?
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => crate::template::compact_json(other),
                })
                .collect();
            Ok(Value::String(parts.join(sep)))
        }
        Func::Floor | Func::Round => {
            let name = func.as_str();
            let Value::Number(n) = first else {
                return Err(EvalError::NotANumber {
                    func: name,
                    found: type_name(first),
                });
            };
            if n.is_i64() || n.is_u64() {
                return Ok(first.clone());
            }
            let x = n.as_f64().unwrap_or(0.0);
            let r = if func == Func::Floor {
                x.floor()
            } else {
                x.round()
            };
            Ok(integral(r))
        }
        Func::Min | Func::Max => {
            let items: &[Value] = match args {
                [Value::Array(items)] => items,
                _ => args,
            };
            let mut best: Option<&Value> = None;
            for v in items {
                let Value::Number(n) = v else {
                    return Err(EvalError::NotANumber {
                        func: func.as_str(),
                        found: type_name(v),
                    });
                };
                let better = match best {
                    Some(Value::Number(b)) => {
                        let ord = number_cmp(n, b).unwrap_or(Ordering::Equal);
                        (func == Func::Min && ord == Ordering::Less)
                            || (func == Func::Max && ord == Ordering::Greater)
                    }
                    _ => true,
                };
                if better {
                    best = Some(v);
                }
            }
            Ok(best.cloned().unwrap_or(Value::Null))
        }
        Func::Sort => {
            let mut items = list_arg("sort", first)?.to_vec();
            let numbers = items.iter().all(Value::is_number);
            let strings = items.iter().all(Value::is_string);
            if !numbers && !strings {
                return Err(EvalError::Unsortable);
            }
            items.sort_by(|a, b| match (a, b) {
                (Value::Number(x), Value::Number(y)) => number_cmp(x, y).unwrap_or(Ordering::Equal),
                (Value::String(x), Value::String(y)) => x.cmp(y),
                _ => Ordering::Equal,
            });
            Ok(Value::Array(items))
        }
        Func::Tail => {
            let items = list_arg("tail", first)?;
            let n = index_arg("tail", args.get(1).unwrap_or(&null))?;
            Ok(Value::Array(
                items[items.len().saturating_sub(n)..].to_vec(),
            ))
        }
        Func::Slice => {
            let items = list_arg("slice", first)?;
            let from = index_arg("slice", args.get(1).unwrap_or(&null))?.min(items.len());
            let to = index_arg("slice", args.get(2).unwrap_or(&null))?.clamp(from, items.len());
            Ok(Value::Array(items[from..to].to_vec()))
        }
        // Evaluated lazily in `eval_in`.
        Func::If => Ok(Value::Null),
    }
}

/// A float that holds an integer as a JSON integer when it fits, else as it is.
fn integral(x: f64) -> Value {
    if x.is_finite() && x.abs() < 9.0e15 {
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(x as i64));
    }
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// A count or index argument: a non-negative integer (a negative one counts as 0).
fn index_arg(func: &'static str, v: &Value) -> Result<usize, EvalError> {
    match v.as_i64() {
        Some(i) => Ok(usize::try_from(i.max(0)).unwrap_or(usize::MAX)),
        None => match v.as_u64() {
            Some(u) => Ok(usize::try_from(u).unwrap_or(usize::MAX)),
            None => Err(EvalError::NotANumber {
                func,
                found: type_name(v),
            }),
        },
    }
}

/// A list argument; `null` is the empty list.
fn list_arg<'v>(func: &'static str, v: &'v Value) -> Result<&'v [Value], EvalError> {
    match v {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(&[]),
        other => Err(EvalError::NotAList {
            func,
            found: type_name(other),
        }),
    }
}

/// A JSON number as an exact integer when it is one, otherwise a float.
enum Num {
    Int(i128),
    Float(f64),
}

fn num(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Num::Int(i128::from(u))
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Compares an integer with a float exactly (no rounding of large integers).
fn int_float_cmp(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // Every integer we hold is within ±2^64, far inside these bounds.
    if f >= 1.0e20 {
        return Some(Ordering::Less);
    }
    if f <= -1.0e20 {
        return Some(Ordering::Greater);
    }
    let floor = f.floor();
    // `floor` is integral and within ±1e20, so the cast is exact.
    let fi = floor as i128;
    Some(match i.cmp(&fi) {
        Ordering::Equal if f > floor => Ordering::Less,
        other => other,
    })
}

fn number_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    match (num(a), num(b)) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y),
        (Num::Int(x), Num::Float(y)) => int_float_cmp(x, y),
        (Num::Float(x), Num::Int(y)) => int_float_cmp(y, x).map(Ordering::reverse),
    }
}

/// `==` of §5.2: numbers numerically (int against float included), strings, bools and null by
/// value, lists and maps structurally (numbers inside them numerically too), different types
/// unequal. Iterative, so deep values cannot overflow the stack.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((x, y)) = stack.pop() {
        let same = match (x, y) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(p), Value::Bool(q)) => p == q,
            (Value::String(p), Value::String(q)) => p == q,
            (Value::Number(p), Value::Number(q)) => number_cmp(p, q) == Some(Ordering::Equal),
            (Value::Array(p), Value::Array(q)) => {
                if p.len() != q.len() {
                    false
                } else {
                    stack.extend(p.iter().zip(q.iter()));
                    true
                }
            }
            (Value::Object(p), Value::Object(q)) => {
                if p.len() != q.len() {
                    false
                } else {
                    let mut all = true;
                    for (k, pv) in p {
                        match q.get(k) {
                            Some(qv) => stack.push((pv, qv)),
                            None => {
                                all = false;
                                break;
                            }
                        }
                    }
                    all
                }
            }
            _ => false,
        };
        if !same {
            return false;
        }
    }
    true
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;

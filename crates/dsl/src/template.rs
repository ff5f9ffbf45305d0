//! `{{…}}` references and `${…}` host references (DSL.md §4), and how values become text
//! (§4.2, §6.1).
//!
//! The checker and the engine share this module so a template means the same thing at
//! `iterion validate` time and at run time:
//! - [`parse`] splits template text into literal text and [`Reference`]s, and reports malformed
//!   references (C004), unsupported namespaces (C004) and `{{` candidates that are kept as text
//!   (C904) as [`TemplateIssue`]s. Text is never rejected: an issue's text stays literal.
//! - [`parse_host`] / [`expand_host`] handle `${NAME}` and `${NAME:-default}` (§4.3). Nothing
//!   here reads the environment: the caller passes a lookup.
//! - [`quoted_references`] is the C137 shell-quote scanner of §6.1.
//! - [`text_form`], [`shell_word`] and [`compact_json`] turn JSON values into text the way §4.2
//!   and §6.1 say; [`Template::render_text`] and [`Template::render_command`] apply them.
//!
//! Offsets and lengths are counted in `char`s (Unicode scalar values), matching
//! [`crate::ast::StrLit::span_at`].

use serde_json::Value;

use crate::diag::Code;

/// The fields of the `run` namespace: its id, and where it stands against its budget (the
/// `max_*` fields are `null` without that cap; `cost_usd` is always `null`: there is no price
/// table).
pub const RUN_FIELDS: &[&str] = &[
    "id",
    "elapsed_seconds",
    "max_duration_seconds",
    "iterations",
    "max_iterations",
    "tokens",
    "max_tokens",
    "cost_usd",
    "max_cost_usd",
];

/// The namespaces a reference may start with (DSL.md §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Namespace {
    /// `vars.X[.path]`.
    Vars,
    /// `input[.F[.path]]`.
    Input,
    /// `outputs.N[.F[.path]]`.
    Outputs,
    /// `loop.L.iteration` | `.max` | `.previous_output[.F…]`.
    Loop,
    /// `run.id`.
    Run,
    /// `secrets.S` | `secrets.S.path`.
    Secrets,
    /// `artifacts.A[.F[.path]]`: the output a node published as `A`.
    Artifacts,
    /// `attachments.A[.path|.mime|.size|.sha256]`: a file the operator attached at launch.
    Attachments,
}

impl Namespace {
    /// Every namespace, in table order.
    pub const ALL: [Namespace; 8] = [
        Namespace::Vars,
        Namespace::Input,
        Namespace::Outputs,
        Namespace::Loop,
        Namespace::Run,
        Namespace::Secrets,
        Namespace::Artifacts,
        Namespace::Attachments,
    ];

    /// The spelling in source.
    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::Vars => "vars",
            Namespace::Input => "input",
            Namespace::Outputs => "outputs",
            Namespace::Loop => "loop",
            Namespace::Run => "run",
            Namespace::Secrets => "secrets",
            Namespace::Artifacts => "artifacts",
            Namespace::Attachments => "attachments",
        }
    }

    /// The namespace spelled `word`, if any.
    pub fn from_word(word: &str) -> Option<Namespace> {
        Namespace::ALL.into_iter().find(|n| n.as_str() == word)
    }
}

/// Upstream namespaces this subset does not support: a reference to one is C004.
pub const UNSUPPORTED_NAMESPACES: [&str; 2] = ["each", "params"];

/// The fields of `{{attachments.NAME.F}}` (docs/language.md "Attachments"); the bare reference
/// is `path`.
pub const ATTACHMENT_FIELDS: [&str; 4] = ["path", "mime", "size", "sha256"];

/// `{{ref}}` or `{{!ref}}` (DSL.md §4.1, §6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefForm {
    /// `{{ref}}`: in a command, the value is shell-quoted.
    Quoted,
    /// `{{!ref}}`: in a command, the value is inserted verbatim. Elsewhere the same as `Quoted`.
    Raw,
}

/// One well-formed reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The first identifier.
    pub namespace: Namespace,
    /// The identifiers after the namespace (`vars.a.b` → `["a", "b"]`). The shape was checked
    /// against the §4.1 table by [`parse`]; names are not checked against declarations here.
    pub path: Vec<String>,
    /// Quoted or raw.
    pub form: RefForm,
    /// The reference as written, `{{` to `}}` inclusive, spaces kept.
    pub text: String,
    /// Offset of the `{{` in the template, in chars.
    pub offset: usize,
    /// Length of [`Reference::text`] in chars.
    pub len: usize,
}

impl Reference {
    /// The dotted path with its namespace: `vars.region`, `input`.
    pub fn dotted(&self) -> String {
        let mut s = self.namespace.as_str().to_string();
        for p in &self.path {
            s.push('.');
            s.push_str(p);
        }
        s
    }

    /// Looks the reference up in a scope object whose keys are the namespaces (`"vars"`,
    /// `"input"`, `"outputs"`, `"loop"`, `"run"`, `"secrets"`), walking object keys. `None`
    /// means *cannot be resolved* (§4.2); a JSON `null` that exists is `Some(Value::Null)`.
    pub fn lookup<'v>(&self, scope: &'v Value) -> Option<&'v Value> {
        let mut cur = scope.get(self.namespace.as_str())?;
        for seg in &self.path {
            cur = cur.as_object()?.get(seg)?;
        }
        Some(cur)
    }
}

/// A piece of a parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// Literal text (adjacent text is merged).
    Text(String),
    /// A reference.
    Ref(Reference),
}

/// What is wrong with a `{{…}}` candidate or a `${…}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IssueKind {
    /// A malformed reference or a path shape not in the table (C004).
    Malformed {
        /// Why, as a phrase: `missing }} on the same line`.
        reason: String,
    },
    /// An upstream namespace this subset lacks (C004, "not supported yet").
    Unsupported {
        /// The namespace word.
        namespace: String,
    },
    /// A candidate whose first word is no namespace: kept as text (C904, warning).
    NotAReference {
        /// The first word.
        word: String,
    },
}

/// A problem found while scanning template text. The text concerned is kept as literal text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateIssue {
    /// What is wrong.
    pub kind: IssueKind,
    /// The candidate as written: from `{{` (or `${`) to the closing braces, or to the end of the
    /// line when they are missing. For C904, the `{{` and the first word.
    pub text: String,
    /// Offset of the `{{` / `${`, in chars.
    pub offset: usize,
    /// Length of [`TemplateIssue::text`] in chars.
    pub len: usize,
}

impl TemplateIssue {
    /// C004 or C904.
    pub fn code(&self) -> Code {
        match self.kind {
            IssueKind::Malformed { .. } | IssueKind::Unsupported { .. } => Code::C004,
            IssueKind::NotAReference { .. } => Code::C904,
        }
    }

    /// The diagnostic message (DSL.md §8.5 shapes).
    pub fn message(&self) -> String {
        match &self.kind {
            IssueKind::Malformed { reason } => {
                format!("malformed reference {}: {reason}", self.text)
            }
            IssueKind::Unsupported { namespace } => format!(
                "malformed reference {}: namespace \"{namespace}\" is not supported yet",
                self.text
            ),
            IssueKind::NotAReference { word } => {
                format!("{{{{{word}…}}}} is not a reference and is kept as written")
            }
        }
    }
}

/// A parsed template: segments in order, and the issues found.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Template {
    /// Text and references in order; concatenating them as written gives the input back.
    pub segments: Vec<Segment>,
    /// C004 / C904 findings, in order.
    pub issues: Vec<TemplateIssue>,
}

/// A command reference that cannot be resolved: the node fails with `TEMPLATE_UNRESOLVED`
/// before anything executes (DSL.md §6.1, D10).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("reference {reference} cannot be resolved")]
pub struct Unresolved {
    /// The reference as written.
    pub reference: String,
}

impl Unresolved {
    /// The run failure code.
    pub fn code(&self) -> &'static str {
        "TEMPLATE_UNRESOLVED"
    }
}

impl Template {
    /// Every reference, in order.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Ref(r) => Some(r),
            Segment::Text(_) => None,
        })
    }

    /// The reference when the whole template is exactly one reference (a `with` value keeps
    /// the referenced value's JSON type then, §4.2).
    pub fn single_reference(&self) -> Option<&Reference> {
        match self.segments.as_slice() {
            [Segment::Ref(r)] => Some(r),
            _ => None,
        }
    }

    /// Text form rendering (prompts, inline `system`/`user`, mixed `with` strings, §4.2): each
    /// resolved reference becomes [`text_form`] of its value; an unresolved one stays exactly as
    /// written, so it is visible.
    pub fn render_text(&self, mut resolve: impl FnMut(&Reference) -> Option<Value>) -> String {
        let mut out = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Text(t) => out.push_str(t),
                Segment::Ref(r) => match resolve(r) {
                    Some(v) => out.push_str(&text_form(&v)),
                    None => out.push_str(&r.text),
                },
            }
        }
        out
    }

    /// Shell rendering of a tool `command` (§6.1): one left-to-right pass, each reference
    /// replaced by [`shell_word`] of its value; substituted text is never scanned again and
    /// `${…}` is left alone. The first unresolved reference is an error.
    pub fn render_command(
        &self,
        mut resolve: impl FnMut(&Reference) -> Option<Value>,
    ) -> Result<String, Unresolved> {
        let mut out = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Text(t) => out.push_str(t),
                Segment::Ref(r) => match resolve(r) {
                    Some(v) => out.push_str(&shell_word(&v, r.form)),
                    None => {
                        return Err(Unresolved {
                            reference: r.text.clone(),
                        });
                    }
                },
            }
        }
        Ok(out)
    }
}

impl Template {
    /// Rendering of a `node` / `python` `script:` (one pass, like [`Template::render_command`]):
    /// `{{ref}}` becomes the value as a JSON literal (a string quoted and escaped), which either
    /// language reads as a value and never as code; `{{!ref}}` becomes a string verbatim and
    /// anything else as compact JSON. The first unresolved reference is an error.
    pub fn render_script(
        &self,
        mut resolve: impl FnMut(&Reference) -> Option<Value>,
    ) -> Result<String, Unresolved> {
        let mut out = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Text(t) => out.push_str(t),
                Segment::Ref(r) => match (resolve(r), r.form) {
                    (Some(Value::String(s)), RefForm::Raw) => out.push_str(&s),
                    (Some(v), _) => out.push_str(&compact_json(&v)),
                    (None, _) => {
                        return Err(Unresolved {
                            reference: r.text.clone(),
                        });
                    }
                },
            }
        }
        Ok(out)
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn collect(chars: &[char], from: usize, to: usize) -> String {
    chars.get(from..to).unwrap_or_default().iter().collect()
}

/// Why a reference's path has none of the §4.1 shapes: the C004 reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// `vars`, `outputs` or `secrets` without a name; `what` is `var`, `node` or `secret`.
    #[error("{} needs a {what} name", namespace.as_str())]
    NeedsName {
        /// The namespace.
        namespace: Namespace,
        /// What it names.
        what: &'static str,
    },
    /// A bare `run`.
    #[error("run needs a field: one of {}", RUN_FIELDS.join(", "))]
    RunNeedsField,
    /// `run.X` for a field the run namespace does not have.
    #[error("run.{0} does not exist (the run has {fields})", fields = RUN_FIELDS.join(", "))]
    RunFieldUnsupported(String),
    /// `run.F.X`.
    #[error("run.{0} has no fields")]
    RunIdHasNoFields(String),
    /// A bare `loop`.
    #[error("loop needs a loop name")]
    LoopNeedsName,
    /// `loop.L` without a field.
    #[error("loop.{0} needs a field: iteration, max or previous_output")]
    LoopNeedsField(String),
    /// `loop.L.iteration.X` or `loop.L.max.X`.
    #[error("loop.{looped}.{field} has no fields")]
    LoopFieldHasNoFields {
        /// The loop.
        looped: String,
        /// `iteration` or `max`.
        field: &'static str,
    },
    /// `loop.L.X` for another X.
    #[error("unknown loop field \"{0}\" (expected iteration, max or previous_output)")]
    UnknownLoopField(String),
}

/// Checks a namespace path against the shapes of the §4.1 table.
/// `secrets.S.*` deeper paths are accepted here: they are C095, which needs the declarations.
pub fn check_shape(ns: Namespace, path: &[String]) -> Result<(), ShapeError> {
    let seg = |i: usize| path.get(i).map(String::as_str);
    match ns {
        Namespace::Input => Ok(()),
        Namespace::Vars
        | Namespace::Outputs
        | Namespace::Secrets
        | Namespace::Artifacts
        | Namespace::Attachments => match seg(0) {
            Some(_) => Ok(()),
            None => Err(ShapeError::NeedsName {
                namespace: ns,
                what: match ns {
                    Namespace::Vars => "var",
                    Namespace::Outputs => "node",
                    Namespace::Artifacts => "artifact",
                    Namespace::Attachments => "attachment",
                    _ => "secret",
                },
            }),
        },
        Namespace::Run => match path {
            [f] if RUN_FIELDS.contains(&f.as_str()) => Ok(()),
            [] => Err(ShapeError::RunNeedsField),
            [first, ..] if !RUN_FIELDS.contains(&first.as_str()) => {
                Err(ShapeError::RunFieldUnsupported(first.clone()))
            }
            [first, ..] => Err(ShapeError::RunIdHasNoFields(first.clone())),
        },
        Namespace::Loop => match (seg(0), seg(1)) {
            (None, _) => Err(ShapeError::LoopNeedsName),
            (Some(l), None) => Err(ShapeError::LoopNeedsField(l.to_owned())),
            (Some(l), Some(f @ ("iteration" | "max"))) => {
                if path.len() == 2 {
                    Ok(())
                } else {
                    Err(ShapeError::LoopFieldHasNoFields {
                        looped: l.to_owned(),
                        field: if f == "max" { "max" } else { "iteration" },
                    })
                }
            }
            (Some(_), Some("previous_output")) => Ok(()),
            (Some(_), Some(f)) => Err(ShapeError::UnknownLoopField(f.to_owned())),
        },
    }
}

/// Parses a `script:` text ([`parse`]), except that a line whose first non-blank characters are
/// the language's line comment (`#`, or `//` for JavaScript) is plain text: a `{{…}}` there is
/// not a reference, is never rendered, checked or reported, and reaches the interpreter as
/// written. Upstream checked no script reference before May 2026, so its scripts document the
/// reference forms in comments (`// {{input.X}} renders as a JSON literal`).
pub fn parse_script(text: &str, line_comment: &str) -> Template {
    let parsed = parse(text);
    // Char ranges [start, end) of the comment lines.
    let mut comments = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let len = line.chars().count();
        if !line_comment.is_empty() && line.trim_start().starts_with(line_comment) {
            comments.push((start, start + len));
        }
        start += len;
    }
    if comments.is_empty() {
        return parsed;
    }
    let in_comment = |offset: usize| comments.iter().any(|&(a, b)| (a..b).contains(&offset));
    let mut segments: Vec<Segment> = Vec::new();
    for seg in parsed.segments {
        let seg = match seg {
            Segment::Ref(r) if in_comment(r.offset) => Segment::Text(r.text),
            other => other,
        };
        match (segments.last_mut(), seg) {
            (Some(Segment::Text(prev)), Segment::Text(t)) => prev.push_str(&t),
            (_, seg) => segments.push(seg),
        }
    }
    Template {
        segments,
        issues: parsed
            .issues
            .into_iter()
            .filter(|i| !in_comment(i.offset))
            .collect(),
    }
}

/// Scans template text (DSL.md §4.1). Never fails: problems are reported in
/// [`Template::issues`] and their text is kept as literal text.
///
/// ```
/// use iterion_dsl::template::{parse, Segment, Namespace};
/// let t = parse("make {{vars.target}} {{json .X}}");
/// let r = t.references().next().unwrap();
/// assert_eq!((r.namespace, r.path.clone(), r.offset, r.len), (Namespace::Vars, vec!["target".to_string()], 5, 15));
/// assert_eq!(t.issues.len(), 1); // C904: `{{json …}}` stays text
/// ```
pub fn parse(text: &str) -> Template {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let at = |i: usize| chars.get(i).copied();
    let mut segments = Vec::new();
    let mut issues = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while i < n {
        if at(i) != Some('{') || at(i + 1) != Some('{') {
            if let Some(c) = at(i) {
                lit.push(c);
            }
            i += 1;
            continue;
        }
        // A candidate: `{{`, optional `!`, spaces, then a letter or `_`.
        let mut j = i + 2;
        let form = if at(j) == Some('!') {
            j += 1;
            RefForm::Raw
        } else {
            RefForm::Quoted
        };
        while at(j) == Some(' ') {
            j += 1;
        }
        if !at(j).is_some_and(is_ident_start) {
            lit.push('{');
            i += 1;
            continue;
        }
        let mut k = j;
        while at(k).is_some_and(is_ident_char) {
            k += 1;
        }
        let word = collect(&chars, j, k);
        if let Some(ns) = Namespace::from_word(&word) {
            match reference_at(&chars, i, ns, form) {
                Ok((r, end)) => {
                    if !lit.is_empty() {
                        segments.push(Segment::Text(std::mem::take(&mut lit)));
                    }
                    segments.push(Segment::Ref(r));
                    i = end;
                }
                Err((issue, end)) => {
                    lit.push_str(&issue.text);
                    issues.push(issue);
                    i = end;
                }
            }
        } else if UNSUPPORTED_NAMESPACES.contains(&word.as_str()) {
            let (end, _) = candidate_extent(&chars, i);
            let issue = TemplateIssue {
                kind: IssueKind::Unsupported { namespace: word },
                text: collect(&chars, i, end),
                offset: i,
                len: end - i,
            };
            lit.push_str(&issue.text);
            issues.push(issue);
            i = end;
        } else {
            let candidate = collect(&chars, i, k);
            issues.push(TemplateIssue {
                kind: IssueKind::NotAReference { word },
                len: k - i,
                text: candidate.clone(),
                offset: i,
            });
            lit.push_str(&candidate);
            i = k;
        }
    }
    if !lit.is_empty() {
        segments.push(Segment::Text(lit));
    }
    Template { segments, issues }
}

/// Where a candidate starting at `start` (a `{{`) ends: just after the first `}}` on the same
/// line, and whether that `}}` was found (otherwise the end of the line).
fn candidate_extent(chars: &[char], start: usize) -> (usize, bool) {
    let mut p = start + 2;
    while let Some(&c) = chars.get(p) {
        if c == '\n' {
            return (p, false);
        }
        if c == '}' && chars.get(p + 1) == Some(&'}') {
            return (p + 2, true);
        }
        p += 1;
    }
    (p, false)
}

type RefResult = Result<(Reference, usize), (TemplateIssue, usize)>;

/// Parses the reference whose `{{` is at `start` (its first word is the namespace `ns`).
fn reference_at(chars: &[char], start: usize, ns: Namespace, form: RefForm) -> RefResult {
    let (end, closed) = candidate_extent(chars, start);
    let text = collect(chars, start, end);
    let fail = |reason: String| {
        Err((
            TemplateIssue {
                kind: IssueKind::Malformed { reason },
                text: text.clone(),
                offset: start,
                len: end - start,
            },
            end,
        ))
    };
    if !closed {
        return fail("missing }} on the same line".to_string());
    }
    let inner = chars.get(start + 2..end - 2).unwrap_or_default();
    if inner.windows(2).any(|w| w == ['{', '{']) {
        return fail("a {{ inside a reference".to_string());
    }
    let mut body: &[char] = inner;
    if form == RefForm::Raw {
        body = body.get(1..).unwrap_or_default();
    }
    while let [' ', rest @ ..] = body {
        body = rest;
    }
    while let [rest @ .., ' '] = body {
        body = rest;
    }
    let body: String = body.iter().collect();
    let mut segs: Vec<String> = Vec::new();
    for seg in body.split('.') {
        if seg.is_empty() {
            return fail("empty path segment".to_string());
        }
        if let Some(bad) = seg.chars().find(|c| !is_ident_char(*c)) {
            return fail(format!("unexpected character {bad:?}"));
        }
        if !seg.starts_with(is_ident_start) {
            return fail(format!("\"{seg}\" is not a name"));
        }
        segs.push(seg.to_string());
    }
    // The first segment is the namespace word (the caller matched it).
    let path: Vec<String> = segs.into_iter().skip(1).collect();
    if let Err(reason) = check_shape(ns, &path) {
        return fail(reason.to_string());
    }
    Ok((
        Reference {
            namespace: ns,
            path,
            form,
            text: text.clone(),
            offset: start,
            len: end - start,
        },
        end,
    ))
}

// ---------------------------------------------------------------------------------------------
// `${…}` host references (§4.3)

/// How deeply `${A:-${B:-…}}` defaults may nest before the text is refused (C004).
pub const MAX_HOST_NESTING: usize = 32;

/// A piece of text with host references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPart {
    /// Literal text.
    Text(String),
    /// `${NAME}` or `${NAME:-default}`.
    Var {
        /// The variable name.
        name: String,
        /// The default's parts, when `:-` was written (possibly empty).
        default: Option<Vec<HostPart>>,
    },
}

/// A `${` that does not match the grammar of §4.3 (C004).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed reference {text}: {reason}")]
pub struct HostRefError {
    /// From the `${` to its closing `}`, or to the end of the line when there is none.
    pub text: String,
    /// Why.
    pub reason: String,
    /// Offset of the `${`, in chars.
    pub offset: usize,
    /// Length of `text` in chars.
    pub len: usize,
}

impl HostRefError {
    /// Always C004.
    pub fn code(&self) -> Code {
        Code::C004
    }
}

/// Splits text into literal parts and `${…}` references (§4.3). A `$` not followed by `{` is
/// literal. The first malformed `${` is an error.
///
/// ```
/// use iterion_dsl::template::{parse_host, HostPart};
/// assert_eq!(parse_host("a${X}").unwrap(), vec![
///     HostPart::Text("a".into()),
///     HostPart::Var { name: "X".into(), default: None },
/// ]);
/// assert!(parse_host("${X:default}").is_err());
/// ```
pub fn parse_host(text: &str) -> Result<Vec<HostPart>, HostRefError> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let parts = host_parts(&chars, &mut i, false, 0)?;
    Ok(parts)
}

/// Reads parts until the end of text, or (when `in_default`) until an unmatched `}` which is
/// left at `*i`.
fn host_parts(
    chars: &[char],
    i: &mut usize,
    in_default: bool,
    depth: usize,
) -> Result<Vec<HostPart>, HostRefError> {
    let mut parts = Vec::new();
    let mut lit = String::new();
    while let Some(&c) = chars.get(*i) {
        if in_default && c == '}' {
            break;
        }
        if c == '$' && chars.get(*i + 1) == Some(&'{') {
            if !lit.is_empty() {
                parts.push(HostPart::Text(std::mem::take(&mut lit)));
            }
            parts.push(host_ref(chars, i, depth)?);
            continue;
        }
        lit.push(c);
        *i += 1;
    }
    if !lit.is_empty() {
        parts.push(HostPart::Text(lit));
    }
    Ok(parts)
}

/// Parses the `${…}` at `*i`, leaving `*i` after its `}`.
fn host_ref(chars: &[char], i: &mut usize, depth: usize) -> Result<HostPart, HostRefError> {
    let start = *i;
    let fail = |reason: String| {
        let mut end = start + 2;
        while let Some(&c) = chars.get(end) {
            if c == '\n' {
                break;
            }
            end += 1;
            if c == '}' {
                break;
            }
        }
        HostRefError {
            text: collect(chars, start, end),
            reason,
            offset: start,
            len: end - start,
        }
    };
    if depth >= MAX_HOST_NESTING {
        return Err(fail(format!(
            "defaults nested more than {MAX_HOST_NESTING} levels"
        )));
    }
    let mut p = start + 2;
    if !chars.get(p).copied().is_some_and(is_ident_start) {
        return Err(fail("expected a variable name after ${".to_string()));
    }
    while chars.get(p).copied().is_some_and(is_ident_char) {
        p += 1;
    }
    let name = collect(chars, start + 2, p);
    match chars.get(p) {
        Some('}') => {
            *i = p + 1;
            Ok(HostPart::Var {
                name,
                default: None,
            })
        }
        Some(':') if chars.get(p + 1) == Some(&'-') => {
            let mut q = p + 2;
            let default = host_parts(chars, &mut q, true, depth + 1)?;
            if chars.get(q) == Some(&'}') {
                *i = q + 1;
                Ok(HostPart::Var {
                    name,
                    default: Some(default),
                })
            } else {
                Err(fail("missing }".to_string()))
            }
        }
        None => Err(fail("missing }".to_string())),
        Some(c) => Err(fail(format!(
            "unexpected character {c:?} after the name (expected }} or :-)"
        ))),
    }
}

/// Expands `${…}` host references with `lookup` (DSL.md §4.3): `${NAME}` is the variable or the
/// empty string when unset; `${NAME:-default}` is the expanded default when NAME is unset or
/// empty. The validator never calls this: expansion happens at launch.
///
/// ```
/// use iterion_dsl::template::expand_host;
/// let env = |k: &str| (k == "A").then(|| "x".to_string());
/// assert_eq!(expand_host("${A}-${B:-${A}y}", env).unwrap(), "x-xy");
/// ```
pub fn expand_host(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, HostRefError> {
    let parts = parse_host(text)?;
    let mut out = String::new();
    expand_parts(&parts, &lookup, &mut out);
    Ok(out)
}

fn expand_parts(parts: &[HostPart], lookup: &dyn Fn(&str) -> Option<String>, out: &mut String) {
    for p in parts {
        match p {
            HostPart::Text(t) => out.push_str(t),
            HostPart::Var { name, default } => {
                let value = lookup(name);
                match (value, default) {
                    (Some(v), Some(_)) if !v.is_empty() => out.push_str(&v),
                    (_, Some(d)) => expand_parts(d, lookup, out),
                    (Some(v), None) => out.push_str(&v),
                    (None, None) => {}
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The C137 shell-quote scanner (§6.1)

/// The shell quoting state where a reference starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShellQuote {
    /// Outside quotes: the reference is a word of its own.
    Unquoted,
    /// Inside `'…'`.
    Single,
    /// Inside `"…"`.
    Double,
}

/// The quoting state at the start of every reference of a command (§6.1, C137): unquoted,
/// single- and double-quoted regions, backslash escapes outside single quotes, and no
/// `$( … )` nesting (a `"` inside `"$(…)"` closes the outer quote). Only the literal text is
/// scanned; references do not change the state.
pub fn quote_states(template: &Template) -> Vec<(&Reference, ShellQuote)> {
    let mut state = ShellQuote::Unquoted;
    let mut escaped = false;
    let mut out = Vec::new();
    for seg in &template.segments {
        match seg {
            Segment::Ref(r) => {
                out.push((r, state));
                escaped = false;
            }
            Segment::Text(t) => {
                for c in t.chars() {
                    if escaped {
                        escaped = false;
                        continue;
                    }
                    state = match (state, c) {
                        (ShellQuote::Single, '\'') => ShellQuote::Unquoted,
                        (ShellQuote::Single, _) => ShellQuote::Single,
                        (_, '\\') => {
                            escaped = true;
                            state
                        }
                        (ShellQuote::Unquoted, '\'') => ShellQuote::Single,
                        (ShellQuote::Unquoted, '"') => ShellQuote::Double,
                        (ShellQuote::Double, '"') => ShellQuote::Unquoted,
                        (s, _) => s,
                    };
                }
            }
        }
    }
    out
}

/// The references of a command that start inside shell quotes (C137).
pub fn quoted_references(template: &Template) -> Vec<&Reference> {
    quote_states(template)
        .into_iter()
        .filter(|(_, q)| *q != ShellQuote::Unquoted)
        .map(|(r, _)| r)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Values as text (§4.2, §6.1)

/// Compact JSON with object keys sorted (by code point), whatever the map's own order.
pub fn compact_json(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            out.push_str(&v.to_string());
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(item) = map.get(k) {
                    write_json(item, out);
                }
            }
            out.push('}');
        }
    }
}

/// The text form of a value (§4.2): strings as they are; numbers and booleans as JSON text;
/// `null` as the empty string; lists and maps as compact JSON with sorted keys.
pub fn text_form(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        _ => compact_json(v),
    }
}

/// `s` as one single-quoted shell word, each `'` written `'\''`.
pub fn shell_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// How a value becomes shell text in a command (the table of §6.1).
///
/// | Value | `Quoted` | `Raw` |
/// |---|---|---|
/// | string | `'s'` (`'` as `'\''`) | s |
/// | number, bool | `'3'`, `'true'` | `3`, `true` |
/// | null | `''` | nothing |
/// | list of scalars | each element quoted, joined by one space; `[]` is nothing | compact JSON |
/// | map, or list holding a list or map | compact JSON, quoted | compact JSON |
///
/// A `null` inside a list of scalars is quoted like a lone `null` (`''`).
pub fn shell_word(v: &Value, form: RefForm) -> String {
    match (v, form) {
        (Value::String(s), RefForm::Quoted) => shell_quote(s),
        (Value::String(s), RefForm::Raw) => s.clone(),
        (Value::Null, RefForm::Quoted) => "''".to_string(),
        (Value::Null, RefForm::Raw) => String::new(),
        (Value::Bool(_) | Value::Number(_), RefForm::Quoted) => shell_quote(&v.to_string()),
        (Value::Bool(_) | Value::Number(_), RefForm::Raw) => v.to_string(),
        (Value::Array(items), RefForm::Quoted)
            if items
                .iter()
                .all(|i| !matches!(i, Value::Array(_) | Value::Object(_))) =>
        {
            items
                .iter()
                .map(|i| shell_word(i, RefForm::Quoted))
                .collect::<Vec<_>>()
                .join(" ")
        }
        (Value::Array(_) | Value::Object(_), RefForm::Quoted) => shell_quote(&compact_json(v)),
        (Value::Array(_) | Value::Object(_), RefForm::Raw) => compact_json(v),
    }
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;

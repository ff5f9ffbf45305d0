//! Diagnostics: codes, severities and the record every stage reports (DSL.md §8).

use crate::ast::Span;

/// Every diagnostic code this subset emits (DSL.md §8.4–§8.5). Codes never change once shipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// `E001`.
    E001,
    /// `E002`.
    E002,
    /// `E003`.
    E003,
    /// `E004`.
    E004,
    /// `E005`.
    E005,
    /// `E006`.
    E006,
    /// `E010`.
    E010,
    /// `E011`.
    E011,
    /// `E012`.
    E012,
    /// `E013`.
    E013,
    /// `E014`.
    E014,
    /// `E020`.
    E020,
    /// `E021`.
    E021,
    /// `E030`.
    E030,
    /// `E031`.
    E031,
    /// `E040`.
    E040,
    /// `C001`.
    C001,
    /// `C002`.
    C002,
    /// `C003`.
    C003,
    /// `C004`.
    C004,
    /// `C005`.
    C005,
    /// `C006`.
    C006,
    /// `C007`.
    C007,
    /// `C008`.
    C008,
    /// `C010`.
    C010,
    /// `C011`.
    C011,
    /// `C012`.
    C012,
    /// `C013`.
    C013,
    /// `C014`.
    C014,
    /// `C015`.
    C015,
    /// `C016`.
    C016,
    /// `C018`: a model mode without a model.
    C018,
    /// `C019`.
    C019,
    /// `C020`: a `round_robin` router with fewer than two edges.
    C020,
    /// `C021`: an `llm` router with fewer than two edges.
    C021,
    /// `C022`: a clause on an edge of a router that picks its edge itself.
    C022,
    /// `C023`: an `llm`-only property on another router.
    C023,
    /// `C024`.
    C024,
    /// `C025`.
    C025,
    /// `C026`.
    C026,
    /// `C028`.
    C028,
    /// `C029`.
    C029,
    /// `C031`.
    C031,
    /// `C032` (warning).
    C032,
    /// `C035`: `{{artifacts.NAME}}` names an artifact no node publishes.
    C035,
    /// `C033`.
    C033,
    /// `C034`.
    C034,
    /// `C036`.
    C036,
    /// `C038`.
    C038,
    /// `C039`: a `compute` node without expressions.
    C039,
    /// `C040`.
    C040,
    /// `C041`.
    C041,
    /// `C044`.
    C044,
    /// `C045`: a `fail` node's `code` is missing, not `UPPER_SNAKE`, or one of the engine's own.
    C045,
    /// `C046`: an edge leaves a `fail` node (reaching one ends the run).
    C046,
    /// `C047`: a `fan_out_each` router without `over` (one reference), or `depends_on` without
    /// `key`.
    C047,
    /// `C048`: `over` / `as` / `key` / `depends_on` on a router that is not `fan_out_each`.
    C048,
    /// `C049`: a `fan_out_each` router without exactly one unconditional outgoing edge.
    C049,
    /// `C050`.
    C050,
    /// `C051`.
    C051,
    /// `C052`.
    C052,
    /// `C053`: `{{attachments.NAME}}` names no declared attachment.
    C053,
    /// `C054`: `{{attachments.NAME.F}}` with a field other than `path`, `mime`, `size`, `sha256`.
    C054,
    /// `C055`: a permission rule that cannot be read.
    C055,
    /// `C070`.
    C070,
    /// `C071`.
    C071,
    /// `C072`.
    C072,
    /// `C083` (warning).
    C083,
    /// `C084`.
    C084,
    /// `C085`.
    C085,
    /// `C086`.
    C086,
    /// `C087`.
    C087,
    /// `C090`.
    C090,
    /// `C091`.
    C091,
    /// `C092`.
    C092,
    /// `C093`.
    C093,
    /// `C094`.
    C094,
    /// `C095`.
    C095,
    /// `C109`.
    C109,
    /// `C123`.
    C123,
    /// `C124`.
    C124,
    /// `C128` (warning).
    C128,
    /// `C135`.
    C135,
    /// `C136` (warning).
    C136,
    /// `C137` (warning).
    C137,
    /// `C138`.
    C138,
    /// `C140` (warning).
    C140,
    /// `C142`.
    C142,
    /// `C143` (warning).
    C143,
    /// `C145` (warning).
    C145,
    /// `C147` (warning).
    C147,
    /// `C148`.
    C148,
    /// `C149`.
    C149,
    /// `C150`.
    C150,
    /// `C901`.
    C901,
    /// `C902` (warning).
    C902,
    /// `C903`.
    C903,
    /// `C904` (warning).
    C904,
    /// `C905`.
    C905,
    /// `C906`.
    C906,
    /// `C907`.
    C907,
    /// `C908` (warning).
    C908,
    /// `C909` (warning).
    C909,
    /// `C910`.
    C910,
    /// `C911`.
    C911,
    /// `C912` (warning).
    C912,
    /// `C913`.
    C913,
    /// `C914`.
    C914,
    /// `C915`: a subbot `source` that resolves outside the workflow's repository.
    C915,
    /// `C916`: a bundle's `prompts/` file that cannot be read by the bundle rules (a symlink out
    /// of the bundle, not a regular file, over the size bound, not UTF-8).
    C916,
    /// `C134`: a workflow's `repo_devbox` other than `on` or `off`.
    C134,
    /// `C139`: a workflow's `workspace_checkpoint` other than `on` or `off`.
    C139,
    /// `C141` (warning): `workspace_checkpoint: on`, which nothing here does.
    C141,
    /// `C917`: an `import` that cannot be followed (a path that is not plain names inside the
    /// bot's directory, a fragment that cannot be read, a different `dsl:` profile, too many).
    C917,
    /// `C920` (warning): a router's condition reads an input field that the output of one of
    /// its predecessors cannot have.
    C920,
    /// `C921` (warning): a compute expression reads `outputs.N.F` where N's output schema has no
    /// field F (older upstream files, whose compute expressions were not checked): it is `null`.
    C921,
    /// `C922` (warning): an agent's `tools:` names a tool this release does not have (upstream
    /// resolves tool names only when the node runs): the node fails when it starts.
    C922,
    /// `C923` (warning): an agent's `skills:` names a skill its bundle does not ship.
    C923,
    /// `C940` (warning): `budget.max_cost_usd` / `max_tokens` is not enforced.
    C940,
    /// `C941` (warning): a delegate-only property on a claw node has no effect.
    C941,
    /// `C942` (warning): a writing tool listed on a `readonly` node is removed.
    C942,
    /// `C943` (warning): an upstream agent property (`capabilities`, `compaction`, `memory`) is
    /// accepted but not enforced.
    C943,
}

impl Code {
    /// Every code, in catalogue order.
    pub const ALL: &'static [Code] = &[
        Code::E001,
        Code::E002,
        Code::E003,
        Code::E004,
        Code::E005,
        Code::E006,
        Code::E010,
        Code::E011,
        Code::E012,
        Code::E013,
        Code::E014,
        Code::E020,
        Code::E021,
        Code::E030,
        Code::E031,
        Code::E040,
        Code::C001,
        Code::C002,
        Code::C003,
        Code::C004,
        Code::C005,
        Code::C006,
        Code::C007,
        Code::C008,
        Code::C010,
        Code::C011,
        Code::C012,
        Code::C013,
        Code::C014,
        Code::C015,
        Code::C016,
        Code::C018,
        Code::C019,
        Code::C020,
        Code::C021,
        Code::C022,
        Code::C023,
        Code::C024,
        Code::C025,
        Code::C026,
        Code::C028,
        Code::C029,
        Code::C031,
        Code::C032,
        Code::C035,
        Code::C033,
        Code::C034,
        Code::C036,
        Code::C038,
        Code::C039,
        Code::C040,
        Code::C041,
        Code::C044,
        Code::C045,
        Code::C046,
        Code::C047,
        Code::C048,
        Code::C049,
        Code::C050,
        Code::C051,
        Code::C052,
        Code::C053,
        Code::C054,
        Code::C055,
        Code::C070,
        Code::C071,
        Code::C072,
        Code::C083,
        Code::C084,
        Code::C085,
        Code::C086,
        Code::C087,
        Code::C090,
        Code::C091,
        Code::C092,
        Code::C093,
        Code::C094,
        Code::C095,
        Code::C109,
        Code::C123,
        Code::C124,
        Code::C128,
        Code::C135,
        Code::C136,
        Code::C137,
        Code::C138,
        Code::C140,
        Code::C142,
        Code::C143,
        Code::C145,
        Code::C147,
        Code::C148,
        Code::C149,
        Code::C150,
        Code::C901,
        Code::C902,
        Code::C903,
        Code::C904,
        Code::C905,
        Code::C906,
        Code::C907,
        Code::C908,
        Code::C909,
        Code::C910,
        Code::C911,
        Code::C912,
        Code::C913,
        Code::C914,
        Code::C915,
        Code::C916,
        Code::C134,
        Code::C139,
        Code::C141,
        Code::C917,
        Code::C920,
        Code::C921,
        Code::C922,
        Code::C923,
        Code::C940,
        Code::C941,
        Code::C942,
        Code::C943,
    ];

    /// The stable wire spelling (`"C044"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::E001 => "E001",
            Code::E002 => "E002",
            Code::E003 => "E003",
            Code::E004 => "E004",
            Code::E005 => "E005",
            Code::E006 => "E006",
            Code::E010 => "E010",
            Code::E011 => "E011",
            Code::E012 => "E012",
            Code::E013 => "E013",
            Code::E014 => "E014",
            Code::E020 => "E020",
            Code::E021 => "E021",
            Code::E030 => "E030",
            Code::E031 => "E031",
            Code::E040 => "E040",
            Code::C001 => "C001",
            Code::C002 => "C002",
            Code::C003 => "C003",
            Code::C004 => "C004",
            Code::C005 => "C005",
            Code::C006 => "C006",
            Code::C007 => "C007",
            Code::C008 => "C008",
            Code::C010 => "C010",
            Code::C011 => "C011",
            Code::C012 => "C012",
            Code::C013 => "C013",
            Code::C014 => "C014",
            Code::C015 => "C015",
            Code::C016 => "C016",
            Code::C018 => "C018",
            Code::C019 => "C019",
            Code::C020 => "C020",
            Code::C021 => "C021",
            Code::C022 => "C022",
            Code::C023 => "C023",
            Code::C024 => "C024",
            Code::C025 => "C025",
            Code::C026 => "C026",
            Code::C028 => "C028",
            Code::C029 => "C029",
            Code::C031 => "C031",
            Code::C032 => "C032",
            Code::C035 => "C035",
            Code::C033 => "C033",
            Code::C034 => "C034",
            Code::C036 => "C036",
            Code::C038 => "C038",
            Code::C039 => "C039",
            Code::C040 => "C040",
            Code::C041 => "C041",
            Code::C044 => "C044",
            Code::C045 => "C045",
            Code::C046 => "C046",
            Code::C047 => "C047",
            Code::C048 => "C048",
            Code::C049 => "C049",
            Code::C050 => "C050",
            Code::C051 => "C051",
            Code::C052 => "C052",
            Code::C053 => "C053",
            Code::C054 => "C054",
            Code::C055 => "C055",
            Code::C070 => "C070",
            Code::C071 => "C071",
            Code::C072 => "C072",
            Code::C083 => "C083",
            Code::C084 => "C084",
            Code::C085 => "C085",
            Code::C086 => "C086",
            Code::C087 => "C087",
            Code::C090 => "C090",
            Code::C091 => "C091",
            Code::C092 => "C092",
            Code::C093 => "C093",
            Code::C094 => "C094",
            Code::C095 => "C095",
            Code::C109 => "C109",
            Code::C123 => "C123",
            Code::C124 => "C124",
            Code::C128 => "C128",
            Code::C135 => "C135",
            Code::C136 => "C136",
            Code::C137 => "C137",
            Code::C138 => "C138",
            Code::C140 => "C140",
            Code::C142 => "C142",
            Code::C143 => "C143",
            Code::C145 => "C145",
            Code::C147 => "C147",
            Code::C148 => "C148",
            Code::C149 => "C149",
            Code::C150 => "C150",
            Code::C901 => "C901",
            Code::C902 => "C902",
            Code::C903 => "C903",
            Code::C904 => "C904",
            Code::C905 => "C905",
            Code::C906 => "C906",
            Code::C907 => "C907",
            Code::C908 => "C908",
            Code::C909 => "C909",
            Code::C910 => "C910",
            Code::C911 => "C911",
            Code::C912 => "C912",
            Code::C913 => "C913",
            Code::C914 => "C914",
            Code::C915 => "C915",
            Code::C916 => "C916",
            Code::C917 => "C917",
            Code::C134 => "C134",
            Code::C139 => "C139",
            Code::C141 => "C141",
            Code::C920 => "C920",
            Code::C921 => "C921",
            Code::C922 => "C922",
            Code::C923 => "C923",
            Code::C940 => "C940",
            Code::C941 => "C941",
            Code::C942 => "C942",
            Code::C943 => "C943",
        }
    }

    /// The severity this code always has (DSL.md §8.5 `Sev`).
    pub fn severity(self) -> Severity {
        match self {
            Code::C032
            | Code::C141
            | Code::C923
            | Code::C083
            | Code::C128
            | Code::C136
            | Code::C137
            | Code::C140
            | Code::C143
            | Code::C145
            | Code::C147
            | Code::C149
            | Code::C150
            | Code::C902
            | Code::C904
            | Code::C908
            | Code::C909
            | Code::C912
            | Code::C920
            | Code::C921
            | Code::C922
            | Code::C940
            | Code::C941
            | Code::C942
            | Code::C943 => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// Parse-stage codes (`E…`): when any is reported, the C-checks do not run.
    pub fn is_parse_stage(self) -> bool {
        self.as_str().starts_with('E')
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a diagnostic is. Declaration order is strictness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Reported; does not stop a run.
    Warning,
    /// Stops `iterion run`; `iterion validate` exits 1.
    Error,
}

impl Severity {
    /// `"error"` / `"warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One diagnostic (DSL.md §8.2). The file name is added when rendering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The code.
    pub code: Code,
    /// The code's severity.
    pub severity: Severity,
    /// The message, without code or position.
    pub message: String,
    /// The anchor.
    pub span: Span,
    /// The node concerned, when there is one.
    pub node: Option<String>,
    /// An actionable sentence, when there is one.
    pub hint: Option<String>,
    /// The imported fragment the span is in, relative to the compiled file's directory
    /// (`None`: the compiled file itself; docs/language.md "Imports").
    pub file: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with the code's own severity, no node and no hint.
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Self {
        Self {
            code,
            severity: code.severity(),
            message: message.into(),
            span,
            node: None,
            hint: None,
            file: None,
        }
    }

    /// Sets the node concerned.
    pub fn with_node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Sets the hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics as DSL.md §8.3 requires: by line, then column, then code — the compiled
/// file's first, then each imported fragment's, by path.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| {
        (&a.file, a.span.line, a.span.col, a.code).cmp(&(&b.file, b.span.line, b.span.col, b.code))
    });
}

//! The IR of cursors, MCP servers, presets and attachments, their lowering, and the cursor
//! calibration every agent node's system prompt gets (docs/language.md "Cursors").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ast;

/// An `mcp_server` declaration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServer {
    /// How the server is reached.
    pub transport: McpTransport,
    /// `command` (stdio), possibly holding `${…}` (expanded at launch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `args` (stdio).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// `env` (stdio): set in the server's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// `url` (http / sse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An `auth:` block was declared (never honoured: a run refuses it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auth: bool,
}

/// `transport` of an `mcp_server`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTransport {
    /// A process speaking JSON-RPC on stdin/stdout (the default).
    #[default]
    Stdio,
    /// Streamable HTTP.
    Http,
    /// Server-sent events.
    Sse,
}

impl McpTransport {
    /// The transport a word names.
    pub fn from_word(w: &str) -> Option<McpTransport> {
        match w {
            "stdio" => Some(McpTransport::Stdio),
            "http" => Some(McpTransport::Http),
            "sse" => Some(McpTransport::Sse),
            _ => None,
        }
    }

    /// The word.
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Stdio => "stdio",
            McpTransport::Http => "http",
            McpTransport::Sse => "sse",
        }
    }
}

/// A `cursor` declaration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    /// `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `values:` (name, fragment) in source order; empty for a banded cursor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<(String, String)>,
    /// `bands:` in source order; empty for an enum cursor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bands: Vec<Band>,
}

/// One band of a numeric cursor: `[lo, hi]` and its fragment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// Lower bound, inclusive.
    pub lo: f64,
    /// Upper bound, inclusive.
    pub hi: f64,
    /// The fragment.
    pub text: String,
}

/// One activated cursor of a node: the cursor's name and the value as written (may hold
/// `${VAR}`, resolved at launch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorSetting {
    /// The cursor.
    pub cursor: String,
    /// The value.
    pub value: String,
}

/// An `attachments:` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The name (`{{attachments.NAME}}`).
    pub name: String,
    /// `file` or `image`.
    pub kind: String,
    /// `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `accept_mime`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_mime: Vec<String>,
    /// `required`.
    #[serde(default)]
    pub required: bool,
}

/// The heading of the calibration section appended to a system prompt.
pub const CALIBRATION_HEADING: &str = "## Calibration";

/// `"lo..hi"` → `(lo, hi)`; `None` when it is not two numbers.
pub fn parse_band(range: &str) -> Option<(f64, f64)> {
    let (lo, hi) = range.split_once("..")?;
    let lo: f64 = lo.trim().parse().ok()?;
    let hi: f64 = hi.trim().parse().ok()?;
    (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// Why a cursor setting resolves to no fragment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// The node names a cursor the workflow does not declare.
    #[error("cursor \"{0}\" is not declared")]
    Unknown(String),
    /// The value is not one of the cursor's names, or no band holds it.
    #[error("cursor \"{cursor}\" has no value {value:?}")]
    NoMatch {
        /// The cursor.
        cursor: String,
        /// The value as resolved.
        value: String,
    },
}

impl Cursor {
    /// The fragment `value` selects (docs/language.md "Cursors"): a number is clamped to
    /// `[0, 1]` and takes the first band holding it, or the enum position `floor(v * len)`; a
    /// word is looked up by name.
    pub fn fragment(&self, value: &str) -> Option<&str> {
        if let Ok(v) = value.trim().parse::<f64>()
            && v.is_finite()
        {
            let v = v.clamp(0.0, 1.0);
            if !self.bands.is_empty() {
                return self
                    .bands
                    .iter()
                    .find(|b| b.lo <= v && v <= b.hi)
                    .map(|b| b.text.as_str());
            }
            if self.values.is_empty() {
                return None;
            }
            let len = self.values.len();
            // floor(v * len), the last one for v = 1.
            let i = ((v * len as f64) as usize).min(len - 1);
            return self.values.get(i).map(|(_, t)| t.as_str());
        }
        self.values
            .iter()
            .find(|(n, _)| n == value)
            .map(|(_, t)| t.as_str())
    }
}

/// The calibration section of a node's activated cursors, sorted by cursor name, with each value
/// first expanded by `expand` (the `${VAR}` of a setting); `None` when there are none.
pub fn calibration(
    cursors: &BTreeMap<String, Cursor>,
    settings: &[CursorSetting],
    expand: impl Fn(&str) -> String,
) -> Result<Option<String>, CursorError> {
    if settings.is_empty() {
        return Ok(None);
    }
    let mut sorted: Vec<&CursorSetting> = settings.iter().collect();
    sorted.sort_by(|a, b| a.cursor.cmp(&b.cursor));
    let mut out = String::from(CALIBRATION_HEADING);
    out.push('\n');
    for s in sorted {
        let cursor = cursors
            .get(&s.cursor)
            .ok_or_else(|| CursorError::Unknown(s.cursor.clone()))?;
        let value = expand(&s.value);
        let fragment = cursor.fragment(&value).ok_or(CursorError::NoMatch {
            cursor: s.cursor.clone(),
            value,
        })?;
        out.push_str(&format!("\n**{}:** {fragment}", s.cursor));
    }
    Ok(Some(out))
}

/// Lowers a `cursor` declaration (bands that do not parse are skipped: C085 reported them).
pub(crate) fn lower_cursor(c: &ast::CursorDecl) -> Cursor {
    Cursor {
        description: c.description.as_ref().map(|d| d.value.clone()),
        values: c
            .values
            .iter()
            .flatten()
            .map(|(n, t)| (n.name.clone(), t.value.clone()))
            .collect(),
        bands: c
            .bands
            .iter()
            .flatten()
            .filter_map(|(r, t)| {
                parse_band(&r.value).map(|(lo, hi)| Band {
                    lo,
                    hi,
                    text: t.value.clone(),
                })
            })
            .collect(),
    }
}

/// Lowers an `mcp_server` declaration.
pub(crate) fn lower_mcp_server(m: &ast::McpServerDecl) -> McpServer {
    McpServer {
        transport: m
            .transport
            .as_ref()
            .and_then(|w| McpTransport::from_word(&w.text))
            .unwrap_or_default(),
        command: m.command.as_ref().map(|c| c.value.clone()),
        args: m
            .args
            .iter()
            .flat_map(|a| &a.items)
            .map(|s| s.value.clone())
            .collect(),
        env: m
            .env
            .iter()
            .flat_map(|e| &e.entries)
            .map(|e| (e.key.name.clone(), e.value.value.clone()))
            .collect(),
        url: m.url.as_ref().map(|u| u.value.clone()),
        auth: m.auth.is_some(),
    }
}

/// The servers a node gets (docs/language.md "MCP servers"): its own `servers`, then, unless it
/// says `inherit: false`, the workflow's; minus its `disable` list; each once, in that order.
pub(crate) fn node_mcp_servers(
    node: Option<&ast::McpBlock>,
    workflow: Option<&ast::McpBlock>,
) -> Vec<String> {
    let words = |l: Option<&ast::WordList>| -> Vec<String> {
        l.into_iter()
            .flat_map(|l| &l.items)
            .map(|w| w.text.clone())
            .collect()
    };
    let mut out: Vec<String> = Vec::new();
    let push = |name: String, out: &mut Vec<String>| {
        if !out.contains(&name) {
            out.push(name);
        }
    };
    for s in words(node.and_then(|n| n.servers.as_ref())) {
        push(s, &mut out);
    }
    if node.and_then(|n| n.inherit).is_none_or(|b| b.value) {
        for s in words(workflow.and_then(|w| w.servers.as_ref())) {
            push(s, &mut out);
        }
    }
    let disabled = words(node.and_then(|n| n.disable.as_ref()));
    out.retain(|s| !disabled.contains(s));
    out
}

/// A node's activated cursors: none unless `enabled: true`.
pub(crate) fn node_cursors(block: Option<&ast::CursorsBlock>) -> Vec<CursorSetting> {
    match block {
        Some(b) if b.enabled.is_some_and(|e| e.value) => b
            .settings
            .iter()
            .map(|(k, v)| CursorSetting {
                cursor: k.name.clone(),
                value: v.value.clone(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A preset value as JSON (a word or string is a string; a list is a list of its items).
pub(crate) fn preset_json(v: &ast::Value) -> serde_json::Value {
    use ast::Value as V;
    use serde_json::Value as J;
    match v {
        V::Str(s) => J::String(s.value.clone()),
        V::Ident(i) => J::String(i.name.clone()),
        V::Int(i, _) => J::from(*i),
        V::Float(f, _) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        V::Bool(b, _) => J::Bool(*b),
        V::List(items, _) => J::Array(items.iter().map(preset_json).collect()),
        V::Map(entries, _) => J::Object(
            entries
                .iter()
                .map(|(k, v)| (k.name.clone(), preset_json(v)))
                .collect(),
        ),
    }
}

/// Lowers an attachment.
pub(crate) fn lower_attachment(a: &ast::AttachmentDef) -> Attachment {
    Attachment {
        name: a.name.name.clone(),
        kind: a.kind.text.clone(),
        description: a.description.as_ref().map(|d| d.value.clone()),
        accept_mime: a
            .accept_mime
            .iter()
            .flat_map(|l| &l.items)
            .map(|s| s.value.clone())
            .collect(),
        required: a.required.is_some_and(|r| r.value),
    }
}

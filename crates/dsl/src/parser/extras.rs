//! `cursor`, `mcp_server`, `presets`, `attachments` declarations and the `cursors:` / `mcp:`
//! blocks (docs/language.md "Cursors", "MCP servers", "Presets", "Attachments").

use std::collections::HashMap;

use super::values::{PVal, Prop, to_bool};
use super::{PResult, Parser, diag};
use crate::ast::{self, Span, StrKind, StrLit};
use crate::diag::Code;
use crate::lexer::Tok;

/// `cursor NAME:` properties.
const CURSOR_PROPS: &[&str] = &["description", "values", "bands"];
/// `mcp_server NAME:` properties.
const MCP_SERVER_PROPS: &[&str] = &["transport", "command", "args", "env", "url", "auth"];
/// `auth:` of an `mcp_server`.
const MCP_AUTH_PROPS: &[&str] = &[
    "type",
    "auth_url",
    "token_url",
    "revoke_url",
    "client_id",
    "scopes",
];
/// A node's or the workflow's `mcp:` block.
/// `compaction:` on an agent (upstream).
const COMPACTION_PROPS: &[&str] = &["threshold", "preserve_recent"];

/// `memory:` on an agent (upstream).
const MEMORY_PROPS: &[&str] = &[
    "enabled",
    "scope",
    "autoload",
    "read",
    "write",
    "pre_compact_inject",
];

const MCP_PROPS: &[&str] = &["servers", "disable", "inherit", "autoload_project"];
/// The properties of one attachment.
const ATTACHMENT_PROPS: &[&str] = &["description", "accept_mime", "required"];

/// E010 for a key seen before in this block.
fn once(seen: &mut HashMap<String, u32>, what: &str, name: &str, span: Span) -> PResult<()> {
    if let Some(line) = seen.get(name) {
        return Err(diag(
            Code::E010,
            span,
            format!("{what} \"{name}\" already declared at line {line}"),
        ));
    }
    seen.insert(name.to_owned(), span.line);
    Ok(())
}

/// A value's text for a cursor setting: a word, a number's or bool's spelling, a string.
fn setting_text(key: &ast::Ident, v: PVal) -> PResult<StrLit> {
    match v {
        PVal::Scalar(ast::Value::Str(s), _) => Ok(s),
        PVal::Scalar(other, spelling) => {
            let span = match &other {
                ast::Value::Ident(i) => i.span,
                ast::Value::Int(_, s) | ast::Value::Float(_, s) | ast::Value::Bool(_, s) => *s,
                _ => key.span,
            };
            Ok(StrLit {
                value: spelling,
                kind: StrKind::Ident,
                span,
                lines: vec![ast::LineStart {
                    value_offset: 0,
                    line: span.line,
                    col: span.col,
                }],
            })
        }
        other => Err(super::values::kind_error(
            &key.name,
            "a word, a number or a string",
            other.span(),
            &other.show(),
        )),
    }
}

impl Parser<'_> {
    /// `cursor NAME:`.
    pub(super) fn cursor_decl(&mut self) -> PResult<ast::CursorDecl> {
        self.bump();
        let name = self.name("a cursor name")?;
        self.expect_colon()?;
        self.require_block(&format!("cursor {}:", name.name))?;
        let mut c = ast::CursorDecl {
            name,
            description: None,
            values: None,
            bands: None,
        };
        self.props("cursor", CURSOR_PROPS, |p, key| {
            match key.name.as_str() {
                "description" => c.description = Some(p.str_prop(&key)?),
                "values" => {
                    let mut out = Vec::new();
                    p.nested_entries(&key, |p, k| {
                        let Tok::Ident(n) = &k.tok else {
                            return Err(p.unexpected(Some("a value name")));
                        };
                        let ident = ast::Ident {
                            name: n.clone(),
                            span: k.span,
                        };
                        let text = p.str_prop(&ident)?;
                        out.push((ident, text));
                        Ok(n.clone())
                    })?;
                    c.values = Some(out);
                }
                _ => {
                    let mut out = Vec::new();
                    p.nested_entries(&key, |p, k| {
                        let range = match &k.tok {
                            Tok::Str(s) => s.clone(),
                            _ => {
                                return Err(
                                    p.unexpected(Some("a quoted range such as \"0.0..0.5\""))
                                );
                            }
                        };
                        let ident = ast::Ident {
                            name: range.value.clone(),
                            span: k.span,
                        };
                        let text = p.str_prop(&ident)?;
                        let shown = range.value.clone();
                        out.push((range, text));
                        Ok(shown)
                    })?;
                    c.bands = Some(out);
                }
            }
            Ok(())
        })?;
        Ok(c)
    }

    /// After `key`: `:` and a nested block of `KEY: value` lines; `each` sees the key token
    /// (consumed) and parses the rest of its line, returning the key's text (E010 on repeats).
    fn nested_entries(
        &mut self,
        key: &ast::Ident,
        mut each: impl FnMut(&mut Self, crate::lexer::Token) -> PResult<String>,
    ) -> PResult<()> {
        match self.prop(key)? {
            Prop::Value(v) => Err(super::values::kind_error(
                &key.name,
                "a nested block",
                v.span(),
                &v.show(),
            )),
            Prop::Empty(_) => Ok(()),
            Prop::Nested(_) => {
                let mut seen = HashMap::new();
                self.block_lines(|p| {
                    let t = p.peek().clone();
                    if !matches!(t.tok, Tok::Ident(_) | Tok::Str(_)) {
                        return Err(p.unexpected(Some("a key")));
                    }
                    p.bump();
                    let name = each(p, t.clone())?;
                    once(&mut seen, "key", &name, t.span)
                })
            }
        }
    }

    /// A node's `cursors:` block (nested, or inline `{ … }`).
    pub(super) fn cursors_prop(&mut self, key: &ast::Ident) -> PResult<ast::CursorsBlock> {
        let mut b = ast::CursorsBlock {
            key: key.span,
            ..Default::default()
        };
        let mut seen = HashMap::new();
        match self.prop(key)? {
            Prop::Value(PVal::Map(entries, _)) => {
                for (k, v, spelling) in entries {
                    once(&mut seen, "cursor setting", &k.name, k.span)?;
                    let v = match v {
                        ast::Value::List(items, span) => PVal::List(items, span),
                        ast::Value::Map(_, span) => PVal::Map(Vec::new(), span),
                        scalar => PVal::Scalar(scalar, spelling),
                    };
                    self.cursor_setting(&mut b, k, v)?;
                }
                self.end_line()?;
            }
            Prop::Value(v) => {
                return Err(super::values::kind_error(
                    &key.name,
                    "a block",
                    v.span(),
                    &v.show(),
                ));
            }
            Prop::Empty(_) => {}
            Prop::Nested(_) => self.block_lines(|p| {
                let k = p.prop_key()?;
                once(&mut seen, "cursor setting", &k.name, k.span)?;
                p.expect_colon()?;
                let v = p.value(&k.name, 0)?;
                p.cursor_setting(&mut b, k, v)?;
                p.end_line()
            })?,
        }
        Ok(b)
    }

    fn cursor_setting(&mut self, b: &mut ast::CursorsBlock, k: ast::Ident, v: PVal) -> PResult<()> {
        if k.name == "enabled" {
            b.enabled = Some(to_bool(&k.name, &v)?);
        } else {
            let text = setting_text(&k, v)?;
            b.settings.push((k, text));
        }
        Ok(())
    }

    /// `mcp_server NAME:`.
    pub(super) fn mcp_server_decl(&mut self) -> PResult<ast::McpServerDecl> {
        self.bump();
        let name = self.name("a server name")?;
        self.expect_colon()?;
        self.require_block(&format!("mcp_server {}:", name.name))?;
        let mut m = ast::McpServerDecl {
            name,
            transport: None,
            command: None,
            args: None,
            env: None,
            url: None,
            auth: None,
        };
        self.props("mcp_server", MCP_SERVER_PROPS, |p, key| {
            match key.name.as_str() {
                "transport" => m.transport = Some(p.word_prop(&key, "a word")?),
                "command" => m.command = Some(p.str_prop(&key)?),
                "args" => m.args = Some(p.str_list_prop(&key)?),
                "env" => m.env = Some(p.map_prop(&key)?),
                "url" => m.url = Some(p.str_prop(&key)?),
                _ => {
                    let mut auth = ast::McpAuth {
                        key: key.span,
                        type_: None,
                    };
                    p.block_prop(&key, MCP_AUTH_PROPS, |p, k| {
                        match k.name.as_str() {
                            "type" => auth.type_ = Some(p.str_prop(&k)?),
                            "scopes" => {
                                p.str_list_prop(&k)?;
                            }
                            _ => {
                                p.str_prop(&k)?;
                            }
                        }
                        Ok(())
                    })?;
                    m.auth = Some(auth);
                }
            }
            Ok(())
        })?;
        Ok(m)
    }

    /// A node's or the workflow's `mcp:` block.
    pub(super) fn mcp_prop(&mut self, key: &ast::Ident) -> PResult<ast::McpBlock> {
        let mut b = ast::McpBlock {
            key: key.span,
            ..Default::default()
        };
        self.block_prop(key, MCP_PROPS, |p, k| {
            match k.name.as_str() {
                "servers" => b.servers = Some(p.word_list_prop(&k)?),
                "disable" => b.disable = Some(p.word_list_prop(&k)?),
                "inherit" => b.inherit = Some(p.bool_prop(&k)?),
                _ => {
                    let v = p.bool_prop(&k)?;
                    if v.value {
                        return Err(diag(
                            Code::E012,
                            k.span,
                            "\"autoload_project: true\" is not supported (a repository's own MCP configuration is never loaded)",
                        ));
                    }
                }
            }
            Ok(())
        })?;
        Ok(b)
    }

    /// `capabilities: [..]`, `compaction:` (`threshold`, `preserve_recent`) or `memory:`
    /// (`enabled`, `scope`, `autoload`, `read`, `write`, `pre_compact_inject`) on an agent:
    /// checked for shape, kept only as the key (C943 says they are not enforced).
    pub(super) fn unenforced_prop(&mut self, key: &ast::Ident) -> PResult<()> {
        let any = |_| Ok(());
        match key.name.as_str() {
            "capabilities" => {
                // Upstream's capability names are dotted (`board.read`), which no value here
                // lexes as one word: the rest of the line is taken as it is, up to a `]`.
                self.expect_colon()?;
                if !matches!(self.peek().tok, Tok::LBracket) {
                    return Err(self.unexpected(Some("\"[\"")));
                }
                while !matches!(self.peek().tok, Tok::RBracket) {
                    if matches!(self.peek().tok, Tok::Newline | Tok::Eof | Tok::Error(_)) {
                        return Err(self.unexpected(Some("\"]\"")));
                    }
                    self.bump();
                }
                self.bump();
                self.end_line()
            }
            "interaction" => self.scalar_prop(key, "an interaction mode", any),
            "compaction" => self.block_prop(key, COMPACTION_PROPS, |p, k| {
                p.scalar_prop(&k, "a value", any)
            }),
            _ => self.block_prop(key, MEMORY_PROPS, |p, k| p.scalar_prop(&k, "a value", any)),
        }
    }

    /// `presets:` at top level.
    pub(super) fn presets_decl(&mut self) -> PResult<ast::PresetsBlock> {
        let keyword = self.bump().span;
        self.expect_colon()?;
        self.require_block("presets:")?;
        let mut presets = Vec::new();
        self.block_lines(|p| {
            let name = p.name("a preset name")?;
            p.expect_colon()?;
            p.require_block(&format!("{}:", name.name))?;
            let mut entries = Vec::new();
            let mut seen = HashMap::new();
            p.block_lines(|p| {
                let k = p.name("a var name")?;
                once(&mut seen, "preset var", &k.name, k.span)?;
                p.expect_colon()?;
                let v = p.value(&k.name, 0)?.into_value();
                p.end_line()?;
                entries.push((k, v));
                Ok(())
            })?;
            presets.push((name, entries));
            Ok(())
        })?;
        Ok(ast::PresetsBlock { keyword, presets })
    }

    /// After the `attachments` keyword (consumed).
    pub(super) fn attachments_body(&mut self, keyword: Span) -> PResult<ast::AttachmentsBlock> {
        self.expect_colon()?;
        self.attachments_after_colon(keyword)
    }

    /// After `attachments:`: the end of the line and one `NAME: file|image` line per attachment,
    /// each optionally followed by an indented block of properties.
    pub(super) fn attachments_after_colon(
        &mut self,
        keyword: Span,
    ) -> PResult<ast::AttachmentsBlock> {
        self.require_block("attachments:")?;
        let mut items = Vec::new();
        self.block_lines(|p| {
            let name = p.name("an attachment name")?;
            p.expect_colon()?;
            let kind = p.value(&name.name, 0)?;
            let kind = super::values::to_word(&name.name, "file or image", &kind)?;
            if kind.text != "file" && kind.text != "image" {
                return Err(diag(
                    Code::E020,
                    kind.span,
                    format!(
                        "\"{}\" is not a valid attachment type; expected file or image",
                        kind.text
                    ),
                ));
            }
            p.end_line()?;
            let mut def = ast::AttachmentDef {
                name,
                kind,
                description: None,
                accept_mime: None,
                required: None,
            };
            p.props("attachment", ATTACHMENT_PROPS, |p, k| {
                match k.name.as_str() {
                    "description" => def.description = Some(p.str_prop(&k)?),
                    "accept_mime" => def.accept_mime = Some(p.str_list_prop(&k)?),
                    _ => def.required = Some(p.bool_prop(&k)?),
                }
                Ok(())
            })?;
            items.push(def);
            Ok(())
        })?;
        Ok(ast::AttachmentsBlock { keyword, items })
    }
}

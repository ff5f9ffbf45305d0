//! Checks of cursors, MCP servers, presets and attachments (docs/language.md).
//!
//! Codes: C024, C025, C038, C087 (MCP); C050–C052 (attachments); C070–C072 (presets);
//! C083–C086 (cursors).
use std::collections::HashMap;

use super::symbols::Symbols;
use crate::{
    Code,
    ast::{self, NodeBody},
    diag::Diagnostic,
    ir::{McpTransport, parse_band},
};

pub(super) fn check(syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    cursors(syms, out);
    mcp(syms, out);
    presets(syms, out);
    attachments(syms, out);
}

fn cursors(syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&str, &ast::CursorDecl> = HashMap::new();
    for c in &syms.cursor_list {
        if let Some(first) = seen.get(c.name.name.as_str()) {
            out.push(Diagnostic::new(
                Code::C086,
                c.name.span,
                format!(
                    "cursor \"{}\" already declared at line {}",
                    c.name.name, first.name.span.line
                ),
            ));
            continue;
        }
        seen.insert(c.name.name.as_str(), c);
        malformed_cursor(c, out);
    }
    for n in &syms.node_list {
        let NodeBody::Agent(a) = &n.body else {
            continue;
        };
        let Some(block) = &a.extras.cursors else {
            continue;
        };
        for (k, v) in &block.settings {
            let Some(c) = seen.get(k.name.as_str()) else {
                out.push(
                    Diagnostic::new(
                        Code::C083,
                        k.span,
                        format!("cursor \"{}\" is not declared", k.name),
                    )
                    .with_node(n.name.name.clone())
                    .with_hint(format!("declare it with `cursor {}:`", k.name)),
                );
                continue;
            };
            if v.value.contains("${") {
                continue;
            }
            if let Some(why) = invalid_setting(c, &v.value) {
                out.push(
                    Diagnostic::new(
                        Code::C084,
                        v.span,
                        format!(
                            "invalid value {:?} for cursor \"{}\": {why}",
                            v.value, k.name
                        ),
                    )
                    .with_node(n.name.name.clone()),
                );
            }
        }
    }
}

/// C085: neither or both forms, a band that does not parse, leaves `[0, 1]`, or overlaps
/// another.
fn malformed_cursor(c: &ast::CursorDecl, out: &mut Vec<Diagnostic>) {
    let bad = |why: String| {
        Diagnostic::new(
            Code::C085,
            c.name.span,
            format!("cursor \"{}\" {why}", c.name.name),
        )
    };
    match (&c.values, &c.bands) {
        (None, None) => out.push(bad("declares neither values: nor bands:".into())),
        (Some(_), Some(_)) => out.push(bad("declares both values: and bands:".into())),
        (Some(v), None) if v.is_empty() => out.push(bad("has no values".into())),
        (None, Some(b)) if b.is_empty() => out.push(bad("has no bands".into())),
        (None, Some(bands)) => {
            let mut parsed: Vec<(f64, f64, &ast::StrLit)> = Vec::new();
            for (r, _) in bands {
                match parse_band(&r.value) {
                    Some((lo, hi))
                        if (0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi) && lo <= hi =>
                    {
                        if let Some((_, _, other)) =
                            parsed.iter().find(|(l, h, _)| lo < *h && *l < hi)
                        {
                            out.push(Diagnostic::new(
                                Code::C085,
                                r.span,
                                format!(
                                    "band \"{}\" of cursor \"{}\" overlaps \"{}\"",
                                    r.value, c.name.name, other.value
                                ),
                            ));
                        }
                        parsed.push((lo, hi, r));
                    }
                    _ => out.push(
                        Diagnostic::new(
                            Code::C085,
                            r.span,
                            format!(
                                "band \"{}\" of cursor \"{}\" is not a range inside [0, 1]",
                                r.value, c.name.name
                            ),
                        )
                        .with_hint("write \"LO..HI\" with 0 <= LO <= HI <= 1"),
                    ),
                }
            }
        }
        (Some(_), None) => {}
    }
}

/// Why a literal setting selects nothing (C084).
fn invalid_setting(c: &ast::CursorDecl, value: &str) -> Option<String> {
    if let Ok(v) = value.trim().parse::<f64>() {
        if !(0.0..=1.0).contains(&v) {
            return Some("a number must be inside [0, 1]".into());
        }
        if let Some(bands) = &c.bands
            && !bands
                .iter()
                .any(|(r, _)| parse_band(&r.value).is_some_and(|(lo, hi)| lo <= v && v <= hi))
        {
            return Some("no band holds it".into());
        }
        return None;
    }
    match &c.values {
        Some(values) if values.iter().any(|(n, _)| n.name == value) => None,
        Some(values) => Some(format!(
            "expected one of {}",
            values
                .iter()
                .map(|(n, _)| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        None => Some("a banded cursor takes a number".into()),
    }
}

fn mcp(syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for m in &syms.mcp_list {
        if let Some(line) = seen.get(m.name.name.as_str()) {
            out.push(Diagnostic::new(
                Code::C024,
                m.name.span,
                format!(
                    "mcp_server \"{}\" already declared at line {line}",
                    m.name.name
                ),
            ));
            continue;
        }
        seen.insert(m.name.name.as_str(), m.name.span.line);
        server_config(m, out);
    }
    let mut check_refs = |block: &ast::McpBlock, node: Option<&str>| {
        for w in [&block.servers, &block.disable]
            .into_iter()
            .flatten()
            .flat_map(|l| &l.items)
        {
            if !seen.contains_key(w.text.as_str()) {
                let mut d = Diagnostic::new(
                    Code::C087,
                    w.span,
                    format!("mcp server \"{}\" is not declared", w.text),
                )
                .with_hint(format!("declare it with `mcp_server {}:`", w.text));
                if let Some(n) = node {
                    d = d.with_node(n);
                }
                out.push(d);
            }
        }
    };
    if let Some(block) = syms.workflow().and_then(|w| w.mcp.as_ref()) {
        check_refs(block, None);
    }
    for n in &syms.node_list {
        if let NodeBody::Agent(a) = &n.body
            && let Some(block) = &a.extras.mcp
        {
            check_refs(block, Some(&n.name.name));
        }
    }
}

/// C025 / C038 on one server.
fn server_config(m: &ast::McpServerDecl, out: &mut Vec<Diagnostic>) {
    let name = &m.name.name;
    let bad = |span, why: String| {
        Diagnostic::new(Code::C025, span, format!("mcp_server \"{name}\" {why}"))
    };
    let transport = match &m.transport {
        None => McpTransport::Stdio,
        Some(w) => match McpTransport::from_word(&w.text) {
            Some(t) => t,
            None => {
                out.push(bad(
                    w.span,
                    format!(
                        "has unknown transport \"{}\"; expected stdio, http or sse",
                        w.text
                    ),
                ));
                return;
            }
        },
    };
    match transport {
        McpTransport::Stdio => {
            if m.command.as_ref().is_none_or(|c| c.value.trim().is_empty()) {
                out.push(bad(m.name.span, "uses stdio and needs a command".into()));
            }
            if let Some(u) = &m.url {
                out.push(bad(u.span, "uses stdio and takes no url".into()));
            }
        }
        McpTransport::Http | McpTransport::Sse => {
            if m.url.is_none() {
                out.push(bad(
                    m.name.span,
                    format!("uses {} and needs a url", transport.as_str()),
                ));
            }
            let stdio_only = [
                m.command.as_ref().map(|c| c.span),
                m.args.as_ref().map(|a| a.span),
                m.env.as_ref().map(|e| e.span),
            ];
            if let Some(span) = stdio_only.into_iter().flatten().next() {
                out.push(bad(
                    span,
                    format!(
                        "uses {} and takes no command, args or env",
                        transport.as_str()
                    ),
                ));
            }
        }
    }
    if let Some(auth) = &m.auth
        && auth.type_.as_ref().is_none_or(|t| t.value != "oauth2")
    {
        out.push(Diagnostic::new(
            Code::C038,
            auth.key,
            format!("mcp_server \"{name}\": the only auth type is \"oauth2\""),
        ));
    }
}

fn presets(syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for block in &syms.presets {
        for (name, entries) in &block.presets {
            if let Some(line) = seen.get(name.name.as_str()) {
                out.push(Diagnostic::new(
                    Code::C072,
                    name.span,
                    format!("preset \"{}\" already declared at line {line}", name.name),
                ));
                continue;
            }
            seen.insert(name.name.as_str(), name.span.line);
            for (k, v) in entries {
                let Some(var) = syms.vars.get(k.name.as_str()) else {
                    out.push(Diagnostic::new(
                        Code::C070,
                        k.span,
                        format!(
                            "preset \"{}\" sets \"{}\", which is not a declared var",
                            name.name, k.name
                        ),
                    ));
                    continue;
                };
                if crate::ir::lower::default_json(var.ty, v).is_none() {
                    out.push(Diagnostic::new(
                        Code::C071,
                        v.span(),
                        format!(
                            "preset \"{}\": value of \"{}\" is not a {}",
                            name.name,
                            k.name,
                            var.ty.as_str()
                        ),
                    ));
                }
            }
        }
    }
}

fn attachments(syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    let blocks = syms
        .attachment_blocks
        .iter()
        .copied()
        .chain(syms.workflow().and_then(|w| w.attachments.as_ref()));
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for a in blocks.flat_map(|b| &b.items) {
        if let Some(line) = seen.get(a.name.name.as_str()) {
            out.push(Diagnostic::new(
                Code::C050,
                a.name.span,
                format!(
                    "attachment \"{}\" already declared at line {line}",
                    a.name.name
                ),
            ));
            continue;
        }
        seen.insert(a.name.name.as_str(), a.name.span.line);
        if syms.vars.contains_key(a.name.name.as_str()) {
            out.push(Diagnostic::new(
                Code::C051,
                a.name.span,
                format!("attachment \"{}\" has the name of a var", a.name.name),
            ));
        }
        for m in a.accept_mime.iter().flat_map(|l| &l.items) {
            if !is_mime_pattern(&m.value) {
                out.push(Diagnostic::new(
                    Code::C052,
                    m.span,
                    format!(
                        "accept_mime \"{}\" is not of the form type/subtype",
                        m.value
                    ),
                ));
            }
        }
    }
}

/// `type/subtype`, each a non-empty token of `[A-Za-z0-9.+-]`, or `*`.
fn is_mime_pattern(s: &str) -> bool {
    let token = |t: &str| {
        t == "*"
            || (!t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_')))
    };
    s.split_once('/')
        .is_some_and(|(t, sub)| token(t) && token(sub) && !sub.contains('/'))
}

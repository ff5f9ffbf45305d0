//! Human and JSON rendering of diagnostics (DSL.md §8.2).
//!
//! Rendering is separate from the checks so the wire shapes are pinned in one place: the CLI's
//! `validate` and `run` print through here, and snapshot tests pin both forms.

use serde_json::{Map, Value, json};

use crate::diag::Diagnostic;

/// The text the renderer quotes lines from: BOM stripped, CRLF and lone CR turned into LF, and
/// invalid UTF-8 replaced (an E006 file is still shown). Columns then match the diagnostics'.
pub fn display_source(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// `N errors, M warnings`, singular for 1.
pub fn summary(errors: usize, warnings: usize) -> String {
    let plural = |n: usize, word: &str| {
        if n == 1 {
            format!("1 {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    format!(
        "{}, {}",
        plural(errors, "error"),
        plural(warnings, "warning")
    )
}

/// The human form of every diagnostic, separated by blank lines, ending with the summary line.
///
/// ```
/// # use iterion_dsl::{render, Code, Diagnostic, ast::Span};
/// let d = Diagnostic::new(Code::C142, Span::new(2, 13, 9), "invalid worktree \"sometimes\"; expected none or auto");
/// let out = render::human("w.iter", "workflow w:\n  worktree: sometimes\n", &[d]);
/// assert_eq!(out, "w.iter:2:13: error[C142]: invalid worktree \"sometimes\"; expected none or auto\n  |\n2 |   worktree: sometimes\n  |             ^^^^^^^^^\n\n1 error, 0 warnings\n");
/// ```
pub fn human(file: &str, source: &str, diags: &[Diagnostic]) -> String {
    human_unit(file, source, &[], diags)
}

/// [`human`] of a file that imports `fragments` (`Compiled::fragments`): a diagnostic on a
/// fragment's line is shown with the fragment's path and line.
pub fn human_unit(
    file: &str,
    source: &str,
    fragments: &[crate::Fragment],
    diags: &[Diagnostic],
) -> String {
    let lines: Vec<&str> = source.split('\n').collect();
    let mut out = String::new();
    for d in diags {
        let fragment = d
            .file
            .as_ref()
            .and_then(|f| fragments.iter().find(|x| &x.path == f));
        match (&d.file, fragment) {
            (None, _) => out.push_str(&one(file, &lines, d)),
            (Some(rel), Some(fragment)) => {
                let lines: Vec<&str> = fragment.text.split('\n').collect();
                out.push_str(&one(&shown_path(file, rel), &lines, d));
            }
            (Some(rel), None) => out.push_str(&one(&shown_path(file, rel), &[], d)),
        }
        out.push('\n');
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    out.push_str(&summary(errors, diags.len() - errors));
    out.push('\n');
    out
}

/// One diagnostic: header, quoted line with carets, optional hint. Ends with a newline.
fn one(file: &str, lines: &[&str], d: &Diagnostic) -> String {
    let (line, col) = (d.span.line, d.span.col);
    let mut out = format!(
        "{file}:{line}:{col}: {}[{}]: {}\n",
        d.severity.as_str(),
        d.code.as_str(),
        d.message
    );
    let number = line.to_string();
    let gutter = " ".repeat(number.len());
    let idx = usize::try_from(line).unwrap_or(0).saturating_sub(1);
    if let Some(text) = lines.get(idx).filter(|_| line > 0) {
        let before = usize::try_from(col).unwrap_or(1).saturating_sub(1);
        let chars: Vec<char> = text.chars().collect();
        // Tabs in the prefix are kept so the carets line up under the token.
        let prefix: String = (0..before)
            .map(|i| {
                if chars.get(i) == Some(&'\t') {
                    '\t'
                } else {
                    ' '
                }
            })
            .collect();
        let remaining = chars.len().saturating_sub(before);
        let width = usize::try_from(d.span.width)
            .unwrap_or(1)
            .min(remaining)
            .max(1);
        out.push_str(&format!("{gutter} |\n"));
        out.push_str(&format!("{number} | {text}\n"));
        out.push_str(&format!("{gutter} | {prefix}{}\n", "^".repeat(width)));
    }
    if let Some(hint) = &d.hint {
        out.push_str(&format!("{gutter} = hint: {hint}\n"));
    }
    out
}

/// One diagnostic as the JSON object of DSL.md §8.2; absent fields are omitted, not `null`.
pub fn json_diagnostic(file: &str, d: &Diagnostic) -> Value {
    let mut m = Map::new();
    m.insert("code".into(), json!(d.code.as_str()));
    m.insert("severity".into(), json!(d.severity.as_str()));
    m.insert("message".into(), json!(d.message));
    let file = d
        .file
        .as_ref()
        .map_or_else(|| file.to_owned(), |rel| shown_path(file, rel));
    m.insert("file".into(), json!(file));
    m.insert("line".into(), json!(d.span.line));
    m.insert("column".into(), json!(d.span.col));
    if let Some(node) = &d.node {
        m.insert("node".into(), json!(node));
    }
    if let Some(hint) = &d.hint {
        m.insert("hint".into(), json!(hint));
    }
    Value::Object(m)
}

/// The path of fragment `rel` (relative to the directory of `file`) as `file` is shown.
fn shown_path(file: &str, rel: &str) -> String {
    match std::path::Path::new(file).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(rel).display().to_string(),
        _ => rel.to_owned(),
    }
}

/// The `iterion validate --json` document: `{file, errors, warnings, diagnostics}`.
pub fn json(file: &str, diags: &[Diagnostic]) -> Value {
    let errors = diags.iter().filter(|d| d.is_error()).count();
    json!({
        "file": file,
        "errors": errors,
        "warnings": diags.len() - errors,
        "diagnostics": diags.iter().map(|d| json_diagnostic(file, d)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::{Code, ast::Span};

    fn network_word() -> Diagnostic {
        Diagnostic::new(
            Code::C044,
            Span::new(41, 12, 9),
            "\"allowlist\" is a network mode, not a sandbox mode",
        )
        .with_node("helper")
        .with_hint("set the egress policy inside the block: sandbox: / network: / mode: allowlist")
    }

    fn source_with_line_41(text: &str) -> String {
        let mut s = "\n".repeat(40);
        s.push_str(text);
        s.push('\n');
        s
    }

    #[test]
    fn human_form_matches_the_spec_example() {
        let src = source_with_line_41("  sandbox: allowlist");
        let out = human("flows/gallery.iter", &src, &[network_word()]);
        assert_eq!(
            out,
            "flows/gallery.iter:41:12: error[C044]: \"allowlist\" is a network mode, not a sandbox mode\n   |\n41 |   sandbox: allowlist\n   |            ^^^^^^^^^\n   = hint: set the egress policy inside the block: sandbox: / network: / mode: allowlist\n\n1 error, 0 warnings\n"
        );
    }

    #[test]
    fn tabs_in_the_prefix_are_kept_so_carets_line_up() {
        let d = Diagnostic::new(Code::E003, Span::new(1, 2, 3), "tab");
        let out = human("t.iter", "\tabc\n", &[d]);
        assert!(out.contains("1 | \tabc\n  | \t^^^\n"), "{out}");
    }

    #[test]
    fn carets_are_at_least_one_and_never_run_past_the_line() {
        let d = Diagnostic::new(Code::E002, Span::new(1, 4, 40), "x");
        let out = human("t.iter", "abc\n", &[d]);
        assert!(out.contains("1 | abc\n  |    ^\n"), "{out}");
    }

    #[test]
    fn summary_is_singular_for_one() {
        assert_eq!(summary(1, 1), "1 error, 1 warning");
        assert_eq!(summary(0, 2), "0 errors, 2 warnings");
    }

    #[test]
    fn json_omits_absent_fields() {
        let d = Diagnostic::new(
            Code::C140,
            Span::new(3, 8, 5),
            "schema \"empty\" has no fields",
        );
        assert_eq!(
            json("w.iter", &[d, network_word()]),
            json!({
                "file": "w.iter", "errors": 1, "warnings": 1,
                "diagnostics": [
                    {"code": "C140", "severity": "warning", "message": "schema \"empty\" has no fields",
                     "file": "w.iter", "line": 3, "column": 8},
                    {"code": "C044", "severity": "error",
                     "message": "\"allowlist\" is a network mode, not a sandbox mode",
                     "file": "w.iter", "line": 41, "column": 12, "node": "helper",
                     "hint": "set the egress policy inside the block: sandbox: / network: / mode: allowlist"},
                ]
            })
        );
    }

    #[test]
    fn display_source_normalises_like_the_lexer() {
        assert_eq!(
            display_source(b"\xef\xbb\xbfa\r\nb\rc\xff"),
            "a\nb\nc\u{fffd}"
        );
    }
}

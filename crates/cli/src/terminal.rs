//! What the CLI writes to a terminal from a run's data (node and run failure messages with their
//! stdout/stderr tails, hostnames, workflow sources, questions, outputs) is written by whoever
//! made the run do it: [`terminal_safe`] is the one filter every such text passes, so a process
//! in a sandbox cannot drive the operator's terminal (OSC title and clipboard writes, cursor
//! moves that hide lines, C1 CSI, bidi overrides that reorder what is read).

use std::borrow::Cow;

/// Whether `c` is written as an escape: every control character (C0, DEL, C1) but newline and
/// tab, and the Unicode bidirectional formatting characters.
fn escaped(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every [`escaped`] character written as `\u{…}`; borrowed when there is none.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A compile's diagnostics as `validate` and `run` show them (the source lines quoted are the
/// file's own bytes, so they pass [`terminal_safe`]).
/// Imported fragments' lines are quoted from their own text.
pub fn diagnostics(shown: &str, bytes: &[u8], compiled: &iterion_dsl::Compiled) -> String {
    let source = iterion_dsl::render::display_source(bytes);
    let human =
        iterion_dsl::render::human_unit(shown, &source, &compiled.fragments, &compiled.diagnostics);
    terminal_safe(&human).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attack_escape_sequences_bidi_and_c1_never_reach_the_terminal_raw() {
        let hostile = "a\u{1b}]0;PWNED\u{7}\u{1b}[2J\r\u{9b}31m\u{202e}evil\u{2066}\nnext\tcol";
        let shown = terminal_safe(hostile);
        assert!(!shown.chars().any(escaped), "{shown:?}");
        assert_eq!(
            shown,
            "a\\u{1b}]0;PWNED\\u{7}\\u{1b}[2J\\u{d}\\u{9b}31m\\u{202e}evil\\u{2066}\nnext\tcol"
        );
        assert!(matches!(terminal_safe("plain ✓ text\n"), Cow::Borrowed(_)));
    }
}

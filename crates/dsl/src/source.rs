//! Bytes → normalised source text (DSL.md §1.1). OWNER: parse stage.
//!
//! Every later stage sees LF line ends only and no BOM, so positions are computed once, on this
//! text. The renderer (`render::display_source`) applies the same normalisation to quote lines,
//! so columns agree.
use crate::ast::Span;
use crate::diag::{Code, Diagnostic};

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Strips a BOM, turns CRLF and lone CR into LF; invalid UTF-8 is E006 at the first bad byte.
///
/// The E006 offset counts bytes of the input as given (a BOM included); its line and column are
/// those the byte would have in the normalised text.
pub(crate) fn normalise(bytes: &[u8]) -> Result<String, Diagnostic> {
    let (skipped, body) = match bytes.strip_prefix(BOM) {
        Some(rest) => (BOM.len(), rest),
        None => (0, bytes),
    };
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(e) => {
            let bad = e.valid_up_to();
            let prefix = body
                .get(..bad)
                .and_then(|p| std::str::from_utf8(p).ok())
                .unwrap_or("");
            let (line, col) = position_after(prefix);
            return Err(Diagnostic::new(
                Code::E006,
                Span::new(line, col, 1),
                format!("invalid UTF-8 at byte {}", skipped + bad),
            ));
        }
    };
    if !text.contains('\r') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' {
            if chars.peek() == Some(&'\n') {
                chars.next();
            }
            out.push('\n');
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// The 1-based (line, column) of the char just after `prefix`, counting CRLF and lone CR as one
/// line break each (as normalisation will).
fn position_after(prefix: &str) -> (u32, u32) {
    let (mut line, mut col) = (1u32, 1u32);
    let mut chars = prefix.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                line = line.saturating_add(1);
                col = 1;
            }
            '\n' => {
                line = line.saturating_add(1);
                col = 1;
            }
            _ => col = col.saturating_add(1),
        }
    }
    (line, col)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn bom_is_stripped_and_line_ends_become_lf() {
        assert_eq!(
            normalise(b"\xEF\xBB\xBFa\r\nb\rc\n\r\r\n").unwrap(),
            "a\nb\nc\n\n\n"
        );
    }

    #[test]
    fn text_without_cr_is_unchanged() {
        assert_eq!(normalise("é\tx\n".as_bytes()).unwrap(), "é\tx\n");
    }

    #[test]
    fn only_a_leading_bom_is_removed() {
        assert_eq!(
            normalise("a\u{feff}".as_bytes()).unwrap(),
            "a\u{feff}".to_owned()
        );
    }

    #[test]
    fn invalid_utf8_is_e006_at_the_byte_position() {
        let d = normalise(b"ab\r\ncd\xC3\xA9e\xFFz").unwrap_err();
        assert_eq!(
            d,
            Diagnostic::new(Code::E006, Span::new(2, 5, 1), "invalid UTF-8 at byte 9")
        );
    }

    #[test]
    fn e006_offset_counts_the_bom() {
        let d = normalise(b"\xEF\xBB\xBF\xFF").unwrap_err();
        assert_eq!(
            d,
            Diagnostic::new(Code::E006, Span::new(1, 1, 1), "invalid UTF-8 at byte 3")
        );
    }

    #[test]
    fn truncated_sequence_at_end_is_e006() {
        let d = normalise(b"x\n\xE2\x82").unwrap_err();
        assert_eq!(
            d,
            Diagnostic::new(Code::E006, Span::new(2, 1, 1), "invalid UTF-8 at byte 2")
        );
    }
}

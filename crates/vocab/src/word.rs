//! A word outside the vocabulary, and how such a word is shown.

use std::borrow::Cow;

/// A word that names none of a type's values.
///
/// The message names the word (control characters escaped) and what is accepted:
/// `"shared": want auto or none`. `field` says where the word was written (`host_state`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("\"{}\": want {expected}", escape_controls(word))]
pub struct UnknownWord {
    /// Where the word was written, e.g. `network.mode`.
    pub field: &'static str,
    /// The word as written.
    pub word: String,
    /// The accepted words, as a phrase: `open, allowlist or denylist`.
    pub expected: &'static str,
}

impl UnknownWord {
    /// `word` refused for `field`.
    pub fn new(field: &'static str, word: &str, expected: &'static str) -> Self {
        Self {
            field,
            word: word.to_owned(),
            expected,
        }
    }
}

/// Whether `s` holds a C0 control character (U+0000–U+001F) or DEL. Control characters are
/// refused in every value that reaches a container engine or a log line: they can forge log
/// lines, split a `--mount` list or truncate a C string.
pub fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_ascii_control())
}

/// `s` with every control character written as an escape (`\n`, `\r`, `\t`, `\0`, `\u{1b}`), so
/// an error message that names a hostile value cannot forge a log line.
///
/// ```
/// assert_eq!(iterion_vocab::escape_controls("a\nb\u{1b}"), "a\\nb\\u{1b}");
/// ```
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !has_control(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if c.is_ascii_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The conversions every word type has: [`std::fmt::Display`] and `&'static str` from `as_str`,
/// [`std::str::FromStr`] and `TryFrom<String>` from `from_word` (refusing with [`UnknownWord`]).
macro_rules! word_conversions {
    ($ty:ident, $field:literal, $expected:literal) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<$ty> for &'static str {
            fn from(value: $ty) -> &'static str {
                value.as_str()
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::UnknownWord;
            fn from_str(word: &str) -> Result<Self, Self::Err> {
                $ty::from_word(word)
                    .ok_or_else(|| $crate::UnknownWord::new($field, word, $expected))
            }
        }

        impl TryFrom<String> for $ty {
            type Error = $crate::UnknownWord;
            fn try_from(word: String) -> Result<Self, Self::Error> {
                word.parse()
            }
        }
    };
}
pub(crate) use word_conversions;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_word_is_shown_escaped_with_what_is_accepted() {
        let err = UnknownWord::new("host_state", "x\n[ok] forged", "auto or none");
        assert_eq!(err.to_string(), "\"x\\n[ok] forged\": want auto or none");
        assert_eq!(err.field, "host_state");
    }

    #[test]
    fn clean_text_is_borrowed_and_every_control_is_escaped() {
        assert!(matches!(escape_controls("plain"), Cow::Borrowed("plain")));
        assert_eq!(escape_controls("\r\t\0\u{7f}"), "\\r\\t\\0\\u{7f}");
        assert!(has_control("a\u{7f}"));
        assert!(!has_control("é"));
    }
}

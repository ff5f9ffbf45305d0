//! Secrets in rendered and recorded text (DSL.md §7.5, SANDBOX.md §6.10).
//!
//! Rendering never needs a secret's value: a value secret renders as its placeholder
//! ([`secret_placeholder`]) and a file secret as its mount path, whether or not it resolved. The
//! values the launcher resolved are used for one thing only here: the [`Redactor`] replaces each
//! of them by `[REDACTED:<NAME>]` in every text the engine records (events, run logs, error
//! messages, outputs in the outcome and the checkpoint), because a process that could read a file
//! secret, or the host environment, may print one.

use std::fmt;

use serde_json::Value;

/// The placeholder a value secret renders as: `__ITERION_SECRET_<NAME>__`, NAME as declared.
pub fn secret_placeholder(name: &str) -> String {
    format!("__ITERION_SECRET_{name}__")
}

/// A secret's resolved value, as the launcher expanded it. `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedSecret {
    name: String,
    value: String,
}

impl ResolvedSecret {
    /// A secret named `name` (as declared) whose resolved value is `value`.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        ResolvedSecret {
            name: name.into(),
            value: value.into(),
        }
    }

    /// The declared name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value, for delivery only (a file-secret mount); never for recorded text.
    pub(crate) fn expose_value(&self) -> &str {
        &self.value
    }
}

impl fmt::Debug for ResolvedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedSecret")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Replaces real secret values by `[REDACTED:<NAME>]`. Empty values are ignored; where two
/// values could match at the same place, the longer wins. One left-to-right pass, so a
/// replacement is never scanned again.
#[derive(Clone, Default)]
pub struct Redactor {
    /// `(value, replacement)`, longest value first.
    entries: Vec<(String, String)>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// A redactor for these secrets.
    pub fn new(secrets: &[ResolvedSecret]) -> Self {
        let mut entries: Vec<(String, String)> = secrets
            .iter()
            .filter(|s| !s.value.is_empty())
            .map(|s| (s.value.clone(), format!("[REDACTED:{}]", s.name)))
            .collect();
        entries.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        entries.dedup_by(|a, b| a.0 == b.0);
        Redactor { entries }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `text` with every secret value replaced.
    pub fn redact(&self, text: &str) -> String {
        if !self.entries.iter().any(|(v, _)| text.contains(v.as_str())) {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        'scan: while let Some(c) = rest.chars().next() {
            for (value, replacement) in &self.entries {
                if let Some(after) = rest.strip_prefix(value.as_str()) {
                    out.push_str(replacement);
                    rest = after;
                    continue 'scan;
                }
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        out
    }

    /// `value` with every string (and object key) redacted.
    pub fn redact_json(&self, value: &Value) -> Value {
        if self.is_empty() {
            return value.clone();
        }
        match value {
            Value::String(s) => Value::String(self.redact(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.redact_json(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (self.redact(k), self.redact_json(v)))
                    .collect(),
            ),
            Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn redactor() -> Redactor {
        Redactor::new(&[
            ResolvedSecret::new("TOKEN", "s3cr3t"),
            ResolvedSecret::new("LONG", "s3cr3t-and-more"),
            ResolvedSecret::new("EMPTY", ""),
        ])
    }

    #[test]
    fn values_become_named_markers_longest_first() {
        assert_eq!(
            redactor().redact("a s3cr3t b s3cr3t-and-more c"),
            "a [REDACTED:TOKEN] b [REDACTED:LONG] c"
        );
        assert_eq!(redactor().redact("nothing here é"), "nothing here é");
    }

    #[test]
    fn json_strings_and_keys_are_redacted() {
        assert_eq!(
            redactor().redact_json(&json!({"k": ["x s3cr3t", 1, null], "s3cr3t": true})),
            json!({"k": ["x [REDACTED:TOKEN]", 1, null], "[REDACTED:TOKEN]": true})
        );
    }

    #[test]
    fn debug_never_shows_a_value() {
        let s = ResolvedSecret::new("TOKEN", "s3cr3t");
        assert_eq!(format!("{s:?}").contains("s3cr3t"), false);
        assert_eq!(format!("{:?}", redactor()).contains("s3cr3t"), false);
    }

    #[test]
    fn placeholders_keep_the_declared_name() {
        assert_eq!(secret_placeholder("api_key"), "__ITERION_SECRET_api_key__");
    }
}

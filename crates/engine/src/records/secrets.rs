//! Secrets in rendered and recorded text (DSL.md §7.5, SANDBOX.md §6.10).
//!
//! Rendering never needs a secret's value: a value secret renders as its placeholder
//! ([`secret_placeholder`]) and a file secret as its mount path, whether or not it resolved. The
//! values the launcher resolved are used for one thing only here: the [`Redactor`] replaces each
//! of them by `[REDACTED:<NAME>]` in every text the engine records (events, run logs, error
//! messages, outputs in the outcome and the checkpoint), because a process that could read a file
//! secret, or the host environment, may print one.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use iterion_netproxy::{SecretForms, SecretSpan, replace_spans};
use serde_json::Value;

/// The placeholder a value secret renders as: `__ITERION_SECRET_<NAME>__`, NAME as declared.
pub(crate) fn secret_placeholder(name: &str) -> String {
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

/// What the proxy token is rendered as in recorded text (SANDBOX.md §6.10).
pub(crate) const REDACTED_TOKEN: &str = "***";

/// Replaces real secret values by `[REDACTED:<NAME>]` and the per-run proxy token by `***`, in
/// every form the proxy knows ([`iterion_netproxy::SecretForms`]: raw, hex, base64/base64url at
/// any alignment, percent-encoded, reversed, any fragment of 8 bytes or more, any ASCII case).
/// Values shorter than 8 bytes are replaced where they appear raw. Empty values are ignored.
///
/// One redactor serves a run: the launcher builds it from the resolved secrets, and the sandbox
/// adds the proxy token once it is minted ([`Redactor::add_token`]); every holder of the shared
/// `Arc` sees the addition.
#[derive(Default)]
pub(crate) struct Redactor {
    compiled: RwLock<Arc<Compiled>>,
}

#[derive(Default)]
struct Compiled {
    /// `(value, replacement)`, in the order the forms number them.
    entries: Vec<(String, String)>,
    forms: SecretForms,
}

impl Compiled {
    fn new(mut entries: Vec<(String, String)>) -> Compiled {
        entries.retain(|(value, _)| !value.is_empty());
        // Longer values first: where two could own a form, the longer one names it.
        entries.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        entries.dedup_by(|a, b| a.0 == b.0);
        let values: Vec<&[u8]> = entries.iter().map(|(v, _)| v.as_bytes()).collect();
        let forms = SecretForms::new(&values);
        Compiled { entries, forms }
    }
}

impl Clone for Redactor {
    fn clone(&self) -> Self {
        Redactor {
            compiled: RwLock::new(self.snapshot()),
        }
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.snapshot().entries.len())
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// A redactor for these secrets.
    pub fn new(secrets: &[ResolvedSecret]) -> Self {
        let entries = secrets
            .iter()
            .map(|s| (s.value.clone(), format!("[REDACTED:{}]", s.name)))
            .collect();
        Redactor {
            compiled: RwLock::new(Arc::new(Compiled::new(entries))),
        }
    }

    /// From now on, also replaces `token` (the run's proxy token) by `REDACTED_TOKEN` (`***`).
    pub fn add_token(&self, token: &str) {
        let mut guard = self
            .compiled
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut entries = guard.entries.clone();
        entries.push((token.to_owned(), REDACTED_TOKEN.to_owned()));
        *guard = Arc::new(Compiled::new(entries));
    }

    fn snapshot(&self) -> Arc<Compiled> {
        Arc::clone(&self.compiled.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.snapshot().forms.is_empty()
    }

    /// `text` with every secret value (in every form) replaced. A replaced run that ends or
    /// starts inside a multi-byte character takes the whole character.
    pub fn redact(&self, text: &str) -> String {
        let compiled = self.snapshot();
        let mut spans = compiled.forms.spans(text.as_bytes());
        if spans.is_empty() {
            return text.to_owned();
        }
        for span in &mut spans {
            while !text.is_char_boundary(span.start) {
                span.start -= 1;
            }
            while !text.is_char_boundary(span.end) {
                span.end += 1;
            }
        }
        let out = compiled.replace(text.as_bytes(), spans);
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// `data` (any bytes: a file's content) with every secret value in every form replaced, or
    /// `None` when it holds none.
    pub fn redact_bytes(&self, data: &[u8]) -> Option<Vec<u8>> {
        let compiled = self.snapshot();
        let spans = compiled.forms.spans(data);
        if spans.is_empty() {
            return None;
        }
        Some(compiled.replace(data, spans))
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

/// Spans widened to character boundaries may now overlap: merge them again.
impl Compiled {
    /// `data` with each span (touching ones merged) replaced by its entry's replacement.
    fn replace(&self, data: &[u8], spans: Vec<SecretSpan>) -> Vec<u8> {
        replace_spans(data, &merge_touching(spans), |i| {
            self.entries
                .get(i)
                .map(|(_, r)| r.clone().into_bytes())
                .unwrap_or_default()
        })
    }
}

fn merge_touching(spans: Vec<SecretSpan>) -> Vec<SecretSpan> {
    let mut out: Vec<SecretSpan> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
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

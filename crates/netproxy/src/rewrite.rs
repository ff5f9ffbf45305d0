//! Secrets: placeholders and rewriting (SANDBOX.md §6.10).

use std::fmt;
use std::sync::OnceLock;

use crate::error::NetProxyError;
use crate::forms::SecretForms;
use crate::host::canonical_host;
use crate::preset::domain_covers;

/// A secret's real value. `Debug` never shows it; only the rewriter reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl Secret {
    /// Wraps a real value.
    pub fn new(value: impl Into<Vec<u8>>) -> Self {
        Self(value.into())
    }

    /// The bytes, for the rewriter only.
    pub(crate) fn expose(&self) -> &[u8] {
        &self.0
    }
}

/// How a secret reaches the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    /// Only as `__ITERION_SECRET_<NAME>__`; the proxy materialises it toward its hosts.
    Value,
    /// In clear in a read-only file; still scanned for exfiltration.
    File,
}

/// One secret known to the rewriter.
#[derive(Clone)]
pub struct SecretEntry {
    name: String,
    placeholder: String,
    value: Secret,
    hosts: Vec<String>,
    kind: SecretKind,
}

impl fmt::Debug for SecretEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretEntry")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// The placeholder for a secret name: `__ITERION_SECRET_<NAME>__`.
pub fn placeholder_for(name: &str) -> String {
    format!("__ITERION_SECRET_{name}__")
}

/// Values shorter than this are not scanned for exfiltration (too many false positives).
pub const MIN_SCANNED_VALUE_LEN: usize = 8;

/// Shared growth budget of header materialisation per request.
pub const HEADER_GROWTH_BUDGET: usize = 64 * 1024;

/// Holds `(name, placeholder, value, hosts)` for every secret of a run, and the encoded forms of
/// every value ([`SecretForms`], compiled once on first use after the last secret is added).
#[derive(Clone, Debug, Default)]
pub struct SecretRewriter {
    secrets: Vec<SecretEntry>,
    forms: OnceLock<SecretForms>,
}

const MODEL_API_HOSTS: &[&str] = &[
    "api.anthropic.com",
    "api.openai.com",
    "openrouter.ai",
    "api.x.ai",
    "api.mistral.ai",
    "api.z.ai",
    "api.moonshot.ai",
    "api.moonshot.cn",
    "generativelanguage.googleapis.com",
    "aiplatform.googleapis.com",
];

const MODEL_API_PATH_SUFFIXES: &[&str] = &[
    "/v1/messages",
    "/chat/completions",
    "/completions",
    "/responses",
    "/embeddings",
    ":generateContent",
    ":streamGenerateContent",
    "/converse",
    "/converse-stream",
    "/invoke",
    "/invoke-with-response-stream",
];

/// Whether a request is a model-API request, whose body is never materialised (a prompt that
/// echoes a placeholder must not turn into the real value in the model's context).
pub fn is_model_api_request(host: &str, path: &str) -> bool {
    let host = canonical_host(host);
    let one_label = |suffix: &str, prefix_rule: fn(&str) -> bool| {
        host.strip_suffix(suffix)
            .is_some_and(|p| !p.is_empty() && !p.contains('.') && prefix_rule(p))
    };
    let by_host = MODEL_API_HOSTS.contains(&host.as_str())
        || one_label("-aiplatform.googleapis.com", |_| true)
        || one_label(".openai.azure.com", |_| true)
        || host
            .strip_prefix("bedrock-runtime.")
            .and_then(|r| r.strip_suffix(".amazonaws.com"))
            .is_some_and(|region| !region.is_empty() && !region.contains('.'));
    let path = path.split(['?', '#']).next().unwrap_or_default();
    by_host || MODEL_API_PATH_SUFFIXES.iter().any(|s| path.ends_with(s))
}

impl SecretRewriter {
    /// An empty rewriter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a value secret. `hosts` entries are hosts, parent domains (matching their
    /// subdomains) or IPs; with no hosts the value is never materialised.
    pub fn add_value_secret(
        &mut self,
        name: &str,
        value: Secret,
        hosts: &[String],
    ) -> Result<(), NetProxyError> {
        self.add(name, value, hosts, SecretKind::Value)
    }

    /// Adds a file secret: never materialised (its bytes are in the file), but a request carrying
    /// it toward a host outside its non-empty `hosts` is refused.
    pub fn add_file_secret(
        &mut self,
        name: &str,
        value: Secret,
        hosts: &[String],
    ) -> Result<(), NetProxyError> {
        self.add(name, value, hosts, SecretKind::File)
    }

    fn add(
        &mut self,
        name: &str,
        value: Secret,
        hosts: &[String],
        kind: SecretKind,
    ) -> Result<(), NetProxyError> {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(NetProxyError::InvalidSecretName {
                name: name.to_string(),
            });
        }
        self.secrets.push(SecretEntry {
            name: name.to_string(),
            placeholder: placeholder_for(name),
            value,
            hosts: hosts
                .iter()
                .map(|h| canonical_host(h))
                .filter(|h| !h.is_empty())
                .collect(),
            kind,
        });
        self.forms = OnceLock::new();
        Ok(())
    }

    /// Whether there is any secret whose hosts call for inspection.
    pub fn has_scoped_secrets(&self) -> bool {
        self.secrets.iter().any(|s| !s.hosts.is_empty())
    }

    /// Whether the rewriter holds no secret.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// How many secrets it holds.
    pub(crate) fn len(&self) -> usize {
        self.secrets.len()
    }

    fn covers(entry: &SecretEntry, host: &str) -> bool {
        entry.hosts.iter().any(|h| domain_covers(h, host))
    }

    /// Replaces the placeholders of the value secrets whose `hosts` cover `host`. `budget` is the
    /// remaining growth allowance; a replacement that would exceed it is skipped (the
    /// placeholder stays opaque).
    pub fn materialize_for_host(&self, text: &[u8], host: &str, budget: &mut usize) -> Vec<u8> {
        let host = canonical_host(host);
        let mut out = text.to_vec();
        for s in &self.secrets {
            if s.kind != SecretKind::Value || !Self::covers(s, &host) {
                continue;
            }
            let ph = s.placeholder.as_bytes();
            let value = s.value.expose();
            let count = count_occurrences(&out, ph);
            if count == 0 {
                continue;
            }
            let growth = value.len().saturating_sub(ph.len()) * count;
            if growth > *budget {
                continue;
            }
            *budget -= growth;
            out = replace_all(&out, ph, value);
        }
        out
    }

    /// The placeholders [`Self::materialize_for_host`] swaps toward `host`.
    pub(crate) fn placeholders_for_host(&self, host: &str) -> Vec<Vec<u8>> {
        let host = canonical_host(host);
        self.secrets
            .iter()
            .filter(|s| s.kind == SecretKind::Value && Self::covers(s, &host))
            .map(|s| s.placeholder.as_bytes().to_vec())
            .collect()
    }

    /// Every encoded form of every value, secret `i` of the forms being `self.secrets[i]`.
    pub(crate) fn forms(&self) -> &SecretForms {
        self.forms.get_or_init(|| {
            let values: Vec<&[u8]> = self.secrets.iter().map(|s| s.value.expose()).collect();
            SecretForms::new(&values)
        })
    }

    /// The placeholder of secret `i` (an index of [`Self::forms`]).
    pub(crate) fn placeholder_of(&self, i: usize) -> Vec<u8> {
        self.secrets
            .get(i)
            .map(|s| s.placeholder.as_bytes().to_vec())
            .unwrap_or_default()
    }

    /// The name of a secret that `text` carries, in any form [`SecretForms`] knows (raw, hex,
    /// base64/base64url at any alignment, percent-encoded, reversed, or a fragment of at least
    /// [`crate::FRAGMENT_LEN`] bytes), while its non-empty `hosts` do not cover `host`. Values
    /// shorter than [`MIN_SCANNED_VALUE_LEN`] are not scanned.
    pub fn exfiltrates_to(&self, text: &[u8], host: &str) -> Option<&str> {
        let host = canonical_host(host);
        let scanned = |i: usize| {
            self.secrets.get(i).is_some_and(|s| {
                !s.hosts.is_empty()
                    && s.value.expose().len() >= MIN_SCANNED_VALUE_LEN
                    && !Self::covers(s, &host)
            })
        };
        let i = self.forms().find(text, scanned)?;
        self.secrets.get(i).map(|s| s.name.as_str())
    }

    /// [`Self::exfiltrates_to`] over the fields of one request (method, URL, header names and
    /// values, body): each field, and all of them joined, so a value cut into pieces that sit
    /// in different fields is still seen.
    pub fn request_exfiltrates_to(&self, fields: &[&[u8]], host: &str) -> Option<&str> {
        if let Some(name) = fields.iter().find_map(|f| self.exfiltrates_to(f, host)) {
            return Some(name);
        }
        self.exfiltrates_to(&fields.concat(), host)
    }

    /// Replaces every real value, in every form, in a response by its placeholder, so a value
    /// the upstream echoes (even encoded) never reaches the sandbox.
    pub fn redact_response(&self, text: &[u8]) -> Vec<u8> {
        self.forms().redact(text, |i| self.placeholder_of(i))
    }

    /// Replaces known values, in every form, by `[REDACTED:<NAME>]` (for logs and error
    /// messages).
    pub fn redact_for_log(&self, text: &str) -> String {
        let out = self.forms().redact(text.as_bytes(), |i| {
            let name = self.secrets.get(i).map_or("", |s| s.name.as_str());
            format!("[REDACTED:{name}]").into_bytes()
        });
        String::from_utf8_lossy(&out).into_owned()
    }
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn count_occurrences(hay: &[u8], needle: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while let Some(p) = find(&hay[i..], needle) {
        n += 1;
        i += p + needle.len();
    }
    n
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while let Some(p) = find(&hay[i..], from) {
        out.extend_from_slice(&hay[i..i + p]);
        out.extend_from_slice(to);
        i += p + from.len();
    }
    out.extend_from_slice(&hay[i..]);
    out
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;

//! Model providers and their credentials (SANDBOX.md §13.1b).
//!
//! A node's `model` is `provider/model`. Each provider names one API, the variable holding its
//! key and the variable holding its base URL. Everything is read from the iterion process
//! environment at launch ([`resolve_routes`], a pure function over a lookup closure), so a
//! missing key refuses the launch before any run exists, naming the variable.

use std::collections::BTreeMap;

use iterion_dsl::ir::Workflow;
use iterion_dsl::template::expand_host;
use serde::{Deserialize, Serialize};

/// The model APIs the agent loop speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Anthropic Messages (`POST {base}/v1/messages`).
    Anthropic,
    /// OpenAI Chat Completions (`POST {base}/chat/completions`).
    Openai,
    /// Any Chat Completions server (`ITERION_OPENAI_COMPATIBLE_BASE_URL`, required).
    OpenaiCompatible,
}

impl Provider {
    /// Every provider, in table order.
    pub const ALL: [Provider; 3] = [
        Provider::Anthropic,
        Provider::Openai,
        Provider::OpenaiCompatible,
    ];

    /// The `provider` part of a model string.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
            Provider::OpenaiCompatible => "openai_compatible",
        }
    }

    /// The provider a model string's prefix names.
    pub fn parse(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The variable holding the key.
    pub fn key_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::Openai => "OPENAI_API_KEY",
            Provider::OpenaiCompatible => "ITERION_OPENAI_COMPATIBLE_API_KEY",
        }
    }

    /// The variable holding the base URL.
    pub fn base_url_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ITERION_ANTHROPIC_BASE_URL",
            Provider::Openai => "ITERION_OPENAI_BASE_URL",
            Provider::OpenaiCompatible => "ITERION_OPENAI_COMPATIBLE_BASE_URL",
        }
    }

    /// The default base URL; `None` when the variable is required.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::Anthropic => Some("https://api.anthropic.com"),
            Provider::Openai => Some("https://api.openai.com/v1"),
            Provider::OpenaiCompatible => None,
        }
    }

    /// Whether the API is Anthropic Messages (else Chat Completions).
    pub fn is_messages_api(self) -> bool {
        matches!(self, Provider::Anthropic)
    }

    /// The name of the gateway credential standing for this provider's key under a sandbox
    /// (`ITERION_GATEWAY_<PROVIDER>`, SANDBOX.md §13.1b).
    pub fn gateway_secret_name(self) -> String {
        format!("ITERION_GATEWAY_{}", self.as_str().to_ascii_uppercase())
    }

    /// Whether a route to this provider needs the runner's gateway capability marker
    /// (§13.2 check 3). Every route does under a sandbox: the key is always a placeholder.
    pub fn is_gateway_route(self) -> bool {
        true
    }
}

/// Where one provider is reached, with its key. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The provider.
    pub provider: Provider,
    /// The base URL, without a trailing `/`.
    pub base_url: String,
    /// The key: the real one in process, a gateway placeholder in the runner's task. Empty for
    /// a delegate node that uses its CLI's subscription login ([`crate::forfait`]).
    pub api_key: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The host of the base URL (lower case, no port), for the gateway credential's `hosts`.
    pub fn host(&self) -> Option<String> {
        let uri: http::Uri = self.base_url.parse().ok()?;
        uri.host()
            .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
    }

    /// The network rule that admits the base URL: its host, with `:port` when the URL names a
    /// port other than its scheme's default (a rule without a port allows 443 and 80 only).
    pub fn rule(&self) -> Option<String> {
        let uri: http::Uri = self.base_url.parse().ok()?;
        let host = self.host()?;
        let default = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => 80,
            _ => 443,
        };
        let bracketed = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        Some(match uri.port_u16() {
            Some(p) if p != default => format!("{bracketed}:{p}"),
            _ => host,
        })
    }
}

/// Why a model route could not be resolved at launch (exit 2, no run).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// `model` is not `provider/model`, or names an unknown provider.
    #[error(
        "node \"{node}\": model \"{model}\" must be provider/model with provider one of anthropic, openai, openai_compatible (a bare model name needs provider: or a name starting claude or gpt)"
    )]
    BadModel {
        /// The node.
        node: String,
        /// The model string, expanded.
        model: String,
    },
    /// `model` holds a `${…}` that could not be expanded.
    #[error("node \"{node}\": model: {message}")]
    BadExpansion {
        /// The node.
        node: String,
        /// Why.
        message: String,
    },
    /// The key variable is unset or empty.
    #[error("node \"{node}\" uses model {model}; set {variable} in the environment")]
    MissingKey {
        /// The node.
        node: String,
        /// The model.
        model: String,
        /// The variable.
        variable: &'static str,
    },
    /// The base URL is missing (required) or not an `http(s)://` URL.
    #[error(
        "node \"{node}\" uses model {model}; {}",
        base_url_problem(variable, found)
    )]
    BadBaseUrl {
        /// The node.
        node: String,
        /// The model.
        model: String,
        /// The variable.
        variable: &'static str,
        /// `, found "…"`, or empty when unset.
        found: String,
    },
}

/// One agent node's resolved model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeModel {
    /// The model name after the `provider/` prefix.
    pub model: String,
    /// Where it is served.
    pub endpoint: Endpoint,
}

/// The resolved models of every agent and judge node, by node id.
pub type Routes = BTreeMap<String, NodeModel>;

/// Resolves every agent node's model, key and base URL from `lookup` (the process
/// environment). `{{vars.X}}` in a model is rendered with `vars` first.
///
/// # Errors
///
/// The first [`RouteError`] in node order.
pub fn resolve_routes(
    wf: &Workflow,
    vars: &serde_json::Map<String, serde_json::Value>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Routes, RouteError> {
    let mut routes = Routes::new();
    for node in &wf.nodes {
        let Some(model) = node.body.model() else {
            continue;
        };
        let (provider_hint, backend) = (node.body.provider(), node.body.backend());
        let expanded = expand_host(model, &lookup).map_err(|e| RouteError::BadExpansion {
            node: node.id.clone(),
            message: e.to_string(),
        })?;
        let expanded = render_vars(&expanded, vars);
        let bad = || RouteError::BadModel {
            node: node.id.clone(),
            model: expanded.clone(),
        };
        let (provider, model) = match expanded.split_once('/') {
            Some((prefix, model)) => (Provider::parse(prefix).ok_or_else(bad)?, model),
            None => {
                let hint = match provider_hint {
                    Some(p) => Some(expand_property(p, vars, &lookup).map_err(|message| {
                        RouteError::BadExpansion {
                            node: node.id.clone(),
                            message,
                        }
                    })?),
                    None => None,
                };
                let provider =
                    implied_provider(&expanded, hint.as_deref(), backend).ok_or_else(bad)?;
                (provider, expanded.as_str())
            }
        };
        if model.trim().is_empty() || model.chars().any(char::is_whitespace) {
            return Err(bad());
        }
        // A delegate node without a key uses its CLI's subscription login instead (an empty
        // key here; the engine loads the login file and fails the run naming it when it is
        // missing or unusable).
        let delegate = backend.is_delegate();
        let key = match lookup(provider.key_var()).filter(|k| !k.is_empty()) {
            Some(key) => key,
            None if delegate => String::new(),
            None => {
                return Err(RouteError::MissingKey {
                    node: node.id.clone(),
                    model: expanded.clone(),
                    variable: provider.key_var(),
                });
            }
        };
        let raw_base = lookup(provider.base_url_var()).filter(|v| !v.trim().is_empty());
        let base = match (&raw_base, provider.default_base_url()) {
            (Some(v), _) => v.trim().to_owned(),
            (None, Some(default)) => default.to_owned(),
            (None, None) => String::new(),
        };
        let valid = (base.starts_with("http://") || base.starts_with("https://"))
            && base.parse::<http::Uri>().is_ok_and(|u| u.host().is_some());
        if !valid {
            return Err(RouteError::BadBaseUrl {
                node: node.id.clone(),
                model: expanded.clone(),
                variable: provider.base_url_var(),
                found: raw_base.map_or_else(String::new, |v| format!(", found {v:?}")),
            });
        }
        routes.insert(
            node.id.clone(),
            NodeModel {
                model: model.to_owned(),
                endpoint: Endpoint {
                    provider,
                    base_url: base.trim_end_matches('/').to_owned(),
                    api_key: key,
                },
            },
        );
    }
    Ok(routes)
}

/// A node property that may hold `${…}` and `{{vars.X}}` (`model`, `provider`,
/// `reasoning_effort`), expanded with `lookup` then rendered with `vars`.
///
/// # Errors
///
/// A malformed `${…}`, as text.
pub fn expand_property(
    text: &str,
    vars: &serde_json::Map<String, serde_json::Value>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let expanded = expand_host(text, lookup).map_err(|e| e.to_string())?;
    Ok(render_vars(&expanded, vars))
}

/// The provider of a model written without `provider/` (`claude-opus-4-7`): the node's
/// `provider:` when set, else the one its delegate backend speaks, else the one the name
/// belongs to (`claude…` Anthropic, `gpt…`/`o1…`/`o3…`/`o4…` OpenAI); `None` otherwise.
fn implied_provider(
    model: &str,
    provider: Option<&str>,
    backend: iterion_dsl::ir::Backend,
) -> Option<Provider> {
    use iterion_dsl::ir::Backend;
    if let Some(p) = provider.filter(|p| !p.trim().is_empty()) {
        return Provider::parse(p.trim());
    }
    match backend {
        Backend::ClaudeCode => return Some(Provider::Anthropic),
        Backend::Codex => return Some(Provider::Openai),
        Backend::Claw => {}
    }
    if model.starts_with("claude") {
        Some(Provider::Anthropic)
    } else if ["gpt", "o1", "o3", "o4", "chatgpt"]
        .iter()
        .any(|p| model.starts_with(p))
    {
        Some(Provider::Openai)
    } else {
        None
    }
}

/// `{{vars.X}}` (the only template a model may hold, C148) rendered as plain text.
fn render_vars(text: &str, vars: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        let inner = rest[start + 2..start + len].trim();
        let value = inner
            .strip_prefix("vars.")
            .and_then(|name| vars.get(name))
            .map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        match value {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + len + 2]),
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

/// What is wrong with a base URL variable: unset (`found` empty) or not an `http(s)://` URL.
fn base_url_problem(variable: &str, found: &str) -> String {
    if found.is_empty() {
        format!("{variable} is not set (set it to the server's http:// or https:// URL)")
    } else {
        format!("{variable} must be an http:// or https:// URL{found}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn wf(model: &str) -> Workflow {
        let src = format!(
            "prompt p:\n  hi\n\nagent a:\n  model: \"{model}\"\n  user: p\n\nworkflow w:\n  entry: a\n  a -> done\n"
        );
        let compiled = iterion_dsl::compile(
            src.as_bytes(),
            &iterion_dsl::CompileOptions {
                ask_user_in_sandbox: true,
            },
        );
        compiled.workflow.unwrap()
    }

    #[test]
    fn a_missing_key_names_its_variable() {
        let err =
            resolve_routes(&wf("anthropic/claude-x"), &Default::default(), |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node \"a\" uses model anthropic/claude-x; set ANTHROPIC_API_KEY in the environment"
        );
    }

    #[test]
    fn base_urls_default_per_provider_and_compatible_requires_one() {
        let env = |k: &str| match k {
            "OPENAI_API_KEY" | "ITERION_OPENAI_COMPATIBLE_API_KEY" => Some("k".to_owned()),
            _ => None,
        };
        let routes = resolve_routes(&wf("openai/gpt-x"), &Default::default(), env).unwrap();
        assert_eq!(routes["a"].endpoint.base_url, "https://api.openai.com/v1");
        assert_eq!(routes["a"].model, "gpt-x");
        let err = resolve_routes(&wf("openai_compatible/m"), &Default::default(), env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node \"a\" uses model openai_compatible/m; ITERION_OPENAI_COMPATIBLE_BASE_URL is not set (set it to the server's http:// or https:// URL)"
        );
    }

    #[test]
    fn an_http_base_url_is_allowed_and_its_slash_trimmed() {
        let env = |k: &str| match k {
            "ANTHROPIC_API_KEY" => Some("k".to_owned()),
            "ITERION_ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9/".to_owned()),
            _ => None,
        };
        let routes = resolve_routes(&wf("anthropic/m"), &Default::default(), env).unwrap();
        assert_eq!(routes["a"].endpoint.base_url, "http://127.0.0.1:9");
        assert_eq!(routes["a"].endpoint.host().as_deref(), Some("127.0.0.1"));
        assert!(!format!("{:?}", routes["a"].endpoint).contains("\"k\""));
    }

    #[test]
    fn an_unknown_provider_from_the_environment_is_refused() {
        let env = |k: &str| match k {
            "M" => Some("mystery/m".to_owned()),
            _ => Some("k".to_owned()),
        };
        let err = resolve_routes(&wf("${M}"), &Default::default(), env).unwrap_err();
        assert_eq!(
            err,
            RouteError::BadModel {
                node: "a".into(),
                model: "mystery/m".into()
            }
        );
    }
}

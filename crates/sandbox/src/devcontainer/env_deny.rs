//! The env deny class (SANDBOX.md §7.7): variables a repository may not set, because they would
//! redirect the engine's own traffic (proxies, model endpoints, CA bundles), inject code into
//! every process (`LD_PRELOAD`, `NODE_OPTIONS`, `BASH_ENV`), rewrite git's configuration, or
//! shadow what the engine plants (`HOME`, `PATH`, `ITERION_*`). Only repository-contributed keys
//! are stripped; the workflow's own values are the operator's choice and stay.

/// Exact names (case-sensitive).
pub const DENIED_ENV_EXACT: &[&str] = &[
    // Named by the original.
    "PATH",
    "ANTHROPIC_BASE_URL",
    // Named by the brief.
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "OPENAI_BASE_URL",
    // Added by us.
    "HOME",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "NODE_OPTIONS",
    "OPENAI_API_BASE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "NIX_SSL_CERT_FILE",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
];

/// Proxy names, compared case-insensitively (`https_proxy` too).
pub const DENIED_PROXY_ENV: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"];

/// Prefixes (case-sensitive).
pub const DENIED_ENV_PREFIXES: &[&str] = &["ITERION_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"];

/// Whether a repository may not set `key` (SANDBOX.md §7.7).
pub fn is_denied_env_key(key: &str) -> bool {
    DENIED_ENV_EXACT.contains(&key)
        || DENIED_PROXY_ENV
            .iter()
            .any(|proxy| proxy.eq_ignore_ascii_case(key))
        || DENIED_ENV_PREFIXES
            .iter()
            .any(|prefix| key.starts_with(prefix))
}

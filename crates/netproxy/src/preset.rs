//! Presets (SANDBOX.md §6.7) and silent-deny hosts (§6.12).

use crate::error::NetProxyError;
use crate::matcher::{Policy, compile};

/// The name of the one preset.
pub const ITERION_DEFAULT_PRESET: &str = "iterion-default";

/// The `iterion-default` rules, in order: model providers, package registries, source hosts,
/// distribution and Nix/devbox hosts.
pub const ITERION_DEFAULT_RULES: &[&str] = &[
    // model providers
    "api.anthropic.com",
    "api.openai.com",
    "openrouter.ai",
    "api.x.ai",
    "**.bedrock.amazonaws.com",
    "**.googleapis.com",
    "**.openai.azure.com",
    "api.mistral.ai",
    "api.z.ai",
    // package registries
    "registry.npmjs.org",
    "**.npmjs.org",
    "pypi.org",
    "files.pythonhosted.org",
    "proxy.golang.org",
    "sum.golang.org",
    // source hosts
    "github.com",
    "**.github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "gitlab.com",
    "**.gitlab.com",
    "bitbucket.org",
    "**.bitbucket.org",
    // distribution and Nix/devbox hosts
    "deb.debian.org",
    "security.debian.org",
    "cache.nixos.org",
    "channels.nixos.org",
    "releases.nixos.org",
    "nix-community.cachix.org",
    "devbox.sh",
    "**.devbox.sh",
    "get.jetify.com",
];

/// The rules of a named preset.
pub fn preset_rules(name: &str) -> Result<&'static [&'static str], NetProxyError> {
    match name.trim() {
        ITERION_DEFAULT_PRESET => Ok(ITERION_DEFAULT_RULES),
        _ => Err(NetProxyError::UnknownPreset {
            name: name.to_string(),
        }),
    }
}

/// Compiles a policy whose preset rules (if any) come before the block's own rules, so a block
/// rule can override a preset rule (last match wins).
///
/// ```
/// use iterion_netproxy::{compile_with_preset, decide, Verdict};
/// let p = compile_with_preset("allowlist", Some("iterion-default"), &["!gitlab.com"]).unwrap();
/// assert_eq!(decide(&p, "api.github.com", 443, &[]).verdict, Verdict::Allow);
/// assert_eq!(decide(&p, "gitlab.com", 443, &[]).verdict, Verdict::Deny);
/// ```
pub fn compile_with_preset<S: AsRef<str>>(
    mode: &str,
    preset: Option<&str>,
    rules: &[S],
) -> Result<Policy, NetProxyError> {
    let mut all: Vec<&str> = match preset {
        Some(name) => preset_rules(name)?.to_vec(),
        None => Vec::new(),
    };
    all.extend(rules.iter().map(AsRef::as_ref));
    compile(mode, &all)
}

/// Hosts denied without a `network_blocked` event (telemetry the agents' tools phone home to).
/// Each matches itself and its subdomains.
pub const SILENT_DENY_HOSTS: &[&str] = &[
    "http-intake.logs.us5.datadoghq.com",
    "http-intake.logs.us3.datadoghq.com",
    "http-intake.logs.us.datadoghq.com",
    "http-intake.logs.eu.datadoghq.com",
    "http-intake.logs.datadoghq.com",
    "api.datadoghq.com",
    "api.githubcopilot.com",
    "mcp-proxy.anthropic.com",
    "ingest.sentry.io",
    "ingest.de.sentry.io",
    "ingest.us.sentry.io",
];

/// Whether a canonical host is on the silent-deny list (exactly or as a subdomain).
pub fn is_silent_deny(host: &str) -> bool {
    SILENT_DENY_HOSTS.iter().any(|s| domain_covers(s, host))
}

/// `parent` matches itself and any subdomain of it.
pub(crate) fn domain_covers(parent: &str, host: &str) -> bool {
    host == parent
        || host
            .strip_suffix(parent)
            .is_some_and(|p| p.len() > 1 && p.ends_with('.'))
}

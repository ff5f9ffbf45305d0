//! Gateway credentials (SANDBOX.md §13.1b): under an active sandbox each provider key the
//! workflow uses becomes a value secret `ITERION_GATEWAY_<PROVIDER>` whose `hosts` is the base
//! URL's host. The runner's task carries only its placeholder; the egress proxy materialises it
//! toward that host (inside inspected TLS, or in a forwarded plain-HTTP request) and refuses it
//! anywhere else. Because the secret has hosts, TLS inspection is on, so the proxy starts even
//! under `open`. The key is also registered for redaction, so it never reaches an event or log.

use std::collections::BTreeMap;

use iterion_agent::provider::{Provider, Routes};

use crate::records::secrets::ResolvedSecret;
use crate::sandbox::egress::EgressSecret;

/// One provider's credential.
struct Credential {
    provider: Provider,
    key: String,
    host: Option<String>,
    /// The allowlist rule for the base URL (host, and its port when not the default).
    rule: Option<String>,
}

fn credentials(routes: &Routes) -> Vec<Credential> {
    let mut by_provider: BTreeMap<Provider, Credential> = BTreeMap::new();
    for route in routes.values() {
        let endpoint = &route.endpoint;
        by_provider
            .entry(endpoint.provider)
            .or_insert_with(|| Credential {
                provider: endpoint.provider,
                key: endpoint.api_key.clone(),
                host: endpoint.host(),
                rule: endpoint.rule(),
            });
    }
    by_provider.into_values().collect()
}

/// The credentials that hold a key (a delegate node on its CLI's login has none: its token is
/// the forfait's, `sandbox::forfait`).
fn keyed(routes: &Routes) -> impl Iterator<Item = Credential> {
    credentials(routes)
        .into_iter()
        .filter(|c| !c.key.is_empty())
}

/// The keys as resolved secrets, for redaction.
pub(crate) fn redacted_keys(routes: &Routes) -> Vec<ResolvedSecret> {
    keyed(routes)
        .map(|c| ResolvedSecret::new(c.provider.gateway_secret_name(), c.key))
        .collect()
}

/// The keys as the proxy's value secrets, scoped to their provider's host.
pub(crate) fn egress_secrets(routes: &Routes) -> Vec<EgressSecret> {
    keyed(routes)
        .map(|c| EgressSecret {
            name: c.provider.gateway_secret_name(),
            value: c.key,
            hosts: c.host.into_iter().collect(),
            file: false,
        })
        .collect()
}

/// Provider → the placeholder the runner's task carries instead of the key.
pub(crate) fn placeholders(routes: &Routes) -> BTreeMap<Provider, String> {
    keyed(routes)
        .map(|c| {
            (
                c.provider,
                iterion_netproxy::placeholder_for(&c.provider.gateway_secret_name()),
            )
        })
        .collect()
}

/// The providers' hosts, which an allowlist implicitly allows (added as its last rules by
/// `resolve_and_start_sandbox`, and named in `sandbox_started.network_source`). Each is a
/// rule: a base URL on a non-default port is allowed on that port only.
pub(crate) fn model_hosts(routes: &Routes) -> Vec<String> {
    credentials(routes)
        .into_iter()
        .filter_map(|c| c.rule)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iterion_agent::provider::{Endpoint, NodeModel};
    use pretty_assertions::assert_eq;

    fn routes() -> Routes {
        let route = |p, url: &str| NodeModel {
            model: "m".into(),
            endpoint: Endpoint {
                provider: p,
                base_url: url.into(),
                api_key: "sk-real-key-123456".into(),
            },
        };
        [
            (
                "a".to_owned(),
                route(Provider::Anthropic, "https://api.anthropic.com"),
            ),
            (
                "b".to_owned(),
                route(Provider::Anthropic, "https://api.anthropic.com"),
            ),
            (
                "c".to_owned(),
                route(Provider::OpenaiCompatible, "http://127.0.0.1:8080/v1"),
            ),
        ]
        .into()
    }

    #[test]
    fn one_credential_per_provider_scoped_to_its_host() {
        let got: Vec<(String, Vec<String>)> = egress_secrets(&routes())
            .into_iter()
            .map(|s| (s.name, s.hosts))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "ITERION_GATEWAY_ANTHROPIC".to_owned(),
                    vec!["api.anthropic.com".to_owned()]
                ),
                (
                    "ITERION_GATEWAY_OPENAI_COMPATIBLE".to_owned(),
                    vec!["127.0.0.1".to_owned()]
                ),
            ]
        );
        assert_eq!(
            model_hosts(&routes()),
            vec!["api.anthropic.com".to_owned(), "127.0.0.1:8080".to_owned()]
        );
        assert_eq!(
            placeholders(&routes())[&Provider::Anthropic],
            "__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__"
        );
    }
}

//! The inspecting proxy's upstream TLS clients and the extra roots an operator trusts
//! (`ITERION_SANDBOX_UPSTREAM_CA`).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use crate::error::NetProxyError;

/// The variable naming a PEM file of extra roots for the proxy's upstream TLS client: operators
/// behind a corporate TLS proxy, and tests with a local HTTPS server. Read by the caller (the
/// engine, from the environment the CLI hands down) and loaded with [`load_upstream_roots`].
pub const UPSTREAM_CA_ENV: &str = "ITERION_SANDBOX_UPSTREAM_CA";

/// The certificates of a PEM file (one or more `CERTIFICATE` blocks; other blocks are ignored),
/// each checked to be a certificate a root store accepts.
///
/// # Errors
///
/// [`NetProxyError::UpstreamCaUnreadable`] when the file cannot be read,
/// [`NetProxyError::UpstreamCaInvalid`] when it holds no certificate or one that does not parse;
/// both name [`UPSTREAM_CA_ENV`] and the path.
pub fn load_upstream_roots(path: &Path) -> Result<Vec<CertificateDer<'static>>, NetProxyError> {
    let bytes = std::fs::read(path).map_err(|source| NetProxyError::UpstreamCaUnreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |reason: String| NetProxyError::UpstreamCaInvalid {
        path: path.to_path_buf(),
        reason,
    };
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| invalid(format!("not PEM: {e}")))?;
        rustls::RootCertStore::empty()
            .add(cert.clone())
            .map_err(|e| invalid(format!("certificate #{} rejected: {e}", certs.len() + 1)))?;
        certs.push(cert);
    }
    if certs.is_empty() {
        return Err(invalid("no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

/// The two upstream TLS clients: webpki roots plus the injected extra roots, one offering
/// `http/1.1` only and one offering `h2` first.
pub(crate) struct UpstreamTls {
    pub(crate) h1: Arc<rustls::ClientConfig>,
    pub(crate) h2: Arc<rustls::ClientConfig>,
}

impl UpstreamTls {
    pub(crate) fn new(extra_roots: &[CertificateDer<'static>]) -> Result<Self, NetProxyError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for r in extra_roots {
            roots
                .add(r.clone())
                .map_err(|source| NetProxyError::Tls { source })?;
        }
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|source| NetProxyError::Tls { source })?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut h1 = cfg.clone();
        h1.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut h2 = cfg;
        h2.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            h1: Arc::new(h1),
            h2: Arc::new(h2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_upstream_ca_file_must_hold_certificates_and_errors_name_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let ca = crate::EphemeralCa::new(std::time::Duration::from_secs(60)).unwrap();
        let two = dir.path().join("two.pem");
        std::fs::write(&two, format!("{}\n{}", ca.cert_pem(), ca.cert_pem())).unwrap();
        assert_eq!(load_upstream_roots(&two).unwrap().len(), 2);
        let missing = dir.path().join("missing.pem");
        let e = load_upstream_roots(&missing).unwrap_err();
        assert_eq!(e.code(), "NETPROXY_UPSTREAM_CA_UNREADABLE");
        assert!(e.to_string().contains(UPSTREAM_CA_ENV), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = load_upstream_roots(&empty).unwrap_err();
        assert_eq!(e.code(), "NETPROXY_UPSTREAM_CA_INVALID");
        assert!(
            e.to_string().contains(UPSTREAM_CA_ENV) && e.to_string().contains("empty.pem"),
            "{e}"
        );
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = load_upstream_roots(&garbage).unwrap_err();
        assert_eq!(e.code(), "NETPROXY_UPSTREAM_CA_INVALID", "{e}");
    }
}

//! The ephemeral per-run CA and the leaf cache (SANDBOX.md §6.9).

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;

use crate::error::NetProxyError;

/// The CA's common name.
pub const CA_COMMON_NAME: &str = "iterion sandbox egress CA";

/// An ephemeral CA, minted per run. Its key exists only in this process's memory and `Debug`
/// never shows it. Leaves are minted per host on demand and cached.
pub struct EphemeralCa {
    key: KeyPair,
    params: CertificateParams,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    leaves: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl fmt::Debug for EphemeralCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EphemeralCa")
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

fn random_serial() -> Result<SerialNumber, NetProxyError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| NetProxyError::Random {
        reason: e.to_string(),
    })?;
    b[0] &= 0x7f; // positive
    b[0] |= 0x01; // and a full 128-bit-ish width, never zero
    Ok(SerialNumber::from_slice(&b))
}

fn cert_err(subject: &str) -> impl Fn(rcgen::Error) -> NetProxyError + '_ {
    move |source| NetProxyError::Certificate {
        subject: subject.to_string(),
        source,
    }
}

impl EphemeralCa {
    /// Mints the CA: ECDSA P-256, CN `iterion sandbox egress CA`, O `iterion`, random positive
    /// 128-bit serial, valid from now − 1 h to now + max(24 h, `max_run_duration` + 1 h),
    /// CertSign/CRLSign/DigitalSignature, pathlen 0.
    pub fn new(max_run_duration: Duration) -> Result<Self, NetProxyError> {
        let now = OffsetDateTime::now_utc();
        let not_before = now - Duration::from_secs(3600);
        let span = Duration::from_secs(24 * 3600)
            .max(max_run_duration.saturating_add(Duration::from_secs(3600)));
        let not_after = now + span;
        let key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(cert_err(CA_COMMON_NAME))?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, CA_COMMON_NAME);
        dn.push(DnType::OrganizationName, "iterion");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(random_serial()?);
        params.not_before = not_before;
        params.not_after = not_after;
        let cert = params.self_signed(&key).map_err(cert_err(CA_COMMON_NAME))?;
        Ok(Self {
            key,
            params,
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            not_before,
            not_after,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA certificate as PEM (what the container trusts).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate as DER.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// The leaf for `host` (DNS or IP SAN, ServerAuth EKU, chain [leaf, CA]), minted once and
    /// cached.
    pub fn leaf_for(&self, host: &str) -> Result<Arc<CertifiedKey>, NetProxyError> {
        if let Ok(cache) = self.leaves.lock()
            && let Some(k) = cache.get(host)
        {
            return Ok(k.clone());
        }
        let leaf = Arc::new(self.mint_leaf(host)?);
        if let Ok(mut cache) = self.leaves.lock() {
            cache.insert(host.to_string(), leaf.clone());
        }
        Ok(leaf)
    }

    fn mint_leaf(&self, host: &str) -> Result<CertifiedKey, NetProxyError> {
        let err = cert_err(host);
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(&err)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host);
        params.distinguished_name = dn;
        params.subject_alt_names = vec![match host.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(host.to_string().try_into().map_err(&err)?),
        }];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.serial_number = Some(random_serial()?);
        params.not_before = self.not_before;
        params.not_after = self.not_after;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(&err)?;
        let provider = rustls::crypto::ring::default_provider();
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = provider
            .key_provider
            .load_private_key(der)
            .map_err(|source| NetProxyError::Tls { source })?;
        Ok(CertifiedKey::new(
            vec![cert.der().clone(), self.cert_der.clone()],
            signing,
        ))
    }
}

/// Serves the leaf of the tunnel's CONNECT host, whatever the SNI says: no leaf is ever minted
/// for a name the policy did not decide on. A client whose SNI names another host is refused
/// after the handshake ([`crate::mitm`]), before any request.
#[derive(Debug)]
pub(crate) struct LeafResolver {
    pub ca: Arc<EphemeralCa>,
    pub host: String,
}

impl rustls::server::ResolvesServerCert for LeafResolver {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.ca.leaf_for(&self.host).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_mints_cached_leaves_and_debug_hides_the_key() {
        let ca = EphemeralCa::new(Duration::from_secs(60)).unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let a = ca.leaf_for("api.example.com").unwrap();
        let b = ca.leaf_for("api.example.com").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.cert.len(), 2);
        assert!(ca.leaf_for("127.0.0.1").is_ok());
        let dbg = format!("{ca:?}");
        assert!(!dbg.contains("key:") && dbg.contains(".."), "{dbg}");
    }
}

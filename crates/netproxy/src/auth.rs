//! Per-run token auth (SANDBOX.md §6.3).

use std::fmt;

use base64::Engine as _;
use subtle::ConstantTimeEq;

use crate::error::NetProxyError;

/// The per-run proxy token: 32 random bytes, hex-encoded (64 chars). `Debug` renders `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyToken(String);

impl fmt::Debug for ProxyToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProxyToken(***)")
    }
}

impl ProxyToken {
    /// Mints a fresh token from the OS random source.
    pub fn generate() -> Result<Self, NetProxyError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| NetProxyError::Random {
            reason: e.to_string(),
        })?;
        Ok(Self(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// Wraps a token the caller already holds (tests, a resumed run).
    pub fn from_secret_string(token: String) -> Self {
        Self(token)
    }

    /// The token itself, for building the endpoint handed to the sandbox. Never log it.
    pub fn reveal(&self) -> &str {
        &self.0
    }

    /// Whether a `Proxy-Authorization` header value carries this token, compared in constant
    /// time.
    pub fn authorizes(&self, header: Option<&[u8]>) -> bool {
        let Some(candidate) = header.and_then(decode_proxy_authorization) else {
            return false;
        };
        candidate.len() == self.0.len() && bool::from(candidate.ct_eq(self.0.as_bytes()))
    }
}

/// The credential a `Proxy-Authorization` value carries: the Bearer token, or the password of a
/// Basic `user:pass`. `None` for anything else.
///
/// ```
/// use iterion_netproxy::decode_proxy_authorization;
/// assert_eq!(decode_proxy_authorization(b"Bearer abc").as_deref(), Some(&b"abc"[..]));
/// assert_eq!(decode_proxy_authorization(b"basic dDphYmM=").as_deref(), Some(&b"abc"[..]));
/// assert_eq!(decode_proxy_authorization(b"Digest x"), None);
/// ```
pub fn decode_proxy_authorization(value: &[u8]) -> Option<Vec<u8>> {
    let value = value.trim_ascii();
    let split = value.iter().position(|b| *b == b' ')?;
    let (scheme, rest) = value.split_at(split);
    let rest = rest.trim_ascii();
    if scheme.eq_ignore_ascii_case(b"bearer") {
        return (!rest.is_empty()).then(|| rest.to_vec());
    }
    if scheme.eq_ignore_ascii_case(b"basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let colon = decoded.iter().position(|b| *b == b':')?;
        return Some(decoded[colon + 1..].to_vec());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_basic_pass_and_anything_else_fails() {
        let t = ProxyToken::from_secret_string("s3cret-token".into());
        assert!(t.authorizes(Some(b"Bearer s3cret-token")));
        let basic = base64::engine::general_purpose::STANDARD.encode("t:s3cret-token");
        assert!(t.authorizes(Some(format!("Basic {basic}").as_bytes())));
        assert!(!t.authorizes(None));
        assert!(!t.authorizes(Some(b"Bearer s3cret-tokeN")));
        assert!(!t.authorizes(Some(b"Bearer s3cret")));
        assert!(!t.authorizes(Some(b"s3cret-token")));
        let user_only = base64::engine::general_purpose::STANDARD.encode("s3cret-token:");
        assert!(!t.authorizes(Some(format!("Basic {user_only}").as_bytes())));
    }

    #[test]
    fn a_minted_token_is_64_hex_chars_and_debug_hides_it() {
        let t = ProxyToken::generate().unwrap();
        assert_eq!(t.reveal().len(), 64);
        assert!(t.reveal().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(format!("{t:?}"), "ProxyToken(***)");
    }
}

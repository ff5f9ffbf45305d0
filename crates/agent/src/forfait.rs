//! Subscription credential files ("forfaits"): the operator's `claude` login
//! (`.credentials.json`) and `codex` ChatGPT login (`auth.json`), turned into what a delegate CLI
//! is given. Pure: [`parse`] reads a file's text, checks it and returns the two versions of it.
//!
//! - **The access token** is the credential the CLI sends to the model's host. In the
//!   container's copy it is a placeholder ([`crate::delegate::Cli`]'s forfait secret) the run's
//!   egress proxy swaps toward the model's host only, so the real token never sits in the
//!   container.
//! - **The refresh token is withheld** from both copies (the container's and the host's). A
//!   refresh sends it to the provider's auth host and gets a new access *and* refresh token back
//!   in the response body, which the CLI writes to its file: a placeholder swapped on the way
//!   out would come back as a real token in clear. So the CLI cannot refresh; a login whose
//!   access token has expired (or expires within [`MARGIN_SECS`]) is refused before anything
//!   starts, with a message saying to refresh it by running the CLI on the host. A refresh in a
//!   copy would also rotate the operator's refresh token and log their own CLI out.
//! - Everything else the file may hold (claude's MCP server OAuth tokens, an API key next to a
//!   ChatGPT login) is dropped: only the login the CLI needs is kept.
//! - codex's `id_token` is a signed JWT that can be exchanged for an API key; codex reads its
//!   claims (plan, account) but not its signature, so the copies keep header and claims and
//!   replace the signature.

use serde_json::{Value, json};

use crate::delegate::Cli;

/// What replaces a withheld token (the refresh token, the id token's signature).
pub const WITHHELD: &str = "withheld-by-iterion";

/// A login whose access token expires within this many seconds is refused.
pub const MARGIN_SECS: i64 = 5 * 60;

/// The largest credential file read.
pub const MAX_BYTES: usize = 256 * 1024;

/// The name of the egress secret (and placeholder) that stands for the access token.
pub fn secret_name(cli: Cli) -> &'static str {
    match cli {
        Cli::ClaudeCode => "ITERION_FORFAIT_CLAUDE_CODE",
        Cli::Codex => "ITERION_FORFAIT_CODEX",
    }
}

/// Why a credential file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForfaitError {
    /// Not JSON, or not an object.
    #[error("is not a JSON object ({0})")]
    NotJson(String),
    /// A field the login needs is missing or not a string.
    #[error("holds no {0}")]
    Missing(&'static str),
    /// The access token has expired (or is about to).
    #[error(
        "holds a login whose access token expired{0}; run `{1}` on this machine once to refresh it, then run again"
    )]
    Expired(String, &'static str),
}

/// A checked login.
#[derive(Clone, PartialEq, Eq)]
pub struct Forfait {
    /// The CLI.
    pub cli: Cli,
    /// The real access token (what the proxy puts in place of the placeholder).
    pub access_token: String,
    /// Every real value the file holds that must never be printed (access, refresh, id tokens).
    pub secrets: Vec<String>,
    /// The file as the container gets it: the access token is the placeholder.
    pub container_text: String,
    /// The file as a host run's CLI gets it: the real access token.
    pub host_text: String,
}

impl std::fmt::Debug for Forfait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forfait")
            .field("cli", &self.cli)
            .finish_non_exhaustive()
    }
}

/// Checks `text` (a `cli` credential file) at `now` (Unix seconds) and builds its two copies;
/// `placeholder` stands for the access token in the container's.
///
/// # Errors
///
/// [`ForfaitError`] when the file is not JSON, holds no login, or its access token has expired.
pub fn parse(cli: Cli, text: &str, now: i64, placeholder: &str) -> Result<Forfait, ForfaitError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| ForfaitError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ForfaitError::NotJson("not an object".to_owned()));
    }
    match cli {
        Cli::ClaudeCode => claude(&value, now, placeholder),
        Cli::Codex => codex(&value, now, placeholder),
    }
}

fn string<'a>(v: &'a Value, field: &'static str) -> Result<&'a str, ForfaitError> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or(ForfaitError::Missing(field))
}

fn expired(at: i64, now: i64, program: &'static str) -> Result<(), ForfaitError> {
    if at <= now + MARGIN_SECS {
        let when = if at <= now {
            format!(" {}s ago", now - at)
        } else {
            format!(" in {}s", at - now)
        };
        return Err(ForfaitError::Expired(when, program));
    }
    Ok(())
}

fn claude(v: &Value, now: i64, placeholder: &str) -> Result<Forfait, ForfaitError> {
    let login = v
        .get("claudeAiOauth")
        .filter(|l| l.is_object())
        .ok_or(ForfaitError::Missing("claudeAiOauth"))?;
    let access = string(login, "accessToken")?.to_owned();
    let expires_ms = login
        .get("expiresAt")
        .and_then(Value::as_i64)
        .ok_or(ForfaitError::Missing("expiresAt"))?;
    expired(expires_ms / 1000, now, "claude")?;
    let mut secrets = vec![access.clone()];
    if let Some(refresh) = login.get("refreshToken").and_then(Value::as_str)
        && !refresh.is_empty()
    {
        secrets.push(refresh.to_owned());
    }
    let copy = |token: &str| {
        let mut login = login.clone();
        login["accessToken"] = json!(token);
        login["refreshToken"] = json!(WITHHELD);
        json!({ "claudeAiOauth": login }).to_string()
    };
    Ok(Forfait {
        cli: Cli::ClaudeCode,
        container_text: copy(placeholder),
        host_text: copy(&access),
        access_token: access,
        secrets,
    })
}

/// The claims of a JWT, when `token` is one.
fn jwt_claims(token: &str) -> Option<Value> {
    use base64::Engine as _;
    let mut parts = token.split('.');
    let (_, claims, _) = (parts.next()?, parts.next()?, parts.next()?);
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn codex(v: &Value, now: i64, placeholder: &str) -> Result<Forfait, ForfaitError> {
    let tokens = v
        .get("tokens")
        .filter(|t| t.is_object())
        .ok_or(ForfaitError::Missing("tokens (a ChatGPT login)"))?;
    let access = string(tokens, "access_token")?.to_owned();
    let id_token = string(tokens, "id_token")?;
    // A ChatGPT access token is a JWT: its `exp` says when it stops working.
    if let Some(exp) = jwt_claims(&access).and_then(|c| c.get("exp").and_then(Value::as_i64)) {
        expired(exp, now, "codex")?;
    }
    let (head, rest) = id_token
        .split_once('.')
        .ok_or(ForfaitError::Missing("id_token (a JWT)"))?;
    let claims = rest
        .split_once('.')
        .map_or(rest, |(claims, _signature)| claims);
    let id_copy = format!("{head}.{claims}.{WITHHELD}");
    let mut secrets = vec![access.clone(), id_token.to_owned()];
    if let Some(refresh) = tokens.get("refresh_token").and_then(Value::as_str)
        && !refresh.is_empty()
    {
        secrets.push(refresh.to_owned());
    }
    // codex refreshes a login whose last refresh is old; it cannot here (no refresh token), and
    // the access token's own expiry was checked above.
    let refreshed = chrono_like_now(now);
    let copy = |token: &str| {
        let mut t = json!({
            "id_token": id_copy,
            "access_token": token,
            "refresh_token": WITHHELD,
        });
        if let Some(account) = tokens.get("account_id").filter(|a| a.is_string()) {
            t["account_id"] = account.clone();
        }
        json!({ "OPENAI_API_KEY": null, "tokens": t, "last_refresh": refreshed }).to_string()
    };
    Ok(Forfait {
        cli: Cli::Codex,
        container_text: copy(placeholder),
        host_text: copy(&access),
        access_token: access,
        secrets,
    })
}

/// `now` (Unix seconds, UTC) as RFC 3339 (`2026-01-02T03:04:05Z`).
fn chrono_like_now(now: i64) -> String {
    let days = now.div_euclid(86_400);
    let secs = now.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const NOW: i64 = 1_800_000_000;

    fn jwt(claims: Value) -> String {
        use base64::Engine as _;
        let enc = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
        };
        format!(
            "{}.{}.real-signature",
            enc(&json!({"alg": "RS256"})),
            enc(&claims)
        )
    }

    #[test]
    fn a_claude_login_keeps_only_the_login_with_the_placeholder_and_no_refresh_token() {
        let text = json!({
            "claudeAiOauth": {"accessToken": "sk-ant-oat01-REAL", "refreshToken": "sk-ant-ort01-REFRESH",
                "expiresAt": (NOW + 3600) * 1000, "scopes": ["user:inference"], "subscriptionType": "max"},
            "mcpOAuth": {"srv": {"accessToken": "mcp-secret"}}
        })
        .to_string();
        let f = parse(Cli::ClaudeCode, &text, NOW, "__P__").unwrap();
        assert_eq!(f.access_token, "sk-ant-oat01-REAL");
        let c: Value = serde_json::from_str(&f.container_text).unwrap();
        assert_eq!(c["claudeAiOauth"]["accessToken"], json!("__P__"));
        assert_eq!(c["claudeAiOauth"]["refreshToken"], json!(WITHHELD));
        assert_eq!(c["claudeAiOauth"]["subscriptionType"], json!("max"));
        assert!(c.get("mcpOAuth").is_none());
        for real in ["sk-ant-oat01-REAL", "sk-ant-ort01-REFRESH", "mcp-secret"] {
            assert!(!f.container_text.contains(real), "{real}");
        }
        assert!(f.host_text.contains("sk-ant-oat01-REAL"));
        assert!(!f.host_text.contains("REFRESH"));
        assert_eq!(f.secrets, vec!["sk-ant-oat01-REAL", "sk-ant-ort01-REFRESH"]);
    }

    #[test]
    fn a_broken_or_expired_login_is_refused_with_what_is_wrong() {
        let cases = [
            ("not json", "is not a JSON object"),
            ("[1]", "is not a JSON object"),
            ("{}", "holds no claudeAiOauth"),
            (
                r#"{"claudeAiOauth":{"expiresAt":99999999999999}}"#,
                "holds no accessToken",
            ),
            (
                r#"{"claudeAiOauth":{"accessToken":"x"}}"#,
                "holds no expiresAt",
            ),
        ];
        for (text, want) in cases {
            let e = parse(Cli::ClaudeCode, text, NOW, "P").unwrap_err();
            assert!(e.to_string().starts_with(want), "{text}: {e}");
        }
        let soon = json!({"claudeAiOauth": {"accessToken": "x", "expiresAt": (NOW + 60) * 1000}});
        let e = parse(Cli::ClaudeCode, &soon.to_string(), NOW, "P").unwrap_err();
        assert!(
            matches!(e, ForfaitError::Expired(_, "claude")),
            "{e}: {}",
            e
        );
        let old = json!({"tokens": {"access_token": jwt(json!({"exp": NOW - 10})), "id_token": jwt(json!({}))}});
        let e = parse(Cli::Codex, &old.to_string(), NOW, "P").unwrap_err();
        assert!(e.to_string().contains("expired 10s ago"), "{e}");
        let key_only = json!({"OPENAI_API_KEY": "sk-x"});
        let e = parse(Cli::Codex, &key_only.to_string(), NOW, "P").unwrap_err();
        assert!(e.to_string().contains("tokens"), "{e}");
    }

    #[test]
    fn a_codex_login_keeps_the_claims_of_its_id_token_but_not_its_signature() {
        let access = jwt(json!({"exp": NOW + 86_400}));
        let id = jwt(json!({"email": "a@b.c"}));
        let text = json!({"OPENAI_API_KEY": "sk-also", "tokens": {"access_token": access, "id_token": id,
            "refresh_token": "rt-REAL", "account_id": "acct-1"}, "last_refresh": "2020-01-01T00:00:00Z"})
        .to_string();
        let f = parse(Cli::Codex, &text, NOW, "__P__").unwrap();
        let c: Value = serde_json::from_str(&f.container_text).unwrap();
        assert_eq!(c["tokens"]["access_token"], json!("__P__"));
        assert_eq!(c["tokens"]["refresh_token"], json!(WITHHELD));
        assert_eq!(c["tokens"]["account_id"], json!("acct-1"));
        assert_eq!(c["OPENAI_API_KEY"], Value::Null);
        assert_eq!(c["last_refresh"], json!("2027-01-15T08:00:00Z"));
        let id_copy = c["tokens"]["id_token"].as_str().unwrap();
        assert!(id_copy.ends_with(&format!(".{WITHHELD}")));
        assert_eq!(
            jwt_claims(id_copy).unwrap(),
            json!({"email": "a@b.c"}),
            "the claims stay readable"
        );
        for real in [access.as_str(), id.as_str(), "rt-REAL", "sk-also"] {
            assert!(!f.container_text.contains(real), "{real}");
        }
        assert!(f.host_text.contains(&access));
    }
}

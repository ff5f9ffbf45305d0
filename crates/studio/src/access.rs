//! Who may read and who may write (the studio's one access policy).
//!
//! - **Reads** on a loopback listener are open to requests whose `Host` is a loopback name (so a
//!   page on another site cannot read the studio through DNS rebinding). On any other listener
//!   every request needs the token: `Authorization: Bearer TOKEN`, the `iterion_studio_token`
//!   cookie, or `?token=TOKEN` once (which sets the cookie, `HttpOnly`, `SameSite=Strict`).
//! - **Writes** (answering a paused run) always need the token, on loopback too: as a bearer
//!   header, or as the `token` field of the page's form, and then the request must be
//!   same-origin: `Sec-Fetch-Site: same-origin` from a browser that sends it, else an `Origin`
//!   equal to `http://` + `Host`. A cross-site form post carries neither the token nor the right
//!   origin.
//!
//! Tokens are compared in constant time.

use std::net::SocketAddr;

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

/// The cookie a `?token=` visit sets.
pub const COOKIE: &str = "iterion_studio_token";

/// The access rules of one studio.
#[derive(Debug)]
pub struct Access {
    token: String,
    open_reads: bool,
}

/// Why a request was refused, with the HTTP status it gets and a message naming the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// 401, 403 or 421.
    pub status: u16,
    /// What to do about it.
    pub message: &'static str,
}

/// How a read was let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granted {
    /// Loopback, or a bearer header or cookie that matched.
    Plain,
    /// A `?token=` that matched: set the cookie on the answer.
    SetCookie,
}

impl Access {
    /// The rules for a studio listening on `listen` with `token`.
    pub fn new(token: String, listen: SocketAddr) -> Self {
        Self {
            token,
            open_reads: listen.ip().is_loopback(),
        }
    }

    /// The token (for the page's answer form).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether reads need no token (a loopback listener).
    pub fn open_reads(&self) -> bool {
        self.open_reads
    }

    fn matches(&self, offered: &str) -> bool {
        !offered.is_empty() && bool::from(offered.as_bytes().ct_eq(self.token.as_bytes()))
    }

    /// Judges a read request: its headers and its `?token=` query value.
    pub fn check_read(
        &self,
        headers: &HeaderMap,
        query_token: Option<&str>,
    ) -> Result<Granted, Denied> {
        if self.open_reads {
            if !host_is_loopback(headers) {
                return Err(Denied {
                    status: 421,
                    message: "this studio listens on loopback and answers only requests for a loopback host (127.0.0.1, localhost, [::1])",
                });
            }
            return Ok(Granted::Plain);
        }
        if bearer(headers).is_some_and(|t| self.matches(t))
            || cookie(headers, COOKIE).is_some_and(|t| self.matches(t))
        {
            return Ok(Granted::Plain);
        }
        if query_token.is_some_and(|t| self.matches(t)) {
            return Ok(Granted::SetCookie);
        }
        Err(Denied {
            status: 401,
            message: "this studio listens off loopback and needs its token: open the URL `iterion studio` printed (…/?token=TOKEN) or send `Authorization: Bearer TOKEN`; ITERION_STUDIO_TOKEN sets the token",
        })
    }

    /// Judges a write request: its headers and the `token` field of its form, if any.
    pub fn check_write(&self, headers: &HeaderMap, form_token: Option<&str>) -> Result<(), Denied> {
        if bearer(headers).is_some_and(|t| self.matches(t)) {
            // A bearer header cannot be set by a cross-site page without a CORS preflight, which
            // this server never grants.
            return Ok(());
        }
        if !form_token.is_some_and(|t| self.matches(t)) {
            return Err(Denied {
                status: 401,
                message: "a write needs the studio's token (the page's form carries it; an API client sends `Authorization: Bearer TOKEN`)",
            });
        }
        if !same_origin(headers) {
            return Err(Denied {
                status: 403,
                message: "a write from a form must be same-origin (its Origin must be this studio's)",
            });
        }
        Ok(())
    }
}

/// 32 random bytes as 64 hex digits.
///
/// # Errors
///
/// The operating system's random source failed.
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn host(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::HOST)?.to_str().ok()
}

/// The host part of a `Host` header value (without the port; IPv6 without its brackets).
fn host_name(value: &str) -> &str {
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    value.rsplit_once(':').map_or(value, |(h, _)| h)
}

fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(value) = host(headers) else {
        return false;
    };
    let name = host_name(value).to_ascii_lowercase();
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `Sec-Fetch-Site: same-origin` (a header no page can set) when the browser sends it; otherwise
/// an `Origin` equal to `http://` + `Host`.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let (Some(origin), Some(host)) = (
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
        host(headers),
    ) else {
        return false;
    };
    origin == format!("http://{host}")
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;

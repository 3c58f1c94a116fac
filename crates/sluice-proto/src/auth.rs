//! Authentication: a shared secret and HMAC-SHA256.
//!
//! Every process of a cluster holds the same secret (a file, created by
//! `sluice cluster up`, or the `SLUICE_SECRET` environment variable).
//!
//! - Control plane: each gRPC call carries a time, a nonce and an
//!   HMAC-SHA256 over its method, time, nonce and body digest
//!   ([`crate::signed`]); the coordinator refuses calls without them, with
//!   a wrong MAC, a time more than [`MAX_SKEW_MS`] from its clock, or a
//!   nonce it has seen.
//! - Data plane: each request ends in an HMAC-SHA256 of its header and body
//!   (time and nonce included; see [`crate::data`]) under the secret, except
//!   shuffle fetches, which are signed with the job's token =
//!   HMAC-SHA256(secret, "job:" ++ job id as u64 LE). A task receives only
//!   its job's token, so a fetch for one job cannot be forged from another
//!   job's token. A worker refuses a nonce it has seen.

use hmac::{KeyInit, Mac};
use sha2::Sha256;

use crate::ClusterError;

/// Largest accepted clock difference of a signed request.
pub const MAX_SKEW_MS: u64 = 5 * 60 * 1000;
/// Shortest accepted secret.
pub const MIN_SECRET: usize = 16;

type HmacSha256 = hmac::Hmac<Sha256>;

/// The cluster's shared secret, or a user's key (then it names its
/// user: calls it signs say whose they are, see [`crate::users`]).
#[derive(Clone)]
pub struct Secret(Vec<u8>, Option<String>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A secret from bytes; refuses short ones.
    pub fn new(bytes: &[u8]) -> Result<Self, ClusterError> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() < MIN_SECRET {
            return Err(ClusterError::Auth(format!(
                "the shared secret must be at least {MIN_SECRET} bytes"
            )));
        }
        Ok(Secret(trimmed.to_vec(), None))
    }

    /// A user's key: what it signs is that user's.
    pub fn for_user(key: &[u8], user: &str) -> Result<Self, ClusterError> {
        let mut s = Secret::new(key)?;
        s.1 = Some(user.to_owned());
        Ok(s)
    }

    /// The key as written in a key file (a user's key is hex text).
    pub fn hex_key(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// The user this key belongs to; `None`: the cluster's secret (an
    /// admin's).
    pub fn user(&self) -> Option<&str> {
        self.1.as_deref()
    }

    /// Reads a secret file.
    pub fn load(path: &std::path::Path) -> Result<Self, ClusterError> {
        let bytes = std::fs::read(path).map_err(|e| ClusterError::io("reading secret", path, e))?;
        Secret::new(&bytes)
    }

    /// A fresh random secret, as 64 hex digits.
    pub fn generate() -> String {
        let bytes: [u8; 32] = rand::random();
        hex(&bytes)
    }

    /// HMAC-SHA256 of `parts` under this secret.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        mac_with(&self.0, parts)
    }

    /// The token that opens the coordinator's web pages and metrics: a MAC
    /// of a fixed label, so whoever holds the secret can compute it and
    /// the secret itself never travels in a URL or a cookie.
    pub fn web_token(&self) -> String {
        hex(&self.mac(&[b"sluice web pages"])[..16])
    }

    /// The token that signs shuffle fetches of `job`.
    pub fn job_token(&self, job: u64) -> [u8; 32] {
        self.mac(&[b"job:", &job.to_le_bytes()])
    }
}

/// Where an HTTP request may carry the web token: its query's `token=`,
/// an `Authorization: Bearer` header, or a `sluice_token` cookie.
#[derive(Debug, Default, Clone, Copy)]
pub struct WebCredentials<'a> {
    pub query: Option<&'a str>,
    pub authorization: Option<&'a str>,
    /// Every `Cookie` header's value.
    pub cookies: &'a [&'a str],
}

/// Checks an HTTP request's query and headers for `secret`'s web token:
/// whether it may pass, and whether the token came in the query (then the
/// answer sets the cookie, so the page's links work).
pub fn check_web_request(
    secret: &Secret,
    query: Option<&str>,
    headers: &tonic::codegen::http::HeaderMap,
) -> (bool, bool) {
    use tonic::codegen::http::header;
    let cookies: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let given = WebCredentials {
        query,
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
        cookies: &cookies,
    };
    (given.allowed(secret), given.query_token().is_some())
}

impl WebCredentials<'_> {
    /// The token the request's query carries (it then gets the cookie).
    pub fn query_token(&self) -> Option<&str> {
        self.query?
            .split('&')
            .find_map(|kv| kv.strip_prefix("token="))
    }

    /// Whether any of them is `secret`'s web token (compared without an
    /// early exit).
    pub fn allowed(&self, secret: &Secret) -> bool {
        let want = secret.web_token();
        let bearer = self
            .authorization
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let cookie = self
            .cookies
            .iter()
            .flat_map(|v| v.split(';'))
            .find_map(|kv| kv.trim().strip_prefix("sluice_token="));
        [self.query_token(), bearer, cookie]
            .into_iter()
            .flatten()
            .any(|t| constant_eq(t.as_bytes(), want.as_bytes()))
    }
}

/// HMAC-SHA256 of `parts` under `key`.
pub fn mac_with(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// Refuses a timestamp too far from this clock.
pub fn check_skew(ts: u64) -> Result<(), ClusterError> {
    if crate::now_ms().abs_diff(ts) > MAX_SKEW_MS {
        return Err(ClusterError::Auth(
            "request timestamp too far from this host's clock".into(),
        ));
    }
    Ok(())
}

/// Compares without an early exit.
pub fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Lowercase hex (every signed call makes one: no allocation a byte).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn the_web_token_is_taken_from_query_bearer_or_cookie() {
        let s = Secret::new(&[7; 32]).unwrap();
        let t = s.web_token();
        let q = format!("a=1&token={t}");
        let b = format!("Bearer {t}");
        let c = [format!("x=1; sluice_token={t}")];
        let c: Vec<&str> = c.iter().map(String::as_str).collect();
        for ok in [
            WebCredentials {
                query: Some(&q),
                ..Default::default()
            },
            WebCredentials {
                authorization: Some(&b),
                ..Default::default()
            },
            WebCredentials {
                cookies: &c,
                ..Default::default()
            },
        ] {
            assert!(ok.allowed(&s));
        }
        let wrong = WebCredentials {
            query: Some("token=00"),
            authorization: Some("Basic x"),
            cookies: &[],
        };
        assert!(!wrong.allowed(&s));
        assert!(!WebCredentials::default().allowed(&s));
        assert_eq!(Secret::new(&[8; 32]).unwrap().web_token().len(), t.len());
        assert_ne!(Secret::new(&[8; 32]).unwrap().web_token(), t);
    }

    #[test]
    fn short_secrets_are_refused() {
        assert!(Secret::new(b"short").is_err());
    }

    #[test]
    fn job_tokens_differ_per_job() {
        let s = Secret::new(b"0123456789abcdef0123").unwrap();
        assert_ne!(s.job_token(1), s.job_token(2));
    }
}

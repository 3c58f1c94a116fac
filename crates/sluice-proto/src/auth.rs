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

/// The cluster's shared secret.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

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
        Ok(Secret(trimmed.to_vec()))
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

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

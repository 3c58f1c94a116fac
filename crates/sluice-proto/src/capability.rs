//! Block capabilities: what lets a user's client read or write a block
//! on a worker, as HDFS's block access tokens do. A worker cannot ask the
//! coordinator at each request; the coordinator, which checked the
//! user's right when it handed out the block's locations (`GetDataset`,
//! `PlanBlocks`), hands out with them a capability for each block:
//!
//! ```text
//! key = HMAC-SHA256(HMAC-SHA256(secret, "block access"),
//!                   "block:" ++ mode ++ "\n" ++ block id ++ "\n" ++ user
//!                   ++ "\n" ++ expiry as u64 LE)
//! ```
//!
//! (`mode` is `r` or `w`; `expiry` Unix ms.) The client signs its
//! data-plane request with `key` and sends the user and the expiry with
//! it ([`crate::data`]); the worker, which holds the secret, computes the
//! same key for the block and mode the request names and refuses a MAC
//! that does not match or a capability past its expiry. So a user's key
//! alone opens no block, and a capability opens one block, one way, for
//! a while. On the wire (`BlockInfo.capability`, `Placement.capability`)
//! a capability is text: `user ++ " " ++ expiry ++ " " ++ hex(key)`.

use crate::auth::{hex, mac_with, Secret};

/// How long a capability lasts.
pub const LIFETIME_MS: u64 = 60 * 60 * 1000;

/// What a capability allows on its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

impl Mode {
    fn label(self) -> &'static [u8] {
        match self {
            Mode::Read => b"r",
            Mode::Write => b"w",
        }
    }
}

/// The capability key of `user` for `block` in `mode` until `expiry_ms`.
pub fn capability_key(
    secret: &Secret,
    user: &str,
    block: &str,
    mode: Mode,
    expiry_ms: u64,
) -> [u8; 32] {
    let base = secret.mac(&[b"block access"]);
    mac_with(
        &base,
        &[
            b"block:",
            mode.label(),
            b"\n",
            block.as_bytes(),
            b"\n",
            user.as_bytes(),
            b"\n",
            &expiry_ms.to_le_bytes(),
        ],
    )
}

/// A capability as its holder uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    pub user: String,
    pub expiry_ms: u64,
    pub key: [u8; 32],
}

impl Capability {
    /// Issues `user`'s capability for `block` in `mode`, for
    /// [`LIFETIME_MS`] from `now_ms`.
    pub fn issue(secret: &Secret, user: &str, block: &str, mode: Mode, now_ms: u64) -> Self {
        let expiry_ms = now_ms + LIFETIME_MS;
        Capability {
            user: user.to_owned(),
            expiry_ms,
            key: capability_key(secret, user, block, mode, expiry_ms),
        }
    }

    /// Its wire text.
    pub fn to_text(&self) -> String {
        format!("{} {} {}", self.user, self.expiry_ms, hex(&self.key))
    }

    /// Reads its wire text (`None`: not a capability).
    pub fn parse(text: &str) -> Option<Self> {
        let mut it = text.split(' ');
        let (user, expiry, key) = (it.next()?, it.next()?, it.next()?);
        if it.next().is_some() || key.len() != 64 {
            return None;
        }
        let mut k = [0u8; 32];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(key.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Capability {
            user: user.to_owned(),
            expiry_ms: expiry.parse().ok()?,
            key: k,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_reads_back_and_binds_user_block_mode_and_time() {
        let s = Secret::new(&[3; 32]).unwrap();
        let c = Capability::issue(&s, "alice", "b1-2", Mode::Read, 1000);
        assert_eq!(Capability::parse(&c.to_text()), Some(c.clone()));
        let k = |u, b, m, e| capability_key(&s, u, b, m, e);
        assert_eq!(c.key, k("alice", "b1-2", Mode::Read, c.expiry_ms));
        assert_ne!(c.key, k("bob", "b1-2", Mode::Read, c.expiry_ms));
        assert_ne!(c.key, k("alice", "b1-3", Mode::Read, c.expiry_ms));
        assert_ne!(c.key, k("alice", "b1-2", Mode::Write, c.expiry_ms));
        assert_ne!(c.key, k("alice", "b1-2", Mode::Read, c.expiry_ms + 1));
        assert!(Capability::parse("alice 12 00").is_none());
    }
}

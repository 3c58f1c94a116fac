//! Users: their keys, key files, and who a call comes from.
//!
//! An admin holds the cluster's secret. A user holds a key the admin made
//! for them (`sluice user add NAME`), derived from the secret, the name
//! and a random salt the coordinator keeps in its catalog:
//!
//! ```text
//! key = hex(HMAC-SHA256(secret, "user:" ++ name ++ "\n" ++ salt))
//! ```
//!
//! (64 lowercase hex digits; `salt` is 32 hex digits.) The coordinator
//! keeps only the salt, so its catalog holds no key, and computes a
//! user's key when a call names the user; removing the user (or adding
//! them again, with a new salt) makes the old key worthless at once.
//!
//! A key file (`CLUSTER/users/NAME.key`, mode 600) is one line of ASCII:
//!
//! ```text
//! "sluice-user-key 1 " ++ name ++ " " ++ key ++ "\n"
//! ```
//!
//! A call signed with a user's key carries the user's name in the
//! `x-sluice-user` header ([`crate::signed`]); one without it must be
//! signed with the secret, and is an admin's.

use std::path::Path;

use crate::auth::{hex, Secret};
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// Who made a call, as the coordinator's verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The holder of the cluster's secret (clients, workers, tools).
    Admin,
    /// A user, by name.
    User(String),
}

impl Caller {
    /// Whether it is an admin.
    pub fn is_admin(&self) -> bool {
        matches!(self, Caller::Admin)
    }

    /// The user's name; `None` for an admin.
    pub fn name(&self) -> Option<&str> {
        match self {
            Caller::Admin => None,
            Caller::User(n) => Some(n),
        }
    }

    /// The name recorded as an owner: the user's, or empty for an admin.
    pub fn owner(&self) -> String {
        self.name().unwrap_or_default().to_owned()
    }
}

/// How a key file starts.
const KEY_FILE_TAG: &str = "sluice-user-key 1 ";

/// Checks a user name: 1 to 32 of `a-z 0-9 _ -`, starting with a letter
/// or `_` (as a Unix login name).
pub fn check_user_name(name: &str) -> Result<()> {
    let ok_first = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let ok_rest = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !(ok_first && ok_rest && name.len() <= 32) {
        return Err(ClusterError::Config(format!(
            "invalid user name {name:?}: use 1 to 32 of a-z, 0-9, _ and -, starting with a letter or _"
        )));
    }
    Ok(())
}

/// A fresh salt for a user (32 hex digits).
pub fn new_salt() -> String {
    hex(&rand::random::<[u8; 16]>())
}

/// The key of user `name` with `salt`, under the cluster's `secret`.
pub fn user_key(secret: &Secret, name: &str, salt: &str) -> Secret {
    let key = hex(&secret.mac(&[b"user:", name.as_bytes(), b"\n", salt.as_bytes()]));
    Secret::for_user(key.as_bytes(), name).expect("64 hex digits")
}

/// A key file's text.
pub fn key_file_text(name: &str, key: &Secret) -> String {
    format!("{KEY_FILE_TAG}{name} {}\n", key.hex_key())
}

/// Reads a key file: the user's key, naming its user.
pub fn load_key(path: &Path) -> Result<Secret> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ClusterError::io("reading user key", path, e))?;
    parse_key(&text).map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))
}

/// Parses a key file's text.
pub fn parse_key(text: &str) -> std::result::Result<Secret, String> {
    let rest = text
        .trim_end()
        .strip_prefix(KEY_FILE_TAG)
        .ok_or("not a Sluice user key file (it must start with \"sluice-user-key 1 \")")?;
    let (name, key) = rest.split_once(' ').ok_or("no key after the user name")?;
    check_user_name(name).map_err(|e| e.to_string())?;
    if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the key must be 64 hex digits".into());
    }
    Secret::for_user(key.as_bytes(), name).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123").unwrap()
    }

    #[test]
    fn a_key_file_reads_back_as_its_user() {
        let k = user_key(&secret(), "alice", "00ff");
        let back = parse_key(&key_file_text("alice", &k)).unwrap();
        assert_eq!(back.user(), Some("alice"));
        assert_eq!(back.mac(&[b"x"]), k.mac(&[b"x"]));
    }

    #[test]
    fn keys_differ_by_name_salt_and_secret() {
        let k = |s: &Secret, n, salt| user_key(s, n, salt).mac(&[b"x"]);
        let other = Secret::new(b"fedcba9876543210fedc").unwrap();
        assert_ne!(k(&secret(), "alice", "1"), k(&secret(), "bob", "1"));
        assert_ne!(k(&secret(), "alice", "1"), k(&secret(), "alice", "2"));
        assert_ne!(k(&secret(), "alice", "1"), k(&other, "alice", "1"));
    }

    #[test]
    fn bad_key_files_and_names_are_refused_with_a_reason() {
        assert!(parse_key("hello")
            .unwrap_err()
            .contains("not a Sluice user key"));
        assert!(parse_key("sluice-user-key 1 alice 12")
            .unwrap_err()
            .contains("64 hex"));
        assert!(
            parse_key(&format!("sluice-user-key 1 Al {}", "0".repeat(64)))
                .unwrap_err()
                .contains("invalid user name")
        );
        for bad in ["", "1a", "a b", "../x", &"a".repeat(33)] {
            assert!(check_user_name(bad).is_err(), "{bad:?}");
        }
        check_user_name("alice_2-b").unwrap();
    }
}

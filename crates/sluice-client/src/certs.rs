//! The certificates of an embedded cluster: `up` makes the cluster's CA
//! in `DIR/tls/` and issues each process its certificate there.
//!
//! ```text
//! DIR/tls/ca.pem                 the CA's certificate (every process trusts it)
//! DIR/tls/ca.key                 the CA's key (mode 600)
//! DIR/tls/coordinator.{pem,key}  the coordinator's (coordinator-K with several)
//! DIR/tls/worker-I.{pem,key}     worker I's
//! DIR/tls/client.{pem,key}       the clients' (the commands given --cluster DIR)
//! ```
//!
//! Every certificate names `127.0.0.1` and `localhost`, where an
//! embedded cluster's processes listen.

use std::path::{Path, PathBuf};

use sluice_proto::tls::{self, ca::Ca, Files, Role, Tls};
use sluice_proto::ClusterError;

/// The hosts an embedded cluster's certificates name.
const HOSTS: [&str; 2] = ["127.0.0.1", "localhost"];

fn hosts() -> Vec<String> {
    HOSTS.iter().map(|h| h.to_string()).collect()
}

/// Makes `dir/tls/` with the cluster's CA (or takes the one there) and
/// the clients' certificate, and sets this process's transport to it;
/// with `insecure`, sets plaintext and makes nothing. Returns the TLS
/// directory.
pub fn init(dir: &Path, insecure: bool) -> Result<Option<PathBuf>, ClusterError> {
    if insecure {
        tls::install(None)?;
        return Ok(None);
    }
    let at = dir.join("tls");
    let ca = if at.join("ca.pem").exists() {
        Ca::load(&at)?
    } else {
        Ca::init(&at)?
    };
    let files = ca.issue_to(&hosts(), Role::Client, &at.join("client"))?;
    tls::install(Some(Tls::load(&files)?))?;
    Ok(Some(at))
}

/// Issues process `name` its certificate with `role` in `tls` and
/// returns the flags that give it; `--insecure` without a TLS directory.
pub(crate) fn flags(
    tls: Option<&Path>,
    name: &str,
    role: Role,
) -> Result<Vec<String>, ClusterError> {
    let Some(at) = tls else {
        return Ok(vec!["--insecure".into()]);
    };
    let files: Files = Ca::load(at)?.issue_to(&hosts(), role, &at.join(name))?;
    debug_assert_eq!(files, Files::in_dir(at, name));
    Ok(vec![
        "--tls-dir".into(),
        at.to_string_lossy().into_owned(),
        "--tls-name".into(),
        name.into(),
    ])
}

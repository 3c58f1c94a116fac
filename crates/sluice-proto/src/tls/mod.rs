//! TLS 1.3 with mutual authentication on every connection.
//!
//! Each process of a cluster holds the cluster CA's certificate
//! (`ca.pem`) and its own certificate and key, issued by that CA
//! ([`ca`]). Its certificate names its hosts (DNS names or IP
//! addresses, which a peer checks against the address it dialled) and
//! its *role*, a SAN URI `sluice://role/coordinator`,
//! `sluice://role/worker` or `sluice://role/client`: only a worker's
//! certificate may make the worker calls ([`WORKER_CALLS`]).
//!
//! A [`Tls`] holds the rustls configurations built from those files:
//! TLS 1.3 only, the aws-lc-rs provider (AES-GCM with the CPU's AES
//! instructions), the peer's certificate required and checked against
//! the CA on both sides (the web pages alone ask a browser for none).
//! The control plane uses them through [`grpc`], the data plane through
//! [`stream`], the web pages through [`Tls::web_server`].
//!
//! A process's transport is set once when it starts ([`install`]):
//! TLS, or plaintext when it runs with `--insecure` (for measurement
//! only). A process that never installs one (the library's in-process
//! tests) speaks plaintext.

pub mod ca;
pub mod grpc;
pub mod stream;
pub mod web;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// The prefix of the SAN URI that carries a certificate's role.
pub const ROLE_URI: &str = "sluice://role/";

/// The control calls only a worker's certificate may make (gRPC paths).
pub const WORKER_CALLS: [&str; 4] = [
    "/sluice.v1.Coordinator/Register",
    "/sluice.v1.Coordinator/Heartbeat",
    "/sluice.v1.Coordinator/MapOutputs",
    "/sluice.v1.Coordinator/FetchFailed",
];

/// What a certificate lets its holder be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Coordinator,
    Worker,
    Client,
}

impl Role {
    /// The role's name, as in its SAN URI.
    pub fn name(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Worker => "worker",
            Role::Client => "client",
        }
    }

    /// The SAN URI that carries the role.
    pub fn uri(self) -> String {
        format!("{ROLE_URI}{}", self.name())
    }
}

impl std::str::FromStr for Role {
    type Err = ClusterError;

    fn from_str(s: &str) -> Result<Role> {
        match s {
            "coordinator" => Ok(Role::Coordinator),
            "worker" => Ok(Role::Worker),
            "client" => Ok(Role::Client),
            _ => Err(ClusterError::Config(format!(
                "unknown role {s:?} (coordinator, worker or client)"
            ))),
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The roles a certificate (DER) carries in its SAN URIs; none when it
/// does not parse.
pub fn roles(cert: &[u8]) -> Vec<Role> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert) else {
        return Vec::new();
    };
    let Ok(Some(san)) = parsed.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::URI(u) => u.strip_prefix(ROLE_URI)?.parse().ok(),
            _ => None,
        })
        .collect()
}

/// Where a process's certificate files are: the CA's certificate, its
/// own certificate and its key (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Files {
    /// The files of process `name` in directory `dir`: `ca.pem`,
    /// `NAME.pem`, `NAME.key`.
    pub fn in_dir(dir: &Path, name: &str) -> Files {
        Files {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        }
    }
}

/// The rustls configurations of one process.
#[derive(Clone)]
pub struct Tls {
    server: Arc<ServerConfig>,
    web: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    /// The CA's certificate (PEM), for the clients of the web pages.
    ca_pem: Vec<u8>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

/// The crypto provider: aws-lc-rs.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn tls_err(what: &str) -> impl Fn(rustls::Error) -> ClusterError + '_ {
    move |e| ClusterError::Config(format!("{what}: {e}"))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| ClusterError::Io {
        op: "reading",
        path: path.to_path_buf(),
        source,
    })
}

impl Tls {
    /// Reads the files and builds the configurations.
    pub fn load(files: &Files) -> Result<Tls> {
        let (ca, cert, key) = (read(&files.ca)?, read(&files.cert)?, read(&files.key)?);
        Tls::from_pem(&ca, &cert, &key)
            .map_err(|e| ClusterError::Config(format!("certificate {}: {e}", files.cert.display())))
    }

    /// Builds the configurations from PEM text: the CA's certificate,
    /// the process's certificate (chain) and its private key.
    pub fn from_pem(ca: &[u8], cert: &[u8], key: &[u8]) -> Result<Tls> {
        let bad = |what: &'static str| move |e| ClusterError::Config(format!("{what}: {e}"));
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca) {
            roots
                .add(c.map_err(bad("bad CA certificate"))?)
                .map_err(tls_err("CA certificate"))?;
        }
        if roots.is_empty() {
            return Err(ClusterError::Config("no CA certificate".into()));
        }
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
            .collect::<std::result::Result<_, _>>()
            .map_err(bad("bad certificate"))?;
        if chain.is_empty() {
            return Err(ClusterError::Config("no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(bad("bad private key"))?;
        let roots = Arc::new(roots);
        let p = provider();
        let v13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), p.clone())
            .build()
            .map_err(|e| ClusterError::Config(format!("client verifier: {e}")))?;
        let server = ServerConfig::builder_with_provider(p.clone())
            .with_protocol_versions(v13)
            .map_err(tls_err("server"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(tls_err("server certificate"))?;
        let mut web = ServerConfig::builder_with_provider(p.clone())
            .with_protocol_versions(v13)
            .map_err(tls_err("web"))?
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(tls_err("web certificate"))?;
        web.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let client = ClientConfig::builder_with_provider(p)
            .with_protocol_versions(v13)
            .map_err(tls_err("client"))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(tls_err("client certificate"))?;
        Ok(Tls {
            server: Arc::new(server),
            web: Arc::new(web),
            client: Arc::new(client),
            ca_pem: ca.to_vec(),
        })
    }

    /// The configuration to serve with: the peer must present a
    /// certificate of the cluster's CA.
    pub fn server(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }

    /// The configuration of the web pages: https with the process's
    /// certificate, no client certificate asked (browsers have none;
    /// the pages have their token).
    pub fn web_server(&self) -> Arc<ServerConfig> {
        self.web.clone()
    }

    /// The configuration to connect with: the server must present a
    /// certificate of the cluster's CA naming the host dialled.
    pub fn client(&self) -> Arc<ClientConfig> {
        self.client.clone()
    }

    /// The CA's certificate (PEM), which the web pages' clients trust.
    pub fn ca_pem(&self) -> &[u8] {
        &self.ca_pem
    }
}

/// The name a server at `addr` (`host:port`) must carry in its
/// certificate: its host, a DNS name or an IP address.
pub fn server_name(addr: &str) -> Result<ServerName<'static>> {
    let host = match addr.rsplit_once(':') {
        Some((h, port)) if port.parse::<u16>().is_ok() => h,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| ClusterError::Config(format!("bad host in {addr}: {e}")))
}

/// The process's transport ([`install`]): unset, plaintext (`None`) or
/// TLS.
static TRANSPORT: RwLock<Option<Option<Arc<Tls>>>> = RwLock::new(None);

/// Sets the process's transport: `Some` for TLS, `None` for plaintext
/// (`--insecure`). A process that talks to one cluster and then another
/// (the Python package) sets it again; connections made before keep
/// theirs.
pub fn install(tls: Option<Tls>) -> Result<()> {
    let mut t = TRANSPORT.write().unwrap_or_else(|e| e.into_inner());
    *t = Some(tls.map(Arc::new));
    Ok(())
}

/// The process's TLS configurations; `None` when it speaks plaintext.
pub fn current() -> Option<Arc<Tls>> {
    let t = TRANSPORT.read().unwrap_or_else(|e| e.into_inner());
    t.clone().flatten()
}

/// Whether this process chose plaintext (`--insecure`). One that chose
/// nothing (a local run, the library's tests) is not said to be.
pub fn insecure() -> bool {
    let t = TRANSPORT.read().unwrap_or_else(|e| e.into_inner());
    matches!(*t, Some(None))
}

#[cfg(test)]
mod tests;

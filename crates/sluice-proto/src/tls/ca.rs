//! The cluster's certificate authority: made once (`sluice ca init`,
//! `sluice cluster up`), it issues each process its certificate.
//!
//! Files (PEM): `ca.pem` (the CA's certificate, which every process
//! trusts), `ca.key` (its key, mode 600, needed only to issue), and for
//! each process `PREFIX.pem` (its certificate) and `PREFIX.key` (its
//! key, mode 600). A process's certificate carries its hosts as DNS or
//! IP SANs and its role as the SAN URI `sluice://role/ROLE`; ECDSA P-256
//! keys; valid for ten years from the day it is issued.

use std::io::Write;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::{Files, Role};
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// How long an issued certificate is valid.
const VALID_DAYS: i64 = 3650;

/// A CA that can issue: its certificate and its key.
pub struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca")
    }
}

fn gen(e: rcgen::Error) -> ClusterError {
    ClusterError::Config(format!("certificate: {e}"))
}

/// The certificate's validity: from yesterday (clocks differ) for
/// [`VALID_DAYS`].
fn validity(params: &mut CertificateParams) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let day = 86_400;
    let at = |s: i64| rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(s as u64);
    params.not_before = at(now - day);
    params.not_after = at(now + VALID_DAYS * day);
}

impl Ca {
    /// A new CA.
    pub fn new() -> Result<Ca> {
        let key = KeyPair::generate().map_err(gen)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(gen)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "Sluice cluster CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params);
        let cert = params.self_signed(&key).map_err(gen)?;
        Ok(Ca {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA kept in `dir` (`ca.pem`, `ca.key`).
    pub fn load(dir: &Path) -> Result<Ca> {
        let cert_pem = read_text(&dir.join("ca.pem"))?;
        let key = KeyPair::from_pem(&read_text(&dir.join("ca.key"))?).map_err(gen)?;
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key).map_err(gen)?;
        Ok(Ca { cert_pem, issuer })
    }

    /// Makes a new CA in `dir` (created if needed), refusing to replace
    /// one there.
    pub fn init(dir: &Path) -> Result<Ca> {
        if dir.join("ca.pem").exists() || dir.join("ca.key").exists() {
            return Err(ClusterError::Config(format!(
                "{} already holds a CA (ca.pem); not replacing it",
                dir.display()
            )));
        }
        let ca = Ca::new()?;
        ca.save(dir)?;
        Ok(ca)
    }

    /// Writes `ca.pem` and `ca.key` (mode 600) into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        mkdir(dir)?;
        write(&dir.join("ca.pem"), self.cert_pem.as_bytes(), 0o644)?;
        write(
            &dir.join("ca.key"),
            self.issuer.key().serialize_pem().as_bytes(),
            0o600,
        )
    }

    /// The CA's certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A certificate and its key (PEM) for a process on `hosts` (DNS
    /// names or IP addresses) with `role`.
    pub fn issue(&self, hosts: &[String], role: Role) -> Result<(String, String)> {
        let mut params = params_for(hosts, role)?;
        validity(&mut params);
        self.sign(params)
    }

    /// Like [`Ca::issue`], but the certificate expired yesterday (for
    /// tests of the refusal).
    pub fn issue_expired(&self, hosts: &[String], role: Role) -> Result<(String, String)> {
        let mut params = params_for(hosts, role)?;
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Result<(String, String)> {
        let key = KeyPair::generate().map_err(gen)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(gen)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Issues a certificate and writes it as `PREFIX.pem` and
    /// `PREFIX.key` (mode 600), with the CA's certificate as `ca.pem`
    /// beside them when there is none yet; returns the files.
    pub fn issue_to(&self, hosts: &[String], role: Role, prefix: &Path) -> Result<Files> {
        let (cert, key) = self.issue(hosts, role)?;
        let with = |ext: &str| {
            let mut p = prefix.as_os_str().to_owned();
            p.push(ext);
            PathBuf::from(p)
        };
        let dir = prefix.parent().unwrap_or(Path::new("."));
        mkdir(dir)?;
        let files = Files {
            ca: dir.join("ca.pem"),
            cert: with(".pem"),
            key: with(".key"),
        };
        write(&files.cert, cert.as_bytes(), 0o644)?;
        write(&files.key, key.as_bytes(), 0o600)?;
        if !files.ca.exists() {
            write(&files.ca, self.cert_pem.as_bytes(), 0o644)?;
        }
        Ok(files)
    }
}

fn params_for(hosts: &[String], role: Role) -> Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(gen)?;
    let first = hosts.first().map_or("sluice", String::as_str);
    params
        .distinguished_name
        .push(DnType::CommonName, format!("sluice {role} {first}"));
    for h in hosts {
        let san = match h.parse::<std::net::IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(h.clone().try_into().map_err(gen)?),
        };
        params.subject_alt_names.push(san);
    }
    let uri = role.uri().try_into().map_err(gen)?;
    params.subject_alt_names.push(SanType::URI(uri));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| ClusterError::Io {
        op: "reading",
        path: path.to_path_buf(),
        source,
    })
}

fn mkdir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| ClusterError::Io {
        op: "creating",
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes a file created with `mode` (a key is never readable by others,
/// not even for a moment).
fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |source| ClusterError::Io {
        op: "writing",
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io)?;
    f.write_all(bytes).map_err(io)
}

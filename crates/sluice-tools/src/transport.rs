//! How a process chooses its transport: TLS with its certificate
//! (`--tls-dir DIR`, `--tls-name NAME`), or plaintext (`--insecure`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use sluice_proto::tls::{self, Files, Tls};

/// The transport flags of a coordinator, a worker or a client.
#[derive(Debug, Args, Clone, Default)]
pub struct TlsArgs {
    /// Directory of this process's TLS files: `ca.pem` (the cluster's
    /// CA), `NAME.pem` and `NAME.key` (its certificate and key, from
    /// `sluice ca issue --out DIR/NAME`) [default for clients:
    /// CLUSTER/tls].
    #[arg(long)]
    pub tls_dir: Option<PathBuf>,
    /// The NAME of this process's certificate in --tls-dir [default:
    /// its role: coordinator, worker or client].
    #[arg(long)]
    pub tls_name: Option<String>,
    /// Speak plaintext, with no TLS: for measurement only; anyone on the
    /// network can read and change every byte.
    #[arg(long)]
    pub insecure: bool,
}

impl TlsArgs {
    /// Sets this process's transport: plaintext with `--insecure`, else
    /// TLS with the files of `--tls-dir` (or `default_dir`) named
    /// `--tls-name` (or `role`).
    pub fn install(&self, role: &str, default_dir: Option<&Path>) -> anyhow::Result<()> {
        if self.insecure {
            tls::install(None)?;
            return Ok(());
        }
        let Some(dir) = self.tls_dir.as_deref().or(default_dir) else {
            anyhow::bail!(
                "no TLS certificate: pass --tls-dir DIR (holding ca.pem, {role}.pem, {role}.key; \
                 see sluice ca init and sluice ca issue), or --insecure for plaintext"
            );
        };
        let name = self.tls_name.as_deref().unwrap_or(role);
        let files = Files::in_dir(dir, name);
        let loaded = Tls::load(&files).with_context(|| {
            format!(
                "loading this {role}'s TLS files from {} (or pass --insecure for plaintext)",
                dir.display()
            )
        })?;
        tls::install(Some(loaded))?;
        Ok(())
    }

    /// The flags that give a child process the same transport with the
    /// certificate `name` of `dir`.
    pub fn child_flags(dir: Option<&Path>, name: &str) -> Vec<String> {
        match dir {
            None => vec!["--insecure".into()],
            Some(d) => vec![
                "--tls-dir".into(),
                d.to_string_lossy().into_owned(),
                "--tls-name".into(),
                name.into(),
            ],
        }
    }
}

/// What `sluice ca` does.
#[derive(Debug, clap::Subcommand)]
pub enum CaCmd {
    /// Make a cluster CA: DIR/ca.pem (its certificate, which every
    /// process trusts) and DIR/ca.key (its key, mode 600).
    Init {
        #[arg(long)]
        dir: PathBuf,
    },
    /// Issue a process its certificate: PREFIX.pem and PREFIX.key (mode
    /// 600), with ca.pem copied beside them.
    Issue {
        /// The CA's directory (ca.pem, ca.key).
        #[arg(long)]
        ca: PathBuf,
        /// A host the process is reached at, a DNS name or an IP address
        /// (repeatable, or comma-separated).
        #[arg(long, required = true, value_delimiter = ',')]
        host: Vec<String>,
        /// coordinator, worker or client: only a worker's certificate
        /// may join as a worker.
        #[arg(long)]
        role: tls::Role,
        /// Where to write: PREFIX.pem and PREFIX.key.
        #[arg(long)]
        out: PathBuf,
    },
}

/// `sluice ca`.
pub fn ca(cmd: &CaCmd) -> anyhow::Result<()> {
    match cmd {
        CaCmd::Init { dir } => {
            tls::ca::Ca::init(dir)?;
            println!(
                "CA made: {} (trusted by every process) and {} (mode 600; keep it private)",
                dir.join("ca.pem").display(),
                dir.join("ca.key").display()
            );
        }
        CaCmd::Issue {
            ca,
            host,
            role,
            out,
        } => {
            let files = tls::ca::Ca::load(ca)?.issue_to(host, *role, out)?;
            println!(
                "{role} certificate for {}: {} and {} (mode 600)",
                host.join(", "),
                files.cert.display(),
                files.key.display()
            );
        }
    }
    Ok(())
}

//! Where a command finds a cluster (`--coordinator`, `--cluster`,
//! `--secret-file`), and jobs run on it through the driver.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use sluice_client::{embedded, BlockingClient};
use sluice_driver::JobReport;
use sluice_proto::auth::Secret;
use sluice_proto::ids::JobId;
use sluice_proto::sample::Sample;
use sluice_request::Registry;

/// Where a client finds the cluster.
#[derive(Debug, Args, Clone)]
pub struct Conn {
    /// Coordinator address [default: the one in CLUSTER/cluster.json].
    #[arg(long)]
    pub coordinator: Option<String>,
    /// Directory of a `sluice cluster up` cluster.
    #[arg(long, default_value = "sluice-cluster")]
    pub cluster: PathBuf,
    /// Shared secret file [default: CLUSTER/secret, or $SLUICE_SECRET].
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
}

impl Conn {
    /// A connection by address, or by a `cluster up` directory.
    pub fn new(
        coordinator: Option<String>,
        cluster: Option<PathBuf>,
        secret_file: Option<PathBuf>,
    ) -> Conn {
        Conn {
            coordinator,
            cluster: cluster.unwrap_or_else(|| "sluice-cluster".into()),
            secret_file,
        }
    }
}

/// The shared secret in `file`, else in `$SLUICE_SECRET`.
pub fn secret(file: Option<&Path>) -> anyhow::Result<Secret> {
    if let Some(f) = file {
        return Ok(Secret::load(f)?);
    }
    match std::env::var("SLUICE_SECRET") {
        Ok(s) => Ok(Secret::new(s.as_bytes())?),
        Err(_) => bail!("no shared secret: pass --secret-file FILE or set SLUICE_SECRET"),
    }
}

/// A blocking client of the cluster of `conn`.
pub fn connect(conn: &Conn) -> anyhow::Result<BlockingClient> {
    let (addr, secret) = resolve(conn)?;
    Ok(BlockingClient::connect(&addr, secret)?)
}

/// The coordinator's address and the shared secret of a connection.
pub fn resolve(conn: &Conn) -> anyhow::Result<(String, Secret)> {
    let addr = match &conn.coordinator {
        Some(a) => a.clone(),
        None => {
            embedded::load(&conn.cluster)
                .with_context(|| {
                    format!(
                        "no --coordinator given and no cluster at {}",
                        conn.cluster.display()
                    )
                })?
                .coordinator
        }
    };
    let file = conn.secret_file.clone().or_else(|| {
        let f = conn.cluster.join("secret");
        (std::env::var_os("SLUICE_SECRET").is_none() && f.exists()).then_some(f)
    });
    Ok((addr, secret(file.as_deref())?))
}

/// Prints a running job's progress on stderr.
pub struct Progress;

impl sluice_driver::StatusWatch for Progress {
    fn status(&self, s: &sluice_proto::proto::JobStatus) {
        eprintln!(
            "{}: maps {}/{}, reduces {}/{}",
            JobId(s.job),
            s.maps_done,
            s.maps,
            s.reduces_done,
            s.reduces
        );
    }

    fn lost(&self, job: JobId, why: &str) {
        eprintln!("{job}: lost the coordinator ({why}); waiting for it");
    }
}

/// The cluster of `conn` as a target, the answer stored `replication`
/// times, with progress lines unless `quiet`.
pub fn target(
    conn: &Conn,
    replication: u32,
    quiet: bool,
) -> anyhow::Result<sluice_driver::ClusterTarget> {
    let (coordinator, secret) = resolve(conn)?;
    Ok(sluice_driver::ClusterTarget {
        coordinator,
        secret,
        replication,
        watch: (!quiet).then(|| Arc::new(Progress) as Arc<dyn sluice_driver::StatusWatch>),
    })
}

/// Runs `req`, a built-in job, on the cluster (its input and output are
/// data sets) quietly,
/// its answer stored `replication` times; the reports of its jobs in order.
pub fn submit_request(
    conn: &Conn,
    req: &sluice_request::JobRequest,
    replication: u32,
) -> anyhow::Result<Vec<JobReport>> {
    let target = target(conn, replication, true)?;
    Ok(sluice_driver::run(
        &Registry::builtin(),
        req,
        sluice_driver::Target::Cluster(&target),
    )?)
}

/// Removes data set `name` without a word.
pub fn remove(conn: &Conn, name: &str) -> anyhow::Result<()> {
    let c = connect(conn)?;
    Ok(c.remove(name)?)
}

/// Each live worker's utilization samples since `since` (Unix ms), by
/// worker address.
pub fn node_samples(conn: &Conn, since: u64) -> anyhow::Result<Vec<(String, Vec<Sample>)>> {
    let c = connect(conn)?;
    Ok(c.node_samples(since)?)
}

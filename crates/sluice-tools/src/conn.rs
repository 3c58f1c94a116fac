//! Where a command finds a cluster (`--coordinator`, `--cluster`,
//! `--secret-file`), and jobs run on it through the driver.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use sluice_client::{embedded, BlockingClient, Patience};
use sluice_driver::JobReport;
use sluice_proto::auth::Secret;
use sluice_proto::ids::JobId;
use sluice_proto::sample::Sample;
use sluice_request::Registry;

/// Where a client finds the cluster.
#[derive(Debug, Args, Clone)]
pub struct Conn {
    /// Coordinator address, or every coordinator's, comma-separated
    /// (`A,B`: the active one is followed) [default: those in
    /// CLUSTER/cluster.json].
    #[arg(long)]
    pub coordinator: Option<String>,
    /// Directory of a `sluice cluster up` cluster.
    #[arg(long, default_value = "sluice-cluster")]
    pub cluster: PathBuf,
    /// Shared secret file [default: CLUSTER/secret, or $SLUICE_SECRET].
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// Act as the user of this key file (`sluice user add` writes them)
    /// instead of as an admin with the cluster's secret [default:
    /// $SLUICE_USER_KEY].
    #[arg(long, value_name = "FILE")]
    pub user_key: Option<PathBuf>,
    /// How long to wait for a coordinator that does not answer (one
    /// restarting) before giving up: `60s`, `500ms`, `2m`, or seconds;
    /// `0` gives up at once.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub wait_coordinator: Duration,
    /// TLS: this client's certificate [default: CLUSTER/tls/client.*,
    /// plaintext when the cluster runs --insecure].
    #[command(flatten)]
    pub tls: crate::transport::TlsArgs,
}

/// A duration such as `60s`, `500ms`, `2m` or `1.5` (seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    let secs = num.parse::<f64>().map(|n| n * scale).unwrap_or(f64::NAN);
    if !(0.0..=1e9).contains(&secs) {
        return Err(format!(
            "invalid duration {s:?}: expected a number with an optional unit (ms, s, m, h)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
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
            user_key: None,
            wait_coordinator: Duration::from_secs(60),
            tls: Default::default(),
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

/// A blocking client of the cluster of `conn`; it waits for a
/// coordinator that does not answer as `--wait-coordinator` says.
pub fn connect(conn: &Conn) -> anyhow::Result<BlockingClient> {
    let (addr, secret) = resolve(conn)?;
    Ok(BlockingClient::connect_patient(
        &addr,
        secret,
        patience(conn),
    )?)
}

/// How a command waits for a coordinator that does not answer: up to
/// `--wait-coordinator`, saying so once on standard error.
pub fn patience(conn: &Conn) -> Patience {
    Patience::on_stderr(conn.wait_coordinator)
}

/// The coordinator's address and the shared secret of a connection;
/// sets this process's transport ([`install_transport`]).
pub fn resolve(conn: &Conn) -> anyhow::Result<(String, Secret)> {
    install_transport(conn)?;
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
    if let Some(key) = user_key_file(conn) {
        return Ok((addr, sluice_proto::users::load_key(&key)?));
    }
    let file = conn.secret_file.clone().or_else(|| {
        let f = conn.cluster.join("secret");
        (std::env::var_os("SLUICE_SECRET").is_none() && f.exists()).then_some(f)
    });
    Ok((addr, secret(file.as_deref())?))
}

/// Sets this process's transport as a client of `conn`'s cluster:
/// plaintext with `--insecure` or when its cluster.json says it runs
/// `--insecure`, else TLS with `--tls-dir` or CLUSTER/tls.
pub fn install_transport(conn: &Conn) -> anyhow::Result<()> {
    let mut t = conn.tls.clone();
    let file = embedded::load(&conn.cluster).ok();
    if file.as_ref().is_some_and(|f| f.insecure) && t.tls_dir.is_none() {
        t.insecure = true;
    }
    let default_dir = conn.cluster.join("tls");
    let default_dir = default_dir.join("ca.pem").exists().then_some(default_dir);
    t.install("client", default_dir.as_deref())
}

/// The user key file a connection signs with: `--user-key`, else
/// `$SLUICE_USER_KEY`; `None`: an admin's connection.
pub fn user_key_file(conn: &Conn) -> Option<PathBuf> {
    conn.user_key
        .clone()
        .or_else(|| std::env::var_os("SLUICE_USER_KEY").map(PathBuf::from))
        .filter(|p| !p.as_os_str().is_empty())
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
        patience: patience(conn),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_their_units_and_bad_ones_are_refused() {
        let ok = |s| parse_duration(s).unwrap();
        assert_eq!(ok("60s"), Duration::from_secs(60));
        assert_eq!(ok("60"), Duration::from_secs(60));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("1.5"), Duration::from_millis(1500));
        assert_eq!(ok("0"), Duration::ZERO);
        for bad in ["", "s", "-1s", "1 s", "1d", "1e3", "nan", "5sec"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("invalid duration"), "{bad:?}: {err}");
        }
    }
}

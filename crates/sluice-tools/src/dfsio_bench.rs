//! `sluice bench dfsio`: Hadoop's TestDFSIO on the local disk or a
//! cluster's block store.
//!
//! The write test runs map task `i` of `synthetic:N` to write file `i`;
//! the read test reads them back, checking every line. Each task times its
//! own I/O; as TestDFSIO does, the report gives the throughput (all bytes
//! over all tasks' I/O time), the average of the tasks' I/O rates and
//! their standard deviation, and the test's wall clock. On a cluster a
//! written file becomes a block when its task ends (stored, replicated):
//! that is in the wall clock, not in the tasks' I/O time.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use sluice_jobs::dfsio;
use sluice_request::{DfsioMode, DfsioParams, JobRequest};

use crate::conn::Conn;
use crate::units::parse_size;

/// The data set (cluster) or directory name (local) of the files.
const DATA: &str = "dfsio-data";
/// Where the read test's (empty) output goes, removed after.
const READ_OUT: &str = "dfsio-read";

#[derive(Debug, Args)]
pub struct DfsioBench {
    /// The write test.
    #[arg(long, required_unless_present = "read", conflicts_with = "read")]
    write: bool,
    /// The read test (of what the write test wrote).
    #[arg(long)]
    read: bool,
    /// Files, one map task each.
    #[arg(long, default_value_t = 4)]
    files: u64,
    /// Bytes of each file.
    #[arg(long, default_value = "128MB", value_parser = parse_size)]
    size: u64,
    /// Local test: the directory of the files (DIR/dfsio-data).
    #[arg(long, default_value = "TestDFSIO")]
    dir: PathBuf,
    /// Test a cluster's block store instead: the directory of a `sluice
    /// cluster up` cluster.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Test a cluster's block store instead: its coordinator.
    #[arg(long)]
    coordinator: Option<String>,
    /// Shared secret file, with a cluster.
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Replicas of each written block, on a cluster.
    #[arg(long, default_value_t = 1)]
    replication: u32,
}

impl DfsioBench {
    fn conn(&self) -> Option<Conn> {
        (self.cluster.is_some() || self.coordinator.is_some()).then(|| {
            Conn::new(
                self.coordinator.clone(),
                self.cluster.clone(),
                self.secret_file.clone(),
            )
        })
    }

    fn request(&self) -> JobRequest {
        let local = |name: &str| self.dir.join(name).display().to_string();
        let (on, mode) = (
            self.conn().is_some(),
            if self.read {
                DfsioMode::Read
            } else {
                DfsioMode::Write
            },
        );
        let name = |n: &str| if on { n.to_owned() } else { local(n) };
        let params = DfsioParams {
            mode,
            size: self.size,
            ..DfsioParams::default()
        };
        let (input, output) = match mode {
            DfsioMode::Write => (format!("synthetic:{}", self.files.max(1)), name(DATA)),
            DfsioMode::Read => (name(DATA), name(READ_OUT)),
        };
        let mut req = JobRequest::new("dfsio", &params, &input, &output);
        req.overwrite = true;
        // TestDFSIO reads each file in a map of its own.
        req.engine.combine = false;
        req
    }
}

/// Runs the test and prints TestDFSIO's report.
pub fn run(b: &DfsioBench) -> anyhow::Result<()> {
    let req = b.request();
    let t = Instant::now();
    let reports = match b.conn() {
        Some(conn) => crate::conn::submit_request(&conn, &req, b.replication)?,
        None => crate::local::run_request(&req)?,
    };
    let secs = t.elapsed().as_secs_f64();
    if b.read {
        match b.conn() {
            Some(conn) => crate::conn::remove(&conn, READ_OUT)?,
            None => std::fs::remove_dir_all(b.dir.join(READ_OUT))?,
        }
    }
    let r = reports
        .last()
        .ok_or_else(|| anyhow::anyhow!("the test ran no job"))?;
    let c = |name: &str| {
        r.user_counters
            .get(&format!("{}.{name}", dfsio::COUNTER_GROUP))
            .copied()
            .unwrap_or(0) as f64
    };
    let (tasks, bytes, micros) = (c(dfsio::TASKS), c(dfsio::BYTES), c(dfsio::MICROS));
    let mean = c(dfsio::RATE_SUM) / 1e6 / tasks.max(1.0);
    let sq = c(dfsio::RATE_SQ_SUM) / 1e6 / tasks.max(1.0);
    println!(
        "----- TestDFSIO ----- : {}",
        if b.read { "read" } else { "write" }
    );
    println!(
        "            Target: {}",
        if b.conn().is_some() {
            "cluster"
        } else {
            "local disk"
        }
    );
    println!("   Number of files: {tasks}");
    println!("Total MBytes processed: {:.2}", bytes / 1e6);
    println!(
        "     Throughput mb/sec: {:.2}",
        bytes / 1e6 / (micros / 1e6).max(1e-9)
    );
    println!("Average IO rate mb/sec: {mean:.2}");
    println!(
        " IO rate std deviation: {:.2}",
        (sq - mean * mean).max(0.0).sqrt()
    );
    println!("    Test exec time sec: {secs:.3}");
    Ok(())
}

//! `sluice cluster status`: each coordinator of a `cluster up` cluster
//! (of several, `coordinator K ADDR pid N active|standby|down`; of one,
//! its pid and its supervisor's restarts), the epoch, and the workers as
//! a tree of data centers and racks.

use std::path::Path;

use sluice_client::embedded;
use sluice_tools::conn::{connect, resolve, Conn};
use sluice_tools::units;

use crate::listing::Listing;

/// `sluice cluster status`'s flags: where the cluster is, by `--cluster`
/// as for any command, or by `--dir` as for `cluster up` and `down`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    conn: Conn,
    /// The `cluster up` directory (the same as --cluster).
    #[arg(long, conflicts_with = "cluster")]
    dir: Option<std::path::PathBuf>,
}

impl StatusArgs {
    /// The connection, `--dir` naming the cluster if given.
    pub(crate) fn conn(&self) -> Conn {
        let mut conn = self.conn.clone();
        if let Some(d) = &self.dir {
            conn.cluster = d.clone();
        }
        conn
    }
}

/// `sluice cluster status`: the coordinator, the epoch, the workers (a
/// reader that went away, `| head`, ends it quietly).
pub(crate) fn status(conn: &Conn) -> anyhow::Result<()> {
    let mut out = Listing::new();
    if conn.coordinator.is_none() {
        for line in coordinator_lines(conn)? {
            if !out.line(format_args!("{line}"))? {
                return Ok(());
            }
        }
    }
    let info = connect(conn)?.info()?;
    let tree = topology_tree(&info.workers);
    out.line(format_args!("epoch {}", info.epoch))?;
    for line in tree.lines() {
        if !out.line(format_args!("{line}"))? {
            break;
        }
    }
    Ok(())
}

/// The coordinators of a `cluster up` cluster: of several, a line each
/// (`coordinator K ADDR pid N active|standby|down`); of one, its pid and
/// whether and how often its supervisor started it again.
fn coordinator_lines(conn: &Conn) -> anyhow::Result<Vec<String>> {
    let dir = &conn.cluster;
    let Ok(f) = embedded::load(dir) else {
        return Ok(Vec::new());
    };
    if f.coordinators.is_empty() {
        return Ok(coordinator_line(dir).into_iter().collect());
    }
    let secret = resolve(conn)?.1;
    Ok((f.coordinators.iter().enumerate())
        .map(|(k, c)| {
            let role = embedded::role(c, &secret);
            format!(
                "coordinator {} {} pid {} {role}",
                k + 1,
                c.addr,
                c.pid_now()
            )
        })
        .collect())
}

/// The coordinator of a `cluster up` cluster of one: its pid, and
/// whether and how often its supervisor started it again.
fn coordinator_line(dir: &Path) -> Option<String> {
    let f = embedded::load(dir).ok()?;
    let Some(sup) = f.supervisor_pid else {
        let state = if embedded::alive(f.coordinator_pid) {
            "running"
        } else {
            "not running"
        };
        return Some(format!(
            "coordinator pid {} {state} (not supervised)",
            f.coordinator_pid
        ));
    };
    let s = embedded::SupervisorFile::load(dir).unwrap_or_default();
    let supervisor = if embedded::alive(sup) {
        format!("supervisor pid {sup}")
    } else {
        format!("supervisor pid {sup} not running")
    };
    let stopped = s.stopped.map(|w| format!("; {w}")).unwrap_or_default();
    Some(format!(
        "coordinator pid {} restarted {} times ({supervisor}{stopped})",
        s.coordinator_pid, s.restarts
    ))
}

/// The workers as a tree: data center, rack, then one line per worker.
pub fn topology_tree(workers: &[sluice_proto::proto::WorkerInfo]) -> String {
    use std::collections::BTreeMap;
    use std::fmt::Write;
    let mut tree: BTreeMap<&str, BTreeMap<&str, Vec<&sluice_proto::proto::WorkerInfo>>> =
        BTreeMap::new();
    for w in workers {
        let dc = tree.entry(&w.datacenter).or_default();
        dc.entry(&w.rack).or_default().push(w);
    }
    for ws in tree.values_mut().flat_map(BTreeMap::values_mut) {
        ws.sort_by(|a, b| (&a.host, a.id).cmp(&(&b.host, b.id)));
    }
    let mut out = String::new();
    for (dc, racks) in &tree {
        let _ = writeln!(out, "/{dc}");
        for (rack, ws) in racks {
            let _ = writeln!(out, "  /{dc}/{rack}");
            for w in ws {
                let _ = writeln!(
                    out,
                    "    /{dc}/{rack}/{}  worker {}  {}  {}  slots {}  memory {} ({} a task)  free {}  pid {}  {}",
                    w.host,
                    w.id,
                    w.uid,
                    w.data_addr,
                    w.slots,
                    units::human(w.memory),
                    units::human(sluice_proto::task_share(w.memory, w.slots)),
                    units::human(w.free_bytes),
                    w.pid,
                    if w.alive { "alive" } else { "lost" }
                );
            }
        }
    }
    out
}

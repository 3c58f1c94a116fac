//! The job commands: `jobs`, `jobs --json`, `history`, `pools`, `kill`.

use std::time::Duration;

use sluice_proto::ids::JobId;
use sluice_tools::conn::{connect, Conn};

use crate::listing::Listing;

/// `sluice jobs`.
pub fn jobs(conn: &Conn) -> anyhow::Result<()> {
    let c = connect(conn)?;
    for (s, what) in c.jobs()? {
        let pool = if s.pool.is_empty() { "-" } else { &s.pool };
        println!("{:<12} {:<10} {pool:<10} {what}", JobId(s.job), s.state);
        if s.state == "running" {
            let held = s.running_maps + s.running_reduces;
            let share = 100.0 * held as f64 / (2 * s.slots).max(1) as f64;
            println!(
                "{:<12} maps {}/{} done, reduces {}/{} done; holds {} map and {} reduce slots of {} each ({share:.0}%)",
                "",
                s.maps_done,
                s.maps,
                s.reduces_done,
                s.reduces,
                s.running_maps,
                s.running_reduces,
                s.slots
            );
        }
        if !s.error.is_empty() {
            println!("{:<12} {:<10} {}", "", "", s.error);
        }
    }
    Ok(())
}

/// `sluice jobs --json`: every job the coordinator remembers, as JSON
/// lines, each with its report when one is kept.
pub fn jobs_json(conn: &Conn) -> anyhow::Result<()> {
    let c = connect(conn)?;
    let mut out = Listing::new();
    for (s, what) in c.jobs()? {
        let report = if s.state == "running" {
            serde_json::Value::Null
        } else {
            let full = c.wait(JobId(s.job), Duration::ZERO)?;
            serde_json::from_str(&full.report_json).unwrap_or(serde_json::Value::Null)
        };
        let line = serde_json::json!({
            "job": JobId(s.job).to_string(),
            "state": s.state,
            "pool": s.pool,
            "user": s.user,
            "description": what,
            "error": s.error,
            "maps": s.maps,
            "maps_done": s.maps_done,
            "reduces": s.reduces,
            "reduces_done": s.reduces_done,
            "report": report,
        });
        if !out.line(format_args!("{line}"))? {
            break;
        }
    }
    Ok(())
}

/// `sluice history JOB`: the report the coordinator keeps of a job that
/// ended (the job history survives the coordinator's restarts).
pub fn history(job: JobId, conn: &Conn) -> anyhow::Result<()> {
    let s = connect(conn)?.wait(job, Duration::ZERO)?;
    anyhow::ensure!(
        s.state != "running",
        "{job} is still running (its report is written when it ends)"
    );
    anyhow::ensure!(
        !s.report_json.is_empty(),
        "{job} {} but its report is no longer kept (the history keeps the newest \
         --history reports)",
        s.state
    );
    Listing::new().line(format_args!("{}", s.report_json))?;
    Ok(())
}

/// `sluice pools`.
pub fn pools(reload: bool, conn: &Conn) -> anyhow::Result<()> {
    let l = connect(conn)?.pools(reload)?;
    println!(
        "scheduler {}; {} map and {} reduce slots",
        l.scheduler, l.map_slots, l.reduce_slots
    );
    for p in l.pools {
        println!(
            "pool {:<16} weight {:<5} min share {:<3} max share {:<5} {:<5} {} jobs, running {} maps, {} reduces",
            p.name,
            p.weight,
            p.min_share,
            p.max_share,
            p.mode,
            p.jobs,
            p.running_maps,
            p.running_reduces
        );
    }
    Ok(())
}

/// `sluice kill`.
pub fn kill(job: JobId, conn: &Conn) -> anyhow::Result<()> {
    let c = connect(conn)?;
    let s = c.kill(job)?;
    println!("{job} {}: {}", s.state, s.error);
    Ok(())
}

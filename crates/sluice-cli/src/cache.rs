//! `sluice cache`: the cluster's cache directives (seed 002's block cache,
//! directed as HDFS's centralized cache management is).

use clap::Subcommand;
use sluice_proto::proto;
use sluice_tools::conn::{connect, Conn};

use sluice_tools::units::human;

#[derive(Debug, Subcommand)]
pub enum CacheCmd {
    /// Keep a data set's blocks (or one of them) in memory on the workers
    /// holding them, pinned until removed.
    Add {
        /// The data set.
        dataset: String,
        /// Only this block (its index in the data set, from 0).
        #[arg(long)]
        block: Option<u32>,
        /// Cache on this worker (uid, or id as `cluster status` lists it)
        /// [default: one live holder of each block].
        #[arg(long)]
        worker: Option<String>,
        /// A label grouping directives, shown by `cache ls`.
        #[arg(long, default_value = "default")]
        pool: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a directive by id, or every directive of a data set.
    Rm {
        /// A directive id (as `cache ls` lists it) or a data set name.
        what: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The directives, and what each worker's cache holds.
    Ls(Conn),
}

/// `sluice cache ...`.
pub fn cache(cmd: &CacheCmd) -> anyhow::Result<()> {
    match cmd {
        CacheCmd::Add {
            dataset,
            block,
            worker,
            pool,
            conn,
        } => {
            let req = proto::CacheAddRequest {
                dataset: dataset.clone(),
                has_block: block.is_some(),
                block: block.unwrap_or(0),
                worker: worker.clone().unwrap_or_default(),
                pool: pool.clone(),
            };
            let d = connect(conn)?.cache_add(req)?;
            println!("cache directive {}: {}", d.id, describe(&d));
            Ok(())
        }
        CacheCmd::Rm { what, conn } => {
            let (id, dataset) = match what.parse::<u64>() {
                Ok(id) => (id, ""),
                Err(_) => (0, what.as_str()),
            };
            let n = connect(conn)?.cache_remove(id, dataset)?;
            println!(
                "removed {n} cache directive{}",
                if n == 1 { "" } else { "s" }
            );
            Ok(())
        }
        CacheCmd::Ls(conn) => ls(conn),
    }
}

/// What a directive asks.
fn describe(d: &proto::CacheDirective) -> String {
    let blocks = if d.has_block {
        format!("block {} of {}", d.block, d.dataset)
    } else {
        format!("every block of {}", d.dataset)
    };
    let on = if d.worker.is_empty() {
        "one holder each".to_owned()
    } else {
        format!("worker {}", d.worker)
    };
    format!("{blocks} on {on}, pool {}", d.pool)
}

fn ls(conn: &Conn) -> anyhow::Result<()> {
    let l = connect(conn)?.cache_list()?;
    if l.directives.is_empty() {
        println!("no cache directives");
    }
    for d in &l.directives {
        println!("directive {:<4} {}", d.id, describe(d));
    }
    for w in &l.workers {
        let (Some(info), Some(c)) = (&w.worker, &w.cache) else {
            continue;
        };
        let reads = c.hits + c.misses;
        let ratio = if reads > 0 {
            format!("{:.0}%", 100.0 * c.hits as f64 / reads as f64)
        } else {
            "-".into()
        };
        println!(
            "worker {:<3} {} ({}): {} blocks, {} of {} ({}), {} pinned; {} hits, {} misses \
             ({ratio}), {} evicted",
            info.id,
            info.uid,
            info.data_addr,
            c.blocks.len(),
            human(c.used),
            human(c.capacity),
            if c.policy.is_empty() { "-" } else { &c.policy },
            c.pinned.len(),
            c.hits,
            c.misses,
            c.evicted
        );
        for b in &c.blocks {
            let pin = if c.pinned.contains(b) {
                " (pinned)"
            } else {
                ""
            };
            println!("  {b}{pin}");
        }
    }
    Ok(())
}

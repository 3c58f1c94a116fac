//! `sluice`: generate data, run MapReduce jobs, report what happened.
//!
//! The binary is [`main_with`] over Sluice's built-in jobs. A user's own
//! binary is the same command line with more jobs registered:
//!
//! ```no_run
//! let mut jobs = sluice_request::Registry::builtin();
//! jobs.register_fn("my-job", "what it does", |_req| {
//!     Ok(sluice_jobs::wordcount(Default::default()))
//! });
//! sluice_cli::main_with(jobs);
//! ```
//!
//! `sluice cluster up` started from that binary runs it as the cluster's
//! coordinator and workers, so they build the user's jobs too.

mod args;
mod cache;
mod cluster;
mod demo;
mod jobs;
mod listing;
mod request;
mod run;
mod sim;
mod status;
mod streaming;
mod summary;
mod supervise;
mod task_user;
mod users;
mod yarn;

use sluice_tools::{
    convert, datagen as gen, index, model, pavlo_bench as bench, teravalidate, units,
};

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use args::{RunArgs, JOBS};

/// Sluice: a MapReduce engine that runs jobs at the speed the hardware allows.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a data set.
    Gen {
        #[command(subcommand)]
        kind: gen::GenKind,
    },
    /// Run a job on the local engine.
    Run(RunArgs),
    /// Run a benchmark against peers on the same files, answers checked.
    Bench {
        #[command(subcommand)]
        kind: sim::BenchCmd,
    },
    /// Generate a small text data set, count its words, and show the result.
    Demo(demo::DemoArgs),
    /// Hadoop Streaming: any commands as mapper, combiner and reducer
    /// (`-input -output -mapper [-combiner] [-reducer CMD|NONE] [-file F]
    /// [-numReduceTasks N] [-D k=v] [--cluster DIR]`, Hadoop's spellings).
    Streaming {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Check TeraSort output: records in key order across parts, and the
    /// same records as the input (count and checksum).
    Teravalidate(teravalidate::ValidateArgs),
    /// Convert Rankings or UserVisits text into binary records in a paged file.
    Convert(convert::ConvertArgs),
    /// Sort a delimited data set on a key and write a range index over it.
    Index(index::IndexArgs),
    /// Measure disk, memory and network bandwidth and save a hardware profile.
    Probe(model::ProbeArgs),
    /// The ideal time of a job from its hardware (Krevat et al.'s model).
    Model(model::ModelArgs),
    /// Start or stop a local cluster, or show its workers.
    Cluster {
        #[command(subcommand)]
        cmd: cluster::ClusterCmd,
    },
    /// Make a cluster's certificate authority, or issue a process its
    /// certificate (TLS 1.3 with mutual authentication).
    Ca {
        #[command(subcommand)]
        cmd: sluice_tools::transport::CaCmd,
    },
    /// Run a cluster coordinator.
    Coordinator(cluster::CoordinatorArgs),
    /// Run a cluster worker.
    Worker(cluster::WorkerArgs),
    /// Store a file or directory on the cluster as a data set.
    Put(cluster::PutArgs),
    /// List the cluster's data sets, or one data set's blocks and where
    /// their replicas are.
    Ls {
        /// A data set whose blocks to list.
        name: Option<String>,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// List the cluster's jobs: running, succeeded, failed and killed (with why).
    Jobs {
        /// One JSON object a line, each with the job's report when kept.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// Print the report of a job that ended, from the coordinator's job
    /// history (kept across its restarts).
    History {
        /// The job's id, as `sluice jobs` lists it (`job-1-17`).
        job: sluice_proto::ids::JobId,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// Print the address of the cluster's web pages with their token.
    Web {
        /// The web pages' address [default: the one in CLUSTER/cluster.json].
        #[arg(long)]
        http: Option<String>,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// Show the scheduler's pools and their use (`sluice pools reload`:
    /// read the coordinator's pools file again first).
    Pools {
        /// `reload`: read the coordinator's pools file again first.
        #[arg(value_parser = ["reload"])]
        action: Option<String>,
        /// The same as `reload`.
        #[arg(long)]
        reload: bool,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// Keep data sets' blocks in the workers' memory (cache directives),
    /// and show what the caches hold.
    Cache {
        #[command(subcommand)]
        cmd: cache::CacheCmd,
    },
    /// Add, remove and list the cluster's users (admins only).
    User {
        #[command(subcommand)]
        cmd: users::UserCmd,
    },
    /// Let users (or every user) read a data set (its owner or an admin).
    Share(users::ShareArgs),
    /// Take back what `sluice share` granted.
    Unshare(users::ShareArgs),
    /// End a running job on the cluster: its tasks' results are dropped,
    /// its temporary files removed, and it is recorded killed.
    Kill {
        /// The job's id, as `sluice jobs` lists it (`job-1-17`).
        job: sluice_proto::ids::JobId,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// Copy a data set out of the cluster.
    Get {
        /// Data set name.
        name: String,
        /// Output file (one-file data sets) or directory.
        out: PathBuf,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// Remove a data set and its blocks.
    Rm {
        /// Data set name.
        name: String,
        #[command(flatten)]
        conn: cluster::Conn,
    },
    /// Run a job on the cluster: the job and flags of `sluice run`, with
    /// data sets as --input and --output.
    Submit(cluster::SubmitArgs),
    /// A Sluice cluster as a YARN application (`up`, `status`, `down`).
    Yarn {
        #[command(subcommand)]
        cmd: yarn::YarnCmd,
    },
}

/// Runs the `sluice` command line with `jobs` as the jobs it knows: `run`,
/// `submit`, and a cluster's coordinator and workers build jobs from them.
/// Exits the process.
pub fn main_with(jobs: sluice_request::Registry) -> ! {
    pin_mmap_threshold();
    let _ = JOBS.set(Arc::new(jobs));
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Coordinator(_) | Command::Worker(_)) {
        cluster::init_logs("warn");
    }
    let r = match cli.command {
        Command::Gen { kind } => gen::run(kind),
        Command::Run(args) => run::run(&args).map(|_| ()),
        Command::Bench {
            kind: sim::BenchCmd::Other(bench::BenchKind::Coordinator(b)),
        } => coordinator_bench(&b),
        Command::Bench { kind } => sim::bench(kind),
        Command::Demo(args) => demo::run(&args),
        Command::Streaming { args } => streaming::run(&args),
        Command::Index(args) => index::index(&args).map(|r| {
            if !args.quiet {
                summary::print_summary(&r.into());
            }
        }),
        Command::Convert(args) => convert::convert(&args),
        Command::Teravalidate(args) => teravalidate::validate(&args),
        Command::Probe(args) => model::probe(&args),
        Command::Model(args) => model::model(&args),
        Command::Cluster { cmd } => cluster::cluster(&cmd),
        Command::Ca { cmd } => sluice_tools::transport::ca(&cmd),
        Command::Coordinator(a) => cluster::run_coordinator(&a),
        Command::Worker(a) => cluster::run_worker(&a),
        Command::Put(a) => cluster::put(&a),
        Command::Ls { name: None, conn } => cluster::ls(&conn),
        Command::Ls {
            name: Some(name),
            conn,
        } => cluster::ls_blocks(&name, &conn),
        Command::Jobs { json: false, conn } => jobs::jobs(&conn),
        Command::Jobs { json: true, conn } => jobs::jobs_json(&conn),
        Command::History { job, conn } => jobs::history(job, &conn),
        Command::Web { http, conn } => cluster::web(http.as_deref(), &conn),
        Command::Pools {
            action,
            reload,
            conn,
        } => jobs::pools(reload || action.is_some(), &conn),
        Command::Kill { job, conn } => jobs::kill(job, &conn),
        Command::Cache { cmd } => cache::cache(&cmd),
        Command::User { cmd } => users::user(&cmd),
        Command::Share(a) => users::share(&a, false),
        Command::Unshare(a) => users::share(&a, true),
        Command::Get { name, out, conn } => cluster::get(&name, &out, &conn),
        Command::Rm { name, conn } => cluster::rm(&name, &conn),
        Command::Submit(a) => cluster::submit(&a).map(|_| ()),
        Command::Yarn { cmd } => yarn::yarn(&cmd),
    };
    if let Err(e) = r {
        eprintln!("error: {}", describe(&e));
        std::process::exit(1);
    }
    std::process::exit(0)
}

/// Pins glibc's mmap threshold at 2 MiB and its trim threshold at 4 MiB.
/// glibc raises the mmap threshold each time a large mapped block is
/// freed, after which large buffers come from heaps it rarely gives back:
/// a job that spills its hash table and builds the next one then holds
/// both in resident memory (word count over 20 million distinct words
/// peaked at 1.7x its `--memory`). With the threshold fixed, buffers of
/// 2 MiB and more (tables, sort buffers) are mapped when allocated and
/// unmapped when freed, so resident memory follows what the job holds.
/// Not lower: a Parquet reader allocates each page's bytes, compressed and
/// decompressed (about 1 MiB each), afresh; mapped, every page cost a
/// page fault per 4 KiB (a third of a Parquet join's time). From a heap
/// they reuse the same memory, of which at most the trim threshold stays
/// free on top of each heap. No allocator crate offers these switches
/// alone; they are glibc's `mallopt`, hence the one unsafe block.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn pin_mmap_threshold() {
    // SAFETY: mallopt only sets allocator parameters; it is called
    // before this process starts any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 2 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn pin_mmap_threshold() {}

/// The error and its causes, leaving out a cause whose text the message
/// before it already includes.
fn describe(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !msg.contains(&text) {
            if !msg.is_empty() {
                msg.push_str(": ");
            }
            msg.push_str(&text);
        }
    }
    msg
}

/// `sluice bench coordinator`: the catalog's change cost and heartbeat
/// handling as the metadata grows ([`sluice_coordinator::bench`]).
fn coordinator_bench(b: &bench::CoordinatorBench) -> anyhow::Result<()> {
    use sluice_coordinator::bench as cb;
    let _ = std::fs::remove_dir_all(&b.work);
    std::fs::create_dir_all(&b.work)?;
    let c = cb::catalog(&b.work, b.blocks, b.changes)?;
    let _ = std::fs::remove_dir_all(&b.work);
    println!(
        "catalog of {} blocks ({} as a checkpoint): a change through the edit log {:.3} ms \
         (median of {}), a whole rewrite {:.1} ms: {:.0}x",
        c.blocks,
        units::human(c.checkpoint_bytes),
        c.logged.as_secs_f64() * 1e3,
        b.changes,
        c.rewritten.as_secs_f64() * 1e3,
        c.rewritten.as_secs_f64() / c.logged.as_secs_f64().max(1e-9)
    );
    for tasks in [(b.tasks / 100).max(1), b.tasks] {
        let h = cb::heartbeats(tasks);
        println!(
            "job of {:>7} maps: {} heartbeats, median {:.1} us, worst {:.1} us, \
             at most {} candidates looked at in one",
            h.tasks,
            h.beats,
            h.median.as_secs_f64() * 1e6,
            h.worst.as_secs_f64() * 1e6,
            h.most_candidates
        );
    }
    Ok(())
}

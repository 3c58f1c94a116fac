//! The flags of `sluice run`, which `sluice submit` and the commands
//! that run jobs themselves (demo) parse too, and the jobs this binary
//! knows.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use clap::{Args, Parser, Subcommand};
use sluice_tools::units;

/// `sluice run ARGS` alone, as the whole command line parses it.
#[derive(Debug, Parser)]
#[command(name = "sluice")]
struct RunLine {
    #[command(subcommand)]
    command: RunCommand,
}

#[derive(Debug, Subcommand)]
enum RunCommand {
    /// Run a job on the local engine.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The job to run: a built-in one (wordcount, grep, sort, terasort,
    /// pavlo-grep, pavlo-selection, pavlo-agg-large, pavlo-agg-small,
    /// pavlo-join, pavlo-udf, ohb, gen) or one this binary registered.
    pub(crate) job: String,
    /// A user property for the job, `-D key=value` (repeatable).
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub(crate) define: Vec<String>,
    /// The job's parameters as JSON, instead of its flags.
    #[arg(long)]
    pub(crate) params: Option<String>,
    /// Input files, directories or globs (comma-separated).
    #[arg(long)]
    pub(crate) input: String,
    /// Output directory (must not exist unless --overwrite).
    #[arg(long)]
    pub(crate) output: PathBuf,
    /// Worker threads [default: all cores].
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Memory budget for the whole job [default: 1GiB]. On a cluster, the
    /// most each task may use; each gets at most its worker's share
    /// (the worker's --memory shared by its slots), and a job asking more
    /// than any worker gives is refused.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) memory: Option<u64>,
    /// Reduce partitions (part files) [default: threads].
    #[arg(long)]
    pub(crate) reducers: Option<u32>,
    /// Write the JSON report to this file.
    #[arg(long)]
    pub(crate) report: Option<PathBuf>,
    /// Replace an existing output directory.
    #[arg(long)]
    pub(crate) overwrite: bool,
    /// The job's parameters as flags, each job taking its own.
    #[command(flatten)]
    pub(crate) job_flags: sluice_request::JobFlags,
    /// Longest input record accepted.
    #[arg(long, default_value = "64MiB", value_parser = units::parse_size)]
    pub(crate) max_record_size: u64,
    /// Split size: files are cut into splits of this size (locally), and
    /// small splits or blocks are packed several to a map task up to it
    /// [default: locally about eight splits per thread, 8-64 MiB; on a
    /// cluster the block size, capped at the input over the map slots, and
    /// at least 4 MiB].
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) split_size: Option<u64>,
    /// Give every split (locally) or block (on a cluster) a map task of its
    /// own, as Hadoop's TextInputFormat: small files are not packed several
    /// to a task up to the split size (CombineFileInputFormat's way, the
    /// default).
    #[arg(long)]
    pub(crate) no_combine: bool,
    /// Directory for spill files [default: inside the job's staging directory].
    #[arg(long)]
    pub(crate) spill_dir: Option<PathBuf>,
    /// Most spill runs merged at once [default: as many as the memory
    /// budget holds a 64 KiB block for, 64 to 256].
    #[arg(long)]
    pub(crate) merge_factor: Option<usize>,
    /// Bytes each map thread sorts before it spills a run, as Hadoop's
    /// mapreduce.task.io.sort.mb [default: from the machine's caches, or
    /// more when the input would make more runs than one merge reads].
    /// Local runs only.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) sort_buffer: Option<u64>,
    /// What to do with malformed records.
    #[arg(long, value_enum, default_value = "fail")]
    pub(crate) bad_records: sluice_request::BadRecords,
    /// Hardware profile for the model [default: $SLUICE_HARDWARE or ~/.sluice/hardware.json].
    #[arg(long)]
    pub(crate) hardware: Option<PathBuf>,
    /// Print no summary (errors still go to stderr).
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

impl RunArgs {
    /// The arguments `sluice run ARGS...` would parse, every other flag at
    /// its command-line default: one source of defaults for the commands
    /// that run jobs themselves (demo, bench).
    pub(crate) fn parse(args: &[String]) -> anyhow::Result<RunArgs> {
        let argv = ["sluice".to_owned(), "run".to_owned()]
            .into_iter()
            .chain(args.iter().cloned());
        let RunCommand::Run(r) = RunLine::try_parse_from(argv)?.command;
        Ok(r)
    }
}

/// The jobs of this binary.
pub(crate) static JOBS: OnceLock<Arc<sluice_request::Registry>> = OnceLock::new();

/// The jobs this binary runs (the built-in ones unless [`crate::main_with`] was
/// given more).
pub(crate) fn jobs() -> Arc<sluice_request::Registry> {
    JOBS.get_or_init(|| Arc::new(sluice_request::Registry::builtin()))
        .clone()
}

//! `sluice run`.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_api::{JobSpec, KeyOrder};
use sluice_engine::{run_job_on, BadRecordPolicy, EngineConfig, JobReport, Phase, Progress};
use sluice_formats::index::{index_dir, KeyType, RangeIndex};
use sluice_formats::input::{self, RecordFormat, Split};
use sluice_jobs::{pavlo, Grouping};

use crate::summary::{bar, print_summary};
use crate::{
    BadRecordsArg, GroupingArg, InputFormat, JobName, JoinForm, JoinStage, KeyOrderArg, RunArgs,
};

/// Samples per split for the sort job's range partitioner.
const SORT_SAMPLES_PER_SPLIT: usize = 100;

/// Runs the job (three jobs for the baseline join) and returns the reports.
pub fn run(args: &RunArgs) -> anyhow::Result<Vec<JobReport>> {
    let cfg = config(args);
    let reports = if args.is_join(JoinForm::Baseline) {
        join_baseline(args, &cfg)?
    } else {
        let (job, cfg, input) = build_job(args, cfg)?;
        let (name, splits) = match input {
            Some(given) => given,
            None => (args.input.clone(), input_splits(args, &cfg)?),
        };
        vec![run_one(
            &job,
            &name,
            &splits,
            &args.output,
            &cfg,
            args.quiet,
        )?]
    };
    if let Some(path) = &args.report {
        let json = match reports.as_slice() {
            [one] => one.to_json(),
            many => serde_json::to_string_pretty(many)?,
        };
        std::fs::write(path, json).with_context(|| format!("writing report {}", path.display()))?;
    }
    if !args.quiet {
        reports.iter().for_each(print_summary);
    }
    Ok(reports)
}

pub(crate) fn config(args: &RunArgs) -> EngineConfig {
    let mut cfg = EngineConfig::default();
    if let Some(t) = args.threads {
        cfg.threads = t;
    }
    cfg.reducers = args.reducers.unwrap_or(cfg.threads.max(1) as u32);
    cfg.memory = args.memory.unwrap_or(crate::DEFAULT_MEMORY);
    cfg.max_record = usize::try_from(args.max_record_size).unwrap_or(usize::MAX);
    cfg.split_size = args.split_size;
    cfg.spill_dir = args.spill_dir.clone();
    cfg.merge_factor = args.merge_factor;
    cfg.overwrite = args.overwrite;
    cfg.hardware = Some(crate::model::load_hardware(args.hardware.as_deref()));
    cfg.bad_records = match args.bad_records {
        BadRecordsArg::Fail => BadRecordPolicy::Fail,
        BadRecordsArg::Skip => BadRecordPolicy::Skip,
    };
    cfg
}

/// Splits of an input, planned as the engine does.
pub fn plan(input: &str, cfg: &EngineConfig) -> anyhow::Result<Vec<Split>> {
    if let Some(n) = input::synthetic_count(input)? {
        return Ok((0..n).map(Split::synthetic).collect());
    }
    let files = input::resolve(input)?;
    let total = input::total_len(&files);
    Ok(input::plan_splits(
        &files,
        cfg.split_size_for(total),
        cfg.format,
    ))
}

/// Low and high normalized keys, each unbounded when `None`.
type KeyRange<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The splits to read: only the chunks a range index says can match, when
/// the input is an indexed data set and the job has a predicate on its key;
/// else all of the input.
fn input_splits(args: &RunArgs, cfg: &EngineConfig) -> anyhow::Result<Vec<Split>> {
    let Some(dir) = index_dir(&args.input) else {
        return plan(&args.input, cfg);
    };
    let idx = RangeIndex::load(&dir)?;
    let from_rank = KeyType::int_key(args.threshold.saturating_add(1));
    let range: Option<KeyRange<'_>> = match (args.job, idx.field, idx.key_type) {
        (JobName::PavloJoin, 2, KeyType::Text) => {
            Some((Some(pavlo::JOIN_FROM), Some(pavlo::JOIN_TO)))
        }
        (JobName::PavloSelection, 1, KeyType::Int) => Some((Some(&from_rank), None)),
        _ => None,
    };
    match range {
        Some((lo, hi)) => Ok(idx.splits(&dir, lo, hi)?),
        None => plan(&args.input, cfg),
    }
}

fn hash_grouping(args: &RunArgs) -> bool {
    args.grouping == GroupingArg::Hash
}

/// The key order asked for, else `default`.
fn key_order(args: &RunArgs, default: KeyOrder) -> KeyOrder {
    match args.key_order {
        Some(KeyOrderArg::Bytewise) => KeyOrder::Bytewise,
        Some(KeyOrderArg::Fingerprint) => KeyOrder::Fingerprint,
        None => default,
    }
}

/// Hash-grouped aggregations whose answer has no order compare 32-bit
/// fingerprints when they sort their distinct keys at a spill and merge,
/// instead of keys with long common prefixes (URLs, IPs); the sort path
/// keeps bytewise order, where hashing every record would cost more.
fn unordered_default(args: &RunArgs) -> KeyOrder {
    if hash_grouping(args) {
        KeyOrder::Fingerprint
    } else {
        KeyOrder::Bytewise
    }
}

/// The input encoding a Pavlo task reads; paged input also sets the record
/// format.
fn encoding(args: &RunArgs, cfg: &mut EngineConfig) -> anyhow::Result<pavlo::Encoding> {
    Ok(match args.input_format {
        InputFormat::Text => pavlo::Encoding::Text,
        InputFormat::Paged => {
            let page = usize::try_from(args.page_size).context("--page-size")?;
            anyhow::ensure!(page >= 64, "--page-size must be at least 64 bytes");
            cfg.format = RecordFormat::Paged(page);
            pavlo::Encoding::Paged
        }
    })
}

/// An input other than `--input`: its name and splits.
type Input = Option<(String, Vec<Split>)>;

/// The job for `args`, the configuration adjusted for it, and the input when
/// it is not `--input`.
pub(crate) fn build_job(
    args: &RunArgs,
    mut cfg: EngineConfig,
) -> anyhow::Result<(JobSpec, EngineConfig, Input)> {
    let paged_ok = matches!(
        args.job,
        JobName::PavloSelection | JobName::PavloAggLarge | JobName::PavloAggSmall
    );
    anyhow::ensure!(
        args.input_format == InputFormat::Text || paged_ok,
        "--input-format paged is for pavlo-selection, pavlo-agg-large and pavlo-agg-small"
    );
    let job = match args.job {
        JobName::Wordcount => {
            let grouping = if hash_grouping(args) {
                Grouping::Hash
            } else {
                Grouping::Sort
            };
            sluice_jobs::wordcount(grouping).key_order(key_order(args, KeyOrder::Bytewise))
        }
        JobName::Grep => {
            let pattern = args
                .pattern
                .as_deref()
                .context("grep needs --pattern REGEX")?;
            sluice_jobs::grep(pattern).with_context(|| format!("invalid --pattern '{pattern}'"))?
        }
        JobName::Sort => {
            anyhow::ensure!(
                args.key_order.is_none_or(|k| k == KeyOrderArg::Bytewise),
                "sort needs --key-order bytewise: its output is a total order"
            );
            match given_splits(args)? {
                Some(p) => sluice_jobs::sort_by(p),
                None => sluice_jobs::sort(sample(args, &cfg)?, cfg.reducers),
            }
        }
        JobName::Terasort => {
            cfg.format = RecordFormat::Fixed(sluice_gen::TERA_RECORD);
            match given_splits(args)? {
                Some(p) => sluice_jobs::tera::terasort_by(p),
                None => {
                    let keys = tera_sample(&plan(&args.input, &cfg)?, &cfg)?;
                    sluice_jobs::tera::terasort(keys, cfg.reducers)
                }
            }
        }
        JobName::PavloGrep => {
            pavlo::grep(args.pattern.as_deref().unwrap_or(sluice_gen::GREP_PATTERN))
        }
        JobName::PavloSelection => pavlo::selection(args.threshold, encoding(args, &mut cfg)?),
        JobName::PavloAggLarge => {
            pavlo::aggregation(None, hash_grouping(args), encoding(args, &mut cfg)?)
                .key_order(key_order(args, unordered_default(args)))
        }
        JobName::PavloAggSmall => {
            pavlo::aggregation(Some(7), hash_grouping(args), encoding(args, &mut cfg)?)
                .key_order(key_order(args, unordered_default(args)))
        }
        JobName::Ohb => ohb_job(args)?,
        JobName::Gen => gen_job(args)?,
        JobName::PavloUdf => pavlo::udf().key_order(key_order(args, KeyOrder::Fingerprint)),
        JobName::PavloJoin => match args.join_stage {
            Some(stage) => {
                let (job, one) = join_stage(stage);
                if one {
                    cfg.reducers = 1;
                }
                job
            }
            None => {
                cfg.reducers = 1;
                let (job, input) = fast_join(args, &cfg)?;
                return Ok((job, cfg, input));
            }
        },
    };
    Ok((job, cfg, None))
}

/// The split points of `--split-points`, if given.
fn given_splits(args: &RunArgs) -> anyhow::Result<Option<sluice_api::RangePartitioner>> {
    let Some(hex) = &args.split_points else {
        return Ok(None);
    };
    let points = hex
        .split(',')
        .filter(|p| !p.is_empty())
        .map(from_hex)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let reducers = args.reducers.unwrap_or(1) as usize;
    anyhow::ensure!(
        points.len() < reducers.max(1),
        "--split-points gives {} points for {reducers} reducers (at most reducers - 1)",
        points.len()
    );
    Ok(Some(sluice_api::RangePartitioner::new(points)))
}

/// Split points as `--split-points` takes them.
pub(crate) fn split_points_arg(p: &sluice_api::RangePartitioner) -> String {
    p.splits()
        .iter()
        .map(|k| k.iter().map(|b| format!("{b:02x}")).collect::<String>())
        .collect::<Vec<_>>()
        .join(",")
}

fn from_hex(s: &str) -> anyhow::Result<Vec<u8>> {
    anyhow::ensure!(
        s.len().is_multiple_of(2),
        "--split-points: odd-length hex {s:?}"
    );
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&s[i..i + 2], 16)
                .map_err(|_| anyhow::anyhow!("--split-points: bad hex {s:?}"))
        })
        .collect()
}

/// TeraSort's sample: the keys of the first records of each split.
pub(crate) fn tera_sample(splits: &[Split], cfg: &EngineConfig) -> anyhow::Result<Vec<Vec<u8>>> {
    Ok(sample_splits(splits, cfg)?
        .into_iter()
        .map(|mut r| {
            r.truncate(sluice_gen::TERA_KEY);
            r
        })
        .collect())
}

/// The generator job; its input must be one synthetic map per part.
fn gen_job(args: &RunArgs) -> anyhow::Result<JobSpec> {
    let json = args
        .gen_spec
        .as_deref()
        .context("gen needs --gen-spec JSON")?;
    let spec: sluice_gen::GenSpec =
        serde_json::from_str(json).context("--gen-spec is not a generator description")?;
    let parts = spec.parts();
    anyhow::ensure!(
        input::synthetic_count(&args.input)? == Some(parts as usize),
        "gen makes {parts} parts: give --input synthetic:{parts}"
    );
    Ok(sluice_jobs::generate::generate(&spec)?)
}

/// The OHB shuffle micro-benchmark job; its input must be synthetic.
fn ohb_job(args: &RunArgs) -> anyhow::Result<JobSpec> {
    use sluice_jobs::ohb::{OhbSpec, PairType, Pattern};
    anyhow::ensure!(
        input::synthetic_count(&args.input)?.is_some(),
        "ohb reads no files: give --input synthetic:MAPS"
    );
    let name = args.pattern.as_deref().unwrap_or("avg");
    let pattern = Pattern::from_name(name)
        .with_context(|| format!("ohb --pattern is avg, rand or skew, not {name:?}"))?;
    let spec = OhbSpec {
        pattern,
        reduces: args.reducers.unwrap_or(1),
        pairs_per_map: args.pairs_per_map,
        pair_size: usize::try_from(args.pair_size).context("--pair-size")?,
        kind: match args.pair_type {
            crate::PairTypeArg::Bytes => PairType::Bytes,
            crate::PairTypeArg::Text => PairType::Text,
        },
        seed: args.seed,
    };
    spec.validate()?;
    Ok(sluice_jobs::ohb::ohb(spec))
}

/// The fast join, with its hash table built on the smaller side: the
/// week's visits when a range index pruned UserVisits below the size of
/// Rankings (then the job scans Rankings), else Rankings.
fn fast_join(args: &RunArgs, cfg: &EngineConfig) -> anyhow::Result<(JobSpec, Input)> {
    let rankings = args
        .rankings
        .as_deref()
        .context("pavlo-join needs --rankings PATH")?;
    let rank_splits = plan(rankings, cfg)?;
    let visit_splits = input_splits(args, cfg)?;
    let bytes = |s: &[Split]| s.iter().map(Split::len).sum::<u64>();
    if bytes(&visit_splits) < bytes(&rank_splits) {
        let table = pavlo::visit_table(&visit_splits, cfg.max_record)?;
        let job = pavlo::join_fast_by_visits(Arc::new(table));
        return Ok((job, Some((rankings.to_owned(), rank_splits))));
    }
    let table = pavlo::rank_table(&rank_splits, cfg.max_record)?;
    Ok((
        pavlo::join_fast(Arc::new(table)),
        Some((args.input.clone(), visit_splits)),
    ))
}

/// The three jobs of the baseline join, through hidden directories beside
/// the output that are removed afterwards.
fn join_baseline(args: &RunArgs, cfg: &EngineConfig) -> anyhow::Result<Vec<JobReport>> {
    let rankings = args
        .rankings
        .as_deref()
        .context("pavlo-join needs --rankings PATH")?;
    let tmp = TempDir::beside(&args.output, "join")?;
    let (filtered, aggregated) = (tmp.0.join("filtered"), tmp.0.join("aggregated"));
    let both = format!("{rankings},{}", args.input);
    let mut reports = vec![run_one(
        &pavlo::join_filter(),
        &both,
        &plan(&both, cfg)?,
        &filtered,
        cfg,
        true,
    )?];
    let input = filtered.display().to_string();
    reports.push(run_one(
        &pavlo::join_aggregate(),
        &input,
        &plan(&input, cfg)?,
        &aggregated,
        cfg,
        true,
    )?);
    let input = aggregated.display().to_string();
    let mut last = cfg.clone();
    last.reducers = 1;
    reports.push(run_one(
        &pavlo::join_top(),
        &input,
        &plan(&input, cfg)?,
        &args.output,
        &last,
        args.quiet,
    )?);
    Ok(reports)
}

/// The job of one stage of the baseline join, and whether it takes a
/// single reducer.
fn join_stage(stage: JoinStage) -> (JobSpec, bool) {
    match stage {
        JoinStage::Filter => (pavlo::join_filter(), false),
        JoinStage::Aggregate => (pavlo::join_aggregate(), false),
        JoinStage::Top => (pavlo::join_top(), true),
    }
}

/// A hidden directory beside a path, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn beside(path: &Path, what: &str) -> anyhow::Result<Self> {
        let name = path
            .file_name()
            .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
        let dir = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(format!(".{name}.{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs one job with a progress bar.
pub fn run_one(
    job: &JobSpec,
    input: &str,
    splits: &[Split],
    output: &Path,
    cfg: &EngineConfig,
    quiet: bool,
) -> anyhow::Result<JobReport> {
    let progress = Arc::new(Progress::default());
    Ok(with_progress(&progress, quiet, || {
        run_job_on(job, input, splits, output, cfg, &progress)
    })?)
}

/// Samples input lines for the sort job's split points.
fn sample(args: &RunArgs, cfg: &EngineConfig) -> anyhow::Result<Vec<Vec<u8>>> {
    if cfg.reducers <= 1 {
        return Ok(Vec::new());
    }
    sample_splits(&plan(&args.input, cfg)?, cfg)
}

/// The sort's sample: the first records of each split.
pub(crate) fn sample_splits(splits: &[Split], cfg: &EngineConfig) -> anyhow::Result<Vec<Vec<u8>>> {
    Ok(sluice_engine::sample_records(
        splits,
        cfg.format,
        cfg.max_record,
        SORT_SAMPLES_PER_SPLIT,
    )?)
}

/// Runs `f` while a progress bar (on a terminal only) follows `progress`.
fn with_progress<T>(progress: &Arc<Progress>, quiet: bool, f: impl FnOnce() -> T) -> T {
    let pb = bar(0, "map");
    if quiet {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watcher = {
        let (progress, pb) = (progress.clone(), pb.clone());
        std::thread::spawn(move || loop {
            update(&pb, &progress);
            // Wakes at once when the job ends and the sender is dropped.
            if finished.recv_timeout(Duration::from_millis(100)) != Err(RecvTimeoutError::Timeout) {
                return;
            }
        })
    };
    let r = f();
    drop(done);
    let _ = watcher.join();
    pb.finish_and_clear();
    r
}

fn update(pb: &indicatif::ProgressBar, p: &Progress) {
    let (len, pos, msg) = match p.phase() {
        Phase::Setup | Phase::Map => (
            p.input_total.load(Ordering::Relaxed),
            p.input_done.load(Ordering::Relaxed),
            "map",
        ),
        Phase::Merge => (1, 0, "merge"),
        Phase::Reduce | Phase::Commit | Phase::Done => (
            p.partitions_total.load(Ordering::Relaxed),
            p.partitions_done.load(Ordering::Relaxed),
            "reduce",
        ),
    };
    pb.set_length(len);
    pb.set_position(pos);
    pb.set_message(msg);
}

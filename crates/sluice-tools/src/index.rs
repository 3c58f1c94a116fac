//! `sluice index`: sort a delimited data set on a key and write a range
//! index over it.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use sluice_engine::EngineConfig;
use sluice_formats::delimited::Decoder;
use sluice_formats::index::{chunk_file, KeyType, RangeIndex};
use sluice_formats::input::RecordFormat;
use sluice_jobs::index::{index_sort, line_key};

use crate::units::{human, parse_size};

/// Key types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyTypeArg {
    /// Bytes, compared bytewise.
    Text,
    /// Decimal integers, compared numerically.
    Int,
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Input files, directories or globs.
    #[arg(long)]
    pub input: String,
    /// Output directory: sorted part files and `_index`.
    #[arg(long)]
    pub output: PathBuf,
    /// The key field, counting from 0 (UserVisits' visitDate is 2, Rankings' pageRank 1).
    #[arg(long)]
    pub key_field: usize,
    /// How keys compare.
    #[arg(long, value_enum, default_value = "text")]
    pub key_type: KeyTypeArg,
    /// Bytes per index chunk.
    #[arg(long, default_value = "4MiB", value_parser = parse_size)]
    pub chunk_size: u64,
    /// Field delimiter.
    #[arg(long, default_value = "|")]
    pub delimiter: char,
    /// Sorted part files [default: threads].
    #[arg(long)]
    pub reducers: Option<u32>,
    /// Worker threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memory budget.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    pub memory: u64,
    /// Replace an existing output directory.
    #[arg(long)]
    pub overwrite: bool,
    /// Print no summary.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Samples per split for the range partitioner.
const SAMPLES_PER_SPLIT: usize = 100;

/// Sorts and indexes the input; returns the sort job's report.
pub fn index(a: &IndexArgs) -> anyhow::Result<sluice_engine::JobReport> {
    anyhow::ensure!(
        a.delimiter.is_ascii(),
        "--delimiter must be one ASCII character"
    );
    let delimiter = a.delimiter as u8;
    let key_type = match a.key_type {
        KeyTypeArg::Text => KeyType::Text,
        KeyTypeArg::Int => KeyType::Int,
    };
    let mut cfg = EngineConfig::default();
    if let Some(t) = a.threads {
        cfg.threads = t;
    }
    cfg.reducers = a.reducers.unwrap_or(cfg.threads as u32);
    cfg.memory = a.memory;
    cfg.overwrite = a.overwrite;
    let t = Instant::now();
    let splits = sluice_driver::plan(&a.input, &cfg)?;
    let mut dec = Decoder::new(delimiter);
    let sample: Vec<Vec<u8>> = sluice_engine::sample_records(
        &splits,
        RecordFormat::Lines,
        cfg.max_record,
        SAMPLES_PER_SPLIT,
    )?
    .iter()
    .filter_map(|l| line_key(&mut dec, l, a.key_field, key_type).ok())
    .collect();
    let job = index_sort(a.key_field, key_type, delimiter, sample, cfg.reducers);
    // The sorted parts and the index appear together or not at all: the job
    // commits into a staging directory, the index is written beside its
    // parts, and only then is the whole renamed to the output.
    let (report, n) = crate::datagen::write_atomically(&a.output, a.overwrite, |stage| {
        let sorted = stage.join(".sorted");
        let mut cfg = cfg.clone();
        cfg.overwrite = false;
        let report = crate::progress::run_spec(&job, &a.input, &splits, &sorted, &cfg, a.quiet)?;
        let mut files: Vec<String> = std::fs::read_dir(&sorted)?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("part-"))
            .collect();
        files.sort();
        for f in &files {
            std::fs::rename(sorted.join(f), stage.join(f))?;
        }
        std::fs::remove_dir_all(&sorted)?;
        let mut chunks = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let mut key = |line: &[u8]| line_key(&mut dec, line, a.key_field, key_type).ok();
            chunks.extend(chunk_file(
                &stage.join(f),
                i as u32,
                a.chunk_size,
                &mut key,
            )?);
        }
        let n = chunks.len();
        let index = RangeIndex {
            key_type,
            field: a.key_field as u32,
            delimiter,
            files,
            chunks,
        };
        index.save(stage).context("writing the index")?;
        Ok((report, n))
    })?;
    eprintln!(
        "indexed {} ({} records) on field {} into {n} chunks at {} in {:.2}s",
        human(report.input_bytes),
        report.output_records,
        a.key_field,
        a.output.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(report)
}

//! `sluice convert`: Rankings or UserVisits text into binary records in
//! paged files, one output part per input file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use sluice_formats::delimited::Decoder;
use sluice_formats::input::{plan_splits, resolve, RecordFormat};
use sluice_formats::paged::PagedWriter;
use sluice_formats::read::{read_split, ReadOptions};
use sluice_jobs::pavlo::binary::{encode_rankings, encode_uservisits};

use crate::units::{human, parse_size};

/// Row schemas with a binary form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Schema {
    /// `pageURL|pageRank|avgDuration`.
    Rankings,
    /// The nine UserVisits columns.
    Uservisits,
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Text input: files, directories or globs.
    #[arg(long)]
    pub input: String,
    /// Output directory of `part-NNNNN` paged files.
    #[arg(long)]
    pub output: PathBuf,
    /// The rows' schema.
    #[arg(long, value_enum)]
    pub schema: Schema,
    /// Page size.
    #[arg(long, default_value = "128KiB", value_parser = parse_size)]
    pub page_size: u64,
    /// Threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Replace a non-empty output directory.
    #[arg(long)]
    pub overwrite: bool,
}

pub fn convert(a: &ConvertArgs) -> anyhow::Result<()> {
    let files = resolve(&a.input)?;
    let page = usize::try_from(a.page_size).context("--page-size")?;
    let t = Instant::now();
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // Any file's failure fails the whole conversion before it is committed.
    let (rows, pages) = crate::datagen::write_atomically(&a.output, a.overwrite, |dir| {
        convert_all(a, &files, dir, page, threads)
            .into_iter()
            .try_fold((0, 0), |(rows, pages), r| {
                r.map(|(r, p)| (rows + r, pages + p))
            })
    })?;
    eprintln!(
        "converted {rows} rows into {pages} pages ({}) at {} in {:.2}s",
        human(pages * a.page_size),
        a.output.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Converts every file on `threads` threads into `dir`.
fn convert_all(
    a: &ConvertArgs,
    files: &[sluice_formats::input::InputFile],
    dir: &std::path::Path,
    page: usize,
    threads: usize,
) -> Vec<anyhow::Result<(u64, u64)>> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut total = (0, 0);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else {
                            return Ok(total);
                        };
                        let (rows, pages) = convert_file(
                            a,
                            std::slice::from_ref(f),
                            &dir.join(format!("part-{i:05}")),
                            page,
                        )?;
                        total = (total.0 + rows, total.1 + pages);
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("convert thread"))
            .collect()
    })
}

fn convert_file(
    a: &ConvertArgs,
    file: &[sluice_formats::input::InputFile],
    out: &std::path::Path,
    page: usize,
) -> anyhow::Result<(u64, u64)> {
    let mut w = PagedWriter::create(out, page)?;
    let mut dec = Decoder::new(b'|');
    let mut rec = Vec::new();
    let mut rows = 0;
    for split in plan_splits(file, u64::MAX, RecordFormat::Lines) {
        let path = split.file.path.clone();
        read_split::<anyhow::Error, _>(
            &split,
            RecordFormat::Lines,
            &ReadOptions::default(),
            |off, line| {
                let r = match a.schema {
                    Schema::Rankings => encode_rankings(&mut dec, line, &mut rec),
                    Schema::Uservisits => encode_uservisits(&mut dec, line, &mut rec),
                };
                r.map_err(|e| {
                    anyhow::anyhow!("{}: malformed row at offset {off}: {e}", path.display())
                })?;
                rows += 1;
                Ok(w.append(&rec)?)
            },
        )?;
    }
    Ok((rows, w.finish()?))
}

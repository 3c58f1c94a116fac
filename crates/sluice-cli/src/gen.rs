//! `sluice gen`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Subcommand;
use sluice_gen::{generate_text, prepare_dir, TextSpec};

use crate::summary::bar;
use crate::units::{human, parse_size};

#[derive(Debug, Subcommand)]
pub enum GenKind {
    /// Zipf-distributed words, 4-16 per line.
    Text {
        /// Total size.
        #[arg(long, value_parser = parse_size)]
        size: u64,
        /// Seed: the same seed and size give the same bytes.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Distinct words.
        #[arg(long, default_value_t = 100_000)]
        vocabulary: usize,
        /// Zipf exponent.
        #[arg(long, default_value_t = 1.0)]
        exponent: f64,
        /// Threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
        /// Replace a non-empty output directory.
        #[arg(long)]
        overwrite: bool,
    },
}

pub fn run(kind: GenKind) -> anyhow::Result<()> {
    let GenKind::Text {
        size,
        seed,
        out,
        vocabulary,
        exponent,
        threads,
        overwrite,
    } = kind;
    let mut spec = TextSpec {
        size,
        seed,
        vocabulary: vocabulary.max(1),
        exponent,
        ..TextSpec::default()
    };
    if let Some(t) = threads {
        spec.threads = t.max(1);
    }
    prepare_dir(&out, overwrite)?;
    let t = Instant::now();
    let pb = bar(size, "gen text");
    let sum = generate_text(&spec, &out, &|b| pb.inc(b))?;
    pb.finish_and_clear();
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "generated {} in {} files ({} lines) at {} in {:.2}s ({:.0} MB/s)",
        human(sum.bytes),
        sum.files,
        sum.records,
        out.display(),
        secs,
        sum.bytes as f64 / 1e6 / secs.max(1e-9)
    );
    Ok(())
}

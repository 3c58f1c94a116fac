//! Deterministic data generators.
//!
//! Output is a directory of part files, each generated from its own seed
//! derived from the user's seed and the part number, so the bytes depend on
//! the seed and size only, never on the number of threads.

mod graph;
mod kmeans;
mod parts;
mod pavlo;
mod tera;
mod text;

pub use graph::{generate_graph, graph_part, GraphSpec};
pub use kmeans::{generate_kmeans, kmeans_centres, kmeans_part, KmeansSpec, KMEANS_SIGMA};
pub use parts::{GenSpec, PartMaker};
pub use pavlo::{
    generate_pavlo, page_url, pavlo_part, source_ip_pool, PavloSet, PavloSpec, GREP_PATTERN,
};
pub use tera::{generate_tera, tera_part, tera_record, TERA_KEY, TERA_RECORD};
pub use text::{generate_text, text_part, TextSpec, Vocabulary};

use std::path::PathBuf;

use thiserror::Error;

/// Generator failures.
#[derive(Debug, Error)]
pub enum GenError {
    /// Writing a part file failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The output directory exists and is not empty.
    #[error("output directory {} is not empty (pass --overwrite to replace it)", .0.display())]
    NotEmpty(PathBuf),
}

/// What a generator wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenSummary {
    /// Part files written.
    pub files: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Records (lines) written.
    pub records: u64,
}

/// Runs `write(part)` for parts `0..parts` on `threads` threads (each takes
/// the next part number), calling `progress` with each part's bytes, and
/// sums what they wrote. `write` returns `(bytes, records)`.
pub fn generate_parts(
    parts: u64,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
    write: &(dyn Fn(u64) -> Result<(u64, u64), GenError> + Sync),
) -> Result<GenSummary, GenError> {
    let next = std::sync::atomic::AtomicU64::new(0);
    let results: Vec<Result<GenSummary, GenError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut sum = GenSummary::default();
                    loop {
                        let p = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if p >= parts {
                            return Ok(sum);
                        }
                        let (bytes, records) = write(p)?;
                        progress(bytes);
                        sum.add(&GenSummary {
                            files: 1,
                            bytes,
                            records,
                        });
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("generator thread"))
            .collect()
    });
    let mut total = GenSummary::default();
    for r in results {
        total.add(&r?);
    }
    Ok(total)
}

impl GenSummary {
    fn add(&mut self, o: &GenSummary) {
        self.files += o.files;
        self.bytes += o.bytes;
        self.records += o.records;
    }
}

/// Writes `bytes` to `path`, naming the file in any error.
pub(crate) fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), GenError> {
    let io = |e| GenError::Io {
        op: "writing",
        path: path.to_owned(),
        source: e,
    };
    std::io::Write::write_all(&mut std::fs::File::create(path).map_err(io)?, bytes).map_err(io)
}

/// Derives the seed of part `part` from the user's seed (SplitMix64 finalizer).
pub fn part_seed(seed: u64, part: u64) -> u64 {
    let mut z = seed ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Prepares `dir` for output: refuses a non-empty one unless `overwrite`.
pub fn prepare_dir(dir: &std::path::Path, overwrite: bool) -> Result<(), GenError> {
    let io = |op, e| GenError::Io {
        op,
        path: dir.to_owned(),
        source: e,
    };
    if dir.exists() {
        let non_empty = std::fs::read_dir(dir)
            .map_err(|e| io("reading", e))?
            .next()
            .is_some();
        if non_empty && !overwrite {
            return Err(GenError::NotEmpty(dir.to_owned()));
        }
        std::fs::remove_dir_all(dir).map_err(|e| io("removing", e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| io("creating", e))
}

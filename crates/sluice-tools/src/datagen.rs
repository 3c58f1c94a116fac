//! `sluice gen`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Subcommand;
use sluice_engine::commit::Committer;
use sluice_gen::{generate_pavlo, generate_text, GenSpec, PavloSet, PavloSpec, TextSpec};
use sluice_request::JobRequest;

use crate::conn::Conn;

use crate::progress::bar;
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
        #[command(flatten)]
        dest: Dest,
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
    /// Pavlo Grep: `key|field`, 10-byte unique keys, 90-byte fields, XYZ once per 10,000.
    Grep(PavloArgs),
    /// Pavlo Rankings: `pageURL|pageRank|avgDuration`.
    Rankings(PavloArgs),
    /// Pavlo UserVisits: nine columns; destURL drawn from Rankings' URLs.
    Uservisits(PavloArgs),
    /// Pavlo Documents: `url|html` pages linking to Rankings' URLs.
    Documents(PavloArgs),
    /// TeraGen records: 100 bytes: a 10-byte key, a 10-digit row id, 78 filler bytes, CR LF.
    Tera {
        /// Approximate size (100 bytes a record).
        #[arg(long, value_parser = parse_size, conflicts_with = "rows")]
        size: Option<u64>,
        /// Records.
        #[arg(long)]
        rows: Option<u64>,
        /// Seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[command(flatten)]
        dest: Dest,
        /// Threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
        /// Replace a non-empty output directory.
        #[arg(long)]
        overwrite: bool,
    },
    /// Points of Gaussian clusters for k-means (HiBench's generator): one
    /// point a line, coordinates separated by spaces.
    Kmeans {
        /// Points.
        #[arg(long)]
        points: u64,
        /// Dimensions.
        #[arg(long, default_value_t = 20)]
        dims: usize,
        /// Clusters the points are drawn around.
        #[arg(long, default_value_t = 10)]
        clusters: usize,
        /// Seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[command(flatten)]
        dest: Dest,
        /// Threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
        /// Replace a non-empty output directory.
        #[arg(long)]
        overwrite: bool,
    },
    /// A web graph for PageRank: `src TAB dst` edges, power-law in-degrees,
    /// a tenth of the pages dangling.
    Graph {
        /// Pages.
        #[arg(long)]
        pages: u64,
        /// Seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[command(flatten)]
        dest: Dest,
        /// Threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
        /// Replace a non-empty output directory.
        #[arg(long)]
        overwrite: bool,
    },
    /// All four Pavlo data sets into OUT/{grep,rankings,uservisits,documents}.
    Pavlo {
        /// Size of UserVisits; Rankings is 1/20 of it, Grep 1/37, Documents 1/20 (the seed's per-node ratios).
        #[arg(long, value_parser = parse_size)]
        scale: u64,
        /// Seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Output directory, or with --dataset the prefix NAME of the data
        /// sets NAME.grep, NAME.rankings, NAME.uservisits, NAME.documents.
        #[command(flatten)]
        dest: Dest,
        /// Threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
        /// Replace existing data.
        #[arg(long)]
        overwrite: bool,
    },
}

/// Where generated data goes: a local directory, or a data set made on a
/// cluster's workers (each generates its share of the parts).
#[derive(Debug, Clone, clap::Args)]
pub struct Dest {
    /// Output directory.
    #[arg(long, required_unless_present = "dataset", conflicts_with = "dataset")]
    out: Option<PathBuf>,
    /// Generate on the cluster's workers, as this data set.
    #[arg(long)]
    dataset: Option<String>,
    /// Coordinator address, with --dataset [default: from --cluster].
    #[arg(long, requires = "dataset")]
    coordinator: Option<String>,
    /// Directory of a `sluice cluster up` cluster, with --dataset.
    #[arg(long, requires = "dataset")]
    cluster: Option<PathBuf>,
    /// Shared secret file, with --dataset.
    #[arg(long, requires = "dataset")]
    secret_file: Option<PathBuf>,
}

impl Dest {
    fn conn(&self) -> Conn {
        Conn::new(
            self.coordinator.clone(),
            self.cluster.clone(),
            self.secret_file.clone(),
        )
    }
}

/// Generates `spec` on the cluster as data set `name`: a map-only job of
/// one synthetic map per part.
fn on_cluster(spec: &GenSpec, name: &str, dest: &Dest, overwrite: bool) -> anyhow::Result<()> {
    let t = Instant::now();
    let parts = spec.parts();
    let mut req = JobRequest::new("gen", spec, &format!("synthetic:{parts}"), name);
    req.overwrite = overwrite;
    let r = crate::conn::submit_request(&dest.conn(), &req, 1)?
        .pop()
        .context("the generator ran no job")?;
    let records = r.user_counters.get("GEN.RECORDS").copied().unwrap_or(0);
    eprintln!(
        "generated data set {name}: {} in {parts} files ({records} records) on {} workers in {:.2}s",
        human(r.output_bytes),
        r.cluster
            .as_ref()
            .map_or(0, |c| c.per_worker.iter().filter(|w| w.maps > 0).count()),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Options of one Pavlo data set.
#[derive(Debug, clap::Args)]
pub struct PavloArgs {
    /// Approximate size (turned into rows by the set's average row length).
    #[arg(long, value_parser = parse_size, conflicts_with = "rows")]
    size: Option<u64>,
    /// Rows.
    #[arg(long)]
    rows: Option<u64>,
    /// Seed; use the same seed for Rankings and the sets that link to it.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Rows of the Rankings set whose URLs UserVisits and Documents use
    /// [default: this set's rows x 18/155, the seed's ratio].
    #[arg(long)]
    rankings_rows: Option<u64>,
    #[command(flatten)]
    dest: Dest,
    /// Threads [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Replace a non-empty output directory.
    #[arg(long)]
    overwrite: bool,
}

pub fn run(kind: GenKind) -> anyhow::Result<()> {
    match kind {
        GenKind::Text {
            size,
            seed,
            dest,
            vocabulary,
            exponent,
            threads,
            overwrite,
        } => match (&dest.out, &dest.dataset) {
            (_, Some(name)) => {
                let spec = GenSpec::Text {
                    size,
                    seed,
                    vocabulary,
                    exponent,
                    part_size: TextSpec::default().part_size,
                };
                on_cluster(&spec, name, &dest, overwrite)
            }
            (Some(out), None) => text(
                size,
                seed,
                out.clone(),
                vocabulary,
                exponent,
                threads,
                overwrite,
            ),
            (None, None) => unreachable!("clap requires a destination"),
        },
        GenKind::Grep(a) => pavlo_set(PavloSet::Grep, &a),
        GenKind::Rankings(a) => pavlo_set(PavloSet::Rankings, &a),
        GenKind::Uservisits(a) => pavlo_set(PavloSet::UserVisits, &a),
        GenKind::Documents(a) => pavlo_set(PavloSet::Documents, &a),
        GenKind::Tera {
            size,
            rows,
            seed,
            dest,
            threads,
            overwrite,
        } => {
            let rows = match (rows, size) {
                (Some(r), _) => r,
                (None, Some(s)) => (s / sluice_gen::TERA_RECORD as u64).max(1),
                (None, None) => anyhow::bail!("give --size or --rows"),
            };
            match (&dest.out, &dest.dataset) {
                (_, Some(name)) => {
                    let spec = GenSpec::Tera {
                        rows,
                        seed,
                        rows_per_part: ROWS_PER_PART_BYTES / sluice_gen::TERA_RECORD as u64,
                    };
                    on_cluster(&spec, name, &dest, overwrite)
                }
                (Some(out), None) => tera(rows, seed, out, threads, overwrite),
                (None, None) => unreachable!("clap requires a destination"),
            }
        }
        GenKind::Kmeans {
            points,
            dims,
            clusters,
            seed,
            dest,
            threads,
            overwrite,
        } => {
            let spec = sluice_gen::KmeansSpec {
                points,
                dims,
                clusters,
                seed,
                // About ROWS_PER_PART_BYTES a part, at 10 bytes a coordinate.
                points_per_part: (ROWS_PER_PART_BYTES / (10 * dims.max(1) as u64)).max(1),
            };
            match (&dest.out, &dest.dataset) {
                (_, Some(name)) => on_cluster(&kmeans_gen_spec(&spec), name, &dest, overwrite),
                (Some(out), None) => kmeans(&spec, out, threads, overwrite),
                (None, None) => unreachable!("clap requires a destination"),
            }
        }
        GenKind::Graph {
            pages,
            seed,
            dest,
            threads,
            overwrite,
        } => {
            // About 100 bytes of edges a page: parts of ROWS_PER_PART_BYTES.
            let spec = sluice_gen::GraphSpec {
                pages,
                seed,
                pages_per_part: (ROWS_PER_PART_BYTES / 100).max(1),
            };
            match (&dest.out, &dest.dataset) {
                (_, Some(name)) => {
                    let g = GenSpec::Graph {
                        pages,
                        seed,
                        pages_per_part: spec.pages_per_part,
                    };
                    on_cluster(&g, name, &dest, overwrite)
                }
                (Some(out), None) => graph(&spec, out, threads, overwrite),
                (None, None) => unreachable!("clap requires a destination"),
            }
        }
        GenKind::Pavlo {
            scale,
            seed,
            dest,
            threads,
            overwrite,
        } => match (&dest.out, &dest.dataset) {
            (_, Some(prefix)) => {
                let rows = pavlo_rows(scale);
                for (set, n) in rows {
                    let spec = pavlo_spec(set, n, rows[0].1, seed, threads);
                    on_cluster(
                        &gen_spec(&spec),
                        &format!("{prefix}.{}", set.name()),
                        &dest,
                        overwrite,
                    )?;
                }
                Ok(())
            }
            (Some(out), None) => pavlo_all(scale, seed, out, threads, overwrite),
            (None, None) => unreachable!("clap requires a destination"),
        },
    }
}

/// The set's spec, parts of [`ROWS_PER_PART_BYTES`].
fn pavlo_spec(
    set: PavloSet,
    rows: u64,
    rankings_rows: u64,
    seed: u64,
    threads: Option<usize>,
) -> PavloSpec {
    PavloSpec {
        set,
        rows,
        rankings_rows,
        seed,
        rows_per_part: ROWS_PER_PART_BYTES / set.row_bytes(),
        threads: threads_or_all(threads),
    }
}

/// The same set as a [`GenSpec`].
fn gen_spec(p: &PavloSpec) -> GenSpec {
    GenSpec::Pavlo {
        set: p.set.name().to_owned(),
        rows: p.rows,
        rankings_rows: p.rankings_rows,
        seed: p.seed,
        rows_per_part: p.rows_per_part,
    }
}

fn tera(
    rows: u64,
    seed: u64,
    out: &Path,
    threads: Option<usize>,
    overwrite: bool,
) -> anyhow::Result<()> {
    let per_part = ROWS_PER_PART_BYTES / sluice_gen::TERA_RECORD as u64;
    let estimate = rows * sluice_gen::TERA_RECORD as u64;
    let (sum, secs) = write_parts(out, overwrite, estimate, "teragen", |dir, progress| {
        sluice_gen::generate_tera(rows, seed, per_part, threads_or_all(threads), dir, progress)
    })?;
    eprintln!(
        "generated {} records ({}) in {} files at {} in {secs:.2}s",
        sum.records,
        human(sum.bytes),
        sum.files,
        out.display(),
    );
    Ok(())
}

/// A k-means spec as a [`GenSpec`].
fn kmeans_gen_spec(k: &sluice_gen::KmeansSpec) -> GenSpec {
    GenSpec::Kmeans {
        points: k.points,
        dims: k.dims,
        clusters: k.clusters,
        seed: k.seed,
        points_per_part: k.points_per_part,
    }
}

fn kmeans(
    spec: &sluice_gen::KmeansSpec,
    out: &Path,
    threads: Option<usize>,
    overwrite: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        spec.dims > 0 && spec.clusters > 0,
        "k-means points need at least one dimension and one cluster"
    );
    let estimate = spec.points * 10 * spec.dims as u64;
    let (sum, secs) = write_parts(
        out,
        overwrite,
        estimate,
        "kmeans points",
        |dir, progress| sluice_gen::generate_kmeans(spec, threads_or_all(threads), dir, progress),
    )?;
    eprintln!(
        "generated {} points ({}) of {} dimensions around {} centres in {} files at {} in {secs:.2}s",
        sum.records,
        human(sum.bytes),
        spec.dims,
        spec.clusters,
        sum.files,
        out.display(),
    );
    Ok(())
}

fn graph(
    spec: &sluice_gen::GraphSpec,
    out: &Path,
    threads: Option<usize>,
    overwrite: bool,
) -> anyhow::Result<()> {
    let (sum, secs) = write_parts(
        out,
        overwrite,
        spec.pages * 100,
        "graph edges",
        |dir, progress| sluice_gen::generate_graph(spec, threads_or_all(threads), dir, progress),
    )?;
    eprintln!(
        "generated {} edges ({}) among {} pages in {} files at {} in {secs:.2}s",
        sum.records,
        human(sum.bytes),
        spec.pages,
        sum.files,
        out.display(),
    );
    Ok(())
}

/// Generates parts into `out` (atomically, refusing a non-empty directory
/// unless `overwrite`) with a progress bar of about `estimate` bytes;
/// returns what was written and the seconds it took.
fn write_parts(
    out: &Path,
    overwrite: bool,
    estimate: u64,
    label: &'static str,
    generate: impl FnOnce(
        &Path,
        &(dyn Fn(u64) + Sync),
    ) -> Result<sluice_gen::GenSummary, sluice_gen::GenError>,
) -> anyhow::Result<(sluice_gen::GenSummary, f64)> {
    let t = Instant::now();
    let pb = bar(estimate, label);
    let sum = write_atomically(out, overwrite, |dir| Ok(generate(dir, &|b| pb.inc(b))?))?;
    pb.finish_and_clear();
    Ok((sum, t.elapsed().as_secs_f64()))
}

fn threads_or_all(t: Option<usize>) -> usize {
    t.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

fn pavlo_set(set: PavloSet, a: &PavloArgs) -> anyhow::Result<()> {
    let rows = match (a.rows, a.size) {
        (Some(r), _) => r,
        (None, Some(s)) => (s / set.row_bytes()).max(1),
        (None, None) => anyhow::bail!("give --size or --rows"),
    };
    let rankings_rows = a.rankings_rows.unwrap_or((rows * 18 / 155).max(1));
    let spec = pavlo_spec(set, rows, rankings_rows, a.seed, a.threads);
    match (&a.dest.out, &a.dest.dataset) {
        (_, Some(name)) => on_cluster(&gen_spec(&spec), name, &a.dest, a.overwrite),
        (Some(out), None) => write_pavlo(&spec, out, a.overwrite),
        (None, None) => unreachable!("clap requires a destination"),
    }
}

/// Bytes per part file of the Pavlo sets.
const ROWS_PER_PART_BYTES: u64 = 64 << 20;

/// Row counts of the four sets for a UserVisits size, in the seed's
/// proportions (UserVisits 20 GB : Rankings 1 GB : Grep 535 MB per node).
pub fn pavlo_rows(scale: u64) -> [(PavloSet, u64); 4] {
    let uv = (scale / PavloSet::UserVisits.row_bytes()).max(1);
    let rankings = (uv * 18 / 155).max(1);
    [
        (PavloSet::Rankings, rankings),
        (PavloSet::UserVisits, uv),
        (
            PavloSet::Grep,
            (scale / 37 / PavloSet::Grep.row_bytes()).max(1),
        ),
        (
            PavloSet::Documents,
            (scale / 20 / PavloSet::Documents.row_bytes()).max(1),
        ),
    ]
}

/// Generates all four sets under `out`; skips sets already there unless
/// `overwrite`.
pub fn pavlo_all(
    scale: u64,
    seed: u64,
    out: &Path,
    threads: Option<usize>,
    overwrite: bool,
) -> anyhow::Result<()> {
    let rows = pavlo_rows(scale);
    let rankings_rows = rows[0].1;
    for (set, n) in rows {
        let dir = out.join(set.name());
        if !overwrite && dir.join("part-00000").exists() {
            continue;
        }
        write_pavlo(
            &pavlo_spec(set, n, rankings_rows, seed, threads),
            &dir,
            true,
        )?;
    }
    Ok(())
}

/// Runs `write` on a staging directory beside `out` and renames it to
/// `out` (with `_SUCCESS`) only when it succeeds, so a failed or killed
/// generator leaves no partial data set. A non-empty `out` is refused
/// unless `overwrite`.
pub fn write_atomically<T>(
    out: &Path,
    overwrite: bool,
    write: impl FnOnce(&Path) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let empty = std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_none());
    if out.exists() && !empty && !overwrite {
        anyhow::bail!(
            "output directory {} is not empty (pass --overwrite to replace it)",
            out.display()
        );
    }
    let committer = Committer::create(out, true)?;
    let r = write(committer.stage())?;
    committer.commit_job()?;
    Ok(r)
}

fn write_pavlo(spec: &PavloSpec, out: &Path, overwrite: bool) -> anyhow::Result<()> {
    let t = Instant::now();
    let pb = bar(spec.rows * spec.set.row_bytes(), spec.set.name());
    let sum = write_atomically(out, overwrite, |dir| {
        Ok(generate_pavlo(spec, dir, &|b| pb.inc(b))?)
    })?;
    pb.finish_and_clear();
    eprintln!(
        "generated {} {} rows ({}) in {} files at {} in {:.2}s",
        sum.records,
        spec.set.name(),
        human(sum.bytes),
        sum.files,
        out.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn text(
    size: u64,
    seed: u64,
    out: PathBuf,
    vocabulary: usize,
    exponent: f64,
    threads: Option<usize>,
    overwrite: bool,
) -> anyhow::Result<()> {
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
    let t = Instant::now();
    let pb = bar(size, "gen text");
    let sum = write_atomically(&out, overwrite, |dir| {
        Ok(generate_text(&spec, dir, &|b| pb.inc(b))?)
    })?;
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

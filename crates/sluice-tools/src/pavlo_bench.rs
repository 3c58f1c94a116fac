//! `sluice bench pavlo`: every Pavlo task on Sluice and on DuckDB over the
//! same generated files, answers compared, one table.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use sluice_api::TaskCounter;

use crate::convert::{ConvertArgs, Schema};
use crate::index::{IndexArgs, KeyTypeArg};
use crate::units::parse_size;
use sluice_request::{
    AggParams, GrepParams, JobRequest, JoinForm, JoinParams, PagedInput, SelectionParams,
};

#[derive(Debug, Subcommand)]
pub enum BenchKind {
    /// The Pavlo benchmark: grep, selection, aggregations, join (both forms), UDF.
    Pavlo(PavloBench),
    /// The OSU HiBD shuffle micro-benchmarks: MR-AVG, MR-RAND, MR-SKEW.
    Ohb(crate::ohb_bench::OhbBench),
    /// TestDFSIO: N files of a size written, or read back and checked,
    /// through the local disk or a cluster's block store.
    Dfsio(crate::dfsio_bench::DfsioBench),
    /// The coordinator's costs as metadata grows, in process: a catalog
    /// change with a large catalog (edit log against a whole rewrite), and
    /// heartbeats of a job of many maps.
    Coordinator(CoordinatorBench),
    /// Mutable vs allocating decoders, text and binary (seed 000's experiment).
    Decoders {
        /// Rankings rows.
        #[arg(long, default_value_t = 8_000_000)]
        rankings: u64,
        /// UserVisits rows.
        #[arg(long, default_value_t = 4_000_000)]
        uservisits: u64,
        /// Runs of each decoder.
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
}

#[derive(Debug, Args)]
pub struct CoordinatorBench {
    /// Blocks in the catalog.
    #[arg(long, default_value_t = 1_000_000)]
    pub blocks: u64,
    /// Catalog changes timed.
    #[arg(long, default_value_t = 200)]
    pub changes: usize,
    /// Maps of the job whose heartbeats are timed (and a hundredth of it).
    #[arg(long, default_value_t = 100_000)]
    pub tasks: usize,
    /// Working directory for the state directory.
    #[arg(long, default_value = "bench-results/coordinator")]
    pub work: PathBuf,
}

#[derive(Debug, Args)]
pub struct PavloBench {
    /// Size of UserVisits (the other sets follow the seed's proportions).
    #[arg(long, default_value = "200MB", value_parser = parse_size)]
    scale: u64,
    /// Working directory for data and outputs.
    #[arg(long, default_value = "bench-results/pavlo")]
    work: PathBuf,
    /// Threads for Sluice and DuckDB.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Runs of each task; the table shows medians.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Python with the duckdb package [default: $SLUICE_PYTHON, else .venv/bin/python, else python3].
    #[arg(long)]
    python: Option<PathBuf>,
    /// Memory budget for Sluice.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    memory: u64,
}

/// One task of the table.
struct Task {
    label: &'static str,
    job: &'static str,
    set: &'static str,
    join: JoinForm,
    paged: bool,
}

const TASKS: [Task; 12] = [
    task("grep", "pavlo-grep", "grep", JoinForm::Fast),
    task("selection", "pavlo-selection", "rankings", JoinForm::Fast),
    task(
        "selection (indexed)",
        "pavlo-selection",
        "rankings-by-rank",
        JoinForm::Fast,
    ),
    paged("selection (paged)", "pavlo-selection", "rankings-paged"),
    task("agg-large", "pavlo-agg-large", "uservisits", JoinForm::Fast),
    paged("agg-large (paged)", "pavlo-agg-large", "uservisits-paged"),
    task("agg-small", "pavlo-agg-small", "uservisits", JoinForm::Fast),
    paged("agg-small (paged)", "pavlo-agg-small", "uservisits-paged"),
    task("join (fast)", "pavlo-join", "uservisits", JoinForm::Fast),
    task(
        "join (fast, indexed)",
        "pavlo-join",
        "uservisits-by-date",
        JoinForm::Fast,
    ),
    task(
        "join (baseline)",
        "pavlo-join",
        "uservisits",
        JoinForm::Baseline,
    ),
    task("udf", "pavlo-udf", "documents", JoinForm::Fast),
];

const fn task(label: &'static str, job: &'static str, set: &'static str, join: JoinForm) -> Task {
    Task {
        label,
        job,
        set,
        join,
        paged: false,
    }
}

const fn paged(label: &'static str, job: &'static str, set: &'static str) -> Task {
    Task {
        label,
        job,
        set,
        join: JoinForm::Fast,
        paged: true,
    }
}

/// One row of the result table.
struct Row {
    label: &'static str,
    rows_in: u64,
    rows_out: u64,
    sluice: f64,
    mb_s: f64,
    duckdb: f64,
    ok: Result<(), String>,
}

pub fn run(kind: BenchKind) -> anyhow::Result<()> {
    let b = match kind {
        BenchKind::Pavlo(b) => b,
        BenchKind::Ohb(b) => return crate::ohb_bench::run(&b),
        BenchKind::Dfsio(b) => return crate::dfsio_bench::run(&b),
        BenchKind::Coordinator(_) => {
            anyhow::bail!("the coordinator benchmark runs from the sluice binary")
        }
        BenchKind::Decoders {
            rankings,
            uservisits,
            runs,
        } => {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            println!(
                "{}",
                crate::decoders::bench(rankings, uservisits, runs, threads)?
            );
            return Ok(());
        }
    };
    let data = b.work.join(format!("data-{}", b.scale));
    crate::datagen::pavlo_all(b.scale, 7, &data, Some(b.threads), false)?;
    let index_note = build_indexes(&b, &data)?;
    let python = crate::python::interpreter(b.python.as_deref());
    let mut rows = Vec::new();
    for task in &TASKS {
        rows.push(run_task(&b, task, &data, &python)?);
    }
    let mut table = render(&b, &rows);
    table.push_str(&index_note);
    println!("{table}");
    std::fs::write(b.work.join("pavlo.md"), &table)?;
    let bad: Vec<_> = rows
        .iter()
        .filter(|r| r.ok.is_err())
        .map(|r| r.label)
        .collect();
    anyhow::ensure!(
        bad.is_empty(),
        "WRONG ANSWERS against DuckDB: {}",
        bad.join(", ")
    );
    Ok(())
}

/// Sorts UserVisits on visitDate and Rankings on pageRank with range
/// indexes, unless already there; returns a note of the build times.
fn build_indexes(b: &PavloBench, data: &Path) -> anyhow::Result<String> {
    let mut note = String::from("\nRange indexes (built once, not in the task times):");
    for (set, out, field, key_type) in [
        ("uservisits", "uservisits-by-date", 2, KeyTypeArg::Text),
        ("rankings", "rankings-by-rank", 1, KeyTypeArg::Int),
    ] {
        let dir = data.join(out);
        if dir.join(sluice_formats::index::INDEX_FILE).exists() {
            note.push_str(&format!(" {set} on field {field} already built;"));
            continue;
        }
        let t = Instant::now();
        crate::index::index(&IndexArgs {
            input: data.join(set).display().to_string(),
            output: dir,
            key_field: field,
            key_type,
            chunk_size: 1 << 20,
            delimiter: '|',
            reducers: None,
            threads: Some(b.threads),
            memory: b.memory,
            overwrite: true,
            quiet: true,
        })?;
        note.push_str(&format!(
            " {set} on field {field} in {:.2} s;",
            t.elapsed().as_secs_f64()
        ));
    }
    for (set, schema) in [
        ("uservisits", Schema::Uservisits),
        ("rankings", Schema::Rankings),
    ] {
        let dir = data.join(format!("{set}-paged"));
        if dir.join("part-00000").exists() {
            continue;
        }
        crate::convert::convert(&ConvertArgs {
            input: data.join(set).display().to_string(),
            output: dir,
            schema,
            page_size: 128 << 10,
            threads: Some(b.threads),
            overwrite: true,
        })?;
    }
    note.push('\n');
    Ok(note)
}

/// The job request of `task` over the generated data.
fn request(b: &PavloBench, task: &Task, data: &Path, out: &Path) -> JobRequest {
    let paged = task.paged.then_some(PagedInput {
        page_size: 128 << 10,
    });
    let params = match task.job {
        "pavlo-grep" => to_value(GrepParams::default()),
        "pavlo-selection" => to_value(SelectionParams {
            paged,
            ..SelectionParams::default()
        }),
        "pavlo-agg-large" | "pavlo-agg-small" => to_value(AggParams {
            paged,
            ..AggParams::default()
        }),
        "pavlo-join" => to_value(JoinParams {
            rankings: Some(data.join("rankings").display().to_string()),
            form: task.join,
            stage: None,
        }),
        _ => serde_json::Value::Null,
    };
    let mut r = JobRequest::new(
        task.job,
        &params,
        &data.join(task.set).display().to_string(),
        &out.display().to_string(),
    );
    r.engine.threads = Some(b.threads);
    r.memory = Some(b.memory);
    r.overwrite = true;
    r
}

fn to_value(p: impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(p).unwrap_or_default()
}

fn run_task(b: &PavloBench, task: &Task, data: &Path, python: &Path) -> anyhow::Result<Row> {
    let out = b.work.join(format!(
        "out-{}",
        task.label.replace([' ', '(', ')', ','], "")
    ));
    let req = request(b, task, data, &out);
    let mut times = Vec::new();
    let mut reports = Vec::new();
    for _ in 0..b.runs.max(1) {
        let t = Instant::now();
        reports = crate::local::run_request(&req)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let answer = b.work.join("duckdb.tsv");
    let duck = duckdb(python, task, data, &answer, b)?;
    let first = reports.first().context("no report")?;
    let last = reports.last().context("no report")?;
    let sluice = median(&mut times);
    Ok(Row {
        label: task.label,
        rows_in: first.counter(TaskCounter::MapInputRecords),
        rows_out: last.output_records,
        sluice,
        mb_s: reports
            .first()
            .map_or(0.0, |r| r.input_bytes as f64 / 1e6 / sluice),
        duckdb: duck,
        ok: compare(&read_sluice(&out)?, &read_duckdb(&answer)?),
    })
}

fn duckdb(
    python: &Path,
    task: &Task,
    data: &Path,
    answer: &Path,
    b: &PavloBench,
) -> anyhow::Result<f64> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/pavlo_duckdb.py");
    let job = task.job;
    let o = Command::new(python)
        .arg(&script)
        .args([
            "--task",
            job,
            "--threads",
            &b.threads.to_string(),
            "--runs",
            &b.runs.max(1).to_string(),
        ])
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(answer)
        .output()
        .with_context(|| {
            format!(
                "running {} (install DuckDB with bench/setup.sh)",
                python.display()
            )
        })?;
    anyhow::ensure!(
        o.status.success(),
        "DuckDB oracle failed ({}): {}",
        python.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)?;
    let mut times: Vec<f64> = v["times"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_f64())
        .collect();
    Ok(median(&mut times))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Rows of an answer as fields: Sluice's `key<TAB>a|b` and DuckDB's
/// `key<TAB>a<TAB>b` both become `[key, a, b]`.
type Rows = Vec<Vec<String>>;

fn read_sluice(out: &Path) -> anyhow::Result<Rows> {
    let mut rows = Vec::new();
    for ent in std::fs::read_dir(out)? {
        let p = ent?.path();
        if !p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("part-"))
        {
            continue;
        }
        for line in std::fs::read_to_string(&p)?.lines() {
            let (k, v) = line.split_once('\t').unwrap_or((line, ""));
            let mut row = vec![k.to_owned()];
            row.extend(v.split('|').map(str::to_owned));
            rows.push(row);
        }
    }
    rows.sort();
    Ok(rows)
}

fn read_duckdb(path: &Path) -> anyhow::Result<Rows> {
    let text = std::fs::read_to_string(path)?;
    let mut rows: Rows = text
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect();
    rows.sort();
    Ok(rows)
}

/// Fields equal as text, or as numbers within a relative 1e-9 (float sums
/// depend on the order of addition).
fn same(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => false,
    }
}

fn compare(sluice: &Rows, duck: &Rows) -> Result<(), String> {
    if sluice.len() != duck.len() {
        return Err(format!("{} rows, DuckDB {}", sluice.len(), duck.len()));
    }
    for (a, b) in sluice.iter().zip(duck) {
        if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| !same(x, y)) {
            return Err(format!("row {a:?} differs from DuckDB's {b:?}"));
        }
    }
    Ok(())
}

fn render(b: &PavloBench, rows: &[Row]) -> String {
    let mut s = format!(
        "Pavlo benchmark, UserVisits {} MB, {} threads, median of {} (times include reading input and writing the answer)\n\n",
        b.scale / 1_000_000,
        b.threads,
        b.runs
    );
    s.push_str("| task | rows in | rows out | Sluice s | Sluice MB/s | DuckDB s | DuckDB / Sluice | answer |\n");
    s.push_str("|---|---:|---:|---:|---:|---:|---:|---|\n");
    for r in rows {
        let check = match &r.ok {
            Ok(()) => "same as DuckDB".to_owned(),
            Err(e) => format!("WRONG: {e}"),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.0} | {:.3} | {:.2}x | {} |\n",
            r.label,
            r.rows_in,
            r.rows_out,
            r.sluice,
            r.mb_s,
            r.duckdb,
            r.duckdb / r.sluice,
            check
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[&[&str]]) -> Rows {
        v.iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    #[test]
    fn answers_compare_with_a_float_tolerance_and_nothing_else() {
        let a = rows(&[&["1.2.3.4", "10.5", "2"]]);
        assert!(compare(&a, &rows(&[&["1.2.3.4", "10.500000000001", "2.0"]])).is_ok());
        assert!(compare(&a, &rows(&[&["1.2.3.4", "10.6", "2"]])).is_err());
        assert!(compare(&a, &rows(&[&["1.2.3.5", "10.5", "2"]])).is_err());
        assert!(compare(&a, &rows(&[&["1.2.3.4", "10.5"]])).is_err());
        assert!(compare(&a, &rows(&[]))
            .unwrap_err()
            .contains("1 rows, DuckDB 0"));
    }
}

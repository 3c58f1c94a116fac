//! Input formats other than plain text, each checked against files other
//! tools wrote: compressed text from the `bzip2`, `zstd` and `lz4`
//! commands.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{concat_parts, fails, ok, read_json, rounded_lines, sluice, wordcount};

/// One text file of about `size` (generated text, its parts concatenated).
fn text_file(dir: &Path, size: &str) -> PathBuf {
    let parts = dir.join("gen");
    ok(sluice()
        .args(["gen", "text", "--size", size, "--seed", "9", "--out"])
        .arg(&parts)
        .output()
        .unwrap());
    let file = dir.join("words.txt");
    let mut all = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&parts)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(['_', '.'])
        })
        .collect();
    names.sort();
    for p in names {
        all.extend(std::fs::read(p).unwrap());
    }
    std::fs::write(&file, all).unwrap();
    file
}

/// `tool args... FILE` made `out` from `file` (`-c`: to standard output).
fn compress(tool: &str, args: &[&str], file: &Path, out: &Path) {
    let o = Command::new(tool).args(args).arg(file).output().unwrap();
    ok(o.clone());
    std::fs::write(out, o.stdout).unwrap();
}

#[test]
fn compressed_text_from_the_command_line_tools_counts_as_the_plain_text() {
    let d = tempfile::tempdir().unwrap();
    let text = text_file(d.path(), "3MB");
    let (want, _) = wordcount(d.path(), "plain", &text, &[]);
    assert!(!want.is_empty());
    let cases: [(&str, &str, &[&str]); 4] = [
        ("bzip2", "bz2", &["-1", "-c"]),
        ("zstd", "zst", &["-q", "-c"]),
        ("lz4", "lz4", &["-q", "-c"]),
        ("gzip", "gz", &["-c"]),
    ];
    for (tool, ext, args) in cases {
        let file = d.path().join(format!("words.txt.{ext}"));
        compress(tool, args, &text, &file);
        let (got, report) = wordcount(d.path(), ext, &file, &["--split-size", "64KiB"]);
        assert!(got == want, "{tool}: counts differ from the plain text's");
        let maps = report["maps"].as_u64().unwrap();
        if ext == "bz2" {
            // 100 kB blocks: many maps, each its own blocks.
            let len = std::fs::metadata(&file).unwrap().len();
            assert!(maps >= len / (64 << 10), "{maps} maps over {len} bytes");
        } else {
            assert_eq!(maps, 1, "{tool}: one stream, one map");
        }
    }
}

#[test]
fn damaged_compressed_text_fails_naming_the_file_and_commits_nothing() {
    let d = tempfile::tempdir().unwrap();
    let text = text_file(d.path(), "1MB");
    let bz = d.path().join("words.bz2");
    compress("bzip2", &["-1", "-c"], &text, &bz);
    let zst = d.path().join("words.zst");
    compress("zstd", &["-q", "-c"], &text, &zst);
    let mut bytes = std::fs::read(&bz).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&bz, &bytes).unwrap();
    let bytes = std::fs::read(&zst).unwrap();
    std::fs::write(&zst, &bytes[..bytes.len() * 2 / 3]).unwrap();
    for (file, want) in [
        (&bz, "in the block at offset"),
        (&zst, "zstd data is corrupt or cut short"),
    ] {
        let out = d.path().join("out");
        let err = fails(
            sluice()
                .args(["run", "wordcount", "-q", "--split-size", "64KiB", "--input"])
                .arg(file)
                .arg("--output")
                .arg(&out)
                .output()
                .unwrap(),
        );
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(err.contains(&*name) && err.contains(want), "{err}");
        assert!(!out.exists(), "nothing is committed");
    }
}

/// Runs a Python program with pyarrow (the oracle's writer), arguments
/// after it.
pub fn pyarrow(program: &str, args: &[&Path]) {
    let py = crate::support::python();
    assert!(
        py.exists(),
        "no Python with pyarrow at {} (scripts/test.sh makes it)",
        py.display()
    );
    ok(Command::new(py)
        .arg("-c")
        .arg(program)
        .args(args)
        .output()
        .unwrap());
}

/// Writes the lines of argv[1] as column `line` (and their numbers as
/// `n`) of Parquet files argv[2].snappy etc., 2,000 rows a row group.
const LINES_TO_PARQUET: &str = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
if lines and lines[-1] == "": lines.pop()
t = pa.table({"n": pa.array(range(len(lines)), pa.int64()), "line": lines})
for codec in ["snappy", "zstd", "gzip"]:
    pq.write_table(t, f"{sys.argv[2]}.{codec}", compression=codec, row_group_size=2000)
"#;

#[test]
fn parquet_from_pyarrow_counts_as_the_text_by_row_group() {
    let d = tempfile::tempdir().unwrap();
    let text = text_file(d.path(), "2MB");
    let (want, _) = wordcount(d.path(), "plain", &text, &[]);
    let base = d.path().join("words");
    pyarrow(LINES_TO_PARQUET, &[&text, &base]);
    for codec in ["snappy", "zstd", "gzip"] {
        let file = d.path().join(format!("words.{codec}"));
        let args = ["--column", "line", "--split-size", "64KiB"];
        let (got, report) = wordcount(d.path(), codec, &file, &args);
        assert!(got == want, "{codec}: counts differ from the text's");
        let maps = report["maps"].as_u64().unwrap();
        assert!(maps > 4, "{codec}: {maps} maps");
        let rows = report["counters"]["MAP_INPUT_RECORDS"].as_u64().unwrap();
        let lines = std::fs::read(&text)
            .unwrap()
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        assert_eq!(rows, lines as u64, "{codec}: every row read once");
    }
    // Named explicitly, whatever its name.
    let file = d.path().join("words.snappy");
    let args = ["--column", "line", "--input-format", "parquet"];
    assert!(wordcount(d.path(), "explicit", &file, &args).0 == want);
}

/// Pavlo's text rows (argv[1] a directory of `|`-separated files) as one
/// Parquet file argv[2], its columns named; 500 rows a row group.
pub const PAVLO_TO_PARQUET: &str = r#"
import sys, os, pyarrow as pa, pyarrow.csv as csv, pyarrow.parquet as pq
names = sys.argv[3].split(",")
parts = sorted(p for p in os.listdir(sys.argv[1]) if not p.startswith(("_", ".")))
opts = csv.ReadOptions(column_names=names)
parse = csv.ParseOptions(delimiter="|", quote_char=False)
t = pa.concat_tables(csv.read_csv(os.path.join(sys.argv[1], p), read_options=opts, parse_options=parse) for p in parts)
pq.write_table(t, sys.argv[2], row_group_size=500)
"#;

/// Sorted output lines of a Pavlo task, its sums rounded to 6 places.
pub fn pavlo_answer(
    dir: &Path,
    job: &str,
    name: &str,
    input: &Path,
    extra: &[&str],
) -> Vec<String> {
    pavlo_run(dir, job, name, input, extra).0
}

/// [`pavlo_answer`] and the job's report.
fn pavlo_run(
    dir: &Path,
    job: &str,
    name: &str,
    input: &Path,
    extra: &[&str],
) -> (Vec<String>, serde_json::Value) {
    let out = dir.join(name);
    let report = dir.join(format!("{name}.json"));
    ok(sluice()
        .args(["run", job, "-q", "--threads", "2", "--split-size", "64KiB"])
        .args(extra)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    let lines = rounded_lines(&out);
    (lines, read_json(&report))
}

#[test]
fn pavlo_tasks_over_parquet_give_the_texts_answers() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let rk = d.path().join("rankings.parquet");
    let uv = d.path().join("uservisits.parquet");
    let rk_cols = Path::new("pageURL,pageRank,avgDuration");
    let uv_cols = Path::new(
        "sourceIP,destURL,visitDate,adRevenue,userAgent,countryCode,languageCode,searchWord,duration",
    );
    pyarrow(PAVLO_TO_PARQUET, &[&data.join("rankings"), &rk, rk_cols]);
    pyarrow(PAVLO_TO_PARQUET, &[&data.join("uservisits"), &uv, uv_cols]);
    let cases: [(&str, &Path, &Path); 3] = [
        ("pavlo-selection", &data.join("rankings"), &rk),
        ("pavlo-agg-large", &data.join("uservisits"), &uv),
        ("pavlo-agg-small", &data.join("uservisits"), &uv),
    ];
    for (job, text, parquet) in cases {
        let want = pavlo_answer(d.path(), job, &format!("{job}-text"), text, &[]);
        let got = pavlo_answer(d.path(), job, &format!("{job}-pq"), parquet, &[]);
        assert!(!want.is_empty(), "{job}");
        assert!(
            got == want,
            "{job}: Parquet's answer differs from the text's"
        );
    }
    // The join, Rankings and UserVisits both Parquet (the rank table read
    // by row group), or Rankings text.
    let rankings = data.join("rankings");
    let join = |name: &str, visits: &Path, ranks: &Path| {
        let r = ranks.to_str().unwrap();
        pavlo_answer(d.path(), "pavlo-join", name, visits, &["--rankings", r])
    };
    let want = join("join-text", &data.join("uservisits"), &rankings);
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(join("join-pq", &uv, &rk), want);
    assert_eq!(join("join-mixed", &uv, &rankings), want);
}

/// Rankings' text rows (argv[1]) as Parquet argv[2] sorted by pageRank,
/// 200 rows a row group.
const SORTED_RANKINGS: &str = r#"
import sys, os, pyarrow as pa, pyarrow.csv as csv, pyarrow.parquet as pq
parts = sorted(p for p in os.listdir(sys.argv[1]) if not p.startswith(("_", ".")))
opts = csv.ReadOptions(column_names=["pageURL", "pageRank", "avgDuration"])
parse = csv.ParseOptions(delimiter="|", quote_char=False)
t = pa.concat_tables(csv.read_csv(os.path.join(sys.argv[1], p), read_options=opts, parse_options=parse) for p in parts)
pq.write_table(t.sort_by("pageRank"), sys.argv[2], row_group_size=200)
"#;

#[test]
fn a_selection_skips_row_groups_by_their_statistics_with_the_same_answer() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let sorted = d.path().join("sorted.parquet");
    pyarrow(SORTED_RANKINGS, &[&data.join("rankings"), &sorted]);
    let text = data.join("rankings");
    let job = "pavlo-selection";
    let counter = |r: &serde_json::Value, c: &str| r["counters"][c].as_u64().unwrap();
    let all = concat_parts(&text).iter().filter(|&&b| b == b'\n').count() as u64;
    for threshold in ["3", "10"] {
        let args = ["--threshold", threshold];
        let (want, _) = pavlo_run(d.path(), job, &format!("t{threshold}"), &text, &args);
        let (got, report) = pavlo_run(d.path(), job, &format!("p{threshold}"), &sorted, &args);
        assert!(!want.is_empty());
        assert!(got == want, "threshold {threshold}: answers differ");
        let skipped = counter(&report, "ROW_GROUPS_SKIPPED");
        assert!(skipped > 0, "threshold {threshold}: no group skipped");
        assert!(counter(&report, "BYTES_SKIPPED") > 0);
        // Rows of groups read are the mapper's or left out, kept few.
        let rows = counter(&report, "MAP_INPUT_RECORDS") + counter(&report, "ROWS_SKIPPED");
        assert_eq!(
            rows + 200 * skipped,
            all,
            "threshold {threshold}: skipped rows read"
        );
    }
}

#[test]
fn damaged_parquet_fails_naming_the_file_and_row_group_and_commits_nothing() {
    let d = tempfile::tempdir().unwrap();
    let text = text_file(d.path(), "300KB");
    let base = d.path().join("words");
    pyarrow(LINES_TO_PARQUET, &[&text, &base]);
    let good = std::fs::read(d.path().join("words.zstd")).unwrap();
    let cut = d.path().join("cut.parquet");
    std::fs::write(&cut, &good[..good.len() - 100]).unwrap();
    let mut bytes = good.clone();
    // Bytes inside the first row group's pages of `line` (`n`'s come
    // first, and take a few kB).
    let at = good.len() / 8;
    for b in &mut bytes[at..at + 40] {
        *b ^= 0x5a;
    }
    let bad = d.path().join("bad.parquet");
    std::fs::write(&bad, &bytes).unwrap();
    let whole = d.path().join("whole.parquet");
    std::fs::write(&whole, &good).unwrap();
    let cases: [(&Path, &str, &str); 3] = [
        (&cut, "line", "not a readable Parquet file"),
        (&bad, "line", "row group 0"),
        (&whole, "nope", "has no column nope"),
    ];
    for (file, column, want) in cases {
        let out = d.path().join("out");
        let err = fails(
            sluice()
                .args(["run", "wordcount", "-q", "--column", column, "--input"])
                .arg(file)
                .arg("--output")
                .arg(&out)
                .output()
                .unwrap(),
        );
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(err.contains(&*name) && err.contains(want), "{err}");
        assert!(!out.exists(), "nothing is committed");
    }
}

//! Sluice's Parquet output (`--output-format parquet`), read back by
//! pyarrow: word count's and the Pavlo tasks' typed columns hold the
//! rows of the same job's text output; a value that is not of its
//! column's type fails the job and commits nothing; a cluster's and
//! Streaming's output are Parquet too.

use std::path::{Path, PathBuf};

use crate::avro::fastavro as python;
use crate::seqfiles::text_lines;
use crate::support::{concat_parts, fails, get, ok, put, sluice, submit_wc, Cluster};

/// Compares the Parquet part files of directory argv[2] with the text
/// part files of directory argv[1]: prints each distinct schema
/// (`name:type,...`), each distinct `codec statistics` of the column
/// chunks, the number of row groups, and whether the rows are the text's
/// (text values parsed as their columns' types, the value's `|`-separated
/// fields one a column, floats rounded to 6 places).
const SAME_ROWS: &str = r#"
import sys, os, pyarrow as pa, pyarrow.parquet as pq
def parts(d):
    return [os.path.join(d, p) for p in sorted(os.listdir(d)) if p.startswith("part-")]
files = [pq.ParquetFile(p) for p in parts(sys.argv[2])]
schemas = {",".join(f"{c.name}:{c.type}" for c in f.schema_arrow) for f in files}
chunks, groups = set(), 0
for f in files:
    for g in range(f.metadata.num_row_groups):
        groups += 1
        rg = f.metadata.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            chunks.add(f"{col.compression} {col.is_stats_set}")
for s in sorted(schemas):
    print("schema", s)
for c in sorted(chunks):
    print("chunks", c)
schema = files[0].schema_arrow
conv = {pa.string(): str, pa.int32(): int, pa.int64(): int, pa.float64(): float}
norm = lambda row: tuple(round(v, 6) if isinstance(v, float) else v for v in row)
got = sorted(norm(r.values()) for f in files for r in f.read().to_pylist())
want = []
for p in parts(sys.argv[1]):
    for line in open(p, encoding="utf-8"):
        k, _, v = line.rstrip("\n").partition("\t")
        vals = [k] + (v.split("|") if len(schema) > 2 else [v])
        want.append(norm([conv[c.type](x) for c, x in zip(schema, vals)]))
want.sort()
print("rows", len(got), "equal" if got == want and got else "differ")
"#;

/// Runs `sluice run ARGS` into `dir/name`, with `extra` flags.
fn run(dir: &Path, name: &str, args: &[&str], input: &Path, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    ok(sluice()
        .args(["run", "-q", "--threads", "2", "--split-size", "64KiB"])
        .args(args)
        .args(extra)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap());
    out
}

/// What [`SAME_ROWS`] prints for text output `text` and Parquet `parquet`.
fn compare(text: &Path, parquet: &Path) -> String {
    python(
        SAME_ROWS,
        &[&text.to_string_lossy(), &parquet.to_string_lossy()],
    )
}

/// The same job run twice, as text and as Parquet, compared.
fn both(dir: &Path, name: &str, args: &[&str], input: &Path) -> String {
    let text = run(dir, &format!("{name}-text"), args, input, &[]);
    let pq = ["--output-format", "parquet"];
    let parquet = run(dir, &format!("{name}-parquet"), args, input, &pq);
    compare(&text, &parquet)
}

/// The lines of `report` that start with `what`.
fn lines<'a>(report: &'a str, what: &str) -> Vec<&'a str> {
    report.lines().filter(|l| l.starts_with(what)).collect()
}

#[test]
fn word_counts_parquet_holds_the_texts_rows_as_word_and_int64_count() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("words.txt");
    std::fs::write(&input, text_lines(20_000)).unwrap();
    let got = both(d.path(), "wc", &["wordcount", "--reducers", "3"], &input);
    assert_eq!(lines(&got, "schema"), ["schema word:string,count:int64"]);
    assert_eq!(lines(&got, "chunks"), ["chunks SNAPPY True"]);
    assert!(got.contains(" equal"), "{got}");
    // Other jobs write (key string, value string); and Sluice reads its
    // own Parquet back by column.
    let grep = ["grep", "--pattern", "w1[0-9]"];
    let got = both(d.path(), "grep", &grep, &input);
    assert_eq!(lines(&got, "schema"), ["schema key:string,value:string"]);
    assert!(got.contains(" equal"), "{got}");
    let back = run(
        d.path(),
        "back",
        &["wordcount", "--column", "word"],
        &d.path().join("wc-parquet"),
        &[],
    );
    let text = String::from_utf8(concat_parts(&d.path().join("wc-text"))).unwrap();
    let mut want: Vec<String> = text
        .lines()
        .map(|l| format!("{}\t1", l.split('\t').next().unwrap()))
        .collect();
    want.sort();
    let back = String::from_utf8(concat_parts(&back)).unwrap();
    let mut got: Vec<&str> = back.lines().collect();
    got.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn pavlo_tasks_write_their_typed_columns() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let rankings = data.join("rankings").to_string_lossy().into_owned();
    let uv = data.join("uservisits");
    let join = ["pavlo-join", "--rankings", &rankings];
    let baseline = ["pavlo-join", "--rankings", &rankings, "--join", "baseline"];
    let join_cols = "sourceIP:string,totalRevenue:double,avgPageRank:double";
    let cases: [(&str, &[&str], PathBuf, &str); 6] = [
        (
            "sel",
            &["pavlo-selection"],
            data.join("rankings"),
            "pageURL:string,pageRank:int32",
        ),
        (
            "large",
            &["pavlo-agg-large"],
            uv.clone(),
            "sourceIP:string,adRevenue:double",
        ),
        (
            "small",
            &["pavlo-agg-small", "--group-by", "dest-url"],
            uv.clone(),
            "destURL:string,adRevenue:double",
        ),
        ("join", &join, uv.clone(), join_cols),
        ("baseline", &baseline, uv.clone(), join_cols),
        (
            "udf",
            &["pavlo-udf"],
            data.join("documents"),
            "url:string,inlinks:int64",
        ),
    ];
    for (name, args, input, schema) in cases {
        let got = both(d.path(), name, args, &input);
        assert_eq!(
            lines(&got, "schema"),
            [format!("schema {schema}")],
            "{name}"
        );
        assert!(got.contains(" equal"), "{name}: {got}");
    }
}

#[test]
fn a_value_not_of_its_column_fails_the_job_and_commits_nothing() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("words.txt");
    let mut bytes = text_lines(2_000).into_bytes();
    bytes.extend_from_slice(b"ok \xff\xfe bad\n");
    std::fs::write(&input, bytes).unwrap();
    let out = d.path().join("out");
    let err = fails(
        sluice()
            .args(["run", "wordcount", "-q", "--output-format", "parquet"])
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("is not UTF-8 text (a string): column word"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is committed");
}

#[test]
fn a_clusters_and_streamings_parquet_read_back_by_pyarrow() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("words.txt");
    std::fs::write(&input, text_lines(5_000)).unwrap();
    let text = run(d.path(), "text", &["wordcount"], &input, &[]);
    let c = Cluster::up(d.path(), 2, "");
    put(&c, &input, "words", "64KiB", "1");
    ok(submit_wc(&c, "words", "counts")
        .args(["--output-format", "parquet"])
        .output()
        .unwrap());
    let fetched = d.path().join("fetched");
    get(&c, "counts", &fetched);
    let got = compare(&text, &fetched);
    assert_eq!(lines(&got, "schema"), ["schema word:string,count:int64"]);
    assert!(got.contains(" equal"), "{got}");
    // Streaming's output: key and value strings.
    let out = d.path().join("streamed");
    ok(sluice()
        .args(["streaming", "-mapper", "cat", "-numReduceTasks", "0"])
        .args(["-outputformat", "parquet", "-input"])
        .arg(&text)
        .arg("-output")
        .arg(&out)
        .output()
        .unwrap());
    let got = compare(&text, &out);
    assert_eq!(lines(&got, "schema"), ["schema key:string,value:string"]);
    assert!(got.contains(" equal"), "{got}");
}

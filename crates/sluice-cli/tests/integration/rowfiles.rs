//! Files of rows away from the local disk: what the HDFS, S3 and cluster
//! tests of Parquet, Avro and SequenceFile input share.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// Writes the lines of argv[1] as column `line` (and their numbers as
/// `n`) of the Parquet file argv[2], snappy, 2,000 rows a row group.
const LINES_TO_PARQUET: &str = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
if lines and lines[-1] == "": lines.pop()
t = pa.table({"n": pa.array(range(len(lines)), pa.int64()), "line": lines})
pq.write_table(t, sys.argv[2], compression="snappy", row_group_size=2000)
"#;

/// `cmd` made a word count of the column `line` of the Parquet file at
/// `input` into `output` (2 threads, 1 reducer, 64 KiB splits), its
/// report written to `report`.
pub fn count_parquet_lines(cmd: &mut Command, report: &Path, input: &str, output: &str) {
    cmd.args([
        "run",
        "wordcount",
        "-q",
        "--threads",
        "2",
        "--reducers",
        "1",
    ])
    .args(["--column", "line", "--split-size", "64KiB", "--report"])
    .arg(report)
    .args(["--input", input, "--output", output]);
}

/// A text file of about `size` and a Parquet file pyarrow wrote of its
/// lines (column `line`, 2,000 rows a row group): `(text, parquet)`.
pub fn text_and_parquet(dir: &Path, size: &str) -> (PathBuf, PathBuf) {
    let gen = dir.join("gen");
    ok(sluice()
        .args(["gen", "text", "--size", size, "--seed", "11", "--out"])
        .arg(&gen)
        .output()
        .unwrap());
    let text = dir.join("words.txt");
    let all: Vec<u8> = part_files(&gen)
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect();
    std::fs::write(&text, all).unwrap();
    let parquet = dir.join("words.parquet");
    let py = python();
    assert!(
        py.exists(),
        "no Python with pyarrow at {} (scripts/test.sh makes it)",
        py.display()
    );
    ok(Command::new(py)
        .arg("-c")
        .arg(LINES_TO_PARQUET)
        .arg(&text)
        .arg(&parquet)
        .output()
        .unwrap());
    (text, parquet)
}

/// The lines of argv[1] as the Avro file argv[2] (deflate): field `line`,
/// a block every 8,000 bytes.
const LINES_TO_AVRO: &str = r#"
import sys, fastavro
schema = {"type": "record", "name": "doc", "fields": [{"name": "line", "type": "string"}]}
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
with open(sys.argv[2], "wb") as f:
    fastavro.writer(f, schema, ({"line": l} for l in lines), codec="deflate", sync_interval=8000)
"#;

/// Word count of data set `input` on cluster `c` into `output`, reading
/// column `line` of its rows (`extra` flags besides): the output's bytes
/// and the report.
fn cluster_wc(
    c: &Cluster,
    dir: &Path,
    input: &str,
    extra: &[&str],
) -> (Vec<u8>, serde_json::Value) {
    let output = format!("{input}-counts");
    let report = dir.join(format!("{output}.json"));
    ok(c.submit(&["wordcount", "--reducers", "1"])
        .args(extra)
        .args(["--input", input, "--output", &output, "--report"])
        .arg(&report)
        .output()
        .unwrap());
    let out = dir.join(&output);
    get(c, &output, &out);
    // A data set of one file comes back as that file.
    let bytes = match out.is_file() {
        true => std::fs::read(&out).unwrap(),
        false => concat_parts(&out),
    };
    (bytes, read_json(&report))
}

/// Data set `name` of cluster `c` got into `dir`, as [`rounded_lines`]
/// (a data set of one file comes back as that file).
fn fetched_lines(c: &Cluster, dir: &Path, name: &str) -> Vec<String> {
    let got = dir.join(name);
    get(c, name, &got);
    if got.is_file() {
        let part = std::fs::read(&got).unwrap();
        std::fs::remove_file(&got).unwrap();
        std::fs::create_dir(&got).unwrap();
        std::fs::write(got.join("part-r-00000"), part).unwrap();
    }
    rounded_lines(&got)
}

/// 128 KiB blocks: row groups (about 70 KB), Avro blocks (8 KB) and
/// SequenceFile blocks (16 KB) cross block boundaries.
const BLOCK: &str = "128KiB";

#[test]
fn files_of_rows_put_on_a_cluster_count_as_their_text_with_node_local_maps() {
    let d = tempfile::tempdir().unwrap();
    let (text, parquet) = text_and_parquet(d.path(), "2MB");
    let (want, _) = wordcount(d.path(), "plain", &text, &[]);
    let avro = d.path().join("words.avro");
    crate::avro::fastavro(
        LINES_TO_AVRO,
        &[&text.to_string_lossy(), &avro.to_string_lossy()],
    );
    let seq = d.path().join("words.seq");
    let lines = std::fs::read(&text).unwrap();
    let args = [
        "write",
        &seq.to_string_lossy(),
        "block",
        "default",
        "long",
        "text",
        "16384",
    ];
    assert_eq!(crate::seqfiles::hadoop_seqfiles(&args, &lines).trim(), "ok");
    let c = Cluster::up(d.path(), 2, "");
    for (name, file, extra) in [
        ("parquet", &parquet, &["--column", "line"][..]),
        ("avro", &avro, &["--column", "line"][..]),
        ("seq", &seq, &[][..]),
    ] {
        put(&c, file, name, BLOCK, "1");
        // Cut by bytes, it comes back as it went.
        let back = d.path().join(format!("{name}.back"));
        get(&c, name, &back);
        assert!(
            std::fs::read(&back).unwrap() == std::fs::read(file).unwrap(),
            "{name}"
        );
        let (got, r) = cluster_wc(&c, d.path(), name, extra);
        assert!(got == want, "{name}: counts differ from the text's");
        let len = std::fs::metadata(file).unwrap().len();
        assert!(len > 4 * (128 << 10), "{name}: {len} bytes");
        let maps = r["maps"].as_u64().unwrap();
        assert!(maps > 1, "{name}: {r}");
        assert_eq!(
            r["cluster"]["data_local_maps"].as_u64(),
            Some(maps),
            "{name}: {r}"
        );
    }
    // A Pavlo task reads its columns by name: the text's answer.
    let pv = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&pv)
        .output()
        .unwrap());
    let uv = d.path().join("uservisits.parquet");
    let cols = "sourceIP,destURL,visitDate,adRevenue,userAgent,countryCode,languageCode,searchWord,duration";
    let args: [&Path; 3] = [&pv.join("uservisits"), &uv, Path::new(cols)];
    crate::formats::pyarrow(crate::formats::PAVLO_TO_PARQUET, &args);
    let job = "pavlo-agg-large";
    let answer =
        crate::formats::pavlo_answer(d.path(), job, "agg-text", &pv.join("uservisits"), &[]);
    put(&c, &uv, "uv", BLOCK, "1");
    ok(c.submit(&[job, "--input", "uv", "--output", "uv-agg"])
        .output()
        .unwrap());
    assert!(!answer.is_empty());
    assert!(
        fetched_lines(&c, d.path(), "uv-agg") == answer,
        "{job}: the cluster's answer differs"
    );
    // The join reads both sides' columns on the workers: the text's
    // answer, the week's rows alone handed to the mappers.
    let rk = d.path().join("rankings.parquet");
    let args: [&Path; 3] = [
        &pv.join("rankings"),
        &rk,
        Path::new("pageURL,pageRank,avgDuration"),
    ];
    crate::formats::pyarrow(crate::formats::PAVLO_TO_PARQUET, &args);
    put(&c, &rk, "rk", BLOCK, "1");
    let job = "pavlo-join";
    let rk_text = pv.join("rankings");
    let rankings = ["--rankings", rk_text.to_str().unwrap()];
    let uv_text = pv.join("uservisits");
    let answer = crate::formats::pavlo_answer(d.path(), job, "join-text", &uv_text, &rankings);
    let report = d.path().join("uv-join.json");
    ok(c.submit(&[
        job,
        "--input",
        "uv",
        "--rankings",
        "rk",
        "--output",
        "uv-join",
    ])
    .arg("--report")
    .arg(&report)
    .output()
    .unwrap());
    assert_eq!(answer.len(), 1);
    assert!(
        fetched_lines(&c, d.path(), "uv-join") == answer,
        "{job}: the cluster's answer differs"
    );
    let r = read_json(&report);
    let counter = |n: &str| r["counters"][n].as_u64().unwrap_or(0);
    assert!(counter("ROWS_AS_COLUMNS") > 0, "{r}");
    assert_eq!(counter("ROWS_AS_COLUMNS"), counter("MAP_INPUT_RECORDS"));
    assert!(counter("ROWS_SKIPPED") > 0, "{r}");

    // Named by --input-format, whatever their names.
    let renamed = d.path().join("renamed");
    std::fs::create_dir(&renamed).unwrap();
    std::fs::copy(&parquet, renamed.join("part-0")).unwrap();
    put(&c, &renamed, "renamed", BLOCK, "1");
    let extra = ["--column", "line", "--input-format", "parquet"];
    assert!(cluster_wc(&c, d.path(), "renamed", &extra).0 == want);
}

#[test]
fn a_damaged_block_of_a_parquet_file_is_blamed_and_read_from_the_other_copy() {
    let d = tempfile::tempdir().unwrap();
    let (text, parquet) = text_and_parquet(d.path(), "1MB");
    let (want, _) = wordcount(d.path(), "plain", &text, &[]);
    let c = Cluster::up_with(
        d.path(),
        2,
        "--heartbeat-ms 100 --replication-streams 0",
        "--scan-rate 0",
    );
    put(&c, &parquet, "rows", BLOCK, "2");
    // The last block holds the footer, which every map reads: flip a byte
    // of it on one worker.
    let w0 = c.data_dirs()[0].clone();
    let last = block_files(&w0)
        .into_iter()
        .find(|p| std::fs::read(p).unwrap().ends_with(b"PAR1"))
        .unwrap();
    let mut bytes = std::fs::read(&last).unwrap();
    let at = bytes.len() - 40;
    bytes[at] ^= 0x10;
    std::fs::write(&last, &bytes).unwrap();
    let (got, r) = cluster_wc(&c, d.path(), "rows", &["--column", "line"]);
    assert!(got == want, "counts differ from the text's");
    assert_eq!(r["cluster"]["state"], "succeeded", "{r}");
    let damaged = r["cluster"]["attempts"]["damaged_replicas"].as_u64();
    assert!(damaged.unwrap() > 0, "{r}");
    let id = last.file_name().unwrap().to_string_lossy().into_owned();
    let ls = String::from_utf8_lossy(&ok(c.cmd(&["ls"]).output().unwrap()).stdout).into_owned();
    let line = ls
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("block {id}:")) && l.contains("damaged"));
    assert!(
        line.is_some_and(|l| l.contains("checksum mismatch")),
        "{ls}"
    );
}

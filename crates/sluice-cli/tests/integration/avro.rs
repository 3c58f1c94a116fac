//! Avro object container files, checked against fastavro: files it wrote
//! with the null, deflate and snappy codecs count as the text, the Pavlo
//! tasks over them give the text's answers, one file gives many maps;
//! damage fails naming the file and block; Sluice's Avro output reads
//! back in fastavro. And Streaming's rows: SequenceFiles as `key TAB
//! value` lines, Avro and Parquet rows as JSON objects.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::seqfiles::text_lines;
use crate::support::{concat_parts, fails, ok, rounded_lines, sluice, wordcount};

/// Runs a Python program with fastavro, arguments after it; its output.
pub fn fastavro(program: &str, args: &[&str]) -> String {
    let py = crate::support::python();
    assert!(
        py.exists(),
        "no Python with fastavro at {} (scripts/test.sh makes it)",
        py.display()
    );
    let out = ok(Command::new(py)
        .arg("-c")
        .arg(program)
        .args(args)
        .output()
        .unwrap());
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of argv[1] as Avro file argv[2] (codec argv[3]): field
/// `line` and their numbers `n`, a block every 4,000 bytes.
const LINES_TO_AVRO: &str = r#"
import sys, fastavro
schema = {"type": "record", "name": "doc", "fields": [
    {"name": "n", "type": "long"}, {"name": "line", "type": "string"}]}
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
with open(sys.argv[2], "wb") as f:
    fastavro.writer(f, schema, ({"n": i, "line": l} for i, l in enumerate(lines)),
                    codec=sys.argv[3], sync_interval=4000)
"#;

fn avro_of_lines(dir: &Path, text: &Path, codec: &str) -> PathBuf {
    let file = dir.join(format!("words-{codec}.avro"));
    let args = [&*text.to_string_lossy(), &*file.to_string_lossy(), codec];
    fastavro(LINES_TO_AVRO, &args);
    file
}

#[test]
fn avro_from_fastavro_counts_as_the_text_with_many_maps() {
    let d = tempfile::tempdir().unwrap();
    let text = d.path().join("words.txt");
    std::fs::write(&text, text_lines(20_000)).unwrap();
    let (want, _) = wordcount(d.path(), "plain", &text, &[]);
    for codec in ["null", "deflate", "snappy"] {
        let file = avro_of_lines(d.path(), &text, codec);
        let args = ["--column", "line", "--split-size", "32KiB"];
        let (got, report) = wordcount(d.path(), codec, &file, &args);
        assert!(got == want, "{codec}: counts differ from the text's");
        let len = std::fs::metadata(&file).unwrap().len();
        assert_eq!(
            report["maps"].as_u64().unwrap(),
            len.div_ceil(32 << 10),
            "{codec}"
        );
        assert_eq!(report["counters"]["MAP_INPUT_RECORDS"], 20_000, "{codec}");
    }
}

/// Pavlo's text rows (argv[1] a directory of `|`-separated files) as one
/// Avro file argv[2] with the columns argv[3] (`name:type`, comma
/// separated), deflated, a block every 8,000 bytes.
const PAVLO_TO_AVRO: &str = r#"
import sys, os, fastavro
cols = [c.split(":") for c in sys.argv[3].split(",")]
conv = {"string": str, "int": int, "double": float}
schema = {"type": "record", "name": "row",
          "fields": [{"name": n, "type": t} for n, t in cols]}
def rows():
    for p in sorted(os.listdir(sys.argv[1])):
        if p.startswith(("_", ".")):
            continue
        for line in open(os.path.join(sys.argv[1], p), encoding="utf-8"):
            vals = line.rstrip("\n").split("|")
            yield {n: conv[t](v) for (n, t), v in zip(cols, vals)}
with open(sys.argv[2], "wb") as f:
    fastavro.writer(f, schema, rows(), codec="deflate", sync_interval=8000)
"#;

/// Sorted output lines of a Pavlo task, its sums rounded to 6 places.
fn pavlo_answer(dir: &Path, job: &str, name: &str, input: &Path) -> Vec<String> {
    let out = dir.join(name);
    ok(sluice()
        .args(["run", job, "-q", "--threads", "2", "--split-size", "64KiB"])
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap());
    rounded_lines(&out)
}

#[test]
fn pavlo_tasks_over_avro_give_the_texts_answers() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let rk = d.path().join("rankings.avro");
    let uv = d.path().join("uservisits.avro");
    let rk_cols = "pageURL:string,pageRank:int,avgDuration:int";
    let uv_cols = "sourceIP:string,destURL:string,visitDate:string,adRevenue:double,\
                   userAgent:string,countryCode:string,languageCode:string,searchWord:string,\
                   duration:int";
    let arg = |p: &Path| p.to_string_lossy().into_owned();
    fastavro(
        PAVLO_TO_AVRO,
        &[&arg(&data.join("rankings")), &arg(&rk), rk_cols],
    );
    fastavro(
        PAVLO_TO_AVRO,
        &[&arg(&data.join("uservisits")), &arg(&uv), uv_cols],
    );
    let cases: [(&str, &Path, &Path); 3] = [
        ("pavlo-selection", &data.join("rankings"), &rk),
        ("pavlo-agg-large", &data.join("uservisits"), &uv),
        ("pavlo-agg-small", &data.join("uservisits"), &uv),
    ];
    for (job, text, avro) in cases {
        let want = pavlo_answer(d.path(), job, &format!("{job}-text"), text);
        let got = pavlo_answer(d.path(), job, &format!("{job}-avro"), avro);
        assert!(!want.is_empty(), "{job}");
        assert!(got == want, "{job}: Avro's answer differs from the text's");
    }
}

#[test]
fn damaged_avro_fails_naming_the_file_and_block_and_commits_nothing() {
    let d = tempfile::tempdir().unwrap();
    let text = d.path().join("words.txt");
    std::fs::write(&text, text_lines(3_000)).unwrap();
    let good = std::fs::read(avro_of_lines(d.path(), &text, "deflate")).unwrap();
    // The sync ends the file, as it ends every block and the header.
    let sync = &good[good.len() - 16..];
    let syncs: Vec<usize> = good
        .windows(16)
        .enumerate()
        .filter(|(_, w)| *w == sync)
        .map(|(i, _)| i)
        .collect();
    let cut = d.path().join("cut.avro");
    std::fs::write(&cut, &good[..good.len() - 9]).unwrap();
    let mut bytes = good.clone();
    bytes[syncs[2] + 5] ^= 0xff;
    let bad_sync = d.path().join("badsync.avro");
    std::fs::write(&bad_sync, &bytes).unwrap();
    let mut bytes = good.clone();
    let block = syncs[1] + 16;
    bytes[block + 8] ^= 0xff;
    let bad_block = d.path().join("badblock.avro");
    std::fs::write(&bad_block, &bytes).unwrap();
    let whole = d.path().join("whole.avro");
    std::fs::write(&whole, &good).unwrap();
    let cases: [(&Path, &str, String); 4] = [
        (&cut, "line", "truncated".into()),
        (&bad_sync, "line", format!("offset {}: block at", syncs[2])),
        (&bad_block, "line", format!("block at offset {block}")),
        (&whole, "nope", "has no column nope".into()),
    ];
    for (file, column, want) in cases {
        let out = d.path().join("out");
        let err = fails(
            sluice()
                .args([
                    "run",
                    "wordcount",
                    "-q",
                    "--split-size",
                    "16KiB",
                    "--column",
                    column,
                ])
                .arg("--input")
                .arg(file)
                .arg("--output")
                .arg(&out)
                .output()
                .unwrap(),
        );
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(err.contains(&*name) && err.contains(&want), "{name}: {err}");
        assert!(!out.exists(), "nothing is committed");
    }
}

/// Prints the records of the Avro files argv[1:] as `field0 TAB field1`
/// lines, after one line with the fields' names and types.
const READ_PAIRS: &str = r#"
import sys, fastavro
for p in sys.argv[1:]:
    with open(p, "rb") as f:
        r = fastavro.reader(f)
        (k, kt), (v, vt) = [(f["name"], f["type"]) for f in r.writer_schema["fields"]]
        print(k, kt, v, vt)
        for rec in r:
            print(f"{rec[k]}\t{rec[v]}")
"#;

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

#[test]
fn sluices_avro_read_back_by_fastavro() {
    let d = tempfile::tempdir().unwrap();
    let text = d.path().join("words.txt");
    std::fs::write(&text, text_lines(5_000)).unwrap();
    let (want, _) = wordcount(d.path(), "text", &text, &[]);
    let out = d.path().join("avro");
    ok(sluice()
        .args([
            "run",
            "wordcount",
            "-q",
            "--reducers",
            "2",
            "--output-format",
            "avro",
        ])
        .arg("--input")
        .arg(&text)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap());
    let parts: Vec<String> = crate::support::part_files(&out)
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert_eq!(parts.len(), 2);
    let args: Vec<&str> = parts.iter().map(String::as_str).collect();
    let got = fastavro(READ_PAIRS, &args);
    let (types, pairs): (Vec<String>, Vec<String>) = sorted_lines(&got)
        .into_iter()
        .partition(|l| !l.contains('\t'));
    assert_eq!(types, ["word string count long", "word string count long"]);
    assert_eq!(pairs, sorted_lines(&String::from_utf8(want).unwrap()));
    // And Sluice reads its own Avro back, by column.
    let (again, _) = wordcount(d.path(), "again", &out, &["--column", "word"]);
    let keys: Vec<String> = pairs
        .iter()
        .map(|l| format!("{}\t1", l.split('\t').next().unwrap()))
        .collect();
    assert_eq!(sorted_lines(&String::from_utf8(again).unwrap()), keys);
}

#[test]
fn streaming_reads_sequencefiles_as_key_tab_value_and_rows_as_json() {
    let d = tempfile::tempdir().unwrap();
    let text = d.path().join("words.txt");
    std::fs::write(&text, text_lines(2_000)).unwrap();
    let avro = avro_of_lines(d.path(), &text, "deflate");
    let seq = d.path().join("words.seq");
    let p = seq.to_string_lossy();
    let args = ["write", &p, "block", "default", "long", "text", "8192"];
    let lines = std::fs::read(&text).unwrap();
    assert_eq!(crate::seqfiles::hadoop_seqfiles(&args, &lines).trim(), "ok");
    let hadoop = crate::seqfiles::hadoop_seqfiles(&["read", &p], b"");
    let want: Vec<String> = sorted_lines(hadoop.split_once('\n').unwrap().1);
    let stream = |input: &Path, format: &str, name: &str| -> Vec<String> {
        let out = d.path().join(name);
        ok(sluice()
            .args(["streaming", "-mapper", "cat", "-numReduceTasks", "0"])
            .args(["-inputformat", format, "-input"])
            .arg(input)
            .arg("-output")
            .arg(&out)
            .output()
            .unwrap());
        sorted_lines(&String::from_utf8(concat_parts(&out)).unwrap())
    };
    let got = stream(
        &seq,
        "org.apache.hadoop.mapred.SequenceFileAsTextInputFormat",
        "s",
    );
    assert_eq!(got, want);
    // Avro's and Parquet's rows as JSON objects.
    let parquet = d.path().join("words.parquet");
    let program = "import sys, pyarrow as pa, pyarrow.parquet as pq\n\
                   lines = open(sys.argv[1], encoding='utf-8').read().splitlines()\n\
                   pq.write_table(pa.table({'n': list(range(len(lines))), 'line': lines}), \
                   sys.argv[2], row_group_size=500)";
    fastavro(
        program,
        &[&text.to_string_lossy(), &parquet.to_string_lossy()],
    );
    let text_lines: Vec<String> = String::from_utf8(lines)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let cases = [
        (&avro, "org.apache.avro.mapred.AvroAsTextInputFormat", "a"),
        (&parquet, "parquet", "p"),
    ];
    for (file, format, name) in cases {
        let got = stream(file, format, name);
        assert_eq!(got.len(), 2_000, "{format}");
        let mut rows: Vec<(u64, String)> = got
            .iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l.trim_end_matches('\t')).unwrap();
                (
                    v["n"].as_u64().unwrap(),
                    v["line"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        rows.sort_unstable();
        for (i, (n, line)) in rows.iter().enumerate() {
            assert_eq!((*n, line), (i as u64, &text_lines[i]), "{format}");
        }
    }
}

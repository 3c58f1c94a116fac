//! CSV (with a header row, RFC 4180 quoting) and JSON lines: the Pavlo
//! tasks read UserVisits and Rankings by column name from files Python's
//! `csv` and `json` modules wrote, and give the text's answers; a missing
//! column, an unclosed quote or a line that is no JSON object fails
//! naming the file (and the line's offset), and nothing is committed.

use std::path::Path;
use std::process::Command;

use crate::support::{fails, ok, rounded_lines, sluice};

/// Pavlo's text rows (argv[1] a directory of `|`-separated files) as one
/// CSV file argv[2] (every string quoted) and one JSON lines file argv[3],
/// columns argv[4] (`name:type`, comma separated).
const PAVLO_TO_CSV_AND_JSONL: &str = r#"
import sys, os, csv, json
cols = [c.split(":") for c in sys.argv[4].split(",")]
conv = {"string": str, "int": int, "double": float}
with open(sys.argv[2], "w", newline="", encoding="utf-8") as c, \
     open(sys.argv[3], "w", encoding="utf-8") as j:
    w = csv.writer(c, quoting=csv.QUOTE_NONNUMERIC)
    w.writerow([n for n, _ in cols])
    for p in sorted(os.listdir(sys.argv[1])):
        if p.startswith(("_", ".")):
            continue
        for line in open(os.path.join(sys.argv[1], p), encoding="utf-8"):
            vals = line.rstrip("\n").split("|")
            row = {n: conv[t](v) for (n, t), v in zip(cols, vals)}
            w.writerow([row[n] for n, _ in cols])
            j.write(json.dumps(row) + "\n")
"#;

/// Sorted output lines of a Pavlo task, its sums rounded to 6 places.
fn pavlo_answer(dir: &Path, job: &str, name: &str, input: &Path, format: &str) -> Vec<String> {
    let out = dir.join(name);
    ok(sluice()
        .args(["run", job, "-q", "--threads", "2", "--split-size", "64KiB"])
        .args(["--input-format", format, "--input"])
        .arg(input)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap());
    rounded_lines(&out)
}

#[test]
fn pavlo_tasks_over_csv_and_json_lines_give_the_texts_answers() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    let rk_cols = "pageURL:string,pageRank:int,avgDuration:int";
    let uv_cols = "sourceIP:string,destURL:string,visitDate:string,adRevenue:double,\
                   userAgent:string,countryCode:string,languageCode:string,searchWord:string,\
                   duration:int";
    for (set, cols) in [("rankings", rk_cols), ("uservisits", uv_cols)] {
        ok(Command::new(crate::support::python())
            .arg("-c")
            .arg(PAVLO_TO_CSV_AND_JSONL)
            .arg(data.join(set))
            .arg(d.path().join(format!("{set}.csv")))
            .arg(d.path().join(format!("{set}.jsonl")))
            .arg(cols)
            .output()
            .unwrap());
    }
    let cases = [
        ("pavlo-selection", "rankings"),
        ("pavlo-agg-large", "uservisits"),
        ("pavlo-agg-small", "uservisits"),
    ];
    for (job, set) in cases {
        let want = pavlo_answer(
            d.path(),
            job,
            &format!("{job}-text"),
            &data.join(set),
            "text",
        );
        assert!(!want.is_empty(), "{job}");
        for format in ["csv", "jsonl"] {
            let file = d.path().join(format!("{set}.{format}"));
            let got = pavlo_answer(d.path(), job, &format!("{job}-{format}"), &file, format);
            assert!(
                got == want,
                "{job}: {format}'s answer differs from the text's"
            );
        }
    }
    let out = d.path().join("out");
    let err = fails(
        sluice()
            .args([
                "run",
                "wordcount",
                "-q",
                "--input-format",
                "csv",
                "--column",
                "nope",
            ])
            .arg("--input")
            .arg(d.path().join("rankings.csv"))
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("rankings.csv") && err.contains("has no column nope"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is committed");
}

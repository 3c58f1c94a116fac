//! Sluice Streaming against Hadoop: the same scripts (Python, awk, sh)
//! run by `sluice streaming` and by a Hadoop MapReduce job with Hadoop
//! Streaming's contract on LocalJobRunner (`bench/hadoop`'s
//! `sluice.bench.Streaming`, Hadoop 3.4.1 from Maven Central: Hadoop's
//! input format, partitioner, sort, shuffle and output format) give
//! byte-identical part files for the same number of reducers; a map-only
//! job gives the same lines (Hadoop numbers its map outputs by its own
//! splits).
//!
//! Inputs avoid one known difference: Hadoop's line reader also ends a
//! line at a lone carriage return, Sluice's only at a line feed (a
//! carriage return before it is dropped, as Hadoop does).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// Words of generated text, and a file of awkward lines: tabs, empty
/// lines, a line of blanks, CR LF ends, UTF-8, no final newline.
fn input(dir: &Path) -> PathBuf {
    let data = gen(dir, "3MB");
    std::fs::write(
        data.join("awkward.txt"),
        b"a\tb\tc\r\n\nno tab here\r\n  spaced  \nuni\xc3\xa9 \xe2\x82\xac\n\t\t\nlast line",
    )
    .unwrap();
    data
}

/// A job's commands; `None` reducer: map-only.
struct Scripts<'a> {
    mapper: &'a str,
    reducer: Option<&'a str>,
    combiner: Option<&'a str>,
    reducers: u32,
}

/// Runs `s` on Hadoop and on Sluice with the scripts of `dir`; their
/// output directories.
fn both(dir: &Path, data: &Path, name: &str, s: &Scripts<'_>) -> (PathBuf, PathBuf) {
    let cp = maven_classpath("bench/hadoop", "hadoop-jobs-1.0.jar");
    let (hadoop, ours) = (dir.join(format!("{name}-h")), dir.join(format!("{name}-s")));
    let mut h = Command::new("java");
    h.args(["-Xmx1g", "-cp", &cp, "sluice.bench.Streaming"])
        .arg(data)
        .arg(&hadoop)
        .arg("2")
        .arg(s.reducers.to_string())
        .arg(dir)
        .arg(s.mapper)
        .arg(s.reducer.unwrap_or("NONE"));
    if let Some(c) = s.combiner {
        h.arg(c);
    }
    ok(h.output().unwrap());
    let mut c = sluice();
    c.current_dir(dir)
        .args(["streaming", "-input"])
        .arg(data)
        .arg("-output")
        .arg(&ours)
        .args(["-mapper", s.mapper, "-reducer", s.reducer.unwrap_or("NONE")])
        .args(["-numReduceTasks", &s.reducers.to_string()]);
    for f in ["map.py", "reduce.py"] {
        c.arg("-file").arg(dir.join(f));
    }
    if let Some(comb) = s.combiner {
        c.args(["-combiner", comb]);
    }
    ok(c.output().unwrap());
    (hadoop, ours)
}

fn identical(dir: &Path, data: &Path, name: &str, s: &Scripts<'_>) {
    let (hadoop, ours) = both(dir, data, name, s);
    let (h, o) = (named_parts(&hadoop), named_parts(&ours));
    assert_eq!(h.len(), s.reducers as usize, "{name}: Hadoop's parts");
    assert!(h.iter().any(|(_, b)| !b.is_empty()), "{name}: some output");
    for ((hn, hb), (on, ob)) in h.iter().zip(&o) {
        assert_eq!(hn, on, "{name}: part names");
        assert!(hb == ob, "{name}: {hn} differs from Hadoop's");
    }
    assert_eq!(h.len(), o.len(), "{name}: parts");
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("map.py"), MAP_PY).unwrap();
    std::fs::write(d.path().join("reduce.py"), REDUCE_PY).unwrap();
    let data = input(d.path());
    (d, data)
}

#[test]
fn python_awk_and_sh_scripts_give_hadoops_part_files_byte_for_byte() {
    let (d, data) = setup();
    let py = Scripts {
        mapper: "python3 map.py",
        reducer: Some("python3 reduce.py"),
        combiner: Some("python3 reduce.py"),
        reducers: 3,
    };
    identical(d.path(), &data, "python", &py);
    // Each field with its length; a reducer that finds its groups itself
    // and sums them.
    let awk = Scripts {
        mapper: r#"awk '{ for (i = 1; i <= NF; i++) print $i "\t" length($i) }'"#,
        reducer: Some(
            r#"awk -F '\t' '$1 != k { if (NR > 1) print k "\t" s; k = $1; s = 0 } { s += $2 } END { if (NR > 0) print k "\t" s }'"#,
        ),
        combiner: None,
        reducers: 2,
    };
    identical(d.path(), &data, "awk", &awk);
    // Lines without a tab both ways: keys with empty values, written with
    // a trailing tab as Hadoop's TextOutputFormat does.
    let sh = Scripts {
        mapper: "tr -s ' ' '\\n'",
        reducer: Some("uniq -c"),
        combiner: None,
        reducers: 2,
    };
    identical(d.path(), &data, "sh", &sh);
}

#[test]
fn a_map_only_job_gives_hadoops_lines() {
    let (d, data) = setup();
    let sed = Scripts {
        mapper: "sed 's/a/A/g'",
        reducer: None,
        combiner: None,
        reducers: 0,
    };
    let (hadoop, ours) = both(d.path(), &data, "sed", &sed);
    let lines = |dir: &Path| {
        let mut v: Vec<Vec<u8>> = concat_parts(dir)
            .split(|&b| b == b'\n')
            .map(<[u8]>::to_vec)
            .collect();
        v.sort();
        v
    };
    let h = lines(&hadoop);
    assert!(h.len() > 1000);
    assert!(
        h.contains(&b"A\tb\tc".to_vec()),
        "a line's first tab splits it"
    );
    assert!(
        h.contains(&b"lAst line\t".to_vec()),
        "a key alone gets a tab"
    );
    assert!(lines(&ours) == h, "Sluice's lines differ from Hadoop's");
}

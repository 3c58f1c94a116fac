//! Hadoop SequenceFiles, checked against Hadoop's own writer and reader
//! (`tests/minidfs`'s `SeqFiles`, hadoop-common 3.4.1's
//! `SequenceFile.Writer` and `SequenceFile.Reader`): word count over files
//! Hadoop wrote with no, record and block compression equals the text's,
//! one file giving many maps; damage fails naming the file and offset.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::{concat_parts, fails, maven_classpath, ok, sluice, wordcount};

/// Lines of words, deterministic: `n` lines of 1 to 12 words from a
/// vocabulary of 500.
pub fn text_lines(n: usize) -> String {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut s = String::new();
    for _ in 0..n {
        let words = 1 + next() % 12;
        for w in 0..words {
            if w > 0 {
                s.push(' ');
            }
            s.push_str(&format!("w{}", next() % 500));
        }
        s.push('\n');
    }
    s
}

/// Runs `SeqFiles ARGS`, `input` on its standard input; its standard output.
pub fn hadoop_seqfiles(args: &[&str], input: &[u8]) -> String {
    let cp = maven_classpath("tests/minidfs", "minidfs-1.0.jar");
    let mut child = Command::new("java")
        .args(["-cp", &cp, "sluice.minidfs.SeqFiles"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting java");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "SeqFiles {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// A SequenceFile Hadoop wrote from `text`: `kind` none, record or block,
/// `codec` default, gzip, bzip2 or snappy; `LongWritable` keys and `Text`
/// values; compressed blocks of 16 KiB.
fn hadoop_file(dir: &Path, text: &str, kind: &str, codec: &str) -> PathBuf {
    let path = dir.join(format!("{kind}-{codec}.seq"));
    let p = path.to_string_lossy();
    let args = ["write", &p, kind, codec, "long", "text", "16384"];
    assert_eq!(hadoop_seqfiles(&args, text.as_bytes()).trim(), "ok");
    path
}

#[test]
fn sequencefiles_from_hadoop_count_as_the_text_with_many_maps() {
    let d = tempfile::tempdir().unwrap();
    let text = text_lines(20_000);
    let plain = d.path().join("words.txt");
    std::fs::write(&plain, &text).unwrap();
    let (want, _) = wordcount(d.path(), "plain", &plain, &[]);
    let cases = [
        ("none", "default"),
        ("record", "default"),
        ("block", "default"),
        ("record", "gzip"),
        ("block", "gzip"),
        ("block", "bzip2"),
        ("record", "snappy"),
        ("block", "snappy"),
    ];
    let sub = d.path().join("seq");
    std::fs::create_dir(&sub).unwrap();
    for (kind, codec) in cases {
        let file = hadoop_file(&sub, &text, kind, codec);
        let name = format!("{kind}-{codec}");
        let (got, report) = wordcount(d.path(), &name, &file, &["--split-size", "32KiB"]);
        assert!(got == want, "{name}: counts differ from the text's");
        let len = std::fs::metadata(&file).unwrap().len();
        let maps = report["maps"].as_u64().unwrap();
        assert_eq!(maps, len.div_ceil(32 << 10), "{name}: a map a split");
        assert_eq!(report["counters"]["MAP_INPUT_RECORDS"], 20_000, "{name}");
    }
}

#[test]
fn damaged_sequencefiles_fail_naming_the_file_and_offset_and_commit_nothing() {
    let d = tempfile::tempdir().unwrap();
    let text = text_lines(5_000);
    let record = hadoop_file(d.path(), &text, "record", "default");
    let block = hadoop_file(d.path(), &text, "block", "default");
    let bytes = std::fs::read(&record).unwrap();
    let first = syncs(&bytes)[0];
    let cut = d.path().join("cut.seq");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let mut bad_sync = bytes.clone();
    bad_sync[first + 9] ^= 1;
    let bad_sync_file = d.path().join("badsync.seq");
    std::fs::write(&bad_sync_file, &bad_sync).unwrap();
    let mut blocks = std::fs::read(&block).unwrap();
    // Inside the second block's first compressed buffer (after the sync,
    // the record count and the buffer's length).
    let second = syncs(&blocks)[1];
    blocks[second + 28] ^= 0xff;
    let bad_block = d.path().join("badblock.seq");
    std::fs::write(&bad_block, &blocks).unwrap();
    let cases: [(&Path, String); 3] = [
        (&cut, "truncated at offset".into()),
        (
            &bad_sync_file,
            format!("corrupt at offset {first}: bad sync marker"),
        ),
        (&bad_block, format!("at offset {second}")),
    ];
    for (file, want) in cases {
        let out = d.path().join("out");
        let err = fails(
            sluice()
                .args(["run", "wordcount", "-q", "--split-size", "16KiB", "--input"])
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
    let out = d.path().join("out");
    let err = fails(
        sluice()
            .args(["run", "wordcount", "-q", "--column", "nope", "--input"])
            .arg(&record)
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("record-default.seq") && err.contains("has no column nope"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is committed");
}

/// Where the sync markers (escape and hash) of a SequenceFile with a
/// `DefaultCodec` header start.
fn syncs(bytes: &[u8]) -> Vec<usize> {
    // The header: "SEQ" 6, the two class names, the two flags, the codec,
    // the metadata count (0), then the sync.
    let at = 0x40 + 2 + 1 + "org.apache.hadoop.io.compress.DefaultCodec".len() + 4;
    let mark = [&[0xff; 4][..], &bytes[at..at + 16]].concat();
    let body = at + 16;
    bytes[body..]
        .windows(mark.len())
        .enumerate()
        .filter(|(_, w)| *w == &mark[..])
        .map(|(i, _)| body + i)
        .collect()
}

/// `job` over `input` into `dir/NAME` with `extra` flags.
fn run_job(dir: &Path, name: &str, job: &[&str], input: &Path, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    ok(sluice()
        .arg("run")
        .args(job)
        .args(["-q", "--threads", "2", "--reducers", "2"])
        .args(extra)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap());
    out
}

/// The records of each part file in `dir` as Hadoop's reader gives them:
/// the header line of the last, then `key TAB value` lines (`key` when
/// the value is empty), sorted.
fn read_by_hadoop(dir: &Path) -> (String, Vec<String>) {
    let mut header = String::new();
    let mut lines = Vec::new();
    for p in crate::support::part_files(dir) {
        let text = hadoop_seqfiles(&["read", &p.to_string_lossy()], b"");
        let mut it = text.lines();
        header = it.next().unwrap().to_owned();
        // A key alone (Sluice's text has no tab) is an empty Text value.
        lines.extend(it.map(|l| l.strip_suffix('\t').unwrap_or(l).to_owned()));
    }
    lines.sort();
    (header, lines)
}

fn sorted_lines(dir: &Path) -> Vec<String> {
    let text = String::from_utf8(concat_parts(dir)).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

#[test]
fn sluices_sequencefiles_read_back_by_hadoop() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("words.txt");
    std::fs::write(&input, text_lines(3_000)).unwrap();
    let text = run_job(d.path(), "text", &["wordcount"], &input, &[]);
    let seq = run_job(
        d.path(),
        "seq",
        &["wordcount"],
        &input,
        &["--output-format", "sequencefile"],
    );
    let (header, got) = read_by_hadoop(&seq);
    assert_eq!(
        header,
        "org.apache.hadoop.io.Text org.apache.hadoop.io.LongWritable NONE none"
    );
    assert_eq!(got, sorted_lines(&text));
    // Text values for the other jobs; and Sluice reads its own files back.
    let grep = ["grep", "--pattern", "w1[0-9]"];
    let text = run_job(d.path(), "gtext", &grep, &input, &[]);
    let seq = run_job(
        d.path(),
        "gseq",
        &grep,
        &input,
        &["--output-format", "sequencefile"],
    );
    let (header, got) = read_by_hadoop(&seq);
    assert_eq!(
        header,
        "org.apache.hadoop.io.Text org.apache.hadoop.io.Text NONE none"
    );
    assert_eq!(got, sorted_lines(&text));
    let back = run_job(d.path(), "back", &["wordcount"], &seq, &["--column", "key"]);
    let again = run_job(d.path(), "again", &["wordcount"], &text, &[]);
    assert!(!sorted_lines(&again).is_empty());
    assert_eq!(sorted_lines(&back), sorted_lines(&again));
}

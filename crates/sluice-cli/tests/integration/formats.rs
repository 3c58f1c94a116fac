//! Input formats other than plain text, each checked against files other
//! tools wrote: compressed text from the `bzip2`, `zstd` and `lz4`
//! commands.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{concat_parts, fails, ok, read_json, sluice};

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

/// Word count of `input` into `dir/NAME`: the sorted output and the report.
fn wordcount(dir: &Path, name: &str, input: &Path, extra: &[&str]) -> (Vec<u8>, serde_json::Value) {
    let out = dir.join(name);
    let report = dir.join(format!("{name}.json"));
    ok(sluice()
        .args([
            "run",
            "wordcount",
            "-q",
            "--threads",
            "2",
            "--reducers",
            "1",
        ])
        .args(extra)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    (concat_parts(&out), read_json(&report))
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

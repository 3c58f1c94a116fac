//! Many small files as a user meets them on a cluster: a tree of tiny and
//! empty files put and read back whole; word count over them in a few
//! packed maps with the local engine's answer; a packed map whose worker
//! dies runs again elsewhere; a file that cannot be read fails the put and
//! leaves no data set and no block behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

/// Cuts the lines of the files of `data` into files of about `lines` lines each under
/// `dir` (some in nested directories, one empty); returns them all
/// concatenated, in no particular order, as one file beside `dir`.
fn small_files(data: &Path, dir: &Path, lines: usize) -> PathBuf {
    let text: Vec<u8> = tree(data).into_iter().flat_map(|(_, b)| b).collect();
    let all: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
    for (i, chunk) in all.chunks(lines).enumerate() {
        let sub = match i % 3 {
            0 => dir.to_owned(),
            1 => dir.join("2026").join("11"),
            _ => dir.join("2026").join("12"),
        };
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{i:05}.log")), chunk.concat()).unwrap();
    }
    std::fs::write(dir.join("empty.log"), b"").unwrap();
    let flat = dir.with_extension("all");
    std::fs::write(&flat, &text).unwrap();
    flat
}

/// Every file under `dir`, by path below it, with its bytes.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_tree_of_small_files_is_put_whole_and_counted_in_a_few_maps() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "2MB");
    let files = d.path().join("files");
    let flat = small_files(&data, &files, 3);
    let n = tree(&files).len();
    assert!(n > 9_000, "{n} files");
    let c = Cluster::up(d.path(), 2, "");
    let out = ok(c
        .cmd(&["put"])
        .arg(&files)
        .args(["--dataset", "small"])
        .output()
        .unwrap());
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    // The empty file has no block.
    let blocks = n - 1;
    assert!(
        said.contains(&format!("{n} files, {blocks} blocks")),
        "{said}"
    );
    // Read back: the same tree, nested directories and the empty file too.
    let got = d.path().join("got");
    get(&c, "small", &got);
    assert_eq!(tree(&got), tree(&files));

    let report = d.path().join("report.json");
    ok(submit_wc(&c, "small", "counts")
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    let r = read_json(&report);
    let maps = r["maps"].as_u64().unwrap();
    assert!(maps <= 4, "{blocks} blocks packed into a few maps: {r}");
    assert_eq!(r["input_pieces"].as_u64(), Some(blocks as u64), "{r}");
    assert_eq!(
        r["cluster"]["maps_by_level"]["node"].as_u64(),
        Some(maps),
        "each packed map on the worker holding its blocks: {r}"
    );
    counts_match_local(&c, d.path(), &flat);

    // Asked for, every block is a map of its own, as Hadoop's
    // TextInputFormat would have it (on a few of the files).
    let few = d.path().join("few");
    std::fs::create_dir_all(&few).unwrap();
    for (name, bytes) in tree(&files).into_iter().take(30) {
        std::fs::write(few.join(name.replace('/', "-")), bytes).unwrap();
    }
    put(&c, &few, "few", "128MB", "1");
    let unpacked = d.path().join("unpacked.json");
    ok(submit_wc(&c, "few", "counts2")
        .args(["--no-combine", "--report"])
        .arg(&unpacked)
        .output()
        .unwrap());
    let r = read_json(&unpacked);
    let few_blocks = tree(&few).iter().filter(|(_, b)| !b.is_empty()).count();
    assert_eq!(r["maps"].as_u64(), Some(few_blocks as u64), "{r}");
}

#[test]
fn a_packed_map_whose_worker_dies_runs_again_elsewhere() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "12MB");
    let files = d.path().join("files");
    let flat = small_files(&data, &files, 400);
    let c = Cluster::up(
        d.path(),
        3,
        "--worker-timeout-ms 1000 --heartbeat-ms 100 --delay-node 2",
    );
    put(&c, &files, "small", "128MB", "2");
    let report = d.path().join("report.json");
    let job = submit_wc(&c, "small", "counts")
        .args(["--split-size", "1MB", "--report"])
        .arg(&report)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let victim = c.worker_pids()[0];
    poll(|| running_a_task(victim).then_some(()));
    signal(victim, "KILL");
    ok(job.wait_with_output().unwrap());
    let r = read_json(&report);
    assert!(
        r["cluster"]["attempts"]["lost"].as_u64().unwrap() >= 1,
        "{r}"
    );
    assert!(
        r["input_pieces"].as_u64().unwrap() > r["maps"].as_u64().unwrap(),
        "packed: {r}"
    );
    counts_match_local(&c, d.path(), &flat);
}

#[test]
fn a_file_that_cannot_be_read_fails_the_put_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let files = d.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    for i in 0..200 {
        std::fs::write(files.join(format!("a{i:03}.log")), format!("line {i}\n")).unwrap();
    }
    // Listed as a file, but every read of it fails (EIO): as a file that
    // vanishes or whose disk fails while it is being put.
    std::os::unix::fs::symlink("/proc/self/mem", files.join("zz.log")).unwrap();
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 100");
    let out = c
        .cmd(&["put"])
        .arg(&files)
        .args(["--dataset", "broken"])
        .output()
        .unwrap();
    let err = fails(out);
    assert!(err.contains("zz.log"), "the file is named: {err}");
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    assert!(
        !String::from_utf8_lossy(&ls.stdout).contains("broken"),
        "no data set registered"
    );
    // The blocks already stored are deleted: no orphan block.
    poll(|| {
        let left: usize = c.data_dirs().iter().map(|d| block_files(d).len()).sum();
        std::thread::sleep(Duration::from_millis(50));
        (left == 0).then_some(())
    });
}

/// The data sets `sluice ls` lists.
fn names(c: &Cluster) -> Vec<String> {
    let Ok(out) = c.cmd(&["ls"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_catalog_is_whole_after_the_coordinator_is_killed_during_puts() {
    let d = tempfile::tempdir().unwrap();
    let c = Cluster::unsupervised(d.path(), 2, "--heartbeat-ms 100");
    // Sources of many small puts: five files each.
    let sources: Vec<PathBuf> = (0..40)
        .map(|i| {
            let dir = d.path().join(format!("src{i:02}"));
            std::fs::create_dir_all(&dir).unwrap();
            for j in 0..5 {
                let text = format!("put {i} file {j}\n").repeat(50 + j);
                std::fs::write(dir.join(format!("f{j}.log")), text).unwrap();
            }
            dir
        })
        .collect();
    let pid = c.coordinator_pid();
    let argv = argv_of(pid);
    // Puts one after another until one fails (the coordinator is gone);
    // returns the names acknowledged.
    let putter = {
        let (dir, sources) = (c.dir.clone(), sources.clone());
        std::thread::spawn(move || {
            let mut done = Vec::new();
            for (i, src) in sources.iter().enumerate() {
                let name = format!("p{i:02}");
                let out = sluice()
                    .args(["put", "--wait-coordinator", "0", "--dataset", &name])
                    .arg("--cluster")
                    .arg(&dir)
                    .arg(src)
                    .output()
                    .unwrap();
                if !out.status.success() {
                    break;
                }
                done.push(name);
            }
            done
        })
    };
    // Killed while puts are landing: some acknowledged, one perhaps half
    // written.
    poll(|| (names(&c).len() >= 5).then_some(()));
    signal(pid, "KILL");
    let acknowledged = putter.join().unwrap();
    assert!(acknowledged.len() >= 5 && acknowledged.len() < sources.len());
    let _again = restart_coordinator(&c, &argv, 2);
    // Every acknowledged put is there, whole; any other data set (the put
    // cut short) is whole too or absent.
    let listed = names(&c);
    for name in &acknowledged {
        assert!(listed.contains(name), "{name} lost: {listed:?}");
    }
    for (i, src) in sources.iter().enumerate() {
        let name = format!("p{i:02}");
        if !listed.contains(&name) {
            continue;
        }
        let got = d.path().join(format!("got-{name}"));
        get(&c, &name, &got);
        assert_eq!(tree(&got), tree(src), "{name}");
    }
    // And the catalog takes changes again.
    ok(c.cmd(&["put", "--dataset", "after"])
        .arg(&sources[0])
        .output()
        .unwrap());
}

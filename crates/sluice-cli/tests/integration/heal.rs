//! A block store that heals: blocks left short of replicas by a SIGKILLed
//! worker or a damaged replica are copied to other workers until each has
//! the replicas its data set asks for; the copies are verified, so the
//! data reads back whole from them alone.

use std::path::Path;

use crate::support::*;

/// `sluice ls`'s line for data set `name`.
fn ls_line(c: &Cluster, name: &str) -> String {
    let out = ok(c.cmd(&["ls"]).output().unwrap());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let prefix = format!("{name} ");
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{name} not listed:\n{text}"))
        .to_owned()
}

/// Waits until every block of `name` has `n` intact replicas on live
/// workers.
fn healed(c: &Cluster, name: &str, n: u32) -> String {
    poll(|| {
        let line = ls_line(c, name);
        (line.contains(&format!("replicas>={n}")) && !line.contains("fewer than")).then_some(line)
    })
}

fn blocks_of(dir: &Path) -> Vec<String> {
    block_files(dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('j'))
        .collect()
}

#[test]
fn a_lost_worker_and_a_damaged_replica_are_healed_by_verified_copies() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let c = Cluster::up_with(
        d.path(),
        3,
        "--worker-timeout-ms 1000 --heartbeat-ms 100",
        "--scan-rate 1GB/s --scan-period-s 0.3 --block-report-ms 300",
    );
    put(&c, &data, "words", "256KB", "2");
    let dirs = c.data_dirs();
    let pids = c.worker_pids();
    let total: usize = dirs.iter().map(|d| blocks_of(d).len()).sum();
    let blocks = total / 2;
    assert!(blocks >= 10, "{blocks} blocks");

    // A replica damaged on worker 0: the scanner finds it, and a copy
    // from the intact replica takes its place on another worker.
    let victim = blocks_of(&dirs[0])[0].clone();
    std::fs::write(dirs[0].join("blocks").join(&victim), b"overwritten").unwrap();
    poll(|| (!dirs[0].join("blocks").join(&victim).exists()).then_some(()));
    healed(&c, "words", 2);
    let holders = dirs[1..]
        .iter()
        .filter(|d| d.join("blocks").join(&victim).exists())
        .count();
    assert_eq!(holders, 2, "{victim} copied to the third worker");

    // Worker 0 killed: its blocks are copied to the two others, which
    // then hold every block.
    signal(pids[0], "KILL");
    wait_until_lost(&c, 1);
    let line = healed(&c, "words", 2);
    for dir in &dirs[1..] {
        assert_eq!(blocks_of(dir).len(), blocks, "{line}");
    }

    // The copies alone are the data: worker 1 killed too, everything
    // reads back from worker 2.
    signal(pids[1], "KILL");
    wait_until_lost(&c, 2);
    let out = d.path().join("back");
    get(&c, "words", &out);
    // One file put is one file got back.
    let back = if out.is_dir() {
        concat_parts(&out)
    } else {
        std::fs::read(&out).unwrap()
    };
    let orig = concat_parts(&data);
    assert_eq!(back.len(), orig.len());
    assert!(
        back == orig,
        "the data read back from the copies is the data put"
    );
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn no_copies_are_made_when_re_replication_is_off() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let c = Cluster::up(
        d.path(),
        3,
        "--worker-timeout-ms 1000 --heartbeat-ms 100 --replication-streams 0",
    );
    put(&c, &data, "words", "256KB", "2");
    let pid = c.worker_pids()[0];
    let held = blocks_of(&c.data_dirs()[0]).len();
    assert!(held > 0);
    signal(pid, "KILL");
    wait_until_lost(&c, 1);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let line = ls_line(&c, "words");
    assert!(
        line.contains(&format!("{held} blocks with fewer than 2")),
        "{line}"
    );
}

#[test]
fn a_lost_worker_that_returns_leaves_no_block_with_excess_replicas() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "3MB");
    let c = Cluster::up(d.path(), 3, "--worker-timeout-ms 1000 --heartbeat-ms 100");
    put(&c, &data, "words", "256KB", "2");
    let dirs = c.data_dirs();
    let pid = c.worker_pids()[0];
    let argv = argv_of(pid);
    let held = blocks_of(&dirs[0]);
    assert!(!held.is_empty());
    signal(pid, "KILL");
    wait_until_lost(&c, 1);
    healed(&c, "words", 2);
    // Worker 0 comes back with its replicas: each of its blocks now has
    // three live replicas, one more than asked, until one goes.
    let back = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _back = KillOnDrop(back);
    let copies = |id: &str| {
        dirs.iter()
            .filter(|d| d.join("blocks").join(id).exists())
            .count()
    };
    let all: Vec<String> = {
        let mut v: Vec<String> = dirs.iter().flat_map(|d| blocks_of(d)).collect();
        v.sort();
        v.dedup();
        v
    };
    poll(|| all.iter().all(|id| copies(id) == 2).then_some(()));
    // The catalog agrees: every block lists two replicas, all live.
    let listing = String::from_utf8(ok(c.cmd(&["ls", "words"]).output().unwrap()).stdout).unwrap();
    let rows: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains(" replicas "))
        .collect();
    assert_eq!(rows.len(), all.len(), "{listing}");
    for row in rows {
        let replicas = row
            .split(" replicas ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        assert_eq!(replicas.split(',').count(), 2, "{row}");
    }
    assert!(ls_line(&c, "words").contains("replicas>=2"));
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    counts_match_local(&c, d.path(), &data);
}

/// A process killed when the test ends (one `cluster down` does not know).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

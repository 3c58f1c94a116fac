//! Block integrity as a user meets it: replicas damaged on a worker's disk
//! in every way (truncated, emptied, bytes overwritten, deleted, replaced by
//! another block), a full disk, orphan blocks. A damaged replica never
//! changes an answer: the job reads an intact one, or fails naming every
//! copy; nothing partial is committed, nothing is left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;

/// Bytes of each full block: 16-byte lines fill 256 KB blocks exactly, so
/// every block but the last has this length (for swapping blocks).
const BLOCK: u64 = 256_000;

/// A text file of `bytes` bytes of 16-byte lines (`w0001234 x00042`).
fn fixed_width(dir: &Path, bytes: usize) -> PathBuf {
    let path = dir.join("lines.txt");
    let text: String = (0..bytes / 16)
        .map(|i| format!("w{:07} x{:05}\n", (i * 7919) % 50_000, i % 977))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// The ways a stored replica is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Harm {
    Truncated,
    Emptied,
    Overwritten,
    Deleted,
    Replaced,
}

const HARMS: [Harm; 5] = [
    Harm::Truncated,
    Harm::Emptied,
    Harm::Overwritten,
    Harm::Deleted,
    Harm::Replaced,
];

impl Harm {
    /// Damages `block` (`other` is a block of the same length).
    fn apply(self, block: &Path, other: &Path) {
        match self {
            Harm::Truncated => truncate(block, 1000),
            Harm::Emptied => truncate(block, 0),
            Harm::Overwritten => {
                let mut b = std::fs::read(block).unwrap();
                let mid = b.len() / 2;
                b[mid..mid + 8].copy_from_slice(b"ZZZZZZZZ");
                std::fs::write(block, b).unwrap();
            }
            Harm::Deleted => std::fs::remove_file(block).unwrap(),
            Harm::Replaced => {
                assert_ne!(std::fs::read(block).unwrap(), std::fs::read(other).unwrap());
                std::fs::copy(other, block).unwrap();
            }
        }
    }

    /// What a reader reports about a replica harmed so (of BLOCK bytes).
    fn evidence(self) -> String {
        match self {
            Harm::Truncated => format!("1000 bytes of {BLOCK}"),
            Harm::Emptied => format!("0 bytes of {BLOCK}"),
            Harm::Overwritten | Harm::Replaced => "checksum mismatch".into(),
            Harm::Deleted => "block file missing".into(),
        }
    }
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn id_of(block: &Path) -> String {
    block.file_name().unwrap().to_string_lossy().into_owned()
}

/// Full-length blocks on a worker, by path. A file deleted while it is
/// listed (a failed job's outputs, a removed data set's blocks: workers
/// delete them after the coordinator says so) is not one.
fn full_blocks(data_dir: &Path) -> Vec<PathBuf> {
    block_files(data_dir)
        .into_iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() == BLOCK))
        .collect()
}

/// Every worker's full blocks once no worker is still deleting any: the
/// same listing twice, half a second apart.
fn settled_full_blocks(dirs: &[PathBuf]) -> Vec<Vec<PathBuf>> {
    let list = || dirs.iter().map(|w| full_blocks(w)).collect::<Vec<_>>();
    let mut last = list();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = list();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// Harms every full block of `data_dir`, the kinds in turn; returns what
/// was done to which block id.
fn harm_all(data_dir: &Path) -> Vec<(String, Harm)> {
    let blocks = full_blocks(data_dir);
    assert!(blocks.len() >= 6, "{blocks:?}");
    // Replacements copy an untouched block: the last one is left intact.
    let (victims, spare) = blocks.split_at(blocks.len() - 1);
    victims
        .iter()
        .zip(HARMS.iter().cycle())
        .map(|(b, &h)| {
            h.apply(b, &spare[0]);
            (id_of(b), h)
        })
        .collect()
}

fn ls(c: &Cluster) -> String {
    String::from_utf8_lossy(&ok(c.cmd(&["ls"]).output().unwrap()).stdout).into_owned()
}

/// The `ls` line about block `id`, if it is listed as damaged.
fn damaged_line(ls: &str, id: &str) -> Option<String> {
    ls.lines()
        .find(|l| l.trim_start().starts_with(&format!("block {id}:")) && l.contains("damaged"))
        .map(str::to_owned)
}

#[test]
fn a_damaged_replica_never_changes_an_answer() {
    let d = tempfile::tempdir().unwrap();
    let data = fixed_width(d.path(), 3_000_000);
    let c = Cluster::up_with(
        d.path(),
        3,
        "--heartbeat-ms 100 --replication-streams 0",
        "--scan-rate 0",
    );
    put(&c, &data, "words", "256KB", "2");
    let w0 = c.data_dirs()[0].clone();
    let harmed = harm_all(&w0);
    let report = d.path().join("report.json");
    ok(submit_wc(&c, "words", "counts")
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    counts_match_local(&c, d.path(), &data);
    // The data set comes back whole too, read around damaged replicas.
    let back = d.path().join("back.txt");
    get(&c, "words", &back);
    assert!(std::fs::read(&back).unwrap() == std::fs::read(&data).unwrap());
    // What readers met is reported, with its evidence, and removed.
    let ls = ls(&c);
    assert!(
        ls.contains("blocks with fewer than 2 intact replicas"),
        "{ls}"
    );
    let mut met = 0;
    for (id, harm) in &harmed {
        if let Some(line) = damaged_line(&ls, id) {
            assert!(line.contains(&harm.evidence()), "{harm:?}: {line}");
            poll(|| (!w0.join("blocks").join(id).exists()).then_some(()));
            met += 1;
        }
    }
    assert!(met > 0, "no damage reported:\n{ls}");
    // The job's report counts the damaged replicas its attempts met.
    let r = read_json(&report);
    assert_eq!(r["cluster"]["state"], "succeeded", "{r}");
    assert!(
        r["cluster"]["attempts"]["damaged_replicas"]
            .as_u64()
            .unwrap()
            > 0,
        "{r}"
    );
}

#[test]
fn the_block_scanner_and_block_reports_find_damage_before_a_job_does() {
    let d = tempfile::tempdir().unwrap();
    let data = fixed_width(d.path(), 3_000_000);
    let c = Cluster::up_with(
        d.path(),
        3,
        "--heartbeat-ms 100 --replication-streams 0",
        "--scan-rate 1GB/s --scan-period-s 0.3 --block-report-ms 300",
    );
    put(&c, &data, "words", "256KB", "2");
    let w0 = c.data_dirs()[0].clone();
    let harmed = harm_all(&w0);
    // Every damaged replica is found and reported with its evidence (a
    // deleted one by the block report, which lacks it).
    let ls = poll(|| {
        let ls = ls(&c);
        harmed
            .iter()
            .all(|(id, _)| damaged_line(&ls, id).is_some())
            .then_some(ls)
    });
    for (id, harm) in &harmed {
        let line = damaged_line(&ls, id).unwrap();
        assert!(line.contains(&harm.evidence()), "{harm:?}: {line}");
        assert!(line.contains("1 of 2 replicas intact"), "{line}");
    }
    // Damaged replicas are deleted; a job never meets them.
    for (id, _) in &harmed {
        poll(|| (!w0.join("blocks").join(id).exists()).then_some(()));
    }
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn a_block_with_no_intact_replica_fails_the_job_naming_every_copy() {
    let d = tempfile::tempdir().unwrap();
    let data = fixed_width(d.path(), 1_500_000);
    let c = Cluster::up_with(
        d.path(),
        3,
        "--heartbeat-ms 100 --replication-streams 0",
        "--scan-rate 0",
    );
    // Both replicas of one block damaged.
    put(&c, &data, "words", "256KB", "2");
    let dirs = c.data_dirs();
    let id = id_of(&full_blocks(&dirs[0])[0]);
    let holders: Vec<&PathBuf> = dirs
        .iter()
        .filter(|w| w.join("blocks").join(&id).exists())
        .collect();
    assert_eq!(holders.len(), 2);
    Harm::Truncated.apply(&holders[0].join("blocks").join(&id), Path::new(""));
    Harm::Overwritten.apply(&holders[1].join("blocks").join(&id), Path::new(""));
    let err = fails(submit_wc(&c, "words", "counts").output().unwrap());
    assert!(
        err.contains(&format!(
            "block {id} of data set words has no intact replica"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("1000 bytes of {BLOCK}")), "{err}");
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(!ls(&c).contains("counts"), "nothing is committed");

    // With one replica, each kind of damage fails the job the same way.
    for (i, harm) in HARMS.iter().enumerate() {
        let name = format!("one{i}");
        let before = settled_full_blocks(&dirs);
        put(&c, &data, &name, "256KB", "1");
        // A new block, and another full block on its worker with other bytes.
        let (block, other) = dirs
            .iter()
            .zip(&before)
            .find_map(|(w, old)| {
                let all = full_blocks(w);
                let new = all.iter().find(|b| !old.contains(b))?;
                let bytes = std::fs::read(new).unwrap();
                let other = all
                    .iter()
                    .find(|b| std::fs::read(b).is_ok_and(|o| o != bytes))?;
                Some((new.clone(), other.clone()))
            })
            .unwrap();
        harm.apply(&block, &other);
        let err = fails(submit_wc(&c, &name, "counts").output().unwrap());
        assert!(err.contains("has no intact replica"), "{harm:?}: {err}");
        assert!(err.contains(&harm.evidence()), "{harm:?}: {err}");
        assert!(!ls(&c).contains("counts"), "{harm:?}: nothing is committed");
        // The last copy is never deleted on a reader's word: it stays on
        // disk, marked and unread, in case the fault was the reader's.
        if *harm != Harm::Deleted {
            std::thread::sleep(Duration::from_millis(500));
            assert!(block.exists(), "{harm:?}: the last copy was deleted");
        }
        // The data set says so, and `get` fails naming the block.
        let got = c
            .cmd(&["get", &name])
            .arg(d.path().join(&name))
            .output()
            .unwrap();
        assert!(fails(got).contains("no intact replica"));
        assert!(!d.path().join(&name).exists());
        ok(c.cmd(&["rm", &name]).output().unwrap());
    }
}

/// A tiny deterministic generator for the property test.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn no_single_flipped_byte_of_any_stored_file_changes_an_answer() {
    let d = tempfile::tempdir().unwrap();
    let data = fixed_width(d.path(), 600_000);
    let c = Cluster::up_with(
        d.path(),
        3,
        "--heartbeat-ms 100 --replication-streams 0",
        "--scan-rate 0",
    );
    let local_out = local(d.path(), &data, WC);
    let mut rng = Rng(0x5eed_cafe_f00d_1234);
    let dirs = c.data_dirs();
    for round in 0..12 {
        let before: Vec<Vec<PathBuf>> = dirs.iter().map(|w| stored_files(w)).collect();
        let name = format!("p{round}");
        put(&c, &data, &name, "64KB", "2");
        // The new block and checksum files of this data set, anywhere.
        let fresh: Vec<PathBuf> = dirs
            .iter()
            .zip(&before)
            .flat_map(|(w, old)| {
                stored_files(w)
                    .into_iter()
                    .filter(move |f| !old.contains(f))
            })
            .collect();
        let victim = &fresh[rng.below(fresh.len())];
        let mut bytes = std::fs::read(victim).unwrap();
        let at = rng.below(bytes.len());
        bytes[at] ^= 1 << rng.below(8);
        std::fs::write(victim, bytes).unwrap();
        let out_name = format!("c{round}");
        let job = submit_wc(&c, &name, &out_name).output().unwrap();
        let what = format!("round {round}: byte {at} of {}", victim.display());
        assert!(
            job.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&job.stderr)
        );
        let got = d.path().join(&out_name);
        get(&c, &out_name, &got);
        for part in std::fs::read_dir(&local_out).unwrap() {
            let part = part.unwrap();
            let mine = std::fs::read(got.join(part.file_name())).unwrap();
            assert!(mine == std::fs::read(part.path()).unwrap(), "{what}");
        }
    }
}

/// Every stored file (blocks and checksum files) of a worker.
fn stored_files(data_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(data_dir.join("blocks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect()
}

/// Block ids the coordinator's catalog holds, with their replicas, as
/// `sluice ls` and `sluice ls NAME` list them.
fn catalog_blocks(c: &Cluster) -> Vec<(String, Vec<String>)> {
    let ls = ok(c.cmd(&["ls"]).output().unwrap());
    let names: Vec<String> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    let mut out = Vec::new();
    for name in names {
        let blocks = ok(c.cmd(&["ls", &name]).output().unwrap());
        for line in String::from_utf8_lossy(&blocks.stdout).lines() {
            // `   0 ID   LEN bytes  replicas A,B[  damaged on C]`
            let words: Vec<&str> = line.split_whitespace().collect();
            let replicas = match words.get(5) {
                Some(&list) if list != "damaged" => list.split(',').map(str::to_owned).collect(),
                _ => Vec::new(),
            };
            out.push((words[1].to_owned(), replicas));
        }
    }
    out
}

/// How the workers' block files differ from the catalog's replicas: a
/// file no data set holds there, a replica without its file or checksum
/// file. Empty when they agree.
fn strays(c: &Cluster) -> Vec<String> {
    let cat = catalog_blocks(c);
    let mut out = Vec::new();
    for (w, dir) in c.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .zip(c.data_dirs())
    {
        let uid = w["uid"].as_str().unwrap();
        let held: Vec<String> = stored_files(&dir).iter().map(|p| id_of(p)).collect();
        let want: Vec<&String> = cat
            .iter()
            .filter(|(_, r)| r.iter().any(|u| u == uid))
            .map(|(id, _)| id)
            .collect();
        for f in &held {
            let id = f.strip_suffix(".meta").unwrap_or(f);
            if !want.iter().any(|w| *w == id) {
                out.push(format!("{uid}: stray {f}"));
            }
        }
        for id in want {
            for f in [id.clone(), format!("{id}.meta")] {
                if !held.contains(&f) {
                    out.push(format!("{uid}: missing {f}"));
                }
            }
        }
    }
    out
}

fn no_orphans(c: &Cluster) {
    let s = strays(c);
    assert!(s.is_empty(), "{s:?}");
}

/// A small tmpfs mounted at a path, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts `size` of tmpfs at `at`, or says why not (not root, no mount).
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        if !root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        std::fs::create_dir_all(at).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status();
        if !st.is_ok_and(|s| s.success()) {
            eprintln!("skipped: cannot mount a tmpfs here");
            return None;
        }
        Some(Tmpfs(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the file system at `dir` until `leave` bytes are free.
fn fill(dir: &Path, leave: u64) {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    let avail: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let f = std::fs::File::create(dir.join("filler")).unwrap();
    f.set_len(0).unwrap();
    use std::io::Write;
    let mut w = std::io::BufWriter::new(f);
    let chunk = vec![7u8; 1 << 16];
    let mut left = avail.saturating_sub(leave);
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if w.write_all(&chunk[..n]).is_err() {
            break;
        }
        left -= n as u64;
    }
    let _ = w.flush();
}

#[test]
fn a_full_disk_fails_writes_cleanly_and_leaves_no_orphans() {
    let d = tempfile::tempdir().unwrap();
    let data = fixed_width(d.path(), 4_000_000);
    // Worker 1's data directory is a small tmpfs, mounted before it starts.
    let Some(_fs) = Tmpfs::mount(&d.path().join("cluster/worker-1"), "16m") else {
        return;
    };
    let c = Cluster::up_with(
        d.path(),
        3,
        "--heartbeat-ms 100 --replication-streams 0",
        "--scan-rate 0",
    );
    let full = c.data_dirs()[1].clone();
    fill(&full, 300_000);
    // The put lands whole on the workers with room.
    put(&c, &data, "words", "256KB", "1");
    no_orphans(&c);
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    counts_match_local(&c, d.path(), &data);
    no_orphans(&c);
    // With three replicas asked of three workers, one full, the put fails
    // naming the worker and the cause, and every block it wrote goes.
    let out = c
        .cmd(&["put"])
        .arg(&data)
        .args([
            "--dataset",
            "three",
            "--block-size",
            "256KB",
            "--replication",
            "3",
        ])
        .output()
        .unwrap();
    let err = fails(out);
    let w1 = c.json()["workers"][1]["id"].as_u64().unwrap();
    assert!(err.contains(&format!("worker {w1} (")), "{err}");
    assert!(err.contains("no space left"), "{err}");
    assert!(!ls(&c).contains("three"));
    poll(|| strays(&c).is_empty().then_some(()));
}

#[test]
fn blocks_nothing_knows_are_deleted_after_the_grace_period() {
    let d = tempfile::tempdir().unwrap();
    let data = fixed_width(d.path(), 1_000_000);
    let c = Cluster::up_with(
        d.path(),
        2,
        "--heartbeat-ms 100 --orphan-grace-ms 1500",
        "--scan-rate 0 --block-report-ms 200",
    );
    put(&c, &data, "words", "256KB", "1");
    // A worker restarted with blocks the catalog does not know (a put
    // that died, a disk moved from another cluster).
    let pid = c.worker_pids()[0];
    let args = argv_of(pid);
    signal(pid, "KILL");
    let dir = c.data_dirs()[0].clone();
    let stray = dir.join("blocks/b99-1");
    std::fs::write(&stray, b"nobody's\n").unwrap();
    let log = std::fs::File::create(d.path().join("restarted.log")).unwrap();
    let mut child = std::process::Command::new(&args[0])
        .args(&args[1..])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    poll(|| (!stray.exists()).then_some(()));
    assert!(
        t.elapsed() >= Duration::from_millis(1000),
        "kept for the grace period"
    );
    // Its known blocks stay, and the data set reads whole.
    no_orphans(&c);
    let back = d.path().join("back.txt");
    get(&c, "words", &back);
    assert!(std::fs::read(&back).unwrap() == std::fs::read(&data).unwrap());
    let _ = child.kill();
    let _ = child.wait();
}

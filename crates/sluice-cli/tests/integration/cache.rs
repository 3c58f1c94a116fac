//! The block cache as a user meets it: directives added, listed and
//! removed on a real cluster, kept across a coordinator restart; maps
//! reading cached blocks give the local engine's answers; a damaged
//! replica is never admitted; a worker holding cached blocks killed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::*;

/// What `sluice cache ls` says each worker (by id) caches: blocks and
/// whether each is pinned; and the directive lines.
/// Each worker's cached blocks (id, pinned), by worker id.
type Cached = BTreeMap<String, Vec<(String, bool)>>;

fn cache_ls(c: &Cluster) -> (Cached, Vec<String>) {
    let out = ok(c.cmd(&["cache", "ls"]).output().unwrap());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut workers = BTreeMap::new();
    let mut directives = Vec::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("worker ") {
            let id = rest.split_whitespace().next().unwrap().to_owned();
            workers.insert(id.clone(), Vec::new());
            current = Some(id);
        } else if let Some(b) = line.strip_prefix("  ") {
            let pinned = b.ends_with("(pinned)");
            let id = b.split_whitespace().next().unwrap().to_owned();
            let w: &mut Vec<_> = workers.get_mut(current.as_ref().unwrap()).unwrap();
            w.push((id, pinned));
        } else if line.starts_with("directive ") {
            directives.push(line.to_owned());
        }
    }
    (workers, directives)
}

/// Pinned blocks over all workers, with how many workers pin each.
fn pinned(c: &Cluster) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for blocks in cache_ls(c).0.values() {
        for (b, p) in blocks {
            if *p {
                *n.entry(b.clone()).or_default() += 1;
            }
        }
    }
    n
}

/// Waits until `f` holds of the pinned blocks (30 s at most).
fn until_pinned(c: &Cluster, what: &str, f: impl Fn(&BTreeMap<String, usize>) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = pinned(c);
        if f(&now) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: pinned {now:?}\n{:?}",
            cache_ls(c)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The coordinator's pid and command line, to start it again.
fn coordinator_argv(c: &Cluster) -> (u32, Vec<String>) {
    let pid = c.coordinator_pid();
    (pid, argv_of(pid))
}

#[test]
fn directives_pin_blocks_survive_a_restart_and_go_with_their_data_set() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "4MB");
    let c = Cluster::unsupervised(d.path(), 2, "--heartbeat-ms 50");
    put(&c, &data, "words", "1MB", "2");
    let blocks = 4;
    // Every block, on one holder each.
    ok(c.cmd(&["cache", "add", "words"]).output().unwrap());
    until_pinned(&c, "one holder each", |p| {
        p.len() == blocks && p.values().all(|&n| n == 1)
    });
    // Block 0 on a named worker as well: whichever does not pin it yet.
    let (workers, _) = cache_ls(&c);
    let first_block = pinned(&c).keys().next().unwrap().clone();
    let other = workers
        .iter()
        .find(|(_, bs)| !bs.iter().any(|(b, p)| *p && *b == first_block))
        .map(|(id, _)| id.clone())
        .unwrap();
    let index = first_block_index(&c, &first_block);
    let add = c.cmd(&[
        "cache", "add", "words", "--block", &index, "--worker", &other,
    ]);
    ok({ add }.output().unwrap());
    until_pinned(&c, "block 0 twice", |p| p.get(&first_block) == Some(&2));
    assert_eq!(cache_ls(&c).1.len(), 2);
    // A bad directive is refused, naming what is wrong.
    let bad = fails(
        c.cmd(&["cache", "add", "words", "--block", "9"])
            .output()
            .unwrap(),
    );
    assert!(bad.contains("has 4 blocks"), "{bad}");
    // The coordinator restarts: the directives are in its catalog.
    let (pid, argv) = coordinator_argv(&c);
    signal(pid, "KILL");
    std::thread::sleep(Duration::from_millis(300));
    let _again = restart_coordinator(&c, &argv, 2);
    assert_eq!(cache_ls(&c).1.len(), 2, "{:?}", cache_ls(&c).1);
    until_pinned(&c, "after the restart", |p| {
        p.len() == blocks && p.get(&first_block) == Some(&2)
    });
    // Removing the second directive unpins block 0 on the named worker.
    ok(c.cmd(&["cache", "rm", "2"]).output().unwrap());
    until_pinned(&c, "directive 2 removed", |p| {
        p.get(&first_block) == Some(&1)
    });
    // Removing the data set removes its directives and its cached blocks.
    ok(c.cmd(&["rm", "words"]).output().unwrap());
    poll(|| {
        let (workers, directives) = cache_ls(&c);
        (directives.is_empty() && workers.values().all(Vec::is_empty)).then_some(())
    });
}

/// The index in data set `words` of block `id`, from `sluice ls words`.
fn first_block_index(c: &Cluster, id: &str) -> String {
    let out = ok(c.cmd(&["ls", "words"]).output().unwrap());
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(id))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("block {id} not in {text}"))
        .to_string()
}

/// Runs `job` on the cluster twice over `words` (the second time its
/// blocks are cached) and checks both outputs against the local engine's
/// (their part files, concatenated);
/// returns the second run's maps read from cache and its maps.
fn twice(c: &Cluster, dir: &Path, data: &Path, name: &str, job: &[&str]) -> (u64, u64) {
    let want = local(&dir.join(name), data, job);
    let mut from_cache = 0;
    let mut maps = 0;
    for run in 0..2 {
        let out = format!("{name}{run}");
        let report = dir.join(format!("{out}.json"));
        let mut cmd = c.submit(job);
        cmd.args(["--input", "words", "--output", &out, "--report"]);
        ok(cmd.arg(&report).output().unwrap());
        let got: PathBuf = dir.join(format!("got-{out}"));
        get(c, &out, &got);
        // Map-only and sampled jobs cut their parts where the cluster's
        // blocks and samples fall: the same records, in the same order.
        assert!(concat_parts(&got) == concat_parts(&want), "{name} differs");
        let r = read_json(&report);
        from_cache = r["cluster"]["cache"]["maps_from_cache"].as_u64().unwrap();
        maps = r["maps"].as_u64().unwrap();
    }
    (from_cache, maps)
}

#[test]
fn maps_reading_cached_blocks_give_the_local_engines_answers() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "6MB");
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 50");
    put(&c, &data, "words", "1MB", "1");
    std::fs::create_dir_all(d.path().join("wc")).unwrap();
    std::fs::create_dir_all(d.path().join("grep")).unwrap();
    std::fs::create_dir_all(d.path().join("sort")).unwrap();
    // Admitted on first read: the second run reads every block from memory.
    let (cached, maps) = twice(&c, d.path(), &data, "wc", WC);
    assert_eq!(
        cached, maps,
        "word count: {cached} of {maps} maps from cache"
    );
    let grep = ["grep", "--pattern", "th[aeiou]"];
    let (cached, maps) = twice(&c, d.path(), &data, "grep", &grep);
    assert_eq!(cached, maps, "grep: {cached} of {maps} maps from cache");
    let (cached, maps) = twice(&c, d.path(), &data, "sort", &["sort", "--reducers", "2"]);
    assert_eq!(cached, maps, "sort: {cached} of {maps} maps from cache");
}

#[test]
fn a_full_cache_admits_no_more_and_reads_the_rest_from_disk() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "6MB");
    // Room for two 1 MB blocks on each worker.
    let c = Cluster::up_with(d.path(), 2, "--heartbeat-ms 50", "--cache-size 2100KB");
    put(&c, &data, "words", "1MB", "1");
    std::fs::create_dir_all(d.path().join("wc")).unwrap();
    let (cached, maps) = twice(&c, d.path(), &data, "wc", WC);
    assert_eq!(cached, 4, "{cached} of {maps} maps from cache");
    for (id, blocks) in cache_ls(&c).0 {
        assert_eq!(blocks.len(), 2, "worker {id}: {blocks:?}");
    }
}

/// Blocks cached and blocks evicted, over all workers, as `sluice cache
/// ls` counts them.
fn cached_and_evicted(c: &Cluster) -> (usize, u64) {
    let cached = cache_ls(c).0.values().map(Vec::len).sum();
    let out = ok(c.cmd(&["cache", "ls"]).output().unwrap());
    let evicted = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("worker "))
        .map(|l| {
            let n = l.trim_end().strip_suffix(" evicted").unwrap();
            n.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    (cached, evicted)
}

/// `-D sluice.cache.admit=false` reads the input without admitting it;
/// a chain's temporaries, each read once by the next stage, are not
/// admitted either (they would be evicted unread when removed), while
/// the chain's own input is.
#[test]
fn input_read_once_is_not_admitted() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "4MB");
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 50");
    put(&c, &data, "words", "1MB", "1");
    let mut wc = submit_wc(&c, "words", "counts");
    ok(wc
        .args(["-D", "sluice.cache.admit=false"])
        .output()
        .unwrap());
    counts_match_local(&c, d.path(), &data);
    // A few heartbeats, for any cache report to arrive.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cached_and_evicted(&c), (0, 0), "{:?}", cache_ls(&c).0);
    // The same job admitting: every block.
    ok(submit_wc(&c, "words", "counts2").output().unwrap());
    poll(|| (cached_and_evicted(&c).0 == 4).then_some(()));
    assert_eq!(cached_and_evicted(&c), (4, 0));

    let graph = d.path().join("graph");
    ok(sluice()
        .args(["gen", "graph", "--pages", "20000", "--seed", "3", "--out"])
        .arg(&graph)
        .output()
        .unwrap());
    put(&c, &graph, "graph", "256KB", "1");
    let blocks = ok(c.cmd(&["ls", "graph"]).output().unwrap());
    let graph_blocks = String::from_utf8_lossy(&blocks.stdout)
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u32>().is_ok())
        })
        .count();
    assert!(
        graph_blocks > 1,
        "{}",
        String::from_utf8_lossy(&blocks.stdout)
    );
    let mut pr = c.submit(&["pagerank", "--iterations", "2", "--reducers", "2"]);
    ok(pr
        .args(["--input", "graph", "--output", "ranks"])
        .output()
        .unwrap());
    // The graph's blocks are cached; no temporary was, so none was evicted
    // when the chain removed them.
    poll(|| (cached_and_evicted(&c).0 >= 4 + graph_blocks).then_some(()));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        cached_and_evicted(&c),
        (4 + graph_blocks, 0),
        "{:?}",
        cache_ls(&c).0
    );
}

/// A boolean property with a value other than `true` or `false` is
/// refused before anything runs, naming it; nothing is written.
#[test]
fn a_misspelt_cache_or_sync_property_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    for kv in ["sluice.cache.admit=no", "sluice.output.sync=False"] {
        let out = d.path().join("out");
        let err = fails(
            sluice()
                .args(["run", "wordcount", "-q", "-D", kv, "--input"])
                .arg(&data)
                .arg("--output")
                .arg(&out)
                .output()
                .unwrap(),
        );
        assert!(
            err.contains(kv) && err.contains("`true` or `false`"),
            "{err}"
        );
        assert!(!out.exists(), "{kv}: output written");
    }
}

/// Flips a byte in every block replica on the cluster's first worker;
/// returns their file names.
fn damage_first_worker(c: &Cluster) -> Vec<String> {
    block_files(&c.data_dirs()[0])
        .iter()
        .map(|f| {
            let mut bytes = std::fs::read(f).unwrap();
            bytes[100] ^= 0x55;
            std::fs::write(f, bytes).unwrap();
            f.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect()
}

/// The blocks `sluice cache ls` says the first worker caches.
fn first_worker_cached(c: &Cluster) -> Vec<(String, bool)> {
    let (workers, _) = cache_ls(c);
    let uid0 = std::fs::read_to_string(c.data_dirs()[0].join("uid")).unwrap();
    let ls =
        String::from_utf8_lossy(&ok(c.cmd(&["cache", "ls"]).output().unwrap()).stdout).into_owned();
    let w0 = ls
        .lines()
        .find(|l| l.contains(uid0.trim()))
        .and_then(|l| l.strip_prefix("worker "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    workers[&w0].clone()
}

#[test]
fn a_damaged_replica_is_never_cached_and_the_job_reads_another() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "4MB");
    let c = Cluster::up(d.path(), 2, "--heartbeat-ms 50");
    put(&c, &data, "words", "1MB", "2");
    let damaged = damage_first_worker(&c);
    assert_eq!(damaged.len(), 4);
    ok(c.cmd(&["cache", "add", "words"]).output().unwrap());
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    counts_match_local(&c, d.path(), &data);
    // Nothing damaged is held in memory anywhere; the intact replicas on
    // the second worker are cached instead.
    poll(|| {
        let p = pinned(&c);
        (p.len() == damaged.len()).then_some(())
    });
    let cached = first_worker_cached(&c);
    assert!(cached.is_empty(), "damaged blocks cached: {cached:?}");
}

#[test]
fn a_map_admitting_a_damaged_replica_blames_it_and_reads_another() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "4MB");
    // Neither the block scanner nor healing may touch the damage first.
    let c = Cluster::up_with(
        d.path(),
        2,
        "--heartbeat-ms 50 --replication-streams 0",
        "--scan-rate 0",
    );
    put(&c, &data, "words", "1MB", "2");
    assert_eq!(damage_first_worker(&c).len(), 4);
    // No directive: the maps admit their blocks on first read, and those
    // on the first worker find its replicas damaged while filling the
    // cache.
    let report = d.path().join("report.json");
    let mut cmd = submit_wc(&c, "words", "counts");
    ok(cmd.arg("--report").arg(&report).output().unwrap());
    counts_match_local(&c, d.path(), &data);
    let r = read_json(&report);
    assert_eq!(r["maps"].as_u64().unwrap(), 4, "{r}");
    let damaged = &r["cluster"]["attempts"]["damaged_replicas"];
    assert!(damaged.as_u64().unwrap() > 0, "{r}");
    // The second worker's maps cached the blocks they read; the first
    // worker's read around their damaged replicas and cached nothing.
    poll(|| {
        let (workers, _) = cache_ls(&c);
        let n: usize = workers.values().map(Vec::len).sum();
        (n > 0).then_some(())
    });
    let cached = first_worker_cached(&c);
    assert!(cached.is_empty(), "damaged blocks cached: {cached:?}");
}

#[test]
fn a_worker_holding_cached_blocks_killed_leaves_the_job_whole() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "6MB");
    let c = Cluster::up(d.path(), 3, "--heartbeat-ms 50 --worker-timeout-ms 1000");
    put(&c, &data, "words", "1MB", "2");
    ok(c.cmd(&["cache", "add", "words"]).output().unwrap());
    until_pinned(&c, "every block", |p| p.len() == 6);
    let pids = c.worker_pids();
    signal(pids[0], "KILL");
    wait_until_lost(&c, 1);
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    counts_match_local(&c, d.path(), &data);
}

#[test]
fn a_cache_larger_than_the_memlock_limit_is_refused_with_how_to_fix_it() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    // Readable by the unprivileged user the worker runs as.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = d.path().join("secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A 64 KiB limit; root locks past any limit, so the worker runs as
    // nobody then.
    let mut cmd = Command::new("prlimit");
    cmd.arg("--memlock=65536:65536");
    if root() {
        cmd.args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]);
    }
    cmd.arg(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "worker",
            "--insecure",
            "--coordinator",
            "127.0.0.1:1",
            "--cache-size",
            "1GB",
        ])
        .arg("--data-dir")
        .arg(d.path().join("data"))
        .arg("--secret-file")
        .arg(&secret);
    let err = fails(cmd.output().expect("prlimit (util-linux) runs"));
    assert!(
        err.contains("RLIMIT_MEMLOCK 65536 bytes") && err.contains("--cache-size"),
        "{err}"
    );
}

//! Collect, spill, merge and group: the map-side path end to end.

use std::sync::Arc;

use sluice_api::{
    Counters, HashPartitioner, KeyOrder, ReduceContext, Reducer, Sink, SumU64, TaskCounter, Values,
};
use sluice_formats::spill::{SpillFile, SpillWriter};
use sluice_sort::{reduce_groups, Collector, ErrorSink, HashCollector, Merger, SortCollector};

struct Sum;

impl Reducer for Sum {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn Values,
        ctx: &mut ReduceContext<'_>,
    ) -> sluice_api::Result<()> {
        let mut n = 0;
        while let Some(v) = values.next_value() {
            n += SumU64::decode(v).unwrap();
        }
        ctx.write(key, &SumU64::encode(n))
    }
}

#[derive(Default)]
struct Collect(Vec<(Vec<u8>, u64)>);

impl ErrorSink for Collect {
    fn take_error(&mut self) -> Option<sluice_sort::SortError> {
        None
    }
}

impl Sink for Collect {
    fn emit(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        self.0.push((key.to_vec(), SumU64::decode(value).unwrap()));
        Ok(())
    }
}

fn words(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("w{}", (i * 7919) % 97).into_bytes())
        .collect()
}

/// Collects `words` with `make`, spilling every `every` records into runs,
/// then merges partition `p` of all runs and sums by key.
fn run(
    make: &dyn Fn() -> Box<dyn Collector>,
    every: usize,
    order: KeyOrder,
) -> (Vec<(Vec<u8>, u64)>, Counters) {
    let dir = tempfile::tempdir().unwrap();
    let mut counters = Counters::default();
    let mut runs = Vec::new();
    let mut c = make();
    for (i, w) in words(5000).iter().enumerate() {
        c.collect(w, &SumU64::encode(1)).unwrap();
        if (i + 1) % every == 0 {
            runs.push(spill(c.as_mut(), dir.path(), runs.len(), &mut counters));
        }
    }
    if !c.is_empty() {
        runs.push(spill(c.as_mut(), dir.path(), runs.len(), &mut counters));
    }
    let mut out = Collect::default();
    for p in 0..3 {
        let readers = runs.iter().map(|f| f.reader(p)).collect();
        let mut m = Merger::new(readers, order).unwrap();
        reduce_groups(
            &mut m,
            &mut Sum,
            &mut out,
            &mut counters,
            0,
            &Default::default(),
        )
        .unwrap();
    }
    (out.0, counters)
}

fn spill(
    c: &mut dyn Collector,
    dir: &std::path::Path,
    n: usize,
    counters: &mut Counters,
) -> SpillFile {
    let path = dir.join(format!("run{n}"));
    let mut w = SpillWriter::create(&path, 3).unwrap().with_block_size(100);
    c.spill(&mut w, counters).unwrap();
    w.finish().unwrap();
    SpillFile::open(&path).unwrap()
}

fn expected() -> Vec<(Vec<u8>, u64)> {
    let mut m = std::collections::BTreeMap::new();
    for w in words(5000) {
        *m.entry(w).or_insert(0u64) += 1;
    }
    m.into_iter().collect()
}

fn sorted(mut v: Vec<(Vec<u8>, u64)>) -> Vec<(Vec<u8>, u64)> {
    v.sort();
    v
}

#[test]
fn sort_path_with_and_without_combiner_counts_exactly() {
    for combine in [false, true] {
        let make = move || -> Box<dyn Collector> {
            let comb: Option<sluice_api::ReducerFactory> =
                combine.then(|| Arc::new(|| Box::new(Sum) as Box<dyn Reducer>) as _);
            Box::new(SortCollector::new(
                Arc::new(HashPartitioner),
                3,
                KeyOrder::Bytewise,
                comb,
            ))
        };
        let (out, counters) = run(&make, 700, KeyOrder::Bytewise);
        // Within each partition keys come out in byte order.
        assert_eq!(sorted(out), expected());
        assert_eq!(
            counters.get(TaskCounter::CombineInputRecords),
            if combine { 5000 } else { 0 }
        );
    }
}

#[test]
fn partitions_are_key_ordered_and_fingerprint_order_groups() {
    let make = || -> Box<dyn Collector> {
        Box::new(SortCollector::new(
            Arc::new(HashPartitioner),
            3,
            KeyOrder::Fingerprint,
            None,
        ))
    };
    let (out, _) = run(&make, 333, KeyOrder::Fingerprint);
    assert_eq!(sorted(out), expected());
}

#[test]
fn hash_path_folds_at_emit_time() {
    let make = || -> Box<dyn Collector> {
        Box::new(HashCollector::new(
            Arc::new(SumU64),
            Arc::new(HashPartitioner),
            3,
            KeyOrder::Bytewise,
        ))
    };
    let (out, counters) = run(&make, 1000, KeyOrder::Bytewise);
    assert_eq!(sorted(out.clone()), expected());
    // Each spill of 1000 records writes at most 97 distinct keys.
    assert_eq!(counters.get(TaskCounter::CombineInputRecords), 5000);
    assert!(counters.get(TaskCounter::CombineOutputRecords) <= 5 * 97);
    // Keys within each partition are in byte order.
    let mut by_part: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    for (k, _) in out {
        by_part[sluice_api::Partitioner::partition(&HashPartitioner, &k, 3) as usize].push(k);
    }
    for p in by_part {
        assert!(p.windows(2).all(|w| w[0] < w[1]));
    }
}

/// Keys over {0, 1, 'a'} of 0-20 bytes: many share an 8-byte prefix.
fn tricky(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (x >> 59) as usize % 21;
            (0..len)
                .map(|i| [0u8, 1, b'a'][((x >> (i % 20 * 3)) % 3) as usize])
                .collect()
        })
        .collect()
}

#[test]
fn merging_runs_of_tricky_keys_gives_byte_order() {
    for order in [KeyOrder::Bytewise, KeyOrder::Fingerprint] {
        let dir = tempfile::tempdir().unwrap();
        let mut all = Vec::new();
        let mut runs = Vec::new();
        for r in 0..4 {
            let keys = tricky(1500, r + 1);
            let mut c = SortCollector::new(Arc::new(HashPartitioner), 1, order, None);
            for k in &keys {
                c.collect(k, &[r as u8]).unwrap();
            }
            runs.push(spill_one(&mut c, dir.path(), r as usize));
            all.extend(keys.into_iter().map(|k| (k, r as u8)));
        }
        let readers = runs.iter().map(|f| f.reader(0)).collect();
        let mut m = Merger::new(readers, order).unwrap();
        let mut got = Vec::new();
        while let Some((k, v)) = m.current() {
            got.push((k.to_vec(), v[0]));
            m.advance().unwrap();
        }
        // Equal keys come out in run order (a stable sort of the runs in
        // order), the reduce's values in the order their runs were made.
        all.sort_by(|a, b| sluice_sort::key_cmp(order, &a.0, &b.0));
        assert_eq!(got, all, "{order:?}");
    }
}

fn spill_one(c: &mut dyn Collector, dir: &std::path::Path, n: usize) -> SpillFile {
    let path = dir.join(format!("t{n}"));
    let mut w = SpillWriter::create(&path, 1).unwrap();
    c.spill(&mut w, &mut Counters::default()).unwrap();
    w.finish().unwrap();
    SpillFile::open(&path).unwrap()
}

#[test]
fn the_loser_tree_merges_any_number_of_runs_some_empty() {
    for n in [0usize, 1, 2, 3, 5, 7] {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = Vec::new();
        let mut all = Vec::new();
        for r in 0..n {
            let mut c = SortCollector::new(Arc::new(HashPartitioner), 1, KeyOrder::Bytewise, None);
            // Every third run is empty; the others hold keys whose 16-byte
            // prefix is all ones, as an exhausted run's is.
            let keys = if r % 3 == 1 {
                Vec::new()
            } else {
                let mut keys = tricky(200 + 37 * r, r as u64 + 11);
                keys.extend([vec![0xff; 16], vec![0xff; 17 + r], vec![0xff; 15]]);
                keys
            };
            for k in &keys {
                c.collect(k, b"").unwrap();
            }
            runs.push(spill_one(&mut c, dir.path(), r));
            all.extend(keys);
        }
        let mut m = Merger::new(
            runs.iter().map(|f| f.reader(0)).collect(),
            KeyOrder::Bytewise,
        )
        .unwrap();
        let mut got = Vec::new();
        while let Some((k, _)) = m.current() {
            got.push(k.to_vec());
            m.advance().unwrap();
        }
        m.advance().unwrap(); // advancing past the end is harmless
        all.sort();
        assert_eq!(got, all, "{n} runs");
    }
}

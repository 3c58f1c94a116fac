//! No allocation per record on the map path: a counting allocator shows
//! that reading, decoding, mapping and collecting records allocates a
//! constant number of times, however many records flow through.
//!
//! A separate test binary because it installs a global allocator.

// The counting allocator must implement `GlobalAlloc`, which is unsafe; it
// only forwards to the system allocator and bumps a thread-local counter.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use sluice_api::{Counters, HashPartitioner, KeyOrder, MapContext, Mapper, Sink, SumU64};
use sluice_formats::input::{plan_splits, resolve, RecordFormat};
use sluice_formats::read::{read_split, ReadOptions};
use sluice_formats::FormatError;
use sluice_sort::{Collector, HashCollector, SortCollector};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

struct Collect<'a>(&'a mut dyn Collector);

impl Sink for Collect<'_> {
    fn emit(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        self.0
            .collect(key, value)
            .map_err(|_| sluice_api::Error::Aborted)
    }
}

/// Reads every line of `path` through the word count mapper into `c`;
/// returns (records, allocations).
fn map_file(path: &std::path::Path, c: &mut dyn Collector) -> (u64, u64) {
    let files = resolve(path.to_str().unwrap()).unwrap();
    let split = &plan_splits(&files, u64::MAX, RecordFormat::Lines)[0];
    let mut mapper = sluice_jobs::WordCountMapper;
    let mut counters = Counters::default();
    let mut sink = Collect(c);
    let mut records = 0;
    let before = allocs();
    read_split::<FormatError, _>(
        split,
        RecordFormat::Lines,
        &ReadOptions::default(),
        |off, line| {
            records += 1;
            mapper
                .map(off, line, &mut MapContext::new(&mut sink, &mut counters))
                .unwrap();
            Ok(())
        },
    )
    .unwrap();
    (records, allocs() - before)
}

fn text(dir: &std::path::Path, lines: usize) -> std::path::PathBuf {
    let p = dir.join(format!("t{lines}"));
    let body: String = (0..lines)
        .map(|i| format!("w{} x{} w{}\n", i % 500, i % 7, (i * 31) % 500))
        .collect();
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn hash_grouped_word_count_map_path_allocates_nothing_per_record() {
    let d = tempfile::tempdir().unwrap();
    let mut c = HashCollector::new(
        Arc::new(SumU64),
        Arc::new(HashPartitioner),
        4,
        KeyOrder::Bytewise,
    );
    map_file(&text(d.path(), 1000), &mut c); // every word seen once: the table is sized
    let (small_records, small) = map_file(&text(d.path(), 10_000), &mut c);
    let (big_records, big) = map_file(&text(d.path(), 200_000), &mut c);
    assert_eq!(big_records, 20 * small_records);
    // Opening the file and its read buffer: the same few allocations.
    assert!(
        big <= small + 2 && big < 10,
        "allocations: {small} for 10k lines, {big} for 200k"
    );
}

#[test]
fn sort_collector_allocates_only_to_grow_its_arena() {
    let d = tempfile::tempdir().unwrap();
    let mut c = SortCollector::new(Arc::new(HashPartitioner), 4, KeyOrder::Bytewise, None);
    let (records, n) = map_file(&text(d.path(), 200_000), &mut c);
    assert_eq!(records, 200_000);
    // 600k emitted records; growth by doubling needs a few dozen allocations.
    assert!(n < 100, "{n} allocations for 600k records");
}

#[test]
fn the_delimited_decoder_allocates_nothing_after_warm_up() {
    let mut dec = sluice_formats::delimited::Decoder::new(b'|');
    let line = b"http://example.com/page|42|17|2000-01-15|0.5";
    dec.decode(line);
    let before = allocs();
    let mut sum = 0;
    for _ in 0..100_000 {
        let f = dec.decode(line);
        sum += f.i64(1).unwrap() + f.get(0).unwrap().len() as i64;
    }
    assert_eq!(allocs() - before, 0);
    assert_eq!(sum, 100_000 * (42 + 23));
}

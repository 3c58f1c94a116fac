//! The fast join's table of Rankings, `pageURL -> pageRank`.
//!
//! Written here rather than taken as a `HashMap<Vec<u8>, i64>`: that map
//! gave every URL an allocation of its own, which cost as much to build
//! (and to free at exit) as the join's whole scan of UserVisits. Here the
//! URLs stay in the arenas their readers wrote, and the index is a set
//! of open-addressing tables of 24-byte slots (linear probing, a load
//! factor of at most one half), one per partition of the hashes.
//!
//! Rows are read by several threads, each over a piece of the files,
//! and each reader sorts its rows by partition as it goes. The
//! partitions are then built by the threads too, one at a time each:
//! a partition's table is a few hundred KiB, so its inserts hit the CPU's
//! cache instead of one table of tens of MB, which missed it at every row
//! and took a single thread as long as the whole read.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_formats::delimited::Decoder;
use sluice_formats::input::{Codec, Split};
use sluice_formats::parquet::read_batches;
use sluice_formats::read::{read_records, ReadOptions};
use sluice_formats::rows::Projection;
use sluice_formats::FormatError;

use super::columns::{Clean, Ints};
use super::{decode, RANKINGS_FIELDS};
use crate::JobError;

/// Pieces smaller than this are not cut further for more threads.
const MIN_PIECE: u64 = 1 << 20;

/// Input bytes a partition, about: Rankings rows take 17 (Parquet) to 60
/// (text) bytes, so a partition holds a few thousand URLs and its table
/// (two slots a URL) a few hundred KiB.
const PARTITION_BYTES: u64 = 64 << 10;

/// Partitions at most: the table of a large input has large partitions
/// rather than very many.
const MAX_PARTITIONS: usize = 4096;

/// Bits of a slot's `off` that hold the offset in its piece's arena; the
/// bits above them hold the piece.
const OFFSET_BITS: u32 = 48;

/// One URL: where its bytes are (its piece, and its offset in the
/// piece's arena), its rank, and the high half of its hash (so most
/// other URLs are told apart without the arena). `len` is the URL's
/// length plus one: 0 marks an empty slot.
#[derive(Clone, Copy, Default)]
struct Slot {
    off: u64,
    rank: i64,
    tag: u32,
    len: u32,
}

/// One row as its reader keeps it: the URL's hash, its offset in the
/// piece's arena and length, and its rank.
#[derive(Clone, Copy)]
struct Row {
    hash: u64,
    off: u64,
    len: u32,
    rank: i64,
}

/// The rows one piece of the input gave: their URLs' bytes one after
/// another, and the rows by partition, each in input order.
struct Piece {
    arena: Vec<u8>,
    parts: Vec<Vec<Row>>,
}

impl Piece {
    fn new(partitions: usize) -> Piece {
        Piece {
            arena: Vec::new(),
            parts: vec![Vec::new(); partitions],
        }
    }

    /// Adds a row; false (adding nothing) when its URL is too long to
    /// index or its piece's arena too large to address.
    fn push(&mut self, url: &[u8], rank: i64) -> bool {
        let (Ok(len), off) = (u32::try_from(url.len()), self.arena.len() as u64) else {
            return false;
        };
        if off >> OFFSET_BITS != 0 {
            return false;
        }
        let hash = hash(url);
        let part = partition(hash, self.parts.len());
        self.parts[part].push(Row {
            hash,
            off,
            len,
            rank,
        });
        self.arena.extend_from_slice(url);
        true
    }
}

fn hash(key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(7).hash_one(key)
}

/// The partition of a hash among `partitions` (a power of two): its top
/// bits, where a slot's place takes the low ones.
fn partition(hash: u64, partitions: usize) -> usize {
    (hash >> 52) as usize & (partitions - 1)
}

/// One partition's open-addressing table.
#[derive(Default)]
struct Part {
    slots: Vec<Slot>,
}

impl Part {
    /// The slot of `key`, whose hash is `h`, or the empty slot it would
    /// take (`arenas` hold the keys of the slots).
    fn probe(&self, arenas: &[Vec<u8>], h: u64, key: &[u8]) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let tag = (h >> 32) as u32;
        let mut i = h as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.len == 0 {
                return Err(i);
            }
            if s.tag == tag && key_of(arenas, s) == key {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The table of partition `p` of the pieces' rows (`rows[piece][p]`),
    /// later pieces' rows after earlier ones'; its distinct URLs.
    fn build(rows: &[Vec<Vec<Row>>], arenas: &[Vec<u8>], p: usize) -> (Part, usize) {
        let count: usize = rows.iter().map(|x| x[p].len()).sum();
        let mut part = Part {
            slots: vec![Slot::default(); (count * 2).next_power_of_two().max(16)],
        };
        let mut distinct = 0;
        for (i, piece) in rows.iter().enumerate() {
            let base = (i as u64) << OFFSET_BITS;
            for r in &piece[p] {
                let key = &arenas[i][r.off as usize..r.off as usize + r.len as usize];
                match part.probe(arenas, r.hash, key) {
                    Ok(at) => part.slots[at].rank = r.rank,
                    Err(at) => {
                        part.slots[at] = Slot {
                            off: base | r.off,
                            rank: r.rank,
                            tag: (r.hash >> 32) as u32,
                            len: r.len + 1,
                        };
                        distinct += 1;
                    }
                }
            }
        }
        (part, distinct)
    }
}

/// The bytes of a slot's URL.
fn key_of<'a>(arenas: &'a [Vec<u8>], s: &Slot) -> &'a [u8] {
    let piece = (s.off >> OFFSET_BITS) as usize;
    let off = (s.off & ((1 << OFFSET_BITS) - 1)) as usize;
    &arenas[piece][off..off + s.len as usize - 1]
}

/// `pageURL -> pageRank` for the fast join. A URL met twice keeps the
/// rank of its last row in input order, as inserting into a map would.
#[derive(Default)]
pub struct RankTable {
    arenas: Vec<Vec<u8>>,
    parts: Vec<Part>,
    rows: usize,
}

impl RankTable {
    /// The rank of `url`, if Rankings has it.
    pub fn get(&self, url: &[u8]) -> Option<i64> {
        if self.parts.is_empty() {
            return None;
        }
        let h = hash(url);
        let part = &self.parts[partition(h, self.parts.len())];
        part.probe(&self.arenas, h, url)
            .ok()
            .map(|i| part.slots[i].rank)
    }

    /// How many distinct URLs it holds.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The table of the pieces' rows, its partitions built on up to
    /// `threads` threads.
    fn of(pieces: Vec<Piece>, threads: usize) -> RankTable {
        let partitions = pieces.first().map_or(1, |p| p.parts.len());
        let (arenas, rows): (Vec<_>, Vec<_>) =
            pieces.into_iter().map(|p| (p.arena, p.parts)).unzip();
        let built = each_in_parallel(partitions, threads, |p| Part::build(&rows, &arenas, p));
        RankTable {
            rows: built.iter().map(|(_, d)| d).sum(),
            parts: built.into_iter().map(|(part, _)| part).collect(),
            arenas,
        }
    }
}

/// `f(i)` for every `i` in `0..n`, on up to `threads` scoped threads
/// (at least one), each taking the next `i` left; the results in the
/// order of `i`. A thread's panic goes on in the caller.
fn each_in_parallel<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let work = || {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break out;
            }
            out.push((i, f(i)));
        }
    };
    let mut done: Vec<(usize, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.clamp(1, n.max(1)))
            .map(|_| scope.spawn(work))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}

/// Reads Rankings splits into a [`RankTable`] on up to `threads` threads,
/// the files cut into pieces so each thread has some; a malformed row
/// fails naming its file and offset (the first in input order).
pub fn rank_table(
    splits: &[Split],
    max_record: usize,
    threads: usize,
) -> std::result::Result<RankTable, JobError> {
    let cuts = cut(splits, threads.max(1) * 4);
    let total: u64 = splits.iter().map(Split::len).sum();
    let partitions = ((total / PARTITION_BYTES) as usize)
        .next_power_of_two()
        .min(MAX_PARTITIONS);
    let pieces = each_in_parallel(cuts.len(), threads, |i| {
        read_piece(&cuts[i], max_record, partitions)
    })
    .into_iter()
    .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RankTable::of(pieces, threads))
}

/// The splits cut into about `pieces` pieces of whole lines' worth of
/// bytes (the reader finds the line boundaries), in input order; gzip and
/// checksummed stored files stay whole.
fn cut(splits: &[Split], pieces: usize) -> Vec<Split> {
    let total: u64 = splits.iter().map(Split::len).sum();
    let step = (total / pieces as u64).max(MIN_PIECE);
    let mut out = Vec::new();
    for s in splits {
        // A Parquet piece reads the row groups that start in it.
        let cuttable = matches!(s.file.codec, Codec::None | Codec::Parquet);
        let plain = cuttable && s.file.checks.is_none();
        if !plain || s.len() <= step + step / 10 {
            out.push(Split {
                index: out.len(),
                ..s.clone()
            });
            continue;
        }
        let mut start = s.start;
        while start < s.end {
            let end = if s.end - start <= step + step / 10 {
                s.end
            } else {
                start + step
            };
            out.push(Split {
                index: out.len(),
                file: s.file.clone(),
                start,
                end,
            });
            start = end;
        }
    }
    out
}

/// Rankings' columns as its text rows order them, avgDuration unread (a
/// file of rows gives records `pageURL|pageRank|`).
pub fn rankings_columns() -> Projection {
    Projection::piped(&["pageURL", "pageRank", "avgDuration"]).unread(&["avgDuration"])
}

/// The Rankings rows of one piece: a Parquet piece's columns as they
/// are, unless a batch holds what its text records would read otherwise
/// (a null, a `|`), then that batch's records as text.
fn read_piece(
    s: &Split,
    max_record: usize,
    partitions: usize,
) -> std::result::Result<Piece, FormatError> {
    let mut p = Piece::new(partitions);
    let mut dec = Decoder::new(b'|');
    let path = s.file.path.as_path();
    if s.file.codec == Codec::Parquet {
        let mut rec = Vec::new();
        let mut clean = Clean::default();
        read_batches::<FormatError, _>(s, &rankings_columns(), |b| {
            let col = |i: usize| b.columns.get(i).and_then(Option::as_ref);
            if let (Some(urls), Some(ranks)) = (clean.strings(col(0)), Ints::of(col(1))) {
                if (0..b.rows).all(|i| p.push(urls.get(i), ranks.get(i))) {
                    return Ok(());
                }
            }
            b.records(&mut rec, &mut |off, line| {
                text_row(&mut p, &mut dec, path, off, line)
            })
        })?;
        return Ok(p);
    }
    let opts = ReadOptions {
        max_record,
        ..ReadOptions::default()
    };
    read_records::<FormatError, _>(
        s,
        sluice_formats::input::RecordFormat::Lines,
        &rankings_columns(),
        &opts,
        |off, line| text_row(&mut p, &mut dec, path, off, line),
    )?;
    Ok(p)
}

/// One Rankings text row into `p`, or an error naming its offset.
fn text_row(
    p: &mut Piece,
    dec: &mut Decoder,
    path: &Path,
    off: u64,
    line: &[u8],
) -> std::result::Result<(), FormatError> {
    if let Ok(f) = decode(dec, line, RANKINGS_FIELDS) {
        if let (Ok(url), Ok(rank)) = (f.get(0), f.i64(1)) {
            if p.push(url, rank) {
                return Ok(());
            }
        }
    }
    Err(FormatError::Corrupt {
        path: path.to_owned(),
        offset: off,
        detail: "not a Rankings row (pageURL|pageRank|avgDuration)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn file(dir: &Path, name: &str, text: &str) -> Split {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        Split::whole(0, path, text.len() as u64)
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-ranks-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn every_url_is_found_across_pieces_and_threads() {
        let d = tmp("all");
        let rows: String = (0..400_000)
            .map(|i| format!("http://example.com/{i}/page.html|{}|{}\n", i * 7, i % 9))
            .collect();
        let splits = vec![file(&d, "a", &rows)];
        assert!(splits[0].len() > 4 * MIN_PIECE, "several pieces");
        for threads in [1, 2, 3] {
            let t = rank_table(&splits, 1 << 20, threads).unwrap();
            assert_eq!(t.len(), 400_000);
            for i in (0..400_000).step_by(997) {
                let url = format!("http://example.com/{i}/page.html");
                assert_eq!(t.get(url.as_bytes()), Some(i * 7), "{url}");
            }
            assert_eq!(t.get(b"http://example.com/400000/page.html"), None);
            assert_eq!(t.get(b""), None);
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_url_met_twice_keeps_its_last_rank_in_input_order() {
        let d = tmp("twice");
        let first: String = (0..200_000).map(|i| format!("u{i}|1|0\n")).collect();
        let splits = vec![
            file(&d, "a", &first),
            Split {
                index: 1,
                ..file(&d, "b", "u5|2|0\n|3|0\nu5|4|0\n")
            },
        ];
        let t = rank_table(&splits, 1 << 20, 2).unwrap();
        assert_eq!(t.get(b"u5"), Some(4));
        assert_eq!(t.get(b"u6"), Some(1));
        assert_eq!(t.get(b""), Some(3), "an empty URL is a URL");
        assert_eq!(t.len(), 200_001);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_malformed_row_names_its_file_and_the_first_offset() {
        let d = tmp("bad");
        // A bad row in the first piece, and only bad rows in the last
        // pieces (which a thread may reach first).
        let mut rows: String = (0..100_000).map(|i| format!("u{i}|{i}|0\n")).collect();
        let at = rows.len();
        rows.push_str("u|not a number|0\n");
        rows.extend((0..500_000).map(|i| format!("w{i}|{i}|0\n")));
        rows.extend((0..500_000).map(|i| format!("v{i}|x|0\n")));
        let splits = vec![file(&d, "r", &rows)];
        assert!(cut(&splits, 4).len() >= 3, "several pieces");
        let e = rank_table(&splits, 1 << 20, 2).err().unwrap().to_string();
        let want = format!(
            "{}: corrupt at offset {at}: not a Rankings row",
            d.join("r").display()
        );
        assert!(e.starts_with(&want), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}

//! Resolving input paths and planning splits.
//!
//! An input is a comma-separated list of files, directories (their files,
//! not recursing, skipping names starting with `_` or `.` as Hadoop does) and
//! glob patterns. A split is a byte range of one file; readers make records
//! that cross split boundaries belong to exactly one split (see [`crate::read`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{FormatError, Result};

/// How an input file's bytes are stored: text, plain or compressed (by
/// its extension), or a file of rows (by its first bytes or extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Plain bytes: splittable.
    None,
    /// gzip (`.gz`): one split per file.
    Gzip,
    /// bzip2 (`.bz2`): split at its blocks ([`crate::bz2`]).
    Bzip2,
    /// Zstandard (`.zst`): one split per file.
    Zstd,
    /// LZ4 (`.lz4`), its frame format or Hadoop's block framing: one split
    /// per file.
    Lz4,
    /// Snappy (`.snappy`), its framing format or Hadoop's block framing:
    /// one split per file.
    Snappy,
    /// Parquet (`PAR1`, `.parquet`): split by row group
    /// ([`crate::parquet`]).
    Parquet,
    /// A Hadoop SequenceFile (`SEQ`): split at its syncs
    /// ([`crate::seqfile`]).
    SequenceFile,
    /// An Avro object container file (`Obj` 1, `.avro`): split at its
    /// syncs ([`crate::avro`]).
    Avro,
    /// CSV with a header row, split as text (`--input-format csv` only,
    /// [`crate::textrows`]).
    Csv,
    /// JSON lines, split as text (`--input-format jsonl` only).
    Jsonl,
}

impl Codec {
    /// The codec of a file named `name`, by its extension.
    pub fn of_name(name: &str) -> Codec {
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        match ext {
            "gz" => Codec::Gzip,
            "bz2" => Codec::Bzip2,
            "zst" => Codec::Zstd,
            "lz4" => Codec::Lz4,
            "snappy" => Codec::Snappy,
            "parquet" => Codec::Parquet,
            "avro" => Codec::Avro,
            _ => Codec::None,
        }
    }

    /// The codec of a file named `name` whose first bytes are `head`: a
    /// file of rows by its magic, else by the name.
    pub fn sniff(name: &str, head: &[u8]) -> Codec {
        if head.starts_with(b"PAR1") {
            return Codec::Parquet;
        }
        if head.starts_with(b"Obj\x01") {
            return Codec::Avro;
        }
        if head.starts_with(b"SEQ") {
            return Codec::SequenceFile;
        }
        Codec::of_name(name)
    }

    /// Whether its records are rows of named columns.
    pub fn has_rows(self) -> bool {
        matches!(
            self,
            Codec::Parquet | Codec::SequenceFile | Codec::Avro | Codec::Csv | Codec::Jsonl
        )
    }

    /// Whether a file of this codec can be cut into several splits.
    pub fn splittable(self) -> bool {
        matches!(
            self,
            Codec::None
                | Codec::Bzip2
                | Codec::Parquet
                | Codec::SequenceFile
                | Codec::Avro
                | Codec::Csv
                | Codec::Jsonl
        )
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "plain",
            Codec::Gzip => "gzip",
            Codec::Bzip2 => "bzip2",
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
            Codec::Snappy => "snappy",
            Codec::Parquet => "parquet",
            Codec::SequenceFile => "sequencefile",
            Codec::Avro => "avro",
            Codec::Csv => "csv",
            Codec::Jsonl => "jsonl",
        }
    }
}

/// How a job's input files are read: each as its first bytes and name say
/// (`Auto`), or all as one format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileFormat {
    /// Each file by its first bytes and its name.
    #[default]
    Auto,
    /// Text, compressed as its name says or not.
    Text,
    /// Parquet.
    Parquet,
    /// Hadoop SequenceFiles.
    SequenceFile,
    /// Avro object container files.
    Avro,
    /// CSV with a header row.
    Csv,
    /// JSON lines.
    Jsonl,
}

impl FileFormat {
    /// The codec a file of this format is read with.
    pub fn codec_of(self, file: &InputFile) -> Codec {
        match self {
            FileFormat::Auto => file.codec,
            FileFormat::Text => match Codec::of_name(&file.path.to_string_lossy()) {
                c if c.has_rows() => Codec::None,
                c => c,
            },
            FileFormat::Parquet => Codec::Parquet,
            FileFormat::SequenceFile => Codec::SequenceFile,
            FileFormat::Avro => Codec::Avro,
            FileFormat::Csv => Codec::Csv,
            FileFormat::Jsonl => Codec::Jsonl,
        }
    }
}

/// One resolved input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Its path.
    pub path: PathBuf,
    /// Its size on disk.
    pub len: u64,
    /// Its compression.
    pub codec: Codec,
    /// Chunk checksums that every byte read must match (a cluster block):
    /// readers verify each chunk before handing out its bytes.
    pub checks: Option<Arc<crate::chunked::ChunkSums>>,
    /// The file's bytes, already in memory and verified (a block in a
    /// worker's cache): readers read them in place instead of the file.
    pub resident: Option<Resident>,
    /// Where the bytes are when they are not a local file (an object in
    /// an object store): readers read through it; `path` only names it.
    pub remote: Option<Remote>,
    /// Memory a checked read reads the file into and scans in place (a
    /// block being admitted to a worker's cache as its map reads it).
    pub fill: Option<FillTo>,
}

/// The [`crate::chunked::Fill`] of a file's checked read.
#[derive(Clone)]
pub struct FillTo(pub Arc<dyn crate::chunked::Fill>);

impl std::fmt::Debug for FillTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FillTo")
    }
}

/// Two are equal when they are the same fill.
impl PartialEq for FillTo {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for FillTo {}

/// A file's bytes somewhere other than the local file system, such as an
/// object in an object store.
pub trait RemoteSource: Send + Sync {
    /// A reader of the bytes from `offset` on. `hint_end` is about where
    /// the caller will stop (it may read a little past it, to finish a
    /// record), so the source can size its requests.
    fn open_at(&self, offset: u64, hint_end: u64)
        -> std::io::Result<Box<dyn std::io::Read + Send>>;

    /// The size of the store's blocks when it keeps the file in blocks
    /// (HDFS): splits then never cross a block boundary, so each is read
    /// from one block's replicas, as Hadoop's `FileInputFormat` plans.
    fn block_size(&self) -> Option<u64> {
        None
    }

    /// The hosts holding the bytes `[start, end)` (of the block they
    /// begin in), nearest-first as the store gives them; none when the
    /// store does not say.
    fn hosts(&self, start: u64, end: u64) -> Vec<String> {
        let _ = (start, end);
        Vec::new()
    }
}

/// A remote file's source, shared by its splits.
#[derive(Clone)]
pub struct Remote(pub Arc<dyn RemoteSource>);

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Remote")
    }
}

/// Two are equal when they are the same source.
impl PartialEq for Remote {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Remote {}

/// Bytes a split reads in place instead of its file: a cached block,
/// verified against its checksums when it was loaded, so readers hand out
/// slices of it with no copy and no second check (as HDFS's zero-copy
/// reads of cached replicas skip checksums).
#[derive(Clone)]
pub struct Resident(pub Arc<dyn AsRef<[u8]> + Send + Sync>);

impl Resident {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl std::fmt::Debug for Resident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Resident({} bytes)", self.bytes().len())
    }
}

/// Two are equal when they are the same bytes in memory.
impl PartialEq for Resident {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Resident {}

/// How a file is cut into records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    /// Lines ending in `\n` (a `\r` before it is dropped too).
    Lines,
    /// Fixed-length binary records of this many bytes (gensort: 100).
    Fixed(usize),
    /// Binary records in pages of this many bytes ([`crate::paged`]).
    Paged(usize),
}

/// A byte range `[start, end)` of one input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Position in the job's split list.
    pub index: usize,
    /// The file.
    pub file: Arc<InputFile>,
    /// First byte.
    pub start: u64,
    /// One past the last byte (the file length for files compressed as
    /// one stream).
    pub end: u64,
}

/// The number of maps of a synthetic input named `synthetic:N`, or `None`
/// when `input` names files. `synthetic:0` and a bad count are errors.
pub fn synthetic_count(input: &str) -> Result<Option<usize>> {
    let Some(n) = input.strip_prefix(SYNTHETIC_PREFIX) else {
        return Ok(None);
    };
    match n.parse::<usize>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(FormatError::BadPattern {
            pattern: input.to_owned(),
            detail: "a synthetic input is synthetic:N with N >= 1 maps".into(),
        }),
    }
}

/// How an input of synthetic splits is named: `synthetic:N` for N maps.
pub const SYNTHETIC_PREFIX: &str = "synthetic:";

impl Split {
    /// Split `index` of a job on synthetic input: no file and no records;
    /// the mapper makes its records from the split's index
    /// (`MapContext::task`). Used by benchmarks that must touch no file
    /// system and by generators that run as map tasks.
    pub fn synthetic(index: usize) -> Split {
        Split {
            index,
            file: Arc::new(InputFile {
                path: PathBuf::new(),
                len: 0,
                codec: Codec::None,
                checks: None,
                resident: None,
                remote: None,
                fill: None,
            }),
            start: 0,
            end: 0,
        }
    }

    /// Split `index`: the whole of the uncompressed file at `path`, of
    /// `len` bytes.
    pub fn whole(index: usize, path: PathBuf, len: u64) -> Split {
        Split::whole_checked(index, path, len, None)
    }

    /// Split `index`: the whole of a stored block at `path`, read through
    /// its chunk checksums when `checks` is given (then `len` is theirs).
    pub fn whole_checked(
        index: usize,
        path: PathBuf,
        len: u64,
        checks: Option<Arc<crate::chunked::ChunkSums>>,
    ) -> Split {
        Split::whole_of(index, path, len, checks, None)
    }

    /// Split `index`: the whole of a stored block at `path`, read through
    /// its chunk checksums into the memory of `fill` and scanned there.
    pub fn whole_filling(
        index: usize,
        path: PathBuf,
        len: u64,
        checks: Arc<crate::chunked::ChunkSums>,
        fill: FillTo,
    ) -> Split {
        let mut s = Split::whole_checked(index, path, len, Some(checks));
        Arc::get_mut(&mut s.file).expect("just made").fill = Some(fill);
        s
    }

    /// Split `index`: the whole of a block held in memory (its `path`
    /// names it in errors only).
    pub fn resident(index: usize, path: PathBuf, bytes: Resident) -> Split {
        let len = bytes.bytes().len() as u64;
        Split::whole_of(index, path, len, None, Some(bytes))
    }

    fn whole_of(
        index: usize,
        path: PathBuf,
        len: u64,
        checks: Option<Arc<crate::chunked::ChunkSums>>,
        resident: Option<Resident>,
    ) -> Split {
        Split {
            index,
            file: Arc::new(InputFile {
                path,
                len,
                codec: Codec::None,
                checks,
                resident,
                remote: None,
                fill: None,
            }),
            start: 0,
            end: len,
        }
    }

    /// Whether this split is synthetic (has no file).
    pub fn is_synthetic(&self) -> bool {
        self.file.path.as_os_str().is_empty()
    }

    /// Bytes of the file this split covers.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the split covers no bytes.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Resolves a comma-separated input list into files, sorted by path within
/// each entry. Fails naming the first entry that matches nothing.
pub fn resolve(spec: &str) -> Result<Vec<InputFile>> {
    let mut files = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let before = files.len();
        resolve_entry(entry, &mut files)?;
        if files.len() == before && !Path::new(entry).is_dir() {
            return Err(FormatError::InputNotFound(entry.to_owned()));
        }
    }
    if spec.trim().is_empty() {
        return Err(FormatError::InputNotFound(spec.to_owned()));
    }
    Ok(files)
}

fn resolve_entry(entry: &str, files: &mut Vec<InputFile>) -> Result<()> {
    let path = Path::new(entry);
    if path.is_dir() {
        return list_dir(path, files);
    }
    if path.exists() {
        files.push(input_file(path)?);
        return Ok(());
    }
    if !entry.contains(['*', '?', '[']) {
        return Err(FormatError::InputNotFound(entry.to_owned()));
    }
    let paths = glob::glob(entry).map_err(|e| FormatError::BadPattern {
        pattern: entry.to_owned(),
        detail: e.to_string(),
    })?;
    let mut matched: Vec<PathBuf> = paths.filter_map(|p| p.ok()).collect();
    matched.sort();
    for p in matched {
        if p.is_dir() {
            list_dir(&p, files)?;
        } else {
            files.push(input_file(&p)?);
        }
    }
    Ok(())
}

fn list_dir(dir: &Path, files: &mut Vec<InputFile>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| FormatError::io("listing", dir, e))?;
    let mut paths = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| FormatError::io("listing", dir, e))?;
        let name = ent.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('_') || name.starts_with('.') {
            continue;
        }
        let p = ent.path();
        if p.is_file() {
            paths.push(p);
        }
    }
    paths.sort();
    for p in paths {
        files.push(input_file(&p)?);
    }
    Ok(())
}

/// Every file under `dir`, recursively, in path order, skipping names
/// starting with `_` or `.` as [`resolve`] does (for `sluice put` of a
/// tree, as `hdfs dfs -put` copies one).
pub fn walk(dir: &Path) -> Result<Vec<InputFile>> {
    let mut files = Vec::new();
    walk_into(dir, &mut files)?;
    Ok(files)
}

fn walk_into(dir: &Path, files: &mut Vec<InputFile>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| FormatError::io("listing", dir, e))?;
    let mut paths = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| FormatError::io("listing", dir, e))?;
        let name = ent.file_name();
        if !name.to_string_lossy().starts_with(['_', '.']) {
            paths.push(ent.path());
        }
    }
    paths.sort();
    for p in paths {
        if p.is_dir() {
            walk_into(&p, files)?;
        } else if p.is_file() {
            files.push(input_file(&p)?);
        }
    }
    Ok(())
}

/// One local file, its codec known by its first bytes and name.
pub fn local_file(path: &Path) -> Result<InputFile> {
    input_file(path)
}

fn input_file(path: &Path) -> Result<InputFile> {
    let meta = std::fs::metadata(path).map_err(|e| FormatError::io("reading", path, e))?;
    // Opening now turns a permission problem into an error before any task runs.
    let file = std::fs::File::open(path).map_err(|e| FormatError::io("opening", path, e))?;
    let mut head = Vec::with_capacity(4);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, 4), &mut head)
        .map_err(|e| FormatError::io("reading", path, e))?;
    let codec = Codec::sniff(&path.to_string_lossy(), &head);
    Ok(InputFile {
        path: path.to_owned(),
        len: meta.len(),
        codec,
        checks: None,
        resident: None,
        remote: None,
        fill: None,
    })
}

/// Cuts files into splits of about `split_size` bytes. Files compressed as
/// one stream (gzip, zstd, LZ4, Snappy) are one split each; bzip2 files
/// split as plain ones do (their readers find the blocks); fixed-length
/// record files split only at record multiples. Empty files yield no split.
pub fn plan_splits(files: &[InputFile], split_size: u64, format: RecordFormat) -> Vec<Split> {
    let mut splits = Vec::new();
    for f in files {
        let file = Arc::new(f.clone());
        if f.len == 0 {
            continue;
        }
        if !f.codec.splittable() {
            push_split(&mut splits, &file, 0, f.len);
            continue;
        }
        let (step, record) = match format {
            RecordFormat::Lines => (split_size.max(1), 1),
            RecordFormat::Fixed(n) | RecordFormat::Paged(n) => {
                ((split_size / n as u64).max(1) * n as u64, n as u64)
            }
        };
        let block = f.remote.as_ref().and_then(|r| r.0.block_size());
        for (lo, hi) in segments(f.len, block, record) {
            let step = match block {
                // Pieces of a block of about the split size, equal in size.
                Some(_) => {
                    let pieces = (hi - lo).div_ceil(step).max(1);
                    ((hi - lo).div_ceil(pieces)).div_ceil(record) * record
                }
                None => step,
            };
            let mut start = lo;
            while start < hi {
                // Avoid a tiny tail split: absorb up to 10% extra, as Hadoop's SPLIT_SLOP.
                let end = if hi - start <= step.saturating_add(step / 10) {
                    hi
                } else {
                    start + step
                };
                push_split(&mut splits, &file, start, end);
                start = end;
            }
        }
    }
    splits
}

/// The byte ranges a file is planned in: the whole file, or each of its
/// store's blocks of `block` bytes (their boundaries moved down to a
/// multiple of `record`, so fixed-length records are not cut).
fn segments(len: u64, block: Option<u64>, record: u64) -> Vec<(u64, u64)> {
    let Some(block) = block.filter(|&b| b > 0) else {
        return vec![(0, len)];
    };
    let mut cuts: Vec<u64> = (1..len.div_ceil(block))
        .map(|i| i * block / record * record)
        .filter(|&c| c > 0 && c < len)
        .collect();
    cuts.dedup();
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut lo = 0;
    for c in cuts.into_iter().chain(std::iter::once(len)) {
        if c > lo {
            out.push((lo, c));
            lo = c;
        }
    }
    out
}

fn push_split(splits: &mut Vec<Split>, file: &Arc<InputFile>, start: u64, end: u64) {
    splits.push(Split {
        index: splits.len(),
        file: Arc::clone(file),
        start,
        end,
    });
}

/// The input of one map task: one split, or several small ones read one
/// after another (Hadoop's `CombineFileSplit`), so that many small files
/// do not make as many tasks. Its `index` names the task (`part-m-NNNNN`,
/// `MapContext::task`); each part keeps the offsets of its own file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSplit {
    /// Position in the job's map tasks.
    pub index: usize,
    /// The splits read, in order; never empty.
    pub parts: Vec<Split>,
}

impl MapSplit {
    /// A task reading one split.
    pub fn one(index: usize, split: Split) -> MapSplit {
        MapSplit {
            index,
            parts: vec![split],
        }
    }

    /// Bytes of input the task covers.
    pub fn len(&self) -> u64 {
        self.parts.iter().map(Split::len).sum()
    }

    /// Whether it covers no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether an input piece of `len` bytes is small enough to share a task
/// under a packing target of `target` bytes: under half of it. Larger
/// pieces keep a task of their own, so packing changes nothing for input
/// already cut at the split size.
pub fn packable(len: u64, target: u64) -> bool {
    len < target / 2
}

/// Packs items into groups of at most `target` bytes (`len` gives an
/// item's bytes), keeping their order: an item goes into the open group
/// while the group stays within `target`, else it opens a new group. Every
/// item lands in exactly one group; a group holds at least one item.
pub fn pack<T>(
    items: impl IntoIterator<Item = T>,
    target: u64,
    len: impl Fn(&T) -> u64,
) -> Vec<Vec<T>> {
    let mut groups: Vec<Vec<T>> = Vec::new();
    let mut bytes = 0u64;
    for item in items {
        let n = len(&item);
        match groups.last_mut() {
            Some(g) if bytes.saturating_add(n) <= target => {
                g.push(item);
                bytes += n;
            }
            _ => {
                groups.push(vec![item]);
                bytes = n;
            }
        }
    }
    groups
}

/// The map tasks of a job over `splits`, in their order: runs of splits
/// under half of `target` bytes ([`packable`]) are packed into tasks of up
/// to `target` bytes; other splits (and synthetic ones, which carry no
/// bytes but a task each) are a task of their own. Order is kept, so a
/// map-only job's part files still follow its input.
pub fn combine(splits: Vec<Split>, target: u64) -> Vec<MapSplit> {
    let mut tasks: Vec<Vec<Split>> = Vec::new();
    let mut run: Vec<Split> = Vec::new();
    for s in splits {
        if !s.is_synthetic() && packable(s.len(), target) {
            run.push(s);
            continue;
        }
        tasks.extend(pack(std::mem::take(&mut run), target, Split::len));
        tasks.push(vec![s]);
    }
    tasks.extend(pack(run, target, Split::len));
    tasks
        .into_iter()
        .enumerate()
        .map(|(index, parts)| MapSplit { index, parts })
        .collect()
}

/// Total bytes of a set of files.
pub fn total_len(files: &[InputFile]) -> u64 {
    files.iter().map(|f| f.len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, len: usize) {
        std::fs::write(dir.join(name), vec![b'x'; len]).unwrap();
    }

    #[test]
    fn directories_skip_hidden_and_underscore_files() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "b.txt", 3);
        write(d.path(), "a.txt", 2);
        write(d.path(), "_SUCCESS", 0);
        write(d.path(), ".hidden", 1);
        let files = resolve(d.path().to_str().unwrap()).unwrap();
        let names: Vec<_> = files.iter().map(|f| f.path.file_name().unwrap()).collect();
        assert_eq!(names, ["a.txt", "b.txt"]);
    }

    #[test]
    fn globs_and_lists_resolve_and_missing_paths_fail() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "p1.txt", 1);
        write(d.path(), "p2.gz", 1);
        let pat = format!("{}/p*", d.path().display());
        let files = resolve(&pat).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[1].codec, Codec::Gzip);
        let missing = format!("{}/nope.txt", d.path().display());
        let err = resolve(&missing).unwrap_err().to_string();
        assert!(
            err.contains("does not exist") && err.contains("nope.txt"),
            "{err}"
        );
        let none = format!("{}/zz*", d.path().display());
        assert!(resolve(&none).is_err());
    }

    #[test]
    fn splits_cover_files_and_respect_record_size() {
        let f = InputFile {
            path: "f".into(),
            len: 920,
            codec: Codec::None,
            checks: None,
            resident: None,
            remote: None,
            fill: None,
        };
        let s = plan_splits(std::slice::from_ref(&f), 300, RecordFormat::Lines);
        let bounds: Vec<_> = s.iter().map(|s| (s.start, s.end)).collect();
        assert_eq!(bounds, [(0, 300), (300, 600), (600, 920)]);
        let f = InputFile { len: 1000, ..f };
        assert_eq!(
            plan_splits(std::slice::from_ref(&f), u64::MAX, RecordFormat::Lines).len(),
            1
        );
        let s = plan_splits(&[f], 250, RecordFormat::Fixed(100));
        assert!(s.iter().all(|s| s.start % 100 == 0 && s.end % 100 == 0));
        assert_eq!(s.last().unwrap().end, 1000);
    }

    struct Blocked(u64);
    impl RemoteSource for Blocked {
        fn open_at(&self, _: u64, _: u64) -> std::io::Result<Box<dyn std::io::Read + Send>> {
            Ok(Box::new(std::io::empty()))
        }
        fn block_size(&self) -> Option<u64> {
            Some(self.0)
        }
    }

    #[test]
    fn splits_of_a_blocked_file_never_cross_a_block() {
        let f = InputFile {
            path: "hdfs://nn/f".into(),
            len: 2500,
            codec: Codec::None,
            checks: None,
            resident: None,
            remote: Some(Remote(Arc::new(Blocked(1000)))),
            fill: None,
        };
        let bounds = |size, format| -> Vec<(u64, u64)> {
            plan_splits(std::slice::from_ref(&f), size, format)
                .iter()
                .map(|s| (s.start, s.end))
                .collect()
        };
        // Larger splits asked for: one a block (Hadoop's rule).
        assert_eq!(
            bounds(u64::MAX, RecordFormat::Lines),
            [(0, 1000), (1000, 2000), (2000, 2500)]
        );
        // Smaller: equal pieces of each block.
        assert_eq!(
            bounds(400, RecordFormat::Lines),
            [
                (0, 334),
                (334, 668),
                (668, 1000),
                (1000, 1334),
                (1334, 1668),
                (1668, 2000),
                (2000, 2250),
                (2250, 2500)
            ]
        );
        // Fixed records: boundaries at record multiples below the blocks'.
        let fixed = bounds(u64::MAX, RecordFormat::Fixed(300));
        assert_eq!(fixed, [(0, 900), (900, 1800), (1800, 2500)]);
    }

    fn sized(lens: &[u64]) -> Vec<Split> {
        let files: Vec<InputFile> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| InputFile {
                path: format!("f{i}").into(),
                len,
                codec: Codec::None,
                checks: None,
                resident: None,
                remote: None,
                fill: None,
            })
            .collect();
        plan_splits(&files, 1000, RecordFormat::Lines)
    }

    #[test]
    fn small_splits_share_tasks_and_large_ones_stay_alone() {
        let tasks = combine(sized(&[100, 200, 3000, 300, 450, 10]), 1000);
        let lens: Vec<Vec<u64>> = tasks
            .iter()
            .map(|t| t.parts.iter().map(Split::len).collect())
            .collect();
        // 3000 bytes are three splits of 1000 (alone); runs of small ones
        // pack up to 1000 bytes a task, in order.
        assert_eq!(
            lens,
            [
                vec![100, 200],
                vec![1000],
                vec![1000],
                vec![1000],
                vec![300, 450, 10]
            ]
        );
        assert!(tasks.iter().enumerate().all(|(i, t)| t.index == i));
        let synthetic = combine((0..3).map(Split::synthetic).collect(), 1000);
        assert_eq!(synthetic.len(), 3, "a synthetic split is a task of its own");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the file sizes and target, every byte of every file is
        /// in exactly one part of one task, and no task but a lone split
        /// exceeds the target.
        #[test]
        fn combined_tasks_cover_every_byte_once(
            lens in proptest::collection::vec(0u64..5000, 0..60),
            target in 1u64..4000,
        ) {
            let files: Vec<InputFile> = lens.iter().enumerate().map(|(i, &len)| InputFile {
                path: format!("f{i}").into(), len, codec: Codec::None, checks: None, resident: None, remote: None, fill: None,
            }).collect();
            let tasks = combine(plan_splits(&files, target, RecordFormat::Lines), target);
            let mut covered: Vec<Vec<(u64, u64)>> = vec![Vec::new(); files.len()];
            for (i, t) in tasks.iter().enumerate() {
                prop_assert_eq!(t.index, i);
                prop_assert!(!t.parts.is_empty());
                prop_assert!(t.parts.len() == 1 || t.len() <= target);
                for p in &t.parts {
                    let f: usize = p.file.path.to_str().unwrap()[1..].parse().unwrap();
                    covered[f].push((p.start, p.end));
                }
            }
            for (f, mut ranges) in covered.into_iter().enumerate() {
                ranges.sort();
                let mut at = 0;
                for (s, e) in ranges {
                    prop_assert_eq!(s, at);
                    prop_assert!(e > s);
                    at = e;
                }
                prop_assert_eq!(at, lens[f]);
            }
        }
    }
}

//! Files of rows read from cluster blocks, cached blocks and remote
//! stores give the rows a local read gives; a damaged block fails naming
//! the copy.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::chunked::{CheckedReader, ChunkSums};
use crate::input::{Codec, InputFile, Remote, RemoteSource, Resident, Split};
use crate::read::{read_records, ReadOptions};
use crate::rows::Projection;
use crate::{FormatError, Result};

/// A remote store's file held in memory; counts its openings.
struct Mem(Vec<u8>, AtomicUsize);

impl RemoteSource for Mem {
    fn open_at(&self, offset: u64, _: u64) -> std::io::Result<Box<dyn Read + Send>> {
        self.1.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(std::io::Cursor::new(
            self.0[offset as usize..].to_vec(),
        )))
    }
}

/// Where a file's bytes are.
#[derive(Clone, Copy, Debug)]
enum Place {
    Local,
    Cached,
    Checked,
    Remote,
}

fn file_at(path: &Path, codec: Codec, place: Place) -> InputFile {
    let bytes = std::fs::read(path).unwrap();
    let mut f = InputFile {
        path: path.to_owned(),
        len: bytes.len() as u64,
        codec,
        checks: None,
        resident: None,
        remote: None,
        fill: None,
    };
    match place {
        Place::Local => {}
        Place::Cached => f.resident = Some(Resident(Arc::new(bytes))),
        Place::Checked => f.checks = Some(Arc::new(ChunkSums::of(&bytes))),
        Place::Remote => f.remote = Some(Remote(Arc::new(Mem(bytes, AtomicUsize::new(0))))),
    }
    f
}

/// The records of `file` read in splits of `step` bytes.
fn read(file: InputFile, step: u64, proj: &Projection) -> Result<Vec<String>> {
    let file = Arc::new(file);
    let mut got = Vec::new();
    let mut start = 0;
    while start < file.len {
        let split = Split {
            index: 0,
            file: file.clone(),
            start,
            end: (start + step).min(file.len),
        };
        let opts = ReadOptions::default();
        read_records::<FormatError, _>(
            &split,
            crate::input::RecordFormat::Lines,
            proj,
            &opts,
            |_, r| {
                got.push(String::from_utf8(r.to_vec()).unwrap());
                Ok(())
            },
        )?;
        start += step;
    }
    Ok(got)
}

const ROWS: i64 = 30_000;

fn parquet_file(dir: &Path) -> std::path::PathBuf {
    use arrow_array::{Int64Array, RecordBatch, StringArray};
    let words: Vec<String> = (0..ROWS).map(|i| format!("word{}", i % 977)).collect();
    let batch = RecordBatch::try_from_iter([
        ("word", Arc::new(StringArray::from(words)) as _),
        ("n", Arc::new(Int64Array::from_iter_values(0..ROWS)) as _),
    ])
    .unwrap();
    let path = dir.join("f.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_size(2_000)
        .set_dictionary_enabled(false)
        .build();
    let f = std::fs::File::create(&path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    path
}

fn avro_file(dir: &Path) -> std::path::PathBuf {
    use apache_avro::types::Record;
    let schema = apache_avro::Schema::parse_str(
        r#"{"type": "record", "name": "r", "fields": [
            {"name": "word", "type": "string"}, {"name": "n", "type": "long"}]}"#,
    )
    .unwrap();
    let path = dir.join("f.avro");
    let f = std::fs::File::create(&path).unwrap();
    let mut w = apache_avro::Writer::new(&schema, f);
    for i in 0..ROWS {
        let mut r = Record::new(&schema).unwrap();
        r.put("word", format!("word{}", i % 977));
        r.put("n", i);
        w.append(r).unwrap();
        if i % 500 == 499 {
            w.flush().unwrap();
        }
    }
    w.into_inner().unwrap();
    path
}

fn seq_file(dir: &Path, block: bool) -> std::path::PathBuf {
    use crate::seqfile::write::{put_long, put_text, SeqWriter};
    use crate::seqfile::{LONG_CLASS, SYNC_LEN, TEXT_CLASS};
    let path = dir.join(if block { "b.seq" } else { "r.seq" });
    let f = std::fs::File::create(&path).unwrap();
    let mut w = SeqWriter::new(f, TEXT_CLASS, LONG_CLASS, block, [5u8; SYNC_LEN]).unwrap();
    for i in 0..ROWS {
        let (mut k, mut v) = (Vec::new(), Vec::new());
        put_text(&mut k, format!("word{}", i % 977).as_bytes());
        put_long(&mut v, i);
        w.append(&k, &v).unwrap();
    }
    w.finish().unwrap();
    path
}

/// Each format's file, its codec and a projection of its rows.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Codec, Projection)> {
    let rows = Projection::piped(&["n", "word"]);
    let seq = Projection::piped(&["value", "key"]);
    vec![
        (parquet_file(dir), Codec::Parquet, rows.clone()),
        (parquet_file(dir), Codec::Parquet, Projection::streaming()),
        (avro_file(dir), Codec::Avro, rows),
        (seq_file(dir, false), Codec::SequenceFile, seq.clone()),
        (seq_file(dir, true), Codec::SequenceFile, seq),
    ]
}

#[test]
fn rows_read_from_blocks_caches_and_stores_are_the_local_ones() {
    let d = tempfile::tempdir().unwrap();
    for (path, codec, proj) in files(d.path()) {
        let local = read(file_at(&path, codec, Place::Local), u64::MAX, &proj).unwrap();
        assert_eq!(local.len(), ROWS as usize, "{}", path.display());
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(
            len > u64::from(crate::chunked::CHUNK),
            "{} spans chunks: {len}",
            path.display()
        );
        for place in [Place::Cached, Place::Checked, Place::Remote] {
            for step in [len, 40_000, len / 3 + 1] {
                let got = read(file_at(&path, codec, place), step, &proj).unwrap();
                assert!(
                    got == local,
                    "{} from {place:?} in splits of {step}",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn a_damaged_block_fails_blaming_the_copy() {
    let d = tempfile::tempdir().unwrap();
    for (path, codec, proj) in files(d.path()) {
        let file = file_at(&path, codec, Place::Checked);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let e = read(file, u64::MAX, &proj).unwrap_err();
        assert!(
            matches!(e, FormatError::Damaged { .. }),
            "{}: {e}",
            path.display()
        );
        assert!(e.to_string().contains("damaged replica"), "{e}");
    }
}

#[test]
fn a_checked_block_seeks_anywhere_handing_out_checked_bytes() {
    let d = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 31 / 7) as u8).collect();
    let p = d.path().join("block");
    std::fs::write(&p, &data).unwrap();
    let sums = Arc::new(ChunkSums::of(&data));
    let mut r = CheckedReader::open(&p, sums.clone()).unwrap();
    for at in [5u64, 70_000, 65_536, 3, 299_990, 131_071, 300_000] {
        assert_eq!(r.seek(SeekFrom::Start(at)).unwrap(), at);
        let mut got = Vec::new();
        let n = (&mut r).take(20).read_to_end(&mut got).unwrap();
        let want = &data[at as usize..(at as usize + 20).min(data.len())];
        assert_eq!(&got[..n], want, "at {at}");
        assert_eq!(r.stream_position().unwrap(), at + n as u64);
    }
    // A seek into a damaged chunk fails before any byte of it is given.
    let mut bad = data.clone();
    bad[200_000] ^= 1;
    std::fs::write(&p, &bad).unwrap();
    let mut r = CheckedReader::open(&p, sums).unwrap();
    let e = r.seek(SeekFrom::Start(196_700)).unwrap_err();
    let inner = e.into_inner().unwrap().downcast::<FormatError>().unwrap();
    assert!(matches!(*inner, FormatError::Damaged { .. }), "{inner}");
}

#[test]
fn a_remote_file_is_opened_again_only_for_long_seeks() {
    let data: Vec<u8> = (0..2_000_000u32).map(|i| i as u8).collect();
    let mem = Arc::new(Mem(data.clone(), AtomicUsize::new(0)));
    let mut r = super::RemoteSeek::new(Remote(mem.clone()), data.len() as u64, 0..100);
    let mut buf = [0u8; 10];
    for at in [0u64, 1000, 200_000, 600_000, 100, 1_900_000, 1_900_500] {
        r.seek(SeekFrom::Start(at)).unwrap();
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf[..], &data[at as usize..at as usize + 10], "at {at}");
    }
    // Opened at 0, 600,000 (past the skip), 100 (backwards), 1,900,000.
    assert_eq!(mem.1.load(Ordering::Relaxed), 4);
}

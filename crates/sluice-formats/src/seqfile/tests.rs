use std::path::Path;
use std::sync::Arc;

use super::write::{put_long, put_text, SeqWriter};
use super::*;
use crate::input::{Codec, InputFile};

fn write_file(path: &Path, n: usize, block: bool) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = SeqWriter::new(f, TEXT_CLASS, LONG_CLASS, block, [7u8; SYNC_LEN]).unwrap();
    for i in 0..n {
        let (mut k, mut v) = (Vec::new(), Vec::new());
        put_text(&mut k, format!("word{i}").as_bytes());
        put_long(&mut v, i as i64);
        w.append(&k, &v).unwrap();
    }
    w.finish().unwrap();
}

fn split(path: &Path, start: u64, end: u64) -> Split {
    let len = std::fs::metadata(path).unwrap().len();
    Split {
        index: 0,
        file: Arc::new(InputFile {
            path: path.to_owned(),
            len,
            codec: Codec::SequenceFile,
            checks: None,
            resident: None,
            remote: None,
            fill: None,
        }),
        start,
        end,
    }
}

fn read(path: &Path, step: u64, proj: &Projection) -> Result<Vec<String>> {
    let len = std::fs::metadata(path).unwrap().len();
    let mut got = Vec::new();
    let mut start = 0;
    while start < len {
        let s = split(path, start, (start + step).min(len));
        read_split::<FormatError, _>(&s, proj, 1 << 20, |_, r| {
            got.push(String::from_utf8(r.to_vec()).unwrap());
            Ok(())
        })?;
        start += step;
    }
    Ok(got)
}

#[test]
fn vints_are_hadoops() {
    // WritableUtils.writeVLong's bytes for a few values.
    let cases: [(i64, &[u8]); 6] = [
        (0, &[0]),
        (127, &[127]),
        (-112, &[0x90]),
        (128, &[0x8f, 0x80]),
        (-113, &[0x87, 0x70]),
        (1_000_000, &[0x8d, 0x0f, 0x42, 0x40]),
    ];
    for (v, bytes) in cases {
        let mut out = Vec::new();
        put_vint(&mut out, v);
        assert_eq!(out, bytes, "{v}");
        assert_eq!(vint(bytes), Some((v, bytes.len())));
    }
    for v in [i64::MIN, -1 << 40, -129, 255, 1 << 33, i64::MAX] {
        let mut out = Vec::new();
        put_vint(&mut out, v);
        assert_eq!(vint(&out), Some((v, out.len())), "{v}");
    }
}

#[test]
fn every_record_is_read_once_whatever_the_splits() {
    let d = tempfile::tempdir().unwrap();
    for block in [false, true] {
        let p = d.path().join(format!("f{block}.seq"));
        write_file(&p, 20_000, block);
        let h = header(&p).unwrap();
        assert_eq!(
            h.compression,
            if block {
                Compression::Block
            } else {
                Compression::None
            }
        );
        let proj = Projection {
            columns: vec!["key".into(), "value".into()],
            sep: b'\t',
            ..Projection::default()
        };
        let want: Vec<String> = (0..20_000).map(|i| format!("word{i}\t{i}")).collect();
        let len = std::fs::metadata(&p).unwrap().len();
        for step in [len, 1000, 4099, len / 3 + 1] {
            assert_eq!(
                read(&p, step, &proj).unwrap(),
                want,
                "block {block}, splits of {step}"
            );
        }
        let values = read(&p, 5000, &Projection::default()).unwrap();
        assert_eq!(values[7], "7");
    }
}

#[test]
fn a_bad_sync_or_a_cut_names_the_offset() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f.seq");
    write_file(&p, 2000, false);
    let mut bytes = std::fs::read(&p).unwrap();
    let h = header(&p).unwrap();
    let mark = [&[0xff; 4][..], &h.sync[..]].concat();
    let at = memchr::memmem::find(&bytes[h.len as usize..], &mark).unwrap() + h.len as usize;
    bytes[at + 10] ^= 1;
    let bad = d.path().join("bad.seq");
    std::fs::write(&bad, &bytes).unwrap();
    let e = read(&bad, 1 << 30, &Projection::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("offset {at}")) && e.contains("bad sync marker"),
        "{e}"
    );
    let cut = d.path().join("cut.seq");
    std::fs::write(&cut, &std::fs::read(&p).unwrap()[..at + 30]).unwrap();
    let e = read(&cut, 1 << 30, &Projection::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("truncated") && e.contains("cut.seq"), "{e}");
}

#[test]
fn a_damaged_block_names_its_offset() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f.seq");
    write_file(&p, 2000, true);
    let mut bytes = std::fs::read(&p).unwrap();
    let h = header(&p).unwrap();
    let n = bytes.len();
    bytes[n - 20] ^= 0x55;
    std::fs::write(&p, &bytes).unwrap();
    let e = read(&p, 1 << 30, &Projection::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("offset {}", h.len)), "{e}");
}

//! A worker's block store: block files and their checksum files.
//!
//! Block `ID` is `DATA_DIR/blocks/ID` (its bytes, nothing else, so it can
//! be sent with `sendfile` and read by any record reader) and
//! `DATA_DIR/blocks/ID.meta`, its chunk checksums in the layout of
//! [`sluice_formats::chunked`]. Every way a block enters the store
//! ([`store_stream`] for blocks arriving over the data plane, [`adopt`]
//! for a task's output file) computes the checksums from the bytes as they
//! are written, syncs both files, and renames the checksum file into place
//! before the block file: a block that exists has its checksums. Readers
//! check the checksum file against the catalog's length and CRC
//! ([`open_checked`]) and then every chunk as they stream.
//!
//! A write that fails (no space, a peer that went away) removes what it
//! wrote; a write refused for want of space still reads the rest of the
//! request, so the writer hears why instead of a reset connection.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

use sluice_formats::chunked::{ChunkHasher, ChunkSums, Damage};

use crate::layout::Layout;
use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// A writer that feeds everything it writes to a [`ChunkHasher`].
#[derive(Debug)]
pub struct Hashing<W> {
    pub inner: W,
    pub hasher: ChunkHasher,
}

impl<W: Write> Hashing<W> {
    pub fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: ChunkHasher::new(),
        }
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Whether an I/O error means the disk is full.
pub fn is_no_space(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC) || e.kind() == std::io::ErrorKind::StorageFull
}

/// Stores `len` bytes read from `r` as block `id`, whose whole CRC32C must
/// be `crc`. Bytes left unread after a local failure are drained (up to
/// `len`) so that the peer can read the error.
pub fn store_stream(
    layout: &Layout,
    id: &str,
    r: &mut impl Read,
    len: u64,
    crc: u32,
    peer: &str,
) -> Result<()> {
    let tmp = layout.temp(id, "tmp");
    let mut read = 0u64;
    let res = (|| {
        let f = File::create(&tmp).map_err(|e| local_write_error(&tmp, e))?;
        let mut w = Hashing::new(BufWriter::with_capacity(256 << 10, f));
        let mut buf = vec![0u8; 256 << 10];
        while read < len {
            let want = buf.len().min((len - read) as usize);
            let k = r
                .read(&mut buf[..want])
                .map_err(|e| ClusterError::net("receiving from", peer, e))?;
            if k == 0 {
                break;
            }
            read += k as u64;
            w.write_all(&buf[..k])
                .map_err(|e| local_write_error(&tmp, e))?;
        }
        let sums = w.hasher.finish();
        if sums.len != len || sums.crc != crc {
            return Err(ClusterError::Corrupt {
                from: peer.to_owned(),
                msg: format!(
                    "block {id}: got {} bytes, crc {:08x}; want {len}, {crc:08x}",
                    sums.len, sums.crc
                ),
            });
        }
        let f = w
            .inner
            .into_inner()
            .map_err(|e| local_write_error(&tmp, e.into_error()))?;
        f.sync_all().map_err(|e| local_write_error(&tmp, e))?;
        install(layout, id, &tmp, &sums, true)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
        // Read what the peer still sends, so it can read our answer.
        let _ = std::io::copy(
            &mut (&mut *r).take(len.saturating_sub(read)),
            &mut std::io::sink(),
        );
    }
    res
}

/// An error writing `path` on this worker's disk, a full disk said plainly.
pub fn local_write_error(path: &Path, e: std::io::Error) -> ClusterError {
    if is_no_space(&e) {
        return ClusterError::NoSpace(format!(
            "no space left on device writing {}",
            path.display()
        ));
    }
    ClusterError::io("writing", path, e)
}

/// Writes `sums` as block `id`'s checksum file (synced when `durable`)
/// and renames `data` into place as the block.
fn install(layout: &Layout, id: &str, data: &Path, sums: &ChunkSums, durable: bool) -> Result<()> {
    let meta_tmp = layout.temp(id, "meta-tmp");
    let res = (|| {
        let mut f = File::create(&meta_tmp).map_err(|e| local_write_error(&meta_tmp, e))?;
        f.write_all(&sums.encode())
            .and_then(|()| if durable { f.sync_all() } else { Ok(()) })
            .map_err(|e| local_write_error(&meta_tmp, e))?;
        let meta = layout.meta(id);
        std::fs::rename(&meta_tmp, &meta).map_err(|e| ClusterError::io("renaming", &meta, e))?;
        let to = layout.block(id);
        std::fs::rename(data, &to).map_err(|e| ClusterError::io("renaming", &to, e))?;
        if durable {
            // The renames themselves survive a crash once the directory is.
            let dir = layout.root.join("blocks");
            let _ = File::open(&dir).and_then(|d| d.sync_all());
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&meta_tmp);
    }
    res
}

/// Makes the finished file `file` (a task's output, on this worker's disk)
/// block `id`; returns its length and CRC32C. Not synced, as HDFS does
/// not sync a block it finalizes by default (`dfs.datanode.synconclose`):
/// a crash that loses the bytes leaves a replica its checksums reject.
pub fn adopt(layout: &Layout, id: &str, file: &Path) -> Result<(u64, u32)> {
    let sums = sums_of_file(file)?;
    install(layout, id, file, &sums, false)?;
    Ok((sums.len, sums.crc))
}

/// The chunk checksums of a whole file, read in large pieces.
fn sums_of_file(path: &Path) -> Result<ChunkSums> {
    let mut f = File::open(path).map_err(|e| ClusterError::io("reading", path, e))?;
    let mut h = ChunkHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(h.finish()),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ClusterError::io("reading", path, e)),
        }
    }
}

/// Makes the block store whole at a worker's start: removes temporary
/// files a crash left (`.ID.tmp-*`, `.ID.meta-tmp-*`) and checksum files
/// without their block, and gives every block without a checksum file one
/// computed from its bytes (blocks stored before checksum files existed);
/// returns how many it gave. Safe against damage: a reader still checks
/// the sums against the catalog's CRC of the block ([`open_checked`]), so
/// sums computed from damaged bytes fail there. A block it cannot read is
/// left for readers to find.
pub fn tidy(layout: &Layout) -> Result<usize> {
    let dir = layout.root.join("blocks");
    let listing = std::fs::read_dir(&dir).map_err(|e| ClusterError::io("listing", &dir, e))?;
    for e in listing.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let orphan_meta = name
            .strip_suffix(".meta")
            .is_some_and(|id| !layout.block(id).exists());
        if name.starts_with('.') || orphan_meta {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let mut n = 0;
    for id in layout
        .block_ids()
        .map_err(|e| ClusterError::io("listing", &dir, e))?
    {
        if layout.meta(&id).exists() {
            continue;
        }
        let written = sums_of_file(&layout.block(&id)).and_then(|sums| {
            let meta_tmp = layout.temp(&id, "meta-tmp");
            std::fs::write(&meta_tmp, sums.encode())
                .and_then(|()| std::fs::rename(&meta_tmp, layout.meta(&id)))
                .map_err(|e| {
                    let _ = std::fs::remove_file(&meta_tmp);
                    local_write_error(&meta_tmp, e)
                })
        });
        match written {
            Ok(()) => n += 1,
            Err(e) => tracing::warn!("block {id}: no checksum file written: {e}"),
        }
    }
    Ok(n)
}

/// Why a stored block cannot be used now.
#[derive(Debug)]
pub enum Unusable {
    /// The copy is damaged: evidence against this replica, to report.
    Damaged(Damage),
    /// It could not be read (too many open files, a transient disk
    /// error): an error, not evidence; the replica is not blamed.
    Io(std::io::Error),
}

impl From<Damage> for Unusable {
    fn from(d: Damage) -> Self {
        Unusable::Damaged(d)
    }
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Damaged(d) => write!(f, "damaged replica: {d}"),
            Unusable::Io(e) => write!(f, "unreadable: {e}"),
        }
    }
}

/// The length of stored block `id`'s file.
fn block_len(layout: &Layout, id: &str) -> std::result::Result<u64, Unusable> {
    match std::fs::metadata(layout.block(id)) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Damage::Missing.into()),
        Err(e) => Err(Unusable::Io(e)),
    }
}

/// Stored block `id`'s checksum file, parsed.
fn load_sums(layout: &Layout, id: &str) -> std::result::Result<ChunkSums, Unusable> {
    Ok(ChunkSums::load(&layout.meta(id)).map_err(Unusable::Io)??)
}

/// The checksums of stored block `id`, checked against the catalog's
/// length and CRC, and the block file's length against them. Reading the
/// block through them ([`sluice_formats::input::Split::whole_checked`])
/// checks every chunk.
pub fn open_checked(
    layout: &Layout,
    id: &str,
    len: u64,
    crc: u32,
) -> std::result::Result<Arc<ChunkSums>, Unusable> {
    let found = block_len(layout, id)?;
    if found != len {
        return Err(Damage::Length {
            expected: len,
            found,
        }
        .into());
    }
    let sums = load_sums(layout, id)?;
    sums.matches(len, crc)?;
    Ok(Arc::new(sums))
}

/// Reads stored block `id` whole against its checksum file (and, when
/// given, the catalog's length and CRC). For the block scanner and for
/// blocks read whole outside a record reader (side inputs).
pub fn verify(
    layout: &Layout,
    id: &str,
    expect: Option<(u64, u32)>,
) -> std::result::Result<(), Unusable> {
    let sums = match expect {
        Some((len, crc)) => open_checked(layout, id, len, crc)?,
        None => {
            block_len(layout, id)?;
            Arc::new(load_sums(layout, id)?)
        }
    };
    match sums.verify_file(&layout.block(id)) {
        Ok(()) => Ok(()),
        Err(sluice_formats::FormatError::Damaged { damage, .. }) => Err(damage.into()),
        Err(sluice_formats::FormatError::Io { source, .. }) => Err(Unusable::Io(source)),
        Err(e) => Err(Unusable::Io(std::io::Error::other(e.to_string()))),
    }
}

/// A stored block's checksums (its length among them), its file's length
/// checked against them; for a server about to send it.
pub fn check_before_send(layout: &Layout, id: &str) -> std::result::Result<ChunkSums, Unusable> {
    let len = block_len(layout, id)?;
    let sums = load_sums(layout, id)?;
    if sums.len != len {
        return Err(Damage::Length {
            expected: sums.len,
            found: len,
        }
        .into());
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_blocks_carry_checksums_that_catch_damage() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let crc = crc32c::crc32c(&data);
        store_stream(&layout, "b1", &mut &data[..], data.len() as u64, crc, "t").unwrap();
        let n = data.len() as u64;
        open_checked(&layout, "b1", n, crc).unwrap();
        verify(&layout, "b1", Some((n, crc))).unwrap();
        verify(&layout, "b1", None).unwrap();
        // A wrong CRC is refused and leaves nothing.
        let e = store_stream(&layout, "b2", &mut &data[..], n, crc ^ 1, "t").unwrap_err();
        assert!(e.to_string().contains("crc"), "{e}");
        assert_eq!(
            std::fs::read_dir(dir.path().join("blocks"))
                .unwrap()
                .count(),
            2
        );
        // Damage of every kind is named.
        let mut bad = data.clone();
        bad[200_000] ^= 4;
        std::fs::write(layout.block("b1"), &bad).unwrap();
        let d = verify(&layout, "b1", Some((n, crc))).unwrap_err();
        assert!(d.to_string().contains("chunk 3"), "{d}");
        std::fs::write(layout.block("b1"), &data[..10]).unwrap();
        let d = open_checked(&layout, "b1", n, crc).unwrap_err();
        assert_eq!(d.to_string(), "damaged replica: 10 bytes of 300000");
        std::fs::write(layout.block("b1"), &data).unwrap();
        std::fs::remove_file(layout.meta("b1")).unwrap();
        assert!(open_checked(&layout, "b1", n, crc).is_err());
        layout.remove_block("b1");
        assert!(matches!(
            open_checked(&layout, "b1", n, crc),
            Err(Unusable::Damaged(Damage::Missing))
        ));
    }

    #[test]
    fn blocks_from_before_checksum_files_get_them_and_are_still_checked() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let good = b"intact\n".repeat(1000);
        std::fs::write(layout.block("old"), &good).unwrap();
        let mut bad = good.clone();
        bad[10] = b'X';
        std::fs::write(layout.block("rotted"), &bad).unwrap();
        std::fs::write(layout.block(".old.tmp-1"), b"partial").unwrap();
        std::fs::write(layout.meta("gone"), b"meta of a deleted block").unwrap();
        assert_eq!(tidy(&layout).unwrap(), 2);
        assert_eq!(tidy(&layout).unwrap(), 0);
        assert!(!layout.block(".old.tmp-1").exists());
        assert!(!layout.meta("gone").exists());
        let (n, crc) = (good.len() as u64, crc32c::crc32c(&good));
        open_checked(&layout, "old", n, crc).unwrap();
        // The catalog's CRC is of the intact bytes: the rotted copy fails.
        assert!(open_checked(&layout, "rotted", n, crc).is_err());
    }

    #[test]
    fn adopted_files_become_checked_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let f = dir.path().join("part");
        std::fs::write(&f, b"a\t1\nb\t2\n").unwrap();
        let (len, crc) = adopt(&layout, "j1-r0-a0", &f).unwrap();
        assert_eq!((len, crc), (8, crc32c::crc32c(b"a\t1\nb\t2\n")));
        assert!(!f.exists());
        verify(&layout, "j1-r0-a0", Some((len, crc))).unwrap();
    }
}

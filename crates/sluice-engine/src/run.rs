//! A map thread's sorted runs: each a spill file, or the same bytes held
//! in memory when the job's budget has room for them.
//!
//! A spill file the local engine writes and reads back within seconds
//! stays in the page cache; writing and reading it only copies it into
//! and out of the kernel, through a system call per 256 KiB written and
//! per 64 KiB block read (the kernel's share of word count over 11
//! million distinct words was 15%). A run held in memory has the file's
//! bytes, blocks and checksums ([`SpillWriter::in_memory`]), so the merge
//! and its checks are the same either way.
//!
//! Runs are held while [`RunMemory`] has room: the bytes a job's collect
//! share leaves beyond what every thread's collector holds (its buffer
//! and its sort's second buffer, twice the sort buffer). A run that does
//! not fit is written to its file after all.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_formats::spill::{SpillFile, SpillWriter};

use crate::EngineError;

type Result<T> = std::result::Result<T, EngineError>;

/// One sorted run: its file's path (its name, when held in memory) and,
/// when held, the run itself.
#[derive(Debug, Clone)]
pub struct Run {
    /// The run's file in the spill directory (absent while held).
    pub path: PathBuf,
    held: Option<SpillFile>,
}

impl Run {
    /// A run written to `path`.
    pub fn file(path: PathBuf) -> Self {
        Run { path, held: None }
    }

    /// Whether the run is held in memory.
    pub fn in_memory(&self) -> bool {
        self.held.is_some()
    }

    /// The run, opened and validated.
    pub fn open(&self) -> Result<SpillFile> {
        match &self.held {
            Some(run) => Ok(run.clone()),
            None => SpillFile::open(&self.path).map_err(EngineError::from),
        }
    }

    /// Removes the run's file, or lets its memory go once no reader holds
    /// it.
    pub fn remove(self) {
        if self.held.is_none() {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Leaves the run as the file `to`: its file renamed, or its bytes
    /// written.
    pub fn move_to(self, to: &Path) -> Result<()> {
        match &self.held {
            None => std::fs::rename(&self.path, to),
            Some(run) => std::fs::write(to, run.bytes().unwrap_or_default()),
        }
        .map_err(|e| EngineError::io("moving map output", to, e))
    }
}

/// Bytes left for runs held in memory, shared by a job's map threads.
#[derive(Debug, Default)]
pub struct RunMemory {
    left: AtomicU64,
}

impl RunMemory {
    /// Room for `bytes` of held runs.
    pub fn new(bytes: u64) -> Self {
        RunMemory {
            left: AtomicU64::new(bytes),
        }
    }

    /// Whether any run may be held at all.
    pub fn any(&self) -> bool {
        self.left.load(Ordering::Relaxed) > 0
    }

    /// Takes `bytes` of the room, if there are that many left.
    fn take(&self, bytes: u64) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(bytes)
            })
            .is_ok()
    }

    /// A writer for the run named `path` of `partitions` partitions: in
    /// memory while there is any room, else the file.
    pub fn writer(&self, path: &Path, partitions: u32) -> Result<SpillWriter> {
        if self.any() {
            Ok(SpillWriter::in_memory(path, partitions))
        } else {
            Ok(SpillWriter::create(path, partitions)?)
        }
    }

    /// The finished run of `w` (from [`RunMemory::writer`]) and its size:
    /// held if its bytes fit the room left, else written to its file.
    pub fn finish(&self, w: SpillWriter) -> Result<(Run, SpillFile, u64)> {
        let (run, size) = w.finish_run()?;
        let path = run.path().to_owned();
        if !run.in_memory() {
            return Ok((Run::file(path), run, size));
        }
        if self.take(size) {
            let held = Some(run.clone());
            return Ok((Run { path, held }, run, size));
        }
        let bytes = run.bytes().unwrap_or_default();
        std::fs::write(&path, bytes)
            .map_err(|e| EngineError::io("writing spill file", &path, e))?;
        let file = SpillFile::open(&path)?;
        Ok((Run::file(path), file, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(mem: &RunMemory, path: &Path) -> (Run, u64) {
        let mut w = mem.writer(path, 2).unwrap();
        for i in 0..100u32 {
            w.append(i / 50, format!("k{i:04}").as_bytes(), b"v")
                .unwrap();
        }
        let (run, _, size) = mem.finish(w).unwrap();
        (run, size)
    }

    /// Runs are held while their bytes fit; the one that does not is
    /// written to its file, and both read back the same.
    #[test]
    fn runs_are_held_while_they_fit_then_written() {
        let d = tempfile::tempdir().unwrap();
        let (_, size) = write(&RunMemory::new(1 << 20), &d.path().join("probe"));
        let mem = RunMemory::new(size + size / 2);
        let (a, _) = write(&mem, &d.path().join("a"));
        let (b, _) = write(&mem, &d.path().join("b"));
        assert!(a.in_memory() && !d.path().join("a").exists());
        assert!(!b.in_memory() && d.path().join("b").exists());
        let (fa, fb) = (a.open().unwrap(), b.open().unwrap());
        assert_eq!(fa.segments(), fb.segments());
        let c = d.path().join("c");
        a.move_to(&c).unwrap();
        assert_eq!(
            std::fs::read(&c).unwrap(),
            std::fs::read(d.path().join("b")).unwrap()
        );
        b.remove();
        assert!(!d.path().join("b").exists());
    }

    /// No room: every run is a file from the start.
    #[test]
    fn without_room_every_run_is_a_file() {
        let d = tempfile::tempdir().unwrap();
        let mem = RunMemory::new(0);
        assert!(!mem.any());
        let (a, _) = write(&mem, &d.path().join("a"));
        assert!(!a.in_memory() && d.path().join("a").exists());
    }
}

//! Where a worker keeps its files: its data directory's layout, and the
//! block ids that may name files in it.
//!
//! `DATA_DIR/blocks/ID` and `DATA_DIR/blocks/ID.meta` hold a block and its
//! chunk checksums ([`crate::block`]), `DATA_DIR/shuffle/JOB/` a job's map
//! outputs, `DATA_DIR/work/JOB/` its scratch space. A block id is checked
//! ([`check_id`]) before it names a file, so none reaches outside.
//!
//! The data directory and those three are mode 0700, whoever made them:
//! only the worker's user reaches its files, never the user its tasks'
//! commands run as (`sluice worker --task-user`).

use std::path::{Path, PathBuf};

use crate::ClusterError;

type Result<T> = std::result::Result<T, ClusterError>;

/// Where a worker keeps its files.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The data directory.
    pub root: PathBuf,
}

impl Layout {
    /// Creates the directories under `root`, and makes `root` and them
    /// mode 0700.
    pub fn create(root: &Path) -> Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        for d in ["blocks", "shuffle", "work"] {
            let p = root.join(d);
            std::fs::create_dir_all(&p).map_err(|e| ClusterError::io("creating", &p, e))?;
        }
        for d in ["", "blocks", "shuffle", "work"] {
            let p = root.join(d);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| ClusterError::io("setting the mode of", &p, e))?;
        }
        Ok(Layout {
            root: root.to_owned(),
        })
    }

    /// A stored block. `id` must be valid ([`check_id`]).
    pub fn block(&self, id: &str) -> PathBuf {
        self.root.join("blocks").join(id)
    }

    /// A job's map outputs.
    pub fn shuffle_dir(&self, job: u64) -> PathBuf {
        self.root.join("shuffle").join(job.to_string())
    }

    /// A map attempt's output.
    pub fn map_output(&self, job: u64, map: u32, attempt: u32) -> PathBuf {
        self.shuffle_dir(job)
            .join(format!("m{map:05}-a{attempt}.run"))
    }

    /// A job's scratch space.
    pub fn work_dir(&self, job: u64) -> PathBuf {
        self.root.join("work").join(job.to_string())
    }

    /// Ids of the blocks stored here.
    /// Fails when the directory, or any entry, cannot be read: a block
    /// report from a partial listing would make present blocks look
    /// missing.
    pub fn block_ids(&self) -> std::io::Result<Vec<String>> {
        let mut ids = Vec::new();
        for e in std::fs::read_dir(self.root.join("blocks"))? {
            if let Ok(name) = e?.file_name().into_string() {
                if check_id(&name).is_ok() {
                    ids.push(name);
                }
            }
        }
        Ok(ids)
    }

    /// A stored block's checksum file.
    pub fn meta(&self, id: &str) -> PathBuf {
        self.root.join("blocks").join(format!("{id}.meta"))
    }

    /// Removes a stored block and its checksum file (missing ones are fine).
    pub fn remove_block(&self, id: &str) {
        if check_id(id).is_ok() {
            let _ = std::fs::remove_file(self.block(id));
            let _ = std::fs::remove_file(self.meta(id));
        }
    }

    /// A temporary file beside the blocks, for block `id`'s `what`.
    pub(crate) fn temp(&self, id: &str, what: &str) -> PathBuf {
        self.root
            .join("blocks")
            .join(format!(".{id}.{what}-{}", crate::now_ms()))
    }
}

/// Block ids are 1-64 characters of `[A-Za-z0-9_-]`: they name files, so
/// none can reach outside the block directory.
pub fn check_id(id: &str) -> Result<()> {
    crate::ids::BlockId::new(id).map(|_| ())
}

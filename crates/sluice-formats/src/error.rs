use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong reading or writing Sluice's formats. Each
/// variant names the file, and the byte offset where one is known.
#[derive(Debug, Error)]
pub enum FormatError {
    /// An I/O call failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done ("reading", "writing spill file", ...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An input path or pattern matched nothing.
    #[error("input path does not exist: {0}")]
    InputNotFound(String),
    /// A glob pattern is malformed.
    #[error("bad input pattern {pattern}: {detail}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why.
        detail: String,
    },
    /// A record is longer than the configured limit.
    #[error(
        "{}: record at offset {offset} exceeds the record size limit of {limit} bytes \
         (raise it with --max-record-size)",
        path.display()
    )]
    RecordTooLarge {
        /// The file.
        path: PathBuf,
        /// Offset of the record's first byte.
        offset: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// A file ends in the middle of a record, block or trailer.
    #[error("{}: truncated at offset {offset}: {detail}", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where the data ran out.
        offset: u64,
        /// What was expected.
        detail: String,
    },
    /// A checksum, length or magic number does not validate.
    #[error("{}: corrupt at offset {offset}: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Offset of the bad block or field.
        offset: u64,
        /// What failed to validate.
        detail: String,
    },
    /// A stored block (a cluster replica) does not match its checksums:
    /// the fault of that copy, not of the job reading it.
    #[error("{}: damaged replica: {damage}", path.display())]
    Damaged {
        /// The block file.
        path: PathBuf,
        /// What is wrong with it.
        damage: Damage,
    },
    /// A gzip stream could not be decoded.
    #[error("{}: gzip stream is corrupt or truncated near decompressed offset {offset}: {source}", path.display())]
    Gzip {
        /// The file.
        path: PathBuf,
        /// Decompressed bytes delivered before the failure.
        offset: u64,
        /// The decoder's error.
        #[source]
        source: std::io::Error,
    },
    /// A file of rows lacks what the job reads (a column).
    #[error("{}: {detail}", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// What is missing.
        detail: String,
    },
    /// A compressed file other than gzip could not be decoded.
    #[error("{}: {codec} data is corrupt or cut short {place}: {detail}", path.display())]
    Decompress {
        /// The file.
        path: PathBuf,
        /// The compression (`bzip2`, `zstd`, `lz4`, `snappy`).
        codec: &'static str,
        /// Where: a compressed block's offset, or the decompressed offset.
        place: String,
        /// The decoder's error.
        detail: String,
    },
}

impl FormatError {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        FormatError::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn corrupt(path: &std::path::Path, offset: u64, detail: impl Into<String>) -> Self {
        FormatError::Corrupt {
            path: path.to_owned(),
            offset,
            detail: detail.into(),
        }
    }

    pub(crate) fn truncated(
        path: &std::path::Path,
        offset: u64,
        detail: impl Into<String>,
    ) -> Self {
        FormatError::Truncated {
            path: path.to_owned(),
            offset,
            detail: detail.into(),
        }
    }
}

/// What is wrong with a stored block: the evidence a reader reports
/// against that copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The block file is not there.
    Missing,
    /// The block file has the wrong length.
    Length {
        /// Bytes it should have.
        expected: u64,
        /// Bytes it has.
        found: u64,
    },
    /// A chunk's bytes do not match its CRC.
    Chunk {
        /// Chunk number.
        index: u64,
        /// Its first byte's offset in the block.
        offset: u64,
        /// The CRC the checksum file holds.
        expected: u32,
        /// The CRC of the bytes read.
        found: u32,
    },
    /// The checksum file is missing, damaged, or belongs to other data.
    Checksums(String),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Missing => write!(f, "block file missing"),
            Damage::Length { expected, found } => write!(f, "{found} bytes of {expected}"),
            Damage::Chunk {
                index,
                offset,
                expected,
                found,
            } => write!(
                f,
                "checksum mismatch at chunk {index} (offset {offset}): expected {expected:08x}, found {found:08x}"
            ),
            Damage::Checksums(m) => write!(f, "checksum file {m}"),
        }
    }
}

//! Input and output on object stores: `s3://bucket/prefix` paths (AWS S3
//! or an S3-compatible server) through the `object_store` crate.
//!
//! **Reading.** [`resolve`] lists what a path names, as the local input
//! does for files: one object, every object under a prefix, or the
//! objects matching a glob; names starting with `_` or `.` are skipped.
//! A prefix holding a committed Sluice output reads exactly the objects
//! its `_SUCCESS` manifest lists. Each object becomes an
//! [`InputFile`] whose bytes are read
//! with ranged GETs as the split's reader asks for them
//! ([`Object`]), so splits follow byte ranges as for local files
//! and gzip objects are one split.
//!
//! **Writing.** An object store has no rename, so a job cannot write into
//! a temporary directory and rename it into place. [`commit`] uploads a
//! finished local output's part files under names unique to the job
//! (`part-r-00000-<job>`; S3 checks each upload's SHA-256), then writes
//! `_SUCCESS`, a manifest listing them, with a conditional put that fails
//! if one exists (unless overwriting): the manifest is the commit point.
//! Before its first part a commit writes a `_PENDING-<job>` marker.
//! Readers of the output read the manifest's objects only, and refuse a
//! path with a marker and no manifest, so parts of a job that died before
//! its manifest, or of an earlier output being replaced, are never part
//! of an answer; they are removed after the manifest is written (and by
//! the next commit to the same path if the committer died first).
//!
//! Configuration is the usual environment: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` (or `AWS_DEFAULT_REGION`),
//! `AWS_ENDPOINT_URL` for an S3-compatible server (requests are then
//! path-style, and plain HTTP is allowed for an `http://` endpoint).

//!
//! HDFS paths (`hdfs://HOST:PORT/path`) are read and committed as the
//! [`hdfs`] module says: splits on block boundaries, block hosts for
//! locality, and a commit by one rename.

mod commit;
mod error;
mod hadoop_ipc;
pub mod hdfs;
mod manifest;
mod object;
mod ranged;
mod runtime;
mod short_circuit;

use std::path::Path;

pub use commit::manifest;
pub use error::StorageError;
pub use manifest::{Manifest, ManifestFile, MANIFEST, PENDING};
pub use object::{Location, Object};
use sluice_formats::input::InputFile;

/// Whether `spec` (comma-separated paths) names object-store or HDFS
/// paths.
pub fn is_remote(spec: &str) -> bool {
    spec.split(',')
        .any(|e| is_hdfs(e) || e.trim().starts_with("s3://"))
}

/// Whether `path` is an `hdfs://` path.
fn is_hdfs(path: &str) -> bool {
    path.trim().starts_with("hdfs://")
}

/// Every file `spec` (comma-separated `s3://` or `hdfs://` paths: files,
/// directories or prefixes, globs) names, as input files read from their
/// store.
pub fn resolve(spec: &str) -> Result<Vec<InputFile>, StorageError> {
    let mut out = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let before = out.len();
        if is_hdfs(entry) {
            hdfs::resolve_entry(entry, &mut out)?;
        } else {
            object::resolve_entry(entry, &mut out)?;
        }
        if out.len() == before {
            return Err(StorageError::NotFound(entry.into()));
        }
    }
    Ok(out)
}

/// The one file at `url` (`hdfs://` or `s3://`; taken as it is: no list,
/// no glob, commas and wildcards are part of the name).
pub fn open_file(url: &str) -> Result<InputFile, StorageError> {
    if is_hdfs(url) {
        hdfs::open_file(url)
    } else {
        object::open_file(url)
    }
}

/// Refuses an output that exists already unless `overwrite`: what a job
/// checks before it runs, so it does not run in vain.
pub fn check_output(url: &str, overwrite: bool) -> Result<(), StorageError> {
    if is_hdfs(url) {
        hdfs::check_output(url, overwrite)
    } else {
        commit::check_output(url, overwrite)
    }
}

/// Commits the finished output in the local directory `local` to `url`
/// on its store; returns the manifest written.
pub fn commit(local: &Path, url: &str, overwrite: bool) -> Result<Manifest, StorageError> {
    if is_hdfs(url) {
        hdfs::commit(local, url, overwrite)
    } else {
        commit::commit(local, url, overwrite)
    }
}

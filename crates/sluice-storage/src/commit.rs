//! Committing a job's output to an object store without a rename: parts
//! under names unique to the job, then a manifest written with a
//! conditional put as the commit point (see the crate's documentation).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::buffered::BufWriter;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tokio::io::AsyncWriteExt;

use crate::manifest::{Manifest, ManifestFile, MANIFEST, PENDING};
use crate::object::{get_all, list, store, Location};
use crate::runtime::runtime;
use crate::StorageError;

type Result<T> = std::result::Result<T, StorageError>;

/// Refuses an output that is committed already unless `overwrite`: what a
/// job checks before it runs, so it does not run in vain.
pub fn check_output(url: &str, overwrite: bool) -> Result<()> {
    let loc = Location::parse(url)?;
    if !overwrite && committed(&store(&loc.bucket)?, &loc)? {
        return Err(StorageError::OutputExists(url.into()));
    }
    Ok(())
}

fn committed(store: &Arc<dyn ObjectStore>, loc: &Location) -> Result<bool> {
    let path = ObjPath::from(loc.child(MANIFEST));
    match runtime().block_on(store.head(&path)) {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(StorageError::store(
            "looking for",
            &loc.url_of(&loc.child(MANIFEST)),
            e,
        )),
    }
}

/// Commits the finished output in the local directory `local` to `url`
/// (see the crate's documentation); returns the manifest written.
pub fn commit(local: &Path, url: &str, overwrite: bool) -> Result<Manifest> {
    let loc = Location::parse(url)?;
    let store = store(&loc.bucket)?;
    if !overwrite && committed(&store, &loc)? {
        return Err(StorageError::OutputExists(url.into()));
    }
    let job = format!("{:016x}", rand::random::<u64>());
    let mut manifest = Manifest {
        committer: "sluice".into(),
        job: job.clone(),
        files: Vec::new(),
        extra: Vec::new(),
    };
    let marker = ObjPath::from(loc.child(&format!("{PENDING}{job}")));
    runtime()
        .block_on(store.put(&marker, PutPayload::default()))
        .map_err(|e| StorageError::store("writing", &loc.url_of(marker.as_ref()), e))?;
    for (rel, path) in local_files(local)? {
        let key = format!("{rel}-{job}");
        let len = upload(&store, &path, &loc.child(&key), &loc)?;
        let entry = ManifestFile { key, len };
        if rel.starts_with('_') {
            manifest.extra.push(entry);
        } else {
            manifest.files.push(entry);
        }
    }
    if std::env::var("SLUICE_FAULT_S3_COMMIT").as_deref() == Ok("before-manifest") {
        // Fault injection for tests: the committer dies here.
        std::process::exit(86);
    }
    write_manifest(&store, &loc, &manifest, overwrite)?;
    remove_others(&store, &loc, &manifest)?;
    Ok(manifest)
}

/// The output's files (subdirectories' too) by name relative to `dir`,
/// in name order; `_SUCCESS` and hidden files left out.
pub(crate) fn local_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut todo = vec![(String::new(), dir.to_path_buf())];
    while let Some((prefix, d)) = todo.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| local_err(&d, e))?;
        for e in entries {
            let e = e.map_err(|e| local_err(&d, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == MANIFEST || name.starts_with('.') {
                continue;
            }
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            if e.path().is_dir() {
                todo.push((rel, e.path()));
            } else {
                out.push((rel, e.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn local_err(path: &Path, source: std::io::Error) -> StorageError {
    StorageError::Local {
        path: path.display().to_string(),
        source,
    }
}

/// Streams a local file to `key` (a multipart upload past a few MB, so a
/// large part is never whole in memory); returns its length.
fn upload(store: &Arc<dyn ObjectStore>, file: &Path, key: &str, loc: &Location) -> Result<u64> {
    let shown = loc.url_of(key);
    let mut f = std::fs::File::open(file).map_err(|e| local_err(file, e))?;
    let store = store.clone();
    let path = ObjPath::from(key);
    let mut w = BufWriter::new(store, path);
    let mut len = 0u64;
    let failed = |e: std::io::Error| {
        let source = object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        };
        StorageError::store("writing", &shown, source)
    };
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut f, &mut buf).map_err(|e| local_err(file, e))?;
        if n == 0 {
            break;
        }
        len += n as u64;
        runtime().block_on(w.write_all(&buf[..n])).map_err(failed)?;
    }
    runtime().block_on(w.shutdown()).map_err(failed)?;
    Ok(len)
}

/// Writes the manifest: only if none exists, unless overwriting.
fn write_manifest(
    store: &Arc<dyn ObjectStore>,
    loc: &Location,
    m: &Manifest,
    overwrite: bool,
) -> Result<()> {
    let key = loc.child(MANIFEST);
    let body = serde_json::to_vec_pretty(m).expect("serializable");
    let opts = PutOptions {
        mode: if overwrite {
            PutMode::Overwrite
        } else {
            PutMode::Create
        },
        ..PutOptions::default()
    };
    let path = ObjPath::from(key.as_str());
    match runtime().block_on(store.put_opts(&path, PutPayload::from(body), opts)) {
        Ok(_) => Ok(()),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => {
            // Another job committed first: ours is not the output.
            let _ = remove_keys(
                store,
                m.files.iter().chain(&m.extra).map(|f| loc.child(&f.key)),
            );
            Err(StorageError::OutputExists(loc.url_of(&loc.key)))
        }
        Err(e) => Err(StorageError::store("writing", &loc.url_of(&key), e)),
    }
}

/// Removes every object under the output that the manifest does not
/// list: an earlier output replaced, parts of jobs that died before their
/// manifest.
fn remove_others(store: &Arc<dyn ObjectStore>, loc: &Location, m: &Manifest) -> Result<()> {
    let keep: std::collections::HashSet<String> = m
        .files
        .iter()
        .chain(&m.extra)
        .map(|f| loc.child(&f.key))
        .chain([loc.child(MANIFEST)])
        .collect();
    let listed = list(store, &loc.key, &loc.url_of(&loc.key))?;
    remove_keys(
        store,
        listed
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| !keep.contains(k)),
    )
}

fn remove_keys(store: &Arc<dyn ObjectStore>, keys: impl Iterator<Item = String>) -> Result<()> {
    for k in keys {
        let path = ObjPath::from(k.as_str());
        match runtime().block_on(store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(StorageError::store("removing", &k, e)),
        }
    }
    Ok(())
}

/// The manifest of the committed output at `url`, if there is one.
pub fn manifest(url: &str) -> Result<Option<Manifest>> {
    let loc = Location::parse(url)?;
    let store = store(&loc.bucket)?;
    if !committed(&store, &loc)? {
        return Ok(None);
    }
    let bytes = get_all(&store, &loc.child(MANIFEST), url)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StorageError::BadManifest {
            path: format!("{url}/{MANIFEST}"),
            why: e.to_string(),
        })
}

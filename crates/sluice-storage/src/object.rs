//! Object-store paths: parsing, the stores, listing, and reading objects
//! as input files.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path as ObjPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use sluice_formats::input::{Codec, InputFile, Remote, RemoteSource};

use crate::manifest::{Manifest, MANIFEST, PENDING};
use crate::ranged::{reader, Chunks, RangeSource};
use crate::runtime::runtime;
use crate::StorageError;

type Result<T> = std::result::Result<T, StorageError>;

/// `s3://bucket/key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub bucket: String,
    /// The key or prefix, without a leading or trailing `/`.
    pub key: String,
}

impl Location {
    /// Parses `s3://bucket/key`.
    pub fn parse(url: &str) -> Result<Location> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| StorageError::BadPath(url.into()))?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(StorageError::BadPath(url.into()));
        }
        Ok(Location {
            bucket: bucket.into(),
            key: key.trim_matches('/').into(),
        })
    }

    /// The URL of `key` in the same bucket.
    pub fn url_of(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    /// The key of `name` under this one taken as a directory.
    pub fn child(&self, name: &str) -> String {
        if self.key.is_empty() {
            name.into()
        } else {
            format!("{}/{name}", self.key)
        }
    }
}

/// The store of `bucket`, configured from the environment (one per
/// bucket, kept).
pub(crate) fn store(bucket: &str) -> Result<Arc<dyn ObjectStore>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    let mut stores = STORES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(s) = stores.get(bucket) {
        return Ok(s.clone());
    }
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_checksum_algorithm(object_store::aws::Checksum::SHA256);
    if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") {
        b = b
            .with_endpoint(&endpoint)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    let s: Arc<dyn ObjectStore> = Arc::new(
        b.build()
            .map_err(|e| StorageError::store("configuring the store of", bucket, e))?,
    );
    stores.insert(bucket.into(), s.clone());
    Ok(s)
}

/// The one object at `url` (no prefix, no glob), as an input file: what
/// a worker reads a planned split of.
pub(crate) fn open_file(url: &str) -> Result<InputFile> {
    let loc = Location::parse(url)?;
    let store = store(&loc.bucket)?;
    let path = ObjPath::from(loc.key.as_str());
    match runtime().block_on(store.head(&path)) {
        Ok(meta) => Ok(input_file(&loc, store, &loc.key, meta.size)),
        Err(object_store::Error::NotFound { .. }) => Err(StorageError::NotFound(url.into())),
        Err(e) => Err(StorageError::store("reading", url, e)),
    }
}

pub(crate) fn resolve_entry(entry: &str, out: &mut Vec<InputFile>) -> Result<()> {
    let loc = Location::parse(entry)?;
    let store = store(&loc.bucket)?;
    let rt = runtime();
    let glob_at = loc.key.find(['*', '?', '[']);
    if glob_at.is_none() && !loc.key.is_empty() {
        // One object?
        let path = ObjPath::from(loc.key.as_str());
        if let Ok(meta) = rt.block_on(store.head(&path)) {
            out.push(input_file(&loc, store, &loc.key, meta.size));
            return Ok(());
        }
    }
    // A prefix: list it (up to the glob's first directory, then filter).
    let dir = match glob_at {
        Some(i) => loc.key[..i]
            .rsplit_once('/')
            .map_or("", |(d, _)| d)
            .to_owned(),
        None => loc.key.clone(),
    };
    let pattern = glob_at
        .map(|_| glob::Pattern::new(&loc.key))
        .transpose()
        .map_err(|e| StorageError::BadPath(format!("{entry} ({e})")))?;
    let listed = list(&store, &dir, entry)?;
    if let Some(m) = manifest_of(&store, &dir, &listed, entry)? {
        for f in m.files {
            let key = if dir.is_empty() {
                f.key
            } else {
                format!("{dir}/{}", f.key)
            };
            out.push(input_file(&loc, store.clone(), &key, f.len));
        }
        return Ok(());
    }
    let dir_of = |k: &str| k.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
    if listed.iter().any(|(k, _)| {
        dir_of(k) == dir && k.rsplit('/').next().is_some_and(|n| n.starts_with(PENDING))
    }) {
        return Err(StorageError::Uncommitted(entry.into()));
    }
    for (key, size) in listed {
        let name = key.rsplit('/').next().unwrap_or(&key);
        if name.starts_with('_') || name.starts_with('.') {
            continue;
        }
        if pattern.as_ref().is_some_and(|p| !p.matches(&key)) {
            continue;
        }
        out.push(input_file(&loc, store.clone(), &key, size));
    }
    Ok(())
}

/// Every object under `dir` with its size, sorted by key.
pub(crate) fn list(
    store: &Arc<dyn ObjectStore>,
    dir: &str,
    shown: &str,
) -> Result<Vec<(String, u64)>> {
    let prefix = (!dir.is_empty()).then(|| ObjPath::from(dir));
    let metas: Vec<_> = runtime().block_on(store.list(prefix.as_ref()).collect::<Vec<_>>());
    let mut out = Vec::with_capacity(metas.len());
    for m in metas {
        let m = m.map_err(|e| StorageError::store("listing", shown, e))?;
        out.push((m.location.to_string(), m.size));
    }
    out.sort();
    Ok(out)
}

/// The manifest of a committed output at `dir`, if `listed` has one.
fn manifest_of(
    store: &Arc<dyn ObjectStore>,
    dir: &str,
    listed: &[(String, u64)],
    shown: &str,
) -> Result<Option<Manifest>> {
    let key = if dir.is_empty() {
        MANIFEST.to_owned()
    } else {
        format!("{dir}/{MANIFEST}")
    };
    if !listed.iter().any(|(k, _)| *k == key) {
        return Ok(None);
    }
    let bytes = get_all(store, &key, shown)?;
    if bytes.is_empty() {
        // A Hadoop-style empty marker: the directory's objects are the output.
        return Ok(None);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StorageError::BadManifest {
            path: format!("{shown}/{MANIFEST}"),
            why: e.to_string(),
        })
}

/// The whole of object `key`.
pub(crate) fn get_all(store: &Arc<dyn ObjectStore>, key: &str, shown: &str) -> Result<Bytes> {
    let path = ObjPath::from(key);
    runtime()
        .block_on(async { store.get(&path).await?.bytes().await })
        .map_err(|e| StorageError::store("reading", shown, e))
}

fn input_file(loc: &Location, store: Arc<dyn ObjectStore>, key: &str, len: u64) -> InputFile {
    let url = loc.url_of(key);
    let codec = Codec::of_name(key);
    InputFile {
        path: url.clone().into(),
        len,
        codec,
        checks: None,
        resident: None,
        fill: None,
        remote: Some(Remote(Arc::new(Object {
            store,
            path: ObjPath::from(key),
            url,
            len,
        }))),
    }
}

/// One object read with ranged GETs.
#[derive(Clone)]
pub struct Object {
    store: Arc<dyn ObjectStore>,
    path: ObjPath,
    url: String,
    len: u64,
}

impl RemoteSource for Object {
    fn open_at(&self, offset: u64, hint_end: u64) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(reader(Arc::new(self.clone()), offset, hint_end))
    }
}

impl RangeSource for Object {
    fn len(&self) -> u64 {
        self.len
    }

    fn fetch(&self, range: std::ops::Range<u64>) -> std::io::Result<Chunks> {
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range)),
            ..GetOptions::default()
        };
        let (store, path) = (self.store.clone(), self.path.clone());
        let got = runtime().block_on(async move { store.get_opts(&path, opts).await });
        let url = self.url.clone();
        let got = got.map_err(|e| std::io::Error::other(format!("reading {url}: {e}")))?;
        Ok(got
            .into_stream()
            .map(move |c| c.map_err(|e| std::io::Error::other(format!("reading {url}: {e}"))))
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse() {
        let l = Location::parse("s3://b/x/y/").unwrap();
        assert_eq!((l.bucket.as_str(), l.key.as_str()), ("b", "x/y"));
        assert_eq!(l.child("part-0"), "x/y/part-0");
        assert_eq!(Location::parse("s3://b").unwrap().child("p"), "p");
        assert!(Location::parse("s3:///k").is_err());
        assert!(Location::parse("/local").is_err());
        assert!(crate::is_remote("a,s3://b/c"));
        assert!(!crate::is_remote("data/text"));
    }
}

//! An application's staging directory in the cluster's file system,
//! `/user/USER/.sluice/APP_ID/` (0700), through hdfs-native: what
//! `sluice yarn up` uploads for the containers (the shared secret, the
//! client configuration) and the files the client and the
//! ApplicationMaster pass each other (`coordinator.json` from the
//! ApplicationMaster, `stop` from `sluice yarn down`).
//!
//! The large files, the `sluice` binary and the ApplicationMaster's jar,
//! go to `/user/USER/.sluice/cache/NAME-LEN-CRC` once (LEN its length,
//! CRC the CRC32C of its bytes in 8 hex digits) and are kept there for
//! the next applications: an unchanged binary is not uploaded again, and
//! a NodeManager that localized it for an earlier application of the
//! same user (YARN's PRIVATE visibility) does not copy it again either.
//! Removing the cache directory between applications is safe.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use bytes::Bytes;
use hdfs_native::{Client, ClientBuilder, WriteOptions};

use crate::runtime::runtime;
use crate::{Result, YarnError};

/// Upload buffer size.
const CHUNK: usize = 4 << 20;

/// A file as YARN localizes it: its URL, size and modification time
/// (YARN checks both before it copies the file into a container).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// `hdfs://NAMENODE/user/USER/.sluice/APP_ID/NAME`.
    pub url: String,
    /// Its length in bytes.
    pub size: u64,
    /// Its modification time (Unix ms).
    pub timestamp: u64,
    /// Kept across applications (in the cache), so YARN may keep its
    /// localized copy too (PRIVATE visibility, not APPLICATION).
    pub cached: bool,
}

/// One application's staging directory.
#[derive(Debug)]
pub struct Staging {
    client: Client,
    fs: String,
    dir: String,
}

impl Staging {
    /// The staging directory of `app` for `user` on `fs`
    /// (`hdfs://HOST:PORT`), configured from `conf_dir`; nothing is
    /// created yet.
    pub fn open(fs: &str, conf_dir: &Path, user: &str, app: &str) -> Result<Staging> {
        let _in = runtime().enter();
        // A NameNode that does not answer is given up on in seconds.
        let retries = HashMap::from([
            (
                "dfs.client.failover.max.attempts".to_owned(),
                "3".to_owned(),
            ),
            (
                "dfs.client.failover.sleep.base.millis".to_owned(),
                "500".to_owned(),
            ),
            (
                "dfs.client.failover.sleep.max.millis".to_owned(),
                "2000".to_owned(),
            ),
        ]);
        let client = ClientBuilder::new()
            .with_url(fs)
            .with_config_dir(conf_dir.display().to_string())
            .with_config(retries)
            .with_user(user)
            .with_io_runtime(runtime().handle().clone())
            .build()
            .map_err(|e| YarnError::Hdfs {
                what: "connecting to",
                path: fs.to_owned(),
                source: e,
            })?;
        Ok(Staging {
            client,
            fs: fs.trim_end_matches('/').to_owned(),
            dir: format!("/user/{user}/.sluice/{app}"),
        })
    }

    /// The directory's path.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The full URL of `name` in it.
    pub fn url(&self, name: &str) -> String {
        format!("{}{}/{name}", self.fs, self.dir)
    }

    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.dir)
    }

    fn hdfs(
        &self,
        what: &'static str,
        name: &str,
    ) -> impl FnOnce(hdfs_native::HdfsError) -> YarnError {
        let path = self.url(name);
        move |source| YarnError::Hdfs { what, path, source }
    }

    /// Creates the directory, readable by its user alone.
    pub fn create(&self) -> Result<()> {
        runtime()
            .block_on(self.client.mkdirs(&self.dir, 0o700, true))
            .map_err(self.hdfs("creating", ""))
    }

    /// Copies the local file `local` in as `name` (mode `perm`).
    pub fn upload(&self, local: &Path, name: &str, perm: u32) -> Result<Uploaded> {
        self.write_file(local, &self.path(name), perm)
            .map_err(|e| match e {
                hdfs_native::HdfsError::IOError(source) => YarnError::Local {
                    path: local.display().to_string(),
                    source,
                },
                e => self.hdfs("uploading to", name)(e),
            })?;
        self.info(name)
    }

    /// Writes `bytes` as the whole of `name` (mode `perm`).
    pub fn write(&self, name: &str, bytes: &[u8], perm: u32) -> Result<Uploaded> {
        let path = self.path(name);
        let data = Bytes::copy_from_slice(bytes);
        runtime()
            .block_on(async {
                let opts = WriteOptions::default().overwrite(true).permission(perm);
                let mut w = self.client.create(&path, opts).await?;
                w.write_bytes(data).await?;
                w.close().await
            })
            .map_err(self.hdfs("writing", name))?;
        self.info(name)
    }

    /// `name`'s URL, size and modification time.
    pub fn info(&self, name: &str) -> Result<Uploaded> {
        let st = runtime()
            .block_on(self.client.get_file_info(&self.path(name)))
            .map_err(self.hdfs("reading the status of", name))?;
        Ok(Uploaded {
            url: self.url(name),
            size: st.length as u64,
            timestamp: st.modification_time,
            cached: false,
        })
    }

    /// The cache directory, beside the applications' directories.
    fn cache_dir(&self) -> String {
        let parent = self.dir.rsplit_once('/').map_or("", |(p, _)| p);
        format!("{parent}/cache")
    }

    /// The local file `local` in the cache as `prefix-LEN-CRC`, uploaded
    /// unless it is there already.
    pub fn cached(&self, local: &Path, prefix: &str) -> Result<Uploaded> {
        let (len, crc) = checksum(local)?;
        let path = format!("{}/{prefix}-{len}-{crc:08x}", self.cache_dir());
        let url = format!("{}{path}", self.fs);
        let found = |st: hdfs_native::client::FileStatus| Uploaded {
            url: url.clone(),
            size: st.length as u64,
            timestamp: st.modification_time,
            cached: true,
        };
        let rt = runtime();
        if let Ok(st) = rt.block_on(self.client.get_file_info(&path)) {
            if st.length as u64 == len {
                return Ok(found(st));
            }
        }
        // Written beside it, then renamed: a reader never finds a part.
        let name = path.rsplit_once('/').map_or("", |(_, n)| n).to_owned();
        let app = self.dir.rsplit_once('/').map_or("", |(_, a)| a).to_owned();
        let tmp = format!("{}/.{name}.{app}", self.cache_dir());
        self.write_file(local, &tmp, 0o700)
            .map_err(|e| YarnError::Hdfs {
                what: "uploading to",
                path: url.clone(),
                source: e,
            })?;
        rt.block_on(self.client.rename(&tmp, &path, true))
            .map_err(self.hdfs("caching", &name))?;
        let st = rt
            .block_on(self.client.get_file_info(&path))
            .map_err(self.hdfs("reading the status of", &name))?;
        Ok(found(st))
    }

    /// Copies the local file `local` to the HDFS path `path`.
    fn write_file(
        &self,
        local: &Path,
        path: &str,
        perm: u32,
    ) -> std::result::Result<(), hdfs_native::HdfsError> {
        let mut f = std::fs::File::open(local)?;
        runtime().block_on(async {
            let opts = WriteOptions::default()
                .overwrite(true)
                .permission(perm)
                .create_parent(true);
            let mut w = self.client.create(path, opts).await?;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                w.write_bytes(Bytes::copy_from_slice(&buf[..n])).await?;
            }
            w.close().await
        })
    }

    /// `name`'s bytes, or `None` when it does not exist.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(name);
        let r = runtime().block_on(async {
            let f = self.client.read(&path).await?;
            let len = f.file_length();
            f.read_range(0, len).await
        });
        match r {
            Ok(b) => Ok(Some(b.to_vec())),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(self.hdfs("reading", name)(e)),
        }
    }

    /// Whether the directory exists.
    pub fn exists(&self) -> Result<bool> {
        match runtime().block_on(self.client.get_file_info(&self.dir)) {
            Ok(_) => Ok(true),
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(self.hdfs("reading the status of", "")(e)),
        }
    }

    /// Removes the directory and all it holds.
    pub fn remove(&self) -> Result<()> {
        runtime()
            .block_on(self.client.delete(&self.dir, true))
            .map(drop)
            .map_err(self.hdfs("removing", ""))
    }
}

/// Whether `e` says the path does not exist (the NameNode's
/// `FileNotFoundException` arrives as an RPC error on reads).
fn not_found(e: &hdfs_native::HdfsError) -> bool {
    match e {
        hdfs_native::HdfsError::FileNotFound(_) => true,
        hdfs_native::HdfsError::RPCError(class, _) => class.ends_with("FileNotFoundException"),
        _ => false,
    }
}

/// A local file's length and CRC32C.
fn checksum(local: &Path) -> Result<(u64, u32)> {
    let err = |source| YarnError::Local {
        path: local.display().to_string(),
        source,
    };
    let mut f = std::fs::File::open(local).map_err(err)?;
    let mut buf = vec![0u8; CHUNK];
    let (mut len, mut crc) = (0u64, 0u32);
    loop {
        let n = f.read(&mut buf).map_err(err)?;
        if n == 0 {
            return Ok((len, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        len += n as u64;
    }
}

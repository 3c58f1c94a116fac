//! An application's staging directory in the cluster's file system,
//! `/user/USER/.sluice/APP_ID/` (0700), through hdfs-native: what
//! `sluice yarn up` uploads for the containers (the `sluice` binary, the
//! ApplicationMaster's jar, the shared secret, the client configuration)
//! and the files the client and the ApplicationMaster pass each other
//! (`coordinator.json` from the ApplicationMaster, `stop` from
//! `sluice yarn down`).

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
        let local_err = |e| YarnError::Local {
            path: local.display().to_string(),
            source: e,
        };
        let mut f = std::fs::File::open(local).map_err(local_err)?;
        let path = self.path(name);
        runtime()
            .block_on(async {
                let opts = WriteOptions::default().overwrite(true).permission(perm);
                let mut w = self.client.create(&path, opts).await?;
                let mut buf = vec![0u8; CHUNK];
                loop {
                    let n = f.read(&mut buf).map_err(hdfs_native::HdfsError::IOError)?;
                    if n == 0 {
                        break;
                    }
                    w.write_bytes(Bytes::copy_from_slice(&buf[..n])).await?;
                }
                w.close().await
            })
            .map_err(self.hdfs("uploading to", name))?;
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

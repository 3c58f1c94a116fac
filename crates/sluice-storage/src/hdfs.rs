//! HDFS paths (`hdfs://HOST:PORT/path`) through the `hdfs-native`
//! crate, which speaks the NameNode's RPC and the DataNodes' transfer
//! protocol itself (no JVM) and verifies every packet's checksums as it
//! reads (a mismatch fails that replica and the read moves to the next).
//!
//! **Reading.** A path names a file, a directory (its files, not
//! recursing, skipping names starting with `_` or `.`, as Hadoop does) or
//! a glob. Each file is an [`InputFile`] read in ranges; it tells the
//! planner its block size, so splits never cross a block, and, through
//! WebHDFS's `GETFILEBLOCKLOCATIONS`, the hosts holding each block, which
//! a cluster's scheduler matches against its workers' hosts. WebHDFS is
//! at `SLUICE_WEBHDFS` (`http://HOST:PORT`) or else at the NameNode's
//! host on port 9870, Hadoop 3's default.
//!
//! **Writing.** HDFS renames a directory atomically, so a commit is
//! Hadoop's: the parts are written into a hidden directory beside the
//! output (`.NAME.sluice-<job>`), `_SUCCESS` (the same manifest an object
//! store output has) is written last into it, and one rename makes the
//! whole output visible at once. The rename does not replace an existing
//! path, so two jobs racing for one output cannot both commit. With
//! overwrite, the old output is first renamed aside and removed after the
//! new one is in place. A committer that dies before the rename leaves
//! only its hidden directory, never a partial output; the next commit to
//! that output removes such directories once they are older than
//! [`STALE_STAGING`] (a committer still writing has touched its directory
//! since, unless one file's upload has taken that long).
//!
//! The user is `HADOOP_USER_NAME`, else the login name (simple
//! authentication, as Hadoop's clients).

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures_util::StreamExt;
use hdfs_native::file::FileReader;
use hdfs_native::{Client, ClientBuilder, HdfsError, WriteOptions};
use sluice_formats::input::{Codec, InputFile, Remote, RemoteSource};

use crate::commit::local_files;
use crate::manifest::{Manifest, ManifestFile, MANIFEST};
use crate::ranged::{reader, Chunks, RangeSource};
use crate::runtime::runtime;
use crate::short_circuit::{self, located_blocks, Located};
use crate::StorageError;

type Result<T> = std::result::Result<T, StorageError>;

/// HDFS's default NameNode RPC port, when a path names none.
const NAMENODE_PORT: u16 = 8020;
/// Hadoop 3's default NameNode HTTP port (WebHDFS).
const WEBHDFS_PORT: u16 = 9870;
/// Bytes of a local file written to HDFS at a time.
const UPLOAD_CHUNK: usize = 4 << 20;

/// `hdfs://HOST:PORT/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HdfsPath {
    /// `HOST:PORT` (or `HOST`: the client's default port).
    pub authority: String,
    /// The absolute path, without a trailing `/` (`/` for the root).
    pub path: String,
}

impl HdfsPath {
    /// Parses `hdfs://HOST:PORT/path`.
    pub fn parse(url: &str) -> Result<HdfsPath> {
        let rest = url
            .strip_prefix("hdfs://")
            .ok_or_else(|| StorageError::BadPath(url.into()))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(StorageError::BadPath(url.into()));
        }
        let path = path.trim_end_matches('/');
        Ok(HdfsPath {
            authority: authority.into(),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
        })
    }

    /// The URL of `path` on the same NameNode.
    pub fn url_of(&self, path: &str) -> String {
        format!("hdfs://{}{path}", self.authority)
    }

    /// The parent directory and the last name (`/` and `""` for the root).
    fn split(&self) -> (String, String) {
        match self.path.rsplit_once('/') {
            Some(("", name)) => ("/".into(), name.into()),
            Some((dir, name)) => (dir.into(), name.into()),
            None => ("/".into(), self.path.clone()),
        }
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The client of the NameNode at `authority` (one each, kept).
fn client(authority: &str) -> Result<Arc<Client>> {
    static CLIENTS: OnceLock<Mutex<HashMap<String, Arc<Client>>>> = OnceLock::new();
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(c) = clients.get(authority) {
        return Ok(c.clone());
    }
    let url = format!("hdfs://{authority}");
    let _in_runtime = runtime().enter();
    let c = ClientBuilder::new()
        .with_url(&url)
        .with_config(retries())
        .with_io_runtime(runtime().handle().clone())
        .build()
        .map_err(|e| StorageError::hdfs("connecting to", &url, e))?;
    let c = Arc::new(c);
    clients.insert(authority.into(), c.clone());
    Ok(c)
}

/// How long a NameNode that does not answer is retried: four attempts,
/// 0.5 s apart growing to 2 s (about 6 s in all), where the client's
/// defaults (15 attempts, up to 15 s apart) hold a job for minutes
/// before it reports an unreachable NameNode. `SLUICE_HDFS_RETRIES`
/// sets the number of attempts.
fn retries() -> HashMap<String, String> {
    let attempts = std::env::var("SLUICE_HDFS_RETRIES").unwrap_or_else(|_| "4".into());
    HashMap::from([
        ("dfs.client.failover.max.attempts".into(), attempts),
        ("dfs.client.failover.sleep.base.millis".into(), "500".into()),
        ("dfs.client.failover.sleep.max.millis".into(), "2000".into()),
    ])
}

/// The files an `hdfs://` entry names, appended to `out`.
pub(crate) fn resolve_entry(entry: &str, out: &mut Vec<InputFile>) -> Result<()> {
    let loc = HdfsPath::parse(entry)?;
    let c = client(&loc.authority)?;
    let rt = runtime();
    if loc.path.contains(['*', '?', '[']) {
        let matched = rt
            .block_on(c.glob_status(&loc.path))
            .map_err(|e| StorageError::hdfs("listing", entry, e))?;
        let mut matched: Vec<_> = matched.into_iter().filter(|st| !hidden(&st.path)).collect();
        matched.sort_by(|a, b| a.path.cmp(&b.path));
        for st in matched {
            if st.isdir {
                list_dir(&c, &loc, &st.path, out)?;
            } else {
                out.push(input_file(&c, &loc, &st, None));
            }
        }
        return Ok(());
    }
    let st = match rt.block_on(c.get_file_info(&loc.path)) {
        Ok(st) => st,
        Err(HdfsError::FileNotFound(_)) => return Err(StorageError::NotFound(entry.into())),
        Err(e) => return Err(StorageError::hdfs("reading", entry, e)),
    };
    if st.isdir {
        let before = out.len();
        list_dir(&c, &loc, &loc.path, out)?;
        if out.len() == before {
            return Err(StorageError::Empty(entry.into()));
        }
        Ok(())
    } else {
        out.push(input_file(&c, &loc, &st, None));
        Ok(())
    }
}

/// The files directly in `dir`, by name, hidden names skipped.
fn list_dir(c: &Arc<Client>, loc: &HdfsPath, dir: &str, out: &mut Vec<InputFile>) -> Result<()> {
    let mut listed = runtime()
        .block_on(c.list_status(dir, false))
        .map_err(|e| StorageError::hdfs("listing", &loc.url_of(dir), e))?;
    listed.sort_by(|a, b| a.path.cmp(&b.path));
    let siblings = Arc::new(short_circuit::Directory::new(
        namenode(&loc.authority),
        user(),
        dir.to_owned(),
    ));
    for st in listed {
        if st.isdir || hidden(&st.path) {
            continue;
        }
        out.push(input_file(c, loc, &st, Some(siblings.clone())));
    }
    Ok(())
}

/// Whether the last name of `path` starts with `_` or `.` (Hadoop's
/// hidden files: markers, other jobs' staging directories).
fn hidden(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|n| n.starts_with(['_', '.']))
}

/// The one file at `url` (not a directory, no glob), as an input file:
/// what a worker reads a planned split of.
pub(crate) fn open_file(url: &str) -> Result<InputFile> {
    let loc = HdfsPath::parse(url)?;
    let c = client(&loc.authority)?;
    match runtime().block_on(c.get_file_info(&loc.path)) {
        Ok(st) if !st.isdir => Ok(input_file(&c, &loc, &st, None)),
        Ok(_) => Err(StorageError::BadPath(format!(
            "{url} (a directory, not a file)"
        ))),
        Err(HdfsError::FileNotFound(_)) => Err(StorageError::NotFound(url.into())),
        Err(e) => Err(StorageError::hdfs("reading", url, e)),
    }
}

/// An HDFS file as an input file; `dir` is its directory when the job
/// reads the whole directory (its files' blocks are then asked for
/// together).
fn input_file(
    c: &Arc<Client>,
    loc: &HdfsPath,
    st: &hdfs_native::client::FileStatus,
    dir: Option<Arc<short_circuit::Directory>>,
) -> InputFile {
    let url = loc.url_of(&st.path);
    let len = st.length as u64;
    InputFile {
        path: url.clone().into(),
        len,
        codec: Codec::of_name(&st.path),
        checks: None,
        resident: None,
        fill: None,
        remote: Some(Remote(Arc::new(HdfsFile {
            client: c.clone(),
            authority: loc.authority.clone(),
            url,
            path: st.path.clone(),
            len,
            block_size: st.blocksize,
            reader: Arc::default(),
            blocks: Arc::default(),
            located: Arc::default(),
            dir,
        }))),
    }
}

/// One HDFS file read in ranges from its DataNodes.
#[derive(Clone)]
pub struct HdfsFile {
    client: Arc<Client>,
    authority: String,
    url: String,
    path: String,
    len: u64,
    block_size: Option<u64>,
    /// The file opened (its block locations from the NameNode), once.
    reader: Arc<Mutex<Option<Arc<FileReader>>>>,
    /// Its blocks' hosts from WebHDFS, once.
    blocks: Arc<OnceLock<Vec<BlockHosts>>>,
    /// Its blocks with their ids and DataNodes, for short-circuit reads
    /// (none when the NameNode did not give them), once.
    located: Arc<OnceLock<Option<Arc<Vec<Located>>>>>,
    /// Its directory, when the job reads all of it.
    dir: Option<Arc<short_circuit::Directory>>,
}

/// One block of a file and the hosts holding its replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHosts {
    pub offset: u64,
    pub len: u64,
    pub hosts: Vec<String>,
}

impl HdfsFile {
    fn file_reader(&self) -> std::io::Result<Arc<FileReader>> {
        let mut r = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = r.as_ref() {
            return Ok(r.clone());
        }
        let opened = runtime()
            .block_on(self.client.read(&self.path))
            .map_err(|e| std::io::Error::other(format!("opening {}: {e}", self.url)))?;
        let opened = Arc::new(opened);
        *r = Some(opened.clone());
        Ok(opened)
    }

    /// The file's located blocks, when short-circuit reads are on and
    /// the NameNode gives them.
    fn located(&self) -> Option<Arc<Vec<Located>>> {
        if !short_circuit::enabled() {
            return None;
        }
        self.located
            .get_or_init(|| {
                let listed = self.dir.as_ref().and_then(|d| d.blocks(&self.path));
                let blocks = listed.unwrap_or_else(|| {
                    tracing::debug!("the blocks of {} from getBlockLocations", self.url);
                    located_blocks(&namenode(&self.authority), &user(), &self.path, self.len)
                        .map(Arc::new)
                });
                blocks
                    .map_err(|e| tracing::debug!("no short-circuit reads of {}: {e}", self.url))
                    .ok()
            })
            .clone()
    }
}

/// The NameNode's RPC address for a path's authority.
fn namenode(authority: &str) -> String {
    if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:{NAMENODE_PORT}")
    }
}

impl RemoteSource for HdfsFile {
    fn open_at(&self, offset: u64, hint_end: u64) -> std::io::Result<Box<dyn Read + Send>> {
        let me = Arc::new(self.clone());
        if let Some(blocks) = self
            .located()
            .filter(|b| short_circuit::starts_local(b, offset))
        {
            let network: short_circuit::Network =
                Box::new(move |at| reader(me.clone(), at, hint_end.max(at)));
            return Ok(Box::new(short_circuit::Reader::new(
                blocks,
                self.len,
                offset,
                (namenode(&self.authority), user()),
                network,
            )));
        }
        Ok(reader(me, offset, hint_end))
    }

    fn block_size(&self) -> Option<u64> {
        self.block_size
    }

    fn hosts(&self, start: u64, _end: u64) -> Vec<String> {
        let blocks = self.blocks.get_or_init(|| {
            // Without WebHDFS a job still runs, only without locality:
            // said once a process, so a cluster's operator knows why.
            block_hosts(&self.authority, &self.path, self.len).unwrap_or_else(|e| {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::warn!(
                        "no HDFS block locations, so maps get no NODE locality: {e} \
                         (set SLUICE_WEBHDFS to the NameNode's WebHDFS address)"
                    )
                });
                Vec::new()
            })
        });
        blocks
            .iter()
            .find(|b| b.offset <= start && start < b.offset + b.len.max(1))
            .map(|b| b.hosts.clone())
            .unwrap_or_default()
    }
}

impl RangeSource for HdfsFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn fetch(&self, range: std::ops::Range<u64>) -> std::io::Result<Chunks> {
        let r = self.file_reader()?;
        let url = self.url.clone();
        if range.end > r.file_length() as u64 {
            // The client panics past the end: the file shrank since it was listed.
            return Err(std::io::Error::other(format!(
                "reading {url}: the file is now {} bytes, shorter than when the job planned it",
                r.file_length()
            )));
        }
        let len = (range.end - range.start) as usize;
        Ok(r.read_range_stream(range.start as usize, len)
            .map(move |c| c.map_err(|e| std::io::Error::other(format!("reading {url}: {e}"))))
            .boxed())
    }
}

/// The WebHDFS address of the NameNode at `authority`.
fn webhdfs(authority: &str) -> String {
    if let Ok(url) = std::env::var("SLUICE_WEBHDFS") {
        return url.trim_end_matches('/').to_owned();
    }
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    format!("http://{host}:{WEBHDFS_PORT}")
}

/// The user requests are made as.
fn user() -> String {
    std::env::var("HADOOP_USER_NAME")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "root".into())
}

/// Every block of the file at `path` with its hosts, from WebHDFS's
/// `GETFILEBLOCKLOCATIONS`.
pub fn block_hosts(authority: &str, path: &str, len: u64) -> Result<Vec<BlockHosts>> {
    let url = format!(
        "{}/webhdfs/v1{path}?op=GETFILEBLOCKLOCATIONS&offset=0&length={len}&user.name={}",
        webhdfs(authority),
        user()
    );
    let shown = format!("hdfs://{authority}{path} (WebHDFS)");
    let body = runtime().block_on(async {
        let resp = http().get(&url).send().await?.error_for_status()?;
        resp.text().await
    });
    let body = body.map_err(|e| StorageError::Web {
        path: shown.clone(),
        why: e.to_string(),
    })?;
    parse_block_hosts(&body).map_err(|why| StorageError::Web { path: shown, why })
}

/// The HTTP client of WebHDFS requests: a NameNode that does not answer
/// costs seconds, not the system's connect timeout, per file.
fn http() -> &'static reqwest::Client {
    static HTTP: OnceLock<reqwest::Client> = OnceLock::new();
    HTTP.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(3))
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("an HTTP client")
    })
}

/// Reads WebHDFS's `{"BlockLocations":{"BlockLocation":[{offset, length,
/// hosts}...]}}`.
fn parse_block_hosts(body: &str) -> std::result::Result<Vec<BlockHosts>, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let list = v["BlockLocations"]["BlockLocation"]
        .as_array()
        .ok_or("no BlockLocations in the answer")?;
    list.iter()
        .map(|b| {
            let hosts = b["hosts"].as_array().ok_or("a block without hosts")?;
            Ok(BlockHosts {
                offset: b["offset"].as_u64().ok_or("a block without an offset")?,
                len: b["length"].as_u64().ok_or("a block without a length")?,
                hosts: hosts
                    .iter()
                    .filter_map(|h| h.as_str().map(str::to_owned))
                    .collect(),
            })
        })
        .collect()
}

/// Whether anything is at `loc`.
fn exists(c: &Client, loc: &HdfsPath, url: &str) -> Result<bool> {
    match runtime().block_on(c.get_file_info(&loc.path)) {
        Ok(_) => Ok(true),
        Err(HdfsError::FileNotFound(_)) => Ok(false),
        Err(e) => Err(StorageError::hdfs("looking for", url, e)),
    }
}

/// Refuses an output path that exists unless `overwrite` (Hadoop's
/// `FileOutputFormat` refuses any existing output directory).
pub(crate) fn check_output(url: &str, overwrite: bool) -> Result<()> {
    let loc = HdfsPath::parse(url)?;
    if !overwrite && exists(&*client(&loc.authority)?, &loc, url)? {
        return Err(StorageError::OutputExists(url.into()));
    }
    Ok(())
}

/// A staging directory beside an output not modified for this long is a
/// dead committer's.
pub const STALE_STAGING: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the staging directories of `name` in `parent` that are older
/// than [`STALE_STAGING`]: what committers that died left. Best effort:
/// what cannot be listed or removed stays for the next commit.
fn sweep_stale_staging(c: &Client, parent: &str, name: &str) {
    let prefix = format!(".{name}.sluice-");
    let Ok(listed) = runtime().block_on(c.list_status(parent, false)) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let stale = STALE_STAGING.as_millis() as u64;
    for st in listed {
        let base = st.path.rsplit('/').next().unwrap_or_default();
        if st.isdir && base.starts_with(&prefix) && now.saturating_sub(st.modification_time) > stale
        {
            let _ = runtime().block_on(c.delete(&st.path, true));
        }
    }
}

/// Commits the finished output in the local directory `local` to `url`
/// (see the module's documentation); returns the manifest written.
pub(crate) fn commit(local: &Path, url: &str, overwrite: bool) -> Result<Manifest> {
    let loc = HdfsPath::parse(url)?;
    if loc.path == "/" {
        return Err(StorageError::BadPath(format!(
            "{url} (the root cannot be an output)"
        )));
    }
    let c = client(&loc.authority)?;
    if !overwrite && exists(&c, &loc, url)? {
        return Err(StorageError::OutputExists(url.into()));
    }
    let job = format!("{:016x}", rand::random::<u64>());
    let (parent, name) = loc.split();
    let staged = join(&parent, &format!(".{name}.sluice-{job}"));
    let result = stage_and_rename(&c, &loc, local, &staged, &job, overwrite);
    if result.is_ok() {
        sweep_stale_staging(&c, &parent, &name);
    }
    result.map_err(|e| {
        let _ = runtime().block_on(c.delete(&staged, true));
        match e {
            e @ StorageError::OutputExists(_) => e,
            e => StorageError::Commit {
                url: url.into(),
                source: Box::new(e),
            },
        }
    })
}

fn stage_and_rename(
    c: &Client,
    loc: &HdfsPath,
    local: &Path,
    staged: &str,
    job: &str,
    overwrite: bool,
) -> Result<Manifest> {
    let url = loc.url_of(&loc.path);
    let mut manifest = Manifest {
        committer: "sluice".into(),
        job: job.into(),
        files: Vec::new(),
        extra: Vec::new(),
    };
    runtime()
        .block_on(c.mkdirs(staged, 0o755, true))
        .map_err(|e| StorageError::hdfs("creating", &loc.url_of(staged), e))?;
    for (rel, path) in local_files(local)? {
        let len = upload(c, &path, &join(staged, &rel), &loc.url_of(staged))?;
        let entry = ManifestFile { key: rel, len };
        if entry.key.starts_with('_') {
            manifest.extra.push(entry);
        } else {
            manifest.files.push(entry);
        }
    }
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest is JSON");
    write_all(c, &join(staged, MANIFEST), Bytes::from(json), &url)?;
    if std::env::var("SLUICE_FAULT_HDFS_COMMIT").as_deref() == Ok("before-rename") {
        // Fault injection for tests: the committer dies here.
        std::process::exit(86);
    }
    let (parent, name) = loc.split();
    let aside = join(&parent, &format!(".{name}.replaced-{job}"));
    let replacing = overwrite && exists(c, loc, &url)?;
    if replacing {
        runtime()
            .block_on(c.rename(&loc.path, &aside, false))
            .map_err(|e| StorageError::hdfs("moving aside the old output", &url, e))?;
    }
    if let Err(e) = runtime().block_on(c.rename(staged, &loc.path, false)) {
        // The old output goes back where it was (or says where it is).
        if replacing {
            if let Err(back) = runtime().block_on(c.rename(&aside, &loc.path, false)) {
                return Err(StorageError::hdfs(
                    "committing failed, and the old output stays moved aside to",
                    &loc.url_of(&aside),
                    back,
                ));
            }
        }
        return Err(match e {
            HdfsError::AlreadyExists(_) => StorageError::OutputExists(url),
            e if e.to_string().contains("FileAlreadyExists") => StorageError::OutputExists(url),
            e => StorageError::hdfs("committing (renaming into)", &url, e),
        });
    }
    if replacing {
        let _ = runtime().block_on(c.delete(&aside, true));
    }
    Ok(manifest)
}

/// Writes the local file `path` to `dest`; returns its length.
fn upload(c: &Client, path: &Path, dest: &str, shown: &str) -> Result<u64> {
    let mut f = std::fs::File::open(path).map_err(|e| StorageError::Local {
        path: path.display().to_string(),
        source: e,
    })?;
    let opts = WriteOptions::default().create_parent(true);
    let mut w = runtime()
        .block_on(c.create(dest, opts))
        .map_err(|e| StorageError::hdfs("creating a file in", shown, e))?;
    let mut total = 0u64;
    let mut buf = vec![0u8; UPLOAD_CHUNK];
    loop {
        let n = read_full(&mut f, &mut buf).map_err(|e| StorageError::Local {
            path: path.display().to_string(),
            source: e,
        })?;
        if n == 0 {
            break;
        }
        runtime()
            .block_on(w.write_bytes(Bytes::copy_from_slice(&buf[..n])))
            .map_err(|e| StorageError::hdfs("writing", shown, e))?;
        total += n as u64;
    }
    runtime()
        .block_on(w.close())
        .map_err(|e| StorageError::hdfs("closing a file in", shown, e))?;
    Ok(total)
}

/// Writes `bytes` as the whole of the new file `dest`.
fn write_all(c: &Client, dest: &str, bytes: Bytes, shown: &str) -> Result<()> {
    runtime()
        .block_on(async {
            let mut w = c
                .create(dest, WriteOptions::default().create_parent(true))
                .await?;
            w.write_bytes(bytes).await?;
            w.close().await
        })
        .map_err(|e| StorageError::hdfs("writing", shown, e))
}

/// Fills `buf` as far as the file goes.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse() {
        let p = HdfsPath::parse("hdfs://nn:8020/a/b/").unwrap();
        assert_eq!((p.authority.as_str(), p.path.as_str()), ("nn:8020", "/a/b"));
        assert_eq!(p.split(), ("/a".into(), "b".into()));
        assert_eq!(p.url_of("/x"), "hdfs://nn:8020/x");
        let top = HdfsPath::parse("hdfs://nn:8020/out").unwrap();
        assert_eq!(top.split(), ("/".into(), "out".into()));
        assert_eq!(HdfsPath::parse("hdfs://nn").unwrap().path, "/");
        assert!(HdfsPath::parse("hdfs:///x").is_err());
        assert!(HdfsPath::parse("s3://b/x").is_err());
    }

    #[test]
    fn webhdfs_block_locations_parse() {
        let body = r#"{"BlockLocations":{"BlockLocation":[
            {"offset":0,"length":10,"hosts":["dn0","dn1"],"names":["127.0.0.1:1"]},
            {"offset":10,"length":4,"hosts":["dn1"]}]}}"#;
        let b = parse_block_hosts(body).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].hosts, ["dn0", "dn1"]);
        assert_eq!((b[1].offset, b[1].len), (10, 4));
        assert!(parse_block_hosts(r#"{"RemoteException":{}}"#).is_err());
        assert!(parse_block_hosts("not json").is_err());
    }
}

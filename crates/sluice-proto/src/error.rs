use std::path::PathBuf;

/// Everything that can go wrong in the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A file operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A network operation failed.
    #[error("{what} {addr}: {source}")]
    Net {
        what: &'static str,
        addr: String,
        source: std::io::Error,
    },
    /// A peer refused a request or answered with an error.
    #[error("{0}")]
    Remote(String),
    /// A request failed authentication.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// Data arrived damaged (checksum mismatch, bad framing).
    #[error("corrupt data from {from}: {msg}")]
    Corrupt { from: String, msg: String },
    /// A stored replica of a block is damaged (missing, wrong length,
    /// checksum mismatch): that copy's fault, not the reader's.
    #[error("block {block} on {holder}: damaged replica: {damage}")]
    Damaged {
        block: String,
        /// The data-plane address of the worker holding it.
        holder: String,
        /// What is wrong with it.
        damage: String,
    },
    /// A worker's disk is full.
    #[error("{0}")]
    NoSpace(String),
    /// A control-plane call failed.
    #[error("coordinator: {0}")]
    Rpc(String),
    /// Bad arguments or configuration.
    #[error("{0}")]
    Config(String),
    /// The local engine failed a task: its message, and the damage it
    /// met in the task's input when that was the cause (the input
    /// replica's fault, not the task's).
    #[error("{msg}")]
    Task {
        msg: String,
        damaged_input: Option<InputDamage>,
    },
}

/// A file of a task's input found damaged (a checksum mismatch, a bad
/// frame), and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputDamage {
    /// The damaged file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub damage: String,
}

impl ClusterError {
    pub fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        ClusterError::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    pub fn net(what: &'static str, addr: &str, source: std::io::Error) -> Self {
        ClusterError::Net {
            what,
            addr: addr.to_owned(),
            source,
        }
    }
}

impl From<tonic::Status> for ClusterError {
    fn from(s: tonic::Status) -> Self {
        ClusterError::Rpc(s.message().to_owned())
    }
}

impl From<tonic::transport::Error> for ClusterError {
    fn from(e: tonic::transport::Error) -> Self {
        ClusterError::Rpc(format!("{e}: {}", source_chain(&e)))
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push(s.to_string());
        cur = s.source();
    }
    out.join(": ")
}

//! The one error type of Sluice on YARN.

/// What went wrong talking to a Hadoop cluster.
#[derive(Debug, thiserror::Error)]
pub enum YarnError {
    /// No configuration directory was named.
    #[error(
        "no Hadoop configuration: set HADOOP_CONF_DIR or pass --hadoop-conf DIR \
         (a directory with the cluster's core-site.xml and yarn-site.xml)"
    )]
    NoConf,
    /// A configuration file could not be read or parsed.
    #[error("{path}: {why}")]
    Conf {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// The ResourceManager could not be reached or did not answer in time.
    #[error("the ResourceManager at {url} does not answer: {why}")]
    RmUnreachable {
        /// The request's address.
        url: String,
        /// The HTTP client's reason.
        why: String,
    },
    /// The ResourceManager answered with an error.
    #[error("the ResourceManager refused {what}: HTTP {status}: {body}")]
    RmRefused {
        /// The request.
        what: String,
        /// Its status code.
        status: u16,
        /// Its answer (YARN's reason).
        body: String,
    },
    /// The ResourceManager's answer was not what its API documents.
    #[error("the ResourceManager's answer to {what} is not understood: {why}")]
    RmAnswer {
        /// The request.
        what: String,
        /// What was missing or malformed.
        why: String,
    },
    /// A container asked for is larger than YARN gives.
    #[error("a {what} of {asked} is larger than {whose} maximum allocation of {max} ({key})")]
    TooLarge {
        /// Which container.
        what: String,
        /// What was asked, with its unit.
        asked: String,
        /// Whose limit: `the cluster's`, `queue root.q's`.
        whose: String,
        /// The maximum, with its unit.
        max: String,
        /// The setting that sets it.
        key: String,
    },
    /// The application ended, or was refused, before it was up.
    #[error("application {app} ended {state}: {diagnostics}")]
    AppEnded {
        /// Its id.
        app: String,
        /// `FAILED`, `KILLED` or `FINISHED`.
        state: String,
        /// YARN's diagnostics.
        diagnostics: String,
    },
    /// Waiting for the application ran out of time.
    #[error("{0}")]
    Timeout(String),
    /// An HDFS operation failed.
    #[error("{what} {path}: {source}")]
    Hdfs {
        /// The operation.
        what: &'static str,
        /// Its path.
        path: String,
        /// The client's error.
        #[source]
        source: hdfs_native::HdfsError,
    },
    /// A local file could not be read.
    #[error("{path}: {source}")]
    Local {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

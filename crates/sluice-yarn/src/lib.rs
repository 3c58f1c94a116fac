//! Sluice on YARN, the parts that speak Hadoop: a cluster's client
//! configuration ([`conf`]: `core-site.xml` and `yarn-site.xml` of
//! `HADOOP_CONF_DIR`), the ResourceManager's REST API ([`rm`]: a new
//! application, its submission, its report, its kill) and the
//! application's staging directory in the cluster's file system
//! ([`staging`]: `/user/USER/.sluice/APP_ID/`, through hdfs-native).
//! [`launch`] builds the ApplicationMaster's submission. What runs in the
//! cluster is Sluice's JVM ApplicationMaster (the `yarn/` Maven module),
//! which starts the coordinator and the workers; `sluice yarn` in
//! `sluice-cli` puts the pieces together.

pub mod conf;
mod error;
pub mod launch;
pub mod rm;
mod runtime;
pub mod staging;

pub use error::YarnError;

/// This crate's results.
pub type Result<T> = std::result::Result<T, YarnError>;

//! The runtime the HTTP and HDFS requests run on, for callers on plain
//! threads.

use std::sync::OnceLock;

/// The runtime of this crate's requests.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("yarn-client")
            .enable_all()
            .build()
            .expect("a runtime for YARN requests")
    })
}

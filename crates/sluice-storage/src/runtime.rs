//! The tokio runtime that object-store and HDFS requests run on, for
//! callers on plain OS threads.

use std::sync::OnceLock;

/// The runtime the stores' requests run on: input readers are called
/// from the engine's OS threads, which wait on it.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("object-store")
            .enable_all()
            .build()
            .expect("a runtime for object-store requests")
    })
}

//! The Python interpreter the benchmarks call: DuckDB's for the Pavlo
//! benchmark's reference answers, matplotlib's for the OHB plots.

use std::path::{Path, PathBuf};

/// The interpreter `given`, else `$SLUICE_PYTHON`, else the project's
/// `.venv`, else `python3` on the `PATH`.
pub(crate) fn interpreter(given: Option<&Path>) -> PathBuf {
    if let Some(p) = given {
        return p.to_owned();
    }
    if let Some(p) = std::env::var_os("SLUICE_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(".venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

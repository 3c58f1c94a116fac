//! The child's side of a worker process ([`crate::procs`]): the job's
//! decoding and encoding, done natively in the child as the parent does
//! them in process, so both sides speak the same bytes.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::job::{decode_groups, lines, PyJob};

/// The child's side: a job's decoding and encoding, done natively in the
/// child as the parent does it in process (`python/sluice/_proc.py`
/// drives it).
#[pyclass(module = "sluice._sluice")]
pub struct TaskIo {
    job: PyJob,
}

#[pymethods]
impl TaskIo {
    #[new]
    fn py_new(runtime: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(TaskIo {
            job: PyJob::new(runtime)?,
        })
    }

    /// The lines of `block` (starting at byte `offset` of its file) as
    /// strings; `ValueError` naming the line that is not UTF-8.
    fn lines<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        block: &[u8],
    ) -> PyResult<Bound<'py, PyList>> {
        lines(py, self.job.undecodable(), offset, block)
            .map_err(pyo3::exceptions::PyValueError::new_err)
    }

    /// The groups of a `G` request's body (after its count) as a list of
    /// `(key, [values])`.
    fn groups<'py>(
        &self,
        py: Python<'py>,
        counts: &[u8],
        bytes: &[u8],
    ) -> PyResult<Bound<'py, PyList>> {
        let counts = counts
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize);
        decode_groups(py, self.job.codec(), counts, bytes)
    }

    /// A `P` reply's body for `pairs`, a list a task returned: encoded for
    /// another task when `encode`, rendered for the output otherwise.
    fn put<'py>(
        &self,
        pairs: &Bound<'py, PyAny>,
        encode: bool,
        reducers: u32,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (bytes, parts) = self.job.encode_pairs(pairs, encode, reducers)?;
        let mut body = Vec::with_capacity(4 + bytes.len() + 4 * parts.len());
        let n = u32::try_from(bytes.len()).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err("a batch's pairs came to 4 GiB or more")
        })?;
        body.extend_from_slice(&n.to_le_bytes());
        body.extend_from_slice(&bytes);
        for p in parts {
            body.extend_from_slice(&p.to_le_bytes());
        }
        Ok(PyBytes::new(pairs.py(), &body))
    }
}

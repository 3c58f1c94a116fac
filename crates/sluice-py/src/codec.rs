//! The codec of Python jobs' keys and values: a Python object to bytes
//! that sort as the objects do within one type, and back; and the text an
//! output file shows for it.
//!
//! Byte layout (one tag byte, then the payload):
//!
//! | tag | type | payload |
//! |---|---|---|
//! | `0x01` | `None` | none |
//! | `0x02` | `False` | none |
//! | `0x03` | `True` | none |
//! | `0x04` | `int` in the i64 range | 8 bytes big-endian of the value with its sign bit flipped |
//! | `0x05` | `float` | 8 bytes big-endian: the IEEE bits with the sign bit flipped if it was clear, all bits flipped if it was set |
//! | `0x06` | `str` | UTF-8 |
//! | `0x07` | `bytes` | the bytes |
//! | `0x08` | `tuple` | each element encoded, then `0x00` |
//! | `0x09` | `list` | as a tuple |
//! | `0x7f` | anything else (a larger `int`, a `dict`, ...) | `pickle.dumps(obj, protocol=4)` |
//!
//! At the top level a `str`, `bytes` or pickle payload runs to the end of
//! the buffer. Inside a tuple or list it has each `0x00` byte written as
//! `0x00 0xff` and ends with `0x00` (the FoundationDB tuple layer's
//! escaping), so that an element's end is found without a length and
//! shorter tuples sort first. Bytewise order of the encodings is the
//! objects' order within one type (ints numerically, strings by code
//! point, tuples element by element); across types it is the tag order,
//! so `1` and `1.0` are different keys. Pickled objects group by their
//! pickle bytes and have no meaningful order.
//!
//! There is one implementation: Python code that needs the layout (the
//! package's tests, its Streaming tasks on a cluster) calls this one
//! through `sluice.encode` and `sluice.decode`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

const NONE: u8 = 0x01;
const FALSE: u8 = 0x02;
const TRUE: u8 = 0x03;
const INT: u8 = 0x04;
const FLOAT: u8 = 0x05;
const STR: u8 = 0x06;
const BYTES: u8 = 0x07;
const TUPLE: u8 = 0x08;
const LIST: u8 = 0x09;
const PICKLE: u8 = 0x7f;
const END: u8 = 0x00;
const ESCAPE: u8 = 0xff;
const SIGN: u64 = 1 << 63;

/// Python's `pickle.dumps` and `pickle.loads`, for the objects the layout
/// has no tag of its own for.
#[derive(Debug)]
pub struct Codec {
    dumps: Py<PyAny>,
    loads: Py<PyAny>,
}

impl Codec {
    /// The codec, with the pickle functions looked up once.
    pub fn new(py: Python<'_>) -> PyResult<Self> {
        let pickle = py.import("pickle")?;
        Ok(Codec {
            dumps: pickle.getattr("dumps")?.unbind(),
            loads: pickle.getattr("loads")?.unbind(),
        })
    }

    /// Appends the encoding of `obj` to `out`.
    pub fn encode(&self, obj: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
        self.encode_in(obj, out, false)
    }

    fn encode_in(&self, obj: &Bound<'_, PyAny>, out: &mut Vec<u8>, nested: bool) -> PyResult<()> {
        if let Ok(s) = obj.cast::<PyString>() {
            out.push(STR);
            return put_payload(s.to_str()?.as_bytes(), out, nested);
        }
        if obj.is_none() {
            out.push(NONE);
            return Ok(());
        }
        if let Ok(b) = obj.cast::<PyBool>() {
            out.push(if b.is_true() { TRUE } else { FALSE });
            return Ok(());
        }
        if let Ok(i) = obj.cast::<PyInt>() {
            if let Ok(v) = i.extract::<i64>() {
                out.push(INT);
                out.extend_from_slice(&((v as u64) ^ SIGN).to_be_bytes());
                return Ok(());
            }
        } else if let Ok(f) = obj.cast::<PyFloat>() {
            out.push(FLOAT);
            out.extend_from_slice(&float_key(f.value()).to_be_bytes());
            return Ok(());
        } else if let Ok(b) = obj.cast::<PyBytes>() {
            out.push(BYTES);
            return put_payload(b.as_bytes(), out, nested);
        } else if let Ok(t) = obj.cast::<PyTuple>() {
            out.push(TUPLE);
            for item in t.iter() {
                self.encode_in(&item, out, true)?;
            }
            out.push(END);
            return Ok(());
        } else if let Ok(l) = obj.cast::<PyList>() {
            out.push(LIST);
            for item in l.iter() {
                self.encode_in(&item, out, true)?;
            }
            out.push(END);
            return Ok(());
        }
        let pickled = self.dumps.bind(obj.py()).call1((obj, 4))?;
        out.push(PICKLE);
        put_payload(pickled.cast::<PyBytes>()?.as_bytes(), out, nested)
    }

    /// The object `bytes` encodes.
    pub fn decode<'py>(&self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let mut at = 0;
        let obj = self.decode_at(py, bytes, &mut at, false)?;
        if at != bytes.len() {
            return Err(corrupt(bytes, "bytes after the end of the value"));
        }
        Ok(obj)
    }

    fn decode_at<'py>(
        &self,
        py: Python<'py>,
        bytes: &[u8],
        at: &mut usize,
        nested: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tag = *bytes
            .get(*at)
            .ok_or_else(|| corrupt(bytes, "missing tag"))?;
        *at += 1;
        Ok(match tag {
            NONE => py.None().into_bound(py),
            FALSE => PyBool::new(py, false).to_owned().into_any(),
            TRUE => PyBool::new(py, true).to_owned().into_any(),
            INT => (take8(bytes, at)? ^ SIGN)
                .cast_signed()
                .into_pyobject(py)?
                .into_any(),
            FLOAT => PyFloat::new(py, float_from_key(take8(bytes, at)?)).into_any(),
            STR => {
                let raw = take_payload(bytes, at, nested)?;
                let s = std::str::from_utf8(&raw).map_err(|_| corrupt(bytes, "bad UTF-8"))?;
                PyString::new(py, s).into_any()
            }
            BYTES => PyBytes::new(py, &take_payload(bytes, at, nested)?).into_any(),
            TUPLE => PyTuple::new(py, self.decode_items(py, bytes, at)?)?.into_any(),
            LIST => PyList::new(py, self.decode_items(py, bytes, at)?)?.into_any(),
            PICKLE => {
                let raw = take_payload(bytes, at, nested)?;
                self.loads.bind(py).call1((PyBytes::new(py, &raw),))?
            }
            _ => return Err(corrupt(bytes, "unknown tag")),
        })
    }

    fn decode_items<'py>(
        &self,
        py: Python<'py>,
        bytes: &[u8],
        at: &mut usize,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut items = Vec::new();
        loop {
            match bytes.get(*at) {
                None => return Err(corrupt(bytes, "unterminated tuple")),
                Some(&END) => {
                    *at += 1;
                    return Ok(items);
                }
                Some(_) => items.push(self.decode_at(py, bytes, at, true)?),
            }
        }
    }
}

fn corrupt(bytes: &[u8], what: &str) -> PyErr {
    PyValueError::new_err(format!(
        "not a Sluice-encoded Python value ({what}): {} bytes starting {:02x?}",
        bytes.len(),
        &bytes[..bytes.len().min(16)]
    ))
}

fn put_payload(raw: &[u8], out: &mut Vec<u8>, nested: bool) -> PyResult<()> {
    if !nested {
        out.extend_from_slice(raw);
        return Ok(());
    }
    for &b in raw {
        out.push(b);
        if b == END {
            out.push(ESCAPE);
        }
    }
    out.push(END);
    Ok(())
}

fn take8(bytes: &[u8], at: &mut usize) -> PyResult<u64> {
    let raw: [u8; 8] = bytes
        .get(*at..*at + 8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| corrupt(bytes, "short number"))?;
    *at += 8;
    Ok(u64::from_be_bytes(raw))
}

fn take_payload(bytes: &[u8], at: &mut usize, nested: bool) -> PyResult<Vec<u8>> {
    if !nested {
        let raw = bytes[*at..].to_vec();
        *at = bytes.len();
        return Ok(raw);
    }
    let mut raw = Vec::new();
    loop {
        match (bytes.get(*at), bytes.get(*at + 1)) {
            (Some(&END), Some(&ESCAPE)) => {
                raw.push(END);
                *at += 2;
            }
            (Some(&END), _) => {
                *at += 1;
                return Ok(raw);
            }
            (Some(&b), _) => {
                raw.push(b);
                *at += 1;
            }
            (None, _) => return Err(corrupt(bytes, "unterminated element")),
        }
    }
}

/// A float's bits, changed so that unsigned order is numeric order.
fn float_key(f: f64) -> u64 {
    let bits = f.to_bits();
    if bits & SIGN == 0 {
        bits ^ SIGN
    } else {
        !bits
    }
}

fn float_from_key(key: u64) -> f64 {
    f64::from_bits(if key & SIGN != 0 { key ^ SIGN } else { !key })
}

/// How an output file shows keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// `json.dumps(obj, ensure_ascii=False)` (mrjob's protocol), read back
    /// by `sluice.read_output`.
    Json,
    /// A `str` or `bytes` as it is, anything else as `str(obj)` (Hadoop's
    /// `TextOutputFormat`, PySpark's `saveAsTextFile`).
    Raw,
}

/// Writes what an output file shows for `obj`.
pub fn render(
    obj: &Bound<'_, PyAny>,
    format: OutputFormat,
    dumps: &Bound<'_, PyAny>,
    out: &mut Vec<u8>,
) -> PyResult<()> {
    if let Ok(s) = obj.cast::<PyString>() {
        let s = s.to_str()?;
        match format {
            OutputFormat::Raw => out.extend_from_slice(s.as_bytes()),
            OutputFormat::Json => json_string(s, out),
        }
        return Ok(());
    }
    if obj.cast::<PyInt>().is_ok() && obj.cast::<PyBool>().is_err() {
        if let Ok(v) = obj.extract::<i64>() {
            out.extend_from_slice(v.to_string().as_bytes());
            return Ok(());
        }
    }
    if format == OutputFormat::Raw {
        if let Ok(b) = obj.cast::<PyBytes>() {
            out.extend_from_slice(b.as_bytes());
        } else {
            out.extend_from_slice(obj.str()?.to_str()?.as_bytes());
        }
        return Ok(());
    }
    let text = dumps.call1((obj,))?;
    out.extend_from_slice(text.cast::<PyString>()?.to_str()?.as_bytes());
    Ok(())
}

/// A string as `json.dumps(s, ensure_ascii=False)` writes it.
fn json_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..0x20 => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

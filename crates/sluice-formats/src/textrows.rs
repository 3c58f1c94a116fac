//! Text files of rows: CSV with a header row, and JSON lines; read as
//! records of text ([`crate::rows`]).
//!
//! - CSV (RFC 4180): the file's first line names the columns; fields are
//!   separated by `,`, a field in double quotes may hold `,` and `""` (a
//!   quote); a line may end in CR LF. A row is one line: as Spark's
//!   default (`multiLine` off), a quoted field does not hold a newline.
//! - JSON lines: one JSON object a line, its keys the columns; a key a row
//!   lacks, or a `null`, is an empty value; strings as they are, numbers
//!   and booleans as their JSON text, arrays and objects as JSON. Blank
//!   lines are skipped.
//!
//! Both split as text does (a line belongs to the split holding its first
//! byte); every split reads the file's first line for the CSV header.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::rows::Projection;
use crate::{FormatError, Result};

/// Which kind of text rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRows {
    /// CSV with a header row.
    Csv,
    /// JSON lines.
    Jsonl,
}

/// Turns a file's lines into records: the projected columns as text
/// (with [`Projection::json`], a JSON line as it is, a CSV row as a JSON
/// object of its header's names).
pub struct RowLines {
    kind: TextRows,
    path: PathBuf,
    names: Vec<String>,
    pos: Vec<usize>,
    proj: Projection,
    fields: Vec<Vec<u8>>,
    rec: Vec<u8>,
}

impl RowLines {
    /// The converter of the lines of `path`, whose CSV header it reads.
    pub fn new(path: &Path, kind: TextRows, proj: &Projection) -> Result<RowLines> {
        let (names, pos) = match kind {
            TextRows::Csv => {
                let names = csv_header(path)?;
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let pos = if proj.json {
                    (0..names.len()).collect()
                } else {
                    proj.positions(path, &refs)?
                };
                (names, pos)
            }
            TextRows::Jsonl => (Vec::new(), Vec::new()),
        };
        Ok(RowLines {
            kind,
            path: path.to_owned(),
            names,
            pos,
            proj: proj.clone(),
            fields: Vec::new(),
            rec: Vec::new(),
        })
    }

    /// The record of the line at `off`; `None` for the CSV header and for
    /// blank JSON lines.
    pub fn row(&mut self, off: u64, line: &[u8]) -> Result<Option<&[u8]>> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.rec.clear();
        match self.kind {
            TextRows::Csv if off == 0 => return Ok(None),
            TextRows::Csv => self.csv(off, line)?,
            TextRows::Jsonl if line.iter().all(u8::is_ascii_whitespace) => return Ok(None),
            TextRows::Jsonl if self.proj.json => self.rec.extend_from_slice(line),
            TextRows::Jsonl => self.jsonl(off, line)?,
        }
        Ok(Some(&self.rec))
    }

    fn csv(&mut self, off: u64, line: &[u8]) -> Result<()> {
        let path = &self.path;
        split_csv(line, &mut self.fields).map_err(|d| FormatError::corrupt(path, off, d))?;
        if self.fields.len() != self.names.len() {
            let d = format!(
                "a row of {} fields under a header of {}",
                self.fields.len(),
                self.names.len()
            );
            return Err(FormatError::corrupt(path, off, d));
        }
        if self.proj.json {
            let obj: serde_json::Map<String, serde_json::Value> = self
                .names
                .iter()
                .zip(&self.fields)
                .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned().into()))
                .collect();
            serde_json::to_writer(&mut self.rec, &obj).expect("JSON to memory");
        } else {
            let values = self.pos.iter().map(|&p| &self.fields[p][..]);
            join(&mut self.rec, values, self.proj.sep);
        }
        Ok(())
    }

    fn jsonl(&mut self, off: u64, line: &[u8]) -> Result<()> {
        let path = &self.path;
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(line)
            .map_err(|e| FormatError::corrupt(path, off, format!("not a JSON object: {e}")))?;
        if self.proj.columns.is_empty() {
            let names: Vec<&str> = obj.keys().map(String::as_str).collect();
            let p = self.proj.positions(path, &names)?[0];
            push_json(&mut self.rec, obj.values().nth(p));
            return Ok(());
        }
        for (i, c) in self.proj.columns.iter().enumerate() {
            if i > 0 {
                self.rec.push(self.proj.sep);
            }
            push_json(&mut self.rec, obj.get(c));
        }
        Ok(())
    }
}

/// The column names of the CSV file at `path`: its first line's fields.
fn csv_header(path: &Path) -> Result<Vec<String>> {
    let file = std::fs::File::open(path).map_err(|e| FormatError::io("opening", path, e))?;
    let mut line = Vec::new();
    BufReader::new(file)
        .read_until(b'\n', &mut line)
        .map_err(|e| FormatError::io("reading", path, e))?;
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut fields = Vec::new();
    split_csv(line, &mut fields)
        .map_err(|d| FormatError::corrupt(path, 0, format!("the header: {d}")))?;
    if line.is_empty() {
        return Err(FormatError::Schema {
            path: path.to_owned(),
            detail: "has no header row naming its columns".into(),
        });
    }
    Ok(fields
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect())
}

/// Splits a CSV line into its fields (unquoted), into `out`.
pub fn split_csv(line: &[u8], out: &mut Vec<Vec<u8>>) -> std::result::Result<(), String> {
    out.clear();
    let mut i = 0;
    loop {
        let mut field = Vec::new();
        if line.get(i) == Some(&b'"') {
            i += 1;
            loop {
                match line.get(i) {
                    None => return Err("a quoted field is not closed".into()),
                    Some(b'"') if line.get(i + 1) == Some(&b'"') => {
                        field.push(b'"');
                        i += 2;
                    }
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(&b) => {
                        field.push(b);
                        i += 1;
                    }
                }
            }
            if !matches!(line.get(i), None | Some(b',')) {
                return Err(format!("text after a closing quote at byte {i}"));
            }
        } else {
            let end = memchr::memchr(b',', &line[i..]).map_or(line.len(), |n| i + n);
            field.extend_from_slice(&line[i..end]);
            i = end;
        }
        out.push(field);
        if i >= line.len() {
            return Ok(());
        }
        i += 1; // the comma
    }
}

fn join<'a>(out: &mut Vec<u8>, values: impl Iterator<Item = &'a [u8]>, sep: u8) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(sep);
        }
        out.extend_from_slice(v);
    }
}

/// Appends a JSON value as text: a string as it is, null or absent as
/// nothing, anything else as its JSON.
fn push_json(out: &mut Vec<u8>, v: Option<&serde_json::Value>) {
    match v {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::String(s)) => out.extend_from_slice(s.as_bytes()),
        Some(other) => serde_json::to_writer(&mut *out, other).expect("JSON to memory"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::input::{Codec, InputFile, Split};
    use crate::read::{read_records, ReadOptions};

    #[test]
    fn csv_fields_follow_rfc_4180() {
        let mut f = Vec::new();
        split_csv(br#"a,"b"#, &mut f).unwrap_err();
        split_csv(br#"a,"b,c","say ""hi""",,"#, &mut f).unwrap();
        let want: Vec<&[u8]> = vec![b"a", b"b,c", b"say \"hi\"", b"", b""];
        assert_eq!(f, want);
        assert!(split_csv(br#""a"b,c"#, &mut f).is_err());
    }

    fn read(path: &Path, kind: TextRows, proj: &Projection, step: u64) -> Result<Vec<String>> {
        let len = std::fs::metadata(path).unwrap().len();
        let file = Arc::new(InputFile {
            path: path.to_owned(),
            len,
            codec: match kind {
                TextRows::Csv => Codec::Csv,
                TextRows::Jsonl => Codec::Jsonl,
            },
            checks: None,
            resident: None,
            remote: None,
            fill: None,
        });
        let mut got = Vec::new();
        let mut start = 0;
        while start < len {
            let end = (start + step).min(len);
            let s = Split {
                index: 0,
                file: file.clone(),
                start,
                end,
            };
            let lines = crate::input::RecordFormat::Lines;
            read_records::<FormatError, _>(&s, lines, proj, &ReadOptions::default(), |_, r| {
                got.push(String::from_utf8(r.to_vec()).unwrap());
                Ok(())
            })?;
            start = end;
        }
        Ok(got)
    }

    #[test]
    fn rows_by_column_name_whatever_the_splits() {
        let d = tempfile::tempdir().unwrap();
        let csv = d.path().join("t.csv");
        let mut text = String::from("n,word,note\r\n");
        let mut json = String::new();
        for i in 0..3000 {
            text.push_str(&format!("{i},w{i},\"a, \"\"quoted\"\" note\"\r\n"));
            json.push_str(&format!(
                "{{\"word\": \"w{i}\", \"n\": {i}, \"x\": null}}\n\n"
            ));
        }
        std::fs::write(&csv, text).unwrap();
        let jsonl = d.path().join("t.jsonl");
        std::fs::write(&jsonl, json).unwrap();
        let proj = Projection::piped(&["word", "n"]);
        let want: Vec<String> = (0..3000).map(|i| format!("w{i}|{i}")).collect();
        for step in [1 << 20, 1000, 4097] {
            assert_eq!(read(&csv, TextRows::Csv, &proj, step).unwrap(), want);
            assert_eq!(read(&jsonl, TextRows::Jsonl, &proj, step).unwrap(), want);
        }
        let note = read(&csv, TextRows::Csv, &Projection::column("note"), 1 << 20).unwrap();
        assert_eq!(note[5], "a, \"quoted\" note");
        let e = read(&csv, TextRows::Csv, &Projection::column("nope"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("has no column nope"), "{e}");
        let e = read(&jsonl, TextRows::Jsonl, &Projection::default(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("--column"), "{e}");
    }
}

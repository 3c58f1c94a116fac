//! The files of rows a map must read past its own block for: a map over a
//! block of a Parquet, Avro or SequenceFile file stored by `sluice put`
//! is sent the whole file's blocks (`BlockSource.file`), since its header
//! or footer and the rest of a row group or sync block that crosses the
//! block's end are in other blocks. The map still runs where its own
//! block is.

use sluice_formats::input::Codec;
use sluice_proto::catalog::{BlockMeta, Catalog, FileMeta};
use sluice_request::InputFormat;

/// Whether a job of `format` reads the file `name` as rows: always under
/// `--input-format parquet|avro|sequencefile`; under `auto`, a file named
/// `.parquet`, `.avro` or `.seq` (the worker then knows its format by its
/// first bytes).
pub fn reads_rows(format: InputFormat, name: &str) -> bool {
    match format {
        InputFormat::Parquet | InputFormat::Avro | InputFormat::SequenceFile => true,
        InputFormat::Auto => {
            matches!(Codec::of_name(name), Codec::Parquet | Codec::Avro) || name.ends_with(".seq")
        }
        _ => false,
    }
}

/// The file of the data sets named in `inputs` (comma-separated) that
/// holds `block`, when a job of `format` reads it as rows.
pub fn file_of<'c>(
    catalog: &'c Catalog,
    inputs: &str,
    format: InputFormat,
    block: &BlockMeta,
) -> Option<&'c FileMeta> {
    let files = inputs
        .split(',')
        .filter_map(|name| catalog.datasets.get(name))
        .flat_map(|d| d.files.iter());
    files
        .filter(|f| reads_rows(format, &f.name))
        .find(|f| f.blocks.iter().any(|b| b.id == block.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_read_by_format_or_by_name() {
        assert!(reads_rows(InputFormat::Parquet, "part-0"));
        assert!(reads_rows(InputFormat::Auto, "a/b.parquet"));
        assert!(reads_rows(InputFormat::Auto, "x.avro"));
        assert!(reads_rows(InputFormat::Auto, "x.seq"));
        assert!(!reads_rows(InputFormat::Auto, "words.txt"));
        assert!(!reads_rows(InputFormat::Text, "x.parquet"));
        assert!(!reads_rows(InputFormat::Csv, "x.csv"));
    }
}

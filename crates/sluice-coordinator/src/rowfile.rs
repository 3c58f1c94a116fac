//! The files of rows a map must read past its own block for: a map over a
//! block of a Parquet, Avro or SequenceFile file stored by `sluice put`
//! is sent the whole file's blocks (`BlockSource.file`), since its header
//! or footer and the rest of a row group or sync block that crosses the
//! block's end are in other blocks. The map still runs where its own
//! block is.

use std::collections::HashMap;

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

/// The files of rows of a job's input data sets, by the ids of their
/// blocks: made once per assignment, so that a map of thousands of small
/// blocks of text (none of them rows) costs one pass over the files.
pub struct RowFiles<'c> {
    by_block: HashMap<&'c str, &'c FileMeta>,
}

impl<'c> RowFiles<'c> {
    /// The files of the data sets named in `inputs` (comma-separated)
    /// that a job of `format` reads as rows.
    pub fn of(catalog: &'c Catalog, inputs: &str, format: InputFormat) -> RowFiles<'c> {
        let mut by_block = HashMap::new();
        let files = inputs
            .split(',')
            .filter_map(|name| catalog.datasets.get(name))
            .flat_map(|d| d.files.iter())
            .filter(|f| reads_rows(format, &f.name));
        for f in files {
            for b in &f.blocks {
                by_block.insert(b.id.as_str(), f);
            }
        }
        RowFiles { by_block }
    }

    /// The file of rows holding `block`, if it is one's.
    pub fn file_of(&self, block: &BlockMeta) -> Option<&'c FileMeta> {
        if self.by_block.is_empty() {
            return None;
        }
        self.by_block.get(block.id.as_str()).copied()
    }
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

    fn block(id: &str) -> BlockMeta {
        BlockMeta {
            id: sluice_proto::ids::BlockId::new(id).unwrap(),
            ..BlockMeta::default()
        }
    }

    #[test]
    fn a_block_is_found_in_its_file_of_rows_only() {
        let file = |name: &str, ids: &[&str]| FileMeta {
            name: name.into(),
            blocks: ids.iter().map(|i| block(i)).collect(),
        };
        let mut catalog = Catalog::default();
        let name = sluice_proto::ids::DatasetName::new("in").unwrap();
        catalog.datasets.insert(
            name.clone(),
            sluice_proto::catalog::DatasetMeta {
                name,
                files: vec![
                    file("words.txt", &["b1", "b2"]),
                    file("rows.parquet", &["b3", "b4"]),
                ],
                created_ms: 0,
                origin: String::new(),
                replication: 1,
                block_size: 0,
                access: Default::default(),
            },
        );
        let rows = RowFiles::of(&catalog, "in,missing", InputFormat::Auto);
        assert_eq!(
            rows.file_of(&block("b4")).map(|f| f.name.as_str()),
            Some("rows.parquet")
        );
        assert!(rows.file_of(&block("b1")).is_none(), "text is not rows");
        assert!(rows.file_of(&block("b9")).is_none());
        // Read as text, nothing is rows.
        let text = RowFiles::of(&catalog, "in", InputFormat::Text);
        assert!(text.file_of(&block("b3")).is_none());
        // Read as Parquet, every file is.
        let all = RowFiles::of(&catalog, "in", InputFormat::Parquet);
        assert_eq!(
            all.file_of(&block("b1")).map(|f| f.name.as_str()),
            Some("words.txt")
        );
    }
}

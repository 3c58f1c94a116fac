//! The named choices of job parameters: enums that a request's parameters
//! hold and the command line's job flags ([`crate::JobFlags`]) take by the
//! same names (`clap::ValueEnum` with the `clap` feature).

use serde::{Deserialize, Serialize};
use sluice_api::KeyOrder;
use sluice_jobs::pavlo;

/// Order of intermediate keys within a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum KeyOrderName {
    /// Bytewise: part files come out sorted by key.
    Bytewise,
    /// By a 32-bit key fingerprint: groups without ordering (faster sort path).
    Fingerprint,
}

impl From<KeyOrderName> for KeyOrder {
    fn from(k: KeyOrderName) -> Self {
        match k {
            KeyOrderName::Bytewise => KeyOrder::Bytewise,
            KeyOrderName::Fingerprint => KeyOrder::Fingerprint,
        }
    }
}

/// How an aggregation groups its map output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum GroupingName {
    /// Combine at emit time in a hash table.
    #[default]
    Hash,
    /// Sort map output, combine on spill and merge.
    Sort,
}

/// The UserVisits column a Pavlo aggregation groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum GroupByName {
    /// sourceIP, as the benchmark does.
    #[default]
    SourceIp,
    /// destURL: as many groups as visited pages.
    DestUrl,
}

impl From<GroupByName> for pavlo::GroupColumn {
    fn from(g: GroupByName) -> Self {
        match g {
            GroupByName::SourceIp => pavlo::GroupColumn::SourceIp,
            GroupByName::DestUrl => pavlo::GroupColumn::DestUrl,
        }
    }
}

/// The two forms of the Pavlo join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum JoinForm {
    /// One job: range-index pruning when the input has one, an in-memory rank table.
    #[default]
    Fast,
    /// Three jobs as Hadoop runs it: reduce-side join, aggregation, top row.
    Baseline,
}

/// How k-means chooses its initial centres.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum KmeansInit {
    /// k points of the input chosen by a seeded hash.
    #[default]
    #[serde(rename = "random")]
    Random,
    /// k-means|| (Spark MLlib's default): rounds sampling points by squared
    /// distance, then k-means++ on the weighted candidates.
    #[serde(rename = "k-means||")]
    #[cfg_attr(feature = "clap", value(name = "k-means||"))]
    Parallel,
}

/// Key/value type of the OHB job's pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum PairType {
    /// Binary keys, random value bytes.
    #[default]
    Bytes,
    /// Hex keys, letter values.
    Text,
}

/// How a job's input is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    /// Each file by its first bytes and its name: Parquet (`PAR1`), a
    /// SequenceFile (`SEQ`), Avro (`Obj` 1), else text, compressed by its extension
    /// (`.gz`, `.bz2`, `.zst`, `.lz4`, `.snappy`) or not.
    #[default]
    Auto,
    /// Text lines (pipe-separated for the Pavlo tasks), compressed by the
    /// file's extension or not.
    Text,
    /// Parquet files: a row a record, its columns as text.
    Parquet,
    /// Hadoop SequenceFiles: a record's value (or its `key` and `value`
    /// columns) as text.
    #[serde(rename = "sequencefile")]
    #[cfg_attr(feature = "clap", value(name = "sequencefile"))]
    SequenceFile,
    /// Avro object container files: a row a record, its fields as text.
    Avro,
    /// CSV files with a header row naming the columns (RFC 4180 quoting).
    Csv,
    /// JSON lines: one JSON object a line, its keys the columns.
    Jsonl,
    /// Binary records in a paged file (`sluice convert`).
    Paged,
}

impl InputFormat {
    /// How the engine reads the input's files.
    pub fn file_format(self) -> sluice_formats::input::FileFormat {
        use sluice_formats::input::FileFormat;
        match self {
            InputFormat::Auto | InputFormat::Paged => FileFormat::Auto,
            InputFormat::Text => FileFormat::Text,
            InputFormat::Parquet => FileFormat::Parquet,
            InputFormat::SequenceFile => FileFormat::SequenceFile,
            InputFormat::Avro => FileFormat::Avro,
            InputFormat::Csv => FileFormat::Csv,
            InputFormat::Jsonl => FileFormat::Jsonl,
        }
    }
}

/// How a job's output files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    /// Text lines, `key TAB value`.
    #[default]
    Text,
    /// Hadoop SequenceFiles: `Text` keys, `LongWritable` counts for word
    /// count, `Text` values for the other jobs.
    #[serde(rename = "sequencefile")]
    #[cfg_attr(feature = "clap", value(name = "sequencefile"))]
    SequenceFile,
    /// Avro object container files of (`key` string, `value`) records:
    /// `value` a long for word count, a string for the other jobs.
    Avro,
    /// Parquet files (Snappy, statistics on) of typed columns: word
    /// count's (`word` string, `count` int64), the Pavlo tasks' own
    /// columns, else (`key` string, `value` string).
    Parquet,
}

/// Binary records in pages (`sluice convert`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagedInput {
    /// Page size in bytes.
    pub page_size: u64,
}

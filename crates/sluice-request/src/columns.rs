//! The typed columns of the built-in jobs' output in a file of columns
//! (`--output-format parquet`), as [`crate::registry::JobKind::output_columns`]
//! gives them: the key the first column, the value's `|`-separated
//! fields the rest, named and typed as the Pavlo benchmark's SQL names
//! and types them.

use sluice_formats::parquet_out::{ColumnType, OutputColumn};

use crate::choices::GroupByName;

const fn float(name: &'static str) -> OutputColumn {
    OutputColumn::new(name, ColumnType::Float64)
}

/// Selection: `pageURL`, `pageRank` (an `INT` in Rankings).
pub const SELECTION: &[OutputColumn] = &[
    OutputColumn::utf8("pageURL"),
    OutputColumn::new("pageRank", ColumnType::Int32),
];

/// The aggregations by source IP (or its first 7 bytes):
/// `SUM(adRevenue)`.
pub const AGG_BY_SOURCE: &[OutputColumn] = &[OutputColumn::utf8("sourceIP"), float("adRevenue")];

/// The aggregations by destination URL.
pub const AGG_BY_DEST: &[OutputColumn] = &[OutputColumn::utf8("destURL"), float("adRevenue")];

/// The aggregation's columns when grouped by `g`.
pub fn aggregation(g: GroupByName) -> &'static [OutputColumn] {
    match g {
        GroupByName::SourceIp => AGG_BY_SOURCE,
        GroupByName::DestUrl => AGG_BY_DEST,
    }
}

/// The UDF aggregation: a URL and its inbound links.
pub const UDF: &[OutputColumn] = &[
    OutputColumn::utf8("url"),
    OutputColumn::new("inlinks", ColumnType::Int64),
];

/// The join's answer (and its baseline's aggregate stage): `sourceIP`,
/// `totalRevenue`, `avgPageRank`, in the order of its text
/// (`sourceIP TAB totalRevenue|avgPageRank`).
pub const JOIN: &[OutputColumn] = &[
    OutputColumn::utf8("sourceIP"),
    float("totalRevenue"),
    float("avgPageRank"),
];

/// The baseline join's first stage alone: each visit of the week with
/// its page's rank.
pub const JOIN_FILTER: &[OutputColumn] = &[
    OutputColumn::utf8("sourceIP"),
    float("adRevenue"),
    OutputColumn::new("pageRank", ColumnType::Int32),
];

//! The command line's job flags (`sluice run --pattern … --clusters …`):
//! one bag of typed values that each [`crate::JobKind`] maps to its own
//! parameters ([`crate::JobKind::params_from_flags`]), so a new job and its
//! flags live in this crate alone. With the `clap` feature the bag is a
//! `clap::Args` a command line flattens in.

use crate::choices::{
    GroupByName, GroupingName, InputFormat, JoinForm, KeyOrderName, KmeansInit, OutputFormat,
    PagedInput, PairType,
};
use crate::request::Key;
use crate::RequestError;

/// The flags of `sluice run` that give a job its parameters, each at its
/// command-line default when not given.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct JobFlags {
    /// Regular expression for grep; distribution pattern for ohb (avg, rand, skew).
    #[cfg_attr(feature = "clap", arg(long))]
    pub pattern: Option<String>,
    /// Pairs each ohb map emits.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 100_000))]
    pub pairs_per_map: u64,
    /// Bytes of one ohb pair, key plus value.
    #[cfg_attr(feature = "clap", arg(long, default_value = "1KiB", value_parser = parse_size))]
    pub pair_size: u64,
    /// Key/value type of ohb pairs.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "bytes"))]
    pub pair_type: PairType,
    /// Seed of ohb's values and random choices, and of kmeans' initial
    /// centres.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 7))]
    pub seed: u64,
    /// Split points of sort and terasort, hex-encoded and comma-separated,
    /// instead of sampling the input (what `sluice submit` passes after
    /// sampling a cluster data set).
    #[cfg_attr(feature = "clap", arg(long))]
    pub split_points: Option<String>,
    /// The data set the gen job makes, as JSON (`sluice_gen::GenSpec`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gen_spec: Option<String>,
    /// Selection threshold for pavlo-selection (pageRank > N).
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = 10, allow_negative_numbers = true)
    )]
    pub threshold: i64,
    /// Rankings input for pavlo-join.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rankings: Option<String>,
    /// The UserVisits column pavlo-agg-large and pavlo-agg-small group by.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "source-ip"))]
    pub group_by: GroupByName,
    /// Clusters (k) of kmeans.
    #[cfg_attr(feature = "clap", arg(long))]
    pub clusters: Option<usize>,
    /// Iterations of kmeans (after its initial centres) and pagerank.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 5))]
    pub iterations: u32,
    /// How kmeans chooses its initial centres.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "random"))]
    pub init: KmeansInit,
    /// Rounds of kmeans' k-means|| initialization (passes over the input).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2))]
    pub init_rounds: u32,
    /// kmeans stops once an iteration moved no centre by this distance or
    /// more (0: runs every iteration).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0))]
    pub tolerance: f64,
    /// Damping factor of pagerank.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.85))]
    pub damping: f64,
    /// Where kmeans also writes each point with its nearest final centre.
    #[cfg_attr(feature = "clap", arg(long))]
    pub assignments: Option<String>,
    /// How the input is stored (`paged`: pavlo-selection and the
    /// aggregations only).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "auto"))]
    pub input_format: InputFormat,
    /// How the output files are written.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "text"))]
    pub output_format: OutputFormat,
    /// The column of a file of rows a text job (wordcount, grep, ...)
    /// reads as its line: a Parquet column, or a SequenceFile's `key` or
    /// `value` [default: the file's only column; a SequenceFile's value].
    #[cfg_attr(feature = "clap", arg(long))]
    pub column: Option<String>,
    /// Page size of paged input.
    #[cfg_attr(feature = "clap", arg(long, default_value = "128KiB", value_parser = parse_size))]
    pub page_size: u64,
    /// Form of pavlo-join.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "fast"))]
    pub join: JoinForm,
    /// Grouping for word count and the Pavlo aggregations.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "hash"))]
    pub grouping: GroupingName,
    /// Key order within partitions [default: bytewise (sorted part files);
    /// fingerprint for the hash-grouped Pavlo aggregations and UDF, whose SQL
    /// has no order]. Sort accepts only bytewise.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub key_order: Option<KeyOrderName>,
}

impl JobFlags {
    /// Paged input of `--page-size` when `--input-format paged`, else
    /// `None` (text).
    pub fn paged(&self) -> Option<PagedInput> {
        (self.input_format == InputFormat::Paged).then_some(PagedInput {
            page_size: self.page_size,
        })
    }

    /// The split points of `--split-points`, if given.
    pub fn split_points(&self) -> Result<Option<Vec<Key>>, RequestError> {
        let Some(hex) = &self.split_points else {
            return Ok(None);
        };
        hex.split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                Key::from_hex(p).map_err(|e| RequestError::Flag(format!("--split-points: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// A kind's typed parameters as the request holds them.
pub(crate) fn params(p: impl serde::Serialize) -> Result<serde_json::Value, RequestError> {
    serde_json::to_value(p).map_err(|e| RequestError::Flag(e.to_string()))
}

/// Parses a byte size such as `256MB` (decimal, 10^6), `1.5GiB` (binary,
/// 2^30) or `4096` (bytes), as the command line writes sizes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = unit_size(unit.trim()).ok_or_else(|| bad_size(s))?;
    let v: f64 = num.parse().map_err(|_| bad_size(s))?;
    if !v.is_finite() || v < 0.0 {
        return Err(bad_size(s));
    }
    Ok((v * mult as f64).round() as u64)
}

/// The bytes of a size unit, any case.
fn unit_size(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "tb" | "t" => 1_000_000_000_000,
        "pb" | "p" => 1_000_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "pib" => 1 << 50,
        _ => return None,
    })
}

fn bad_size(s: &str) -> String {
    format!("invalid size '{s}': expected a number with an optional unit (KB, MB, GB, TB, PB = powers of 1000; KiB, MiB, GiB, TiB, PiB = powers of 1024)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use serde_json::json;

    /// Every flag at its command-line default.
    fn defaults() -> JobFlags {
        JobFlags {
            pattern: None,
            pairs_per_map: 100_000,
            pair_size: 1024,
            pair_type: PairType::Bytes,
            seed: 7,
            split_points: None,
            gen_spec: None,
            threshold: 10,
            rankings: None,
            group_by: GroupByName::SourceIp,
            clusters: None,
            iterations: 5,
            init: KmeansInit::Random,
            init_rounds: 2,
            tolerance: 0.0,
            damping: 0.85,
            assignments: None,
            input_format: InputFormat::Auto,
            output_format: OutputFormat::Text,
            column: None,
            page_size: 128 << 10,
            join: JoinForm::Fast,
            grouping: GroupingName::Hash,
            key_order: None,
        }
    }

    #[cfg(feature = "clap")]
    #[test]
    fn the_defaults_are_the_command_lines() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            flags: JobFlags,
        }
        assert_eq!(Cli::parse_from(["x"]).flags, defaults());
        let f = Cli::parse_from(["x", "--init", "k-means||", "--threshold", "-3"]).flags;
        assert_eq!((f.init, f.threshold), (KmeansInit::Parallel, -3));
    }

    fn params(job: &str, f: &JobFlags) -> serde_json::Value {
        Registry::builtin().params_from_flags(job, f).unwrap()
    }

    #[test]
    fn each_kind_takes_its_own_flags() {
        let f = JobFlags {
            pattern: Some("x+".into()),
            grouping: GroupingName::Sort,
            key_order: Some(KeyOrderName::Fingerprint),
            input_format: InputFormat::Paged,
            page_size: 4096,
            group_by: GroupByName::DestUrl,
            clusters: Some(3),
            init: KmeansInit::Parallel,
            pair_type: PairType::Text,
            ..defaults()
        };
        assert_eq!(
            params("wordcount", &f),
            json!({"grouping": "sort", "key_order": "fingerprint"})
        );
        assert_eq!(params("grep", &f), json!({"pattern": "x+"}));
        assert_eq!(
            params("pavlo-agg-small", &f),
            json!({"grouping": "sort", "key_order": "fingerprint",
                   "paged": {"page_size": 4096}, "group_by": "dest-url"})
        );
        let k: crate::KmeansParams = serde_json::from_value(params("kmeans", &f)).unwrap();
        assert_eq!(
            (k.clusters, k.init, k.iterations),
            (3, KmeansInit::Parallel, 5)
        );
        let o: crate::OhbParams = serde_json::from_value(params("ohb", &f)).unwrap();
        assert_eq!(
            (o.pattern.as_str(), o.text, o.pair_size),
            ("x+", true, 1024)
        );
        assert_eq!(params("ohb", &defaults())["pattern"], "avg");
        assert_eq!(params("my-own-job", &f), serde_json::Value::Null);
        assert_eq!(params("streaming", &f), serde_json::Value::Null);
    }

    #[test]
    fn a_flag_a_kind_cannot_use_is_refused() {
        let r = Registry::builtin();
        let fingerprint = JobFlags {
            key_order: Some(KeyOrderName::Fingerprint),
            ..defaults()
        };
        let e = r.params_from_flags("terasort", &fingerprint).unwrap_err();
        assert_eq!(
            e.to_string(),
            "terasort: needs --key-order bytewise: its output is a total order"
        );
        let e = r.params_from_flags("gen", &defaults()).unwrap_err();
        assert_eq!(e.to_string(), "gen: needs --gen-spec JSON");
        let paged = JobFlags {
            input_format: InputFormat::Paged,
            ..defaults()
        };
        assert!(r.check_flags("pavlo-selection", &paged).is_ok());
        assert!(r.check_flags("wordcount", &defaults()).is_ok());
        let e = r.check_flags("wordcount", &paged).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--input-format paged is for pavlo-agg-large, pavlo-agg-small and pavlo-selection"
        );
    }

    #[test]
    fn split_points_are_hex_and_sizes_have_units() {
        let f = JobFlags {
            split_points: Some("0a,,ff".into()),
            ..defaults()
        };
        let points = f.split_points().unwrap().unwrap();
        assert_eq!(points, [Key(vec![0x0a]), Key(vec![0xff])]);
        let bad = JobFlags {
            split_points: Some("0g".into()),
            ..defaults()
        };
        assert!(bad.split_points().is_err());
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("1.5MB"), Ok(1_500_000));
        assert!(parse_size("12 parsecs").is_err());
    }
}

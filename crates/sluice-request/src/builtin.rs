//! Sluice's built-in job kinds and their typed parameters.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_api::{KeyOrder, RangePartitioner};
use sluice_formats::index::KeyType;
use sluice_formats::input::{self, RecordFormat, Split};
use sluice_formats::parquet_out::OutputColumn;
use sluice_formats::rows::{KeepRange, Projection};
use sluice_jobs::{pavlo, Grouping};

use crate::choices::{GroupByName, GroupingName, JoinForm, KeyOrderName, PagedInput, PairType};
use crate::columns;
use crate::flags::{params, JobFlags};
use crate::registry::{settings, BuildContext, Built, JobKind, KeyRange, Plan, Registry, Sampling};
use crate::{JobRequest, RequestError, StageRef};

/// Registers the built-in kinds.
pub(crate) fn register(r: &mut Registry) {
    r.register("wordcount", Wordcount)
        .register("grep", Grep)
        .register("sort", Sort { tera: false })
        .register("terasort", Sort { tera: true })
        .register("pavlo-grep", PavloGrep)
        .register("pavlo-selection", Selection)
        .register("pavlo-agg-large", Aggregation { prefix: None })
        .register("pavlo-agg-small", Aggregation { prefix: Some(7) })
        .register("pavlo-udf", Udf)
        .register("pavlo-join", Join)
        .register("ohb", Ohb)
        .register("gen", Gen);
}

/// Parameters of `wordcount`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WordcountParams {
    /// Grouping of map output.
    pub grouping: GroupingName,
    /// Key order [default: bytewise].
    pub key_order: Option<KeyOrderName>,
}

struct Wordcount;

impl JobKind for Wordcount {
    fn describe(&self) -> &str {
        "count words (split on space, tab, CR, LF, form feed)"
    }

    fn long_values(&self) -> bool {
        true
    }

    fn output_names(&self) -> (&'static str, &'static str) {
        ("word", "count")
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(WordcountParams {
            grouping: f.grouping,
            key_order: f.key_order,
        })
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: WordcountParams = req.params()?;
        let grouping = match p.grouping {
            GroupingName::Hash => Grouping::Hash,
            GroupingName::Sort => Grouping::Sort,
        };
        let order = p.key_order.map_or(KeyOrder::Bytewise, KeyOrder::from);
        Ok(Built::lines(
            sluice_jobs::wordcount(grouping).key_order(order),
        ))
    }
}

/// Parameters of `grep` and `pavlo-grep`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrepParams {
    /// The regular expression (`grep`) or substring (`pavlo-grep`,
    /// default `XYZ`).
    pub pattern: Option<String>,
}

struct Grep;

impl JobKind for Grep {
    fn describe(&self) -> &str {
        "write every line matching a regular expression (map-only)"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(GrepParams {
            pattern: f.pattern.clone(),
        })
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: GrepParams = req.params()?;
        let pattern = p
            .pattern
            .ok_or_else(|| RequestError::params("grep", "needs a pattern (--pattern REGEX)"))?;
        let spec = sluice_jobs::grep(&pattern).map_err(|e| {
            RequestError::params("grep", format!("invalid pattern '{pattern}': {e}"))
        })?;
        Ok(Built::lines(spec))
    }
}

struct PavloGrep;

impl JobKind for PavloGrep {
    fn describe(&self) -> &str {
        "Pavlo grep: rows whose field contains a pattern (default XYZ)"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(GrepParams {
            pattern: f.pattern.clone(),
        })
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: GrepParams = req.params()?;
        let pattern = p.pattern.as_deref().unwrap_or(sluice_gen::GREP_PATTERN);
        Ok(Built::lines(pavlo::grep(pattern)))
    }
}

/// Parameters of `sort` and `terasort` (none: their split points are
/// the request's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SortParams {}

/// Sort (lines) or TeraSort (100-byte records on 10-byte keys).
struct Sort {
    tera: bool,
}

impl Sort {
    fn name(&self) -> &'static str {
        if self.tera {
            "terasort"
        } else {
            "sort"
        }
    }

    fn format(&self) -> RecordFormat {
        if self.tera {
            RecordFormat::Fixed(sluice_gen::TERA_RECORD)
        } else {
            RecordFormat::Lines
        }
    }

    fn reducers(req: &JobRequest) -> u32 {
        req.reducers.unwrap_or(1).max(1)
    }
}

impl JobKind for Sort {
    fn describe(&self) -> &str {
        if self.tera {
            "TeraSort: 100-byte records by their 10-byte keys, total order across parts"
        } else {
            "sort lines bytewise into a total order across part files"
        }
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        if f.key_order.is_some_and(|k| k != KeyOrderName::Bytewise) {
            return Err(RequestError::params(
                self.name(),
                "needs --key-order bytewise: its output is a total order",
            ));
        }
        Ok(serde_json::Value::Null)
    }

    fn plan(&self, req: &JobRequest) -> Result<Plan, RequestError> {
        if req.split_points.is_some() || req.reducers.is_some_and(|r| r <= 1) {
            return Ok(Plan::Single);
        }
        Ok(Plan::Sample(Sampling {
            format: self.format(),
            key_len: self.tera.then_some(sluice_gen::TERA_KEY),
        }))
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let _: SortParams = req.params()?;
        let points = match (&req.split_points, req.reducers) {
            (Some(p), _) => p.iter().map(|k| k.0.clone()).collect(),
            (None, Some(0 | 1)) => Vec::new(),
            (None, _) => {
                return Err(RequestError::params(
                    self.name(),
                    "needs split points for more than one reducer (the driver samples \
                     the input and adds them)",
                ))
            }
        };
        let reducers = Self::reducers(req) as usize;
        if points.len() >= reducers.max(1) {
            return Err(RequestError::params(
                self.name(),
                format!(
                    "{} split points for {reducers} reducers (at most reducers - 1)",
                    points.len()
                ),
            ));
        }
        let part = RangePartitioner::new(points);
        let spec = if self.tera {
            sluice_jobs::tera::terasort_by(part)
        } else {
            sluice_jobs::sort_by(part)
        };
        Ok(Built {
            format: self.format(),
            reducers: Some(Self::reducers(req)),
            ..Built::lines(spec)
        })
    }
}

/// Parameters of `pavlo-selection`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelectionParams {
    /// Rows with pageRank above this.
    pub threshold: i64,
    /// Paged binary input of this page size (`sluice convert`); text when
    /// absent.
    pub paged: Option<PagedInput>,
}

impl Default for SelectionParams {
    fn default() -> Self {
        SelectionParams {
            threshold: 10,
            paged: None,
        }
    }
}

/// The columns of Rankings, in the order of its text rows.
const RANKINGS_COLUMNS: [&str; 3] = ["pageURL", "pageRank", "avgDuration"];

/// The columns of UserVisits, in the order of its text rows.
const USERVISITS_COLUMNS: [&str; 9] = [
    "sourceIP",
    "destURL",
    "visitDate",
    "adRevenue",
    "userAgent",
    "countryCode",
    "languageCode",
    "searchWord",
    "duration",
];

/// The encoding and record format of an input stored as `paged` says.
fn encoding(
    job: &str,
    paged: Option<PagedInput>,
    ctx: &BuildContext<'_>,
) -> Result<(pavlo::Encoding, RecordFormat), RequestError> {
    let Some(p) = paged else {
        return Ok((pavlo::Encoding::Text, RecordFormat::Lines));
    };
    if ctx.cluster {
        return Err(RequestError::params(
            job,
            "cluster data sets are text; paged input runs locally",
        ));
    }
    let page = usize::try_from(p.page_size)
        .ok()
        .filter(|&s| s >= 64)
        .ok_or_else(|| RequestError::params(job, "the page size must be at least 64 bytes"))?;
    Ok((pavlo::Encoding::Paged, RecordFormat::Paged(page)))
}

struct Selection;

impl JobKind for Selection {
    fn describe(&self) -> &str {
        "Pavlo selection: Rankings rows with pageRank > threshold"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(SelectionParams {
            threshold: f.threshold,
            paged: f.paged(),
        })
    }

    fn reads_paged(&self) -> bool {
        true
    }

    fn output_columns(&self, _req: &JobRequest) -> Option<&'static [OutputColumn]> {
        Some(columns::SELECTION)
    }

    /// pageURL and pageRank, the rows with `pageRank > threshold`.
    fn row_columns(&self, req: &JobRequest) -> Option<Projection> {
        let p: SelectionParams = req.params().ok()?;
        let keep = KeepRange {
            column: "pageRank".into(),
            min: Some(p.threshold.saturating_add(1)),
            max: None,
        };
        let cols = Projection::piped(&RANKINGS_COLUMNS).unread(&["avgDuration"]);
        Some(cols.keeping(keep))
    }

    fn build(&self, req: &JobRequest, ctx: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: SelectionParams = req.params()?;
        let (enc, format) = encoding(&req.job, p.paged, ctx)?;
        Ok(Built {
            format,
            ..Built::lines(pavlo::selection(p.threshold, enc))
        })
    }

    fn key_range(&self, req: &JobRequest, field: u32, key_type: KeyType) -> Option<KeyRange> {
        let p: SelectionParams = req.params().ok()?;
        let from = KeyType::int_key(p.threshold.saturating_add(1));
        (field == 1 && key_type == KeyType::Int).then_some((Some(from.to_vec()), None))
    }
}

/// Parameters of the Pavlo aggregations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AggParams {
    /// Grouping of map output.
    pub grouping: GroupingName,
    /// Key order [default: fingerprint when hash-grouped, else bytewise].
    pub key_order: Option<KeyOrderName>,
    /// Paged binary input; text when absent.
    pub paged: Option<PagedInput>,
    /// The column grouped by [default: source-ip, the benchmark's].
    pub group_by: GroupByName,
}

/// Hash-grouped aggregations whose answer has no order compare 32-bit
/// fingerprints when they sort their distinct keys at a spill and merge,
/// instead of keys with long common prefixes (URLs, IPs); the sort path
/// keeps bytewise order, where hashing every record would cost more.
fn unordered(grouping: GroupingName, asked: Option<KeyOrderName>) -> KeyOrder {
    match (asked, grouping) {
        (Some(k), _) => k.into(),
        (None, GroupingName::Hash) => KeyOrder::Fingerprint,
        (None, GroupingName::Sort) => KeyOrder::Bytewise,
    }
}

/// SUM(adRevenue) per sourceIP, or per its first `prefix` bytes.
struct Aggregation {
    prefix: Option<usize>,
}

impl JobKind for Aggregation {
    fn describe(&self) -> &str {
        match self.prefix {
            None => "Pavlo large aggregation: SUM(adRevenue) per sourceIP",
            Some(_) => "Pavlo small aggregation: SUM(adRevenue) per SUBSTR(sourceIP, 1, 7)",
        }
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(AggParams {
            grouping: f.grouping,
            key_order: f.key_order,
            paged: f.paged(),
            group_by: f.group_by,
        })
    }

    fn reads_paged(&self) -> bool {
        true
    }

    fn output_columns(&self, req: &JobRequest) -> Option<&'static [OutputColumn]> {
        let p: AggParams = req.params().ok()?;
        Some(columns::aggregation(p.group_by))
    }

    /// The grouped column, visitDate (each row's is checked) and adRevenue.
    fn row_columns(&self, req: &JobRequest) -> Option<Projection> {
        let p: AggParams = req.params().ok()?;
        let mut unread = USERVISITS_COLUMNS[4..].to_vec();
        unread.push(match p.group_by {
            GroupByName::SourceIp => "destURL",
            GroupByName::DestUrl => "sourceIP",
        });
        Some(Projection::piped(&USERVISITS_COLUMNS).unread(&unread))
    }

    fn build(&self, req: &JobRequest, ctx: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: AggParams = req.params()?;
        let (enc, format) = encoding(&req.job, p.paged, ctx)?;
        let hash = p.grouping == GroupingName::Hash;
        let spec = pavlo::aggregation_by(p.group_by.into(), self.prefix, hash, enc)
            .key_order(unordered(p.grouping, p.key_order));
        Ok(Built {
            format,
            ..Built::lines(spec)
        })
    }
}

/// Parameters of `pavlo-udf`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UdfParams {
    /// Key order [default: fingerprint].
    pub key_order: Option<KeyOrderName>,
}

struct Udf;

impl JobKind for Udf {
    fn describe(&self) -> &str {
        "Pavlo UDF aggregation: inbound links per URL over Documents"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(UdfParams {
            key_order: f.key_order,
        })
    }

    fn output_columns(&self, _req: &JobRequest) -> Option<&'static [OutputColumn]> {
        Some(columns::UDF)
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: UdfParams = req.params()?;
        let order = p.key_order.map_or(KeyOrder::Fingerprint, KeyOrder::from);
        Ok(Built::lines(pavlo::udf().key_order(order)))
    }
}

/// One job of the baseline join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JoinStage {
    /// Reduce-side join of Rankings and the week's visits (its input is
    /// both).
    Filter,
    /// Sum and average per source IP.
    Aggregate,
    /// The largest total (one reducer).
    Top,
}

/// Parameters of `pavlo-join`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JoinParams {
    /// The Rankings input (files locally, a data set on a cluster).
    pub rankings: Option<String>,
    /// Which form.
    pub form: JoinForm,
    /// One stage of the baseline form alone.
    pub stage: Option<JoinStage>,
}

/// The Pavlo join of Rankings and the visits of 2000-01-15..22: the top
/// source IP.
struct Join;

impl Join {
    fn rankings(p: &JoinParams) -> Result<&str, RequestError> {
        p.rankings
            .as_deref()
            .ok_or_else(|| RequestError::params("pavlo-join", "needs rankings (--rankings PATH)"))
    }

    fn stage(stage: JoinStage) -> Built {
        match stage {
            JoinStage::Filter => Built::lines(pavlo::join_filter()),
            JoinStage::Aggregate => Built::lines(pavlo::join_aggregate()),
            JoinStage::Top => Built {
                reducers: Some(1),
                ..Built::lines(pavlo::join_top())
            },
        }
    }

    /// The baseline's three stages.
    fn chain(req: &JobRequest, rankings: &str) -> Vec<JobRequest> {
        let stage = |s: JoinStage, input: String, output: &str| {
            let params = JoinParams {
                rankings: Some(rankings.to_owned()),
                form: JoinForm::Baseline,
                stage: Some(s),
            };
            JobRequest {
                params: serde_json::to_value(params).unwrap_or_default(),
                input,
                output: output.to_owned(),
                overwrite: output.is_empty() || req.overwrite,
                ..req.clone()
            }
        };
        vec![
            stage(JoinStage::Filter, format!("{rankings},{}", req.input), ""),
            stage(JoinStage::Aggregate, StageRef::output(0).to_string(), ""),
            stage(JoinStage::Top, StageRef::output(1).to_string(), &req.output),
        ]
    }

    /// The fast join: a hash table of the smaller side. Locally that is the
    /// week's visits when a range index pruned UserVisits below the size of
    /// Rankings (then the job scans Rankings); else, and always on a
    /// cluster, Rankings.
    fn fast(req: &JobRequest, ctx: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: JoinParams = req.params()?;
        let rankings = Self::rankings(&p)?.to_owned();
        let cfg = settings(req);
        let table_err = |source| RequestError::Job {
            job: "pavlo-join".into(),
            source,
        };
        let rank_files: &[PathBuf] = match ctx.side {
            None => &[],
            Some([files]) => files,
            Some(_) => {
                return Err(RequestError::params(
                    "pavlo-join",
                    "has one side input, Rankings",
                ))
            }
        };
        let rank_splits = whole_files(rank_files)?;
        let bytes = |s: &[Split]| s.iter().map(Split::len).sum::<u64>();
        if let Some(visits) = ctx.splits.filter(|v| bytes(v) < bytes(&rank_splits)) {
            let table = pavlo::visit_table(visits, cfg.max_record).map_err(table_err)?;
            let files = input::resolve(&rankings).map_err(|e| table_err(e.into()))?;
            let total = input::total_len(&files);
            let splits = input::plan_splits(&files, cfg.split_size_for(total), RecordFormat::Lines);
            return Ok(Built {
                reducers: Some(1),
                input: Some((rankings, splits)),
                ..Built::lines(pavlo::join_fast_by_visits(Arc::new(table)))
            });
        }
        let table = match ctx.side {
            None => pavlo::RankTable::default(),
            Some(_) => {
                pavlo::rank_table(&rank_splits, cfg.max_record, cfg.threads).map_err(table_err)?
            }
        };
        Ok(Built {
            reducers: Some(1),
            ..Built::lines(pavlo::join_fast(Arc::new(table)))
        })
    }
}

/// One split per file, each whole, its codec known (text or a file of
/// rows).
fn whole_files(files: &[PathBuf]) -> Result<Vec<Split>, RequestError> {
    files
        .iter()
        .enumerate()
        .map(|(index, path)| {
            let file = input::local_file(path).map_err(|e| {
                RequestError::params("pavlo-join", format!("reading {}: {e}", path.display()))
            })?;
            Ok(Split {
                index,
                start: 0,
                end: file.len,
                file: Arc::new(file),
            })
        })
        .collect()
}

impl JobKind for Join {
    fn describe(&self) -> &str {
        "Pavlo join of rankings and UserVisits for the week 2000-01-15..22: the top sourceIP"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(JoinParams {
            rankings: f.rankings.clone(),
            form: f.join,
            stage: None,
        })
    }

    /// The fast join's UserVisits: the columns it reads, the week's rows
    /// (a date column's values are its days since 1970-01-01).
    fn row_columns(&self, req: &JobRequest) -> Option<Projection> {
        let p: JoinParams = req.params().ok()?;
        if p.form != JoinForm::Fast || p.stage.is_some() {
            return None;
        }
        let day = |d: &[u8]| {
            let num = |r: std::ops::Range<usize>| std::str::from_utf8(&d[r]).ok()?.parse().ok();
            Some(sluice_formats::dates::days_from_civil(
                num(0..4)?,
                num(5..7)? as u32,
                num(8..10)? as u32,
            ))
        };
        let keep = KeepRange {
            column: "visitDate".into(),
            min: day(pavlo::JOIN_FROM),
            max: day(pavlo::JOIN_TO),
        };
        let unread = &USERVISITS_COLUMNS[4..];
        Some(
            Projection::piped(&USERVISITS_COLUMNS)
                .unread(unread)
                .keeping(keep),
        )
    }

    fn output_columns(&self, req: &JobRequest) -> Option<&'static [OutputColumn]> {
        let p: JoinParams = req.params().ok()?;
        Some(match p.stage {
            Some(JoinStage::Filter) => columns::JOIN_FILTER,
            _ => columns::JOIN,
        })
    }

    fn side_inputs(&self, req: &JobRequest) -> Result<Vec<String>, RequestError> {
        let p: JoinParams = req.params()?;
        match (p.form, p.stage) {
            (JoinForm::Fast, None) => Ok(vec![Self::rankings(&p)?.to_owned()]),
            _ => Ok(Vec::new()),
        }
    }

    fn plan(&self, req: &JobRequest) -> Result<Plan, RequestError> {
        let p: JoinParams = req.params()?;
        match (p.form, p.stage) {
            (JoinForm::Baseline, None) => Ok(Plan::Chain(Self::chain(req, Self::rankings(&p)?))),
            _ => Ok(Plan::Single),
        }
    }

    fn build(&self, req: &JobRequest, ctx: &BuildContext<'_>) -> Result<Built, RequestError> {
        let p: JoinParams = req.params()?;
        match (p.form, p.stage) {
            (_, Some(stage)) => Ok(Self::stage(stage)),
            (JoinForm::Fast, None) => Self::fast(req, ctx),
            (JoinForm::Baseline, None) => Err(RequestError::params(
                "pavlo-join",
                "the baseline form is three jobs: run it through a driver, which chains them",
            )),
        }
    }

    fn key_range(&self, req: &JobRequest, field: u32, key_type: KeyType) -> Option<KeyRange> {
        let p: JoinParams = req.params().ok()?;
        let scans_visits = p.form == JoinForm::Fast && p.stage.is_none();
        (scans_visits && field == 2 && key_type == KeyType::Text).then(|| {
            (
                Some(pavlo::JOIN_FROM.to_vec()),
                Some(pavlo::JOIN_TO.to_vec()),
            )
        })
    }
}

/// Parameters of `ohb`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OhbParams {
    /// avg, rand or skew.
    pub pattern: String,
    /// Pairs each map emits.
    pub pairs_per_map: u64,
    /// Bytes of one pair, key plus value.
    pub pair_size: u64,
    /// Text pairs (hex keys, letter values) instead of bytes.
    pub text: bool,
    /// Seed of values and random choices.
    pub seed: u64,
}

impl Default for OhbParams {
    fn default() -> Self {
        OhbParams {
            pattern: "avg".into(),
            pairs_per_map: 100_000,
            pair_size: 1024,
            text: false,
            seed: 7,
        }
    }
}

struct Ohb;

impl JobKind for Ohb {
    fn describe(&self) -> &str {
        "OSU HiBD shuffle micro-benchmark on synthetic:MAPS input"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        params(OhbParams {
            pattern: f.pattern.clone().unwrap_or_else(|| "avg".into()),
            pairs_per_map: f.pairs_per_map,
            pair_size: f.pair_size,
            text: f.pair_type == PairType::Text,
            seed: f.seed,
        })
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        use sluice_jobs::ohb::{OhbSpec, PairType, Pattern};
        let p: OhbParams = req.params()?;
        let bad = |d: String| RequestError::params("ohb", d);
        if synthetic(req)?.is_none() {
            return Err(bad("reads no files: give the input synthetic:MAPS".into()));
        }
        let pattern = Pattern::from_name(&p.pattern)
            .ok_or_else(|| bad(format!("pattern is avg, rand or skew, not {:?}", p.pattern)))?;
        let spec = OhbSpec {
            pattern,
            reduces: req.reducers.unwrap_or(1),
            pairs_per_map: p.pairs_per_map,
            pair_size: usize::try_from(p.pair_size).map_err(|e| bad(e.to_string()))?,
            kind: if p.text {
                PairType::Text
            } else {
                PairType::Bytes
            },
            seed: p.seed,
        };
        spec.validate().map_err(|e| bad(e.to_string()))?;
        Ok(Built::lines(sluice_jobs::ohb::ohb(spec)))
    }
}

/// The maps of a `synthetic:N` input; `None` when it names files.
fn synthetic(req: &JobRequest) -> Result<Option<usize>, RequestError> {
    input::synthetic_count(&req.input).map_err(|e| RequestError::Job {
        job: req.job.clone(),
        source: e.into(),
    })
}

/// Parameters of `gen`: the data set to make.
pub type GenParams = sluice_gen::GenSpec;

struct Gen;

impl JobKind for Gen {
    fn describe(&self) -> &str {
        "a data generator as a map-only job on synthetic:PARTS input"
    }

    fn params_from_flags(&self, f: &JobFlags) -> Result<serde_json::Value, RequestError> {
        let json = f
            .gen_spec
            .as_deref()
            .ok_or_else(|| RequestError::params("gen", "needs --gen-spec JSON"))?;
        serde_json::from_str(json).map_err(|e| {
            RequestError::params(
                "gen",
                format!("--gen-spec is not a generator description: {e}"),
            )
        })
    }

    fn build(&self, req: &JobRequest, _: &BuildContext<'_>) -> Result<Built, RequestError> {
        let spec: GenParams = req.params()?;
        let parts = spec.parts();
        if synthetic(req)? != Some(parts as usize) {
            return Err(RequestError::params(
                "gen",
                format!("makes {parts} parts: give the input synthetic:{parts}"),
            ));
        }
        let job = sluice_jobs::generate::generate(&spec).map_err(|source| RequestError::Job {
            job: "gen".into(),
            source,
        })?;
        Ok(Built::lines(job))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(job: &str, params: serde_json::Value) -> JobRequest {
        JobRequest {
            params,
            ..JobRequest::new(job, &(), "in", "out")
        }
    }

    #[test]
    fn every_builtin_builds_from_its_defaults_or_names_what_it_needs() {
        let r = Registry::builtin();
        let ctx = BuildContext::default();
        let ok = [
            "wordcount",
            "pavlo-grep",
            "pavlo-selection",
            "pavlo-agg-large",
            "pavlo-udf",
        ];
        for job in ok {
            assert!(
                r.build(&req(job, serde_json::Value::Null), &ctx).is_ok(),
                "{job}"
            );
        }
        let e = r
            .build(&req("grep", serde_json::Value::Null), &ctx)
            .unwrap_err();
        assert_eq!(e.to_string(), "grep: needs a pattern (--pattern REGEX)");
        let e = r
            .build(&req("pavlo-join", serde_json::Value::Null), &ctx)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "pavlo-join: needs rankings (--rankings PATH)"
        );
    }

    #[test]
    fn an_unknown_kind_or_parameter_is_named() {
        let r = Registry::builtin();
        let ctx = BuildContext::default();
        let e = r
            .build(&req("wordcont", serde_json::Value::Null), &ctx)
            .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "no job named \"wordcont\" in this binary; its jobs are: dfsio, gen, grep,"
            ),
            "{e}"
        );
        let e = r
            .build(
                &req("wordcount", serde_json::json!({"grouping": "tree"})),
                &ctx,
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("wordcount: parameters: unknown variant `tree`"),
            "{e}"
        );
    }

    #[test]
    fn sort_samples_unless_given_points_or_one_reducer() {
        let r = Registry::builtin();
        let mut q = req("terasort", serde_json::Value::Null);
        q.reducers = Some(4);
        let plan = r.get("terasort").unwrap().plan(&q).unwrap();
        assert_eq!(
            plan,
            Plan::Sample(Sampling {
                format: RecordFormat::Fixed(100),
                key_len: Some(10)
            })
        );
        assert!(r.build(&q, &BuildContext::default()).is_err());
        q.split_points = Some(vec![crate::Key(vec![1]), crate::Key(vec![2])]);
        let (built, cfg) = r.build(&q, &BuildContext::default()).unwrap();
        assert_eq!((built.format, cfg.reducers), (RecordFormat::Fixed(100), 4));
    }

    #[test]
    fn the_baseline_join_is_a_chain_of_three() {
        let r = Registry::builtin();
        let mut q = req(
            "pavlo-join",
            serde_json::json!({"rankings": "rk", "form": "baseline"}),
        );
        q.input = "uv".into();
        let Plan::Chain(stages) = r.get("pavlo-join").unwrap().plan(&q).unwrap() else {
            panic!("not a chain")
        };
        let io: Vec<_> = stages
            .iter()
            .map(|s| (s.input.as_str(), s.output.as_str()))
            .collect();
        assert_eq!(io, [("rk,uv", ""), ("@0", ""), ("@1", "out")]);
        let (_, cfg) = r.build(&stages[2], &BuildContext::default()).unwrap();
        assert_eq!(cfg.reducers, 1);
    }

    #[test]
    fn paged_input_is_refused_on_a_cluster() {
        let r = Registry::builtin();
        let q = req(
            "pavlo-selection",
            serde_json::json!({"paged": {"page_size": 4096}}),
        );
        let ctx = BuildContext {
            cluster: true,
            ..BuildContext::default()
        };
        assert!(r.build(&q, &BuildContext::default()).is_ok());
        assert!(r
            .build(&q, &ctx)
            .unwrap_err()
            .to_string()
            .contains("paged input runs locally"));
    }
}

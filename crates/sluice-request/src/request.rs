//! The job request and its encoding.
//!
//! # Encoding
//!
//! | bytes | content |
//! |-------|---------|
//! | 0..4  | magic `SLJR` |
//! | 4..8  | request version, u32 little-endian ([`REQUEST_VERSION`]) |
//! | 8..   | the request as UTF-8 JSON, one object |
//!
//! JSON keeps requests readable in job records and reports, and serde
//! names the field at fault when one is malformed. Unknown fields are
//! refused rather than ignored, so a request from a newer Sluice fails
//! with its field named instead of running as a different job; a change
//! of meaning bumps the version. Keys (split points) are lowercase hex
//! strings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::RequestError;

/// The version of the request encoding this build writes and reads.
pub const REQUEST_VERSION: u32 = 1;

const MAGIC: &[u8; 4] = b"SLJR";

/// The job property that keeps its maps from admitting the blocks they
/// read to the workers' block caches (`-D sluice.cache.admit=false`):
/// for input read once, such as a scan, or a chain's temporary read by
/// one later stage alone, whose blocks would fill the cache with memory
/// never read again (and on a virtual machine whose fresh pages are
/// dear, cost each map that admits them). Blocks already cached are
/// still read from the cache.
pub const CACHE_ADMIT_PROPERTY: &str = "sluice.cache.admit";

/// The job property that leaves its output files unsynced
/// (`-D sluice.output.sync=false`): the driver sets it on a chain's
/// stages that write temporaries, which are read by the stages after and
/// removed whatever happens, so their durability buys nothing (a crash
/// ends the chain anyway), as Hadoop's and Spark's intermediate data are
/// never synced; and on the staging of output bound for an external
/// store. A job's own output is synced before it is committed. On a
/// cluster it covers the task's own output file: copies sent to further
/// replicas are synced by the workers that take them.
pub const OUTPUT_SYNC_PROPERTY: &str = "sluice.output.sync";

/// One job as a user asked for it: what to run, on what, with which
/// settings. Built once from the user's flags; both the local engine and
/// the cluster receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// The job kind, a name in the [`crate::Registry`] (`wordcount`).
    pub job: String,
    /// The kind's typed parameters (`null`: its defaults).
    #[serde(default)]
    pub params: serde_json::Value,
    /// Input: files, directories or globs locally; data set names on a
    /// cluster; comma-separated. `synthetic:N` is N maps that read nothing.
    pub input: String,
    /// Output directory locally; data set name on a cluster.
    pub output: String,
    /// Replace an existing output.
    #[serde(default)]
    pub overwrite: bool,
    /// Reduce partitions [default: the local engine's threads].
    #[serde(default)]
    pub reducers: Option<u32>,
    /// Memory budget: the job's locally, each task's most on a cluster.
    #[serde(default)]
    pub memory: Option<u64>,
    /// Split points of a total-order job (sort, TeraSort), found by
    /// sampling when absent.
    #[serde(default)]
    pub split_points: Option<Vec<Key>>,
    /// Engine settings.
    #[serde(default)]
    pub engine: EngineSettings,
    /// User properties (`-D key=value`), for a job's own use.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// Engine settings of a request. On a cluster each worker keeps its own
/// threads, spill directory and split size (its blocks are the splits).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSettings {
    /// Worker threads of the local engine [default: all cores].
    pub threads: Option<usize>,
    /// Longest input record accepted, in bytes.
    pub max_record: u64,
    /// Split size in bytes [default: from the input size and threads].
    pub split_size: Option<u64>,
    /// Pack small splits (locally) or blocks (on a cluster) several to a
    /// map task, up to the split size; `false` gives each its own task.
    pub combine: bool,
    /// Most spill runs merged at once [default: as many as the memory
    /// budget holds a block for, 64 to 256].
    pub merge_factor: Option<usize>,
    /// Bytes a map thread sorts before it spills a run (local runs)
    /// [default: from the machine's caches].
    pub sort_buffer: Option<u64>,
    /// What to do with a malformed record.
    pub bad_records: BadRecords,
    /// Directory for spill files (local runs).
    pub spill_dir: Option<PathBuf>,
    /// How the input files are stored (`auto`: each as its first bytes
    /// and name say).
    pub input_format: crate::InputFormat,
    /// How the output files are written.
    #[serde(default)]
    pub output_format: crate::choices::OutputFormat,
    /// The column of a file of rows a text job reads as its line.
    pub column: Option<String>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            threads: None,
            max_record: 64 << 20,
            split_size: None,
            combine: true,
            merge_factor: None,
            sort_buffer: None,
            bad_records: BadRecords::Fail,
            spill_dir: None,
            input_format: crate::InputFormat::Auto,
            output_format: crate::choices::OutputFormat::Text,
            column: None,
        }
    }
}

/// Malformed-record policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum BadRecords {
    /// Fail the job naming the file and offset.
    #[default]
    Fail,
    /// Skip, count in BAD_RECORDS, and keep the lines in OUTPUT/_bad_records.
    Skip,
}

/// A byte-string key, hex in the encoding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key(pub Vec<u8>);

impl Serialize for Key {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&hex)
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Key::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

impl Key {
    /// A key from lowercase or uppercase hex.
    pub fn from_hex(s: &str) -> Result<Key, String> {
        if !s.len().is_multiple_of(2) {
            return Err(format!("odd-length hex key {s:?}"));
        }
        (0..s.len())
            .step_by(2)
            .map(|i| {
                s.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad hex key {s:?}"))
            })
            .collect::<Result<Vec<u8>, String>>()
            .map(Key)
    }
}

impl JobRequest {
    /// A request for job `job` with typed `params`, everything else at
    /// its default.
    pub fn new(job: &str, params: &impl Serialize, input: &str, output: &str) -> Self {
        JobRequest {
            job: job.to_owned(),
            params: serde_json::to_value(params).unwrap_or(serde_json::Value::Null),
            input: input.to_owned(),
            output: output.to_owned(),
            overwrite: false,
            reducers: None,
            memory: None,
            split_points: None,
            engine: EngineSettings::default(),
            properties: BTreeMap::new(),
        }
    }

    /// The request in its encoding (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&REQUEST_VERSION.to_le_bytes());
        // A request holds only strings, numbers, maps and JSON values,
        // which always serialize.
        serde_json::to_writer(&mut out, self).expect("a request serializes");
        out
    }

    /// Decodes an encoded request, naming what is wrong when it is not one.
    pub fn decode(bytes: &[u8]) -> Result<Self, RequestError> {
        let (magic, rest) = bytes.split_at(bytes.len().min(4));
        if magic != MAGIC {
            return Err(RequestError::NotARequest);
        }
        let version = rest
            .get(..4)
            .and_then(|v| <[u8; 4]>::try_from(v).ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| RequestError::Malformed("no version after the header".into()))?;
        if version != REQUEST_VERSION {
            return Err(RequestError::Version {
                found: version,
                reads: REQUEST_VERSION,
            });
        }
        serde_json::from_slice(&rest[4..]).map_err(|e| RequestError::Malformed(e.to_string()))
    }

    /// The parameters as the kind's type; `null` reads as `{}`, which
    /// gives a kind with defaults for every field its defaults.
    pub fn params<T: serde::de::DeserializeOwned>(&self) -> Result<T, RequestError> {
        let value = match &self.params {
            serde_json::Value::Null => serde_json::json!({}),
            v => v.clone(),
        };
        serde_json::from_value(value)
            .map_err(|e| RequestError::params(&self.job, format!("parameters: {e}")))
    }

    /// A user property.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }

    /// Refuses a value of a boolean property Sluice reads
    /// ([`CACHE_ADMIT_PROPERTY`], [`OUTPUT_SYNC_PROPERTY`]) other than
    /// `true` or `false`, so that a misspelt one is not taken as `true`.
    pub fn check_properties(&self) -> Result<(), crate::RequestError> {
        for key in [CACHE_ADMIT_PROPERTY, OUTPUT_SYNC_PROPERTY] {
            match self.property(key) {
                None | Some("true") | Some("false") => {}
                Some(value) => {
                    return Err(crate::RequestError::Property {
                        key: key.to_owned(),
                        value: value.to_owned(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Whether its maps may admit the blocks they read to the workers'
    /// block caches: yes unless [`CACHE_ADMIT_PROPERTY`] is `false`.
    pub fn admits_to_cache(&self) -> bool {
        self.property(CACHE_ADMIT_PROPERTY) != Some("false")
    }

    /// Whether its output files are synced before they are committed: yes
    /// unless [`OUTPUT_SYNC_PROPERTY`] is `false`.
    pub fn syncs_output(&self) -> bool {
        self.property(OUTPUT_SYNC_PROPERTY) != Some("false")
    }

    /// One line for listings: the job, its input and its output.
    pub fn describe(&self) -> String {
        format!("{} {} -> {}", self.job, self.input, self.output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "[a-z0-9_,:./ -]{0,12}"
    }

    fn request() -> impl Strategy<Value = JobRequest> {
        (
            (text(), text(), text(), any::<bool>()),
            (
                proptest::option::of(1u32..64),
                proptest::option::of(any::<u64>()),
            ),
            proptest::option::of(proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..12),
                0..4,
            )),
            (
                proptest::option::of(1usize..9),
                1u64..1 << 40,
                proptest::option::of(2usize..200),
                any::<bool>(),
            ),
            proptest::collection::btree_map(text(), text(), 0..4),
            proptest::option::of((text(), any::<i64>())),
        )
            .prop_map(|(names, sizes, points, eng, properties, param)| {
                let (job, input, output, overwrite) = names;
                let params = param.map_or(
                    serde_json::Value::Null,
                    |(k, v)| serde_json::json!({ k: v, "nested": { "list": [1, 2] } }),
                );
                JobRequest {
                    job,
                    params,
                    input,
                    output,
                    overwrite,
                    reducers: sizes.0,
                    memory: sizes.1,
                    split_points: points.map(|p| p.into_iter().map(Key).collect()),
                    engine: EngineSettings {
                        threads: eng.0,
                        max_record: eng.1,
                        merge_factor: eng.2,
                        bad_records: if eng.3 {
                            BadRecords::Skip
                        } else {
                            BadRecords::Fail
                        },
                        ..EngineSettings::default()
                    },
                    properties,
                }
            })
    }

    proptest! {
        #[test]
        fn a_request_round_trips_through_its_encoding(r in request()) {
            prop_assert_eq!(JobRequest::decode(&r.encode()).unwrap(), r);
        }

        #[test]
        fn a_cut_request_is_refused_not_misread(r in request(), cut in 0usize..200) {
            let bytes = r.encode();
            let cut = cut.min(bytes.len() - 1);
            prop_assert!(JobRequest::decode(&bytes[..cut]).is_err());
        }
    }

    fn sample() -> JobRequest {
        JobRequest::new("wordcount", &serde_json::Value::Null, "in", "out")
    }

    #[test]
    fn another_version_is_named() {
        let mut bytes = sample().encode();
        bytes[4..8].copy_from_slice(&7u32.to_le_bytes());
        let e = JobRequest::decode(&bytes).unwrap_err().to_string();
        assert_eq!(e, "job request version 7; this Sluice reads version 1");
    }

    #[test]
    fn argv_is_not_a_request() {
        let e = JobRequest::decode(b"wordcount --input x").unwrap_err();
        assert!(matches!(e, RequestError::NotARequest), "{e}");
    }

    #[test]
    fn an_unknown_or_mistyped_field_is_named() {
        let mut bytes = sample().encode();
        bytes.truncate(8);
        bytes.extend_from_slice(br#"{"job":"wordcount","input":"a","output":"b","reducer":3}"#);
        let e = JobRequest::decode(&bytes).unwrap_err().to_string();
        assert!(e.contains("unknown field `reducer`"), "{e}");
        bytes.truncate(8);
        bytes.extend_from_slice(br#"{"job":"wordcount","input":"a","output":"b","reducers":"x"}"#);
        let e = JobRequest::decode(&bytes).unwrap_err().to_string();
        assert!(e.contains("invalid type: string \"x\""), "{e}");
    }

    #[test]
    fn split_points_are_hex() {
        let mut r = sample();
        r.split_points = Some(vec![Key(vec![0x0a, 0xff])]);
        let json = String::from_utf8(r.encode()[8..].to_vec()).unwrap();
        assert!(json.contains(r#""split_points":["0aff"]"#), "{json}");
        assert!(Key::from_hex("0g").is_err());
        assert!(Key::from_hex("abc").is_err());
    }

    #[test]
    fn boolean_properties_take_true_or_false() {
        let mut r = JobRequest::new("wordcount", &serde_json::Value::Null, "in", "out");
        assert!(r.check_properties().is_ok());
        for v in ["true", "false"] {
            r.properties.insert(CACHE_ADMIT_PROPERTY.into(), v.into());
            assert!(r.check_properties().is_ok());
        }
        r.properties.insert(OUTPUT_SYNC_PROPERTY.into(), "0".into());
        let e = r.check_properties().unwrap_err().to_string();
        assert_eq!(
            e,
            "-D sluice.output.sync=0: sluice.output.sync is `true` or `false`"
        );
    }
}

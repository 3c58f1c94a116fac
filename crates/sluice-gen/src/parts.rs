//! One description for every generator, part by part, so the parts of a
//! data set can be made anywhere: on local threads, or as the map tasks of
//! a cluster job (one part a task), with the same bytes either way.

use serde::{Deserialize, Serialize};

use crate::{pavlo_part, tera_part, text_part, PavloSet, PavloSpec, Vocabulary};

/// A data set to generate, as it travels in a job's arguments (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum GenSpec {
    /// Zipf text (see [`crate::TextSpec`]).
    Text {
        /// Total bytes, about.
        size: u64,
        /// Seed.
        seed: u64,
        /// Distinct words.
        vocabulary: usize,
        /// Zipf exponent.
        exponent: f64,
        /// Bytes per part.
        part_size: u64,
    },
    /// A Pavlo data set (see [`PavloSpec`]).
    Pavlo {
        /// `grep`, `rankings`, `uservisits` or `documents`.
        set: String,
        /// Rows.
        rows: u64,
        /// Rankings rows that URLs are drawn from.
        rankings_rows: u64,
        /// Seed.
        seed: u64,
        /// Rows per part.
        rows_per_part: u64,
    },
    /// Points of Gaussian clusters (see [`crate::KmeansSpec`]).
    Kmeans {
        points: u64,
        dims: usize,
        clusters: usize,
        seed: u64,
        points_per_part: u64,
    },
    /// A web graph's edges (see [`crate::GraphSpec`]).
    Graph {
        pages: u64,
        seed: u64,
        pages_per_part: u64,
    },
    /// TeraGen records.
    Tera {
        /// Records.
        rows: u64,
        /// Seed.
        seed: u64,
        /// Records per part.
        rows_per_part: u64,
    },
}

impl GenSpec {
    /// Parts (files) of the data set.
    pub fn parts(&self) -> u64 {
        match self {
            GenSpec::Text {
                size, part_size, ..
            } => size.div_ceil((*part_size).max(1)).max(1),
            GenSpec::Pavlo {
                rows,
                rows_per_part,
                ..
            }
            | GenSpec::Tera {
                rows,
                rows_per_part,
                ..
            } => rows.div_ceil((*rows_per_part).max(1)),
            GenSpec::Kmeans {
                points,
                points_per_part,
                ..
            } => points.div_ceil((*points_per_part).max(1)).max(1),
            GenSpec::Graph {
                pages,
                pages_per_part,
                ..
            } => pages.div_ceil((*pages_per_part).max(1)).max(1),
        }
    }

    /// What makes the parts (a text vocabulary is built once here).
    pub fn maker(&self) -> Result<PartMaker, String> {
        let vocab = match self {
            GenSpec::Text {
                seed,
                vocabulary,
                exponent,
                ..
            } => Some(Vocabulary::new((*vocabulary).max(1), *exponent, *seed)),
            GenSpec::Pavlo { set, .. } => {
                PavloSet::from_name(set).ok_or_else(|| format!("no Pavlo data set {set:?}"))?;
                None
            }
            GenSpec::Tera { .. } => None,
            GenSpec::Kmeans { dims, clusters, .. } if *dims == 0 || *clusters == 0 => {
                return Err("k-means points need at least one dimension and one cluster".into())
            }
            GenSpec::Kmeans { .. } | GenSpec::Graph { .. } => None,
        };
        let centres = match self {
            GenSpec::Kmeans {
                dims,
                clusters,
                seed,
                ..
            } => crate::kmeans_centres(*seed, *clusters, *dims),
            _ => Vec::new(),
        };
        Ok(PartMaker {
            spec: self.clone(),
            vocab,
            centres,
        })
    }
}

/// Makes the parts of one [`GenSpec`].
#[derive(Debug, Clone)]
pub struct PartMaker {
    spec: GenSpec,
    vocab: Option<Vocabulary>,
    /// The k-means clusters' centres.
    centres: Vec<Vec<f64>>,
}

impl PartMaker {
    /// The bytes of part `p` and its record count: exactly the file
    /// `part-NNNNN` the local generator writes.
    pub fn part(&self, p: u64) -> (Vec<u8>, u64) {
        match &self.spec {
            GenSpec::Text {
                size,
                seed,
                part_size,
                ..
            } => {
                let len = (*part_size).min(size.saturating_sub(p * part_size));
                let vocab = self.vocab.as_ref().expect("made with the spec");
                text_part(vocab, *seed, p, len)
            }
            GenSpec::Pavlo {
                set,
                rows,
                rankings_rows,
                seed,
                rows_per_part,
            } => {
                let spec = PavloSpec {
                    set: PavloSet::from_name(set).expect("checked by maker"),
                    rows: *rows,
                    rankings_rows: *rankings_rows,
                    seed: *seed,
                    rows_per_part: *rows_per_part,
                    threads: 1,
                };
                let range = range(p, *rows_per_part, *rows);
                let n = range.end - range.start;
                (pavlo_part(&spec, range), n)
            }
            GenSpec::Tera {
                rows,
                seed,
                rows_per_part,
            } => {
                let range = range(p, *rows_per_part, *rows);
                let n = range.end - range.start;
                (tera_part(*seed, range), n)
            }
            GenSpec::Kmeans {
                points,
                dims,
                clusters,
                seed,
                points_per_part,
            } => {
                let spec = crate::KmeansSpec {
                    points: *points,
                    dims: *dims,
                    clusters: *clusters,
                    seed: *seed,
                    points_per_part: *points_per_part,
                };
                let range = range(p, *points_per_part, *points);
                let n = range.end - range.start;
                (crate::kmeans_part(&spec, &self.centres, range), n)
            }
            GenSpec::Graph {
                pages,
                seed,
                pages_per_part,
            } => {
                let spec = crate::GraphSpec {
                    pages: *pages,
                    seed: *seed,
                    pages_per_part: *pages_per_part,
                };
                crate::graph_part(&spec, range(p, *pages_per_part, *pages))
            }
        }
    }
}

fn range(p: u64, per: u64, rows: u64) -> std::ops::Range<u64> {
    let per = per.max(1);
    p * per..((p + 1) * per).min(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generate_pavlo, generate_tera, generate_text, TextSpec};

    fn same_as_files(spec: &GenSpec, dir: &std::path::Path) {
        let m = spec.maker().unwrap();
        let mut n = 0;
        for p in 0..spec.parts() {
            let want = std::fs::read(dir.join(format!("part-{p:05}"))).unwrap();
            assert_eq!(m.part(p).0, want, "part {p}");
            n += 1;
        }
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), n);
    }

    #[test]
    fn parts_equal_the_local_generators_files() {
        let d = tempfile::tempdir().unwrap();
        let text = TextSpec {
            size: 250_000,
            part_size: 100_000,
            vocabulary: 500,
            threads: 2,
            ..TextSpec::default()
        };
        std::fs::create_dir_all(d.path().join("t")).unwrap();
        generate_text(&text, &d.path().join("t"), &|_| {}).unwrap();
        let spec = GenSpec::Text {
            size: 250_000,
            seed: text.seed,
            vocabulary: 500,
            exponent: text.exponent,
            part_size: 100_000,
        };
        same_as_files(&spec, &d.path().join("t"));

        let tera = d.path().join("tera");
        std::fs::create_dir_all(&tera).unwrap();
        generate_tera(1000, 3, 300, 2, &tera, &|_| {}).unwrap();
        same_as_files(
            &GenSpec::Tera {
                rows: 1000,
                seed: 3,
                rows_per_part: 300,
            },
            &tera,
        );

        let uv = d.path().join("uv");
        std::fs::create_dir_all(&uv).unwrap();
        let ps = PavloSpec {
            set: PavloSet::UserVisits,
            rows: 1000,
            rankings_rows: 100,
            seed: 5,
            rows_per_part: 400,
            threads: 2,
        };
        generate_pavlo(&ps, &uv, &|_| {}).unwrap();
        let spec = GenSpec::Pavlo {
            set: "uservisits".into(),
            rows: 1000,
            rankings_rows: 100,
            seed: 5,
            rows_per_part: 400,
        };
        same_as_files(&spec, &uv);
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<GenSpec>(&json).unwrap(), spec);
        assert!(GenSpec::Pavlo {
            set: "x".into(),
            rows: 1,
            rankings_rows: 1,
            seed: 1,
            rows_per_part: 1
        }
        .maker()
        .is_err());
    }
}

//! The data sets of the Pavlo et al. benchmark (as used by Jiang et al.),
//! pipe-separated text, one record per line:
//!
//! ```text
//! Grep        key|field                       key: 10 chars, unique; field: 90 chars
//! Rankings    pageURL|pageRank|avgDuration
//! UserVisits  sourceIP|destURL|visitDate|adRevenue|userAgent|countryCode|languageCode|searchWord|duration
//! Documents   url|<html>...<a href="URL">...</a>...</html>
//! ```
//!
//! Every field of row `i` is a function of the seed and `i` alone (each row
//! has its own random stream), so any part can be generated on any thread,
//! or on any worker, with the same bytes.
//!
//! Choices where the seeds leave details open:
//! - Grep: the field draws from lower-case letters and digits; the pattern
//!   `XYZ` is placed at a random position in the rows whose hash is 0 mod
//!   10,000, so it appears once per 10,000 records and nowhere else.
//! - Rankings: `pageURL` is unique (it contains the row number); `pageRank`
//!   is `floor(E)` for an exponential `E` of mean 1.77, so `pageRank > 10`
//!   selects 0.2% of the rows (the seed's selectivity for X = 10), `> 6`
//!   about 2%, `> 2` about 18%, `> -1` all of them; `avgDuration` is 1-100.
//! - UserVisits: `sourceIP` comes from a pool of `rows * 2.5 / 155`
//!   addresses (2.5 M distinct at the seed's 155 M rows, at least 1), each
//!   `A.B.C.D` with `A` in 100-255 and `B` one of 13 three-digit values, so
//!   `SUBSTR(sourceIP, 1, 7)` has about 2,000 distinct values as in the
//!   small aggregation; `destURL` is a uniformly chosen Rankings `pageURL`
//!   (so the join has matches); `visitDate` is uniform over 1990-2009;
//!   `adRevenue` uniform in [0, 1000) with 2 decimals.
//! - Documents: each page links to 5-20 Rankings URLs, chosen with a skew
//!   (the square of a uniform variable) so inbound counts vary.

use std::io::Write;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use sluice_formats::dates::{civil_from_days, days_from_civil};

use crate::{part_seed, GenError, GenSummary};

/// Which data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PavloSet {
    /// `key|field`.
    Grep,
    /// `pageURL|pageRank|avgDuration`.
    Rankings,
    /// The nine UserVisits columns.
    UserVisits,
    /// `url|html` pages with links.
    Documents,
}

impl PavloSet {
    /// Average bytes per row, for turning a size into a row count.
    pub fn row_bytes(self) -> u64 {
        match self {
            PavloSet::Grep => 102,
            PavloSet::Rankings => 58,
            PavloSet::UserVisits => 147,
            PavloSet::Documents => 700,
        }
    }

    /// The set with this [`name`](PavloSet::name).
    pub fn from_name(name: &str) -> Option<PavloSet> {
        [
            PavloSet::Grep,
            PavloSet::Rankings,
            PavloSet::UserVisits,
            PavloSet::Documents,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    fn tag(self) -> u64 {
        match self {
            PavloSet::Grep => 0x6772,
            PavloSet::Rankings => 0x726b,
            PavloSet::UserVisits => 0x7576,
            PavloSet::Documents => 0x646f,
        }
    }

    /// The data set's name in file and directory names.
    pub fn name(self) -> &'static str {
        match self {
            PavloSet::Grep => "grep",
            PavloSet::Rankings => "rankings",
            PavloSet::UserVisits => "uservisits",
            PavloSet::Documents => "documents",
        }
    }
}

/// Parameters of one data set.
#[derive(Debug, Clone)]
pub struct PavloSpec {
    /// Which data set.
    pub set: PavloSet,
    /// Rows to generate.
    pub rows: u64,
    /// Rows of the Rankings data set that URLs are drawn from (UserVisits
    /// and Documents).
    pub rankings_rows: u64,
    /// The seed, shared by all four sets so URLs agree.
    pub seed: u64,
    /// Rows per part file.
    pub rows_per_part: u64,
    /// Threads.
    pub threads: usize,
}

/// The pattern the grep task looks for.
pub const GREP_PATTERN: &str = "XYZ";

/// Rankings URL of row `i`: unique, at most 100 bytes.
pub fn page_url(seed: u64, i: u64) -> String {
    let h = part_seed(seed ^ 0x75726c, i);
    let site = syllables(h, 2 + (h % 3) as usize);
    let dir = syllables(h >> 20, 1 + ((h >> 8) % 3) as usize);
    format!("http://www.{site}.com/{dir}/page{i}.html")
}

fn syllables(mut h: u64, n: usize) -> String {
    const S: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ba", "de", "fu", "go", "hi", "ja", "po",
        "we",
    ];
    let mut s = String::with_capacity(n * 2);
    for _ in 0..n {
        s.push_str(S[(h & 15) as usize]);
        h >>= 4;
    }
    s
}

/// Writes the data set into `dir` as `part-NNNNN` files; calls `progress`
/// with bytes as parts finish.
pub fn generate_pavlo(
    spec: &PavloSpec,
    dir: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GenSummary, GenError> {
    let per = spec.rows_per_part.max(1);
    let parts = spec.rows.div_ceil(per);
    crate::generate_parts(parts, spec.threads, progress, &|p| {
        let rows = p * per..((p + 1) * per).min(spec.rows);
        let n = rows.end - rows.start;
        Ok((
            write_part(spec, rows, &dir.join(format!("part-{p:05}")))?,
            n,
        ))
    })
}

fn write_part(spec: &PavloSpec, rows: std::ops::Range<u64>, path: &Path) -> Result<u64, GenError> {
    let buf = pavlo_part(spec, rows);
    crate::write_file(path, &buf)?;
    Ok(buf.len() as u64)
}

/// The bytes of rows `rows` of a Pavlo data set.
pub fn pavlo_part(spec: &PavloSpec, rows: std::ops::Range<u64>) -> Vec<u8> {
    let mut buf =
        Vec::with_capacity((rows.end - rows.start) as usize * spec.set.row_bytes() as usize);
    for i in rows {
        let mut rng = Pcg64Mcg::seed_from_u64(part_seed(spec.seed ^ spec.set.tag(), i));
        match spec.set {
            PavloSet::Grep => grep_row(&mut buf, &mut rng, spec.seed, i),
            PavloSet::Rankings => rankings_row(&mut buf, &mut rng, spec.seed, i),
            PavloSet::UserVisits => uservisits_row(&mut buf, &mut rng, spec),
            PavloSet::Documents => document_row(&mut buf, &mut rng, spec, i),
        }
    }
    buf
}

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

fn grep_row(buf: &mut Vec<u8>, rng: &mut Pcg64Mcg, seed: u64, i: u64) {
    // A unique 10-character key: the row number scrambled by a bijection on
    // 50 bits, written in base 32 (32^10 = 2^50).
    let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15 | 1) ^ (seed & 0xffff)) & ((1 << 50) - 1);
    for d in (0..10).rev() {
        buf.push(b"0123456789ABCDEFGHIJKLMNOPQRSTUV"[((k >> (5 * d)) & 31) as usize]);
    }
    buf.push(b'|');
    let start = buf.len();
    for _ in 0..90 {
        buf.push(ALNUM[rng.gen_range(0..ALNUM.len())]);
    }
    if part_seed(seed ^ 0x7061, i).is_multiple_of(10_000) {
        let at = start + rng.gen_range(0..88);
        buf[at..at + 3].copy_from_slice(GREP_PATTERN.as_bytes());
    }
    buf.push(b'\n');
}

fn rankings_row(buf: &mut Vec<u8>, rng: &mut Pcg64Mcg, seed: u64, i: u64) {
    let e: f64 = -1.77 * (1.0 - rng.gen::<f64>()).ln();
    let rank = e.floor() as u64;
    let duration = rng.gen_range(1..=100);
    let _ = writeln!(buf, "{}|{rank}|{duration}", page_url(seed, i));
}

const AGENTS: [&str; 8] = [
    "Mozilla/5.0 (X11; Linux x86_64)",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64)",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)",
    "Opera/9.80 (Windows NT 6.1; U; en)",
    "Lynx/2.8.9rel.1 libwww-FM/2.14",
    "curl/7.88.1",
    "Wget/1.21.3",
    "Googlebot/2.1",
];
const COUNTRIES: [&str; 10] = [
    "USA", "DEU", "FRA", "GBR", "JPN", "CHN", "BRA", "IND", "CAN", "AUS",
];
const LANGUAGES: [&str; 8] = [
    "en-US", "de-DE", "fr-FR", "en-GB", "ja-JP", "zh-CN", "pt-BR", "hi-IN",
];
const SECOND_OCTETS: [u32; 13] = [
    101, 113, 127, 139, 151, 163, 172, 181, 193, 202, 217, 233, 249,
];

/// Distinct source IPs for a UserVisits data set of `rows` rows.
pub fn source_ip_pool(rows: u64) -> u64 {
    (rows * 25 / 1550).max(1)
}

fn source_ip(seed: u64, j: u64) -> String {
    let h = part_seed(seed ^ 0x6970, j);
    let a = 100 + (h % 156);
    let b = SECOND_OCTETS[((h >> 8) % 13) as usize];
    format!("{a}.{b}.{}.{}", (h >> 16) & 255, (h >> 24) & 255)
}

fn uservisits_row(buf: &mut Vec<u8>, rng: &mut Pcg64Mcg, spec: &PavloSpec) {
    let ip = source_ip(spec.seed, rng.gen_range(0..source_ip_pool(spec.rows)));
    let url = page_url(spec.seed, rng.gen_range(0..spec.rankings_rows.max(1)));
    let (y, m, d) =
        civil_from_days(rng.gen_range(days_from_civil(1990, 1, 1)..days_from_civil(2010, 1, 1)));
    let revenue = rng.gen_range(0..100_000u32);
    let agent = AGENTS[rng.gen_range(0..AGENTS.len())];
    let country = COUNTRIES[rng.gen_range(0..COUNTRIES.len())];
    let lang = LANGUAGES[rng.gen_range(0..LANGUAGES.len())];
    let word = syllables(rng.gen(), rng.gen_range(2..6));
    let duration = rng.gen_range(1..=10_000);
    let _ = writeln!(
        buf,
        "{ip}|{url}|{y:04}-{m:02}-{d:02}|{}.{:02}|{agent}|{country}|{lang}|{word}|{duration}",
        revenue / 100,
        revenue % 100
    );
}

fn document_row(buf: &mut Vec<u8>, rng: &mut Pcg64Mcg, spec: &PavloSpec, i: u64) {
    let _ = write!(buf, "http://docs.example.com/doc{i}.html|<html><body>");
    for _ in 0..rng.gen_range(5..=20) {
        let u: f64 = rng.gen();
        let target = ((u * u) * spec.rankings_rows.max(1) as f64) as u64;
        let _ = write!(
            buf,
            "<p>{}</p><a href=\"{}\">link</a>",
            syllables(rng.gen(), 3),
            page_url(spec.seed, target)
        );
    }
    buf.extend_from_slice(b"</body></html>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(set: PavloSet, rows: u64, threads: usize) -> Vec<u8> {
        let d = tempfile::tempdir().unwrap();
        let spec = PavloSpec {
            set,
            rows,
            rankings_rows: 1000,
            seed: 42,
            rows_per_part: 700,
            threads,
        };
        let sum = generate_pavlo(&spec, d.path(), &|_| {}).unwrap();
        assert_eq!(sum.records, rows);
        let mut all = Vec::new();
        for p in 0..sum.files {
            all.extend(std::fs::read(d.path().join(format!("part-{p:05}"))).unwrap());
        }
        all
    }

    #[test]
    fn every_set_is_deterministic_and_well_formed() {
        for (set, fields) in [
            (PavloSet::Grep, 2),
            (PavloSet::Rankings, 3),
            (PavloSet::UserVisits, 9),
            (PavloSet::Documents, 2),
        ] {
            let a = gen(set, 2000, 1);
            assert_eq!(a, gen(set, 2000, 3), "{set:?} independent of threads");
            let lines: Vec<&[u8]> = a.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
            assert_eq!(lines.len(), 2000);
            for l in lines {
                assert_eq!(
                    l.split(|&b| b == b'|').count(),
                    fields,
                    "{set:?}: {}",
                    String::from_utf8_lossy(l)
                );
            }
        }
    }

    #[test]
    fn grep_keys_are_unique_and_the_pattern_is_rare() {
        let text = gen(PavloSet::Grep, 50_000, 2);
        let mut keys = std::collections::HashSet::new();
        let mut hits = 0;
        for l in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            assert_eq!(l.len(), 101);
            assert!(keys.insert(l[..10].to_vec()));
            hits += usize::from(l.windows(3).any(|w| w == b"XYZ"));
        }
        assert!(
            (1..=15).contains(&hits),
            "{hits} rows with the pattern in 50,000"
        );
    }

    #[test]
    fn rankings_selectivity_and_join_urls_match() {
        let text = gen(PavloSet::Rankings, 100_000, 2);
        let ranks: Vec<u64> = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                std::str::from_utf8(l.split(|&b| b == b'|').nth(1).unwrap())
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        let sel = ranks.iter().filter(|&&r| r > 10).count() as f64 / ranks.len() as f64;
        assert!((0.001..0.004).contains(&sel), "selectivity {sel}");
        let uv = gen(PavloSet::UserVisits, 500, 1);
        let url = uv.split(|&b| b == b'|').nth(1).unwrap();
        let url = std::str::from_utf8(url).unwrap();
        let i: u64 = url
            .rsplit("page")
            .next()
            .unwrap()
            .trim_end_matches(".html")
            .parse()
            .unwrap();
        assert_eq!(page_url(42, i), url);
    }
}

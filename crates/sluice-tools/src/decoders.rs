//! `sluice bench decoders`: seed 000's decoder experiment. Rankings and
//! UserVisits rows in memory, decoded by four decoders on one core: text
//! and binary, each allocating (a new record object per row, as Hadoop's
//! immutable decoders) and mutable (one reused decoder, fields borrowed in
//! place). Every decoder's checksum over all rows must agree.

use std::hint::black_box;
use std::time::Instant;

use sluice_formats::delimited::Decoder;
use sluice_gen::{generate_pavlo, PavloSet, PavloSpec};
use sluice_jobs::pavlo::binary as bin;

/// Rows as one buffer and the end offset of each row.
struct Rows {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Rows {
    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&e| {
            let r = &self.bytes[start..e];
            start = e;
            r
        })
    }
}

fn generate(set: PavloSet, rows: u64, threads: usize) -> anyhow::Result<Rows> {
    let dir = std::env::temp_dir().join(format!("sluice-decoders-{}", std::process::id()));
    sluice_gen::prepare_dir(&dir, true)?;
    let spec = PavloSpec {
        set,
        rows,
        rankings_rows: (rows * 18 / 155).max(1),
        seed: 7,
        rows_per_part: 1 << 20,
        threads,
    };
    let sum = generate_pavlo(&spec, &dir, &|_| {})?;
    let mut text = Vec::new();
    for p in 0..sum.files {
        text.extend(std::fs::read(dir.join(format!("part-{p:05}")))?);
    }
    std::fs::remove_dir_all(&dir)?;
    let mut rows = Rows {
        bytes: Vec::with_capacity(text.len()),
        ends: Vec::new(),
    };
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        rows.bytes.extend_from_slice(line);
        rows.ends.push(rows.bytes.len());
    }
    Ok(rows)
}

fn encode(text: &Rows, set: PavloSet) -> anyhow::Result<Rows> {
    let mut dec = Decoder::new(b'|');
    let mut rec = Vec::new();
    let mut out = Rows {
        bytes: Vec::new(),
        ends: Vec::with_capacity(text.ends.len()),
    };
    for line in text.iter() {
        match set {
            PavloSet::Rankings => bin::encode_rankings(&mut dec, line, &mut rec),
            _ => bin::encode_uservisits(&mut dec, line, &mut rec),
        }
        .map_err(anyhow::Error::msg)?;
        out.bytes.extend_from_slice(&rec);
        out.ends.push(out.bytes.len());
    }
    Ok(out)
}

/// A decoder run: a checksum over every row.
type Run = fn(&Rows) -> anyhow::Result<f64>;

fn rankings_runs() -> [(&'static str, Run); 4] {
    [
        ("text, allocating", |r| {
            sum(r.iter().map(|l| {
                bin::rankings_from_text_owned(l).map(|x| f64::from(x.rank) + x.url.len() as f64)
            }))
        }),
        ("text, mutable", |r| {
            let mut d = Decoder::new(b'|');
            sum(r.iter().map(|l| {
                let f = d.decode(l);
                Ok(f.i64(1).map_err(|e| e.to_string())? as f64
                    + f.get(0).map_err(|e| e.to_string())?.len() as f64)
            }))
        }),
        ("binary, allocating", |r| {
            sum(r
                .iter()
                .map(|l| bin::rankings_owned(l).map(|x| f64::from(x.rank) + x.url.len() as f64)))
        }),
        ("binary, mutable", |r| {
            sum(r
                .iter()
                .map(|l| bin::rankings_view(l).map(|x| f64::from(x.rank) + x.url.len() as f64)))
        }),
    ]
}

fn visits_runs() -> [(&'static str, Run); 4] {
    [
        ("text, allocating", |r| {
            sum(r.iter().map(|l| {
                bin::visit_from_text_owned(l)
                    .map(|v| v.revenue + v.ip.len() as f64 + f64::from(v.duration))
            }))
        }),
        ("text, mutable", |r| {
            let mut d = Decoder::new(b'|');
            sum(r.iter().map(|l| {
                let f = d.decode(l);
                let e = |e: sluice_formats::delimited::FieldError| e.to_string();
                Ok(f.f64(3).map_err(e)?
                    + f.get(0).map_err(e)?.len() as f64
                    + f.i64(8).map_err(e)? as f64)
            }))
        }),
        ("binary, allocating", |r| {
            sum(r.iter().map(|l| {
                bin::visit_owned(l).map(|v| v.revenue + v.ip.len() as f64 + f64::from(v.duration))
            }))
        }),
        ("binary, mutable", |r| {
            sum(r.iter().map(|l| {
                bin::visit_view(l).map(|v| v.revenue + v.ip.len() as f64 + f64::from(v.duration))
            }))
        }),
    ]
}

fn sum(values: impl Iterator<Item = Result<f64, String>>) -> anyhow::Result<f64> {
    let mut s = 0.0;
    for v in values {
        s += black_box(v.map_err(anyhow::Error::msg)?);
    }
    Ok(s)
}

/// Runs the benchmark and returns its Markdown table.
pub fn bench(rankings: u64, visits: u64, runs: usize, threads: usize) -> anyhow::Result<String> {
    let mut out = format!(
        "Decoders, one core, rows in memory, median of {runs}: {rankings} Rankings and {visits} UserVisits rows\n\n\
         | data | decoder | M rows/s | ns/row | vs text allocating |\n|---|---|---:|---:|---:|\n"
    );
    for (set, n, runs_of) in [
        (PavloSet::Rankings, rankings, rankings_runs()),
        (PavloSet::UserVisits, visits, visits_runs()),
    ] {
        let text = generate(set, n, threads)?;
        let binary = encode(&text, set)?;
        let mut base = None;
        let mut check: Option<f64> = None;
        for (name, run) in runs_of {
            let rows = if name.starts_with("text") {
                &text
            } else {
                &binary
            };
            let mut times = Vec::new();
            for _ in 0..runs.max(1) {
                let t = Instant::now();
                let c = run(rows)?;
                times.push(t.elapsed().as_secs_f64());
                if let Some(prev) = check {
                    anyhow::ensure!(
                        (prev - c).abs() <= 1e-6 * prev.abs().max(1.0),
                        "{name} disagrees: {c} vs {prev}"
                    );
                }
                check = Some(c);
            }
            times.sort_by(f64::total_cmp);
            let t = times[times.len() / 2];
            let base_t = *base.get_or_insert(t);
            out.push_str(&format!(
                "| {} | {name} | {:.1} | {:.0} | {:.1}x |\n",
                set.name(),
                text.ends.len() as f64 / t / 1e6,
                t * 1e9 / text.ends.len() as f64,
                base_t / t
            ));
        }
    }
    Ok(out)
}

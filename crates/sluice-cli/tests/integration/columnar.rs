//! The Pavlo tasks over Parquet read as typed columns
//! (`sluice_api::columnar`): the same answers as over the same rows as
//! text, whatever the columns' layout (plain or dictionary pages, strings
//! or bytes, dates as days or as text, 32- or 64-bit integers), with a
//! batch the columns cannot give as the text would (a null) mapped as
//! text records, its bad rows counted as the text's.

use std::path::Path;

use crate::formats::pyarrow;
use crate::support::*;

/// From the text Pavlo data in argv[1], Parquet files in argv[2] (row
/// groups of a few hundred rows, so a 64 KiB split holds boundaries):
/// UserVisits with plain pages, and with dictionary pages, `destURL` as
/// bytes and `visitDate` as text; Rankings with a 32-bit `pageRank`; and
/// both with some nulls, written as text too (a null an empty field);
/// and UserVisits with page checksums.
const VARIANTS: &str = r#"
import sys, os, pyarrow as pa, pyarrow.csv as csv, pyarrow.parquet as pq, pyarrow.compute as pc
src, dest = sys.argv[1], sys.argv[2]
def read(name, cols, types):
    d = os.path.join(src, name)
    parts = sorted(p for p in os.listdir(d) if not p.startswith(("_", ".")))
    opts = csv.ReadOptions(column_names=cols)
    parse = csv.ParseOptions(delimiter="|", quote_char=False)
    conv = csv.ConvertOptions(column_types=types)
    return pa.concat_tables(csv.read_csv(os.path.join(d, p), read_options=opts, parse_options=parse,
                                         convert_options=conv) for p in parts)
uv_cols = ["sourceIP", "destURL", "visitDate", "adRevenue", "userAgent", "countryCode",
           "languageCode", "searchWord", "duration"]
uv = read("uservisits", uv_cols, {"sourceIP": pa.string(), "destURL": pa.string(),
          "visitDate": pa.date32(), "adRevenue": pa.float64(), "duration": pa.int64()})
rk = read("rankings", ["pageURL", "pageRank", "avgDuration"], {"pageURL": pa.string(), "pageRank": pa.int32()})
pq.write_table(uv, f"{dest}/uv-plain.parquet", row_group_size=500, use_dictionary=False, compression="none")
pq.write_table(uv, f"{dest}/uv-crc.parquet", row_group_size=500, use_dictionary=False, compression="none",
               write_page_checksum=True)
pq.write_table(rk, f"{dest}/rk-crc.parquet", row_group_size=300, use_dictionary=False, compression="none",
               write_page_checksum=True)
# Where to damage them, as "offset row-group": inside a page of UserVisits'
# adRevenue (a column the aggregation reads) and visitDate (the join's kept
# column, read alone first), and of Rankings' pageRank (the selection's).
def damage_at(name, col, at):
    md = pq.ParquetFile(f"{dest}/{name}.parquet").metadata
    g = min(5, md.num_row_groups // 2)
    chunk = md.row_group(g).column(col)
    open(f"{dest}/{at}", "w").write(f"{chunk.data_page_offset + chunk.total_compressed_size // 2} {g}")
damage_at("uv-crc", 3, "uv-crc.at")
damage_at("uv-crc", 2, "uv-crc-date.at")
damage_at("rk-crc", 1, "rk-crc.at")
dict_uv = uv.set_column(1, "destURL", pc.cast(uv["destURL"], pa.binary()))
dict_uv = dict_uv.set_column(2, "visitDate", pc.strftime(uv["visitDate"], format="%Y-%m-%d"))
pq.write_table(dict_uv, f"{dest}/uv-dict.parquet", row_group_size=700, use_dictionary=True, compression="snappy")
pq.write_table(rk, f"{dest}/rk-int32.parquet", row_group_size=300)
def with_nulls(t, col, rows):
    i = t.schema.get_field_index(col)
    vals = t[col].to_pylist()
    for r in rows:
        vals[r] = None
    return t.set_column(i, col, pa.array(vals, t.schema.field(col).type))
def as_text(t, path):
    cols = [c.to_pylist() for c in t.columns]
    with open(path, "w") as f:
        for row in zip(*cols):
            f.write("|".join("" if v is None else repr(v) if isinstance(v, float) else str(v) for v in row) + "\n")
n = uv.num_rows
nulls = with_nulls(with_nulls(with_nulls(uv, "adRevenue", [3, 4, 5]), "visitDate", [2000]),
                   "sourceIP", [n // 2, n // 2 + 1])
pq.write_table(nulls, f"{dest}/uv-nulls.parquet", row_group_size=500)
as_text(nulls, f"{dest}/uv-nulls.txt")
rk_nulls = with_nulls(rk, "pageRank", [10, 11])
pq.write_table(rk_nulls, f"{dest}/rk-nulls.parquet", row_group_size=300)
as_text(rk_nulls, f"{dest}/rk-nulls.txt")
"#;

/// A Pavlo task's sorted, rounded answer and its report.
fn run(dir: &Path, job: &str, name: &str, input: &Path, extra: &[&str]) -> (Vec<String>, Counts) {
    let out = dir.join(name);
    let report = dir.join(format!("{name}.json"));
    ok(sluice()
        .args(["run", job, "-q", "--threads", "2", "--split-size", "64KiB"])
        .args(["--bad-records", "skip"])
        .args(extra)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap());
    (rounded_lines(&out), Counts(read_json(&report)))
}

struct Counts(serde_json::Value);

impl Counts {
    fn get(&self, c: &str) -> u64 {
        self.0["counters"][c].as_u64().unwrap_or(0)
    }
}

#[test]
fn pavlo_tasks_read_parquet_as_columns_with_the_texts_answers() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("pv");
    ok(sluice()
        .args(["gen", "pavlo", "--scale", "2MB", "--out"])
        .arg(&data)
        .output()
        .unwrap());
    pyarrow(VARIANTS, &[&data, d.path()]);
    let pq = |name: &str| d.path().join(name);
    let (uv, rk) = (data.join("uservisits"), data.join("rankings"));
    let rk_text = ["--rankings", rk.to_str().unwrap()];
    let rk_pq = pq("rk-int32.parquet");
    let rk_pq = ["--rankings", rk_pq.to_str().unwrap()];
    let cases: [(&str, &Path, &str, &[&str]); 7] = [
        ("pavlo-agg-large", &uv, "uv-plain.parquet", &[]),
        ("pavlo-agg-large", &uv, "uv-dict.parquet", &[]),
        ("pavlo-agg-small", &uv, "uv-dict.parquet", &[]),
        (
            "pavlo-agg-large",
            &uv,
            "uv-plain.parquet",
            &["--group-by", "dest-url"],
        ),
        ("pavlo-selection", &rk, "rk-int32.parquet", &[]),
        ("pavlo-join", &uv, "uv-plain.parquet", &rk_pq),
        ("pavlo-join", &uv, "uv-dict.parquet", &rk_text),
    ];
    for (i, (job, text, file, extra)) in cases.into_iter().enumerate() {
        let (want, t) = run(d.path(), job, &format!("t{i}"), text, extra);
        let (got, c) = run(d.path(), job, &format!("p{i}"), &pq(file), extra);
        assert!(!want.is_empty(), "{job} {file}");
        assert!(got == want, "{job} over {file}: answers differ");
        // The map's output is the text's, record for record.
        for n in [
            "MAP_OUTPUT_RECORDS",
            "MAP_OUTPUT_BYTES",
            "MAP_OUTPUT_WRITTEN",
        ] {
            assert_eq!(c.get(n), t.get(n), "{job} over {file}: {n}");
        }
        let rows = c.get("MAP_INPUT_RECORDS");
        assert!(rows > 0);
        assert_eq!(
            c.get("ROWS_AS_COLUMNS"),
            rows,
            "{job} {file}: every row as columns"
        );
        if file.starts_with("uv") {
            assert!(c.0["maps"].as_u64().unwrap() > 1, "{file}: several splits");
        }
        // A range over integer or date columns keeps few rows: the rest
        // are left out of the reads (text dates are not compared).
        let filters = matches!(job, "pavlo-join" | "pavlo-selection");
        let skipped = c.get("ROWS_SKIPPED");
        assert_eq!(
            skipped > 0,
            filters && file != "uv-dict.parquet",
            "{job} {file}: {skipped} rows skipped"
        );
        assert_eq!(t.get("ROWS_SKIPPED"), 0);
    }
    // Nulls: their batches are mapped as text records, whose malformed
    // rows are skipped and counted as the same rows as text are.
    let cases = [
        ("pavlo-agg-large", "uv-nulls", 4),
        ("pavlo-selection", "rk-nulls", 2),
    ];
    for (job, file, bad) in cases {
        let text = pq(&format!("{file}.txt"));
        let (want, t) = run(d.path(), job, &format!("{file}-t"), &text, &[]);
        let (got, c) = run(
            d.path(),
            job,
            &format!("{file}-p"),
            &pq(&format!("{file}.parquet")),
            &[],
        );
        assert!(got == want, "{job} over {file}: answers differ");
        assert_eq!(c.get("MAP_OUTPUT_RECORDS"), t.get("MAP_OUTPUT_RECORDS"));
        assert_eq!(t.get("BAD_RECORDS"), bad, "{file}");
        assert_eq!(c.get("BAD_RECORDS"), bad, "{file}");
        let (cols, rows) = (c.get("ROWS_AS_COLUMNS"), c.get("MAP_INPUT_RECORDS"));
        assert!(
            cols > 0 && cols < rows,
            "{file}: {cols} of {rows} rows as columns"
        );
    }
    // The join's rank table: a null rank fails as its text row does.
    for ranks in ["rk-nulls.txt", "rk-nulls.parquet"] {
        let err = fails(
            sluice()
                .args(["run", "pavlo-join", "-q", "--rankings"])
                .arg(pq(ranks))
                .arg("--input")
                .arg(pq("uv-plain.parquet"))
                .arg("--output")
                .arg(d.path().join("join-nulls"))
                .output()
                .unwrap(),
        );
        assert!(
            err.contains(ranks) && err.contains("not a Rankings row"),
            "{err}"
        );
    }

    // A damaged page fails the task, naming the file and its row group:
    // in a column the job reads, and in the column whose range keeps rows
    // (read alone first, the others then decoded at its rows only).
    let damages: [(&str, &str, &str, &[&str]); 3] = [
        ("uv-crc", "uv-crc.at", "pavlo-agg-large", &[]),
        ("uv-crc", "uv-crc-date.at", "pavlo-join", &rk_pq),
        ("rk-crc", "rk-crc.at", "pavlo-selection", &[]),
    ];
    for (file, at, job, extra) in damages {
        let mut bytes = std::fs::read(pq(&format!("{file}.parquet"))).unwrap();
        let at = std::fs::read_to_string(pq(at)).unwrap();
        let (offset, group) = at.split_once(' ').unwrap();
        let offset: usize = offset.parse().unwrap();
        for b in &mut bytes[offset..offset + 8] {
            *b ^= 0x5a;
        }
        let bad = pq(&format!("damaged-{file}.parquet"));
        std::fs::write(&bad, &bytes).unwrap();
        let out = d.path().join(format!("damaged-{job}"));
        let err = fails(
            sluice()
                .args(["run", job, "-q"])
                .args(extra)
                .arg("--input")
                .arg(&bad)
                .arg("--output")
                .arg(&out)
                .output()
                .unwrap(),
        );
        let name = format!("damaged-{file}.parquet");
        assert!(
            err.contains(&name) && err.contains(&format!("row group {group}")),
            "{job}: {err}"
        );
        assert!(!out.exists(), "{job}: nothing is committed");
    }
}

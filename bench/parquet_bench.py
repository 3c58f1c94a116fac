"""The Parquet workloads of bench/compare: the Pavlo tasks over Parquet
files written from the generated text (parsed by DuckDB, written by
pyarrow: snappy, 16 row groups), run by Sluice, DuckDB and chdb on the same two files.

parquet-agg is pavlo-agg-large (SUM(adRevenue) GROUP BY sourceIP),
parquet-selection pavlo-selection (pageRank > 10), parquet-join the
Pavlo join (the week 2000-01-15..22, the top sourceIP).
"""
from pathlib import Path

WORKLOADS = ["parquet-agg", "parquet-selection", "parquet-join"]
ENGINES = {"sluice", "duckdb", "chdb"}
# The Sluice job each runs.
JOBS = {"parquet-agg": "pavlo-agg-large", "parquet-selection": "pavlo-selection", "parquet-join": "pavlo-join"}
# Rows a row group at least, and row groups a file at least.
MIN_GROUP_ROWS = 64
GROUPS = 16


def convert(text, dest):
    """Writes text Pavlo data (`sluice gen pavlo`'s directory `text`) as
    dest/rankings.parquet and dest/uservisits.parquet, typed as the text's
    columns, snappy, about GROUPS row groups each (an existing file is
    kept)."""
    import duckdb
    import pyarrow.parquet as pq
    import pavlo_duckdb
    dest.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    for name, cols in (("rankings", pavlo_duckdb.RANKINGS), ("uservisits", pavlo_duckdb.USERVISITS)):
        out = dest / f"{name}.parquet"
        if out.exists():
            continue
        # DuckDB parses the text with its types; pyarrow writes row groups
        # of exactly the size asked.
        table = con.sql(f"SELECT * FROM {pavlo_duckdb.table(str(text), name, cols)}").arrow()
        table = table.read_all() if hasattr(table, "read_all") else table  # a reader in newer DuckDB
        group = max(MIN_GROUP_ROWS, table.num_rows // GROUPS)
        tmp = out.with_suffix(".tmp")
        pq.write_table(table, tmp, row_group_size=group, compression="snappy")
        tmp.rename(out)


def sluice_args(w, data):
    """The job, its input and its other flags."""
    job = JOBS[w]
    if w == "parquet-selection":
        return job, str(data / "rankings.parquet"), []
    extra = ["--rankings", str(data / "rankings.parquet")] if w == "parquet-join" else []
    return job, str(data / "uservisits.parquet"), extra


def output_prefix(w):
    return "part-m-" if w == "parquet-selection" else "part-r-"


def duckdb_sql(w, data):
    uv = f"read_parquet('{data}/uservisits.parquet')"
    r = f"read_parquet('{data}/rankings.parquet')"
    if w == "parquet-selection":
        return f"SELECT pageURL, pageRank FROM {r} WHERE pageRank > 10"
    if w == "parquet-agg":
        return f"SELECT sourceIP, SUM(adRevenue) FROM {uv} GROUP BY sourceIP"
    return f"""
        WITH temp AS (
          SELECT sourceIP, AVG(pageRank) AS avgPageRank, SUM(adRevenue) AS totalRevenue
          FROM {r} AS R, {uv} AS UV
          WHERE R.pageURL = UV.destURL
            AND UV.visitDate BETWEEN DATE '2000-01-15' AND DATE '2000-01-22'
          GROUP BY UV.sourceIP)
        SELECT sourceIP, totalRevenue, avgPageRank FROM temp
        ORDER BY totalRevenue DESC, sourceIP LIMIT 1"""


def chdb_sql(w, data):
    uv = f"file('{data}/uservisits.parquet', 'Parquet')"
    r = f"file('{data}/rankings.parquet', 'Parquet')"
    if w == "parquet-selection":
        return f"SELECT pageURL, pageRank FROM {r} WHERE pageRank > 10"
    if w == "parquet-agg":
        return f"SELECT sourceIP, sum(adRevenue) FROM {uv} GROUP BY sourceIP"
    return (f"SELECT sourceIP, sum(adRevenue) AS total, avg(pageRank) FROM {uv} AS UV "
            f"INNER JOIN {r} AS R ON R.pageURL = UV.destURL "
            "WHERE UV.visitDate BETWEEN toDate('2000-01-15') AND toDate('2000-01-22') "
            "GROUP BY sourceIP ORDER BY total DESC, sourceIP LIMIT 1")


def data_dir(work, scale):
    return Path(work) / f"parquet-{scale}"

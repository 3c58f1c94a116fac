#!/usr/bin/env python3
"""DuckDB's answer and time for one Pavlo task, on the same files Sluice reads.

Usage: pavlo_duckdb.py --task T --data DIR --out FILE [--threads N] [--runs N] [--threshold X]

DATA holds grep/, rankings/, uservisits/ and documents/ (see `sluice gen pavlo`).
Writes the answer of the last run to OUT as tab-separated rows, and prints one
JSON object: {"times": [seconds of each run], "rows": rows in the answer}.
Each time covers reading the files, the query and writing the answer.
"""
import argparse
import json
import time

import duckdb

CSV = "delim='|', header=false, quote='', escape='', auto_detect=false"
RANKINGS = "{'pageURL': 'VARCHAR', 'pageRank': 'BIGINT', 'avgDuration': 'BIGINT'}"
USERVISITS = ("{'sourceIP': 'VARCHAR', 'destURL': 'VARCHAR', 'visitDate': 'DATE', "
              "'adRevenue': 'DOUBLE', 'userAgent': 'VARCHAR', 'countryCode': 'VARCHAR', "
              "'languageCode': 'VARCHAR', 'searchWord': 'VARCHAR', 'duration': 'BIGINT'}")


def table(data, name, columns):
    return f"read_csv('{data}/{name}/part-*', columns={columns}, {CSV})"


def query(task, data, threshold):
    uv = table(data, "uservisits", USERVISITS)
    if task == "pavlo-grep":
        grep = table(data, "grep", "{'key': 'VARCHAR', 'field': 'VARCHAR'}")
        return f"SELECT key, field FROM {grep} WHERE field LIKE '%XYZ%'"
    if task == "pavlo-selection":
        return f"SELECT pageURL, pageRank FROM {table(data, 'rankings', RANKINGS)} WHERE pageRank > {threshold}"
    if task == "pavlo-agg-large":
        return f"SELECT sourceIP, SUM(adRevenue) FROM {uv} GROUP BY sourceIP"
    if task == "pavlo-agg-small":
        return f"SELECT SUBSTR(sourceIP, 1, 7), SUM(adRevenue) FROM {uv} GROUP BY SUBSTR(sourceIP, 1, 7)"
    if task == "pavlo-join":
        r = table(data, "rankings", RANKINGS)
        return f"""
            WITH temp AS (
              SELECT sourceIP, AVG(pageRank) AS avgPageRank, SUM(adRevenue) AS totalRevenue
              FROM {r} AS R, {uv} AS UV
              WHERE R.pageURL = UV.destURL
                AND UV.visitDate BETWEEN DATE '2000-01-15' AND DATE '2000-01-22'
              GROUP BY UV.sourceIP)
            SELECT sourceIP, totalRevenue, avgPageRank FROM temp
            ORDER BY totalRevenue DESC, sourceIP LIMIT 1"""
    if task == "pavlo-udf":
        docs = table(data, "documents", "{'url': 'VARCHAR', 'html': 'VARCHAR'}")
        return f"""
            SELECT link, count(*) FROM (
              SELECT unnest(regexp_extract_all(html, 'href="([^"]*)"', 1)) AS link FROM {docs})
            GROUP BY link"""
    raise SystemExit(f"unknown task {task}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--threshold", type=int, default=10)
    a = ap.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {a.threads}")
    sql = query(a.task, a.data, a.threshold)
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        con.execute(f"COPY ({sql}) TO '{a.out}' (FORMAT csv, HEADER false, DELIMITER '\t', QUOTE '')")
        times.append(time.perf_counter() - t)
    rows = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
    print(json.dumps({"times": times, "rows": rows}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs each workload on Sluice and on every available peer over the same
generated files, checks that every engine gave the same answer, and writes
results.md, results.json and ratios.png into --out.

Peers: DuckDB and chdb (ClickHouse) from PyPI, Spark (pyspark, local[N],
DataFrame API, and the RDD API for word count), Hadoop MapReduce
(LocalJobRunner; jars from Maven Central through bench/hadoop/pom.xml, jobs
written as Hadoop's examples are), Phoenix++ (word count, from a local build
given with --phoenix). What is missing is installed on first use.

The high-cardinality workloads: hc-wordcount counts words of text drawn
from a huge vocabulary with a flat exponent (tens of millions of distinct
words), hc-agg sums adRevenue of Pavlo UserVisits by destURL over a
Rankings five times the visits (about 18 million groups at the default 20
million rows). Their answers are compared as digests (rows, and the sum of
a hash of every row with its value rounded to hundredths), computed by
DuckDB over the answer files: millions of rows do not fit Python lists.
Sluice also runs as sluice-tenth, with --memory a tenth of the input.

Every engine's runs happen in a child process of their own (a fresh
Python hosting the engine, or starting its processes). The peak resident
memory beside each time is the kernel's high-water mark (VmHWM in
/proc/PID/status) of the process that does the work: Sluice's own, from
its JSON report; DuckDB's and chdb's, the Python child they run in, read
by it at the end; Hadoop's and Phoenix++'s, sampled every 20 ms by the
harness. Spark's is the largest sum of resident memory over the child's
tree (driver Python, JVM, Python workers) sampled every 20 ms. (wait4's
ru_maxrss is no use here: Linux carries a process's high-water mark
across exec, so every child would show the harness's own size.)

Run through bench/compare, which creates the venv.
"""
import argparse
import json
import os
import platform
import re
import statistics
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import parquet_bench  # noqa: E402

GREP_PATTERN = "qz[a-f]"
TEXT_WORKLOADS = ["wordcount", "grep", "sort"]
TERA_WORKLOADS = ["terasort"]
PAVLO_WORKLOADS = ["pavlo-grep", "pavlo-selection", "pavlo-agg-large", "pavlo-agg-small", "pavlo-join", "pavlo-udf"]
HC_WORKLOADS = ["hc-wordcount", "hc-agg"]
PARQUET_WORKLOADS = parquet_bench.WORKLOADS
ALL_ENGINES = ["sluice", "sluice-tenth", "duckdb", "chdb", "spark", "spark-rdd", "hadoop", "phoenix"]


def pip_install(*packages):
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages], check=True)


def ensure_module(module, package=None):
    try:
        __import__(module)
    except ImportError:
        print(f"installing {package or module} ...", file=sys.stderr)
        pip_install(package or module)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------- answers

def same_field(a, b):
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1.0)


def rows_of_lines(lines, value_sep=None):
    rows = []
    for line in lines:
        line = line.rstrip("\n").rstrip("\r")
        if value_sep and "\t" in line:
            k, v = line.split("\t", 1)
            rows.append([k, *v.split(value_sep)])
        else:
            rows.append(line.split("\t"))
    return rows


def read_parts(path, prefix="part-"):
    files = sorted(p for p in Path(path).iterdir() if p.name.startswith(prefix) and not p.name.endswith(".crc"))
    lines = []
    for p in files:
        with open(p, encoding="utf-8", errors="surrogateescape") as f:
            lines.extend(f)
    return lines


def tera_answer(records):
    """TeraSort answers compare as (records, order-independent checksum of
    the 98 bytes before each CR LF, whether keys are in order)."""
    import zlib
    n, total, ordered, prev = 0, 0, True, b""
    for rec in records:
        body = rec[:98]
        if body[:10] < prev:
            ordered = False
        prev = body[:10]
        n += 1
        total = (total + zlib.crc32(body)) & 0xFFFFFFFFFFFFFFFF
    return ("tera", n, total, ordered)


def tera_lines(out, prefix="part-"):
    for p in sorted(q for q in Path(out).iterdir() if q.name.startswith(prefix) and not q.name.endswith(".crc")):
        with open(p, "rb") as f:
            for line in f:
                yield line.rstrip(b"\n").rstrip(b"\r")


def hc_digest(files):
    """The answer of a high-cardinality workload as (rows, distinct keys,
    sum over rows of a 64-bit hash of key and value rounded to hundredths):
    counts are integers and revenue sums have two decimals, so rounding
    removes only the engines' different float summation orders."""
    ensure_module("duckdb")
    import duckdb
    con = duckdb.connect()
    src = (f"read_csv({[str(f) for f in files]!r}, columns={{'k': 'VARCHAR', 'v': 'DOUBLE'}}, delim='\t', "
           "header=false, quote='', escape='', auto_detect=false)")
    rows, keys, total = con.execute(
        f"SELECT count(*), count(DISTINCT k), sum(hash(k || '\t' || round(v * 100)::BIGINT)::HUGEINT) FROM {src}"
    ).fetchone()
    return ("digest", rows, keys, int(total or 0))


def answer_files(out, prefix="part-"):
    p = Path(out)
    if p.is_file():
        return [p]
    return sorted(q for q in p.iterdir() if q.name.startswith(prefix) and not q.name.endswith(".crc")
                  and q.stat().st_size > 0)


def compare(want, got, ordered):
    if isinstance(want, tuple) or isinstance(got, tuple):
        return None if want == got else f"{got} differs from {want}"
    if not ordered:
        want, got = sorted(want), sorted(got)
    if len(want) != len(got):
        return f"{len(got)} rows, expected {len(want)}"
    for a, b in zip(want, got):
        if len(a) != len(b) or not all(same_field(x, y) for x, y in zip(a, b)):
            return f"row {b!r} differs from {a!r}"
    return None


# ---------------------------------------------------------------- engines

def input_bytes(data):
    return sum(p.stat().st_size for p in Path(data).rglob("part-*"))


class Sluice:
    name = "sluice"
    rss = "report"

    def __init__(self, a):
        self.exe = a.sluice
        self.threads = a.threads

    @classmethod
    def supports(cls, w):
        return True

    def memory_flags(self, data):
        return []

    def run(self, w, data, out):
        job, extra = w, self.memory_flags(data)
        if w == "hc-wordcount":
            job = "wordcount"
        elif w == "hc-agg":
            job, data, extra = "pavlo-agg-large", data / "uservisits", extra + ["--group-by", "dest-url"]
        if w == "grep":
            extra += ["--pattern", GREP_PATTERN]
        if w in PARQUET_WORKLOADS:
            job, inp, more = parquet_bench.sluice_args(w, data)
            extra += more
        elif w in TERA_WORKLOADS:
            inp = str(data)
        elif w in PAVLO_WORKLOADS:
            src = {"pavlo-grep": "grep", "pavlo-selection": "rankings", "pavlo-udf": "documents"}.get(w, "uservisits")
            inp = str(data / src)
            if w == "pavlo-join":
                extra += ["--rankings", str(data / "rankings")]
        else:
            inp = str(data)
        report = Path(f"{out}.report.json")
        subprocess.run([self.exe, "run", job, "--input", inp, "--output", str(out), "--threads", str(self.threads),
                        "--overwrite", "-q", "--report", str(report), *extra], check=True)
        return json.loads(report.read_text())["local"]["peak_rss_bytes"]

    @staticmethod
    def answer(w, out):
        if w in HC_WORKLOADS:
            return hc_digest(answer_files(out, "part-r-"))
        if w in TERA_WORKLOADS:
            def records():
                for p in sorted(Path(out).glob("part-r-*")):
                    b = p.read_bytes()
                    yield from (b[i:i + 100] for i in range(0, len(b), 100))
            return tera_answer(records())
        prefix = "part-m-" if w in ("grep", "pavlo-grep", "pavlo-selection") else "part-r-"
        if w in PARQUET_WORKLOADS:
            prefix = parquet_bench.output_prefix(w)
        join = w in ("pavlo-join", "parquet-join")
        return rows_of_lines(read_parts(out, prefix), value_sep="|" if join else None)


class SluiceTenth(Sluice):
    """Sluice with a memory budget of a tenth of its input."""
    name = "sluice-tenth"

    def memory_flags(self, data):
        return ["--memory", str(max(input_bytes(data) // 10, 1 << 20))]


def text_sql(w, text_from, line):
    """The text workloads in SQL; `text_from` yields a column named `line`."""
    if w in ("wordcount", "hc-wordcount"):
        return (f"SELECT word, count(*) FROM (SELECT unnest(string_split({line}, ' ')) AS word FROM {text_from}) "
                "WHERE word <> '' GROUP BY word")
    if w == "grep":
        return f"SELECT {line} FROM {text_from} WHERE regexp_matches({line}, '{GREP_PATTERN}')"
    return f"SELECT {line} FROM {text_from} ORDER BY {line}"


def file_answer(w, out):
    """The answer an SQL engine wrote to one tab-separated file."""
    if w in HC_WORKLOADS:
        return hc_digest([out])
    if w in TERA_WORKLOADS:
        with open(out, "rb") as f:
            return tera_answer(line.rstrip(b"\n").rstrip(b"\r") for line in f)
    with open(out, encoding="utf-8", errors="surrogateescape") as f:
        return rows_of_lines(f)


def duckdb_lines(data):
    """DuckDB reading every line of DATA's part files as one column `line`
    (split on a control character no generated data holds)."""
    return (f"read_csv('{data}/part-*', columns={{'line': 'VARCHAR'}}, delim='\x01', header=false, "
            "quote='', escape='', auto_detect=false)")


class DuckDB:
    name = "duckdb"
    rss = "self"

    def __init__(self, a):
        ensure_module("duckdb")
        import duckdb
        self.con = duckdb.connect()
        self.con.execute(f"SET threads = {a.threads}")

    @classmethod
    def supports(cls, w):
        return True

    def run(self, w, data, out):
        import pavlo_duckdb
        if w == "hc-agg":
            uv = pavlo_duckdb.table(str(data), "uservisits", pavlo_duckdb.USERVISITS)
            sql = f"SELECT destURL, SUM(adRevenue) FROM {uv} GROUP BY destURL"
        elif w in PAVLO_WORKLOADS:
            sql = pavlo_duckdb.query(w, str(data), 10)
        elif w in PARQUET_WORKLOADS:
            sql = parquet_bench.duckdb_sql(w, data)
        elif w in TERA_WORKLOADS:
            src = duckdb_lines(data)
            sql = f"SELECT line FROM {src} ORDER BY substr(line, 1, 10)"
        else:
            src = duckdb_lines(data)
            sql = text_sql(w, src, "line")
        self.con.execute(f"COPY ({sql}) TO '{out}' (FORMAT csv, HEADER false, DELIMITER '\t', QUOTE '')")

    @staticmethod
    def answer(w, out):
        return file_answer(w, out)


class Chdb:
    name = "chdb"
    rss = "self"
    PAVLO = {
        "rankings": "pageURL String, pageRank Int64, avgDuration Int64",
        "uservisits": ("sourceIP String, destURL String, visitDate Date, adRevenue Float64, userAgent String, "
                       "countryCode String, languageCode String, searchWord String, duration Int64"),
        "grep": "key String, field String",
        "documents": "url String, html String",
    }

    def __init__(self, a):
        ensure_module("chdb")
        from chdb import session
        self.s = session.Session()
        self.threads = a.threads

    @classmethod
    def supports(cls, w):
        return w not in TERA_WORKLOADS

    def table(self, data, name):
        return f"file('{data}/{name}/part-*', 'CSV', '{self.PAVLO[name]}')"

    def sql(self, w, data):
        if w in PARQUET_WORKLOADS:
            return parquet_bench.chdb_sql(w, data)
        if w in ("wordcount", "hc-wordcount"):
            return (f"SELECT word, count() FROM file('{data}/part-*', 'LineAsString') "
                    "ARRAY JOIN splitByChar(' ', line) AS word WHERE word != '' GROUP BY word")
        if w == "grep":
            return f"SELECT line FROM file('{data}/part-*', 'LineAsString') WHERE match(line, '{GREP_PATTERN}')"
        if w == "sort":
            return f"SELECT line FROM file('{data}/part-*', 'LineAsString') ORDER BY line"
        uv, r = self.table(data, "uservisits"), self.table(data, "rankings")
        return {
            "pavlo-grep": f"SELECT key, field FROM {self.table(data, 'grep')} WHERE position(field, 'XYZ') > 0",
            "pavlo-selection": f"SELECT pageURL, pageRank FROM {r} WHERE pageRank > 10",
            "pavlo-agg-large": f"SELECT sourceIP, sum(adRevenue) FROM {uv} GROUP BY sourceIP",
            "hc-agg": f"SELECT destURL, sum(adRevenue) FROM {uv} GROUP BY destURL",
            "pavlo-agg-small": f"SELECT substring(sourceIP, 1, 7) AS p, sum(adRevenue) FROM {uv} GROUP BY p",
            "pavlo-join": (f"SELECT sourceIP, sum(adRevenue) AS total, avg(pageRank) FROM {uv} AS UV "
                           f"INNER JOIN {r} AS R ON R.pageURL = UV.destURL "
                           "WHERE UV.visitDate BETWEEN toDate('2000-01-15') AND toDate('2000-01-22') "
                           "GROUP BY sourceIP ORDER BY total DESC, sourceIP LIMIT 1"),
            "pavlo-udf": (f"SELECT link, count() FROM {self.table(data, 'documents')} "
                          "ARRAY JOIN extractAll(html, 'href=\"([^\"]*)\"') AS link GROUP BY link"),
        }[w]

    def run(self, w, data, out):
        settings = (f" SETTINGS max_threads = {self.threads}, format_csv_delimiter = '|', "
                    "input_format_csv_allow_cr_end_of_line = 1")
        if w == "pavlo-udf":
            settings += ", format_csv_allow_double_quotes = 0"
        res = self.s.query(self.sql(w, data) + settings, "TabSeparatedRaw")
        text = res.bytes().decode("utf-8", "surrogateescape") if hasattr(res, "bytes") else str(res)
        Path(out).write_text(text, encoding="utf-8", errors="surrogateescape")

    @staticmethod
    def answer(w, out):
        return file_answer(w, out)


class Spark:
    name = "spark"
    rdd = False
    rss = "tree"

    def __init__(self, a):
        ensure_module("pyspark")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession
        t = time.perf_counter()
        self.spark = (SparkSession.builder.master(f"local[{a.threads}]")
                      .config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
                      .config("spark.sql.shuffle.partitions", str(a.threads * 2)).getOrCreate())
        self.spark.sparkContext.setLogLevel("ERROR")
        self.session_s = time.perf_counter() - t

    @classmethod
    def supports(cls, w):
        return True

    def csv(self, data, name, schema):
        return self.spark.read.csv(f"{data}/{name}", sep="|", schema=schema, quote="", escape="")

    def frame(self, w, data):
        from pyspark.sql import functions as F
        if w in TERA_WORKLOADS:
            df = self.spark.read.text(str(data))
            return df.orderBy(F.substring("value", 1, 10))
        if w in TEXT_WORKLOADS or w == "hc-wordcount":
            df = self.spark.read.text(str(data))
            if w in ("wordcount", "hc-wordcount"):
                return (df.select(F.explode(F.split("value", " ")).alias("w")).where("w != ''")
                        .groupBy("w").count())
            if w == "grep":
                return df.where(F.col("value").rlike(GREP_PATTERN))
            return df.orderBy("value")
        uv = self.csv(data, "uservisits", Chdb.PAVLO["uservisits"].replace(" String", " STRING")
                      .replace(" Int64", " BIGINT").replace(" Float64", " DOUBLE").replace(" Date", " DATE"))
        if w == "hc-agg":  # its directory has no Rankings
            return uv.groupBy("destURL").agg(F.sum("adRevenue"))
        r = self.csv(data, "rankings", "pageURL STRING, pageRank BIGINT, avgDuration BIGINT")
        if w == "pavlo-grep":
            g = self.csv(data, "grep", "key STRING, field STRING")
            return g.where(F.col("field").contains("XYZ"))
        if w == "pavlo-selection":
            return r.where("pageRank > 10").select("pageURL", "pageRank")
        if w == "pavlo-agg-large":
            return uv.groupBy("sourceIP").agg(F.sum("adRevenue"))
        if w == "pavlo-agg-small":
            return uv.groupBy(F.substring("sourceIP", 1, 7)).agg(F.sum("adRevenue"))
        if w == "pavlo-join":
            week = uv.where("visitDate BETWEEN DATE'2000-01-15' AND DATE'2000-01-22'")
            j = week.join(r, week.destURL == r.pageURL).groupBy("sourceIP").agg(
                F.sum("adRevenue").alias("total"), F.avg("pageRank").alias("avg"))
            return j.orderBy(F.desc("total"), "sourceIP").limit(1)
        d = self.csv(data, "documents", "url STRING, html STRING")
        links = d.select(F.explode(F.expr("regexp_extract_all(html, 'href=\"([^\"]*)\"', 1)")).alias("link"))
        return links.groupBy("link").count()

    def run(self, w, data, out):
        if self.rdd:
            subprocess.run(["rm", "-rf", str(out)], check=True)  # saveAsTextFile refuses an existing path
            sc = self.spark.sparkContext
            counts = (sc.textFile(str(data)).flatMap(lambda l: l.split(" ")).filter(lambda x: x)
                      .map(lambda x: (x, 1)).reduceByKey(lambda a, b: a + b))
            counts.map(lambda kv: f"{kv[0]}\t{kv[1]}").saveAsTextFile(str(out))
        else:
            frame = self.frame(w, data)
            if w in TERA_WORKLOADS:  # one column of arbitrary bytes: no CSV quoting
                frame.write.mode("overwrite").text(str(out))
            else:
                frame.write.mode("overwrite").option("sep", "\t").option("quote", "").csv(str(out))

    @staticmethod
    def answer(w, out):
        if w in HC_WORKLOADS:
            return hc_digest(answer_files(out))
        if w in TERA_WORKLOADS:
            return tera_answer(tera_lines(out))
        return rows_of_lines(read_parts(out))


class SparkRdd(Spark):
    name = "spark-rdd"
    rdd = True

    @classmethod
    def supports(cls, w):
        return w in ("wordcount", "hc-wordcount")


class Hadoop:
    name = "hadoop"
    rss = "largest"
    JOBS = {"wordcount": "wordcount", "grep": "grep", "sort": "sort",
            "pavlo-agg-large": "agg-large", "pavlo-agg-small": "agg-small", "hc-wordcount": "wordcount"}

    def __init__(self, a):
        self.threads = a.threads
        hd = ROOT / "bench" / "hadoop"
        if not (hd / "target" / "hadoop-jobs-1.0.jar").exists():
            print("building the Hadoop jobs (Maven Central) ...", file=sys.stderr)
            # Its output goes to stderr: this process's stdout is the
            # harness's answer pipe.
            subprocess.run(["mvn", "-q", "-B", "-f", str(hd / "pom.xml"), "package", "-DskipTests"],
                           check=True, stdout=sys.stderr)
        self.cp = f"{hd}/target/hadoop-jobs-1.0.jar:{hd}/target/lib/*"

    @classmethod
    def supports(cls, w):
        return w in cls.JOBS

    def run(self, w, data, out):
        inp = data / "uservisits" if w.startswith("pavlo") else data
        subprocess.run(["rm", "-rf", str(out)], check=True)
        cmd = ["java", "-Xmx2g", "-cp", self.cp, "sluice.bench.Jobs", self.JOBS[w], str(inp), str(out), str(self.threads)]
        if w == "grep":
            cmd.append(GREP_PATTERN)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @staticmethod
    def answer(w, out):
        if w in HC_WORKLOADS:
            return hc_digest(answer_files(out))
        return rows_of_lines(read_parts(out))


class Phoenix:
    name = "phoenix"
    rss = "largest"

    def __init__(self, a):
        if not a.phoenix:
            raise RuntimeError("give --phoenix DIR (a local Phoenix++ build)")
        self.exe = Path(a.phoenix) / "tests" / "word_count" / "word_count"
        self.threads = a.threads

    @classmethod
    def supports(cls, w):
        return w == "wordcount"

    def run(self, w, data, out):
        cat = data.parent / f"{data.name}.cat"
        size = sum(p.stat().st_size for p in data.glob("part-*"))
        if not cat.exists() or cat.stat().st_size != size:
            with open(cat, "wb") as f:
                for p in sorted(data.glob("part-*")):
                    f.write(p.read_bytes())
        env = dict(os.environ, MR_NUMTHREADS=str(self.threads))
        text = subprocess.run([str(self.exe), str(cat), "10"], env=env, check=True, capture_output=True, text=True).stdout
        Path(out).write_text(text)

    @staticmethod
    def answer(w, out):
        text = Path(out).read_text()
        return ("top10", [(w.strip().lower(), int(n)) for w, n in (l.split(" - ") for l in text.splitlines() if " - " in l)],
                int(text.split("Total:")[1].split()[0]))


ENGINES = {"sluice": Sluice, "sluice-tenth": SluiceTenth, "duckdb": DuckDB, "chdb": Chdb, "spark": Spark, "spark-rdd": SparkRdd,
           "hadoop": Hadoop, "phoenix": Phoenix}


def check_phoenix(want, got):
    _, top, total = got
    counts = sorted(((r[0], int(r[1])) for r in want), key=lambda kv: (-kv[1], kv[0]))
    if [c for _, c in top] != [c for _, c in counts[:len(top)]] or total != sum(c for _, c in counts):
        return f"top words {top[:3]} / total {total} differ"
    return None


# ---------------------------------------------------------------- harness

def machine_note():
    note = {"platform": platform.platform(), "cores": os.cpu_count()}
    try:
        cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        note["cpu"] = re.search(r"Model name:\s*(.*)", cpu).group(1).strip()
    except (OSError, AttributeError):
        pass
    try:
        mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
        note["memory_gb"] = round(int(mem) / 1e6, 1)
    except OSError:
        pass
    profile = Path(os.environ.get("SLUICE_HARDWARE", Path.home() / ".sluice" / "hardware.json"))
    if profile.exists():
        p = json.loads(profile.read_text())
        note["probe_mb_s"] = {k: round(v["measured"]["median"] / 1e6) for k, v in p.items()
                              if isinstance(v, dict) and "measured" in v}
    return note


def generate(a, work, workloads):
    """Generates the data sets the chosen workloads read (each once: an
    existing one is kept)."""
    text = work / f"text-{a.text_size}"
    if any(w in TEXT_WORKLOADS for w in workloads) and not (text / "part-00000").exists():
        subprocess.run([a.sluice, "gen", "text", "--size", a.text_size, "--seed", "7", "--out", str(text), "--overwrite"],
                       check=True)
    pavlo = work / f"pavlo-{a.pavlo_scale}"
    if any(w in PAVLO_WORKLOADS for w in workloads):
        subprocess.run([a.sluice, "gen", "pavlo", "--scale", a.pavlo_scale, "--seed", "7", "--out", str(pavlo)],
                       check=True)
    tera = work / f"tera-{a.text_size}"
    if any(w in TERA_WORKLOADS for w in workloads) and not (tera / "part-00000").exists():
        subprocess.run([a.sluice, "gen", "tera", "--size", a.text_size, "--seed", "7", "--out", str(tera), "--overwrite"],
                       check=True)
    parquet = parquet_bench.data_dir(work, a.pavlo_scale)
    if any(w in PARQUET_WORKLOADS for w in workloads):
        if not any(w in PAVLO_WORKLOADS for w in workloads):
            subprocess.run([a.sluice, "gen", "pavlo", "--scale", a.pavlo_scale, "--seed", "7", "--out", str(pavlo)],
                           check=True)
        ensure_module("duckdb")
        ensure_module("pyarrow")
        parquet_bench.convert(pavlo, parquet)
    return {"text": text, "pavlo": pavlo, "tera": tera, "parquet": parquet, **generate_hc(a, work, workloads)}


def generate_hc(a, work, workloads):
    """The high-cardinality data: text of a flat Zipf over a huge
    vocabulary, and UserVisits whose destURL draws from five times as many
    Rankings URLs as there are visits."""
    text = work / f"hctext-{a.hc_text_size}-{a.hc_vocabulary}"
    if "hc-wordcount" in workloads and not (text / "part-00000").exists():
        subprocess.run([a.sluice, "gen", "text", "--size", a.hc_text_size, "--seed", "7", "--vocabulary",
                        str(a.hc_vocabulary), "--exponent", "0.01", "--out", str(text), "--overwrite"], check=True)
    visits = work / f"hcvisits-{a.hc_rows}"
    if "hc-agg" in workloads and not (visits / "uservisits" / "part-00000").exists():
        subprocess.run([a.sluice, "gen", "uservisits", "--rows", str(a.hc_rows), "--rankings-rows",
                        str(5 * a.hc_rows), "--seed", "7", "--out", str(visits / "uservisits"), "--overwrite"],
                       check=True)
    return {"hctext": text, "hcvisits": visits}


def data_of(w, data):
    if w in PARQUET_WORKLOADS:
        return data["parquet"]
    if w in PAVLO_WORKLOADS:
        return data["pavlo"]
    if w in TERA_WORKLOADS:
        return data["tera"]
    return {"hc-wordcount": data["hctext"], "hc-agg": data["hcvisits"]}.get(w, data["text"])


# ---------------------------------------------------------------- child runs

def child_main(spec):
    """In a child process: builds one engine, times `reps` runs of one
    workload (the engine reading the input and writing its answer) and
    prints them as JSON on the last line of stdout."""
    a = argparse.Namespace(**spec["args"])
    try:
        engine = ENGINES[spec["engine"]](a)
    except Exception as e:  # reported as unavailable by the parent
        print(json.dumps({"unavailable": str(e)[:300]}))
        return
    times, peaks = [], []
    for _ in range(spec["reps"]):
        clear_output(Path(spec["out"]))
        t = time.perf_counter()
        peaks.append(engine.run(spec["workload"], Path(spec["data"]), Path(spec["out"])) or 0)
        times.append(time.perf_counter() - t)
    if engine.rss == "self":
        peaks.append(status_kib(os.getpid(), "VmHWM:") * 1024)
    print(json.dumps({"times": times, "peak_rss": max(peaks), "session_s": getattr(engine, "session_s", None)}))


def clear_output(out):
    """Removes the previous repetition's answer before the next is timed:
    deleting hundreds of freshly written megabytes took 0.2 s, which every
    engine replacing its output paid in its time (Sluice at its commit,
    DuckDB and chdb truncating their file)."""
    if out.is_dir():
        shutil.rmtree(out)
    elif out.exists():
        out.unlink()


def status_kib(pid, field):
    """A kB field of /proc/PID/status, 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def process_tree(pid):
    """`pid` and every descendant, from /proc."""
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        if p in found:
            continue
        found.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                stack.extend(int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split())
        except (OSError, ValueError):
            pass
    return found


class TreeSampler:
    """Samples a process tree every 20 ms: the largest VmHWM of any of its
    processes, and the largest sum of their VmRSS."""

    def __init__(self, pid):
        import threading
        self.pid, self.largest, self.total = pid, 0, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done.wait(0.02):
            tree = process_tree(self.pid)[1:]  # the child Python hosts, the rest work
            self.largest = max([self.largest] + [status_kib(p, "VmHWM:") * 1024 for p in tree])
            self.total = max(self.total, sum(status_kib(p, "VmRSS:") for p in [self.pid, *tree]) * 1024)

    def stop(self):
        self.done.set()
        self.thread.join()


def measure(a, n, w, data, out):
    """Runs one engine's repetitions in a child process; returns its JSON
    and the peak RSS in bytes (see the module doc)."""
    spec = {"args": {"threads": a.threads, "sluice": a.sluice, "phoenix": a.phoenix}, "engine": n,
            "workload": w, "data": str(data), "out": str(out), "reps": a.reps}
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)], stdout=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid)
    stdout, _ = proc.communicate()
    sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"exit status {proc.returncode}")
    res = json.loads(stdout.strip().splitlines()[-1])
    rss = ENGINES[n].rss
    peak = {"tree": sampler.total, "largest": sampler.largest}.get(rss, res.get("peak_rss", 0))
    return res, peak


def run_one(a, n, w, data, out, want):
    """One engine on one workload: times, peak RSS, and its answer checked
    against `want` (Sluice's). Returns the result row and the answer."""
    res, rss = measure(a, n, w, data, out)
    if "unavailable" in res:
        raise LookupError(res["unavailable"])
    got = ENGINES[n].answer(w, out)
    if want is None:
        err = None
    elif n == "phoenix":
        err = check_phoenix(want, got)
    else:
        err = compare(want, got, ordered=(w == "sort"))
    times = res["times"]
    r = {"engine": n, "workload": w, "times": times, "median_s": median(times), "spread_s": max(times) - min(times),
         "peak_rss_mb": round(rss / 1e6), "valid": err is None, "error": err}
    if res.get("session_s") is not None:
        r["session_start_s"] = res["session_s"]
    return r, got


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child_main(json.loads(sys.argv[2]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench-results" / "compare"))
    ap.add_argument("--quick", action="store_true", help="small data, one repetition")
    ap.add_argument("--text-size", default=None, help="text data size (default 269MB; quick: 16MB)")
    ap.add_argument("--pavlo-scale", default=None, help="UserVisits size (default 1GB; quick: 16MB)")
    ap.add_argument("--hc-text-size", default=None, help="hc-wordcount text size (default 200MB; quick: 4MB)")
    ap.add_argument("--hc-vocabulary", type=int, default=None,
                    help="hc-wordcount vocabulary (default 50,000,000; quick: 1,000,000)")
    ap.add_argument("--hc-rows", type=int, default=None, help="hc-agg UserVisits rows (default 20,000,000; quick: 50,000)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 5; quick: 1)")
    ap.add_argument("--engines", default="sluice,sluice-tenth,duckdb,chdb,spark,spark-rdd,hadoop")
    ap.add_argument("--workloads", default=",".join(TEXT_WORKLOADS + TERA_WORKLOADS + PAVLO_WORKLOADS + HC_WORKLOADS
                                                    + PARQUET_WORKLOADS))
    ap.add_argument("--phoenix", help="a local Phoenix++ build directory (adds the phoenix engine)")
    ap.add_argument("--sluice", default=str(ROOT / "target" / "release" / "sluice"))
    a = ap.parse_args()
    a.text_size = a.text_size or ("16MB" if a.quick else "269MB")
    a.pavlo_scale = a.pavlo_scale or ("16MB" if a.quick else "1GB")
    a.hc_text_size = a.hc_text_size or ("4MB" if a.quick else "200MB")
    a.hc_vocabulary = a.hc_vocabulary or (1_000_000 if a.quick else 50_000_000)
    a.hc_rows = a.hc_rows or (50_000 if a.quick else 20_000_000)
    a.reps = a.reps or (1 if a.quick else 5)
    a.sluice = str(Path(a.sluice).resolve())
    names = [e for e in a.engines.split(",") if e]
    if a.phoenix and "phoenix" not in names:
        names.append("phoenix")
    if not Path(a.sluice).exists():
        subprocess.run(["cargo", "build", "--release", "-p", "sluice-cli"], cwd=ROOT, check=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    workloads = [x for x in a.workloads.split(",") if x]
    data = generate(a, out / "data", workloads)
    results, unavailable = [], set()
    order = ["sluice"] + [x for x in names if x != "sluice"]
    for w in workloads:
        want = None
        for n in order:
            if n in unavailable or not ENGINES[n].supports(w):
                continue
            if w in PARQUET_WORKLOADS and n not in parquet_bench.ENGINES:
                continue
            dest = out / "answers" / f"{w}.{n}"
            dest.parent.mkdir(exist_ok=True)
            try:
                r, got = run_one(a, n, w, data_of(w, data), dest, want)
            except LookupError as ex:  # an engine that cannot start is reported, not fatal
                unavailable.add(n)
                results.append({"engine": n, "workload": "*", "valid": False, "error": f"unavailable: {ex}"})
                print(f"{n}: unavailable: {ex}", file=sys.stderr)
                continue
            except Exception as ex:
                results.append({"engine": n, "workload": w, "valid": False, "error": str(ex)[:300]})
                print(f"{w} on {n}: FAILED: {ex}", file=sys.stderr)
                continue
            if n == "sluice":
                want = got
            if r["error"]:
                print(f"MISMATCH: {w} on {n}: {r['error']}", file=sys.stderr)
            results.append(r)
            print(f"{w:<16} {n:<12} {r['median_s']:8.3f} s {r['peak_rss_mb']:6d} MB "
                  f"{'ok' if r['valid'] else 'WRONG: ' + r['error']}", file=sys.stderr)
    report(a, out, order, results)
    bad = [r for r in results if not r["valid"] and r["workload"] != "*"]
    sys.exit(1 if bad else 0)


def report(a, out, cols, results):
    params = {"text_size": a.text_size, "pavlo_scale": a.pavlo_scale, "hc_text_size": a.hc_text_size,
              "hc_vocabulary": a.hc_vocabulary, "hc_rows": a.hc_rows, "threads": a.threads, "reps": a.reps}
    machine = machine_note()
    (out / "results.json").write_text(json.dumps({"machine": machine, "params": params, "results": results}, indent=2))
    base = {r["workload"]: r["median_s"] for r in results if r["engine"] == "sluice" and r.get("valid")}
    lines = [f"Machine: {json.dumps(machine)}", "",
             f"Data: text {a.text_size}, Pavlo UserVisits {a.pavlo_scale}, high-cardinality text {a.hc_text_size} "
             f"(vocabulary {a.hc_vocabulary:,}, exponent 0.01), high-cardinality UserVisits {a.hc_rows:,} rows; "
             f"{a.threads} threads; median of {a.reps}; cells: seconds (engine time / Sluice time), peak RSS.", "",
             "| workload | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for w in dict.fromkeys(r["workload"] for r in results if r["workload"] != "*"):
        cells = []
        for n in cols:
            r = next((r for r in results if r["workload"] == w and r["engine"] == n), None)
            if r is None:
                cells.append("")
            elif not r["valid"]:
                cells.append("WRONG" if r.get("times") else "failed")
            else:
                ratio = r["median_s"] / base[w] if base.get(w) else float("nan")
                cells.append(f"{r['median_s']:.3f} ({ratio:.1f}x), {r['peak_rss_mb']:,} MB")
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    starts = [f"{r['engine']} {r['session_start_s']:.1f} s" for r in results if "session_start_s" in r]
    if starts:
        lines += ["", "Spark session start (not in the times): " + ", ".join(dict.fromkeys(starts))]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    chart(out, results, base, cols)


def chart(out, results, base, cols):
    try:
        ensure_module("matplotlib")
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # the table and JSON still stand
        print(f"no chart: {e}", file=sys.stderr)
        return
    workloads = list(base)
    peers = [c for c in cols if c != "sluice"]
    fig, ax = plt.subplots(figsize=(max(6, len(workloads) * 1.3), 4.5))
    width = 0.8 / max(1, len(peers))
    for i, n in enumerate(peers):
        ys = []
        for w in workloads:
            r = next((r for r in results if r["workload"] == w and r["engine"] == n and r.get("valid")), None)
            ys.append(r["median_s"] / base[w] if r else float("nan"))
        ax.bar([x + i * width for x in range(len(workloads))], ys, width, label=n)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("time / Sluice time (log)")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))])
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "ratios.png", dpi=110)


if __name__ == "__main__":
    main()

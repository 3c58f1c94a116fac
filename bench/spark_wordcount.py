"""PySpark's word count on YARN, the peer of Sluice's in bench/yarn.sh.

Usage (through spark-submit --master yarn): spark_wordcount.py INPUT
OUTPUT EXECUTORS [REDUCERS]. Words are the runs of bytes between space,
tab, newline, carriage return and form feed (Sluice's `wordcount`);
each output line is `WORD<TAB>COUNT`. Prints two lines: `executors S`
(seconds from SPARK_T0, the epoch time spark-submit was started at, to
EXECUTORS executors registered) and `wordcount S` (the job's seconds,
from its first action to its output committed).
"""

import os
import re
import sys
import time

from pyspark.sql import SparkSession

DELIMITERS = re.compile(r"[ \t\n\r\x0c]+")


def words(line):
    return [w for w in DELIMITERS.split(line) if w]


def main():
    src, dst, executors = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reducers = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    t0 = float(os.environ.get("SPARK_T0", time.time()))
    spark = SparkSession.builder.appName("pyspark-wordcount").getOrCreate()
    sc = spark.sparkContext
    # The driver counts as one of the block managers.
    while sc._jsc.sc().getExecutorMemoryStatus().size() < executors + 1:
        time.sleep(0.05)
    print(f"executors {time.time() - t0:.3f}", flush=True)
    t1 = time.time()
    lines = sc.textFile(src)
    counts = (
        lines.flatMap(words)
        .map(lambda w: (w, 1))
        .reduceByKey(lambda a, b: a + b, reducers)
        .map(lambda kv: f"{kv[0]}\t{kv[1]}")
    )
    counts.saveAsTextFile(dst)
    print(f"wordcount {time.time() - t1:.3f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()

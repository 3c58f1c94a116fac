"""Helpers the Python benchmarks share: running a command, timing a call,
reading a word count's part files."""
import pathlib
import subprocess
import time


def sh(*args, **kw):
    """Runs a command (arguments made strings), failing on a non-zero exit."""
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw)


def timed(f):
    """Seconds `f()` took."""
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def counts(d):
    """A word count's answer: its part files' `word<TAB>count` lines."""
    out = {}
    for p in sorted(pathlib.Path(d).glob("part-*")):
        for line in open(p):
            k, v = line.rstrip("\n").split("\t")
            out[k] = int(v)
    return out

"""A Python job's task as a Hadoop Streaming process: how a job of Python
functions runs on a cluster.

``python -m sluice._task ROLE JOB`` with ROLE ``map``, ``combine`` or
``reduce`` and JOB the pickled job (shipped to the task's working
directory). Between tasks, keys and values travel as lines of
``hex(encode(key)) TAB hex(encode(value))``: hex keeps the codec's byte
order, so the engine's bytewise sort of the lines is the keys' order, and
keeps every byte off the line structure. The reducer (or a map-only
mapper) writes the output as the local engine does: JSON or raw text.
"""

import itertools
import json
import pickle
import sys

from . import _sluice
from ._runtime import Runtime

#: Lines of input handed to the mapper at a time, and values to a reducer.
BATCH = 4096


def _hex_pair(key, value):
    return b"%s\t%s\n" % (
        _sluice.encode(key).hex().encode("ascii"),
        _sluice.encode(value).hex().encode("ascii"),
    )


def _render(obj, raw):
    if raw:
        if isinstance(obj, bytes):
            return obj
        return str(obj).encode("utf-8")
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def _writer(out, encode, raw):
    """Writes a list of pairs to ``out``."""

    def write(pairs):
        if pairs is None:
            return
        lines = []
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError(
                    "a mapper, combiner or reducer must give (key, value) pairs, not %r" % (pair,)
                )
            key, value = pair
            if encode:
                lines.append(_hex_pair(key, value))
            elif value is None:
                lines.append(_render(key, raw) + b"\n")
            else:
                lines.append(_render(key, raw) + b"\t" + _render(value, raw) + b"\n")
        out.write(b"".join(lines))

    return write


def _map(rt, write, stdin, errors):
    task = rt.map_task()
    at = 0
    while True:
        raw = list(itertools.islice(stdin, BATCH))
        if not raw:
            break
        lines = []
        for line in raw:
            body = line[:-1] if line.endswith(b"\n") else line
            body = body[:-1] if body.endswith(b"\r") else body
            try:
                lines.append(body.decode("utf-8", errors))
            except UnicodeDecodeError as exc:
                raise ValueError(
                    "the line at byte %d of this task's input is not UTF-8 (%s); "
                    "Job(encoding_errors='replace') reads it with U+FFFD in its place"
                    % (at, exc)
                ) from None
            at += len(line)
        write(task.batch(lines))
    write(task.final())


def _groups(stdin):
    """(key, [values]) of consecutive lines with the same key."""
    decode = _sluice.decode
    for hex_key, lines in itertools.groupby(stdin, key=lambda line: line.split(b"\t", 1)[0]):
        values = [decode(bytes.fromhex(line.split(b"\t", 1)[1].decode("ascii"))) for line in lines]
        yield decode(bytes.fromhex(hex_key.strip().decode("ascii"))), values


def _reduce(rt, role, write, stdin):
    task = rt.reduce_task(role)
    batch, n = [], 0
    for key, values in _groups(stdin):
        batch.append((key, values))
        n += len(values)
        if n >= BATCH:
            write(task.batch(batch))
            batch, n = [], 0
    if batch:
        write(task.batch(batch))
    write(task.final())


def main(argv):
    if len(argv) != 3 or argv[1] not in ("map", "combine", "reduce"):
        sys.stderr.write("usage: python -m sluice._task map|combine|reduce JOB_PICKLE\n")
        return 2
    role, path = argv[1], argv[2]
    with open(path, "rb") as f:
        job = pickle.load(f)
    rt = Runtime(job)
    raw = rt.output_format == "raw"
    out = sys.stdout.buffer
    if role == "map":
        _map(rt, _writer(out, rt.has_reducer, raw), sys.stdin.buffer, rt.encoding_errors)
    else:
        _reduce(rt, role, _writer(out, role == "combine", raw), sys.stdin.buffer)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

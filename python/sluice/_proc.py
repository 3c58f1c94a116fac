"""A process that runs a job's functions for the local engine.

``python -m sluice._proc``: the engine (``crates/sluice-py/src/procs.rs``,
where the protocol is written down byte by byte) starts one per task that
runs at once and sends it requests on its standard input: the pickled job,
then per task a start, batches of lines or of key groups, and the end. Each
reply carries the pairs the task's function gave, encoded natively as the
engine does in process (``_sluice.TaskIo``).
"""

import os
import pickle
import struct
import sys

from . import _sluice
from ._runtime import Runtime

_HEAD = struct.Struct("<IB")
_U32 = struct.Struct("<I")


def _pipes():
    """The request and reply pipes, moved off fds 0 and 1: what the user's
    code prints goes to standard error, and its standard input is empty."""
    requests = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return requests, replies


def _reply(out, tag, *parts):
    n = 1 + sum(len(p) for p in parts)
    out.write(_HEAD.pack(n, tag) + b"".join(parts))


def _raised(out, exc):
    text = Runtime.describe(exc).encode("utf-8", "replace")
    try:
        blob = pickle.dumps(exc, protocol=4)
        pickle.loads(blob)
    except Exception:
        blob = b""
    _reply(out, ord("E"), _U32.pack(len(text)), text, blob)


class _Serve:
    """The job, its current task and how that task's pairs are encoded."""

    def __init__(self, out):
        self.out = out
        self.rt = None
        self.io = None
        self.task = None
        self.encode = False
        self.reducers = 0

    def job(self, body):
        self.rt = Runtime(pickle.loads(body))
        self.io = _sluice.TaskIo(self.rt)
        _reply(self.out, ord("R"))

    def start(self, body):
        self.reducers = _U32.unpack_from(body)[0]
        role = body[4:].decode("ascii")
        if role == "mapper":
            self.task = self.rt.map_task()
            self.encode = self.rt.has_reducer
        else:
            self.task = self.rt.reduce_task(role)
            self.encode = role == "combine"
        _reply(self.out, ord("R"))

    def pairs(self, pairs):
        _reply(self.out, ord("P"), self.io.put(pairs, self.encode, self.reducers))

    def lines(self, body):
        offset = int.from_bytes(body[:8], "little")
        try:
            lines = self.io.lines(offset, body[8:])
        except ValueError as exc:
            _reply(self.out, ord("B"), str(exc).encode("utf-8"))
            return
        self.pairs(self.task.batch(lines))

    def groups(self, body):
        g = _U32.unpack_from(body)[0]
        end = 4 + 4 * g
        self.pairs(self.task.batch(self.io.groups(body[4:end], body[end:])))

    def final(self, body):
        self.pairs(self.task.final())


def main():
    requests, replies = _pipes()
    serve = _Serve(replies)
    handlers = {
        ord("J"): serve.job,
        ord("T"): serve.start,
        ord("M"): serve.lines,
        ord("G"): serve.groups,
        ord("F"): serve.final,
    }
    while True:
        head = requests.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return 0  # the engine is done with this process
        n, tag = _HEAD.unpack(head)
        body = requests.read(n - 1)
        if len(body) != n - 1:
            return 0
        handler = handlers.get(tag)
        if handler is None:
            sys.stderr.write("sluice._proc: a request with the unknown tag %r\n" % chr(tag))
            return 2
        try:
            handler(body)
        except BaseException as exc:  # the user's, reported to the engine
            _raised(replies, exc)


if __name__ == "__main__":
    sys.exit(main())

"""The Python side of a running job: the objects the engine's tasks call.

The engine (``crates/sluice-py/src/job.rs``) makes one task object per map
task, per reduce partition and per combine step, and calls it with a batch
of records at a time: ``batch(lines)`` for a map task, ``batch(groups)``
(a list of ``(key, values)``) for a reduce or combine task, and ``final()``
once at the end. Each returns a list of ``(key, value)`` pairs.
"""

import copy
import json
import traceback


def _note(exc, text):
    """Adds ``text`` to the exception's traceback (Python 3.11+)."""
    add = getattr(exc, "add_note", None)
    if add is not None:
        add(text)


def _short(obj):
    text = repr(obj)
    return text if len(text) <= 200 else text[:200] + "..."


class Runtime:
    """A job as the engine sees it."""

    def __init__(self, job):
        self.job = job
        self.has_reducer = job._user("reducer") is not None
        self.has_combiner = job._user("combiner") is not None
        self.has_partitioner = job._user("partitioner") is not None
        self.output_format = job.output_format
        self.encoding_errors = job.encoding_errors
        self._partitioner = job._user("partitioner")
        # The input is Parquet or Avro: each record is a row as a JSON
        # object, given to the mapper as a dict.
        self.rows = getattr(job, "_input_rows", False)

    def map_task(self):
        return _Task(copy.copy(self.job), "mapper", self.rows)

    def reduce_task(self, role):
        return _Task(copy.copy(self.job), "reducer" if role == "reduce" else "combiner")

    def partition(self, key, n):
        try:
            return self._partitioner(key, n)
        except BaseException as exc:
            _note(exc, "while placing the key %s in one of %d partitions" % (_short(key), n))
            raise

    @staticmethod
    def describe(exc):
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class _Task:
    """One task of a job: its own copy of the job (so that state set in
    ``mapper_init`` belongs to the task) and the user's functions."""

    def __init__(self, job, role, rows=False):
        self.role = role
        self.rows = rows
        self.fn = job._user(role)
        self.init = job._user(role + "_init")
        self.fin = job._user(role + "_final")

    def _start(self, out):
        init, self.init = self.init, None
        if init is not None:
            try:
                r = init()
            except BaseException as exc:
                _note(exc, "in %s_init" % self.role)
                raise
            if r is not None:
                out.extend(r)

    def batch(self, items):
        out = []
        if self.init is not None:
            self._start(out)
        fn = self.fn
        ext = out.extend
        item = None
        try:
            if self.role == "mapper":
                if self.rows:
                    items = map(json.loads, items)
                for item in items:
                    r = fn(item)
                    if r is not None:
                        ext(r)
            else:
                for item in items:
                    r = fn(item[0], item[1])
                    if r is not None:
                        ext(r)
        except BaseException as exc:
            if self.role == "mapper":
                what = "row" if self.rows else "line"
                _note(exc, "while mapping the %s %s" % (what, _short(item)))
            else:
                _note(exc, "in the %s of the key %s" % (self.role, _short(item and item[0])))
            raise
        return out

    def final(self):
        out = []
        if self.init is not None:
            self._start(out)
        if self.fin is not None:
            try:
                r = self.fin()
            except BaseException as exc:
                _note(exc, "in %s_final" % self.role)
                raise
            if r is not None:
                out.extend(r)
        return out

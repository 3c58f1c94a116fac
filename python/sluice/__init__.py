"""Sluice for Python: MapReduce jobs of Python functions, Sluice's built-in
jobs, and data generation.

A job of functions::

    import sluice

    def mapper(line):
        for word in line.split():
            yield word, 1

    def reducer(word, counts):
        yield word, sum(counts)

    job = sluice.Job(mapper=mapper, combiner=reducer, reducer=reducer)
    report = job.run("books/", "counts", overwrite=True)
    for word, n in sluice.read_output("counts"):
        ...

or of a class, as in mrjob::

    class WordCount(sluice.Job):
        def mapper_init(self):
            self.seen = 0
        def mapper(self, line):
            for word in line.split():
                yield word, 1
        def reducer(self, word, counts):
            yield word, sum(counts)

Each task gets its own copy of the job object, so state a task's
``mapper_init`` sets is that task's. Keys and values are Python objects:
``str``, ``bytes``, ``int``, ``float``, ``bool``, ``None`` and tuples and
lists of them keep their order within one type (ints sort as numbers,
tuples element by element); anything else is pickled. Reducers receive
each key's values as a list, keys in sorted order within a partition.

How parallelism works with the GIL: the engine reads, sorts, spills,
merges and writes on its own threads without the GIL; a task takes the GIL
only to call your function over a batch of records (a block of about a
megabyte of lines, or up to 8192 values of many keys), so Python code runs
one thread at a time while the rest of the job runs beside it.
"""

import json
import os

from . import _sluice
from ._runtime import Runtime

JobFailed = _sluice.JobFailed
encode = _sluice.encode
decode = _sluice.decode
__version__ = _sluice.__version__

__all__ = [
    "Job",
    "JobFailed",
    "run",
    "builtin_jobs",
    "gen_text",
    "read_output",
    "encode",
    "decode",
]

_ROLES = ("mapper", "combiner", "reducer", "partitioner")
_HOOKS = tuple(r + s for r in ("mapper", "combiner", "reducer") for s in ("_init", "_final"))


class Job:
    """A MapReduce job of Python functions.

    Pass the functions, or subclass and define them as methods:

    - ``mapper(line)``: called with each line of the input (a ``str``
      without its newline); returns or yields ``(key, value)`` pairs.
    - ``reducer(key, values)``: called once per key with a list of its
      values, keys in sorted order; returns or yields pairs. Without a
      reducer the job is map-only: the mapper's pairs are the output.
    - ``combiner(key, values)``: like the reducer, run on map output
      before the shuffle; it must give pairs with the key it was called
      with.
    - ``partitioner(key, n)``: the reduce partition (0 to n-1) of a key
      [default: a hash of the key's encoding].
    - ``mapper_init()``, ``mapper_final()`` (and ``reducer_``,
      ``combiner_`` likewise): called once at the start and the end of
      each task; ``_final`` may return or yield pairs.

    ``output_format`` is ``"json"`` (each key and value written as JSON,
    read back by :func:`read_output`) or ``"raw"`` (strings as they are,
    other objects as ``str(obj)``, as Hadoop's text output and PySpark's
    ``saveAsTextFile``). Keys and values are separated by a tab; a value
    of ``None`` writes the key alone. ``encoding_errors`` is ``"strict"``
    (a line that is not UTF-8 fails the job, naming its file and offset)
    or ``"replace"``.
    """

    output_format = "json"
    encoding_errors = "strict"
    name = "python"

    def __init__(self, mapper=None, reducer=None, combiner=None, partitioner=None, **options):
        given = dict(mapper=mapper, reducer=reducer, combiner=combiner, partitioner=partitioner)
        for key, value in options.items():
            if key not in _HOOKS and key not in ("output_format", "encoding_errors", "name"):
                raise TypeError("Job() got an unexpected keyword argument %r" % key)
            given[key] = value
        for key, value in given.items():
            if value is not None:
                setattr(self, key, value)
        if self._user("mapper") is None:
            raise TypeError("a job needs a mapper: pass mapper= or define a mapper method")
        if self._user("combiner") is not None and self._user("reducer") is None:
            raise TypeError("a combiner needs a reducer: a map-only job has no shuffle to combine")

    def _user(self, role):
        """The user's function for ``role``, or ``None``."""
        return getattr(self, role, None)

    def run(
        self,
        input,
        output,
        *,
        reducers=None,
        threads=None,
        memory=None,
        split_size=None,
        overwrite=False,
        properties=None,
    ):
        """Runs the job on the local engine over ``input`` (files,
        directories or globs, comma-separated or a list) into the
        directory ``output``; returns the job's report as a dict.

        Raises :class:`JobFailed` when the job fails; an exception your
        code raised is its ``__cause__``, and its message has the
        traceback and the record being processed."""
        req = _request(
            self.name, None, input, output, reducers, threads, memory, split_size, overwrite,
            properties,
        )
        reports = json.loads(_sluice.run_python(Runtime(self), json.dumps(req)))
        return reports[-1]


def _request(job, params, input, output, reducers, threads, memory, split_size, overwrite,
             properties):
    if isinstance(input, (str, os.PathLike)):
        input = os.fspath(input)
    else:
        input = ",".join(os.fspath(p) for p in input)
    engine = {}
    if threads is not None:
        engine["threads"] = int(threads)
    if split_size is not None:
        engine["split_size"] = int(split_size)
    return {
        "job": job,
        "params": params,
        "input": os.fspath(input),
        "output": os.fspath(output),
        "overwrite": bool(overwrite),
        "reducers": None if reducers is None else int(reducers),
        "memory": None if memory is None else int(memory),
        "engine": engine,
        "properties": {str(k): str(v) for k, v in (properties or {}).items()},
    }


def run(
    job,
    input,
    output,
    *,
    reducers=None,
    threads=None,
    memory=None,
    split_size=None,
    overwrite=False,
    properties=None,
    cluster=None,
    coordinator=None,
    secret_file=None,
    replication=1,
    **params,
):
    """Runs the built-in job ``job`` (see :func:`builtin_jobs`) with its
    parameters ``params`` and returns its report as a dict; a job of
    several stages (a baseline join) has the stages' reports under
    ``"stages"``.

    Runs on the local engine, or on a cluster given by its directory
    (``cluster=``, from ``sluice cluster up``) or coordinator address
    (``coordinator=``, with ``secret_file=`` or ``$SLUICE_SECRET``); there
    ``input`` and ``output`` are data set names."""
    req = _request(
        job, params or None, input, output, reducers, threads, memory, split_size, overwrite,
        properties,
    )
    reports = json.loads(
        _sluice.run_builtin(
            json.dumps(req),
            coordinator=coordinator,
            cluster=None if cluster is None else os.fspath(cluster),
            secret_file=None if secret_file is None else os.fspath(secret_file),
            replication=replication,
        )
    )
    report = reports[-1]
    if len(reports) > 1:
        report = dict(report, stages=reports)
    return report


def builtin_jobs():
    """The built-in jobs: a dict of name to description."""
    return dict(_sluice.builtin_jobs())


def gen_text(output, size, *, seed=1, vocabulary=100_000, exponent=1.0, overwrite=False):
    """Writes about ``size`` bytes of text (Zipf-distributed words, as
    ``sluice gen text``) into the directory ``output``."""
    _sluice.gen_text(os.fspath(output), int(size), seed, vocabulary, exponent, overwrite)


def _part_files(path):
    path = os.fspath(path)
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise FileNotFoundError("no job output at %s" % path)
    names = sorted(n for n in os.listdir(path) if n.startswith("part-"))
    return [os.path.join(path, n) for n in names]


def read_output(path, format="json"):
    """The ``(key, value)`` pairs of a job's output directory (or one part
    file), part by part in order. ``format`` is the job's output format:
    ``"json"`` decodes keys and values; ``"raw"`` gives strings. A line
    without a tab is a key whose value is ``None``."""
    if format not in ("json", "raw"):
        raise ValueError("format must be 'json' or 'raw', not %r" % (format,))
    load = json.loads if format == "json" else (lambda s: s)
    for name in _part_files(path):
        with open(name, encoding="utf-8", newline="\n") as f:
            for line in f:
                line = line[:-1] if line.endswith("\n") else line
                key, tab, value = line.partition("\t")
                yield load(key), (load(value) if tab else None)

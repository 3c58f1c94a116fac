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

The report a job returns is a :class:`Result`, a dict with two more
methods: ``to_arrow()`` (a pyarrow Table) and ``to_pandas()`` (a pandas
DataFrame) of the job's output. A mapper over Parquet or Avro files gets
each row as a dict of column name to value::

    def mapper(row):
        yield row["sourceIP"], row["adRevenue"]

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
merges and writes on its own threads without the GIL, and hands your
functions a batch of records at a time (a block of about a megabyte of
lines, or up to 8192 values of many keys). By default the functions run in
Python processes of their own (``python -m sluice._proc``, one per task
running at once, as PySpark runs a Python worker per core): the job is
pickled with cloudpickle, each task's process decodes its batches and
encodes what your function gives natively, and the engine's threads never
wait on this interpreter's GIL, so two tasks' Python runs on two cores.
What your functions print goes to standard error. ``run(...,
in_process=True)`` (or a job that cannot be pickled, with a warning) runs
them in this interpreter instead: a task takes the GIL only to call your
function over a batch, so Python code runs one thread at a time while the
rest of the job runs beside it.
"""

import copy
import json
import os
import shlex
import sys
import warnings

from . import _sluice
from ._runtime import Runtime

JobFailed = _sluice.JobFailed
encode = _sluice.encode
decode = _sluice.decode
__version__ = _sluice.__version__

__all__ = [
    "Job",
    "JobFailed",
    "Result",
    "run",
    "builtin_jobs",
    "gen_text",
    "read_output",
    "read_table",
    "encode",
    "decode",
]

_ROLES = ("mapper", "combiner", "reducer", "partitioner")
_HOOKS = tuple(r + s for r in ("mapper", "combiner", "reducer") for s in ("_init", "_final"))


class Job:
    """A MapReduce job of Python functions.

    Pass the functions, or subclass and define them as methods:

    - ``mapper(line)``: called with each line of the input (a ``str``
      without its newline), or, when the input is Parquet or Avro files,
      each row (a ``dict`` of column name to value); returns or yields
      ``(key, value)`` pairs.
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
        cluster=None,
        coordinator=None,
        secret_file=None,
        replication=1,
        in_process=False,
        tls_dir=None,
    ):
        """Runs the job on the local engine over ``input`` (files,
        directories or globs, comma-separated or a list) into the
        directory ``output``; returns the job's report, a :class:`Result`
        (a dict whose ``to_arrow()`` and ``to_pandas()`` read the output).
        Input of Parquet or Avro files (all of them; a mix with text is
        refused) reaches the mapper as dicts, one a row.

        Your functions run in Python processes beside the engine (see the
        module's documentation), or in this interpreter with
        ``in_process=True`` (state your functions keep outside the job
        object is then shared with the caller).

        Raises :class:`JobFailed` when the job fails; an exception your
        code raised is its ``__cause__``, and its message has the
        traceback and the record being processed.

        With ``cluster=`` (a ``sluice cluster up`` directory) or
        ``coordinator=`` (an address, or several comma-separated,
        ``"A,B"``, of which the active one is followed, with
        ``secret_file=`` or ``$SLUICE_SECRET``) the job is submitted to that cluster instead,
        over TLS with the client certificate of ``tls_dir=`` (a directory holding
        ``ca.pem``, ``client.pem`` and ``client.key``; by default the cluster
        directory's ``tls/``, or plaintext when that cluster runs ``--insecure``):
        ``input`` and ``output`` are data set names, and the job runs as a
        Streaming job whose tasks are ``python -m sluice._task`` processes
        of this interpreter (``sys.executable``), which every worker must
        have with this package installed. The job object is pickled with
        cloudpickle (functions of your own modules by value); a failed
        task's traceback is in the error. A partitioner runs locally
        only."""
        if cluster is not None or coordinator is not None:
            return self._submit(
                input, output, reducers, memory, overwrite, properties,
                dict(cluster=cluster, coordinator=coordinator, secret_file=secret_file,
                     replication=replication, tls_dir=tls_dir),
            )
        req = _request(
            self.name, None, input, output, reducers, threads, memory, split_size, overwrite,
            properties,
        )
        job = self
        if _sluice.input_rows(req["input"]):
            job = copy.copy(self)
            job._input_rows = True
        runtime = Runtime(job)
        blob = None if in_process else job._pickled_for_processes()
        if blob is None:
            out = _sluice.run_python(runtime, json.dumps(req))
        else:
            path = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
            out = _sluice.run_python(runtime, json.dumps(req), blob, sys.executable, path)
        return Result(json.loads(out)[-1], output, self.output_format)

    def _pickled_for_processes(self):
        """The job pickled for its processes, or ``None`` (with a warning)
        when it cannot be or there is no interpreter to start."""
        if not sys.executable:
            warnings.warn(
                "sys.executable is empty, so this job's functions run in this interpreter",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
        try:
            return _pickle_job(self)
        except Exception as exc:
            warnings.warn(
                "this job cannot be pickled (%s: %s), so its functions run in this "
                "interpreter, one task at a time" % (type(exc).__name__, exc),
                RuntimeWarning,
                stacklevel=3,
            )
            return None

    def _submit(self, input, output, reducers, memory, overwrite, properties, where):
        if self._user("partitioner") is not None:
            raise ValueError(
                "a Python partitioner runs on the local engine only: on a cluster the keys "
                "are placed by the hash partitioner"
            )
        Runtime(self)  # checks the options here rather than on a worker
        command = shlex.quote(sys.executable) + " -m sluice._task %s job.pkl"
        params = {
            "mapper": command % "map",
            "reducer": command % "reduce" if self._user("reducer") is not None else None,
            "combiner": command % "combine" if self._user("combiner") is not None else None,
            "files": [["job.pkl", list(_pickle_job(self))]],
        }
        req = _request(
            "streaming", params, input, output, reducers, None, memory, None, overwrite,
            properties,
        )
        return Result(_run_request(req, **where), None, self.output_format)


def _request(job, params, input, output, reducers, threads, memory, split_size, overwrite,
             properties, output_format=None):
    if isinstance(input, (str, os.PathLike)):
        input = os.fspath(input)
    else:
        input = ",".join(os.fspath(p) for p in input)
    engine = {}
    if threads is not None:
        engine["threads"] = int(threads)
    if split_size is not None:
        engine["split_size"] = int(split_size)
    if output_format is not None:
        engine["output_format"] = str(output_format)
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
    tls_dir=None,
    output_format=None,
    **params,
):
    """Runs the built-in job ``job`` (see :func:`builtin_jobs`) with its
    parameters ``params`` and returns its report, a :class:`Result` (a
    dict whose ``to_arrow()`` and ``to_pandas()`` read the output); a job
    of several stages (a baseline join) has the stages' reports under
    ``"stages"``.

    ``output_format`` is ``"text"`` (the default), ``"parquet"``,
    ``"avro"`` or ``"sequencefile"``, as ``--output-format`` says: with
    ``"parquet"`` word count writes (word string, count int64) columns,
    the Pavlo tasks their typed columns.

    Runs on the local engine, or on a cluster given by its directory
    (``cluster=``, from ``sluice cluster up``) or coordinator address
    (``coordinator=``, ``"A,B"`` for several, with ``secret_file=`` or
    ``$SLUICE_SECRET``), over TLS with the client certificate of
    ``tls_dir=`` (``ca.pem``, ``client.pem``, ``client.key``; by default
    the cluster directory's ``tls/``); there
    ``input`` and ``output`` are data set names."""
    req = _request(
        job, params or None, input, output, reducers, threads, memory, split_size, overwrite,
        properties, output_format,
    )
    report = _run_request(
        req, cluster=cluster, coordinator=coordinator, secret_file=secret_file,
        replication=replication, tls_dir=tls_dir,
    )
    local = cluster is None and coordinator is None
    return Result(report, output if local else None, "raw")


def _run_request(req, cluster, coordinator, secret_file, replication, tls_dir):
    """Runs a built-in job's request; the last report, with every stage's
    under ``"stages"`` when there were several."""
    reports = json.loads(
        _sluice.run_builtin(
            json.dumps(req),
            coordinator=coordinator,
            cluster=None if cluster is None else os.fspath(cluster),
            secret_file=None if secret_file is None else os.fspath(secret_file),
            replication=replication,
            tls_dir=None if tls_dir is None else os.fspath(tls_dir),
        )
    )
    report = reports[-1]
    if len(reports) > 1:
        report = dict(report, stages=reports)
    return report


class Result(dict):
    """A job's report (this dict) and its output, read as a table.

    ``to_arrow()`` gives a pyarrow Table of the output's part files: when
    they are Parquet (``output_format="parquet"``) the files themselves,
    their columns and types as the job wrote them; when they are text,
    the lines parsed into a ``key`` and a ``value`` column (a line without
    a tab has a null value), decoded from JSON for a Python job whose
    ``output_format`` is ``"json"`` and strings otherwise.
    ``to_pandas()`` is the same as a pandas DataFrame. Output on a
    cluster is read after ``sluice get``, by :func:`read_table`."""

    def __init__(self, report, output, text_format):
        super().__init__(report)
        self.output = None if output is None else os.fspath(output)
        self.text_format = text_format

    def to_arrow(self):
        if self.output is None:
            raise ValueError(
                "this job's output is a data set on a cluster: fetch it with `sluice get` "
                "and read it with sluice.read_table(path)"
            )
        return read_table(self.output, self.text_format)

    def to_pandas(self):
        return self.to_arrow().to_pandas()


def read_table(path, format="raw"):
    """A job's output directory (or one part file) as a pyarrow Table:
    Parquet part files as they are, text ones parsed into ``key`` and
    ``value`` columns (``format`` ``"json"`` decodes them as
    :func:`read_output` does; ``"raw"`` keeps strings)."""
    import pyarrow as pa

    parts = _part_files(path)
    kinds = {_kind(p) for p in parts}
    if kinds == {"parquet"}:
        import pyarrow.parquet as pq

        return pa.concat_tables([pq.read_table(p) for p in parts])
    binary = kinds - {"parquet", "text"}
    if binary or len(kinds) > 1:
        raise ValueError(
            "%s holds %s output: a table is read from Parquet or text part files"
            % (os.fspath(path), " and ".join(sorted(kinds)))
        )
    keys, values = [], []
    for key, value in read_output(path, format):
        keys.append(key)
        values.append(value)
    return pa.table({"key": keys, "value": values})


def _kind(path):
    """What a part file holds, by its first bytes."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"PAR1":
        return "parquet"
    if head == b"Obj\x01":
        return "avro"
    if head[:3] == b"SEQ":
        return "sequencefile"
    return "text"


def _pickle_job(job):
    """The job pickled for the workers. Functions and classes of the
    user's own modules (not the standard library's or an installed
    package's) are pickled by value: a worker's task runs in a directory
    of its own, where those modules cannot be imported."""
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - a dependency of the package
        raise ImportError("pickling a job needs cloudpickle, a dependency of this package") from None
    names = {type(job).__module__}
    names.update(
        getattr(f, "__module__", None) for f in vars(job).values() if callable(f)
    )
    registered = []
    for name in names:
        module = sys.modules.get(name or "")
        if module is None or name == "__main__" or not _is_users(module):
            continue
        cloudpickle.register_pickle_by_value(module)
        registered.append(module)
    try:
        return cloudpickle.dumps(job, protocol=4)
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def _is_users(module):
    """Whether ``module`` is the user's code rather than the standard
    library, an installed package or this one."""
    path = getattr(module, "__file__", None)
    if not path or module.__name__.split(".")[0] in ("sluice", "cloudpickle"):
        return False
    if module.__name__.split(".")[0] in getattr(sys, "stdlib_module_names", ()):
        return False
    return not any(part in ("site-packages", "dist-packages") for part in path.split(os.sep))


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
                # A key written alone: no tab, or (from a Streaming task) an
                # empty value, which is not JSON.
                alone = not tab or (not value and format == "json")
                yield load(key), (None if alone else load(value))

"""Failover: how long a cluster is without an active coordinator, and
what keeping the state in etcd costs a job.

Two coordinators through etcd (`cluster up --coordinators 2 --etcd`):
the active one is stopped RUNS times each way, and the time from the
signal to a coordinator answering is taken:
- SIGKILL under `cluster up`'s supervisor, which gives the dead one's
  lease back;
- SIGKILL with `--no-supervise`: the lease (2 s) runs out;
- SIGTERM: the coordinator gives its lease back as it stops.

Then the latency of an empty job and of a word count, on one coordinator
with its state directory against two through etcd (medians of RUNS).

Usage: python3 bench/failover.py [--runs 5] [--sluice BIN]
"""
import argparse
import os
import pathlib
import signal
import statistics
import subprocess
import tempfile
import time

from chaos import start_etcd

STATUS = "cluster", "status", "--cluster"


def coordinators(sluice, cl):
    out = subprocess.run([sluice, *STATUS, cl], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 6 and w[0] == "coordinator" and w[3] == "pid":
            rows.append((w[2], int(w[4]), w[5]))
    return rows


def answers(sluice, cl, addr):
    r = subprocess.run([sluice, "ls", "--coordinator", addr, "--cluster", cl,
                        "--wait-coordinator", "0"], capture_output=True)
    return r.returncode == 0


def wait_roles(sluice, cl, limit=30):
    """Waits for one active and one standby coordinator; the active's pid."""
    t = time.monotonic()
    while time.monotonic() - t < limit:
        rows = coordinators(sluice, cl)
        roles = sorted(r for _, _, r in rows)
        if roles == ["active", "standby"]:
            return next(p for _, p, r in rows if r == "active")
        time.sleep(0.1)
    raise SystemExit(f"no active and standby pair in {limit} s: {coordinators(sluice, cl)}")


def one_failover(sluice, cl, sig):
    pid = wait_roles(sluice, cl)
    rows = coordinators(sluice, cl)
    t0 = time.monotonic()
    os.kill(pid, sig)
    while not any(answers(sluice, cl, a) for a, p, _ in rows if p != pid):
        if time.monotonic() - t0 > 30:
            raise SystemExit("no coordinator took over within 30 s")
        time.sleep(0.01)
    return time.monotonic() - t0


def cluster(sluice, cl, url, supervised):
    up = [sluice, "cluster", "up", "--dir", cl, "--workers", "1", "--coordinators", "2",
          "--etcd", url]
    if not supervised:
        up.append("--no-supervise")
    subprocess.run(up, check=True, capture_output=True)


def failovers(sluice, work, url, runs, supervised, sig):
    """Supervised, one cluster (the supervisor starts the stopped one
    again, as a standby); unsupervised, a cluster a run."""
    out = []
    for i in range(1) if supervised else range(runs):
        cl = str(work / f"cl-{'sup' if supervised else 'nosup'}-{int(sig)}-{i}")
        cluster(sluice, cl, url, supervised)
        try:
            for _ in range(runs if supervised else 1):
                out.append(one_failover(sluice, cl, sig))
        finally:
            subprocess.run([sluice, "cluster", "down", "--dir", cl], capture_output=True)
    return out


def job_times(sluice, work, url, runs, etcd):
    cl = str(work / f"jobs-{'etcd' if etcd else 'files'}")
    up = [sluice, "cluster", "up", "--dir", cl, "--workers", "2"]
    if etcd:
        up += ["--coordinators", "2", "--etcd", url]
    subprocess.run(up, check=True, capture_output=True)
    try:
        c = ["--cluster", cl]
        subprocess.run([sluice, "put", str(work / "text"), "--dataset", "words",
                        "--block-size", "4MB", *c], check=True, capture_output=True)
        empty = work / "empty.txt"
        empty.write_text("")
        subprocess.run([sluice, "put", str(empty), "--dataset", "empty", *c],
                       check=True, capture_output=True)
        out = {"empty": [], "wordcount": []}
        for i in range(runs):
            for name, inp in (("empty", "empty"), ("wordcount", "words")):
                t = time.monotonic()
                subprocess.run([sluice, "submit", *c, "wordcount", "--reducers", "2",
                                "--input", inp, "--output", f"{name}{i}", "-q"],
                               check=True, capture_output=True)
                out[name].append(time.monotonic() - t)
        return out
    finally:
        subprocess.run([sluice, "cluster", "down", "--dir", cl], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sluice", default="target/release/sluice")
    ap.add_argument("--size", default="64MB")
    a = ap.parse_args()
    sluice = str(pathlib.Path(a.sluice).resolve())
    work = pathlib.Path(tempfile.mkdtemp(prefix="sluice-failover-"))
    etcd, url = start_etcd(work)
    try:
        med = statistics.median
        for label, sup, sig in (("SIGKILL, supervised (lease given back)", True, signal.SIGKILL),
                                ("SIGKILL, no supervisor (lease runs out)", False, signal.SIGKILL),
                                ("SIGTERM (lease given back)", True, signal.SIGTERM)):
            ts = failovers(sluice, work, url, a.runs, sup, sig)
            print(f"{label}: median {med(ts):.3f} s, max {max(ts):.3f} s "
                  f"({', '.join(f'{t:.3f}' for t in ts)})")
        subprocess.run([sluice, "gen", "text", "--size", a.size, "--seed", "5",
                        "--out", str(work / "text")], check=True, capture_output=True)
        files = job_times(sluice, work, url, a.runs, False)
        inetcd = job_times(sluice, work, url, a.runs, True)
        for name in ("empty", "wordcount"):
            f, e = med(files[name]), med(inetcd[name])
            print(f"{name} job ({a.size} for word count), submit wall clock: one coordinator "
                  f"{f:.3f} s, two through etcd {e:.3f} s: ratio {e / f:.3f}")
    finally:
        etcd.terminate()
        subprocess.run(["rm", "-rf", str(work)])


if __name__ == "__main__":
    main()

"""Chaos: jobs run while coordinators and workers are killed.

Two coordinators standing by for each other through etcd and WORKERS
workers (`sluice cluster up --coordinators 2 --etcd URL`) run JOBS word
counts spread over MINUTES. Meanwhile the active coordinator is SIGKILLed
every COORD_EVERY seconds (its supervisor starts it again, as a standby)
and a worker every WORKER_EVERY seconds (started again a second later on
the same data directory, as a node's init system would).

Every job must succeed and its answer must equal the local engine's on
the same text (the oracle). The report gives the failovers, the time from
each kill to an active coordinator answering again (p50, p99), the
workers killed, and the task attempts run beyond one per task.

Usage: python3 bench/chaos.py [--quick] [--sluice BIN] [--report FILE]
"""
import argparse
import json
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import counts, sh

STATUS_LINE = re.compile(r"^coordinator \d+ (\S+) pid (\d+) (active|standby|down)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_etcd(work):
    """A throwaway one-member etcd; returns (process, client URL)."""
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    proc = subprocess.Popen(
        ["etcd", "--data-dir", str(work / "etcd"), "--name", "chaos",
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"chaos=http://127.0.0.1:{peer}"],
        stdout=subprocess.DEVNULL, stderr=open(work / "etcd.log", "w"))
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", client), 0.1).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    raise SystemExit("etcd did not come up (is Debian's etcd-server installed?)")


class Chaos:
    def __init__(self, sluice, cluster):
        self.sluice, self.cluster = sluice, cluster
        self.recoveries = []
        self.worker_kills = 0
        self.stop = threading.Event()
        self.log = []

    def status(self):
        out = subprocess.run([self.sluice, "cluster", "status", "--cluster", self.cluster],
                             capture_output=True, text=True).stdout
        return [m.groups() for m in map(STATUS_LINE.match, out.splitlines()) if m]

    def answers(self, addr):
        r = subprocess.run([self.sluice, "ls", "--coordinator", addr, "--cluster", self.cluster,
                            "--wait-coordinator", "0"], capture_output=True)
        return r.returncode == 0

    def kill_active(self):
        active = [(a, int(p)) for a, p, s in self.status() if s == "active"]
        if not active:
            return
        addr, pid = active[0]
        addrs = [a for a, _, _ in self.status()]
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        # Recovered: some coordinator answers as the active one.
        while not self.stop.is_set():
            if any(self.answers(a) for a in addrs):
                break
            time.sleep(0.02)
        took = time.monotonic() - t0
        self.recoveries.append(took)
        self.log.append(f"killed coordinator pid {pid} ({addr}); active again after {took:.2f} s")

    def kill_worker(self):
        workers = json.load(open(pathlib.Path(self.cluster) / "cluster.json"))["workers"]
        alive = [w for w in workers if pid_alive(w["pid"])]
        if not alive:
            return
        w = random.choice(alive)
        argv = open(f"/proc/{w['pid']}/cmdline", "rb").read().split(b"\0")[:-1]
        os.kill(w["pid"], signal.SIGKILL)
        self.worker_kills += 1
        time.sleep(1)
        log = open(pathlib.Path(self.cluster) / f"restarted-{w['pid']}.log", "w")
        p = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        w["pid"] = p.pid
        path = pathlib.Path(self.cluster) / "cluster.json"
        doc = json.load(open(path))
        for x in doc["workers"]:
            if x.get("data_dir") == w.get("data_dir"):
                x["pid"] = p.pid
        path.write_text(json.dumps(doc, indent=2))
        self.log.append(f"killed worker {w.get('data_dir', '?')}, started again as pid {p.pid}")

    def run(self, coord_every, worker_every):
        start = time.monotonic()
        next_coord, next_worker = coord_every, worker_every
        while not self.stop.wait(0.1):
            t = time.monotonic() - start
            if t >= next_coord:
                self.kill_active()
                next_coord += coord_every
            if t >= next_worker:
                self.kill_worker()
                next_worker += worker_every


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def percentile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def submit(sluice, cluster, work, k, results):
    out = work / f"job{k}"
    report = work / f"job{k}.json"
    t0 = time.monotonic()
    r = subprocess.run([sluice, "submit", "--cluster", cluster, "--wait-coordinator", "120s",
                        "wordcount", "--input", "words", "--output", f"out{k}",
                        "--reducers", "2", "--report", str(report), "-q"],
                       capture_output=True, text=True)
    entry = {"job": k, "exit": r.returncode, "seconds": time.monotonic() - t0,
             "stderr": r.stderr[-2000:]}
    if r.returncode == 0:
        g = subprocess.run([sluice, "get", f"out{k}", str(out), "--cluster", cluster,
                            "--wait-coordinator", "120s"], capture_output=True, text=True)
        entry["got"] = g.returncode == 0
        if g.returncode == 0:
            entry["counts"] = counts(out)
        else:
            # Said apart from the submit's: the job succeeded, its get did not.
            entry["stderr"] = "get failed: " + g.stderr[-2000:]
        rep = json.load(open(report))
        tasks = rep.get("maps", 0) + rep.get("reducers", 0)
        entry["extra_attempts"] = rep.get("attempts", {}).get("launched", tasks) - tasks
    results.append(entry)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="the short form: 4 jobs over 40 s, a coordinator killed every 10 s, a worker every 15 s")
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--coordinator-every", type=float, default=20)
    ap.add_argument("--worker-every", type=float, default=30)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--size", default="16MB")
    ap.add_argument("--sluice", default="target/release/sluice")
    ap.add_argument("--report")
    a = ap.parse_args()
    if a.quick:
        a.minutes, a.jobs, a.coordinator_every, a.worker_every, a.size = 40 / 60, 4, 10, 15, "4MB"
    sluice = str(pathlib.Path(a.sluice).resolve())
    work = pathlib.Path(tempfile.mkdtemp(prefix="sluice-chaos-"))
    cluster = str(work / "cl")
    etcd, url = start_etcd(work)
    try:
        sh(sluice, "gen", "text", "--size", a.size, "--seed", "11", "--out", work / "text")
        sh(sluice, "run", "wordcount", "--input", work / "text", "--output", work / "local",
           "--reducers", "2", "-q")
        oracle = counts(work / "local")
        sh(sluice, "cluster", "up", "--dir", cluster, "--workers", a.workers,
           "--coordinators", 2, "--etcd", url)
        sh(sluice, "put", work / "text", "--dataset", "words", "--block-size", "1MB",
           "--replication", 2, "--cluster", cluster)
        chaos = Chaos(sluice, cluster)
        killer = threading.Thread(target=chaos.run, args=(a.coordinator_every, a.worker_every))
        killer.start()
        results, jobs = [], []
        spacing = a.minutes * 60 / a.jobs
        t0 = time.monotonic()
        for k in range(a.jobs):
            while time.monotonic() - t0 < k * spacing:
                time.sleep(0.05)
            j = threading.Thread(target=submit, args=(sluice, cluster, work, k, results))
            j.start()
            jobs.append(j)
        for j in jobs:
            j.join()
        chaos.stop.set()
        killer.join()
        wall = time.monotonic() - t0
    finally:
        subprocess.run([sluice, "cluster", "down", "--dir", cluster], capture_output=True)
        etcd.terminate()
    failed = [r for r in results if r["exit"] != 0 or not r.get("got")]
    wrong = [r for r in results if r.get("counts") is not None and r["counts"] != oracle]
    summary = {
        "jobs": len(results),
        "failed_jobs": len(failed),
        "wrong_answers": len(wrong),
        "failovers": len(chaos.recoveries),
        "recover_p50_s": percentile(chaos.recoveries, 0.5),
        "recover_p99_s": percentile(chaos.recoveries, 0.99),
        "worker_kills": chaos.worker_kills,
        "extra_attempts": sum(r.get("extra_attempts", 0) for r in results),
        "job_seconds_p50": percentile([r["seconds"] for r in results], 0.5),
        "wall_s": wall,
        "events": chaos.log,
    }
    for line in chaos.log:
        print(line)
    print(json.dumps({k: v for k, v in summary.items() if k != "events"}, indent=2))
    if a.report:
        pathlib.Path(a.report).write_text(json.dumps({"summary": summary, "jobs": [
            {k: v for k, v in r.items() if k != "counts"} for r in results]}, indent=2))
    for r in failed:
        print(f"job {r['job']} failed (exit {r['exit']}): {r['stderr']}", file=sys.stderr)
    if failed or wrong:
        raise SystemExit(f"{len(failed)} jobs failed, {len(wrong)} answers wrong "
                         f"(logs kept in {work})")
    shutil.rmtree(work, ignore_errors=True)
    if not chaos.recoveries:
        raise SystemExit("no coordinator was killed: the run proves nothing")
    print(f"chaos: {len(results)} jobs right through {len(chaos.recoveries)} failovers "
          f"and {chaos.worker_kills} worker kills")


if __name__ == "__main__":
    main()

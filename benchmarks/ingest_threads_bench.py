"""Where threads of one process lose time on many exports: the interpreter lock a file's
ingest holds, and N files in W threads (tracekit.parallel) against one after another.

Builds distributed_bench's exports (N of about 0.47 M rows, from the real many_kernels
capture), then, in this process after a warm-up (no process start, no imports):

* ``lock``: a serial ingest of a few files with a watcher thread that sleeps 0.5 ms,
  measures how long past that it waits for the interpreter lock, and charges each wait
  to the step where the ingest ran Python meanwhile ("py"), or to the C call the
  ingest's threads were in ("C"). On an idle machine the waits are the lock; on a busy
  one they include waiting for a core (an upper bound).
* ``threads``: the N files one after another, then in W threads at the default switch
  interval and at 0.5 ms: wall, CPU (of which system), cores busy, minor page faults.
  With ``--waits``, a sampler process reads each ingest thread's state every 2 ms from
  /proc (running, or asleep in a futex: the interpreter lock's, found first by making a
  thread wait for it, with the words within 48 bytes of those (the rest of the lock's
  state), or another), without taking this process's lock.
* ``--processes P``: the same N files over P warm processes (a forkserver pool, imports
  done and one file ingested before the clock starts), each into a store of its own with
  DuckDB's threads at cores / P: nothing shared, nothing landed, no start. The most any
  P-way split of this work gets on this machine, against the serial ingest above.
* ``--landings K``: the N files prepared in processes (``tracekit.staging.prepare``),
  then landed in one new store by K threads, each file in a transaction of its own
  (ids in arrival order: this times the copies only).

``--set NAME=VALUE`` applies a DuckDB setting to every store opened (e.g.
``block_allocator_memory=2GB``: DuckDB keeps that much of its freed blocks for reuse instead
of giving them back to the system and faulting fresh pages in for the next file);
``--lock-files 0`` skips the lock measurement.

Usage: python benchmarks/ingest_threads_bench.py [--files 16] [--copies 6] [--lock-files 6] [--workers 8,16]
       [--waits] [--processes 8,16] [--landings 1,4,8] [--set NAME=VALUE ...] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distributed_bench import make_exports  # noqa: E402

import tracekit  # noqa: E402
from tracekit import parallel  # noqa: E402


class Stores:
    """Fresh stores in ``work``, removed once measured."""

    def __init__(self, work: Path, settings: list[str] = ()):
        self.work, self.n, self.settings = work, 0, [s.split("=", 1) for s in settings]

    def open(self) -> tuple[tracekit.Tracekit, Path]:
        self.n += 1
        db = self.work / f"store{self.n}.duckdb"
        tk = tracekit.open(db)
        for name, value in self.settings:
            tk.con.execute(f"SET {name} = '{value}'")
        return tk, db

    @staticmethod
    def done(tk, db: Path) -> None:
        tk.close()
        db.unlink(missing_ok=True)
        Path(f"{db}.wal").unlink(missing_ok=True)


def lock_held(stores: Stores, files: list[Path], top: int = 20) -> None:
    stop, charged, waited = threading.Event(), collections.Counter(), [0.0]
    main = threading.main_thread().ident

    def where(frame) -> str:
        ours = [f for f in traceback.extract_stack(frame) if "/tracekit/" in f.filename]
        return f"{Path(ours[-1].filename).name}:{ours[-1].lineno} {ours[-1].name}" if ours else "-"

    def watcher() -> None:
        me, before = threading.get_ident(), {}
        while not stop.is_set():
            t = time.perf_counter()
            time.sleep(0.0005)
            wait = time.perf_counter() - t - 0.0005
            frames = sys._current_frames()
            now = {tid: (id(f), f.f_lasti) for tid, f in frames.items() if tid != me}
            if wait > 0.0002:
                waited[0] += wait
                moved = [tid for tid in now if before.get(tid) != now[tid]]
                for tid in moved:
                    charged["py " + where(frames[tid])] += wait / len(moved)
                if not moved:
                    charged["C  " + where(frames[main])] += wait
            before = now

    th = threading.Thread(target=watcher, daemon=True)
    tk, db = stores.open()
    th.start()
    t, c = time.perf_counter(), cpu()
    for f in files:
        tk.ingest(f)
    dt, used = time.perf_counter() - t, cpu() - c
    stop.set()
    th.join()
    Stores.done(tk, db)
    n = len(files)
    print(f"lock: serial ingest of {n} files with the watcher: {dt:.2f} s, CPU {used:.2f} s; lock held while the "
          f"watcher waited {waited[0]:.2f} s = {waited[0] / n * 1000:.1f} ms a file (load {os.getloadavg()[0]:.1f})")
    for key, v in charged.most_common(top):
        print(f"   {v / n * 1000:6.1f} ms a file  {key}")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def threads(stores: Stores, files: list[Path], workers: list[int], waits: bool = False) -> float:
    """The serial ingest's wall seconds (the baseline of every ratio printed)."""
    n = len(files)

    def measure(label: str, fn) -> float:
        tk, db = stores.open()
        a = resource.getrusage(resource.RUSAGE_SELF)
        t = time.perf_counter()
        fn(tk)
        dt = time.perf_counter() - t
        b = resource.getrusage(resource.RUSAGE_SELF)
        Stores.done(tk, db)
        used = b.ru_utime - a.ru_utime + b.ru_stime - a.ru_stime
        print(f"{label:40s} {dt:6.2f} s  CPU {used:6.2f} s (system {b.ru_stime - a.ru_stime:5.2f})  "
              f"{used / dt:5.2f} cores  minor faults a file {(b.ru_minflt - a.ru_minflt) / n:7.0f}  "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        return dt

    serial = measure(f"{n} files one after another", lambda tk: [tk.ingest(f) for f in files])
    default = sys.getswitchinterval()
    try:
        for w in workers:
            for interval in (default, 0.0005):
                sys.setswitchinterval(interval)
                dt = measure(f"{n} files, {w} threads, switch {interval * 1000:g} ms",
                             lambda tk, w=w: parallel.ingest_many(tk, files, workers=w))
                print(f"   -> {serial / dt:.2f}x")
            if waits:
                sampler = Sampler(stores.work)
                measure(f"{n} files, {w} threads, sampled", lambda tk, w=w: parallel.ingest_many(tk, files, workers=w))
                sampler.report(sampler.finish(), lock_futexes())
    finally:
        sys.setswitchinterval(default)
    return serial


#: Run by the sampler process: each thread's state, and the futex it sleeps in.
SAMPLER = r"""
import collections, json, os, sys, time
pid, kinds_file, stop_file, out_file = sys.argv[1:]
out, kinds, n = collections.Counter(), {}, 0
while not os.path.exists(stop_file):
    if n % 25 == 0:
        try:
            kinds = json.load(open(kinds_file))
        except (OSError, ValueError):
            pass
    n += 1
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            st = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[0]
            if st == "R":
                w = "running"
            else:
                sc = open(f"/proc/{pid}/task/{tid}/syscall").read().split()
                w = f"futex {sc[1]}" if sc[0] == "202" else f"syscall {sc[0]}"
        except OSError:
            continue
        out[kinds.get(tid, "other") + "|" + w] += 1
    time.sleep(0.002)
json.dump(out, open(out_file, "w"))
"""


class Sampler:
    """A process sampling this one's threads (SAMPLER); ``kinds`` names the threads it
    is told about (the rest are "other"), refreshed every 30 ms by a thread here."""

    def __init__(self, work: Path, kinds: dict[int, str] | None = None):
        self.kinds_file, self.stop, self.out = work / "kinds.json", work / "sampler.stop", work / "sampler.json"
        self.stop.unlink(missing_ok=True)
        self.fixed = kinds
        self.write_kinds()
        self.proc = subprocess.Popen([sys.executable, "-c", SAMPLER, str(os.getpid()), str(self.kinds_file),
                                      str(self.stop), str(self.out)])
        self.done = threading.Event()
        self.thread = None
        if kinds is None:
            self.thread = threading.Thread(target=self.keep, daemon=True)
            self.thread.start()

    def write_kinds(self) -> None:
        kinds = self.fixed if self.fixed is not None else {
            t.native_id: "ingest" for t in threading.enumerate() if t.name.startswith("tracekit-ingest")}
        tmp = self.kinds_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({str(k): v for k, v in kinds.items()}))
        tmp.rename(self.kinds_file)

    def keep(self) -> None:
        while not self.done.wait(0.03):
            self.write_kinds()

    def finish(self) -> collections.Counter:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        self.stop.touch()
        self.proc.wait()
        return collections.Counter(json.loads(self.out.read_text()))

    @staticmethod
    def report(out: collections.Counter, lock: set[str]) -> None:
        mine = {k.split("|", 1)[1]: v for k, v in out.items() if k.startswith("ingest|")}
        total = sum(mine.values()) or 1
        running = mine.pop("running", 0)
        words = [int(k.split()[1], 16) for k in lock]

        def of_lock(k: str) -> bool:  # a word of the lock's state (its condition variables, mutexes)
            return k.startswith("futex") and any(abs(int(k.split()[1], 16) - w) <= 48 for w in words)

        held = sum(v for k, v in mine.items() if of_lock(k))
        other = sorted(((v, k) for k, v in mine.items() if not of_lock(k)), reverse=True)[:4]
        print(f"   ingest threads ({total} samples): running {running / total:.0%}, waiting for the interpreter lock "
              f"{held / total:.0%}; else " + ", ".join(f"{k} {v / total:.0%}" for v, k in other))


def lock_futexes() -> set[str]:
    """The futex words a thread sleeps in while it waits for the interpreter lock: a
    thread asks for it in a loop while this one holds it in pure Python for 0.3 s."""
    stop = threading.Event()

    def waiter() -> None:
        while not stop.is_set():
            time.sleep(0)

    th = threading.Thread(target=waiter)
    th.start()
    sampler = Sampler(Path(tempfile.mkdtemp(prefix="tracekit-lock-")), {th.native_id: "ingest"})
    end, x = time.perf_counter() + 0.3, 0
    while time.perf_counter() < end:
        for i in range(5000):
            x += i
    stop.set()
    th.join()
    seen = {k.split("|", 1)[1]: v for k, v in sampler.finish().items() if k.startswith("ingest|")}
    lock = {k for k, v in seen.items() if k.startswith("futex") and v >= 0.05 * sum(seen.values())}
    print(f"   the interpreter lock's futex words: {', '.join(sorted(lock)) or 'not found'}")
    return lock


def _warm(file: str) -> None:
    """A pool process's start: imports and one ingest (not timed)."""
    tk = tracekit.open(Path(tempfile.mkdtemp(prefix="tracekit-warm-")) / "w.duckdb")
    tk.ingest(file)
    tk.close()


def _own_store(job: tuple[list[str], int, str]) -> float:
    files, threads, work = job
    t = time.process_time()
    tk = tracekit.open(Path(tempfile.mkdtemp(dir=work)) / "s.duckdb")
    tk.con.execute(f"SET threads = {threads}")
    for f in files:
        tk.ingest(f)
    tk.close()
    return time.process_time() - t


def _prepare(job: tuple[str, str]):
    from tracekit import staging
    return staging.prepare(job[0], workdir=job[1], threads=1)


def processes(files: list[Path], counts: list[int], serial: float, work: Path) -> None:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tracekit", "tracekit.store", "tracekit.ingest.nsys", "duckdb", "pyarrow", "numpy"])
    names = [str(f) for f in files]
    for p in counts:
        threads = max(1, (os.cpu_count() or 1) // p)
        with ctx.Pool(p, initializer=_warm, initargs=(names[-1],)) as pool:
            pool.map(time.sleep, [0.3] * p, chunksize=1)  # every process up and warm
            for _ in range(2):
                t = time.perf_counter()
                used = pool.map(_own_store, [(names[i::p], threads, str(work)) for i in range(p)], chunksize=1)
                dt = time.perf_counter() - t
                print(f"{len(files)} files, {p} processes, a store each, DuckDB threads {threads}: {dt:.2f} s  "
                      f"CPU {sum(used):.2f} s (in the processes)   -> {serial / dt:.2f}x", flush=True)


def land_in_threads(con, staged: list, tables: list[str], k: int) -> None:
    """Land ``staged`` into the store of ``con`` by ``k`` threads, a cursor and a
    transaction each."""
    todo, lock = list(enumerate(staged)), threading.Lock()

    def lander() -> None:
        cur = con.cursor()
        while True:
            with lock:
                if not todo:
                    return
                i, st = todo.pop(0)
            cur.execute(f"ATTACH '{st.db}' AS s{i} (READ_ONLY)")
            cur.execute("BEGIN")
            rid = cur.execute("SELECT nextval('run_id_seq')").fetchall()[0][0]
            cur.execute(f"INSERT INTO runs BY NAME SELECT * REPLACE ({rid}::INTEGER AS run_id) FROM s{i}.runs")
            for table in tables:
                cur.execute(f'INSERT INTO "{table}" BY NAME SELECT * REPLACE ({rid}::INTEGER AS run_id) '
                            f'FROM s{i}."{table}"')
            cur.execute("COMMIT")
            cur.execute(f"DETACH s{i}")

    landers = [threading.Thread(target=lander) for _ in range(k)]
    for th in landers:
        th.start()
    for th in landers:
        th.join()


def landings(files: list[Path], counts: list[int], work: Path) -> None:
    from tracekit import staging
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(min(len(files), os.cpu_count() or 1)) as pool:
        staged = pool.map(_prepare, [(str(f), str(work)) for f in files], chunksize=1)
    try:
        for k in counts:
            db = work / f"landed{k}.duckdb"
            tk = tracekit.open(db)
            con = tk.con  # a new store: the schema only
            con.execute(f"ATTACH '{staged[0].db}' AS probe (READ_ONLY)")
            tables = staging.run_tables(con, "probe")
            con.execute("DETACH probe")
            t, c = time.perf_counter(), cpu()
            land_in_threads(con, staged, tables, k)
            dt = time.perf_counter() - t
            print(f"{len(files)} prepared runs landed by {k} threads: {dt:.2f} s  CPU {cpu() - c:.2f} s", flush=True)
            Stores.done(tk, db)
    finally:
        for st in staged:
            st.discard()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--copies", type=int, default=6, help="replicas of the fixture per export (6 -> ~0.47 M rows)")
    ap.add_argument("--lock-files", type=int, default=6, help="files of the serial ingest the watcher follows")
    ap.add_argument("--workers", default="8,16", help="thread counts, comma-separated")
    ap.add_argument("--waits", action="store_true", help="sample where the ingest threads wait")
    ap.add_argument("--processes", default="", help="process counts, comma-separated (none: skip)")
    ap.add_argument("--landings", default="", help="lander thread counts, comma-separated (none: skip)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a DuckDB setting for every store opened")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tracekit-threads-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    files, _ = make_exports(work, args.files, args.copies)
    stores = Stores(work, args.set)
    tk, db = stores.open()  # warm-up: imports, first DuckDB instance
    tk.ingest(files[-1])
    Stores.done(tk, db)
    if args.lock_files:
        lock_held(stores, files[:args.lock_files])
    serial = threads(stores, files, [int(w) for w in args.workers.split(",") if w], args.waits)
    if args.processes:
        processes(files, [int(p) for p in args.processes.split(",")], serial, work)
    if args.landings:
        landings(files, [int(k) for k in args.landings.split(",")], work)


if __name__ == "__main__":
    main()

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

``--set NAME=VALUE`` applies a DuckDB setting to every store opened (e.g.
``block_allocator_memory=2GB``: DuckDB keeps that much of its freed blocks for reuse instead
of giving them back to the system and faulting fresh pages in for the next file);
``--lock-files 0`` skips the lock measurement.

Usage: python benchmarks/ingest_threads_bench.py [--files 16] [--copies 6] [--lock-files 6] [--workers 8,16]
       [--set NAME=VALUE ...] [--workdir DIR]
Results go to stdout; record them in docs/performance.md.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
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


def threads(stores: Stores, files: list[Path], workers: list[int]) -> None:
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
    finally:
        sys.setswitchinterval(default)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--copies", type=int, default=6, help="replicas of the fixture per export (6 -> ~0.47 M rows)")
    ap.add_argument("--lock-files", type=int, default=6, help="files of the serial ingest the watcher follows")
    ap.add_argument("--workers", default="8,16", help="thread counts, comma-separated")
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
    threads(stores, files, [int(w) for w in args.workers.split(",")])


if __name__ == "__main__":
    main()

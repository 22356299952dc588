"""Two multi-rank jobs compared rank by rank (tracekit.job_diff, `tracekit diff --jobs`), on
the real captures tests/data/nsys_jobs: one 4-rank program taken three times on the H200,
base, base_again (the same program again: the noise) and after (backward given 40 layers
instead of 32 on every rank, the straggler moved from rank 2 to rank 1; PLANT.md), and missed
(base's program again, rank 3's capture window on a host-only range after its GPU work).
Expectations come from NVIDIA's `nsys stats` CSVs (the kernel instances per rank in
plant.json) and from the per-step range durations the fixture's script read from the exports."""

from __future__ import annotations

import json
import lzma
import re
import shutil
import statistics
import warnings
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit import compare, job_diff
from tracekit import diff as D
from tracekit.cli import main
from tracekit.errors import CaptureWarning, ParamError, QueryError
from tracekit.names import ranks_text

DATA = Path(__file__).parent / "data" / "nsys_jobs"
PLANT = json.loads((DATA / "plant.json").read_text())
JOBS = ("base", "base_again", "after")
PER_STEP = {j: json.loads((DATA / j / "plant.json").read_text())["observed_per_step"]["duration_ns"] for j in JOBS}
OTHER = Path(__file__).parent / "data" / "nsys_hstu_mixed" / "export.sqlite.xz"  # a run without a rank
GPU_SCOPES = ("kernel", "gpu", "memcpy")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The three jobs (runs 1-4, 5-8, 9-12: ranks 0-3 each) and a run without a rank (13)."""
    db = tmp_path_factory.mktemp("jobs") / "jobs.duckdb"
    with tracekit.open(db) as tk:
        for j in JOBS:
            for r in range(4):
                tk.ingest(DATA / j / f"rank{r}" / "export.sqlite.xz")
        tk.ingest(OTHER)
    return db


@pytest.fixture(scope="module")
def tk(store):
    with tracekit.open(store, read_only=True) as tk:
        yield tk
    _ANSWERS.clear()  # (``_once``'s answers of this store go with it)


def _several_jobs(tmp_path: Path) -> tuple[Path, str]:
    """A folder of four one-rank jobs, which is no job, and the error that says so: a/, b/ and
    c/ hold missed's ranks 1-3 (rank 3's capture missed its GPU work: its ingest warns), d/ a
    copy of base's rank 0, the run a store that holds base's rank 0 holds already (and keeps)."""
    folder = tmp_path / "several"
    for job, (src, r) in zip("abcd", (("missed", 1), ("missed", 2), ("missed", 3), ("base", 0)), strict=True):
        (folder / job / f"rank{r}").mkdir(parents=True)
        shutil.copy(DATA / src / f"rank{r}" / "export.sqlite.xz", folder / job / f"rank{r}")
    return folder, (rf"diff --jobs: {folder}: its 4 exports are ranks of 4 jobs \(.*/rank\*/export, "
                    r".*/rank\*/export, \.\.\.\); give the folder of one job")


def _first(j: str) -> str:
    return str(1 + 4 * JOBS.index(j))


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (these jobs have the same ranks and setup: nothing to say)
        return fn(*args, **kw)


#: the module store's answers asked through ``_once``, by (function, arguments)
_ANSWERS: dict = {}


def _once(fn, *args, **kw):
    """``_quiet(fn, *args, **kw)`` of the module's read-only store (``fn`` one of its methods, or
    a function given it), asked once for the module: several tests check the same comparison
    (diff_jobs 5 9 in seven), each on the answer the first asked. The answers are polars
    DataFrames, which no test changes; calls that pass a callback, expect a warning or an error,
    or run with a function replaced ask ``tk`` themselves."""
    def hashable(v):
        return tuple(v) if isinstance(v, list) else v

    key = (fn, *map(hashable, args), *sorted((k, hashable(v)) for k, v in kw.items()))
    if key not in _ANSWERS:
        _ANSWERS[key] = _quiet(fn, *args, **kw)
    return _ANSWERS[key]


def test_the_same_program_again_changes_nothing_on_the_gpu(tk):
    """base against base_again: no kernel, memory operation, GPU busy time or NVTX kernel
    time moved beyond diff's rules on any rank, while the job's step time (its slowest
    rank's, host-timed) moved by tens of per cent with a tiny p-value: reported, not judged."""
    df = _once(tk.diff_jobs, _first("base"), _first("base_again"))
    assert df.columns == job_diff.COLUMNS
    assert df.filter(pl.col("verdict") != "unchanged").is_empty()
    assert set(df["scope"]) == {"job", "kernel", "nvtx", "api", "memcpy", "gpu"}
    step = df.filter((pl.col("scope") == "job") & (pl.col("key") == "step") & (pl.col("metric") == "job_med_ns")).row(
        0, named=True)
    expect = [statistics.median(max(PER_STEP[j][f"rank{r}"]["step"][i] for r in range(4)) for i in range(20))
              for j in ("base", "base_again")]
    assert (step["base"], step["new"]) == (expect[0], expect[1])
    assert abs(step["delta_pct"]) > 25 and step["note"].startswith("host-timed, not judged; p=")
    # the GEMMs and tanh, most of the GPU's time, agree within 3 % on every rank (the tiny kernels
    # move by up to 7 %, within the rules: not significant or immaterial)
    heavy = df.filter((pl.col("scope") == "kernel") & (pl.col("metric") == "total_ns")).sort("base").tail(3)
    assert heavy["rank_delta_pct_max"].max() < 3 and heavy["rank_delta_pct_min"].min() > -3


def test_the_planted_changes_are_found_on_their_ranks(tk):
    """base_again against after: the backward kernels (x1.25 instances on every rank, by
    NVIDIA's counts) regressed on 4 of 4 ranks; the forward kernels regressed on rank 1 (the
    new straggler, x1.5) and improved on rank 2 (the old one, x2/3), the job's total about
    level: the job's verdict is the harm, the note says where. The job's instances are the
    ranks' NVIDIA counts summed."""
    df = _once(tk.diff_jobs, _first("base_again"), _first("after"))
    counts = PLANT["nsys_stats_kernel_instances"]
    rows = {r["key"]: r for r in df.filter((pl.col("scope") == "kernel") & (pl.col("metric") == "instances"))
            .iter_rows(named=True)}
    backward = forward = 0
    for name in counts["after"]["rank0"]:
        r = rows[name]
        assert (r["base"], r["new"]) == tuple(float(sum(counts[j][f"rank{k}"][name] for k in range(4)))
                                              for j in ("base_again", "after"))
        ratio = {k: counts["after"][f"rank{k}"][name] / counts["base_again"][f"rank{k}"][name] for k in range(4)}
        if set(ratio.values()) == {1.25}:  # backward's GEMM and tanh
            backward += 1
            assert (r["verdict"], r["ranks_regressed"], r["ranks_improved"]) == ("regressed", 4, 0)
            assert r["note"] == "" and r["rank_delta_pct_min"] == r["rank_delta_pct_max"] == 25.0
        elif ratio == {0: 1.0, 1: 1.5, 2: 2 / 3, 3: 1.0}:  # forward's GEMM and ReLU
            forward += 1
            assert (r["verdict"], r["ranks_regressed"], r["ranks_improved"], r["top_rank"]) == ("regressed", 1, 1, 1)
            assert r["base"] == r["new"]
            assert r["note"] == ("regressed on rank 1 (+50.0 %); improved on rank 2 (-33.3 %); unchanged on ranks 0, 3 "
                                 "(identical)")
        else:
            assert set(ratio.values()) == {1.0} and r["verdict"] == "unchanged"
    assert (backward, forward) == (2, 2)
    busy = df.filter(pl.col("scope") == "gpu").row(0, named=True)  # rank 2: +25 % backward, -33 % forward
    assert (busy["verdict"], busy["ranks_regressed"], busy["ranks"]) == ("regressed", 3, 4)
    assert busy["note"].startswith("regressed on ranks 0-1, 3 (") and busy["note"].endswith("unchanged on rank 2 (within threshold)")
    assert df["scope"].head(df.filter(pl.col("scope") == "job").height).to_list() == ["job"] * df.filter(
        pl.col("scope") == "job").height  # (the job's rows first)
    # a key's rows together, in diff's order of metrics
    keys = df.select(pl.concat_str("scope", "key")).to_series().to_list()
    assert all(keys.index(k) + keys.count(k) - 1 == len(keys) - 1 - keys[::-1].index(k) for k in set(keys))
    nvtx = df.filter((pl.col("scope") == "nvtx") & (pl.col("key") == "step"))["metric"].to_list()
    assert nvtx == ["kernel_total_ns", "proj_total_ns", "range_total_ns", "range_med_ns", "instances"]
    # ranks held for different reasons say each (the figures left to --per-rank)
    warm = df.filter((pl.col("scope") == "kernel") & (pl.col("metric") == "med_ns")
                     & (pl.col("verdict") == "unchanged"))["note"].to_list()
    assert any(n.startswith("unchanged on ") and "), rank" in n for n in warm), warm


def test_the_jobs_time_is_its_slowest_ranks_and_the_straggler_moved(tk):
    """The job scope: per NVTX path and step, the slowest rank's duration (from the
    exports, read by the fixture's script): job_med_ns their median, job_total_ns their sum;
    slowest_rank the rank slowest in most steps, 2 -> 1 in step/forward, said first."""
    df = _once(tk.diff_jobs, _first("base_again"), _first("after"))
    job = {(r["key"], r["metric"]): r for r in df.filter(pl.col("scope") == "job").iter_rows(named=True)}
    for path, name in (("step", "step"), ("step/forward", "forward"), ("step/exchange", "exchange"),
                       ("step/backward", "backward")):
        per = {j: [max(PER_STEP[j][f"rank{r}"][name][i] for r in range(4)) for i in range(20)]
               for j in ("base_again", "after")}
        med, total = job[(path, "job_med_ns")], job[(path, "job_total_ns")]
        assert (med["base"], med["new"]) == (statistics.median(per["base_again"]), statistics.median(per["after"]))
        assert (total["base"], total["new"]) == (sum(per["base_again"]), sum(per["after"]))
        assert med["verdict"] == "unchanged" and "host-timed, not judged" in med["note"]
    slowest = job[("step/forward", "slowest_rank")]
    steps = {j: sum(max(range(4), key=lambda r: PER_STEP[j][f"rank{r}"]["forward"][i]) == k for i in range(20))
             for j, k in (("base_again", 2), ("after", 1))}
    assert (slowest["base"], slowest["new"]) == (2.0, 1.0)
    assert slowest["note"] == (f"the slowest in {steps['base_again']} of 20 instances -> {steps['after']} of 20; "
                               "differs; a rank has no better/worse direction: not judged")
    # a table shows it, and the host-timed rows, as not judged, not as unchanged (the CSV keeps unchanged)
    shown = dict(zip(zip(df["key"], df["metric"], strict=True), job_diff.display(df)["verdict"], strict=True))
    assert shown[("step/forward", "slowest_rank")] == shown[("step/forward", "job_med_ns")] == "not judged"
    # step: ranks tie as the slowest in most steps, other ranks on each side: the lowest shown, the tie said
    tied = {}
    for j in ("base_again", "after"):
        counts = [sum(max(range(4), key=lambda r: PER_STEP[j][f"rank{r}"]["step"][i]) == k for i in range(20))
                  for k in range(4)]
        tied[j] = [k for k in range(4) if counts[k] == max(counts)]
    assert len(tied["base_again"]) > 1 and len(tied["after"]) > 1 and tied["base_again"] != tied["after"]
    step = job[("step", "slowest_rank")]
    assert (step["base"], step["new"]) == (tied["base_again"][0], tied["after"][0])
    assert f"; {ranks_text(tied['base_again'])} tied in the base; {ranks_text(tied['after'])} tied in the new; " \
           "differs; " in step["note"], step["note"]
    assert shown[("step", "slowest_rank")] == "not judged"
    lines = job_diff.moved(df)
    assert lines[0] == (f"Slowest rank of step/forward: rank 2 (in {steps['base_again']} of 20 instances) -> rank 1 "
                        f"(in {steps['after']} of 20)")
    # every line of the ranks' values says they are the ranks' sum, not only the first (GPU busy):
    # the kernel time's is 4 ranks' too
    ranks = [line for line in lines if not line.startswith(("Slowest rank of ", "Job time "))]
    assert [line.split(":")[0].split(" +")[0] for line in ranks] == ["GPU busy, device 0", "Kernel time"]
    assert all(line.endswith(" (summed over the job's 4 ranks)") for line in ranks), ranks



def test_what_moved_names_each_kernel_apart_as_the_table_does(tk):
    """Three kernels of the jobs shorten alike to ``at::native::vectorized_elementwise_kernel``:
    tanh's, 25 % more launches in the heavier backward, and two others. What moved names tanh's
    as the table does, told apart from the others, not by the name they all shorten to."""
    df = _once(tk.diff_jobs, _first("base"), _first("after"))
    alike = {k for k in df.filter(pl.col("scope") == "kernel")["key"] if "vectorized_elementwise_kernel" in k}
    (tanh,) = [k for k in alike if "tanh" in k]
    assert len(alike) == 3
    table = dict(zip(df["key"], job_diff.display(df)["key"], strict=True))
    assert "[tanh]" in table[tanh] and table[tanh] not in {table[k] for k in alike - {tanh}}
    line = next(line for line in job_diff.moved(df) if line.startswith("Kernel time"))
    assert f"; {table[tanh]} +" in line, line

def test_what_moved_says_a_median_wall_time_is_the_median_ranks():
    """Jobs that traced no CUDA are judged on NVTX wall time: a path's total is the ranks' sum,
    its median the median rank's, and what moved says which (a hand-made job's rows: no fixture
    job without CUDA changed)."""
    def row(key: str, metric: str, base: float, new: float) -> dict:
        return {**dict.fromkeys(job_diff.COLUMNS), "scope": "nvtx", "key": key, "metric": metric, "base": base,
                "new": new, "delta": new - base, "delta_pct": 100 * (new - base) / base, "verdict": "regressed",
                "ranks": 4, "ranks_regressed": 4, "note": ""}

    df = pl.DataFrame([row("step", "range_total_ns", 4e8, 6e8), row("step/io", "range_med_ns", 1e6, 2e6)],
                      schema=job_diff.SCHEMA, orient="row")
    assert job_diff.moved(df) == [
        "NVTX wall time: step total +200.000 ms (+50.0 %, regressed) (summed over the job's 4 ranks)",
        "NVTX wall time: step/io median +1.000 ms (+100.0 %, regressed) (the median rank's of the job's 4)"]


def test_the_jobs_sampled_cpu_time_is_its_ranks_sum():
    """A path's sampled CPU time (cpu_ns) is time in all, as a function's (self_ns) is: the
    job's is its ranks' sum, not the median rank's (a hand-made pair of ranks' rows: no fixture
    job sampled the CPU)."""
    def row(rank: int, metric: str, base: float, new: float) -> dict:
        return {**dict.fromkeys(D.SCHEMA), "scope": "nvtx" if metric == "cpu_ns" else "cpu", "key": "step",
                "metric": metric, "base": base, "new": new, "delta": new - base,
                "delta_pct": 100 * (new - base) / base, "verdict": "unchanged", "note": "", "rank": rank}

    long = pl.DataFrame([row(r, m, b, n) for m in ("cpu_ns", "self_ns") for r, b, n in ((0, 10e6, 12e6), (1, 30e6, 31e6))],
                        schema={**D.SCHEMA, "rank": pl.Int64}, orient="row")
    got = {r["metric"]: (r["base"], r["new"]) for r in job_diff.aggregate(long).iter_rows(named=True)}
    assert got == {"cpu_ns": (40e6, 43e6), "self_ns": (40e6, 43e6)}


def test_per_rank_rows_are_each_ranks_own_diff(tk):
    """--per-rank: each rank's diff rows with its rank; rank 1's forward GEMM, NVIDIA's
    counts, regressed there and on no other rank."""
    seen = []
    per = _quiet(tk.diff_jobs, _first("base_again"), _first("after"), per_rank=True,
                 on_rank=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # (what a progress bar is told)
    for rank in range(4):
        own = tk.diff(str(5 + rank), str(9 + rank), by=["kernel", "nvtx", "api", "memcpy", "gpu"])
        assert per.filter(pl.col("rank") == rank).drop("rank").equals(own)
    counts = PLANT["nsys_stats_kernel_instances"]
    gemm = next(k for k in counts["after"]["rank1"] if k.endswith("_NNT"))
    rows = per.filter((pl.col("key") == gemm) & (pl.col("metric") == "instances")).sort("rank")
    assert rows["base"].to_list() == [float(counts["base_again"][f"rank{k}"][gemm]) for k in range(4)]
    assert rows["new"].to_list() == [float(counts["after"][f"rank{k}"][gemm]) for k in range(4)]
    assert rows["verdict"].to_list() == ["unchanged", "regressed", "improved", "unchanged"]


def test_a_job_is_named_by_any_rank_or_by_itself(tk):
    job = tk.sql("SELECT DISTINCT job FROM rank_runs WHERE run_id = 9")["job"][0]
    by_id = _quiet(tk.diff_jobs, "5", "12", by="kernel,gpu")
    assert by_id.equals(_quiet(tk.diff_jobs, "base_again/rank3/export", job, by=["kernel", "gpu"]))
    assert set(by_id["scope"]) == {"kernel", "gpu"}
    only = _quiet(tk.diff_jobs, "5", "9", by="job")
    assert set(only["scope"]) == {"job"} and only.height == 3 * 8  # 8 NVTX paths


def test_ranks_in_one_job_only_are_said_and_left_out(tmp_path):
    """A job of two ranks (after's ranks 0 and 1, ingested as job 'half') against a job of
    four: ranks 2-3 named in a warning, the two shared ranks compared."""
    with tracekit.open(tmp_path / "half.duckdb") as tk:
        for r in range(4):
            tk.ingest(DATA / "base_again" / f"rank{r}" / "export.sqlite.xz")
        for r in (0, 1):
            tk.ingest(DATA / "after" / f"rank{r}" / "export.sqlite.xz", params={"rank": r, "job": "half"},
                      name=f"half-r{r}")
        with pytest.warns(CaptureWarning, match=r"^diff --jobs: ranks 2-3 of the base job \(.*base_again.*\) not in "
                                                r"the other: left out of the ranks' comparison$"):
            df = tk.diff_jobs("1", "half", by="kernel")
    assert set(df["ranks"]) == {2}


MISSED = json.loads((DATA / "missed" / "plant.json").read_text())


def _noted(fn, *args, **kw) -> tuple[object, list[str]]:
    """``fn``'s answer and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fn(*args, **kw)
    return got, [str(w.message) for w in caught]


def test_a_rank_only_the_repeat_has_is_left_out_and_one_it_lacks_goes_without_a_noise(tmp_path, capsys):
    """base's ranks 0-2 against base_again's 0-3 with missed (0-3) as the repeat: rank 3 is the
    new and the repeat job's alone, left out of both comparisons; the other way round (base_again
    the base, base's three ranks the repeat), base_again's rank 3 is compared with the new job
    without a noise, as the warning says."""
    db = tmp_path / "r.duckdb"
    with tracekit.open(db) as tk:
        for j, ranks in (("base", range(3)), ("base_again", range(4)), ("missed", range(4))):
            for r in ranks:
                _noted(tk.ingest, DATA / j / f"rank{r}" / "export.sqlite.xz")  # (runs 1-3, 4-7, 8-11)
    capsys.readouterr()
    assert main(["--db", str(db), "diff", "--jobs", "1", "4", "--repeat", "8"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"tracekit: warning: diff --jobs: missed (a repeat of the base): rank 3 of the repeat job ({DATA.resolve()}"
        "/missed/rank*/export) not in the other: left out of the ranks' comparison",
        f"tracekit: warning: diff --jobs: rank 3 of the new job ({DATA.resolve()}/base_again/rank*/export) not in the "
        "other: left out of the ranks' comparison"], err
    assert main(["--db", str(db), "diff", "--jobs", "4", "8", "--repeat", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"tracekit: warning: diff --jobs: base (a repeat of the base): rank 3 of the base job "
                      f"({DATA.resolve()}/base_again/rank*/export) not in the other: no noise measured for it: its "
                      "changes are judged without the repeat's"), err


def test_a_rank_whose_capture_missed_its_gpu_work_is_said_and_left_out(tmp_path, capsys):
    """nsys_jobs/missed: base's program again, its rank 3 captured with the capture range on a
    host-only NVTX range after its GPU work (CUDA traced, none recorded). Against base, that
    rank's pair is left out, said in one line naming the rank and the job, either way round
    (not each kernel removed on rank 3 and the job's sums over one rank less on one side);
    the other ranks are base's program again: their kernels' instances are NVIDIA's sums over
    them, and nothing is judged a change. Two jobs that both missed a rank's work compare it
    (their windows alike), said once; where no pair is left, an error."""
    missed = MISSED["missed_rank"]
    rest = [r for r in range(MISSED["world_size"]) if r != missed]
    db = tmp_path / "m.duckdb"
    with tracekit.open(db) as tk:
        for j in ("base", "missed"):
            for r in range(4):
                _noted(tk.ingest, DATA / j / f"rank{r}" / "export.sqlite.xz")
        left_out = (f"diff --jobs: rank {missed} of the {{side}} job ({DATA.resolve()}/missed/rank*/export) holds no "
                    f"CUDA event at all (no API call, kernel or copy), though its capture traced CUDA: the capture's "
                    "window (nsys --delay, --duration, --capture-range) held none of the program's GPU work, or the "
                    "work ran in a process nsys did not follow: left out of the ranks' comparison")
        df, said = _noted(tk.diff_jobs, "1", "5")
        assert said == [left_out.format(side="new")]
        assert set(df["ranks"].drop_nulls()) == {len(rest)} and set(df["verdict"]) == {"unchanged"}
        kernels = df.filter((pl.col("scope") == "kernel") & (pl.col("metric") == "instances"))
        want = {j: sorted(sum(MISSED["nsys_stats_kernel_instances"][f"rank{r}"].get(k, 0) if j == "missed" else
                              PLANT["nsys_stats_kernel_instances"]["base"][f"rank{r}"].get(k, 0) for r in rest)
                          for k in PLANT["nsys_stats_kernel_instances"]["base"]["rank0"]) for j in ("base", "missed")}
        assert sorted(kernels["base"].cast(int)) == want["base"] and sorted(kernels["new"].cast(int)) == want["missed"]
        per_rank, said = _noted(tk.diff_jobs, "5", "1", per_rank=True)
        assert said == [left_out.format(side="base")] and set(per_rank["rank"]) == set(rest)
        # a comparison of no scope of CUDA's events keeps the rank, as diff says nothing of it there
        nvtx, said = _noted(tk.diff_jobs, "1", "5", by="nvtx", per_rank=True)
        assert said == [] and set(nvtx["rank"]) == set(range(MISSED["world_size"]))
        # both jobs missed rank 3's work: compared, said once for the job (not a line per rank's run)
        _, said = _noted(tk.diff_jobs, "5", "5")
        assert said == [f"diff --jobs: rank {missed} of both jobs hold no CUDA event at all (no API call, kernel or "
                        "copy), though their captures traced CUDA: their windows (nsys --delay, --duration, "
                        "--capture-range) held none of the program's GPU work, or the work ran in processes nsys did "
                        "not follow; their kernels, CUDA API calls, copies and GPU time are compared as none"]
    assert main(["--db", str(db), "diff", "--jobs", "1", "5"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == ["tracekit: warning: " + left_out.format(side="new")]
    # the job as a repeat of the base (the noise of base_again's change): its rank 3 left out of it, said so
    with tracekit.open(db) as tk:
        for r in range(4):
            _noted(tk.ingest, DATA / "base_again" / f"rank{r}" / "export.sqlite.xz")
    assert main(["--db", str(db), "diff", "--jobs", "1", "9", "--repeat", "5"]) == 0
    out, err = capsys.readouterr()
    # (base's program again: the repeat's noise held nothing, as the count line says, not "no change")
    assert any(line.endswith("; no change was within the repeats' noise") for line in out.splitlines()), out
    assert err.splitlines() == ["tracekit: warning: diff --jobs: missed (a repeat of the base): "
                                + left_out.format(side="repeat").removeprefix("diff --jobs: ").replace(
                                    "left out of the ranks' comparison",
                                    "no noise measured for it: its changes are judged without the repeat's")]
    # the base job's rank 3 missed the work: left out of both comparisons (no "judged without"),
    # said once, of the base job, as both said it
    assert main(["--db", str(db), "diff", "--jobs", "5", "9", "--repeat", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"tracekit: warning: diff --jobs: rank {missed} of the base job ") \
        and err[0].endswith(": left out of the ranks' comparison"), err
    from tracekit.compare import jobs_with_repeats

    with tracekit.open(db) as tk:  # (rank 3 is still compared, without a noise; the others with theirs)
        _, ranks = _noted(jobs_with_repeats, tk, "1", "9", ["5"])[0]
    assert set(ranks["rank"]) == set(range(4))
    assert ranks.filter(pl.col("rank") == missed)["noise_pct"].is_null().all()
    assert ranks.filter(pl.col("rank") != missed)["noise_pct"].is_not_null().any()
    # jobs of that rank alone: nothing left to compare
    with tracekit.open(tmp_path / "lone.duckdb") as tk:
        for j in ("base", "missed"):
            _noted(tk.ingest, DATA / j / f"rank{missed}" / "export.sqlite.xz")
        with pytest.raises(QueryError, match=rf"^diff --jobs: no rank pair left to compare: rank {missed} of the new "
                                             r"job holds no CUDA event at all .*, and its namesake holds CUDA events; "
                                             r"capture it again with a window that holds the GPU work$"):
            _noted(tk.diff_jobs, "1", "2")


def test_a_job_captured_again_is_a_job_of_its_own(tmp_path):
    """One job (params job) captured twice and ingested, the later capture first: two jobs,
    numbered in the order ingested, whose comparison is that of the same captures given jobs
    of their own. A first capture of some ranks and a second of all stay apart (a capture is
    the runs that ran at the same time). The same capture ingested again (other content, the
    same session) takes its rank's place in its job: naming its earlier run is an error that
    says so, not a comparison of the later run with itself."""
    from conftest import captured_again

    db = tmp_path / "again.duckdb"
    apart = tmp_path / "apart.duckdb"
    with tracekit.open(db) as tk, tracekit.open(apart) as other:
        for j in ("after", "base_again"):  # (after was captured 43 s after base_again)
            for r in range(2):
                f = DATA / j / f"rank{r}" / "export.sqlite.xz"
                tk.ingest(f, params={"rank": r, "job": "prof"})
                other.ingest(f, params={"rank": r, "job": j})
        jobs = tk.query("jobs")
        assert jobs.select("job", "ranks", "runs").rows() == [("prof", 2, 2), ("prof#2", 2, 2)]
        assert tk.con.execute("SELECT job, list(run_id ORDER BY rank) FROM rank_runs GROUP BY 1 ORDER BY 1"
                              ).fetchall() == [("prof", [1, 2]), ("prof#2", [3, 4])]
        names = dict(tk.con.execute("SELECT run_id, name FROM runs").fetchall())
        for a, b in (("prof#2", "prof"), ("3", "1"), (names[4], "2")):
            got = _quiet(tk.diff_jobs, a, b, by="kernel")
            want = _quiet(other.diff_jobs, "base_again", "after", by="kernel")
            assert got.height > 0 and got.equals(want), (a, b)
        assert tk.query("rank-summary", run="1")["run_id"].to_list() == [1, 2]
        assert tk.query("rank-summary", run="4")["run_id"].to_list() == [3, 4]
        for r in range(2, 4):  # the rest of after's ranks, ingested later: its capture's
            tk.ingest(DATA / "after" / f"rank{r}" / "export.sqlite.xz", params={"rank": r, "job": "prof"})
        assert tk.con.execute("SELECT job, list(run_id ORDER BY rank) FROM rank_runs GROUP BY 1 ORDER BY 1"
                              ).fetchall() == [("prof", [1, 2, 5, 6]), ("prof#2", [3, 4])]
        again = captured_again(DATA / "base_again" / "rank1" / "export.sqlite.xz", tmp_path / "rank1" / "x.sqlite")
        assert tk.ingest(again, params={"rank": 1, "job": "prof"}).run_id == 7
        assert tk.con.execute("SELECT job, list(run_id ORDER BY rank) FROM rank_runs GROUP BY 1 ORDER BY 1"
                              ).fetchall() == [("prof", [1, 2, 5, 6]), ("prof#2", [3, 7])]
        with pytest.raises(QueryError, match=r"^diff --jobs: run 4 \(.*\) is rank 1 of job prof#2, whose rank 1 is "
                                             r"now run 7, the same capture ingested later; name the job by run 7, or "
                                             r"remove run 4 \(tracekit runs rm 4\)$"):
            tk.diff_jobs("4", "1")
        with pytest.raises(ParamError, match=r"^--param job='prof#2': a job named JOB#N is the N-th capture"):
            tk.ingest(DATA / "base" / "rank0" / "export.sqlite.xz", params={"rank": 0, "job": "prof#2"})
        for blank in ("", " "):  # (a job of every rank given a blank name)
            with pytest.raises(ParamError, match=rf"^--param job='{blank}': an empty job name; name the job"):
                tk.ingest(DATA / "base" / "rank0" / "export.sqlite.xz", params={"rank": 0, "job": blank})
    partial = tmp_path / "partial.duckdb"
    with tracekit.open(partial) as tk:  # rank 0 and 1 of base, then all of after: two jobs, whole
        for j, ranks in (("base", (0, 1)), ("after", (0, 1, 2, 3))):
            for r in ranks:
                tk.ingest(DATA / j / f"rank{r}" / "export.sqlite.xz", params={"rank": r, "job": "k"})
        assert tk.con.execute("SELECT job, list(run_id ORDER BY rank) FROM rank_runs GROUP BY 1 ORDER BY 1"
                              ).fetchall() == [("k", [1, 2]), ("k#2", [3, 4, 5, 6])]
    with tracekit.open(db) as tk:  # a numeric job id that is also a run id
        tk.ingest(DATA / "base" / "rank0" / "export.sqlite.xz", params={"rank": 0, "job": "2"})
        tk.ingest(DATA / "base" / "rank1" / "export.sqlite.xz", params={"rank": 1, "job": "2"})
        with pytest.raises(QueryError, match="'2' is both a job and run 2"):
            tk.diff_jobs("2", "3")


def test_the_job_scope_of_runs_without_nvtx_ranges_is_an_error(tmp_path):
    """--by job of jobs whose ranks traced no NVTX (nsys -t cuda): an error naming the run,
    not a table of ranges added or nothing."""
    cuda_only = Path(__file__).parent / "data" / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz"
    with tracekit.open(tmp_path / "cuda.duckdb") as tk:
        tk.ingest(DATA / "base" / "rank0" / "export.sqlite.xz", params={"rank": 0, "job": "a"})
        tk.ingest(cuda_only, params={"rank": 1, "job": "a"})
        tk.ingest(DATA / "after" / "rank0" / "export.sqlite.xz", params={"rank": 0, "job": "b"})
        tk.ingest(DATA / "after" / "rank1" / "export.sqlite.xz", params={"rank": 1, "job": "b"})
        with pytest.raises(QueryError, match=r"^diff --jobs: rank 1: --by nvtx: run 2 \(.*\) \[nsys without NVTX "
                                             r"trace\] has no nvtx scope"):
            tk.diff_jobs("a", "b", by="job")
        assert "job" not in set(tk.diff_jobs("a", "b", by="kernel")["scope"])


def test_what_cannot_be_compared_is_one_line(store, tk, capsys):
    with pytest.raises(QueryError, match=r"^diff --jobs: run 13 \(nsys_hstu_mixed/export\) has no rank: ingest each"):
        tk.diff_jobs("13", "1")
    with pytest.raises(QueryError, match="no run or job 'nope'"):
        tk.diff_jobs("1", "nope")
    with pytest.raises(ParamError, match="--by 'ncu': choose from job, kernel, nvtx, api, memcpy, gpu, um, cpu, python, memory "
                                         r"\(a job is compared in the nsys scopes\)"):
        tk.diff_jobs("1", "5", by="ncu")
    with pytest.raises(ParamError, match="--threshold 0: must be a positive percentage"):
        tk.diff_jobs("1", "5", by="job", threshold_pct=0)
    before = store.read_bytes()
    for args, text in (
            (["--per-rank"], "--per-rank: compares jobs rank by rank; give --jobs too"),
            (["--jobs", "--by", "sweep"], "--by 'sweep': choose from job"),
            (["--jobs", "--by", "Job,NCU"], "--by 'NCU': choose from job, kernel, nvtx, api, memcpy, gpu, um, cpu, python, "
                                             "memory (a job is compared in the nsys scopes)"),
            (["--jobs", "--columns", "nope"], "nope"),
            (["--jobs", "--by", ""], "--by '': no scope in it")):
        assert main(["--db", str(store), "diff", "1", "5", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("tracekit: error: ") and text in err, err
    assert store.read_bytes() == before


def test_the_command_shows_the_job_and_gates(store, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["--db", str(store), "diff", "--jobs", "1", "5", "--gate"]) == 0  # the noise: nothing regressed
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [c for c in job_diff.DISPLAY]
    assert main(["--db", str(store), "diff", "--jobs", "5", "9", "--gate"]) == 1
    captured = capsys.readouterr()
    assert "tracekit: gate: " in captured.err
    lines = captured.out.splitlines()
    assert any(line.split()[:3] == ["gpu", "device", "0"] and "3/4" in line.split() for line in lines)
    assert "what moved:" in lines and any(line.strip().startswith("Slowest rank of step/forward: rank 2") for line in lines)
    out = tmp_path / "jobs.csv"
    assert main(["--db", str(store), "diff", "--jobs", "5", "9", "-o", str(out)]) == 0
    assert pl.read_csv(out).columns == job_diff.COLUMNS
    capsys.readouterr()
    assert main(["--db", str(store), "diff", "--jobs", "5", "9", "--per-rank", "-f", "json", "--limit", "3"]) == 0
    rows = json.loads(capsys.readouterr().out)  # (every change, as the table shows them: more than 3)
    assert main(["--db", str(store), "diff", "--jobs", "5", "9", "--per-rank", "-f", "json"]) == 0
    every = json.loads(capsys.readouterr().out)
    changed = [r for r in every if r["verdict"] != "unchanged"]
    assert len(changed) > 3 and rows == [r for r in every if r in changed] and {"rank", "p_value"} <= set(rows[0])
    assert main(["--db", str(store), "diff", "--jobs", "5", "9", "--per-rank", "--columns", "rank,key,delta_pct"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["rank", "key", "delta"]


def test_the_job_diff_chart_shows_each_ranks_change(tk, store, tmp_path, capsys):
    """chart job-diff: a cell per rank and key (the keys the job's comparison puts first:
    its changes), coloured by the rank's change, a dot on each rank judged changed; drawn in
    Chromium, every cell a mark, no console error."""
    from browser import chart_marks, chromium

    from tracekit import charts

    data = _quiet(job_diff.rank_changes, tk, "5", "9", limit=6)
    job = _once(tk.diff_jobs, "5", "9")
    heads = job.filter(pl.col("metric") == pl.col("scope").replace_strict(job_diff.HEADLINE, default=None))
    changed = heads.filter(pl.col("verdict") != "unchanged").select("scope", "key").rows()
    assert data.select("scope", "key").unique(maintain_order=True).rows() == changed[:6]
    assert data.group_by("scope", "key").len()["len"].to_list() == [4] * 6
    forward = data.filter((pl.col("scope") == "nvtx") & (pl.col("key") == "step/forward")).sort("rank")
    assert forward["verdict"].to_list() == ["unchanged", "regressed", "improved", "unchanged"]
    spec = charts.chart(tk, "job-diff", base="5", new="9", limit="6").to_dict()
    values = [row for rows in spec["datasets"].values() for row in rows] if "datasets" in spec else \
        spec["data"]["values"]
    assert len(values) == data.height and sum(v["judged"] for v in values) == data.filter(
        pl.col("verdict").is_in(["regressed", "improved"])).height
    # each key's axis label its own and whole within the axis's 260 px (the two nvjet GEMMs, NNT and
    # TNT, read alike where cut there)
    labels = {(v["key"], v["label"]) for v in values}
    assert len({k for k, _ in labels}) == len({lab for _, lab in labels}) == len(labels) == 6
    assert max(len(lab) for _, lab in labels) <= 44 and sum("nvjet" in lab for _, lab in labels) == 2
    with pytest.raises(ParamError, match="chart job-diff: give the jobs to compare as -p base=RUN -p new=RUN"):
        charts.chart(tk, "job-diff", base="5")
    assert main(["--db", str(store), "chart", "job-diff", "-p", "base=5", "-p", "new=9", "-p", "limit=x",
                 "-o", str(tmp_path / "x.html")]) == 2
    assert "chart job-diff: limit='x': an integer expected" in capsys.readouterr().err
    if chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
    out = tmp_path / "jobs.html"
    assert main(["--db", str(store), "chart", "job-diff", "-p", "base=5", "-p", "new=9", "-o", str(out)]) == 0
    page = chart_marks(out)
    drawn = _once(job_diff.rank_changes, tk, "5", "9")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.value["error"] is None
    assert page.value["marks"]["rect"] == drawn.height
    assert page.value["marks"]["symbol"] == drawn.filter(pl.col("verdict").is_in(["regressed", "improved"])).height


def test_a_report_of_a_rank_against_a_rank_of_another_job_compares_the_jobs(tk, tmp_path):
    """report --run R --vs B, R and B ranks of two jobs: after the runs' comparison, the jobs'
    (the table of diff_jobs, the job-diff chart), drawn in Chromium; two ranks of one job, or
    a run without a rank, get the runs' comparison alone."""
    from browser import COMPARISONS_OVERFLOW_JS, chromium, load

    from tracekit.report import build
    from tracekit.report import render as render_report

    rep = build(tk, "9", vs="5")
    keys = [sec.key for sec, *_ in rep.sections]
    assert keys[:2] == ["diff", "job-diff"]
    sec, table, spec, _ = rep.sections[1]
    job = _once(tk.diff_jobs, "5", "9")
    assert sec.title == "This job against run 5's" and "16 regressed" in sec.intro
    assert "Slowest rank of step/forward: rank 2" in sec.intro
    assert table.count('class="verdict v-regressed"') == job.filter(pl.col("verdict") == "regressed").height
    assert json.loads(spec)["title"]["text"] == "Job against job, per rank"
    assert "job-diff" not in [s.key for s, *_ in build(tk, "9", vs="10").sections]  # (one job's ranks)
    assert "job-diff" not in [s.key for s, *_ in build(tk, "9", vs="13").sections]  # (a run without a rank)
    if chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
    out = tmp_path / "r.html"
    out.write_text(render_report(rep), encoding="utf-8")  # (the page the report built above: not built again)
    page = load(out, "window.tracekitReport && window.tracekitReport.done",
                f"{{state: window.tracekitReport, overflow: {COMPARISONS_OVERFLOW_JS}}}")
    drawn = _once(job_diff.rank_changes, tk, "5", "9")
    state = page.value["state"]
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and state["failed"] == 0
    assert state["marks"]["chart-job-diff"] == drawn.height + drawn.filter(
        pl.col("verdict").is_in(["regressed", "improved"])).height
    assert page.value["overflow"] == []  # (the runs' and the jobs' tables fit 1,400 px)


def test_a_report_of_ranks_of_several_jobs_against_one_compares_the_jobs(tk, tmp_path):
    """report --vs B --run R --run S, each a rank of a job of several: after the runs'
    comparison, the jobs' (compare --jobs: its table, the compare chart of the jobs), each job
    once; repeats that are ranks of another job measure each rank's noise; runs that are not
    all ranks of other jobs get the runs' comparison alone; drawn in Chromium."""
    from browser import chromium, load
    from conftest import spec_datasets

    from tracekit import report
    from tracekit.report import build_many
    from tracekit.report import render as render_report

    rep = _quiet(build_many, tk, ["5", "9"], vs="1")
    keys = [sec.key for sec, *_ in rep.sections]
    assert keys[:3] == ["compare", "compare-jobs", "compare-timeline"]
    sec, table, spec, _ = rep.sections[1]
    got = _once(tk.compare, "1", ["5", "9"], jobs=True)
    assert sec.title == "These jobs against base" and "(up to 4 ranks; tracekit compare --jobs 1 5 9)" in sec.intro
    assert "; ".join(compare.counts(got)) in sec.intro and "after: 90 not judged, 55 unchanged, 16 regressed" in sec.intro
    for verdict in ("regressed", "improved"):
        assert table.count(f'class="verdict v-{verdict}"') == got.filter(pl.col("verdict") == verdict).height
    assert table.count('class="verdict v-regressed"') > 0
    drawn = [r for ds in spec_datasets(json.loads(spec)) for r in ds if "run" in r]
    assert json.loads(spec)["title"]["text"] == "Jobs against base" and {r["run"] for r in drawn} == {"base_again", "after"}
    # two ranks of one job are that job, once; a repeat that is a rank of another job measures its noise
    sec = _quiet(build_many, tk, ["9", "10"], vs="1", repeats=["6"]).sections[1][0]
    assert "tracekit compare --jobs 1 9 --repeat 6)" in sec.intro and "The job of run 6, the base's again" in sec.intro
    held = _quiet(tk.compare, "1", ["9"], repeats=["6"], jobs=True)
    mine = held.filter(~pl.col("repeat"))
    assert "; ".join(compare.counts(held)) in sec.intro and D.held_by_repeats(mine).removeprefix("; ") in sec.intro
    assert mine["noise_pct"].drop_nulls().len() > 0  # (the repeat's change, rank by rank, the noise of each key)
    # (the jobs' section alone, as the report above builds it: the runs' sections would be as above)
    sec = _quiet(report._jobs_compared, tk, [9, 10], 1, 5.0, ["13"])[0]  # (run 13: no rank)
    assert "compared without the repeats' noise: the repeats are not all ranks of a job of several" in sec.intro
    # a run, or the base, no rank of another job: no jobs' section (the report asks _other_job)
    assert "compare-jobs" not in [s.key for s, *_ in _quiet(build_many, tk, ["9", "13"], vs="1").sections]
    assert report._other_job(tk, [5, 9], "1") == 1
    for runs, vs in (([9, 13], "1"), ([2, 3], "1"), ([5, 9], "13")):
        assert report._other_job(tk, runs, vs) is None, (runs, vs)
    if chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
    out = tmp_path / "r.html"
    out.write_text(render_report(rep), encoding="utf-8")  # (the page the report built above: not built again)
    page = load(out, "window.tracekitReport && window.tracekitReport.done", "window.tracekitReport")
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.value["failed"] == 0
    assert page.value["marks"]["chart-compare-jobs"] >= len(drawn) > 0


def test_a_parquet_dataset_compares_the_jobs_as_the_store_does(tk, tmp_path):
    from tracekit.dataset import export

    export(tk, tmp_path / "ds")
    with tracekit.open(tmp_path / "ds") as ds:
        for kw in ({}, {"per_rank": True}):
            assert _quiet(ds.diff_jobs, "5", "9", **kw).equals(_once(tk.diff_jobs, "5", "9", **kw))


def test_a_rank_pair_that_fails_stops_the_comparison(tk, monkeypatch):
    """The pairs run in threads: one that raises stops the others and the error is the
    pair's own, raised here (not a hang, not a half table); the store reads on after it."""
    from tracekit import diff as _diff

    real = _diff.diff

    def failing(reader, base, new, **kw):
        if base == "7":  # rank 2 of base_again
            raise QueryError("rank 2 could not be compared")
        return real(reader, base, new, **kw)

    monkeypatch.setattr(_diff, "diff", failing)
    with pytest.raises(QueryError, match="^rank 2 could not be compared$"):
        tk.diff_jobs(_first("base_again"), _first("after"), by="kernel")
    monkeypatch.setattr(_diff, "diff", real)
    assert _quiet(tk.diff_jobs, _first("base_again"), _first("after"), by="kernel")["ranks"].max() == 4


def test_what_a_rank_pair_says_is_said_once_at_the_line_that_asked(tk, monkeypatch):
    """A warning of a rank pair's diff (said in its thread) is passed on once for the job, at
    the caller's line, not at the depth of tracekit where the pair ran."""
    from tracekit import diff as _diff

    real = _diff.diff

    def saying(reader, base, new, **kw):
        warnings.warn(CaptureWarning("diff: a rank pair's own warning"), stacklevel=2)
        return real(reader, base, new, **kw)

    monkeypatch.setattr(_diff, "diff", saying)
    with pytest.warns(CaptureWarning) as caught:
        tk.diff_jobs(_first("base_again"), _first("after"), by="kernel")
    assert [w.filename for w in caught if "own warning" in str(w.message)] == [__file__]


def test_ctrl_c_stops_the_rank_pairs_at_once(tk, monkeypatch):
    """Ctrl-C while the rank pairs run in their threads: each thread's statement stops (their
    connections are registered as the store's is) and the call raises KeyboardInterrupt in
    a moment, as a query does."""
    import os
    import signal
    import threading
    import time

    from tracekit import diff as _diff

    def slow(reader, base, new, **kw):  # a pair whose statement would run for minutes
        reader.con.execute("SELECT count(*) FROM range(5000000000) t(x) WHERE x % 7 = 3").fetchall()

    monkeypatch.setattr(_diff, "diff", slow)
    start = time.monotonic()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        tk.diff_jobs(_first("base_again"), _first("after"), by="kernel")
    assert time.monotonic() - start < 10


def test_jobs_without_cuda_judge_the_jobs_time(tk, tmp_path):
    """Jobs captured with nsys -t nvtx,osrt (the CPU-only program's captures as ranks: job a
    of 40 batches twice, job b of 60 batches and of 40 with host regressions): host time is
    the programs' own, so the job scope is judged, beyond the host noise (25 %), as a run's
    NVTX wall time is between runs without CUDA, and said first in what moved; rank 0's 20
    more batches are counted. Jobs that traced CUDA never say it (host-timed)."""
    data = Path(__file__).parent / "data"
    with tracekit.open(tmp_path / "cpu.duckdb") as cpu:
        for folder, rank, job in (("nsys_cpu_only", 0, "a"), ("nsys_cpu_only_again", 1, "a"),
                                  ("nsys_cpu_only_more", 0, "b"), ("nsys_cpu_only_slow", 1, "b")):
            cpu.ingest(data / folder / "export.sqlite.xz", params={"rank": rank, "job": job}, name=f"{job}-r{rank}")
        df = _quiet(cpu.diff_jobs, "a", "b")
    job = df.filter(pl.col("scope") == "job")
    assert set(df["scope"]) == {"job", "nvtx"} and not job.is_empty()
    assert not job["note"].str.contains("host-timed").any()
    request = job.filter((pl.col("key") == "request") & (pl.col("metric") == "job_total_ns")).row(0, named=True)
    assert request["verdict"] == "regressed" and request["note"].startswith("instances 40 -> 60; ")
    batches = df.filter((pl.col("scope") == "nvtx") & (pl.col("key") == "batch") & (pl.col("metric") == "instances"))
    assert batches.row(0, named=True)["note"] == "regressed on rank 0 (+50.0 %); unchanged on rank 1 (identical)"
    said = job_diff.moved(df)[0]
    assert said.startswith("Job time (the slowest rank's, instance by instance): ") and "request total +" in said
    assert not any(line.startswith("Job time") for line in job_diff.moved(_once(tk.diff_jobs, "5", "9")))


def test_a_job_is_named_by_its_path_as_its_exports_were_given_here(tk, monkeypatch):
    """A job's default name is its ranks' path with the rank masked, made absolute at ingest:
    named as a user gave the exports, relative to where they are (``base/rank*/export``), it is
    that job; a path of no job is the error naming it as given."""
    monkeypatch.chdir(DATA)
    job = job_diff.job_of(tk, "base/rank*/export", "base")
    assert job == job_diff.job_of(tk, "1", "base") and job.name == str(DATA.resolve() / "base" / "rank*" / "export")
    assert job.ranks == [(0, 1), (1, 2), (2, 3), (3, 4)]
    with pytest.raises(QueryError, match=r"^diff --jobs: no run or job 'nope/rank\*/export' in "):
        job_diff.job_of(tk, "nope/rank*/export", "new")


def test_a_job_is_named_by_the_folder_of_its_exports(tk, tmp_path, capsys, monkeypatch):
    """diff --jobs FOLDER FOLDER: each folder's exports ingested first (one per rank, in
    rank* subfolders here), then compared as the jobs named in the store are; again on the
    same store, nothing new is ingested. A folder that is not one job's leaves the store as
    it was, with one line."""
    db = tmp_path / "f.duckdb"
    with tracekit.open(db) as mine:
        got = _quiet(mine.diff_jobs, DATA / "base_again", str(DATA / "after"))
        assert got.equals(_once(tk.diff_jobs, "5", "9"))
        assert mine.runs().height == 8
        assert _quiet(mine.diff_jobs, str(DATA / "base_again"), "after/rank0/export").equals(got)
        assert mine.runs().height == 8
        # a folder holding some of a job's ranks is those ranks, whichever comparison takes it
        one = _quiet(mine.diff_jobs, DATA / "base_again" / "rank0", DATA / "after" / "rank0", by="gpu")
        for repeat in ([], [DATA / "base" / "rank0"]):
            side = _quiet(mine.compare, DATA / "base_again" / "rank0", [DATA / "after" / "rank0"], by="gpu",
                          jobs=True, repeats=repeat).filter(~pl.col("repeat"))
            assert side["ranks"].to_list() == one["ranks"].to_list() == [1] and side["value"].equals(one["new"])
        three = tmp_path / "after3"  # (after's ranks 0-2: compared over the base's ranks 0-2)
        for r in range(3):
            (three / f"rank{r}").mkdir(parents=True)
            shutil.copy(DATA / "after" / f"rank{r}" / "export.sqlite.xz", three / f"rank{r}")
        with pytest.warns(CaptureWarning, match="rank 3 of the base job"):
            both = mine.compare(DATA / "base_again", [DATA / "after", three], by="gpu", jobs=True)
        assert mine.runs().height == 9  # (the base's rank 0 ingested above; after3's ranks are after's runs)
        assert both["base"].n_unique() == 2
        row = compare.wide(both).row(0, named=True)
        after, after3 = compare.runs_of(both)  # (labels: the folders, less the path parts they share)
        assert row[f"{both['base_run'][0]} (base)"] == "(by run)"
        assert row[after].startswith("21.414 ms -> 24.537 ms (+14.6%")
        assert row[after3].startswith("16.") and " -> " in row[after3] and after3.endswith("after3")
    before = db.read_bytes()
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["--db", str(db), "diff", "--jobs", str(DATA / "base_again"), str(DATA / "after"), "--gate"]) == 1
    out = capsys.readouterr().out
    assert "16 regressed" in out and "Slowest rank of step/forward: rank 2" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    several = _several_jobs(tmp_path)
    for base, text in (
            several,
            (OTHER.parent, rf"diff --jobs: {OTHER.parent}: its export has no rank \({OTHER}\); name each rank's "),
            (empty, rf"diff --jobs: {empty}: no nsys export below it \(.sqlite, .nsys-rep, compressed or not\): "
                    "nothing to compare")):
        assert main(["--db", str(db), "diff", "--jobs", str(base), "1"]) == 2
        err = capsys.readouterr().err  # (one line: not the warning of missed/rank3's ingest, a run removed again)
        assert err.count("\n") == 1 and re.match("tracekit: error: " + text, err), err
        assert db.read_bytes() == before
    assert main(["--db", str(tmp_path / "new.duckdb"), "diff", "--jobs", str(several[0]), "1"]) == 2
    assert not (tmp_path / "new.duckdb").exists()  # (the store the command created, left empty)
    with tracekit.open(db, read_only=True) as ro, pytest.raises(
            QueryError, match=rf"^diff --jobs: {DATA / 'base'}: a job's exports are ingested first, and .* is open "
                              "read-only"):
        ro.diff_jobs(DATA / "base", "1")


def test_a_folder_with_a_rank_twice_is_no_job(tmp_path):
    """rank0 and rank00 name rank 0 of one job (the path with the rank masked is the job):
    a folder holding two captures of rank 0 holds two jobs (the second, #2), and one capture
    of rank 0 twice (other content, the same session) is rank 0 twice, and a copy of rank 0's
    export as rank 1's is rank 0's capture again; each is refused, naming them."""
    from conftest import captured_again

    for folder, src in (("rank0", "base"), ("rank00", "after"), ("rank1", "base")):
        (tmp_path / "job" / folder).mkdir(parents=True)
        shutil.copy(DATA / src / f"rank{folder[-1]}" / "export.sqlite.xz", tmp_path / "job" / folder)
    twice = tmp_path / "twice"
    for folder in ("rank0", "rank1"):
        (twice / folder).mkdir(parents=True)
        shutil.copy(DATA / "base" / folder / "export.sqlite.xz", twice / folder)
    plain = captured_again(DATA / "base" / "rank0" / "export.sqlite.xz", tmp_path / "again.sqlite")
    (twice / "rank00").mkdir()
    (twice / "rank00" / "export.sqlite.xz").write_bytes(lzma.compress(plain.read_bytes()))
    with tracekit.open(tmp_path / "t.duckdb") as tk:
        tk.ingest(OTHER)
        with pytest.raises(QueryError, match=r"^diff --jobs: .*/job: its 3 exports are ranks of 2 jobs "
                                             r"\(.*/job/rank\*/export, .*/job/rank\*/export#2\); "
                                             "give the folder of one job$"):
            tk.diff_jobs(tmp_path / "job", "1")
        assert tk.runs().height == 1
        with pytest.raises(QueryError, match=r"^diff --jobs: .*/twice: rank 0 of its job is 2 of its exports "
                                             r"\(.*/twice/rank0/export.sqlite.xz, .*/twice/rank00/export.sqlite.xz\): "
                                             "give a folder with one export per rank$"):
            tk.diff_jobs(twice, "1")
        assert tk.runs().height == 1
        # a byte copy of rank 0's export as rank 1's is rank 0's capture again, one run: the job
        # would lack rank 1 without a word (the other job's rank 1 "not in the base job")
        copy = tmp_path / "copy"
        for folder in ("rank0", "rank1"):
            (copy / folder).mkdir(parents=True)
            shutil.copy(DATA / "base" / "rank0" / "export.sqlite.xz", copy / folder)
        with pytest.raises(QueryError, match=r"^diff --jobs: .*/copy/rank1/export.sqlite.xz holds the same export as "
                                             r".*/copy/rank0/export.sqlite.xz \(run \d+, rank 0\): a copy is that "
                                             "capture again, not a rank of its own; give a folder with each rank's "
                                             "own export$"):
            tk.diff_jobs(copy, "1")
        assert tk.runs().height == 1


def test_a_job_folder_reads_an_export_rather_than_its_report(tmp_path):
    """Where nsys's report lies beside its SQLite export (x.nsys-rep, x.sqlite), the export
    stands for the capture; a report alone is read; anything else is not an nsys export."""
    for name in ("rank0/prof.nsys-rep", "rank0/prof.sqlite", "rank1/prof.nsys-rep", "rank2/prof.sqlite.xz",
                 "rank2/prof.nsys-rep.gz", "rank3/prof.ncu-rep", "rank3/notes.txt", "rank3/a.sqlite-wal"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    assert [str(p.relative_to(tmp_path)) for p in job_diff.job_exports(tmp_path)] == [
        "rank0/prof.sqlite", "rank1/prof.nsys-rep", "rank2/prof.sqlite.xz"]


def test_a_report_vs_a_file_that_is_a_rank_of_another_job_compares_the_jobs(tmp_path):
    """report --run R --vs FILE, FILE a rank of a job whose other ranks are in the store: its
    run is not committed while the report is built, and the jobs' ranks are compared in the
    report's own connection (other connections do not see that run)."""
    from tracekit.report import build

    with tracekit.open(tmp_path / "r.duckdb") as tk:
        for r in range(4):
            tk.ingest(DATA / "base_again" / f"rank{r}" / "export.sqlite.xz")
        for r in (1, 2, 3):
            tk.ingest(DATA / "after" / f"rank{r}" / "export.sqlite.xz")
        with tk.one_transaction():
            rep = build(tk, "1", vs=str(DATA / "after" / "rank0" / "export.sqlite.xz"))
        keys = [sec.key for sec, *_ in rep.sections]
        assert keys[:2] == ["diff", "job-diff"] and "tracekit diff --jobs 8 1" in rep.sections[1][0].intro


def test_compare_jobs_puts_each_job_against_the_base_side_by_side(tk, store, capsys, monkeypatch):
    """compare --jobs BASE JOB JOB: each job's rows are diff --jobs BASE JOB's; the columns
    are named by what the jobs' names do not share (base, base_again, after); a narrow table
    wraps a job's cell, never cuts it."""
    got = _once(tk.compare, "1", ["5", "9"], jobs=True)
    assert got.columns == compare.JOB_COLUMNS
    assert compare.runs_of(got) == ["base_again", "after"] and set(got["base_run"]) == {"base"}
    for run, new in (("base_again", "5"), ("after", "9")):
        mine = got.filter(pl.col("run") == run).drop("base_run", "run", "repeat", "noise_pct").rename({"value": "new"})
        alone = _once(tk.diff_jobs, "1", new)
        assert mine.sort("scope", "key", "metric").equals(alone.select(mine.columns).sort("scope", "key", "metric"))
    # a terminal too narrow for a job's cells wraps them, never cuts them: at 120 columns they
    # read as at 400 on one line ('1,512 (+0.0%, regressed o…' lost how many ranks moved)
    from tracekit.table import render

    def cells(width: int) -> list[list[str]]:
        lines = render(compare.table(got, 30), width=width).splitlines()[:-1]
        rule = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "})
        spans = [m.span() for m in re.finditer(r"-+", lines[rule])]
        rows: list[list[str]] = []
        for line in lines[rule + 1:]:
            parts = [line[a:b + 2].strip() for a, b in spans]
            if parts[0]:
                rows.append(parts)
            else:  # (a wrapped cell's next line)
                rows[-1] = [f"{c} {p}".strip() for c, p in zip(rows[-1], parts, strict=True)]
        return rows

    wrapped, whole = cells(120), cells(400)
    assert len(wrapped) == len(whole) >= 10 and [r[-2:] for r in wrapped] == [r[-2:] for r in whole]
    assert max(map(len, render(compare.table(got, 30), width=120).splitlines())) <= 120
    assert any(row[-1].startswith("1,512 (+0.0%, regressed on 1/4") for row in whole), whole
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["--db", str(store), "compare", "--jobs", "1", "5", "9", "--gate"]) == 1
    out = capsys.readouterr().out
    head = out.splitlines()[0].split()
    assert head == ["scope", "key", "metric", "base", "(base)", "base_again", "after"]
    line = next(x for x in out.splitlines() if x.split()[:3] == ["gpu", "device", "0"])
    assert line.endswith("(+14.9%, regressed on 3/4 ranks)")
    assert main(["--db", str(store), "compare", "--jobs", "1", "5", "6"]) == 2  # (run 6: rank 1 of run 5's job)
    err = capsys.readouterr().err
    assert re.fullmatch(r"tracekit: error: compare: '6' is job .*base_again/rank\*/export, given twice; "
                        r"name each job once\n", err), err


def test_a_change_that_rounds_to_zero_reads_plus_zero(tk, store, capsys, monkeypatch):
    """rank 3 of base against base_again: GPU busy 5.145 -> 5.143 ms is -0.04 %, which reads
    +0.0% (its note keeps two decimals, -0.04%); no table of a comparison, of runs or of jobs,
    shows -0.0."""
    monkeypatch.setenv("COLUMNS", "250")
    outs = []
    for args in (["diff", "4", "8"], ["diff", "--jobs", "1", "5"], ["compare", "4", "8", "12"]):
        assert main(["--db", str(store), *args, "--limit", "0"]) == 0, args
        outs.append(capsys.readouterr().out)
    busy = next(line for line in outs[0].splitlines() if line.split()[:3] == ["gpu", "device", "0"])
    assert " +0.0% " in busy and "(|-0.04%| <= 5%)" in busy, busy
    assert all(not re.search(r"-0\.0(?![0-9])", out) for out in outs), [
        line for out in outs for line in out.splitlines() if re.search(r"-0\.0(?![0-9])", line)]


def test_a_repeat_of_the_base_job_holds_each_ranks_change_within_its_noise(tk):
    """diff --jobs BASE NEW --repeat R: the repeat's change of a key on rank r is the noise
    of rank r's change (exactly as diff --repeat judges run r against run r), and the job's
    row is made from its ranks': the ranks held are counted as unchanged. after -> base with
    base_again as the repeat (its change from after is base's, give or take the noise): many
    ranks' changes are held. base -> after with the true repeat holds no planted change."""
    got = _once(tk.diff_jobs, "9", "1", repeats=["5"])
    assert got.columns == [*job_diff.COLUMNS, "noise_pct"]
    noted = pl.col("note").str.contains(compare.NOISE_NOTE, literal=True)
    held = got.filter(noted & (pl.col("verdict") == "unchanged"))  # (every rank's change held)
    assert held.height >= 5 and got.filter(noted & (pl.col("verdict") == "improved")).height >= 5
    per_rank = {}
    for r in range(4):
        one = _once(tk.diff, str(9 + r), str(1 + r), repeats=[str(5 + r)])
        for row in one.iter_rows(named=True):
            per_rank.setdefault((row["scope"], row["key"], row["metric"]), []).append(row)
    ranked = got.filter(pl.col("scope") != "job")
    assert ranked.height == len(per_rank)
    for row in ranked.iter_rows(named=True):
        ranks = per_rank[(row["scope"], row["key"], row["metric"])]
        for verdict in ("regressed", "improved", "added", "removed"):
            assert row[f"ranks_{verdict}"] == sum(x["verdict"] == verdict for x in ranks), (row, verdict)
        noise = [x["noise_pct"] for x in ranks if x["noise_pct"] is not None]
        assert row["noise_pct"] == (max(noise) if noise else None)
    plain = _once(tk.diff_jobs, "1", "9")
    repeated = _quiet(tk.diff_jobs, "1", "9", repeats=["5"])
    assert repeated.select(plain.columns).equals(plain)


def test_the_command_shows_a_repeats_noise(store, tk, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["--db", str(store), "diff", "--jobs", "9", "1", "--repeat", "5"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["scope", "key", "metric", "base", "new", "delta", "noise", "verdict", "ranks",
                                           "top_rank", "note"]
    held = _once(tk.diff_jobs, "9", "1", repeats=["5"]).filter(
        pl.col("note").str.contains(compare.NOISE_NOTE, literal=True) & (pl.col("verdict") == "unchanged")).height
    assert f"; {held} change(s) within the repeats' noise, not judged" in out
    assert main(["--db", str(store), "diff", "--jobs", "9", "1", "--repeat", "5", "--per-rank", "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:8] == ["rank", "scope", "key", "metric", "base", "new", "delta", "noise"]
    long = _once(tk.diff_jobs, "9", "1", repeats=["5"], per_rank=True)
    held = long.filter(pl.col("note").str.contains(compare.NOISE_NOTE, literal=True)
                       & (pl.col("verdict") == "unchanged")).height
    assert held > 0 and f"; {held} change(s) within the repeats' noise, not judged" in out


def test_repeats_of_the_base_job_hold_the_ranks_rows_the_chart_and_the_report(tk):
    """diff --jobs --per-rank --repeat: rank r's rows are exactly diff --repeat's of rank r
    (after -> base, base_again as the "repeat": many held); chart job-diff -p repeats= draws
    them, a dot where a rank is still judged; report --vs --repeat compares the jobs with the
    repeat's job too, as diff --jobs --repeat does, and says so; a repeat that is no rank of a
    job leaves the jobs compared without it, said in the section."""
    from conftest import spec_datasets

    from tracekit import charts, diff
    from tracekit.report import _job_comparison, build

    keys = ["scope", "key", "metric"]
    long = _once(tk.diff_jobs, "9", "1", repeats=["5"], per_rank=True)
    assert long.columns == [*diff.SCHEMA, "rank", "noise_pct"]
    for r in range(4):
        one = _once(tk.diff, str(9 + r), str(1 + r), repeats=[str(5 + r)])
        mine = long.filter(pl.col("rank") == r).drop("rank")
        assert mine.height == one.height and mine.sort(keys).equals(one.sort(keys)), r
    judged = pl.col("verdict").is_in(["regressed", "improved"])
    spec = _quiet(charts.chart, tk, "job-diff", base="9", new="1", repeats="5", limit="0").to_dict()
    plain = _quiet(charts.chart, tk, "job-diff", base="9", new="1", limit="0").to_dict()
    drawn, before = ([row for ds in spec_datasets(sp) for row in ds] for sp in (spec, plain))
    heads = long.filter(pl.col("metric") == pl.col("scope").replace_strict(job_diff.HEADLINE, default=None))
    assert len(drawn) == heads.height and sum(v["judged"] for v in drawn) == heads.filter(judged).height
    assert sum(v["judged"] for v in drawn) < sum(v["judged"] for v in before)
    rep = _quiet(build, tk, "1", vs="9", repeats=["5"])
    sec, table, _, _ = next(s for s in rep.sections if s[0].key == "job-diff")
    job = _once(tk.diff_jobs, "9", "1", repeats=["5"])
    assert "tracekit diff --jobs 9 1 --repeat 5" in sec.intro and "measured the noise rank by rank" in sec.intro
    for verdict in ("regressed", "improved"):
        assert table.count(f'class="verdict v-{verdict}"') == job.filter(pl.col("verdict") == verdict).height
    assert job.filter(judged).height < _quiet(tk.diff_jobs, "9", "1").filter(judged).height
    # the report's job section alone (build's: report --run 1 --vs 9 --repeat ...)
    sec = _quiet(_job_comparison, tk, 1, 9, 5.0, ["13"])[0]  # (run 13: no rank)
    assert ("The jobs are compared without the repeats' noise: the repeats are not all ranks of a job of several ("
            in sec.intro and "--repeat" not in sec.intro)
    # two ranks of the repeat job are that job, once; a rank of a job compared is no repeat of it
    sec = _quiet(_job_comparison, tk, 1, 9, 5.0, ["6", "5"])[0]
    assert "tracekit diff --jobs 9 1 --repeat 6)" in sec.intro and "The job of run 6, the base's again" in sec.intro
    sec = _quiet(_job_comparison, tk, 1, 9, 5.0, ["2"])[0]
    assert "without the repeats' noise: the repeats are ranks of the jobs compared" in sec.intro


def test_the_compare_chart_draws_each_jobs_change(tk, store, tmp_path, capsys):
    """chart compare -p jobs=true: a bar per job and key, its change the job's row of compare
    --jobs (the ranks' sum), solid where some rank was judged; drawn in Chromium."""
    from browser import chart_marks, chromium
    from conftest import spec_datasets

    from tracekit import charts

    got = _quiet(tk.compare, "1", ["5", "9"], by="kernel", jobs=True)
    spec = _quiet(charts.chart, tk, "compare", base="1", runs="5,9", by="kernel", jobs="true").to_dict()
    rows = [r for ds in spec_datasets(spec) for r in ds if "run" in r]
    want = {(r["key"], r["run"]): r for r in got.filter(pl.col("metric") == "total_ns").iter_rows(named=True)}
    assert {r["run"] for r in rows} == {"base_again", "after"} and len(rows) == len(want)
    for r in rows:
        w = want[(r["key"], r["run"])]
        assert r["delta_pct"] == pytest.approx(w["delta_pct"]) and r["judged"] == (w["verdict"] in ("regressed", "improved"))
    assert sum(r["judged"] for r in rows) == 4 and spec["title"]["text"] == "Jobs against base"
    with pytest.raises(ParamError, match="chart compare: jobs=maybe: give true or false"):
        charts.chart(tk, "compare", base="1", runs="5", jobs="maybe")
    if chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; CI installs it)")
    out = tmp_path / "c.html"
    assert main(["--db", str(store), "chart", "compare", "-p", "base=1", "-p", "runs=5,9", "-p", "jobs=yes",
                 "-p", "by=kernel", "-o", str(out)]) == 0
    page = chart_marks(out)
    assert page.console_errors == [] and page.console_warnings == [] and page.exceptions == [] and page.value["error"] is None
    assert page.value["marks"]["rect"] == len(rows)


def test_an_ingest_of_another_capture_of_a_job_says_so(tmp_path, capsys):
    """The same folder captured again and ingested again (serially, or in threads): a line
    per job names its captures, each a job of its own in the order ingested, and how to
    compare the new one with the one before. The same capture ingested again (other content)
    takes the place of its runs, and a warning says so; the same files again, or a job of its
    own, say nothing."""
    from conftest import captured_again

    prof = tmp_path / "prof"

    def capture(job: str, again: bool = False) -> list[str]:
        for r in (0, 1):
            (prof / f"rank{r}").mkdir(parents=True, exist_ok=True)
            if again:
                plain = captured_again(DATA / job / f"rank{r}" / "export.sqlite.xz", tmp_path / f"{r}.sqlite")
                (prof / f"rank{r}" / "export.sqlite.xz").write_bytes(lzma.compress(plain.read_bytes()))
            else:
                shutil.copy(DATA / job / f"rank{r}" / "export.sqlite.xz", prof / f"rank{r}")
        return [str(prof / f"rank{r}" / "export.sqlite.xz") for r in (0, 1)]

    db = str(tmp_path / "s.duckdb")
    assert main(["--db", db, "ingest", *capture("base")]) == 0
    assert "tracekit:" not in capsys.readouterr().err
    job = re.escape(str(prof.resolve())) + r"/rank\*/export"
    said = rf"^tracekit: note: job {job}: captured {{}} times, each capture a job of its own, numbered in the " \
           r"order ingested: {}; `tracekit diff --jobs {} {}` compares two\n$"
    assert main(["--db", db, "ingest", *capture("after")]) == 0
    err = capsys.readouterr().err
    assert re.match(said.format(2, r"runs 1-2 the job, runs 3-4 its #2 \(just ingested\)", 1, 3), err), err
    assert main(["--db", db, "ingest", *capture("base_again"), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert re.match(said.format(3, r"runs 1-2 the job, runs 3-4 its #2, runs 5-6 its #3 \(just ingested\)", 3, 5),
                    err), err
    with tracekit.open(db, read_only=True) as tk:
        assert tk.query("jobs")["ranks"].to_list() == [2, 2, 2]
        assert tk.query("rank-summary", run="3")["run_id"].to_list() == [3, 4]
    assert main(["--db", db, "ingest", *capture("base_again")]) == 0  # (already in the store)
    assert "tracekit:" not in capsys.readouterr().err
    assert main(["--db", db, "ingest", *capture("after", again=True)]) == 0  # the same capture, other content
    err = capsys.readouterr().err
    assert re.match(rf"^tracekit: warning: job {job}#2: ranks 0-1 ingested again from the same capture: "
                    r"runs 7-8 take the place of runs 3-4 in the job's views \(rank-summary, stragglers, "
                    r"diff --jobs\)\n$", err), err
    assert main(["--db", db, "ingest", *capture("base"), "--param", "job=before"]) == 2  # (its runs are there)
    capsys.readouterr()
    other = str(tmp_path / "o.duckdb")
    assert main(["--db", other, "ingest", *capture("base"), "--param", "job=before"]) == 0
    assert main(["--db", other, "ingest", *capture("after"), "--param", "job=after"]) == 0
    assert "tracekit:" not in capsys.readouterr().err


def _two_rank_jobs(tmp_path, base: str, new: str, again: str, by: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two 2-rank jobs of fixture captures, rank 0 ``base`` against ``new``, rank 1 the capture
    ``again`` in both (another copy of it in the new job); diff_jobs of them in scope ``by``, and
    per rank."""
    from conftest import NSYS_EXPORTS, captured_again

    with tracekit.open(tmp_path / "jobs.duckdb") as tk:
        copy = captured_again(NSYS_EXPORTS[again], tmp_path / "again.sqlite")
        for job, files in (("base", (NSYS_EXPORTS[base], NSYS_EXPORTS[again])), ("new", (NSYS_EXPORTS[new], copy))):
            for rank, path in enumerate(files):
                tk.ingest(path, name=f"{job}-r{rank}", params={"rank": rank, "job": job})
        return tk.diff_jobs("base", "new", by=by), tk.diff_jobs("base", "new", by=by, per_rank=True)


def test_unified_memory_page_faults_of_a_job(tmp_path):
    """Two 2-rank jobs made of the managed-memory captures: rank 0 prefetched in the new job
    (nsys_um_prefetch against nsys_um_faults), rank 1 the same capture in both (nsys_um_faults_again,
    another copy of it). The job's fault counts are the ranks' sums and its verdicts the
    ranks': CPU faults improved by rank 0 alone, the GPU's read and write faults removed from
    rank 0, its atomics unchanged."""
    df, per = _two_rank_jobs(tmp_path, "um_faults", "um_prefetch", "um_faults_again", "um")
    rows = {r["key"]: r for r in df.iter_rows(named=True)}
    cpu = rows["CPU page faults"]
    assert (cpu["base"], cpu["new"], cpu["verdict"], cpu["ranks_improved"], cpu["top_rank"]) == (874, 490, "improved", 1, 0)
    assert rows["GPU read page faults"]["verdict"] == "removed" and rows["GPU read page faults"]["ranks_removed"] == 1
    assert rows["GPU atomic page faults"]["verdict"] == "unchanged"
    for key, r in rows.items():  # (the job's value: the ranks' sum)
        ranks = per.filter(pl.col("key") == key)
        assert r["base"] == ranks["base"].fill_null(0).sum() and r["new"] == ranks["new"].fill_null(0).sum(), key
    assert set(per.filter(pl.col("rank") == 1)["verdict"]) == {"unchanged"}


def test_sampled_cpu_time_of_a_job(tmp_path):
    """Two 2-rank jobs made of the CPU-sampled captures: rank 0 with one host function doing 3x
    the work in the new job (nsys_cpu_hot_slow against nsys_cpu_hot), rank 1 the same capture in
    both (nsys_cpu_hot_again, another copy of it). pack_inputs' CPU time regresses on rank 0
    alone, the job's value the ranks' sum; nothing else in the cpu scope."""
    df, per = _two_rank_jobs(tmp_path, "cpu_hot", "cpu_hot_slow", "cpu_hot_again", "cpu")
    changed = df.filter(pl.col("verdict") != "unchanged")
    assert changed["key"].to_list() == ["pack_inputs(float, long)"]
    row = changed.row(0, named=True)
    assert (row["verdict"], row["ranks_regressed"], row["top_rank"]) == ("regressed", 1, 0)
    ranks = per.filter(pl.col("key") == "pack_inputs(float, long)")
    assert row["base"] == ranks["base"].sum() and row["new"] == ranks["new"].sum()
    assert set(per.filter(pl.col("rank") == 1)["verdict"]) == {"unchanged"}


def test_a_repeat_job_without_a_scope_leaves_its_rows_without_its_noise(tmp_path, capsys, monkeypatch):
    """Three 2-rank jobs of real captures: rank 0 the HSTU pipeline with its Python threads
    sampled (hstu_capture_python in base, _again in new) and without (hstu_capture_nsys in
    again, the repeat), rank 1 nsys_python_hot (_again, _again2). The repeat job measures the
    noise of the scopes all its ranks have: the python rows are judged without it, said once,
    naming the rank and what its capture did not trace; asked --by python alone, it measures
    nothing and the rows are those of the comparison without repeats. A job compared that
    lacks a scope asked is still an error; a --by naming no job scope is refused before any
    folder is read."""
    data = Path(__file__).parent / "data"
    db = tmp_path / "j.duckdb"
    with tracekit.open(db) as tk:
        for job, hstu, hot in (("base", "python", ""), ("new", "python_again", "_again"), ("again", "nsys", "_again2")):
            tk.ingest(data / f"hstu_capture_{hstu}", params={"rank": 0, "job": job})
            tk.ingest(data / f"nsys_python_hot{hot}" / "export.sqlite.xz", params={"rank": 1, "job": job})
    lacks = ("again (a repeat of the base): rank 0 [nsys,timing without Python sample trace] has no python scope: the "
             "python rows are judged without its noise")

    def said(caught) -> list[str]:
        return [str(w.message) for w in caught if "scope:" in str(w.message)]

    with tracekit.open(db, read_only=True) as tk:
        with pytest.warns(CaptureWarning) as caught:
            df = tk.diff_jobs("base", "new", repeats=["again"])
        assert said(caught) == [f"diff --jobs: {lacks}"]
        py = df.filter(pl.col("scope") == "python")
        assert py.height > 50 and py["noise_pct"].null_count() == py.height
        assert df.filter(pl.col("scope") == "kernel")["noise_pct"].drop_nulls().len() > 20
        with pytest.warns(CaptureWarning) as caught:
            got = tk.diff_jobs("base", "new", by="python", repeats=["again"])
        assert said(caught) == [f"diff --jobs: {lacks}"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureWarning)
            alone = tk.diff_jobs("base", "new", by="python")
        assert got.drop("noise_pct").equals(alone) and got["noise_pct"].null_count() == got.height
        with pytest.warns(CaptureWarning) as caught:
            both = tk.compare("base", ["new"], by=["kernel", "python"], repeats=["again"], jobs=True)
        assert said(caught) == [f"compare: {lacks}"]
        assert set(both.filter(pl.col("repeat"))["scope"]) == {"kernel"}
        assert both.filter(~pl.col("repeat") & (pl.col("scope") == "kernel"))["noise_pct"].drop_nulls().len() > 20
    capsys.readouterr()
    assert main(["--db", str(db), "diff", "--jobs", "base", "new", "--repeat", "again", "--by", "python"]) == 0
    out, err = capsys.readouterr()
    assert err.count(f"tracekit: warning: diff --jobs: {lacks}\n") == 1, err
    assert out.splitlines()[-1].endswith("; the repeats measured the noise of none of these rows"), out[-500:]
    assert main(["--db", str(db), "diff", "--jobs", "base", "again", "--by", "python"]) == 2
    assert "--by python: run " in capsys.readouterr().err

    def no_folder_read(folder):
        raise AssertionError(f"{folder} read")

    monkeypatch.setattr(job_diff, "job_exports", no_folder_read)
    assert main(["--db", str(db), "compare", "--jobs", str(DATA / "base"), str(DATA / "after"), "--by", "source"]) == 2
    assert capsys.readouterr().err == ("tracekit: error: --by 'source': choose from job, kernel, nvtx, api, memcpy, gpu, "
                                       "um, cpu, python, memory (a job is compared in the nsys scopes)\n")


def test_a_repeat_job_lacking_other_scopes_on_other_ranks_names_each(tmp_path):
    """The jobs of the test above, the repeat's rank 1 (nsys_python_hot_again2) planted as
    captured without NVTX (its run's record of what was traced, the one thing changed): the
    warning names each rank with the scopes it lacks (rank 1 the job and nvtx scopes, rank 0
    the python scope), and all their rows are judged without the repeat's noise, the kernels'
    with it."""
    import duckdb

    data = Path(__file__).parent / "data"
    db = tmp_path / "j.duckdb"
    with tracekit.open(db) as tk:
        for job, hstu, hot in (("base", "python", ""), ("new", "python_again", "_again"), ("again", "nsys", "_again2")):
            tk.ingest(data / f"hstu_capture_{hstu}", params={"rank": 0, "job": job})
            planted = tk.ingest(data / f"nsys_python_hot{hot}" / "export.sqlite.xz", params={"rank": 1, "job": job})
    with duckdb.connect(str(db)) as con:
        meta = json.loads(con.execute("SELECT meta FROM runs WHERE run_id = ?", [planted.run_id]).fetchall()[0][0])
        meta["traced"].remove("nvtx_ranges")
        con.execute("UPDATE runs SET meta = ? WHERE run_id = ?", [json.dumps(meta), planted.run_id])
    with tracekit.open(db, read_only=True) as tk, pytest.warns(CaptureWarning) as caught:
        df = tk.diff_jobs("base", "new", repeats=["again"])
    said = [str(w.message) for w in caught if "scope:" in str(w.message)]
    assert said == ["diff --jobs: again (a repeat of the base): rank 1 [nsys without NVTX trace] has no job or nvtx "
                    "scope; rank 0 [nsys,timing without Python sample trace] has no python scope: the job, nvtx "
                    "and python rows are judged without its noise"], said
    for scope in ("job", "nvtx", "python"):
        rows = df.filter(pl.col("scope") == scope)
        assert rows.height > 0 and rows["noise_pct"].null_count() == rows.height, scope
    assert df.filter(pl.col("scope") == "kernel")["noise_pct"].drop_nulls().len() > 10


def _snapshot(db: Path, tmp_path: Path) -> Path:
    snap = tmp_path / f"{db.stem}-before.duckdb"
    shutil.copy(db, snap)
    return snap


def test_copies_within_the_noise_of_identical_captures_are_not_judged(tk):
    """base against after (after changed backward's kernels, not the copies): rank 2's
    host-to-device copies 4.9 % faster at p = 0.003, as far as identical captures' copies are
    apart (base against base_again: up to 7.4 %), are unchanged, and so is the job's row
    (before: improved, on that rank alone)."""
    per = _quiet(tk.diff_jobs, _first("base"), _first("after"), by="memcpy", per_rank=True)
    h2d = per.filter((pl.col("key") == "[CUDA memcpy Host-to-Device]") & (pl.col("metric") == "total_ns")
                     & (pl.col("rank") == 2)).row(0, named=True)
    assert -5 < h2d["delta_pct"] < -4.8 and h2d["p_value"] < 0.01
    assert h2d["verdict"] == "unchanged" and h2d["note"].startswith("within the copy noise of identical captures")
    job = _quiet(tk.diff_jobs, _first("base"), _first("after"), by="memcpy")
    assert set(job["verdict"]) == {"unchanged"}
    again = _quiet(tk.diff_jobs, _first("base"), _first("base_again"), by="memcpy", per_rank=True)
    moved = again.filter(pl.col("metric").is_in(["total_ns", "med_ns"]))["delta_pct"].abs().max()
    assert 7 < moved < D.COPY_NOISE_PCT  # (the noise the floor is set from)


def test_ranks_on_another_device_leave_no_device_removed(tmp_path):
    """nsys_ranks against nsys_ranks_2gpu (the same 4-rank job, ranks 1 and 3 on a second
    GPU): device 0, which both jobs used, is not 'removed' (ranks 1 and 3 moved, the device
    did not go), its halved busy time not judged, while ranks 0 and 2, on it in both, judge
    it; device 1 is added. The other way round, the same with base and new swapped."""
    one, two = DATA.parent / "nsys_ranks", DATA.parent / "nsys_ranks_2gpu"
    with tracekit.open(tmp_path / "r.duckdb") as tk:
        for a, b, side in ((one, two, "new"), (two, one, "base")):
            df = _quiet(tk.diff_jobs, a, b, by="gpu")
            rows = {r["key"]: r for r in df.iter_rows(named=True)}
            dev0 = rows["device 0"]
            assert dev0["verdict"] == "unchanged" and abs(dev0["delta_pct"]) > 40, dev0
            assert dev0["note"].startswith(f"ranks 1, 3 on another device in the {side} job: the device's change not "
                                           "judged; unchanged on ranks 0, 2"), dev0["note"]
            assert rows["device 1"]["verdict"] == ("added" if side == "new" else "removed")
            assert job_diff.display(df.filter(pl.col("key") == "device 0"))["verdict"][0] == "not judged"


def test_two_ranks_of_one_job_warn_that_the_job_is_compared_with_itself(tk):
    with pytest.warns(CaptureWarning, match=r"^diff --jobs: 1 and 2 name one job \(.*\): it is compared with itself") \
            as seen:
        df = tk.diff_jobs("1", "2")
    assert [w.filename for w in seen] == [__file__]  # (the line that asked)
    assert set(df["verdict"]) == {"unchanged"}
    # the job's own rows are the job's on each side (each run on both sides: its instances not counted twice)
    job = df.filter(pl.col("scope") == "job")
    against = _quiet(tk.diff_jobs, "1", "5").filter(pl.col("scope") == "job")
    assert job.select("key", "metric", "base").sort("key", "metric").equals(
        against.filter(pl.col("key").is_in(job["key"].implode())).select("key", "metric", "base").sort("key", "metric"))
    assert (job["base"] == job["new"]).all()
    per_rank = [PER_STEP["base"][f"rank{r}"]["step"] for r in range(4)]
    slowest = [max(durs) for durs in zip(*per_rank, strict=True)]  # (each step as long as its slowest rank)
    rows = {r["metric"]: r for r in job.filter(pl.col("key") == "step").iter_rows(named=True)}
    assert rows["job_total_ns"]["base"] == sum(slowest) and rows["job_med_ns"]["base"] == statistics.median(slowest)
    assert f" of {len(slowest)} instances -> " in rows["slowest_rank"]["note"], rows["slowest_rank"]["note"]


def test_job_folders_ingested_in_threads_compare_as_one_after_another(tmp_path, capsys):
    """diff --jobs FOLDER FOLDER --workers 2: the exports ingested two at once, each run
    committed as it lands, the rank pairs compared in threads: the rows and the store of the
    exports ingested one after another in one transaction (diff, with a repeat, and compare
    --jobs); again on that store, nothing is ingested."""
    from _stores import assert_same_stores

    base, after = DATA / "base_again", DATA / "after"
    with tracekit.open(tmp_path / "s.duckdb") as one, tracekit.open(tmp_path / "t.duckdb") as two:
        want = _quiet(one.diff_jobs, base, after)
        landed = []
        assert _quiet(two.diff_jobs, base, after, workers=2, on_file=lambda *n: landed.append(n)).equals(want)
        assert landed == [(i, 8) for i in range(1, 9)]
        assert_same_stores(one.con, two.con)
        assert _quiet(two.diff_jobs, base, after, workers=2).equals(want) and two.runs().height == 8
        kw = {"repeats": [DATA / "base"]}
        assert _quiet(two.diff_jobs, base, after, workers=2, **kw).equals(_quiet(one.diff_jobs, base, after, **kw))
        assert_same_stores(one.con, two.con)
        side = _quiet(two.compare, DATA / "base", [base, after], jobs=True, workers=2)
        assert side.equals(_quiet(one.compare, DATA / "base", [base, after], jobs=True))
        # (runs of the store: nothing to ingest, the comparison as without workers)
        assert _quiet(two.compare, "1", ["5"], workers=2).equals(_quiet(two.compare, "1", ["5"]))
    for db, args in (("s.duckdb", ["1", "5"]), ("c.duckdb", [str(base), str(after), "--workers", "2"])):
        assert main(["--db", str(tmp_path / db), "diff", "--jobs", *args, "-f", "csv", "-o", str(tmp_path / f"{db}.csv")]) == 0
    assert (tmp_path / "s.duckdb.csv").read_bytes() == (tmp_path / "c.duckdb.csv").read_bytes()
    capsys.readouterr()
    for args, text in ((["diff", "1", "2", "--workers", "0"], "--workers 0: give at least 1 worker"),
                       (["compare", "1", "2", "--jobs", "--workers", "0"], "--workers 0: give at least 1 worker")):
        assert main(["--db", str(tmp_path / "c.duckdb"), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"tracekit: error: {text}"), err
        assert "--scheduler" not in err  # (an option of ingest's, not of a comparison's)


def test_a_comparison_in_threads_that_fails_removes_the_runs_it_ingested(tmp_path, capsys, monkeypatch):
    """With --workers, a folder's runs are committed as they land; a comparison that fails
    afterwards (a folder of three jobs), a file that fails (a truncated export) and Ctrl-C
    (while the files land, or while the ranks are compared) remove them again, with the
    names they brought: the store holds what it held, and a store the command created goes."""
    from _stores import assert_same_stores

    from tracekit import parallel
    from tracekit.errors import InputError, Interrupted

    db = tmp_path / "f.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "base" / "rank0" / "export.sqlite.xz")  # (a run it held before, whose names stay)
    snap = _snapshot(db, tmp_path)
    broken = tmp_path / "broken"
    for r in range(2):
        (broken / f"rank{r}").mkdir(parents=True)
    shutil.copy(DATA / "after" / "rank0" / "export.sqlite.xz", broken / "rank0")
    whole = lzma.decompress((DATA / "after" / "rank1" / "export.sqlite.xz").read_bytes())
    (broken / "rank1" / "export.sqlite").write_bytes(whole[: len(whole) // 2])

    def unchanged() -> None:
        with tracekit.open(db, read_only=True) as now, tracekit.open(snap, read_only=True) as was:
            assert_same_stores(now.con, was.con)

    for folder, text in (_several_jobs(tmp_path),
                         (broken, rf"{broken / 'rank1' / 'export.sqlite'}: ")):
        for store in (db, tmp_path / "new.duckdb"):
            assert main(["--db", str(store), "diff", "--jobs", str(folder), str(DATA / "after"), "--workers", "2"]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and re.match("tracekit: error: " + re.escape(text) if folder == broken
                                                     else "tracekit: error: " + text, err), err
        unchanged()
        assert not (tmp_path / "new.duckdb").exists()

    real = parallel.ingest_many

    def stopped_after_landing(*args, **kw):
        real(*args, **kw)
        raise Interrupted("interrupted; 8 of 8 files are in the store")

    def stopped_comparing(*args, **kw):
        raise KeyboardInterrupt

    for where, fake in ((parallel, "ingest_many"), (job_diff, "diff_jobs")):
        with monkeypatch.context() as m:
            m.setattr(where, fake, stopped_after_landing if fake == "ingest_many" else stopped_comparing)
            with tracekit.open(db) as tk, pytest.raises(
                    Interrupted, match=r"^interrupted; the store holds what it held \(the runs this comparison "
                                       r"ingested are removed\)$"):
                tk.diff_jobs(DATA / "base_again", DATA / "after", workers=2)
        unchanged()
    with tracekit.open(db) as tk, pytest.raises(InputError, match=r"/broken/rank0/export.sqlite.xz: not a recognised "
                                                                r"profile .*\(and 1 more of the 3 files\)$"):
        (broken / "rank0" / "export.sqlite.xz").write_bytes(b"not an export")
        tk.diff_jobs(broken, DATA / "after" / "rank0", workers=2)
    unchanged()

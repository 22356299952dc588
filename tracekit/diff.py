"""Compare two runs, or two sweeps: ``tk.diff(base, new)`` -> one row per (scope, key, metric).

Scopes: ``kernel`` (per kernel: total_ns, instances, med_ns), ``nvtx`` (per NVTX path:
kernel_total_ns, proj_total_ns, range_total_ns, range_med_ns, instances), ``api`` (per CUDA
API: total_ns, calls, med_ns), ``memcpy`` (per memory operation: total_ns, count, med_ns),
``gpu`` (per device: busy_ns), ``um`` (Unified Memory page faults, CPU and GPU by access type:
faults), ``cpu`` (per function, from nsys's CPU samples: self_ns, the CPU time in the function
itself), ``memory`` (GPU memory, nsys --cuda-memory-usage: per device and kind of memory
peak_bytes, live_at_end_bytes, allocations and allocated_bytes, per NVTX path and kind allocations,
allocated_bytes and unfreed_bytes), ``ncu`` (per profiled kernel: the median launch's duration,
the launches' summed duration and count, elapsed cycles, SM clock, throughputs, occupancy,
launch configuration and shared memory per block, roofline, warp cycles per issued instruction and the stall reasons of
0.5 cycles or more), ``source`` (per source line of each kernel the ncu scope matched, from
ncu's Source Counters, only when asked: time_ns, its time per launch, each launch's duration
weighed by the line's share of the launch's warp stall samples; samples_pct, that share over the
launches; inst_executed, l2_excess_sectors and shared_excess_wavefronts per launch; see
``_source_scope``) and ``sweep`` (per bs x nc point: the timed
requests' latency median and p95, of two sweeps point by point, or of runs with timed
requests outside a sweep, such as two ``tracekit capture`` runs: a run is its one point, as
is a sweep's run folder given by its path; a sweep's run given by id or name names its sweep).
By default every scope both sides have is compared (source only when asked: a row per line of
every kernel); an nsys run has
the scopes of the events its capture traced (``SCOPE_EVENTS``: no kernel, api, memcpy
or gpu scope without CUDA tracing, no nvtx scope without NVTX tracing, no um scope without
both kinds of Unified Memory page fault traced, no cpu scope without CPU sampling, no memory scope
without CUDA memory usage tracing), so that events
one side never recorded are not reported as added or removed; an NVTX path's kernel time
and GPU projection are compared only where both captures traced CUDA.

Two sweeps are compared point by point, in the sweep scope where they timed requests (the
HSTU workload's) and in the run scopes (kernel to ncu) that every point's run of both has:
each point (macro ``grid_point``: 'm=1024,dtype=fp16', 'bs=8,nc=1024') stands for the sweep's
latest captured ok run with an nsys or ncu export there (``grid_points.sql``; macro
``run_captured_us``), compared with the other sweep's by the rules below, its rows' keys
prefixed with the point ('m=1024,dtype=fp16: softmax_warp_forward'); points one sweep lacks
are said in a warning and left out of these scopes: where its capture there failed (its run
labelled failed, or its manifest or run folder beside it says so), that it failed; where its
run is not in the store, interrupted or never ran, that; else that the other has them alone. A
program's sweep against a run is the sweep's run at the run's point against the run; another
sweep and a run compare in the sweep scope alone (the run standing for its sweep there).

Output columns (``COLUMNS``; CSV in this order): scope, key, metric, base, new, delta
(new - base), delta_pct (100 x delta / base), verdict (regressed, improved, unchanged,
added, removed), p_value, note (how the key was matched, why a verdict was held back),
delta_pct_low and delta_pct_high (an interval of delta_pct, see below). Rows are
ordered by the size of their key's change in GPU time (kernels, NVTX kernel time,
memory operations, devices; kernel duration for ncu; request latency for sweeps; NVTX
wall time where a run did not trace CUDA), largest first; CUDA API rows, which change
host time only, come after, ordered by their change in call time.

Verdicts. A change is ``regressed`` or ``improved`` only when it is larger than the
threshold (``threshold_pct``, 5 % by default) **and** real. Every limit here (the
threshold, the noise floors below) is read the same either way round (``_beyond``): a
change is beyond it where the larger of the two values is more than that above the
smaller, so a diff and its reverse judge the same keys, the one's ``regressed`` the
other's ``improved`` (+5.2 % one way is -4.94 % the other; ``delta_pct`` stays the change
against the base).

* counts (instances, calls, operations) are exact: a count that changed beyond the
  threshold is a real change, no test needed (p_value empty);
* per-instance statistics (med_ns, latency medians and p95) need the Mann-Whitney U
  test of the two runs' per-instance distributions (normal approximation with tie
  correction and continuity correction, two-sided) to give p < ``ALPHA`` (0.01): with
  thousands of instances even a 1 % shift is "significant", hence threshold and test
  together; a median is not judged where its key's instance count changed beyond the
  threshold: it is the median of another mix of instances (tests/data/nsys_diff_regressed
  against _base_a: a conversion kernel launched twice as often at one of its sizes, its
  median 1.79 -> 1.63 us, back to 1.79 us on the revert), which the count and total judge;
* totals (total_ns, kernel_total_ns, busy_ns) are count x per-instance time: a total
  is real when its count changed beyond the threshold, its per-instance distribution
  differs (p < ALPHA), or the total moved beyond its spread (delta against
  sqrt(n_base var_base + n_new var_new), p < ALPHA): instances of many sizes under one
  key (host-to-device copies of 32 B to 230 kB) whose largest got slower move no rank.
  A device's busy time (a union of op intervals) is real when its
  op count changed beyond the threshold or its ops' summed time moved the same way beyond
  its noise: per kind of op (kernel, copy kind, memset, graph) the change of the kind's
  total against sqrt(n var) of its durations, summed over the kinds, a copy kind or memset
  whose time moved within ``COPY_NOISE_PCT`` left out (tests/data/nsys_mem, _again: one copy
  7 % shorter moved the busy time -5.7 %), the sum itself beyond the threshold. Not one rank test
  over all its ops: a dominant kernel 1.8x slower whose ops stayed the longest moved no
  rank (tests/data/hstu_capture_pair); nor rank tests per kind combined: heavy kernels
  drifting by 1 % separate as completely as one 4x slower;
* what the GPU did is judged as above: kernel and memory-operation durations, an NVTX
  path's kernel time (kernels launched inside its instances, nested ranges included:
  the sum of ``nsys stats -r nvtx_kern_sum``) and device busy time. Two captures of one
  program mostly agree there within 2 % (tests/data/nsys_diff_base_a/_b/_c), but a kernel can
  take another time in another process of the program (tests/data/hstu_capture_python, _again,
  _again2: the Triton attention kernel's median 291.8, 256.5 and 291.2 us at the same launch
  settings, -12.1 % then +13.5 %, every other kernel of 2 us or more within 2.2 %), which only
  captures of the base again measure (``repeats``, ``tracekit.compare``); a memory operation's
  time is judged beyond ``COPY_NOISE_PCT`` (15 %) at least: identical captures' copies are up
  to 10.9 % apart (tests/data/nsys_jobs_mem base and mixed, rank 2's host-to-device copies),
  the inference pipeline's 0.7 us memsets 10.6 % in all (tests/data/hstu_host_pace/before and
  before2);
* host-timed metrics (``HOST_TIMED``: CUDA API durations, NVTX wall time and GPU
  projection, which spans the GPU's waits for the host's launches) of runs that traced
  CUDA are reported with their delta and p-value but never judged (note "host-timed, not
  judged"): there the host's time follows the GPU's pace and the host's speed, both of
  which move between captures (three identical captures of one CUDA program,
  tests/data/nsys_diff_base_a/_b/_c, differ by up to 108 % in API medians, 335 % in
  cudaDeviceSynchronize's total and 68 % in NVTX wall time, most with p far below ALPHA). The
  counts beside them (calls, instances) are judged, but for polling calls (``POLLS``:
  cudaEventQuery, cudaStreamQuery), which a program repeats for as long as it waits. Where
  neither run traced CUDA (``nsys -t nvtx,osrt``), host time is the program's own and the only time there is:
  NVTX wall time is judged like the rest, beyond ``HOST_NOISE_PCT`` (25 %) at least (six
  identical captures of a CPU-only program, tests/data/nsys_cpu_only, _again and four
  more, differ by up to 23 % in a range's total or median: read_input's median +22.8 % in
  _again; a range of one instance, loader:drain, 30 against 63 us, not significant);
* where both nsys runs sampled the GPU's counters (``--gpu-metrics-devices``), a kernel's
  time (total, median), an NVTX path's kernel time or a device's busy time that moved in as
  many cycles (the time x the mean SM clock of the samples taken inside its launches, within
  the threshold) at a clock that moved the other way by at least half as much (in log terms)
  is the clock's: held, as for ncu below ("moved with the SM clock", ``_with_the_sm_clock``;
  tests/data/nsys_gpu_metrics against _zeros: GEMMs 11 % shorter in all at a 13 % higher
  clock; where only one run sampled them, a ``CaptureWarning`` says the clock was not read);
* a key's time change (kernel, memory operation, NVTX kernel time) smaller than
  ``MATERIAL_PCT`` (0.1 %) of the run's GPU time is held back ("immaterial"): it cannot
  move the run, and the tiniest kernels move by timer ticks (ranks doing the same work
  in tests/data/nsys_ranks: a 1.7-1.9 us kernel by 128-160 ns, 7.0-9.4 %, p < 1e-6);
* Unified Memory page faults (``um``) are counts judged beyond ``UM_NOISE_PCT`` (35 %) at
  least; a function's sampled CPU time (``cpu``: its samples x the sampling interval) where its
  two sample counts differ beyond their Poisson noise (p < ALPHA) and beyond ``CPU_NOISE_PCT``
  (25 %) at least (``_cpu_scope``); a Python function's sampled time (``python``: nsys's Python
  samples, wall time of its thread in the function and under it) is reported, never judged: it
  moves with the host far beyond a usable limit (``_python_scope``); GPU memory (``memory``: bytes
  and allocations) is exact, judged as counts are (``_memory_scope``);
* a source line's time per launch (``source``) is judged beyond the threshold or ncu's noise at
  its kernel's launch duration, whichever is larger, where its warp stall samples moved beyond
  their Poisson noise past that noise (``_sampled_p``), and only the way its kernel's mean
  launch moved: where the kernel took as long, or moved the other way, its warps' time moved
  between its lines, said, not judged (tests/data/ncu_diff_a/_b: the same 181 us at another
  block size, the index arithmetic's share of the samples 7.2 -> 0.7 %). Two reports of the
  inference pipeline (hstu_capture_ncu_pair: base, base_again) move its lines of 2,000-2,700
  samples by up to 8 %, the samples' noise; with its attention kernel on half the SMs, that
  kernel's lines alone regress. A line's p must pass ALPHA over the kernel's lines tested
  (Bonferroni): a kernel of 100 lines is 100 tests. A kernel's smallest moves are held back
  ("immaterial") while together they stay under ``MATERIAL_LINE_PCT`` (1 %) of its launch. A
  kernel of both reports whose lines are in one only, or that has no launch with samples and a
  duration on a side (where one has samples), is named in a ``CaptureWarning``;
* request latency (sweeps, runs with timed requests), host-timed too, is judged beyond
  ``HOST_NOISE_PCT`` at least (its p95 beyond ``HOST_TAIL_NOISE_PCT``, 45 %), or the
  threshold if larger: identical sweeps differ by up to 21 % at a point, with per-request
  tests far below ALPHA (the requests of one run share its machine state), and the p95 of
  two identical captures by 42 %. Where both runs of a point traced CUDA, a latency change
  that the host's pace accounts for is held ("moved with the host's pace",
  ``_with_the_host``): the median duration of the CUDA kernel-launch calls (a fixed piece
  of host work) moved its way by at least half as much (in log terms), the latency at the
  base's pace is within the limit, and the GPU's time did not move its way beyond the
  threshold. Two identical captures of the inference pipeline minutes apart
  (tests/data/hstu_host_pace/before, before2) are 48.7 % apart in median latency with
  cudaLaunchKernel's median 51.5 % slower (the launch APIs' pace +53.2 %), and 13.9 % and
  17.8 % in hstu_capture_pair's noise pair; that pair's planted GPU regression against its
  second capture (base_again against half_sms: latency +26.7 % with the launch calls +8.7 %)
  is not held. Where both runs read the SM clock their timed requests ran at (gpu_timed), a
  change that the clock accounts for is held the same way ("moved with the SM clock",
  ``_with_the_gpu_clock``), and another says the clocks where they differ;
* ncu launches are replayed under fixed conditions and are few (a test of 3 against 3
  launches can never reach p < 0.01): an ncu value is real when the launches of the two
  reports do not overlap (every new launch beyond every base launch) and, for a measured
  value (not the launch's configuration), when it changed beyond ncu's own noise at the
  launch's duration if that is larger than the threshold (``NCU_NOISE_NS`` / duration +
  ``NCU_NOISE_PCT``: a launch moves by ~100 ns, up to ~0.5 us, between two reports of one
  program, 12.5 % of a 3 us launch; tests/data/hstu_capture_ncu_pair), sized by the shorter
  side's launches (the same verdict either way round) and not judged at all where a report
  has no duration (chosen metrics without gpu__time_duration). Where both reports have as
  many launches of a key, each launch is compared with its counterpart instead (the k-th of
  its grid and block, or the k-th launch where a grid or block changed): a launch that moved
  by no more than the limit moved neither way, and the change is real when the launches that
  moved all went the way the median went and are most of them, or, from ``SIGN_MIN`` (8) of
  them, pass a sign test (p < ALPHA): launches of one kernel at several sizes overlap before and after
  even when each got slower (tests/data/ncu_shapes_a/_slow: +13 to +35 % at every size,
  ranges 2.5-44.8 us against 3.1-57.3 us). The launches' summed duration (``launch_total_ns``)
  is judged launch by launch against ncu's noise at each launch's own duration (the shorter of
  the pair's; or the threshold), beyond that noise summed, where both reports have as many
  launches (else it is a sum over other launches: ncu's filters, --launch-count): some launches of a kernel twice as long move its
  total where its median launch stays put (``_paired_total``). A rate (throughput, FLOP/s, %
  of roof, achieved occupancy) is judged only with the launches' time: where their duration
  and total did not move it is shown, not judged (tests/data/ncu_diff_a/_b: occupancy 84 ->
  47 % at the same duration: how the launches used the GPU changed, not what they cost), and
  where it moved against the time (up while the launches got slower) the launch's work
  changed: the rate says how busy it kept the GPU, not that it got better. A
  duration that moved in as many cycles (``elapsed_cycles`` within the duration's limit) at an
  SM clock (``sm_frequency_hz``) that moved the other way by at least half as much (in log
  terms) is the clock's, not the code's: it is held ("moved with the SM clock"), with the
  rates that moved its way (``_with_the_clock``; tests/data/ncu_clocks_random/_zeros: one GEMM
  on zeros 12 % shorter at 14 % more MHz); registers, shared memory per block, block
  and grid size, waves per SM, theoretical occupancy (which follows from them), the number of
  launches profiled and arithmetic intensity describe the launch and have no
  better/worse direction: they are reported, never regressed. So are the
  warp states (cycles per issued instruction, in total and per stall reason): they say where a
  warp's time goes, not how long the launch takes (tests/data/ncu_diff_a/_b: the stalls
  halve at half the occupancy while the duration stays within 0.1 %). A launch setting is
  exact, the same in every replay: any change of one, in any launch, is said ("differs"),
  never "within threshold". A theoretical occupancy that moved says why: the block limit that
  binds it where that changed, and where it fell, what one block more per SM needs and, at an
  unchanged block size, another that would hold more warps (query occupancy's limiter,
  next_needs and best_block_size; tests/data/ncu_occupancy_a/_b: a GEMM's 4 pipeline stages
  instead of 2, shared_mem instead of registers, 8 warps again at 256 threads a block; an
  elementwise kernel's 64 elements per thread instead of 8, registers instead of none).

"Regressed" is the direction of harm: more time, more instances, more calls; less
throughput, occupancy, FLOP/s or % of roof. A key in one run only is ``added`` or
``removed`` with its time; a sweep point whose capture failed in the new sweep (every run of
it not ok, or its run folder saying so) is ``regressed`` (in the base sweep: ``improved``), with
the error in the note; one a sweep ran but has no run of in the store (removed, not ingested,
interrupted), or that neither sweep has, is ``not judged`` in a table (``unchanged`` in the
files), the note saying why: there is nothing to compare.
The note says why a verdict was held back ("within threshold", "not significant (p=0.31)",
"host-timed, not judged", "immaterial", "moved with the SM clock", "moved with the host's
pace") and how the key was matched.

Intervals (delta_pct_low, delta_pct_high): for medians, the difference of the two
medians' 95 % distribution-free intervals (order statistics; conservative); for totals,
delta +- 1.96 sqrt(n_base var_base + n_new var_new) (counts taken as fixed); for counts,
the exact delta; for ncu, the smallest and largest change of a launch against its
counterpart (the launches' spread where the two reports have different counts).

Setup: where the two sides' captures differ in what ``SETUP`` lists (tracekit capture's
parameters, GPU, software versions, code commit, settings such as TRACEKIT_TILES, the
workload, an nsys export's --cuda-graph-trace), ``diff`` warns once (``CaptureWarning``)
with what differs; a value one side did not record is not compared, but where both recorded
their settings a variable one of them did not set reads ``(unset)`` and no tiles file
``(none: the built-in tiles)``.

Kernel matching: by exact demangled name first. Kernels left without a namesake in the
other run are then matched by their place in the program (the NVTX path of the range
around their launches and their position among that range's launches, the most common
over their launches), with the kernel family (the ``kernel_family`` SQL macro,
tracekit/macros.sql) as the tie-breaker, and last by family alone when exactly one
kernel of that family is left on each side. A matched kernel's key is its name in the
new run; the note names the base kernel and how it was matched.

The statistics are computed in DuckDB (queries/_diff/*.sql: one pass over the
samples grouped by key and value, then running counts), the test and the verdicts on
the per-key summary in Python.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .errors import (
    CaptureWarning,
    InputError,
    ParamError,
    QueryError,
    UntracedScopes,
    expect,
    warn_from_caller,
)
from .names import ELLIPSIS, RUN_ID, UNNAMED, cut_end, cut_text, distinct_labels, short_name
from .registry import NO_CUDA_EVENT, listed, no_cuda_event, untraced
from .store import CAPTURE_STATUS
from .sweep_points import Absent, absent_points, said, why_absent

NSYS_SCOPES = ("kernel", "nvtx", "api", "memcpy", "gpu", "um", "cpu", "python", "memory")
#: nsys scope -> the kinds of event (registry.TRACED) a run's capture must have traced
SCOPE_EVENTS = {"kernel": ("CUDA",), "nvtx": ("NVTX",), "api": ("CUDA",), "memcpy": ("CUDA",), "gpu": ("CUDA",),
                "um": ("Unified Memory CPU page fault", "Unified Memory GPU page fault"), "cpu": ("CPU sample",),
                "python": ("Python sample",), "memory": ("CUDA memory usage",)}
SCOPES = (*NSYS_SCOPES, "ncu", "source", "bench", "sweep")
#: scopes compared only when asked (--by): each source line of a kernel is a key of its own
ASKED_ONLY = ("source",)


def reads_cuda(scopes) -> bool:
    """Whether a comparison in ``scopes`` reads CUDA's events (``SCOPE_EVENTS``): where a run
    that holds none though its capture traced CUDA is said (``diff``), or left out with its
    rank (``diff --jobs``)."""
    return any("CUDA" in SCOPE_EVENTS.get(sc, ()) for sc in scopes)

#: nsys scopes of events a capture records only when told (nsys profile --cuda-um-*-page-faults;
#: --sample=process-tree, nsys's default, which tracekit capture turns on with --cpu-samples;
#: --python-sampling=true; --cuda-memory-usage=true)
OPTIONAL_SCOPES = ("um", "cpu", "python", "memory")
#: the memory scope's metrics, in their order (samples_memory.sql), and how ``moved`` says them
MEMORY_METRICS = ("peak_bytes", "live_at_end_bytes", "allocations", "allocated_bytes", "unfreed_bytes")
MEMORY_WORDS = dict(zip(MEMORY_METRICS, ("peak", "left allocated", "allocations", "allocated", "never freed"),
                        strict=True))
VERDICTS = ("regressed", "improved", "unchanged", "added", "removed")
COLUMNS = ["scope", "key", "metric", "base", "new", "delta", "delta_pct", "verdict", "p_value", "note",
           "delta_pct_low", "delta_pct_high"]
SCHEMA = {"scope": pl.Utf8, "key": pl.Utf8, "metric": pl.Utf8, "base": pl.Float64, "new": pl.Float64,
          "delta": pl.Float64, "delta_pct": pl.Float64, "verdict": pl.Utf8, "p_value": pl.Float64,
          "note": pl.Utf8, "delta_pct_low": pl.Float64, "delta_pct_high": pl.Float64}
#: significance level of the Mann-Whitney U test
ALPHA = 0.01
#: metrics timed on the host (CPU wall time): where a run traced CUDA, reported but never
#: judged (three identical captures of one CUDA program, tests/data/nsys_diff_base_a/_b/_c,
#: differ by up to 108 % in CUDA API medians and 68 % in NVTX wall time, most "significant":
#: the host's speed and the GPU's pace move between captures, not the program); between
#: two runs without CUDA, judged beyond HOST_NOISE_PCT. The job scope's (tracekit.job_diff:
#: a job's NVTX range time, its slowest rank's) likewise
HOST_TIMED = {("api", "total_ns"), ("api", "med_ns"), ("nvtx", "range_total_ns"), ("nvtx", "range_med_ns"),
              ("nvtx", "proj_total_ns"), ("job", "job_total_ns"), ("job", "job_med_ns")}
#: the note of a host-timed value not judged
HOST_NOTE = "host-timed, not judged"
#: the end of the note of a sweep point with no run on a side: shown not judged (shown_verdicts), not unchanged
NOTHING_TO_COMPARE = ": nothing to compare, not judged"
#: the note of a sweep point whose capture failed on one side (regressed or improved, no value)
POINT_FAILED = "capture of this point failed"
#: a host-timed change that is judged (request latency; host time of runs without CUDA)
#: counts beyond this at the least: two identical sweeps differed by up to 21 % in median
#: latency at one point (large preset, H200), 11.6 % in tests/data/sweep_pair (medium
#: preset), with per-request tests far below ALPHA; six identical captures of a CPU-only
#: program (tests/data/nsys_cpu_only, _again and four more) by up to 23 % in an NVTX
#: range's total or median (p = 0.008 at 22.5 %; _again: read_input's median +22.8 %,
#: p = 0.057; a range of one instance, loader:drain, 2.1x, not significant)
HOST_NOISE_PCT = 25.0
#: a request latency's tail (p95: with 30 requests, the second slowest) is noisier than
#: its median: judged beyond this at the least. Two identical captures of the inference
#: pipeline under nsys, two hours apart (tests/data/hstu_capture_pair/base, base_again), are
#: 16 % apart in median and 42 % in p95 (9.45 against 13.38 ms: +41.6 % one way, -29.4 % the
#: other); tests/data/sweep_pair's noise pair up to 15 % in p95
HOST_TAIL_NOISE_PCT = 45.0
#: a count of Unified Memory page faults is judged beyond this at the least: the GPU's fault
#: handler batches a page's faults as its timing falls, and two identical captures of one
#: program (tests/data/nsys_um_faults, _again) are 8-30 % apart in GPU faults per access type
#: (atomics 993 against 1,287), their CPU faults equal
UM_NOISE_PCT = 35.0
#: a function's sampled CPU time is judged beyond this at the least, and only where its sample
#: counts differ beyond their Poisson noise (p < ALPHA): two identical captures of one program
#: (tests/data/nsys_cpu_hot, _again) are up to 11 % apart per function at 300-700 samples; a
#: background thread's function that runs as long as the main loop moves with it: +21 % where the
#: loop ran 29 % longer (_slow against nsys_cpu_hot), +33 % where it ran 37 % longer (against _again)
CPU_NOISE_PCT = 25.0
#: a memory operation's time (a copy kind's or memsets' total and median) is judged beyond this
#: at the least: copies are short and ride on the host's and the bus's state, and identical
#: captures are up to 10.9 % apart per copy kind (tests/data/nsys_jobs_mem base against mixed,
#: rank 2's 23 host-to-device copies of 3.8 MB: 145.4 and 131.1 us, p = 8.7e-4; base against
#: more 10.8 %), 7.4 % (tests/data/nsys_jobs base against base_again, rank 2's device-to-host
#: median; nsys_mem against _again, one host-to-device copy: 7.1 %), 4.6 % apart at p = 5e-38
#: (nsys_diff_base_a against _b, 400 host-to-device copies); the inference pipeline's 240
#: memsets of 0.7 us 10.6 % apart in all (tests/data/hstu_host_pace, before against before2:
#: 19 us, p = 1.5e-9)
COPY_NOISE_PCT = 15.0
#: CUDA API calls that poll (is the event, the stream, done?): a program calls them until the
#: answer is yes, so their count follows how long the host waited, not the work: never judged
#: (cudaEventQuery 353 and 330 times in two identical captures, tests/data/hstu_host_pace/before
#: and before2, -6.5 %)
POLLS = re.compile(r"^cu(da)?(Event|Stream)Query$")
POLL_NOTE = "a polling call: its count follows how long the host waited, not judged"
#: a key's time change smaller than this share of the run's GPU time is not judged: it
#: cannot move the run, and the tiniest kernels move by 32 ns timer ticks (four or five on a
#: 1.7-1.9 us kernel, 7.0-9.4 %, p < 1e-6, between the identical ranks of tests/data/nsys_ranks)
MATERIAL_PCT = 0.1
#: metrics judged on their key's change in GPU time (``effect``) for materiality
_MATERIAL = {("kernel", "total_ns"), ("kernel", "med_ns"), ("memcpy", "total_ns"), ("memcpy", "med_ns"),
             ("nvtx", "kernel_total_ns")}
_Z95 = 1.959963984540054


def _sql(name: str) -> str:
    return (resources.files("tracekit.queries") / "_diff" / f"{name}.sql").read_text()


# -- what is compared -------------------------------------------------------------


class NoSourceLines(QueryError):
    """``--by source`` of a side whose reports hold no source lines of kernel launches to
    compare; ``side``: 0 the base's, 1 the other's (a repeat's is left out of the lines'
    noise, ``compare``)."""

    def __init__(self, message: str, side: int = 0) -> None:
        super().__init__(message)
        self.side = side


class NoPointsCompared(QueryError):
    """``diff(at=...)`` of two sweeps that have no run compared at any of those points (a
    repeat of the base that measures nothing where the runs are compared: ``compare`` says so)."""


@dataclass
class Side:
    """One side of a diff: a run (with the sweep it belongs to, if any) or a sweep."""

    ref: str
    run_id: int | None = None
    name: str | None = None
    kinds: set[str] = field(default_factory=set)
    sweep: str | None = None

    pending: bool = False  # a file read but not ingested yet (its run_id is no id)
    point: str | None = None  # ... its point of a sweep, as its params name it (macro grid_point)
    #: a file this comparison ingests (``ref``): named as the file, its run is not committed yet
    ingested: bool = False
    untraced: tuple[str, ...] = ()  # kinds of event its capture did not trace (CUDA, NVTX, ...)
    status: str | None = None  # the capture's status its run folder recorded (None: a bare export)
    error: str | None = None
    tool: str | None = None  # the profiler its requests were timed under (params.tool; a sweep's, if one)
    #: a run folder given by its path: in the sweep scope its own point, not the sweep it is a
    #: point of (which the store may hold whole or not: the answer would depend on it)
    own_point: bool = False
    #: its sweep timed requests (the HSTU workload's): a sweep scope to compare; a program's
    #: sweep (`tracekit sweep --grid ... -- CMD`) has none
    timed: bool = True
    #: a sweep: the run that stands for each of its points in the run scopes (kernel, nvtx, ...,
    #: ncu), by point ('m=1024,dtype=fp16', macro grid_point)
    points: dict[str, Side] = field(default_factory=dict)
    #: a sweep compared at these of its points alone (``at_points``: a repeat of the base, where
    #: the runs compared with the base are sweeps); None: at every point it has
    at: frozenset[str] | None = None

    @property
    def label(self) -> str:
        if self.pending or self.ingested:
            return self.ref
        if self.run_id is None:
            return f"sweep {self.sweep}"
        return f"run {self.run_id} ({self.name})"

    def scopes(self) -> set[str]:
        out = set()
        if "nsys" in self.kinds:
            out.update(s for s in NSYS_SCOPES if not set(SCOPE_EVENTS[s]) & set(self.untraced))
        if "ncu" in self.kinds:
            out.update(("ncu", "source"))
        if "bench" in self.kinds:
            out.add("bench")
        if self.run_id is None and self.points:  # a sweep: the scopes every point's run has, compared point by point
            out.update(set.intersection(*(p.scopes() - {"sweep"} for p in self.points.values())))
        if (self.sweep is not None and self.timed) or self.lone_point:
            out.add("sweep")
        return out

    @property
    def lone_point(self) -> bool:
        """A run with timed requests outside a sweep (``tracekit capture``): compared in the
        sweep scope as a sweep of its one point."""
        return self.run_id is not None and (self.sweep is None or self.own_point) and "timing" in self.kinds


def _is_file(ref: Any) -> bool:
    """Whether ``ref`` is a file or folder to ingest: a path that exists and holds an input.
    A path that holds nothing to ingest (a folder of notes named like a run) does not hide
    the run or sweep of its name (``resolve``)."""
    from .ingest import nothing_to_ingest

    return _exists(ref) and nothing_to_ingest(Path(str(ref).strip())) is None


def _exists(ref: Any) -> bool:
    text = str(ref).strip()
    return bool(text) and not RUN_ID.fullmatch(text) and Path(text).exists()


def resolve(tk, ref: Any, check: Callable[[Side], None] | None = None) -> Side:
    """A run id, a run name, a sweep id, or a file/run folder (ingested first; a file
    already in the store is that run). ``check(side)`` is given a file's side once it is
    read and before it is written: what it raises leaves the store as it was."""
    from .ingest import nothing_to_ingest

    con = tk.con
    text = str(ref).strip()
    if not text:
        raise QueryError("diff: an empty run reference; give a run id, name, sweep id or file")
    path = Path(text)
    exists = _exists(text)
    if exists:
        from .store import check_utf8_path

        check_utf8_path(path)
    idle = nothing_to_ingest(path) if exists else None  # (holds nothing to ingest: the run of its name is meant)
    if exists and idle is None:
        # a bare name that is also a run's (another run than the file's): which one is meant?
        namesake = con.execute("SELECT max(run_id) FROM runs WHERE name = ?", [text]).fetchall()[0][0] \
            if os.sep not in text else None
        if tk.read_only:
            raise QueryError(f"{path}: a file to compare is ingested first, and {tk.path} is open read-only; "
                             f"ingest it (tracekit --db {tk.path} ingest {path}) and compare its run")
        from .ingest import run_folders

        points = run_folders([path])

        def before_write(kind: str, params: dict, name: str, status: str | None) -> None:
            if check is None or (len(points) > 1 and status not in (None, "ok")):
                return  # (a sweep folder's failed capture is not one of its points compared: grid_points.sql)
            point = con.execute("SELECT grid_point(?)", [json.dumps(params or {})]).fetchall()[0][0]
            check(Side(text, 0, name, set(kind.split(",")), (params or {}).get("sweep"), pending=True,
                       point=point, status=status, tool=(params or {}).get("tool"), own_point=True))

        if len(points) > 1:  # a sweep's folder: its points, the side their sweep
            return _sweep_folder(tk, text, [tk.landed_run(p, check=before_write) for p in points])
        res = tk.landed_run(points[0], check=before_write)  # (a folder holding one run folder: that run)
        # a new run, the command's until it ends (not committed, or removed where it fails): the file names it
        ingested = not res.skipped and tk.provisional
        if namesake is not None and namesake != res.run_id:
            warn_from_caller(CaptureWarning(
                f"diff: {text!r} is both a file here and the name of run {namesake} in {tk.path}: the file is "
                f"compared (write ./{text} for the file, {namesake} for the run)"))
        ref, text = (text if ingested else str(res.run_id)), str(res.run_id)
        own = True
    else:
        ref, ingested, own = text, False, False
    rows = []
    cols = f"run_id, name, kind, json_extract_string(params, '$.sweep'), {CAPTURE_STATUS}, " \
        "json_extract_string(params, '$.tool')"
    if RUN_ID.fullmatch(text):
        rows = con.execute(f"SELECT {cols} FROM runs WHERE run_id = ?", [int(text)]).fetchall()
    if not rows:
        rows = con.execute(f"SELECT {cols} FROM runs WHERE name = ? ORDER BY run_id DESC LIMIT 1", [text]).fetchall()
    if rows:
        run_id, name, kind, sweep, status, error, tool = rows[0]
        side = Side(ref, int(run_id), name, set(kind.split(",")), sweep, status=status, error=error, tool=tool,
                    ingested=ingested, untraced=tuple(what for what, _ in untraced(tk, int(run_id))
                                                      if any(what in k for k in SCOPE_EVENTS.values())),
                    own_point=own, timed=sweep is None or _timed(con, sweep))
    else:
        side = _sweep_side(tk, text, text)
    if side is None and idle is not None:  # (what the path lacks, as `tracekit ingest PATH` says it)
        from .job_diff import is_job_folder, job_exports

        several = is_job_folder(text) and len(job_exports(path)) > 1  # (a job's ranks, one export each)
        jobs = "; a folder of a multi-rank job's exports compares with --jobs" if several else ""
        raise InputError(f"{idle}; nor is {text!r} a run or sweep in {tk.path} (see `tracekit runs`){jobs}")
    if side is None:
        raise QueryError(f"diff: no run or sweep {text!r} in {tk.path}; see `tracekit runs` (a file must exist "
                         "to be ingested)")
    if idle is not None:
        what = f"run {side.run_id}" if side.run_id is not None else "sweep"
        warn_from_caller(CaptureWarning(f"diff: {text!r} is a path here that holds nothing to ingest: {what} "
                                        f"{text!r} of {tk.path} is compared"))
    return side


def _sweep_side(tk, sweep: str, ref: str, ingested: bool = False) -> Side | None:
    """The side of sweep ``sweep`` (None: no run of the store is a point of it), with the
    profiler its requests were timed under where its runs share one, and the run that stands
    for each of its points in the run scopes (``grid_points.sql``)."""
    con = tk.con
    tools = con.execute("SELECT DISTINCT json_extract_string(params, '$.tool') FROM runs "
                        "WHERE json_extract_string(params, '$.sweep') = ?", [sweep]).fetchall()
    if not tools:
        return None
    points = {point: resolve(tk, str(run_id))
              for point, run_id in con.execute(_sql("grid_points"), {"sweep": sweep}).fetchall()}
    return Side(ref, sweep=sweep, tool=tools[0][0] if len(tools) == 1 else None, ingested=ingested,
                timed=_timed(con, sweep), points=points)


def _timed(con, sweep: str) -> bool:
    """Whether a run of ``sweep`` timed requests (the HSTU workload's sweep; a program's has none)."""
    return con.execute("SELECT count(*) > 0 FROM runs WHERE json_extract_string(params, '$.sweep') = ? "
                       "AND list_contains(string_split(kind, ','), 'timing')", [sweep]).fetchall()[0][0]


def _sweep_folder(tk, text: str, results: list) -> Side:
    """The side a folder of run folders stands for (``tracekit sweep``'s folder): the one
    sweep its runs, just ingested or already in the store, are the points of."""
    ids = [r.run_id for r in results]
    found = [s for (s,) in tk.con.execute("SELECT DISTINCT json_extract_string(params, '$.sweep') FROM runs "
                                          "WHERE run_id IN (SELECT unnest(?::BIGINT[]))", [ids]).fetchall()]
    if len(found) != 1 or found[0] is None:
        what = "runs outside a sweep" if found == [None] else \
            f"runs of {len([s for s in found if s])} sweeps" + (" and outside one" if None in found else "")
        raise QueryError(f"diff: {text}: its {len(ids)} run folders are {what}, not the points of one sweep; "
                         f"ingest it (tracekit ingest {text}) and compare two of its runs, or two sweeps, by id")
    return _sweep_side(tk, found[0], text,
                       ingested=any(not r.skipped for r in results) and tk.provisional)


def _a_sweep(side: Side) -> bool:
    """Whether ``side`` stands for a sweep: a sweep's id, or a point of a sweep read from a folder
    not ingested yet (the folder may hold the whole sweep: ``resolve`` says once it is written)."""
    return side.run_id is None or (side.pending and side.sweep is not None)


def _scopes(base: Side, new: Side, by: list[str] | None) -> list[str]:
    common = base.scopes() & new.scopes()
    if _a_sweep(base) != _a_sweep(new):  # a sweep and a run: their requests' latency alone
        common &= {"sweep"}
        if not common or (by and set(by) - common):
            sweep, run = (base, new) if _a_sweep(base) else (new, base)
            raise QueryError(f"diff: {sweep.label} and {run.label}: a sweep is compared with a sweep, point by "
                             f"point, and a run with a run; give two sweeps or two runs (the points of "
                             f"{sweep.label}: tracekit query {_points_query(sweep)} -p sweep={sweep.sweep})")
    other_tools = ""
    if "sweep" in common and base.tool and new.tool and base.tool != new.tool:
        # (the profiler's overhead is in every request: ncu's replays make them several times longer)
        under = {side.tool: "without a profiler" if side.tool == "none" else f"under {side.tool}"
                 for side in (base, new)}
        other_tools = (f"{base.label} timed its requests {under[base.tool]} and {new.label} {under[new.tool]}, "
                       "whose overheads differ; compare requests timed under one --tool")
        if by and "sweep" in by:
            raise QueryError(f"--by sweep: {other_tools}")
        common.discard("sweep")
    if not by:
        if not common:
            has = "; ".join(f"{side.label} {_has(side)}" for side in (base, new))
            raise QueryError(f"diff: {base.label} [{_kinds(base)}] and {new.label} [{_kinds(new)}] share no scope to "
                             "compare (" + (other_tools or has) + ")")
        return [s for s in SCOPES if s in common and s not in ASKED_ONLY]
    out = []
    for s in by:
        for side in (base, new):
            if s in side.scopes():
                continue
            if side.run_id is None and side.points:  # a sweep: what its points compare by
                scopes = ", ".join(sc for sc in SCOPES if sc in side.scopes() and sc not in ASKED_ONLY)
                if s == "sweep" and not side.timed:
                    raise QueryError(f"--by sweep: {side.label} is a program's sweep: the sweep scope compares "
                                     "the timed requests' latency of the HSTU workload's sweeps, and a program's "
                                     f"sweep timed none; its points compare by {scopes} (leave --by out for all)")
                raise QueryError(f"--by {s}: {side.label}, its {_kinds(side, s)}, has no {s} scope (its points "
                                 f"compare by {scopes})")
            raise QueryError(f"--by {s}: {side.label} [{_kinds(side, s)}] has no {s} scope "
                             f"(it {_has(side, sorted)})")
        if s not in out:
            out.append(s)
    return out


def _points_query(sweep: Side) -> str:
    """The query that shows a sweep's points side by side: its requests' latency where it timed
    them, else its kernels as the profiler its points ran under records them."""
    from .registry import SWEEP_QUERIES

    return "sweep-latency" if sweep.timed else SWEEP_QUERIES.get(sweep.tool or "", "sweep-points")


def _has(side: Side, order: Callable = lambda scopes: [s for s in SCOPES if s in scopes]) -> str:
    """What ``side`` has to compare, for an error: its scopes; a file not yet written, only
    what its kind may have (what it traced is known once it is written). The scopes compared
    only when asked (``ASKED_ONLY``) go without saying: they come with the ncu scope."""
    scopes = ", ".join(order(side.scopes() - set(ASKED_ONLY))) or "none"
    return f"may have {scopes} (not ingested yet)" if side.pending else f"has {scopes}"


def pair_check(other: Side | None, file_is_base: bool, by: list[str] | None) -> Callable[[Side], None]:
    """``resolve``'s check for a file compared with ``other`` (already resolved): the
    pair must share a scope (``by``'s, if given) and not be one sweep twice. A point of a
    sweep (a sweep folder's run) against a sweep is checked against that sweep's run at its
    point, where it is compared; a point the other sweep lacks is not compared, and is not
    checked (``diff`` says the points that are, once the folder is in). A run whose params name
    no point is checked against the whole sweep."""
    def check(side: Side) -> None:
        if other is None:
            return
        against = other
        if side.sweep is not None and side.point is not None and other.run_id is None and other.points:
            if side.point not in other.points:
                return
            against = replace(other, points={side.point: other.points[side.point]})
        base, new = (side, against) if file_is_base else (against, side)
        _not_one_sweep(base, new, _scopes(base, new, by), bool(by))
    return check


def _not_by_a_shared_name(tk, base: Side, new: Side) -> None:
    """A run compared with itself is allowed (every delta 0: a check of the tool), but not
    when a name that several runs share picked it for both sides: the user meant two runs."""
    if base.run_id is None or base.run_id != new.run_id:
        return
    for ref in dict.fromkeys((base.ref, new.ref)):
        ids = [r[0] for r in tk.con.execute("SELECT run_id FROM runs WHERE name = ? ORDER BY run_id", [ref]).fetchall()]
        if len(ids) > 1:
            raise QueryError(f"diff: both sides are {base.label}: the name {ref!r} is shared by runs "
                             f"{', '.join(map(str, ids))} and names the latest; give run ids")


def _not_one_sweep(base: Side, new: Side, scopes: list[str], asked: bool) -> list[str]:
    """The sweep scope compares two sweeps point by point; where both sides name one sweep
    (any run of a sweep names it) it would compare that sweep with itself: an error where
    it is the only scope or was asked for, else left out."""
    if base.run_id is None and new.run_id is None and base.sweep == new.sweep:
        raise QueryError(f"diff: both sides are sweep {base.sweep}: a sweep is compared with another point by "
                         f"point; give two sweeps (its own points side by side: tracekit query {_points_query(base)} "
                         f"-p sweep={base.sweep})")
    if "sweep" not in scopes or base.sweep != new.sweep or base.sweep is None or (base.lone_point and new.lone_point):
        return scopes  # (run folders given by their paths are their own points: two points of one sweep compare)
    rest = [s for s in scopes if s != "sweep"]
    if asked or not rest:
        both = "both sides" if base.run_id is None or new.run_id is None or base.pending or new.pending else \
            f"runs {base.run_id} and {new.run_id}"
        raise QueryError(f"diff: {both} belong to sweep {base.sweep}: the sweep scope compares two sweeps "
                         "point by point; give runs of two sweeps (the points of one: tracekit query sweep-latency)")
    return rest


def _kinds(side: Side, scope: str | Iterable[str] | None = None) -> str:
    """The side's kinds of run, and the kinds of event its capture did not trace: of the
    scopes every capture can have, and of ``scope`` (one asked for, or several: the Unified
    Memory page faults a capture traces only when told are not said missing otherwise)."""
    if side.run_id is None:  # a sweep: what its points were captured under, and where they did not trace
        tools = sorted({k for p in side.points.values() for k in p.kinds} & {"nsys", "ncu"})
        text = f"points captured under {' and '.join(tools)}" if tools else "sweep"
        lacking = {point: lacks for point, p in side.points.items() if (lacks := _untraced_said(p, scope))}
        if lacking:
            events = " or ".join(dict.fromkeys(k for lacks in lacking.values() for k in lacks))
            where = "" if len(lacking) == len(side.points) else f" at {', '.join(lacking)}"
            text += f" without {events} trace{where}"
        return text
    lacks = _untraced_said(side, scope)
    return (",".join(sorted(side.kinds)) + (f" without {' or '.join(lacks)} trace" if lacks else "")
            + (f", sweep {side.sweep}" if side.sweep else ""))


def _untraced_said(side: Side, scope: str | Iterable[str] | None) -> list[str]:
    """The kinds of event a run's capture did not trace that ``_kinds`` says: of the scopes
    every capture can have, and of ``scope``."""
    asked = {scope} if isinstance(scope, str) else set(scope or ())
    said = {k for s in NSYS_SCOPES if s not in OPTIONAL_SCOPES or s in asked for k in SCOPE_EVENTS[s]}
    return [k for k in side.untraced if k in said]


def untraced_scopes(sb: Side, sn: Side) -> list[tuple[Side, list[str]]]:
    """Of two nsys runs, or two sweeps compared point by point (a sweep's scopes: those every
    point has), the scopes one has and the other's capture did not trace (CUDA, NVTX, a kind
    of sample, GPU memory: ``SCOPE_EVENTS``): (the side lacking them, the scopes), what a
    comparison in the scopes both have leaves out."""
    kinds = [side.kinds if side.run_id is not None else {k for p in side.points.values() for k in p.kinds}
             for side in (sb, sn)]
    runs = sb.run_id is not None and sn.run_id is not None
    sweeps = all(side.run_id is None and side.points for side in (sb, sn))
    if not (runs or sweeps) or "nsys" not in kinds[0] & kinds[1]:
        return []
    hb, hn = sb.scopes(), sn.scopes()  # (once each: a sweep's asks each of its points)
    return [(side, lacks) for side, own, theirs in ((sb, hb, hn), (sn, hn, hb))
            if (lacks := [s for s in NSYS_SCOPES if s in theirs and s not in own])]


#: what a comparison says where a side lacks NVTX and GPU memory is compared (``untraced_scopes``):
#: an allocation outside any range on one side alone would read as moved out of its range
MEMORY_WITHOUT_PATHS = "GPU memory is compared per GPU, not per NVTX path"


# -- statistics ---------------------------------------------------------------------


def _compare(con, samples_sql: str, params: dict) -> pl.DataFrame:
    """Per-key summary of both sides' samples (compare.sql) with the Mann-Whitney p-value."""
    sql = f"WITH samples AS (\n{samples_sql}\n)\nSELECT * FROM (\n{_sql('compare')}\n)"
    df = con.sql(sql, params=params).pl()
    return df.with_columns(pl.Series("p_value", _mann_whitney(df), dtype=pl.Float64))


def _mann_whitney(df: pl.DataFrame) -> list[float | None]:
    """Two-sided p of the Mann-Whitney U test per row: normal approximation with tie and
    continuity correction; None where a side has no instance."""
    n1 = df["n_base"].to_numpy().astype(float)
    n2 = df["n_new"].to_numpy().astype(float)
    r1 = df["rank_sum_base"].fill_null(0).to_numpy().astype(float)
    ties = df["tie_term"].fill_null(0).to_numpy().astype(float)
    n = n1 + n2
    with np.errstate(divide="ignore", invalid="ignore"):
        u1 = r1 - n1 * (n1 + 1) / 2
        var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
        z = np.maximum(np.abs(u1 - n1 * n2 / 2) - 0.5, 0) / np.sqrt(var)
    out: list[float | None] = []
    for a, b, v, zz in zip(n1, n2, var, z, strict=True):
        if a == 0 or b == 0:
            out.append(None)
        elif not v > 0:
            out.append(1.0)  # every instance of both runs has the same value
        else:
            out.append(math.erfc(zz / math.sqrt(2)))
    return out


# -- verdicts -----------------------------------------------------------------------


def _pct(delta: float | None, base: float | None) -> float | None:
    if delta is None or base is None:
        return None
    if base == 0:
        return 0.0 if delta == 0 else None
    return 100.0 * delta / abs(base)


def _beyond(base: float, new: float, limit_pct: float) -> bool:
    """Whether ``base`` -> ``new`` moved by more than ``limit_pct`` %, read the same either
    way round: the larger of the two more than ``limit_pct`` % above the smaller (+5.1 % one
    way is -4.9 % the other: against the base alone, a diff and its reverse would judge
    different keys near a limit). A change from or to zero, or across it, is beyond any
    limit."""
    if base == new:
        return False
    if base * new <= 0:
        return True
    return abs(new - base) > limit_pct / 100 * min(abs(base), abs(new))


def _fmt_p(p: float) -> str:
    if p == 0:
        return "<1e-300"  # below what a double holds
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def _p_is(p: float) -> str:
    """``p=0.31`` for a note (``p<1e-300`` below what a double holds)."""
    text = _fmt_p(p)
    return f"p{text}" if text.startswith("<") else f"p={text}"


@dataclass
class _Row:
    scope: str
    key: str
    metric: str
    base: float | None
    new: float | None
    verdict: str
    p_value: float | None
    note: str
    low: float | None = None
    high: float | None = None
    effect: float = 0.0
    order: int = 0
    weight: float = 0.0  # (the order of a scope's rows of equal effect: the largest first)


def _judge(base: float, new: float, threshold: float, direction: int,
           real: bool, held: str, within: str = "threshold",
           undirected: str = "a launch setting with no better/worse direction: not judged") -> tuple[str, str]:
    """(verdict, note): beyond the threshold and ``real`` -> regressed/improved by
    ``direction`` (+1: higher is worse, -1: higher is better, 0: no direction, said by
    ``undirected``); ``within`` names what the threshold is in the note."""
    if math.isnan(base) or math.isnan(new):  # (NaN is beyond no limit: never "within threshold")
        return "unchanged", "no number on one side (NaN): not judged"
    delta = new - base
    pct = _pct(delta, base)
    if delta == 0:
        return "unchanged", "identical"
    if not _beyond(base, new, threshold):  # (then |pct| <= threshold too)
        return "unchanged", f"within {within} (|{pct:+z.2f}%| <= {threshold:g}%)"
    if not real:
        return "unchanged", held
    if direction == 0:
        return "unchanged", f"differs; {undirected}"
    worse = (delta > 0) == (direction > 0)
    return ("regressed" if worse else "improved"), ""


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def limit(scope: str, metric: str, threshold: float, host_judged: bool) -> tuple[float, str] | None:
    """The change (%) a metric must pass to be judged and what that limit is, for the note;
    None: the metric is not judged: host-timed in runs where host time is not judged
    (``HOST_TIMED``), a Python function's sampled wall time always (``_python_scope``)."""
    if scope == "python":
        return None
    if scope == "sweep" and metric.startswith("latency_p"):
        floor, noise = HOST_TAIL_NOISE_PCT, "the tail latency noise of identical captures"
    elif scope == "sweep" and metric.startswith("latency_"):
        floor, noise = HOST_NOISE_PCT, "the latency noise of identical captures"
    elif scope == "um":
        floor, noise = UM_NOISE_PCT, "the page-fault noise of identical captures"
    elif scope == "cpu" or metric == "cpu_ns":
        floor, noise = CPU_NOISE_PCT, "the sampling noise of identical captures"
    elif scope == "memcpy" and metric.endswith("_ns"):
        floor, noise = COPY_NOISE_PCT, "the copy noise of identical captures"
    elif (scope, metric) in HOST_TIMED:
        if not host_judged:
            return None
        floor, noise = HOST_NOISE_PCT, "the host noise of identical captures"
    else:
        return threshold, "threshold"
    return (floor, noise) if threshold < floor else (threshold, "threshold")


def _spread_p(delta: float, sd: float) -> float | None:
    """Two-sided p of a change ``delta`` of a sum whose spread (standard deviation) is
    ``sd``, normal approximation; None where there is no spread."""
    return math.erfc(abs(delta) / (math.sqrt(2) * sd)) if sd > 0 else None


def _stat_rows(scope: str, key: str, r: dict, metrics: list[tuple], threshold: float, match: str,
               effect: float, scale: float = 1.0, host_judged: bool = False) -> list[_Row]:
    """Rows of one key present in both runs. ``metrics``: (metric, kind, direction) with
    kind count, total, median or p95 (from compare.sql's columns); ``scale`` converts the
    sample unit to the metric's; ``host_judged``: host-timed metrics are judged (runs
    without CUDA)."""
    p = r["p_value"]
    n_b, n_n = r["n_base"], r["n_new"]
    count_pct = _pct(n_n - n_b, n_b)
    rows = []
    for i, (metric, kind, direction) in enumerate(metrics):
        low = high = None
        floor = limit(scope, metric, threshold, host_judged)
        pct_limit, within = floor or (threshold, "threshold")
        if kind == "count":
            b, n = float(n_b), float(n_n)
            verdict, note = _judge(b, n, pct_limit, direction, True, "", within)
            pv = None
            low = high = _pct(n - b, b)
        else:
            pv = p
            p_note = f"not significant ({_p_is(p)})" if p is not None else "not significant"
            if kind == "total":
                b, n = r["total_base"] * scale, r["total_new"] * scale
                count_real = count_pct is not None and _beyond(n_b, n_n, pct_limit)
                # the sum itself beyond its spread: instances of many sizes (copies of 32 B and
                # 200 kB under one name) whose largest got slower move no rank
                sd = math.sqrt(n_b * (r["var_base"] or 0.0) + n_n * (r["var_new"] or 0.0)) * scale
                p_sum = _spread_p(n - b, sd)
                sum_real = p_sum is not None and p_sum < ALPHA and not (p is not None and p < ALPHA)
                real = count_real or (p is not None and p < ALPHA) or sum_real
                verdict, note = _judge(b, n, pct_limit, direction, real, p_note, within)
                if verdict in ("regressed", "improved"):
                    note = _join(f"instances {n_b:,} -> {n_n:,}" if n_b != n_n else "",
                                 f"the total beyond its spread ({_p_is(p_sum)}); per-instance {_p_is(p)}"
                                 if sum_real else f"per-instance {_p_is(p)}" if p is not None else "")
                spread = _Z95 * sd
                if b:
                    low, high = _pct(n - b - spread, b), _pct(n - b + spread, b)
            else:
                col = "med" if kind == "median" else "p95"
                b, n = r[f"{col}_base"] * scale, r[f"{col}_new"] * scale
                real = p is not None and p < ALPHA
                verdict, note = _judge(b, n, pct_limit, direction, real, p_note, within)
                if verdict in ("regressed", "improved") and scope not in ("sweep", "bench") and count_pct is not None \
                        and _beyond(n_b, n_n, threshold):
                    # another number of instances under one key is another mix of them (a kernel
                    # launched at two sizes, one of them twice as often): its median moves with the
                    # mix; the count and the total say what changed
                    verdict, note = "unchanged", f"instances {n_b:,} -> {n_n:,}: the median of another mix, not judged"
                if kind == "median" and b:
                    low = _pct(r["med_lo_new"] * scale - r["med_hi_base"] * scale, b)
                    high = _pct(r["med_hi_new"] * scale - r["med_lo_base"] * scale, b)
        if floor is None and b != n:  # its delta and p-value are in their columns
            verdict, note = "unchanged", HOST_NOTE
        rows.append(_Row(scope, key, metric, b, n, verdict, pv, _join(match, note), low, high, effect, i))
    return rows


def _one_side_rows(scope: str, key: str, r: dict, metrics: list[tuple], match: str, effect: float,
                   scale: float = 1.0) -> list[_Row]:
    added = r["n_base"] == 0
    rows = []
    for i, (metric, kind, _direction) in enumerate(metrics):
        side = "new" if added else "base"
        if kind == "count":
            v = float(r[f"n_{side}"])
        elif kind == "total":
            v = r[f"total_{side}"] * scale
        else:
            v = r[f"{'med' if kind == 'median' else 'p95'}_{side}"] * scale
        b, n = (None, v) if added else (v, None)
        note = _join(match, "only in the new run" if added else "only in the base run")
        rows.append(_Row(scope, key, metric, b, n, "added" if added else "removed", None, note, None, None, effect, i))
    return rows


def _key_rows(scope: str, df: pl.DataFrame, names: dict, metrics: list[tuple], threshold: float,
              notes: dict | None = None, scale: float = 1.0, effect_scale: float = 1.0) -> list[_Row]:
    rows: list[_Row] = []
    for r in df.iter_rows(named=True):
        key = names.get(r["key"], str(r["key"])) if names else str(r["key"])
        match = (notes or {}).get(r["key"], "")
        effect = abs((r["total_new"] or 0) - (r["total_base"] or 0)) * effect_scale
        if r["n_base"] == 0 or r["n_new"] == 0:
            rows += _one_side_rows(scope, key, r, metrics, match, effect, scale)
        else:
            rows += _stat_rows(scope, key, r, metrics, threshold, match, effect, scale)
    return rows


# -- nsys scopes --------------------------------------------------------------------


def _names(con, ids) -> dict[int, str]:
    ids = [int(i) for i in ids if i is not None]
    if not ids:
        return {}
    return dict(con.execute("SELECT string_id, value FROM _strings WHERE string_id IN (SELECT unnest(?))", [ids]).fetchall())


def _present(con, params: dict, table: str) -> dict[int, set[int]]:
    """The name ids of ``table`` (_kernels, _api_calls) per side (0 base, 1 new)."""
    rows = con.execute(
        f"SELECT DISTINCT s.side, t.name_id FROM (VALUES (0, $base), (1, $new)) s(side, run_id) "
        f"JOIN {table} t ON t.run_id = s.run_id WHERE t.run_id IN ($base, $new)", params).fetchall()
    out: dict[int, set[int]] = {0: set(), 1: set()}
    for side, name_id in rows:
        out[side].add(name_id)
    return out


#: the columns of _diff_keymap: a name id of the new run (side 1) and the base run's id it is compared as
_KEYMAP = {"side": pl.Int32, "name_id": pl.Int64, "key": pl.Int64}


def _keymap(pairs: list[tuple[int, int]]) -> pl.DataFrame:
    """_diff_keymap rows of (new id, base id) pairs. (Polars, not pyarrow: building Arrow
    arrays from Python values makes pyarrow import pandas where it is installed, 0.2-0.5 s.)"""
    return pl.DataFrame({"side": [1] * len(pairs), "name_id": [n for n, _ in pairs], "key": [b for _, b in pairs]},
                        schema=_KEYMAP)


def _namesakes(con, present: dict[int, set[int]]) -> pl.DataFrame:
    """_diff_keymap rows that give a name of the new run the base run's id of the same
    text where the two differ: a Parquet dataset's runs number their names apart
    (tracekit.dataset); in the store one name has one id and this is empty."""
    fresh = present[1] - present[0]
    pairs: list[tuple[int, int]] = []
    if fresh:
        base = {}
        for sid, value in sorted(_names(con, present[0] - present[1]).items(), reverse=True):
            base[value] = sid  # the lowest id of a text
        pairs = [(nid, base[v]) for nid, v in sorted(_names(con, fresh).items()) if v in base]
    return _keymap(pairs)


def _match_kernels(con, params: dict) -> tuple[pl.DataFrame, dict[int, str]]:
    """The kernels' keys across runs: namesakes (_namesakes), then matches of kernels
    without one (by place and family): (_diff_keymap rows, note per matched key)."""
    sides = _present(con, params, "_kernels")
    same = _namesakes(con, sides)
    renumber = dict(zip(same["name_id"].to_list(), same["key"].to_list(), strict=True))
    sides[1] = {renumber.get(n, n) for n in sides[1]}
    only = {0: sides[0] - sides[1], 1: sides[1] - sides[0]}
    if not only[0] or not only[1]:
        return same, {}
    unmatched = pl.DataFrame({"side": [0] * len(only[0]) + [1] * len(only[1]),
                              "name_id": sorted(only[0]) + sorted(only[1])}, schema={"side": pl.Int64, "name_id": pl.Int64})
    con.register("_diff_unmatched", unmatched)
    try:
        places = con.sql(_sql("kernel_places"), params=params).pl()
    finally:
        con.unregister("_diff_unmatched")
    left = {s: {r["name_id"]: r for r in places.filter(pl.col("side") == s).iter_rows(named=True)} for s in (0, 1)}
    pairs: list[tuple[int, int, str]] = []  # (base id, new id, how)

    def take(keyfn, how) -> None:
        groups: dict[Any, list[list[int]]] = {}
        for s in (0, 1):
            for nid, r in left[s].items():
                k = keyfn(r)
                if k is not None:
                    groups.setdefault(k, [[], []])[s].append(nid)
        for _k, (b, n) in sorted(groups.items(), key=lambda kv: str(kv[0])):
            if len(b) == 1 and len(n) == 1:  # unambiguous on both sides
                rb, rn = left[0].pop(b[0]), left[1].pop(n[0])
                pairs.append((b[0], n[0], how(rb, rn)))

    def place(r):
        return None if r["path"] is None else (r["path"], r["position"])

    take(lambda r: None if place(r) is None else (*place(r), r["family"]),
         lambda b, n: f"matched by place (NVTX {b['path']}, launch {b['position']} in it) and family "
                      f"{b['family']} to base kernel {b['name']}")
    take(place, lambda b, n: f"matched by place (NVTX {b['path']}, launch {b['position']} in it; family "
                             f"{b['family']} -> {n['family']}) to base kernel {b['name']}")
    take(lambda r: r["family"], lambda b, n: f"matched by family {b['family']} (the only one left in each run; "
                                             f"places differ) to base kernel {b['name']}")
    return pl.concat([same, _keymap([(n, b) for b, n, _ in pairs])]), {b: how for b, _, how in pairs}


def _kernel_scope(con, params: dict, threshold: float,
                  matched: tuple[pl.DataFrame, dict[int, str]]) -> tuple[list[_Row], dict[str, int]]:
    """The kernel rows, and each row's key (the kernel's name) -> its key id in the samples
    (``_with_the_sm_clock``). ``matched``: _match_kernels' keymap and notes."""
    keymap, notes = matched
    con.register("_diff_keymap", keymap)
    try:
        df = _compare(con, _sql("samples_kernel"), params)
    finally:
        con.unregister("_diff_keymap")
    # a matched kernel is shown under its new name
    new_name = {int(b): int(n) for n, b in zip(keymap["name_id"].to_list(), keymap["key"].to_list(), strict=True)}
    names = _names(con, list(df["key"]) + list(new_name.values()))
    shown = {k: names.get(new_name.get(k, k), str(k)) for k in df["key"]}
    metrics = [("total_ns", "total", 1), ("instances", "count", 1), ("med_ns", "median", 1)]
    return _key_rows("kernel", df, shown, metrics, threshold, notes), {v: k for k, v in shown.items()}


def _simple_scope(con, scope: str, sql: str, params: dict, threshold: float, metrics, named: bool,
                  effect_scale: float = 1.0) -> list[_Row]:
    df = _compare(con, sql, params)
    names = _names(con, df["key"]) if named else {}
    return _key_rows(scope, df, names, metrics, threshold, effect_scale=effect_scale)


def _sampled(con, sql: str, params: dict) -> tuple[dict[str, list[int]], list[float]]:
    """Per key, the two runs' sample counts, and each run's sampling interval (a query of
    side, key, samples, interval_ns: samples_cpu.sql, samples_nvtx_cpu.sql, samples_python.sql)."""
    counts: dict[str, list[int]] = {}
    interval = [0.0, 0.0]
    for side, key, samples, interval_ns in con.execute(sql, params).fetchall():
        counts.setdefault(key, [0, 0])[side] = int(samples)
        interval[side] = float(interval_ns or 0.0)
    return counts, interval


def _sample_rows(scope: str, metric: str, key: str, a: int, b: int, interval: list[float],
                 threshold: float) -> _Row:
    """The row of a time measured by samples (``a`` and ``b`` of them, times each run's
    sampling interval). Sample counts are Poisson: a change is real where the two counts differ
    beyond that noise (with equal time each sample falls on either side as the intervals say,
    a binomial test in its normal approximation, p < ALPHA), and judged beyond ``CPU_NOISE_PCT``
    at the least. A key sampled in one run alone is added or removed only where its count alone
    is beyond that noise (else unchanged, said so); the interval of delta_pct is the 95 % one of
    the ratio of two Poisson counts. Where ``limit`` judges the metric not at all (a Python
    function's wall time), the row says so, with its p and interval."""
    judged = limit(scope, metric, threshold, False)
    base, new = a * interval[0], b * interval[1]
    share = interval[1] / (interval[0] + interval[1]) if all(interval) else 0.5  # (the base's expected share)
    z = (a - (a + b) * share) / math.sqrt((a + b) * share * (1 - share))  # (a + b > 0: the key was sampled)
    p = math.erfc(abs(z) / math.sqrt(2))
    low = high = None
    if a and b:
        spread = _Z95 * math.sqrt(1 / a + 1 / b)
        low, high = (100 * (new / base * math.exp(-spread) - 1), 100 * (new / base * math.exp(spread) - 1))
    if judged is None:
        alone = "" if a and b else "only in the new run" if a == 0 else "only in the base run"
        verdict, why = "unchanged", _join(alone, HOST_NOTE)
    elif a and b:
        verdict, why = _judge(base, new, judged[0], 1, p < ALPHA, f"within the sampling noise ({_p_is(p)})", judged[1])
    elif p < ALPHA:
        verdict, why = ("added" if a == 0 else "removed"), "only in the new run" if a == 0 else "only in the base run"
    else:
        verdict, why = "unchanged", f"sampled in one run alone, within the sampling noise ({_p_is(p)})"
    if verdict in ("added", "removed"):  # (the other side had none: no value, as other scopes' added keys)
        base, new = (None, new) if verdict == "added" else (base, None)
    # (host time, not the GPU's: after the GPU time rows, effect 0; the most host time first)
    return _Row(scope, key, metric, base, new, verdict, p, _join(f"samples {a:,} -> {b:,}", why), low, high, 0.0,
                weight=max(base or 0.0, new or 0.0))


def _cpu_scope(con, params: dict, threshold: float) -> list[_Row]:
    """Per function, the CPU time in the function itself (self_ns: its samples times the run's
    sampling interval, samples_cpu.sql), judged as ``_sample_rows`` says."""
    counts, interval = _sampled(con, _sql("samples_cpu"), params)
    return [_sample_rows("cpu", "self_ns", key, a, b, interval, threshold) for key, (a, b) in counts.items()]


def _python_scope(con, params: dict, threshold: float) -> list[_Row]:
    """Per Python function (function (file), samples_python.sql), the sampled wall time in the
    function itself (self_ns) and inside it (total_ns): reported with its p and interval as
    ``_sample_rows`` computes them, never judged (``HOST_NOTE``). A Python thread is sampled in
    every state, so its samples are wall time, which moves with the host between identical
    captures far beyond any limit that would still see a function twice as slow: four captures
    of one program (tests/data/nsys_python_hot, _again, _again2, _again3) differ in torch's
    import by up to 43 % (2,799 against 4,065 samples under torch/__init__.py, p < 1e-18) and in
    a function that import runs from 63 samples to 1; three of the inference pipeline
    (tests/data/hstu_capture_python, _again, _again2) in its Triton launcher from 30 to 68
    samples minutes apart, in its attention call from 45 to 154 across leases of the machine.
    The rows say where the Python time moved: the planted 2x (tests/data/nsys_python_hot_slow:
    parse 308 -> 629 samples) reads +104 %."""
    rows = []
    for metric in ("self_ns", "total_ns"):
        counts, interval = _sampled(con, _sql("samples_python"), {**params, "metric": metric})
        rows += [_sample_rows("python", metric, key, a, b, interval, threshold) for key, (a, b) in counts.items()]
    return rows


def _memory_scope(con, params: dict, threshold: float, paths: bool = True) -> list[_Row]:
    """GPU memory per device and kind (peak_bytes, live_at_end_bytes, allocations,
    allocated_bytes) and, with ``paths`` (both captures traced NVTX), per NVTX path and kind
    (allocations, allocated_bytes, unfreed_bytes; samples_memory.sql). What a program
    allocates does not move between captures (two captures of tests/data/nsys_mem, and of
    nsys_mem_again, agree to the byte): each value is exact, a change beyond the threshold
    real, as counts are. More is worse."""
    values: dict[tuple[str, str], list[float | None]] = {}
    for side, key, metric, value in con.execute(_sql("samples_memory"), {**params, "paths": paths}).fetchall():
        values.setdefault((key, metric), [None, None])[side] = float(value)
    weight: dict[str, float] = {}  # (a key's rows together, the most bytes first)
    for (key, metric), sides in values.items():
        if metric.endswith("_bytes"):
            weight[key] = max(weight.get(key, 0.0), *(v or 0.0 for v in sides))
    rows = []
    for (key, metric), (base, new) in values.items():
        if metric == "unfreed_bytes" and not base and not new:
            continue  # (a path whose allocations were all freed on both sides: nothing to say)
        if base is None or new is None:
            verdict, note = ("added", "only in the new run") if base is None else ("removed", "only in the base run")
            low = high = None
        else:
            verdict, note = _judge(base, new, threshold, 1, True, "")
            low = high = _pct(new - base, base)
        rows.append(_Row("memory", key, metric, base, new, verdict, None, note, low, high, 0.0,
                         MEMORY_METRICS.index(metric), weight=weight.get(key, 0.0)))
    return rows


def _nvtx_scope(con, params: dict, threshold: float, gpu: bool = True, host_judged: bool = False,
                cpu: bool = False) -> list[_Row]:
    """``gpu``: both runs traced CUDA (else their ranges' GPU work is not compared, and the
    rows are ordered by their change in wall time, the only time both runs have);
    ``host_judged``: neither did, and wall time is judged too; ``cpu``: both sampled the CPU,
    and each path's CPU time (cpu_ns, its samples: ``_sample_rows``) is judged, host work that
    its wall time, paced by the GPU and the host, hides."""
    samples = _sql("samples_nvtx")
    ranges = _compare(con, samples, params)
    parts = {}  # per key: the summary of its kernel time and of its projection
    for metric, col in (("kernel_total_ns", "kern"), ("proj_total_ns", "proj")) if gpu else ():
        df = _compare(con, f"SELECT side, key, {col} AS value FROM (\n{samples}\n) WHERE {col} IS NOT NULL", params)
        parts[metric] = {r["key"]: r for r in df.iter_rows(named=True)}
    sampled, interval = _sampled(con, _sql("samples_nvtx_cpu"), params) if cpu else ({}, [0.0, 0.0])
    rows: list[_Row] = []
    for r in ranges.iter_rows(named=True):
        key = r["key"]
        kr = parts.get("kernel_total_ns", {}).get(key)
        effect = abs((kr["total_new"] or 0) - (kr["total_base"] or 0)) if kr else 0.0
        order = 0
        for metric in ("kernel_total_ns", "proj_total_ns"):
            pr = parts.get(metric, {}).get(key)
            if pr is None:
                continue
            if pr["n_base"] > 0 and pr["n_new"] > 0:
                out = _stat_rows("nvtx", key, pr, [(metric, "total", 1)], threshold, "", effect)
            else:  # GPU work in one run only
                both = r["n_base"] > 0 and r["n_new"] > 0
                out = _one_side_rows("nvtx", key, pr, [(metric, "total", 1)],
                                     "GPU work in one run only" if both else "", effect)
            for x in out:
                x.order = order
            rows += out
            order += 1
        if not gpu:
            effect = abs((r["total_new"] or 0) - (r["total_base"] or 0))
        metrics = [("range_total_ns", "total", 1), ("range_med_ns", "median", 1), ("instances", "count", 1)]
        if r["n_base"] == 0 or r["n_new"] == 0:
            out = _one_side_rows("nvtx", key, r, metrics, "", effect)
        else:
            out = _stat_rows("nvtx", key, r, metrics, threshold, "", effect, host_judged=host_judged)
        if key in sampled:
            row = _sample_rows("nvtx", "cpu_ns", key, *sampled[key], interval, threshold)
            row.effect, row.weight, row.order = effect, 0.0, len(metrics)
            out.append(row)
        for x in out:
            x.order += order
        rows += out
    return rows


def _gpu_scope(con, params: dict, threshold: float, keymap: pl.DataFrame) -> list[_Row]:
    """Busy time per device. Busy time is a union of op intervals; its change is real when
    the count of ops changed beyond the threshold, or when the ops' summed time moved the
    same way beyond its noise: per kind of op (kernel, copy kind, memset, graph) the change
    of its total, over the spread of its durations within the kind (sqrt(n var), as for
    every total), summed over the kinds (a kind in one run only counts with its total), and
    that sum beyond the threshold of the busy time. A memory operation's kind (copy kind,
    memset) whose total moved within the copy noise of identical captures (``COPY_NOISE_PCT``,
    as the memcpy scope judges it) adds no change: nsys_mem and nsys_mem_again's one
    host-to-device copy, 82 % of their busy time, 7 % apart, is no faster or slower GPU.
    Within a kind, so that many kinds of very different durations do not hide the one that
    moved: a rank test over every op of a device did not see the inference capture's
    dominant kernel get 1.8x slower (tests/data/hstu_capture_pair), and a rank test per kind
    finds heavy kernels that drift by 1 % "significant" (their launches separate completely).
    ``keymap``: the kernels' matches across the runs (_match_kernels), so that a kernel is
    one kind of op under both its names."""
    con.register("_diff_keymap", keymap)
    try:
        kinds = _compare(con, _sql("samples_gpu"), params)
    finally:
        con.unregister("_diff_keymap")
    busy = {(s, k): v for s, k, v in con.execute(_sql("gpu_busy"), params).fetchall()}
    copy_limit, copy_said = limit("memcpy", "total_ns", threshold, False)
    devices: dict = {}
    for r in kinds.iter_rows(named=True):
        dev = (r["key"] >> 44) - 1  # (samples_gpu.sql's key)
        d = devices.setdefault(None if dev < 0 else dev,
                               {"n_base": 0, "n_new": 0, "delta": [], "moved": [], "var": [], "copy_noise": False})
        d["n_base"] += r["n_base"]
        d["n_new"] += r["n_new"]
        total_b, total_n = r["total_base"] or 0.0, r["total_new"] or 0.0
        # a memory operation's kind whose time moved within the copy noise of identical captures (as the
        # memcpy scope judges it) moved no op's time: a copy 7 % shorter is no faster GPU (nsys_mem, _again)
        copy_noise = ((r["key"] >> 43) & 1 and r["n_base"] and r["n_new"]
                      and not _beyond(total_b, total_n, copy_limit))
        d["moved"].append(total_n - total_b)
        d["delta"].append(0.0 if copy_noise else total_n - total_b)
        d["copy_noise"] |= bool(copy_noise)
        d["var"].append(r["n_base"] * (r["var_base"] or 0.0) + r["n_new"] * (r["var_new"] or 0.0))
    rows: list[_Row] = []
    for dev, d in sorted(devices.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        key = f"device {dev}"
        b, n = float(busy.get((0, dev)) or 0), float(busy.get((1, dev)) or 0)
        effect = abs(n - b)
        if d["n_base"] == 0 or d["n_new"] == 0:
            s = {"n_base": d["n_base"], "n_new": d["n_new"], "total_base": b, "total_new": n}
            rows += _one_side_rows("gpu", key, s, [("busy_ns", "total", 1)], "", effect)
            continue
        # (exact sums: the kinds come in the order of their ids, which a dataset numbers apart)
        delta, var = math.fsum(d["delta"]), math.fsum(d["var"])
        p = _spread_p(delta, math.sqrt(var))
        if p is None:  # (every duration alike within its kind: any change is real)
            p = 1.0 if delta == 0 else 0.0
        count_pct = _pct(d["n_new"] - d["n_base"], d["n_base"])
        count_real = count_pct is not None and _beyond(d["n_base"], d["n_new"], threshold)
        same_way = (delta > 0) == (n > b) and delta != 0
        # (the ops' change beyond their noise must pass the threshold itself: copies within theirs do not carry it)
        big = _beyond(b, b + delta, threshold)
        time_real = p < ALPHA and same_way and big
        if p < ALPHA and not same_way:
            held = f"the ops' time moved the other way ({_p_is(p)})"
        elif p < ALPHA and not big:
            held = f"the ops' time {_human('x_ns', delta)} ({_p_is(p)}): within threshold of the busy time"
        else:
            held = f"not significant ({_p_is(p)}, the ops' time by kind)"
        if d["copy_noise"]:
            held = _join(held, f"memory operations within {copy_said} left out")
        verdict, note = _judge(b, n, threshold, 1, count_real or time_real, held)
        if verdict in ("regressed", "improved"):
            note = _join(f"ops {d['n_base']:,} -> {d['n_new']:,}" if d["n_base"] != d["n_new"] else "",
                         f"the ops' time {_human('x_ns', math.fsum(d['moved']))}, {_p_is(p)}" if time_real else "")
        rows.append(_Row("gpu", key, "busy_ns", b, n, verdict, p, note, None, None, effect, 0))
    return rows


# -- ncu ----------------------------------------------------------------------------

#: (metric, column, direction): +1 higher is worse, -1 higher is better, 0 no direction
NCU_METRICS = [
    ("duration_ns", "duration_ns", 1),  # the median launch
    ("launch_total_ns", "duration_ns", 1),  # the key's launches summed: what the kernel costs in the report
    ("launches", None, 0),
    ("elapsed_cycles", "elapsed_cycles", 0),
    ("sm_frequency_hz", "sm_frequency_hz", 0),
    ("sm_throughput_pct", "sm_throughput_pct", -1),
    ("memory_throughput_pct", "memory_throughput_pct", -1),
    ("dram_throughput_pct", "dram_throughput_pct", -1),
    ("theoretical_occupancy_pct", "theoretical_occupancy_pct", 0),  # (follows from the launch settings)
    ("achieved_occupancy_pct", "achieved_occupancy_pct", -1),
    ("registers_per_thread", "registers_per_thread", 0),
    ("shared_mem_per_block_bytes", "shared_mem_per_block_bytes", 0),  # (static + dynamic: what the kernel asks for)
    ("block_size", "block_size", 0),
    ("grid_size", "grid_size", 0),
    ("waves_per_sm", "waves_per_sm", 0),
    ("arithmetic_intensity_flop_per_byte", "ai_dram", 0),
    ("achieved_flops_per_s", "flops_per_s", -1),
    ("roof_pct", "roof_pct", -1),
    ("warp_cycles_per_issue", "warp_cycles_per_issue", 0),
]
#: metrics that describe the launch (exact in every replay); the others are measured
NCU_EXACT = {"theoretical_occupancy_pct", "registers_per_thread", "shared_mem_per_block_bytes", "block_size", "grid_size",
             "waves_per_sm"}
#: the launches' time: judged on its own; a measured rate (throughput, occupancy, FLOP/s, %
#: of roof) is judged only with it (the time moved, the rate moved the same way: it says why)
NCU_TIME = ("duration_ns", "launch_total_ns")
#: a measured ncu value of a launch of duration d moves between two reports of one program
#: by up to NCU_NOISE_NS / d + NCU_NOISE_PCT (a change is judged only beyond that, or the
#: threshold if larger): in the three reports of tests/data/hstu_capture_ncu_pair (65
#: launches of 2.9 us to 315 us each, --clock-control none) a launch's duration moves by
#: ~100 ns whatever its length (the median move 96-128 ns; under 100 us at most 416 ns, 384 ns
#: of them 12.5 % of a 3.1 us launch), its rates
#: (throughputs, FLOP/s, % of roof) with it (at most 473 ns-equivalent, 15.4 %), and
#: launches over 100 us by at most 1.4 % (DRAM throughput 2.4 %); three reports each of two
#: more programs (tests/data/programs/ncu_shapes.py a, ncu_kernels.py: 2.5 to 222 us) with
#: --clock-control base (ncu's default, locked clocks) and none moved by at most 3.6 % (1.6 us
#: of a 45 us launch, locked clocks): 0.86 of this band at the most
NCU_NOISE_NS = 500.0
NCU_NOISE_PCT = 3.0
#: what the two rows of the launch's clock say where they differ (never judged: a launch's
#: cycles are read with its duration, and the clock is the GPU's, not the code's)
NCU_CLOCK_NOTES = {
    "elapsed_cycles": "the launch's cycles at its SM clock: read with the duration, not judged alone",
    "sm_frequency_hz": "the SM clock the GPU ran the launch at (power, temperature, --clock-control), "
                       "not the code: not judged",
}
#: the note of a duration that moved with the SM clock in as many cycles (``_with_the_clock``)
CLOCK_NOTE = "moved with the SM clock"
#: a stall reason (Warp State Statistics) is compared where either report's launches spend
#: at least this many cycles per issued instruction in it (below, its share is noise)
STALL_MIN_CYCLES = 0.5

#: the note of a request latency that moved with the host's pace (``_with_the_host``)
HOST_PACE_NOTE = "moved with the host's pace"
#: the notes of a bench variant's time that moved with its baseline's, and of a baseline's that
#: every other variant moved with (``_bench_scope``)
BENCH_PACE_NOTE = "moved with its baseline"
BENCH_BASELINE_NOTE = "moved with its variants"
#: the note of a request latency that a side timed under ncu (``_under_ncu``): ncu serialises
#: the launches and replays each kernel it profiles, so the latency is mostly its own (3.5-4.1x
#: the untraced on the H200, tests/data/hstu_sweep_tools); the ncu scope compares the kernels
NCU_TIMED_NOTE = "timed under ncu"
#: the notes of changes held because the machine or the profiler, not the code, moved them
HELD_NOTES = (CLOCK_NOTE, HOST_PACE_NOTE, BENCH_PACE_NOTE, BENCH_BASELINE_NOTE, NCU_TIMED_NOTE)
#: each in a word or two (compare's cells)
HELD_WORDS = dict(zip(HELD_NOTES, ("clock", "host pace", "baseline's pace", "variants' pace", "ncu"), strict=True))
#: a launch API's calls in each run for its median to stand for the host's pace
PACE_MIN_CALLS = 20
#: clock samples (nsys --gpu-metrics-devices: 10 kHz by default) inside a key's work on each
#: side for its mean clock to stand for it (1 ms of GPU time at the default rate)
CLOCK_MIN_SAMPLES = 10


def held_by(note: str | None) -> str | None:
    """The ``HELD_NOTES`` entry a row's note holds it by, or None."""
    return next((h for h in HELD_NOTES if h in (note or "")), None)


#: the start of a memory operation's note where the memory it moved from or to changed
MEMORY_NOTE = "memory "


def _memory_kinds(con, params: dict) -> dict[str, str]:
    """Per memory operation whose memory kinds differ between the runs (a copy from
    pageable host memory in one, from pinned in the other): the note that says so,
    ``memory Pageable→Device -> Pinned→Device`` (each side's kinds, most bytes first)."""
    rows = con.execute(
        "SELECT s.side, o.operation, o.kinds, sum(o.bytes) AS b FROM (VALUES (0, $base), (1, $new)) s(side, run_id) "
        "JOIN (SELECT run_id, operation, coalesce(src_kind, '?') || '→' || coalesce(dst_kind, '?') AS kinds, bytes "
        "      FROM memcpy WHERE operation IS NOT NULL AND run_id IN ($base, $new) "
        "      UNION ALL SELECT run_id, operation, coalesce(mem_kind, '?'), bytes FROM memset "
        "      WHERE run_id IN ($base, $new)) o ON o.run_id = s.run_id "
        "GROUP BY ALL ORDER BY s.side, o.operation, b DESC NULLS LAST, o.kinds", params).fetchall()
    sides: dict[str, list[list[tuple[str, float]]]] = {}
    for side, op, kinds, nbytes in rows:
        sides.setdefault(op, [[], []])[side].append((kinds, float(nbytes or 0)))

    def said(kinds: list[tuple[str, float]]) -> str:  # (several kinds: each one's share of the bytes)
        total = sum(b for _, b in kinds)
        if len(kinds) == 1 or not total:
            return ", ".join(k for k, _ in kinds)
        return ", ".join(f"{k} {100 * b / total:.0f}%" for k, b in kinds)

    return {op: f"{MEMORY_NOTE}{said(b)} -> {said(n)}" for op, (b, n) in sides.items()
            if b and n and {k for k, _ in b} != {k for k, _ in n}}


def _ncu_groups(df: pl.DataFrame, side: int) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for r in df.filter(pl.col("side") == side).iter_rows(named=True):
        groups.setdefault((r["name"], r["nvtx_path"]), []).append(r)
    return groups


#: from this many launches that moved, a key's launch-by-launch change is judged by a sign
#: test (p < ALPHA: 8 launches all one way give p = 0.0078); fewer: every launch that moved
#: must have moved the same way, and most launches must have moved
SIGN_MIN = 8


def _sign_p(up: int, down: int) -> float:
    """Two-sided exact sign test: the chance of a split at least as lopsided as up:down."""
    n, k = up + down, min(up, down)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def _counterparts(lb_: list[dict], ln_: list[dict]) -> list[tuple[dict, dict]] | None:
    """Each launch of the base report with its counterpart in the new one, where both
    reports have as many: the k-th launch of a grid and block with the k-th of the same grid
    and block where they have as many of each (ncu numbers launches in the order it
    intercepted them: host threads, processes or a changed program reorder them, and a
    launch at one size would be paired with one at another), else (a grid or block that
    changed) the k-th launch with the k-th; None where the counts differ."""
    if len(lb_) != len(ln_):
        return None

    def by_shape(launches: list[dict]) -> dict[tuple, list[dict]]:
        out: dict[tuple, list[dict]] = {}
        for x in launches:
            out.setdefault((x["grid_size"], x["block_size"]), []).append(x)
        return out

    gb, gn = by_shape(lb_), by_shape(ln_)
    if {k: len(v) for k, v in gb.items()} != {k: len(v) for k, v in gn.items()}:
        return list(zip(lb_, ln_, strict=True))
    return [pair for shape, launches in gb.items() for pair in zip(launches, gn[shape], strict=True)]


def _paired(pairs: list[tuple[float, float]], limit_pct: float, change: float) -> tuple[bool, str]:
    """(real, why not) for launches compared with their counterparts: a launch that moved
    by no more than ``limit_pct`` (the limit the change is judged by) moved neither way; the
    launches that moved must all have moved one way and be most of them, or, from SIGN_MIN
    of them, pass a sign test, the way ``change`` (the medians' change the verdict is read
    from) went."""
    steps = [y - x if _beyond(x, y, limit_pct) else 0.0 for x, y in pairs]
    up, down = sum(d > 0 for d in steps), sum(d < 0 for d in steps)
    moved = up + down
    if moved and change and up != down and (up > down) != (change > 0):
        return False, f"most launches moved the other way from the median ({up} up, {down} down)"
    if moved >= SIGN_MIN:
        p = _sign_p(up, down)
        return p < ALPHA, f"launches moved both ways ({up} up, {down} down: sign test {_p_is(p)})"
    if up and down:
        return False, f"launches moved both ways ({min(steps):+z.3g}..{max(steps):+z.3g}, launch by launch)"
    return moved * 2 > len(steps), f"most launches moved by {limit_pct:g}% or less ({len(steps) - moved} of {len(steps)})"


def _with_the_clock(lb_: list[dict], ln_: list[dict], b: float, n: float, limit_pct: float) -> str | None:
    """The note of a duration change (``b`` -> ``n``, medians) that the SM clock accounts for:
    the launches took as many cycles (the medians' change within ``limit_pct``, the limit the
    duration is judged by) at a clock that moved the other way, by at least half the
    duration's change (in log terms); None otherwise, or where a report lacks the clock.
    The same GEMM on zeros draws less power than on random data, so a power-limited GPU runs
    it at a higher clock: 12 % shorter in 0.8 % fewer cycles (tests/data/ncu_clocks_random,
    _zeros, both --clock-control none); ncu's default --clock-control base locks the clock
    lower than a GPU left alone runs it."""
    def median(side: list[dict], col: str) -> float | None:
        v = [x[col] for x in side if x[col] is not None and x[col] > 0]
        return float(np.median(v)) if v else None

    cb, cn = median(lb_, "elapsed_cycles"), median(ln_, "elapsed_cycles")
    fb, fn = median(lb_, "sm_frequency_hz"), median(ln_, "sm_frequency_hz")
    if None in (cb, cn, fb, fn) or cb <= 0:
        return None
    return _clock_accounts(b, n, fb / 1e6, fn / 1e6, 100 * (cn - cb) / cb, limit_pct)


def _clock_accounts(b: float, n: float, fb: float, fn: float, cycles: float, limit_pct: float,
                    how: str = "") -> str | None:
    """The note of a time change (``b`` -> ``n``) that the SM clock (``fb`` -> ``fn``, MHz)
    accounts for: in as many cycles (their change ``cycles`` %, within ``limit_pct``) at a
    clock that moved the other way by at least half the time's change (in log terms); None
    otherwise. ``how``: where the clock was read, for the note."""
    if b <= 0 or n <= 0 or fb <= 0 or fn <= 0:
        return None
    if _beyond(1.0, 1 + cycles / 100, limit_pct) or (n - b) * (fn - fb) >= 0 or abs(math.log(fn / fb)) < 0.5 * abs(math.log(n / b)):
        return None
    return (f"{CLOCK_NOTE} ({fb:,.0f} -> {fn:,.0f} MHz, {100 * (fn - fb) / fb:+z.1f}%{how}) in as many "
            f"cycles ({cycles:+z.1f}%, within {limit_pct:g}%): the clock, not the code")


def _with_the_sm_clock(con, rows: list[_Row], params: dict, keymap: pl.DataFrame, ids: dict[str, int],
                       threshold: float, labels: tuple[str, str]) -> None:
    """Hold the nsys GPU times judged changed (``rows``, in place: a kernel's total_ns and
    med_ns, an NVTX path's kernel_total_ns, a device's busy_ns) that the SM clock accounts
    for, where both runs sampled the GPU's counters (nsys --gpu-metrics-devices): the clock
    is the mean of the samples taken inside its launches (kernel_clocks.sql; at least
    ``CLOCK_MIN_SAMPLES`` on each side), the cycles the time x that clock, and the rule
    ``_clock_accounts``'s; a kernel's total only where its launch count did not change
    beyond the threshold. The same GEMMs on zeros (tests/data/nsys_gpu_metrics_zeros) took
    11 % less time in all at a 13 % higher clock; the DRAM-bound adds beside them did not
    move. ``ids``: a kernel row's key -> its key id (``_kernel_scope``). Where only one run
    sampled them and a time is judged changed, a warning says the clock was not read."""
    timed = {("kernel", "total_ns"), ("kernel", "med_ns"), ("nvtx", "kernel_total_ns"), ("gpu", "busy_ns")}
    judged = [r for r in rows if r.verdict in ("regressed", "improved") and (r.scope, r.metric) in timed]
    if not judged:
        return
    sampled = {i for (i,) in con.execute("SELECT DISTINCT run_id FROM gpu_metric_names WHERE run_id IN ($base, $new)",
                                         params).fetchall()}
    if len(sampled) == 1 and params["base"] != params["new"]:
        which = labels[0] if params["base"] in sampled else labels[1]
        warn_from_caller(CaptureWarning(
            f"diff: only {which} sampled the GPU's counters (nsys --gpu-metrics-devices): the GPU times that "
            "changed are judged without the SM clock; capture both with them (tracekit capture --gpu-metrics) "
            "to tell the clock from the code"))
    if len(sampled) < (1 if params["base"] == params["new"] else 2):
        return
    counted = {r.key for r in rows if r.scope == "kernel" and r.metric == "instances" and r.verdict == "unchanged"}
    keys = sorted({ids[r.key] for r in judged if r.scope == "kernel" and r.key in ids})
    paths = sorted({r.key for r in judged if r.scope == "nvtx"})
    con.register("_diff_keymap", keymap)
    con.register("_diff_clock_keys", pl.DataFrame({"key": keys}, schema={"key": pl.Int64}))
    con.register("_diff_clock_paths", pl.DataFrame({"path": paths}, schema={"path": pl.Utf8}))
    try:
        got = con.execute(_sql("kernel_clocks"), {**params, "device": any(r.scope == "gpu" for r in judged)}).fetchall()
    finally:
        for name in ("_diff_keymap", "_diff_clock_keys", "_diff_clock_paths"):
            con.unregister(name)
    clocks = {(side, what, key): mhz for side, what, key, mhz, n in got if n >= CLOCK_MIN_SAMPLES}
    for r in judged:
        if r.scope == "kernel":
            if r.key not in ids or (r.metric == "total_ns" and r.key not in counted):
                continue
            what, key = "kernel", str(ids[r.key])
        elif r.scope == "nvtx":
            what, key = "nvtx", r.key
        else:
            what, key = "device", r.key.removeprefix("device ")
        fb, fn = clocks.get((0, what, key)), clocks.get((1, what, key))
        if fb is None or fn is None or not r.base or not r.new:
            continue
        note = _clock_accounts(r.base, r.new, fb, fn, 100 * (r.new * fn / (r.base * fb) - 1), threshold,
                               ", sampled by nsys")
        if note:
            r.verdict, r.note = "unchanged", _join(r.note, note)


def _paired_total(pairs: list[tuple[float, float]], threshold: float) -> tuple[bool, str]:
    """(real, why not) for the sum of launches' durations compared launch by launch: a launch
    that moved by no more than ncu's noise at its own duration (or the threshold, if larger)
    moved neither way; the sum changed for real when the launches that moved all moved one
    way, or, from SIGN_MIN of them, pass a sign test (p < ALPHA) the way the sum went. Some
    launches of a kernel twice as long and the others unchanged move its total, where
    the median launch does not move."""
    def step(x: float, y: float) -> float:  # (sized by the shorter launch: the same either way round)
        low = min(x, y)
        if low <= 0:
            return y - x
        return 0.0 if abs(y - x) <= max(threshold, 100 * NCU_NOISE_NS / low + NCU_NOISE_PCT) / 100 * low else y - x

    steps = [step(x, y) for x, y in pairs]
    up, down = sum(d > 0 for d in steps), sum(d < 0 for d in steps)
    change = sum(y for _, y in pairs) - sum(x for x, _ in pairs)
    if not up and not down:
        return False, "every launch within ncu's noise at its duration"
    if up != down and change and (up > down) != (change > 0):
        return False, f"most launches moved the other way from the sum ({up} up, {down} down)"
    if up + down >= SIGN_MIN:
        p = _sign_p(up, down)
        return p < ALPHA, f"launches moved both ways ({up} up, {down} down: sign test {_p_is(p)})"
    if up and down:
        return False, f"launches moved both ways ({up} up, {down} down)"
    return True, ""


#: how the parts of a note that say why a theoretical occupancy moved begin (``_occupancy_moved``;
#: ``moved`` reads them back): the binding block limit, what one block more per SM needs, a
#: block size that would hold more warps
OCCUPANCY_WHY = ("limiter: ", "one block more per SM: ", re.compile(r"block size \d+: "))


def _occupancy_moved(lb_: list[dict], ln_: list[dict], fell: bool) -> str:
    """Why a key's theoretical occupancy moved (query occupancy's columns of its launches): the
    block limit that binds it on each side where that changed (``limiter: registers ->
    shared_mem``; launches of several limits each named, ' / ' between them), and where it fell,
    what one block more per SM needs in the new launches (next_needs), where they all need the
    same, and the block size that would hold more warps with their registers and shared memory
    at the SM's largest carveout (``block size 256: 12.5 %``), where they all have the same other
    than their own and the block size did not change (where it did, the block_size row says so,
    and the base's size is what a reader goes back to)."""
    parts = []
    ob = sorted({x["occupancy_limiter"] for x in lb_ if x.get("occupancy_limiter")})
    on = sorted({x["occupancy_limiter"] for x in ln_ if x.get("occupancy_limiter")})
    if (ob or on) and ob != on:  # ('?': a side's report without the block limits)
        parts.append(f"{OCCUPANCY_WHY[0]}{' / '.join(ob) or '?'} -> {' / '.join(on) or '?'}")
    needs = {x.get("next_needs") for x in ln_}
    if fell and len(needs) == 1 and (need := needs.pop()):
        parts.append(f"{OCCUPANCY_WHY[1]}{need.replace('; ', ', ')}")
    best = {(x.get("best_block_size"), x.get("best_block_occupancy_pct")) for x in ln_}
    same_size = {x.get("block_size") for x in lb_} == {x.get("block_size") for x in ln_}
    if fell and same_size and len(best) == 1 and (size := next(iter(best)))[0] is not None \
            and all(size[0] != x["block_size"] for x in ln_):
        parts.append(f"block size {size[0]}: {size[1]:.3g} %")
    return _join(*parts)


#: how an ncu key found on both sides as it is was matched (said in the files' notes; the
#: terminal table leaves it out, as it does not say how a kernel of nsys's was)
NCU_SAME_KEY = ("matched by name and NVTX path", "matched by name")


def ncu_pairs(gb: dict[tuple, list], gn: dict[tuple, list]) -> list[tuple[str, tuple | None, tuple | None, str]]:
    """The ncu scope's keys: (key, base group, new group, how they were matched) for the
    launches of two reports grouped by (kernel name, NVTX path) (``_ncu_groups``; each
    group's launches carry their ``kernel_id``). A group is matched by name and NVTX path,
    then by name alone where one group of that name is left on each side, then by launch
    order; a group left over is in one report only (None on the other side). The key is the
    kernel name, with its NVTX path (``name @ path``) where the name has several in a report."""
    pairs: list[tuple[tuple | None, tuple | None, str]] = []
    for k in [k for k in gb if k in gn]:
        pairs.append((k, k, NCU_SAME_KEY[0] if k[1] else NCU_SAME_KEY[1]))
    lb = [k for k in gb if k not in gn]
    ln = [k for k in gn if k not in gb]
    for name in {k[0] for k in lb}:
        cb, cn = [k for k in lb if k[0] == name], [k for k in ln if k[0] == name]
        if len(cb) == 1 and len(cn) == 1:
            pairs.append((cb[0], cn[0], f"matched by name (NVTX path {cb[0][1]} -> {cn[0][1]})"))
            lb.remove(cb[0])
            ln.remove(cn[0])
    first = {k: min(r["kernel_id"] for r in v) for k, v in (*gb.items(), *gn.items())}
    lb.sort(key=lambda k: first[k])
    ln.sort(key=lambda k: first[k])
    for kb, kn in zip(lb, ln, strict=False):
        pairs.append((kb, kn, f"matched by launch order to base kernel {kb[0]}"))
    for kb in lb[len(ln):]:
        pairs.append((kb, None, ""))
    for kn in ln[len(lb):]:
        pairs.append((None, kn, ""))
    several = {k[0] for g in (gb, gn) for k in g if sum(1 for x in g if x[0] == k[0]) > 1}
    out = []
    for kb, kn, how in pairs:
        shown = kn or kb
        out.append((f"{shown[0]} @ {shown[1]}" if shown[0] in several else shown[0], kb, kn, how))
    return out


def ncu_launch_keys(con, base: int, new: int) -> pl.DataFrame:
    """The key (``ncu_pairs``) each profiled launch of ncu runs ``base`` and ``new`` has in
    their comparison: side (0 base, 1 new), kernel_id, key, and how its key was matched (empty
    for a key in one run only)."""
    df = con.sql(_sql("ncu_launches"), params={"base": base, "new": new}).pl()
    gb, gn = _ncu_groups(df, 0), _ncu_groups(df, 1)
    rows = [(side, r["kernel_id"], key, how) for key, kb, kn, how in ncu_pairs(gb, gn)
            for side, group in ((0, gb.get(kb, []) if kb else []), (1, gn.get(kn, []) if kn else []))
            for r in group]
    return pl.DataFrame(rows, schema={"side": pl.Int64, "kernel_id": pl.Int64, "key": pl.String, "how": pl.String},
                        orient="row")


def _ncu_scope(con, params: dict, threshold: float, launches: pl.DataFrame) -> list[_Row]:
    """The ncu scope's rows, of ``launches`` (``ncu_launches.sql``'s, read once for it and the
    source scope)."""
    df = launches
    stalls = con.sql(_sql("ncu_stalls"), params=params).pl()
    if stalls.height:  # one column per stall reason: stall_<reason>_cycles
        wide = stalls.with_columns(pl.format("stall_{}_cycles", "reason").alias("metric")).pivot(
            "metric", index=["side", "kernel_id"], values="cycles_per_issue")
        df = df.join(wide, on=["side", "kernel_id"], how="left")
    stall_cols = sorted(c for c in df.columns if c.startswith("stall_"))
    gb, gn = _ncu_groups(df, 0), _ncu_groups(df, 1)
    rows: list[_Row] = []
    for key, kb, kn, how in ncu_pairs(gb, gn):
        lb_, ln_ = gb.get(kb, []) if kb else [], gn.get(kn, []) if kn else []
        launches = f"launches {len(lb_)} -> {len(ln_)}" if lb_ and ln_ and len(lb_) != len(ln_) else ""
        dur = [np.median([x["duration_ns"] for x in lst if x["duration_ns"] is not None] or [np.nan]) for lst in (lb_, ln_)]
        effect = abs(np.nan_to_num(dur[1]) * len(ln_) - np.nan_to_num(dur[0]) * len(lb_))
        # the noise of the shorter side's launches (the same either way round; NaN: no duration)
        shorter = min((d for d in dur if d > 0), default=None)
        noise = None if shorter is None else round(100 * NCU_NOISE_NS / shorter + NCU_NOISE_PCT, 1)
        counterparts = _counterparts(lb_, ln_)
        stalled = [c for c in stall_cols if max((x[c] or 0 for x in (*lb_, *ln_)), default=0) >= STALL_MIN_CYCLES]
        stalled.sort(key=lambda c: -max(x[c] or 0 for x in (*lb_, *ln_)))  # the largest stall first
        timed = "unchanged"  # the launches' time's verdict (NCU_TIME), or "clock" where the clock moved it
        faster = False
        timed_both = all(any(x["duration_ns"] is not None for x in side) for side in (lb_, ln_))
        for i, (metric, col, direction) in enumerate([*NCU_METRICS, *((c, c, 0) for c in stalled)]):
            if metric == "launches":
                vb, vn = [1.0] * len(lb_), [1.0] * len(ln_)
            else:
                vb = [x[col] for x in lb_ if x[col] is not None]
                vn = [x[col] for x in ln_ if x[col] is not None]
            summed = metric in ("launch_total_ns", "launches")
            if kb is None or kn is None:
                v = vn if kb is None else vb
                if not v:
                    continue
                val = float(np.sum(v)) if summed else float(np.median(v))
                rows.append(_Row("ncu", key, metric, None if kb is None else val, val if kb is None else None,
                                 "added" if kb is None else "removed", None,
                                 "only in the new report" if kb is None else "only in the base report",
                                 effect=effect, order=i))
                continue
            if not vb or not vn:
                continue
            if summed:
                b, n = float(np.sum(vb)), float(np.sum(vn))
            else:
                b, n = float(np.median(vb)), float(np.median(vn))
            pairs = [(x[col], y[col]) for x, y in counterparts or []
                     if col is not None and x[col] is not None and y[col] is not None]
            moved = [_pct(y - x, x) for x, y in pairs]
            if metric == "launches":
                verdict, note = "unchanged", "identical" if b == n else \
                    "differs; how many launches ncu profiled (its filters, --launch-count): not judged"
                low = high = _pct(n - b, b)
                rows.append(_Row("ncu", key, metric, b, n, verdict, None, _join(how, note), low, high, effect, i))
                continue
            if metric == "launch_total_ns":
                # each launch against the noise at its own duration; sized for the sum as the
                # same noise summed over the launches (the shorter side's, the same either way round)
                limit_pct = max(threshold, round(100 * NCU_NOISE_NS / (min(b, n) / max(len(vb), len(vn)))
                                                 + NCU_NOISE_PCT, 1)) if min(b, n) > 0 else threshold
                if len(pairs) == len(vb) == len(vn):
                    real, held = _paired_total(pairs, threshold)
                    within = "threshold" if limit_pct == threshold else \
                        f"ncu's noise for {len(vb)} launch{'' if len(vb) == 1 else 'es'}"
                    verdict, note = _judge(b, n, limit_pct, direction, real, held, within)
                else:  # another number of launches profiled (ncu's filters, --launch-count): no sum to judge
                    verdict, note = "unchanged", "identical" if b == n else \
                        f"launches {len(vb)} -> {len(vn)}: a sum over other launches, not judged"
            elif col in NCU_CLOCK_NOTES:  # a launch's clock and cycles: shown, never judged
                verdict, note = "unchanged", "identical" if b == n else NCU_CLOCK_NOTES[col]
            else:
                # (a launch setting is exact: any change is one, where a measured value moves with ncu's noise)
                limit_pct = 0.0 if col in NCU_EXACT else threshold if noise is None else max(threshold, noise)
                if col in NCU_EXACT:  # (no test over the launches: one launch of other settings is a change)
                    real, held = True, ""
                elif pairs:  # each launch against its counterpart in the other report
                    real, held = _paired(pairs, limit_pct, n - b)
                else:
                    real = min(vn) > max(vb) or max(vn) < min(vb)
                    held = f"launches overlap ({min(vb):.6g}..{max(vb):.6g} vs {min(vn):.6g}..{max(vn):.6g})"
                undirected = ("where the warps' cycles go, not how long the launch takes: not judged"
                              if col == "warp_cycles_per_issue" or col.startswith("stall_") else
                              "what the launch computes per byte, with no better/worse direction: not judged"
                              if col == "ai_dram"
                              else "a launch setting with no better/worse direction: not judged")
                if noise is None and col not in NCU_EXACT:  # (a report of chosen metrics without gpu__time_duration)
                    verdict, note = _judge(b, n, threshold, direction, False,
                                           "no duration to size ncu's noise by: a measured value is not judged",
                                           undirected=undirected)
                else:
                    within = "threshold" if limit_pct == threshold else \
                        f"ncu's noise for a {_human('duration_ns', shorter)} launch"
                    verdict, note = _judge(b, n, limit_pct, direction, real, held, within, undirected)
                if col in NCU_EXACT and b == n and sorted(vb) != sorted(vn):  # (the median hides launches that moved)
                    note = (f"the same median; launches {' / '.join(f'{v:g}' for v in sorted(set(vb)))} -> "
                            f"{' / '.join(f'{v:g}' for v in sorted(set(vn)))}: {undirected}")
            if metric in NCU_TIME:
                if timed == "clock" and verdict == ("improved" if faster else "regressed"):
                    verdict, note = "unchanged", f"{CLOCK_NOTE}, as the duration did"
                elif verdict != "unchanged":
                    clock = _with_the_clock(lb_, ln_, b, n, limit_pct) if metric == "duration_ns" else None
                    if clock:
                        timed, faster = "clock", n < b
                        verdict, note = "unchanged", clock
                    elif timed in ("unchanged", "clock"):  # (a total that moved where the median did not,
                        timed = verdict  # or the other way from a clock-held duration: its verdict stands)
            elif verdict != "unchanged" and col not in NCU_EXACT:
                if not timed_both:  # (one report has no durations: nothing to read a rate against)
                    verdict, note = "unchanged", "differs; a report without the launches' durations: not judged"
                elif timed == "clock" and verdict == ("improved" if faster else "regressed"):
                    # a rate that follows the time (FLOP/s, DRAM throughput) moved with the clock too
                    verdict, note = "unchanged", f"{CLOCK_NOTE}, as the duration did"
                elif timed == "clock":
                    verdict, note = "unchanged", f"differs; the launches' time {CLOCK_NOTE}: not judged"
                elif timed == "unchanged":
                    # the launches took as long: how they used the GPU changed, not what it cost
                    verdict, note = "unchanged", "differs; the launches' time did not move: not judged"
                elif verdict != timed:
                    # a rate up while the launch got slower (or down while faster): the launch's
                    # work changed; the rate says how busy it kept the GPU, not that it got better
                    verdict, note = "unchanged", f"differs against a duration that {timed}: the launches' work changed, not judged"
            if metric == "theoretical_occupancy_pct" and b != n:  # (why first: a narrow table cuts the note's end)
                note = _join(_occupancy_moved(lb_, ln_, n < b), note)
            if metric == "roof_pct":
                bb = sorted({x["bound"] for x in lb_ if x["bound"]})
                bn = sorted({x["bound"] for x in ln_ if x["bound"]})
                if bb or bn:
                    note = _join(note, f"bound: {'/'.join(bb) or '?'}" + (f" -> {'/'.join(bn) or '?'}" if bb != bn else ""))
                # the memory level whose roof bounds it (hierarchical-roofline), said where it moved
                mb = sorted({x["limiter"] for x in lb_ if x.get("limiter")})
                mn = sorted({x["limiter"] for x in ln_ if x.get("limiter")})
                if mb and mn and mb != mn:
                    note = _join(note, f"limiter: {'/'.join(mb)} -> {'/'.join(mn)}")
            if pairs and None not in moved and not summed:
                low, high = min(moved), max(moved)
            elif summed and pairs and len(pairs) == len(vb):
                low = high = _pct(n - b, b)
            else:
                low = _pct(min(vn) - max(vb), b) if b else None
                high = _pct(max(vn) - min(vb), b) if b else None
            if metric == "duration_ns" and verdict in ("regressed", "improved") and len(pairs) > 1 \
                    and None not in moved:  # (a median over several launches, of several sizes, hides how each moved)
                note = _join(note, f"launch by launch {min(moved):+z.1f} to {max(moved):+z.1f}%")
            rows.append(_Row("ncu", key, metric, b, n, verdict, None, _join(how, launches, note), low, high, effect, i))
    return rows


# -- ncu's Source Counters, line by line ----------------------------------------------

#: the source scope's metrics per source line of a kernel the ncu scope matched: its time per
#: launch (judged), its share of the kernel's warp stall samples, and what executed there per
#: launch (exact counts: read with the time, not judged)
SOURCE_METRICS = ("time_ns", "samples_pct", "inst_executed", "l2_excess_sectors", "shared_excess_wavefronts")
#: code that changed pairs a line with the new line at the shift most aligned instructions of the
#: lines this many lines either side of it moved by: an edit moves a region of lines together
SHIFT_LINES = 8
#: ... counting first the aligned instructions of an opcode each kernel has at most this many of (anchors)
ANCHOR_MAX = 1
#: a kernel's lines judged changed whose moves (time per launch) together stay under this share of
#: its (shorter) mean launch are not judged, the smallest first: together they cannot move the
#: kernel beyond ncu's noise (3 % at least), and a long kernel's lines of a few samples each would
#: otherwise bury the lines that cost the time (hstu_capture_ncu_pair half_sms: 22 of the attention
#: kernel's 137 lines that regressed, 2-3 a layer)
MATERIAL_LINE_PCT = 1.0
SOURCE_COUNTS = SOURCE_METRICS[2:]  # (summed per launch from source_lines.sql's columns of these names)
SOURCE_UNDIRECTED = {
    "samples_pct": "where the kernel's warp samples fall, read with time_ns: not judged",
    "inst_executed": "the instructions the line executed per launch, read with time_ns: not judged",
    "l2_excess_sectors": "uncoalesced global accesses' L2 sectors per launch, read with time_ns: not judged",
    "shared_excess_wavefronts": "shared-memory bank conflicts' wavefronts per launch, read with time_ns: not judged",
}


def _sampled_p(xb: dict, xn: dict, band_pct: float) -> float:
    """Whether a line's time moved more than its warp stall samples' noise allows: the two-sided
    p of the log ratio of its times beyond the kernel's duration noise (``band_pct``), each side's
    samples a Poisson count (variance of the log 1/k), each side given half a sample more (its
    time half a sample's worth more), so that a line of no samples on one side is judged too."""
    tb = xb["time_ns"] + 0.5 * xb["ns_per_sample"]
    tn = xn["time_ns"] + 0.5 * xn["ns_per_sample"]
    shift = abs(math.log(tn / tb)) - math.log1p(band_pct / 100)
    if shift <= 0:
        return 1.0
    return math.erfc(shift / math.sqrt(2 * (1 / (xb["samples"] + 0.5) + 1 / (xn["samples"] + 0.5))))


@functools.lru_cache(maxsize=16)
def _aligned(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """The positions of two instruction sequences (opcodes) a text diff pairs; kept for the next
    key of the same code (each layer of a model launches its kernels again)."""
    import difflib

    return tuple((blk.a + k, blk.b + k) for blk in difflib.SequenceMatcher(None, a, b, autojunk=False)
                 .get_matching_blocks() for k in range(blk.size))


def _line_map(lb: set[tuple[str, int]], ln: set[tuple[str, int]], files: dict[str, str],
              by_text: Callable[[str, str], dict[int, int] | None],
              code: tuple[list[tuple], list[tuple]]) -> dict[tuple[str, int], tuple[str, int]]:
    """Base (file, line) -> new (file, line) of one kernel's lines (``files``: new file -> base
    file). A file whose text both reports carry (ncu --import-source), by its text alone
    (``by_text``: base line -> new line, as a text diff pairs them: a line an edit above it moved
    is the same line; a line the edit changed is in one report only). Otherwise by the kernel's
    instructions (``code``: each side's (opcode, file, line) in address order): where they are
    the same instruction for instruction, a base line is the new line most of its instructions
    sit on; else, aligned by opcode as a text diff aligns lines, a line is paired at the shift
    its own anchors moved by (aligned instructions of an opcode each kernel has once: a
    recompiled loop of like ones aligns one off), else the nearest lines' anchors (up to
    ``SHIFT_LINES`` away: an edit moves a region of lines together), else every aligned
    instruction's the same way,
    else its file's, else by number; the surest lines choose first, each its likeliest shift
    whose new line is there and not taken (a line an edit deleted is left unpaired). Each new
    line is paired once."""
    out: dict[tuple[str, int], tuple[str, int]] = {}
    taken: set[tuple[str, int]] = set()

    def pair(xb: tuple[str, int], xn: tuple[str, int]) -> None:
        if xb in lb and xn in ln and xb not in out and xn not in taken:
            out[xb] = xn
            taken.add(xn)

    texted = set()
    for fn, fb in files.items():
        pairs = by_text(fb, fn)
        if pairs is not None:
            texted.add(fb)
            for x, y in pairs.items():
                pair((fb, x), (fn, y))
    ops = [tuple(c[0] for c in side) for side in code]
    same = bool(ops[0]) and ops[0] == ops[1]
    aligned = zip(range(len(ops[0])), range(len(ops[1])), strict=True) if same else _aligned(*ops)
    # the same code: base line -> {new line: instructions}; else base line -> {shift: instructions}, of
    # the anchors (an opcode each kernel has at most ANCHOR_MAX of: a loop of like instructions,
    # unrolled another number of times, aligns one off), then of every aligned instruction
    votes: dict[tuple[str, int], Counter] = {}
    tiers: tuple[dict[tuple[str, int], Counter], ...] = ({}, {})
    count = [Counter(o) for o in ops]
    for i, j in aligned:
        (op, fb, x), (_, fn, y) = code[0][i], code[1][j]
        if x is None or y is None or fb in texted or files.get(fn) != fb:
            continue
        if same:
            votes.setdefault((fb, x), Counter())[(fn, y)] += 1
            continue
        for tier in tiers[max(count[0][op], count[1][op]) > ANCHOR_MAX:]:
            tier.setdefault((fb, x), Counter())[y - x] += 1
    for xb, to in sorted(votes.items(), key=lambda v: (-max(v[1].values()), v[0])):  # (the surest first)
        pair(xb, max(sorted(to), key=to.get))

    whole = [{}, {}]  # (each tier's shifts of a file's every line)
    for t, tier in enumerate(tiers):
        for (f, _), to in tier.items():
            whole[t].setdefault(f, Counter()).update(to)

    def shifts(fb: str, line: int) -> tuple[tuple[int, int], list[int]]:
        """A line's shifts, likeliest first, and how sure they are (lower: surer): the anchors of
        the line itself, else of the nearest lines that have any (up to SHIFT_LINES away), then
        every aligned instruction's the same way, then its file's; 0 where nothing aligned."""
        for t, tier in enumerate(tiers):
            for r in range(SHIFT_LINES + 1):
                got = Counter()
                for x in {line - r, line + r}:
                    got.update(tier.get((fb, x), {}))
                if got:
                    return (t, r), sorted(got, key=lambda d: (-got[d], abs(d), d))
        for t in range(2):
            got = whole[t].get(fb)
            if got:
                return (t, SHIFT_LINES + 1), sorted(got, key=lambda d: (-got[d], abs(d), d))
        return (2, 0), [0]

    base_to_new = {fb: fn for fn, fb in files.items()}
    left = sorted(xb for xb in lb if xb[0] not in texted and xb[0] in base_to_new and xb not in out)
    choices = {xb: ((0, 0), [0]) if same else shifts(*xb) for xb in left}
    for xb in sorted(left, key=lambda xb: (choices[xb][0], xb)):  # (the surest lines choose first)
        fn = base_to_new[xb[0]]
        for d in choices[xb][1]:  # (its likeliest shift whose new line is there and free)
            if (fn, xb[1] + d) in ln and (fn, xb[1] + d) not in taken:
                pair(xb, (fn, xb[1] + d))
                break
    return out


def _source_lines(df: pl.DataFrame, durations: dict[int, float | None]) -> tuple[dict[tuple[str, int], dict], dict]:
    """A key's lines on one side (``source_lines.sql``'s rows of its launches): (file, line) ->
    its time per launch (each launch's duration times the line's share of its samples, over the
    launches with samples and a duration), the samples behind it and their share of those
    launches', counts per launch (over every launch with the line information), stalls by
    reason; and of the launches timed: how many, their mean duration and a sample's time a
    launch (``ns_per_sample``: what one sample more on a line adds to its time per launch)."""
    totals = dict(df.select("kernel_id", "launch_samples").unique().iter_rows())
    timed = {k: (durations[k], s) for k, s in totals.items() if s and (durations.get(k) or 0) > 0}
    n_all, n = len(totals) or 1, len(timed)
    # (a sample more in launch l adds d_l / s_l / n to the mean; in a launch picked at random, the mean of that)
    info = {"launches": n, "sampled": sum(1 for s in totals.values() if s),
            "mean_ns": sum(d for d, _ in timed.values()) / n if n else None,
            "ns_per_sample": sum(d / s for d, s in timed.values()) / n / n if n else None}
    whole = sum(s for _, s in timed.values())
    out: dict[tuple[str, int], dict] = {}
    for r in df.iter_rows(named=True):
        got = out.setdefault((r["file"], r["line"]), {"time_ns": 0.0 if n else None, "samples": 0.0, "stalls": {},
                                                      **dict.fromkeys(SOURCE_COUNTS, 0.0)})
        for m in SOURCE_COUNTS:
            got[m] += (r[m] or 0.0) / n_all
        if r["kernel_id"] not in timed:
            continue
        dur, launch = timed[r["kernel_id"]]
        got["time_ns"] += dur * (r["samples"] or 0.0) / launch / n
        got["samples"] += r["samples"] or 0.0
        for st in r["stalls"] or []:
            got["stalls"][st["reason"]] = got["stalls"].get(st["reason"], 0.0) + st["samples"]
    for got in out.values():
        got["samples_pct"] = 100 * got["samples"] / whole if whole else None
        got["ns_per_sample"] = info["ns_per_sample"]
    return out, info


def _top_stall(line: dict) -> str:
    st = line["stalls"]
    if not st or not sum(st.values()):
        return "?"
    reason = max(sorted(st), key=st.get)
    return f"{reason} {100 * st[reason] / sum(st.values()):.0f}%"


def _source_files(files_b: set[str], files_n: set[str],
                  alike: Callable[[str, str], bool] = lambda fb, fn: True) -> dict[str, str]:
    """New file -> base file of one kernel's lines: the same path, else the one file of its
    name on each side (another checkout of the program), else the one file left on each side
    where ``alike`` (their texts, where both reports carry them, mostly the same): the kernel's
    code under another name (TorchInductor and Triton's caches name a generated file by a hash
    of its content, which an edit changes)."""
    out = {f: f for f in files_n if f in files_b}
    for f in sorted(files_n - set(out)):
        named = [[g for g in files if os.path.basename(g) == os.path.basename(f)] for files in (files_b, files_n)]
        if len(named[0]) == 1 and len(named[1]) == 1 and named[0][0] not in out.values():
            out[f] = named[0][0]
    left = [sorted(files_b - set(out.values())), sorted(files_n - set(out))]
    if len(left[0]) == 1 and len(left[1]) == 1 and alike(left[0][0], left[1][0]):
        out[left[1][0]] = left[0][0]
    return out


def _source_scope(con, params: dict, threshold: float, labels: tuple[str, str],
                  launches: pl.DataFrame, point: str | None = None,
                  uncompared: list[str] | None = None) -> list[_Row]:
    """Per source line of each kernel both reports profiled with Source Counters (keys as the
    ncu scope matches them, ``ncu_pairs``): ``kernel @ file:line``, the line as the base report
    numbers it (a line only in the new report: ``file:line (new)``), the lines of the two reports
    paired by ``_line_map``. A line's time per launch is judged where it moved beyond the
    threshold or ncu's noise at the kernel's mean launch, its warp samples' noise past that
    (``_sampled_p``, p below ALPHA over the kernel's lines tested), and only the way the kernel's
    mean launch moved: where the kernel took as long, or moved the other way, its warps' time
    moved between its lines, said, not judged; nor where the reports timed other numbers of
    launches (a mean over other launches), nor where its move is among the kernel's smallest
    that together stay under ``MATERIAL_LINE_PCT`` of that launch. The kernels of both reports
    whose lines are not compared (in one report only, or no launch timed on a side) are named in
    a ``CaptureWarning``, or at ``point`` (two sweeps') added to ``uncompared``, the sweeps'
    one warning."""
    df = con.sql(_sql("source_lines"), params=params).pl()
    for side, label in enumerate(labels):
        if df.filter(pl.col("side") == side).is_empty():
            raise NoSourceLines(f"--by source: {label} has no source lines of kernel launches to compare; profile "
                                "with ncu --section SourceCounters (or --set full) and ingest the .ncu-rep (Triton "
                                "kernels have lines, CUDA needs nvcc -lineinfo; a range's or a graph's instructions "
                                "are not compared by line)", side)
    gb, gn = _ncu_groups(launches, 0), _ncu_groups(launches, 1)
    texts: tuple[dict, dict] = ({}, {})
    for side, file, text in con.execute(
            "SELECT s.side, t.file, list(t.text ORDER BY t.line) FROM (VALUES (0, $base), (1, $new)) s(side, run_id) "
            "JOIN ncu_source_lines t ON t.run_id = s.run_id WHERE t.run_id IN ($base, $new) GROUP BY ALL",
            params).fetchall():
        texts[side][file] = text
    text_pairs: dict[tuple[str, str], tuple[dict[int, int], int] | None] = {}

    def diffed(fb: str, fn: str) -> tuple[dict[int, int], int] | None:
        """A text diff of a file both reports carry, once per pair of files: base line -> new line
        (unchanged runs of text, and edited runs of as many lines in order), and how many lines
        are unchanged; None where a report lacks the text."""
        if (fb, fn) not in text_pairs:
            tb, tn = texts[0].get(fb), texts[1].get(fn)
            got = None
            if tb is not None and tn is not None:
                import difflib

                pairs, same = {}, 0
                for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, tb, tn, autojunk=False).get_opcodes():
                    if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
                        pairs.update({i + 1: j1 + i - i1 + 1 for i in range(i1, i2)})
                    same += (i2 - i1) if op == "equal" else 0
                got = pairs, same
            text_pairs[(fb, fn)] = got
        return text_pairs[(fb, fn)]

    def by_text(fb: str, fn: str) -> dict[int, int] | None:
        """Base line -> new line of a file both reports carry, as a text diff pairs them."""
        got = diffed(fb, fn)
        return None if got is None else got[0]

    def alike(fb: str, fn: str) -> bool:
        """Whether two files of a kernel's lines under other names are one file: their texts,
        where both reports carry them, the same for half the shorter one's lines at least (a
        generated file of the kernel alone, against the module it came from); else the kernel's
        one file on each side is its code (the note names the new file)."""
        got = diffed(fb, fn)
        return got is None or got[1] >= 0.5 * min(len(texts[0][fb]), len(texts[1][fn]))

    instructions: dict[tuple[int, int], list[tuple]] = {}  # (side, kernel_id) -> (opcode, file, line) by address
    for side, kid, op, file, line in con.execute(
            "SELECT s.side, n.kernel_id, regexp_extract(n.sass, '^\\S+'), n.file, n.line "
            "FROM (VALUES (0, $base), (1, $new)) s(side, run_id) JOIN ncu_source n ON n.run_id = s.run_id "
            "WHERE n.run_id IN ($base, $new) AND n.function IS NULL ORDER BY s.side, n.kernel_id, n.pc_offset",
            params).fetchall():
        instructions.setdefault((side, kid), []).append((op, file, line))
    rows: list[_Row] = []
    warn = uncompared is None
    uncompared = [] if uncompared is None else uncompared  # (kernels of both reports whose lines are not compared)
    at = f"{point}: " if point else ""  # (two sweeps' point)
    for key, kb, kn, _how in ncu_pairs(gb, gn):
        if kb is None or kn is None or kb[0] != kn[0]:  # (a kernel in one report, or another kernel matched by
            continue  # its place: the ncu scope says so; their lines are not one kernel's)
        sides, code = [], []
        for side, group in ((0, gb[kb]), (1, gn[kn])):
            ids = {x["kernel_id"]: x["duration_ns"] for x in group}
            sides.append(_source_lines(df.filter((pl.col("side") == side) & pl.col("kernel_id").is_in(list(ids))),
                                       ids))
            code.append(next((instructions[(side, k)] for k in sorted(ids) if (side, k) in instructions), []))
        (lb, ib), (ln, i_n) = sides
        if not lb or not ln:  # (profiled without Source Counters, or built without line information, on a side)
            if lb or ln:
                uncompared.append(f"{at}{key} (source lines in {labels[0] if lb else labels[1]} only)")
            continue
        untimed = [label for label, info in zip(labels, (ib, i_n), strict=True) if not info["launches"]]
        if untimed and (ib["sampled"] or i_n["sampled"]):  # (its counts compared, not its time; a kernel too
            # short for a warp sample on either side has no time to compare whatever was captured)
            uncompared.append(f"{at}{key} (no launch with warp samples and a duration in {' and '.join(untimed)}: "
                              "its lines' counts compared, not their time)")
        mean = [ib["mean_ns"], i_n["mean_ns"]]
        shorter = min((d for d in mean if d), default=None)
        band = round(100 * NCU_NOISE_NS / shorter + NCU_NOISE_PCT, 1) if shorter else None
        limit_pct = threshold if band is None else max(threshold, band)
        within = "threshold" if limit_pct == threshold else f"ncu's noise for a {_human('duration_ns', shorter)} launch"
        kernel = "unchanged" if band is None or None in mean or not _beyond(*mean, limit_pct) else \
            "regressed" if mean[1] > mean[0] else "improved"
        floor = MATERIAL_LINE_PCT / 100 * shorter if shorter else 0.0
        files = _source_files({f for f, _ in lb}, {f for f, _ in ln}, alike)
        # a file by its name, by its path where two of the kernel's (a new one as its base file) share it
        names = [os.path.basename(f) for f in {files.get(f, f) for f, _ in ln} | {f for f, _ in lb}]

        def where(file: str, line: int, new: bool = False, key: str = key, names: list = names,
                  files: dict = files) -> str:
            """A row's key: the kernel's, then the line where the base report has it (new: the new's)."""
            file = files.get(file, file) if new else file
            shown = os.path.basename(file) if names.count(os.path.basename(file)) == 1 else file
            return f"{key} @ {shown}:{line}" + (" (new)" if new else "")

        def said(file: str, line: int, side: int) -> str:  # (the line's text, where the report carries it)
            text = texts[side].get(file)
            return f"code: {text[line - 1].strip()}" if text and 0 < line <= len(text) and text[line - 1].strip() else ""

        paired = _line_map(set(lb), set(ln), files, by_text, (code[0], code[1]))
        seen = set(paired.values())
        pairs = [*sorted(paired.items()), *((x, None) for x in sorted(lb) if x not in paired),
                 *((None, x) for x in sorted(ln) if x not in seen)]
        # (each line is a test: p must pass ALPHA over the kernel's lines tested, Bonferroni's bound)
        tested = sum(1 for pb, pn in pairs if pb and pn and (lb[pb]["samples"] or ln[pn]["samples"]))
        alpha = ALPHA / max(tested, 1)
        judged: list[tuple[float, _Row, str, str]] = []  # (the lines judged: move a launch, row, note's parts)
        for pb, pn in pairs:
            row_key = where(*pb) if pb else where(*pn, new=True)
            xb, xn = lb.get(pb) if pb else None, ln.get(pn) if pn else None
            renamed = pb and pn and os.path.basename(pb[0]) != os.path.basename(pn[0])  # (a file paired by its text)
            moved_line = f"line {pb[1]} -> {os.path.basename(pn[0])}:{pn[1]}" if renamed else \
                f"line {pb[1]} -> {pn[1]}" if pb and pn and pb[1] != pn[1] else ""
            tb, tn = (xb or {}).get("time_ns"), (xn or {}).get("time_ns")
            effect = abs((tn or 0.0) * i_n["launches"] - (tb or 0.0) * ib["launches"])
            if xb is None or xn is None:
                one = xn or xb
                if one["time_ns"] is not None and one["samples"]:
                    rows.append(_Row("source", row_key, "time_ns", tb, tn, "added" if xb is None else "removed", None,
                                     _join("only in the new report" if xb is None else "only in the base report",
                                           said(*(pn or pb), 1 if xb is None else 0)),
                                     effect=effect, order=0))
                continue
            for i, metric in enumerate(SOURCE_METRICS):
                b, n = xb[metric], xn[metric]
                if b is None or n is None or (b == n == 0 and metric != "time_ns"):
                    continue
                p = None
                if metric == "time_ns":
                    if not (xb["samples"] or xn["samples"]):
                        continue
                    p = _sampled_p(xb, xn, band or 0.0)
                    held = f"within the warp samples' noise ({xb['samples']:,.0f} -> {xn['samples']:,.0f} samples, " \
                           f"p = {_fmt_p(p)}; {tested} lines tested: p < {alpha:.2g} needed)"
                    verdict, note = _judge(b, n, limit_pct, 1, p < alpha, held, within)
                    if b != n and ib["launches"] != i_n["launches"]:  # (means of other launches)
                        verdict, note = "unchanged", (f"differs; launches timed {ib['launches']} -> {i_n['launches']} "
                                                      "(profiled, with samples and a duration): a mean over other "
                                                      "launches, not judged")
                    elif verdict != "unchanged" and verdict != kernel:  # (the kernel's time says what the line cost)
                        verdict, note = "unchanged", (
                            "differs; the kernel's launches took as long: its warps' time moved between its lines, "
                            "not judged" if kernel == "unchanged" else
                            f"differs against a kernel that {kernel}: its warps' time moved between its lines, "
                            "not judged")
                    tail = _join(f"stalls: {_top_stall(xb)} -> {_top_stall(xn)}", said(*pb, 0))
                    note = _join(note, tail)
                else:
                    verdict, note = _judge(b, n, 0.0, 0, True, "", undirected=SOURCE_UNDIRECTED[metric])
                rows.append(_Row("source", row_key, metric, b, n, verdict, p, _join(moved_line, note),
                                 effect=effect, order=i))
                if metric == "time_ns" and verdict != "unchanged":
                    judged.append((abs(n - b), rows[-1], moved_line, tail))
        # the smallest moves held while together they stay within MATERIAL_LINE_PCT of the launch (equal
        # moves all or none: which line is held is not up to their order)
        held, total = [], 0.0
        for move, same in itertools.groupby(sorted(judged, key=lambda j: j[0]), key=lambda j: j[0]):
            same = list(same)
            if total + move * len(same) >= floor:
                break
            held += same
            total += move * len(same)
        for move, r, moved_line, tail in held:
            together = f"; {len(held)} such lines {_human('x_ns', total)} together" if len(held) > 1 else ""
            r.verdict = "unchanged"
            r.note = _join(moved_line, f"immaterial: it moved by {_human('x_ns', move)} a launch{together}, < "
                                       f"{MATERIAL_LINE_PCT:g}% of the kernel's {_human('duration_ns', shorter)}",
                           tail)
    if warn and uncompared:  # (the caller of Tracekit.diff: past _pair_rows, diff and the store's lock)
        warn_from_caller(CaptureWarning(_not_compared(uncompared)))
    return rows


def _not_compared(what: list[str]) -> str:
    """The warning of the kernels (or sweep points) whose lines ``--by source`` did not compare."""
    more = f"; {len(what) - 3} more" if len(what) > 3 else ""
    return f"diff --by source: not compared line by line: {'; '.join(what[:3])}{more}"


# -- tracekit bench runs -------------------------------------------------------------


def _bench_scope(con, params: dict, threshold: float) -> list[_Row]:
    """Per configuration and variant of two ``tracekit bench`` runs, the median time of a call,
    judged on the calls' times (Mann-Whitney) beyond the threshold: the benchmark times GPU
    work alone, and two identical runs agree within 0.9 % at every pair (tests/data/bench_pair,
    base against base_again: 1,000 calls each). The number of calls follows a time budget, so
    another count is no other mix. A variant whose median moved with its baseline's (the
    machine's pace: both moved its way, the baseline by at least half as much in log terms),
    and whose speedup against it (timed in the same process) stayed within the threshold, is
    held; one whose output matched the reference in one run and not in the other, or that
    failed in one, is said, and so is a variant of yours that came from another source. Each
    variant's peak memory in a call follows its time (``_peak_rows``)."""
    rows = _simple_scope(con, "bench", _sql("samples_bench"), params, threshold, [("med_ns", "median", 1)], False)
    info, peaks = {}, {}  # (side, key) -> the result's facts; its peak memory (allocated, reserved)
    for side, config, variant, baseline, speedup, matches, error, *peak in con.execute(
            "SELECT s.side, b.config, b.variant, b.baseline, b.speedup_vs_baseline, b.matches_reference, "
            "coalesce(b.error, b.check_error), b.peak_alloc_mb, b.peak_reserved_mb "
            "FROM (VALUES (0, $base), (1, $new)) s(side, run_id) JOIN bench_results b ON b.run_id = s.run_id",
            params).fetchall():
        key = f"{config}/{variant}"
        info[(side, key)] = (baseline, f"{config}/{baseline}" if baseline else None, speedup, matches, error, config,
                             variant)
        peaks[(side, key)] = peak
    sources = {(side, variant): source for side, variant, source in con.execute(  # (the variants of the user's)
        "SELECT s.side, e.key, e.value ->> '$' FROM (VALUES (0, $base), (1, $new)) s(side, run_id) "
        "JOIN runs r ON r.run_id = s.run_id, json_each(r.meta -> '$.bench.variant_sources') e", params).fetchall()}
    medians = {r.key: (r.base, r.new) for r in rows}
    paced: dict[str, list[bool]] = {}  # a baseline's key -> whether each other variant moved with it
    for r in rows:
        base, new = info.get((0, r.key)), info.get((1, r.key))
        if r.verdict in ("added", "removed"):
            failed = (new if r.verdict == "removed" else base) or (None,) * 7
            if failed[4]:
                r.verdict = "regressed" if r.verdict == "removed" else "improved"
                r.note = _join(r.note, f"failed in the {'new' if r.verdict == 'regressed' else 'base'} run: {failed[4]}")
            continue
        if base is None or new is None:
            continue
        was, now = sources.get((0, base[6])), sources.get((1, base[6]))
        if was != now:  # (a kernel of yours, changed between the runs: the comparison's point, said)
            r.note = _join(r.note, f"yours: {was} -> {now}")
        if base[1] == new[1] and base[0] != base[6] and base[2] and new[2]:
            r.note = _join(r.note, f"speedup vs {base[0]} {base[2]:.2f}x -> {new[2]:.2f}x")
            b_base, b_new = medians.get(base[1], (None, None))
            with_it = False
            if r.verdict in ("regressed", "improved") and b_base and b_new and r.base and r.new:
                moved, pace = math.log(r.new / r.base), math.log(b_new / b_base)
                if moved * pace > 0 and abs(pace) >= 0.5 * abs(moved) and not _beyond(base[2], new[2], threshold):
                    with_it = True
                    r.verdict = "unchanged"
                    r.note = _join(r.note, f"{BENCH_PACE_NOTE} ({base[0]} {100 * (b_new - b_base) / b_base:+z.1f}%) "
                                           f"in the same process, speedup within the threshold ({threshold:g}%): the "
                                           "machine, not the code")
            paced.setdefault(base[1], []).append(with_it)
        if base[3] is not None and new[3] is not None and base[3] != new[3]:
            r.verdict = "regressed" if base[3] else r.verdict
            r.note = _join(r.note, "its output no longer matches the reference" if base[3]
                           else "its output now matches the reference")
    for r in rows:  # a baseline that every other variant of its configuration moved with: the machine's pace too
        if r.verdict in ("regressed", "improved") and paced.get(r.key) and all(paced[r.key]):
            r.verdict = "unchanged"
            r.note = _join(r.note, f"{BENCH_BASELINE_NOTE} (every other variant of {info[(0, r.key)][5]} moved with "
                                   "it in the same process, their speedups against it within the threshold): the "
                                   "machine, not the code")
    # each variant's peak memory in a call, after its time
    return rows + [m for r in rows for m in _peak_rows(r.key, [peaks.get((0, r.key)), peaks.get((1, r.key))],
                                                       threshold, 1, "bench")]


# -- sweeps -------------------------------------------------------------------------


def _sweep_scope(con, base: Side, new: Side, threshold: float) -> list[_Row]:
    params = {"base": None if base.lone_point else base.sweep, "new": None if new.lone_point else new.sweep,
              "base_run": base.run_id if base.lone_point else None, "new_run": new.run_id if new.lone_point else None}
    points = f"WITH point_runs AS (\n{_sql('point_runs')}\n)\n"
    df = _compare(con, points + _sql("samples_sweep"), params)
    runs: dict[tuple[int, str], int] = {}  # (side, point) -> its run, where it called CUDA launch APIs
    launches: dict[tuple[int, str], dict[str, tuple[int, float]]] = {}
    for side, key, run, api, calls, med in con.execute(points + _sql("host_pace"), params).fetchall():
        runs[(side, key)] = run
        launches.setdefault((side, key), {})[api] = (int(calls), float(med))
    metrics = [("latency_med_ms", "median", 1), ("latency_p95_ms", "p95", 1)]
    absent = {"base": _absent_points(con, base), "new": _absent_points(con, new)}  # (read once a side)
    peaks: dict[str, list] = {}  # point -> [base's, new's] (allocated, reserved) peaks
    for side, key, *peak in con.execute(points + _sql("sweep_memory"), params).fetchall():
        peaks.setdefault(key, [None, None])[side] = peak
    clocks: dict[str, list] = {}  # point -> [base's, new's] SM clock as the timed requests ran
    for side, key, mhz in con.execute(points + _sql("sweep_clock"), params).fetchall():
        clocks.setdefault(key, [None, None])[side] = mhz
    under_ncu: dict[str, list[str]] = {}  # point -> the sides whose run timed its requests under ncu
    for side, key in con.execute(points + "SELECT p.side, p.key FROM point_runs p JOIN runs r USING (run_id) "
                                 "WHERE json_extract_string(r.params, '$.tool') = 'ncu' ORDER BY p.side", params).fetchall():
        under_ncu.setdefault(key, []).append(("base", "new")[side])
    rows: list[_Row] = []
    for r in df.iter_rows(named=True):
        # effect: the change of the point's median request latency, in ns like the others
        b, n = r["med_base"], r["med_new"]
        effect = abs((n or 0) - (b or 0)) * 1e6
        reqs = f"requests {r['n_base']} -> {r['n_new']}"
        if r["n_base"] == 0 or r["n_new"] == 0:
            one = _one_side_rows("sweep", r["key"], r, metrics, "", effect)
            # a point the other sweep ran but whose capture failed: not a point it left out
            other = "new" if r["n_new"] == 0 else "base"
            why = absent[other].get(r["key"])
            for row in one if why is not None else []:
                if why.what == "failed":
                    row.verdict = "regressed" if other == "new" else "improved"
                    row.note = f"the {other} sweep's {POINT_FAILED}" + (f": {why.detail}" if why.detail else "")
                else:  # (its run removed or never ingested, its capture interrupted: nothing to compare)
                    row.verdict = "unchanged"  # (shown as not judged: shown_verdicts)
                    row.note = said(f"{other} {(new if other == 'new' else base).label}", r["key"], why) \
                        + NOTHING_TO_COMPARE
            rows += one
        else:
            stat = _stat_rows("sweep", r["key"], r, metrics, threshold, reqs, effect)
            _with_the_gpu_clock(stat, *clocks.get(r["key"], [None, None]), threshold)
            pace = _pace(launches.get((0, r["key"]), {}), launches.get((1, r["key"]), {}))
            if pace is not None:
                pair = (runs.get((0, r["key"])), runs.get((1, r["key"])))
                _with_the_host(con, stat, pace, pair, threshold)
            if r["key"] in under_ncu:
                _under_ncu(stat, under_ncu[r["key"]])
            rows += stat + _peak_rows(r["key"], peaks.get(r["key"], [None, None]), threshold, len(metrics))
    # a point neither sweep has a run of (its capture failed, its run removed, ...): said rather than left out
    seen = set(df["key"].to_list())
    for key in [p for p in absent["base"] if p in absent["new"] and p not in seen]:
        whys = (absent["base"][key], absent["new"][key])
        note = "its capture failed in both sweeps" if all(w.what == "failed" for w in whys) else "; ".join(
            said(f"{role} {side.label}", key, why) for role, side, why in zip(("base", "new"), (base, new), whys,
                                                                             strict=True))
        note += NOTHING_TO_COMPARE
        for i, (metric, _kind, _direction) in enumerate(metrics):
            rows.append(_Row("sweep", key, metric, None, None, "unchanged", None, note, order=i))
    return rows if base.at is None else [r for r in rows if r.key in base.at]


#: a peak memory change smaller than this (MiB) is immaterial: from a peak of none (a benchmark's
#: call that allocates nothing), any is infinitely many percent
PEAK_MIN_MB = 1.0
#: a sweep point's peak GPU memory (sweep_memory.sql), after its latency rows
SWEEP_MEMORY = ("peak_mem_allocated_mb", "peak_mem_reserved_mb")
#: a benchmark variant's peak GPU memory in a call (bench_results), after its time
BENCH_MEMORY = ("peak_alloc_mb", "peak_reserved_mb")


def _peak_rows(key: str, sides: list, threshold: float, order: int, scope: str = "sweep") -> list[_Row]:
    """A point's (a bench variant's) peak memory, allocated and reserved, base against new,
    where both runs recorded it: what a program allocates barely moves between captures of it
    (sweep_pair a and b, hstu_capture_pair's base and base_again: the same peaks to the byte;
    hstu_capture_python against _again 9,856.870 against 9,856.853 MB; bench_pair's base and
    base_again, every variant's to the byte), so a change beyond the threshold is real, as the
    memory scope judges its bytes. More is worse; no time (effect 0)."""
    rows = []
    for i, metric in enumerate(BENCH_MEMORY if scope == "bench" else SWEEP_MEMORY):
        base, new = (None if s is None else s[i] for s in sides)
        if base is None or new is None:
            continue
        verdict, note = _judge(base, new, threshold, 1, True, "")
        if verdict != "unchanged" and abs(new - base) < PEAK_MIN_MB:  # (from none: no share to judge)
            verdict, note = "unchanged", f"immaterial (|{new - base:+z.3f}| MiB < {PEAK_MIN_MB:g} MiB)"
        pct = _pct(new - base, base)
        rows.append(_Row(scope, key, metric, base, new, verdict, None, note, pct, pct, 0.0, order + i))
    return rows


def _pace(base: dict[str, tuple[int, float]], new: dict[str, tuple[int, float]]) -> tuple[float, str] | None:
    """How much slower (> 1) or faster the new run's host ran than the base's: the ratio of
    the median durations of each CUDA launch API both runs called ``PACE_MIN_CALLS`` times or
    more, their geometric mean weighted by calls; with words naming the most called one.
    None where no launch API qualifies (a run without CUDA, a handful of launches)."""
    common = [a for a in base if a in new and min(base[a][0], new[a][0]) >= PACE_MIN_CALLS
              and base[a][1] > 0 and new[a][1] > 0]
    if not common:
        return None
    weight = {a: base[a][0] + new[a][0] for a in common}
    log = sum(weight[a] * math.log(new[a][1] / base[a][1]) for a in common) / sum(weight.values())
    top = max(common, key=lambda a: (weight[a], a))
    return math.exp(log), f"{top} median {_human('x_ns', base[top][1])} -> {_human('x_ns', new[top][1])}"


def _with_the_host(con, rows: list[_Row], pace: tuple[float, str], pair: tuple, threshold: float) -> None:
    """Hold a point's latency rows judged changed (``rows``, in place) that the host's pace
    (``_pace``) accounts for: the launch calls moved the latency's way by at least half as
    much (in log terms), the latency at the base's pace (new / pace) is within the row's
    limit, and the GPU's time (gpu_time.sql, of the point's two runs ``pair``) did not move
    the latency's way beyond ``threshold``: request latency is host-timed, and the host's
    speed moves between captures (two identical captures of the inference pipeline,
    tests/data/hstu_host_pace/before and before2: median latency +48.7 % with the launch
    calls' pace +53.2 %), while the GPU's time mostly does not (kernel times of identical
    captures mostly agree within ~2 %): where it moved, the code may have, or a kernel ran at
    another speed in another process (``repeats`` measure that)."""
    ratio, words = pace
    gpu: dict[int, float] | None = None
    for r in rows:
        if r.verdict not in ("regressed", "improved") or not r.base or not r.new or r.base <= 0 or r.new <= 0:
            continue
        moved = math.log(r.new / r.base)
        if moved * math.log(ratio) <= 0 or abs(math.log(ratio)) < 0.5 * abs(moved):
            continue
        pct_limit, within = limit(r.scope, r.metric, threshold, False) or (threshold, "threshold")
        at_base = 100 * (r.new / ratio - r.base) / r.base
        if _beyond(r.base, r.new / ratio, pct_limit):
            continue
        if gpu is None:
            gpu = dict(con.execute(_sql("gpu_time"), {"base": pair[0], "new": pair[1]}).fetchall()) \
                if None not in pair else {}
        gb, gn = gpu.get(pair[0]), gpu.get(pair[1])
        if gb and gn and (gn - gb) * moved > 0 and _beyond(gb, gn, threshold):
            continue  # the GPU's time moved the latency's way too: not the host's pace alone
        r.verdict = "unchanged"
        r.note = _join(r.note, f"{HOST_PACE_NOTE} (CUDA launch calls {100 * (ratio - 1):+z.1f}%: {words}): "
                       f"{at_base:+z.1f}% at the base's pace, within {within} ({pct_limit:g}%): the host, not the code")


def _under_ncu(rows: list[_Row], sides: list[str]) -> None:
    """A point's latency rows (``rows``, in place) where the run of ``sides`` (base, new) timed
    its requests under ncu: not judged, the latency being mostly the profiler's."""
    whose = "both runs" if len(sides) == 2 else f"the {sides[0]} run"
    for r in rows:
        r.verdict = "unchanged"  # (shown as not judged: shown_verdicts)
        r.note = _join(r.note, f"{NCU_TIMED_NOTE} ({whose}), which serialises the launches and replays each "
                               "kernel it profiles: the profiler's time more than the code's, not judged (tracekit "
                               "capture --tool none times the requests; the ncu scope compares the kernels)")


#: the SM clocks (MHz) two runs' timed requests ran at differ where they are this far apart
#: (%): 20 MHz of the H200's 1,980 MHz
CLOCK_MOVED_PCT = 1.0


def _with_the_gpu_clock(rows: list[_Row], fb: float | None, fn: float | None, threshold: float) -> None:
    """A point's latency rows (``rows``, in place) where both runs recorded the SM clock their
    timed requests ran at (``fb``, ``fn``: medians, MHz; gpu_timed) and it moved: a row judged
    changed that the clock accounts for (it moved the other way by at least half as much, in
    log terms, and the latency at the base's clock, new x fn / fb, is within the row's limit)
    is held, as ``_clock_accounts`` holds a kernel's; another changed row says the clocks, so
    that a reader weighs them (a request's latency is only partly the GPU's time)."""
    if not fb or not fn or not _beyond(fb, fn, CLOCK_MOVED_PCT):
        return
    clock = f"{fb:,.0f} -> {fn:,.0f} MHz, {100 * (fn - fb) / fb:+z.1f}%, as the timed requests ran"
    for r in rows:
        if r.verdict not in ("regressed", "improved") or not r.base or not r.new or r.base <= 0 or r.new <= 0:
            continue
        moved = math.log(r.new / r.base)
        pct_limit, within = limit(r.scope, r.metric, threshold, False) or (threshold, "threshold")
        at_base = r.new * fn / fb
        if moved * math.log(fn / fb) < 0 and abs(math.log(fn / fb)) >= 0.5 * abs(moved) \
                and not _beyond(r.base, at_base, pct_limit):
            r.verdict = "unchanged"
            r.note = _join(r.note, f"{CLOCK_NOTE} ({clock}): {100 * (at_base - r.base) / r.base:+z.1f}% at the base's "
                           f"clock, within {within} ({pct_limit:g}%): the clock, not the code")
        else:
            r.note = _join(r.note, f"SM clock {clock}")


def _absent_points(con, side: Side) -> dict[str, Absent]:
    """A sweep's points with no run to compare, where its runs in the store or its manifest say
    why (its capture failed, its run is not in the store, ...): point -> why."""
    if side.sweep is None or side.lone_point:
        return {}
    absent = absent_points(con, side.sweep)[0]
    return absent if side.at is None else {p: why for p, why in absent.items() if p in side.at}


# -- what differs between the captures ------------------------------------------------

#: (label, path into a run's row) of the setup a comparison should know differs: the
#: capture's parameters and workload, the GPU and software, the code and the settings
#: (environment, tiles file) it ran with; a dict value is compared key by key
SETUP = [
    ("preset", ("params", "preset")), ("tool", ("params", "tool")), ("bs", ("params", "bs")),
    ("nc", ("params", "nc")), ("iters", ("params", "iters")), ("warmup_ms", ("params", "warmup_ms")),
    ("flush_l2", ("params", "flush_l2")), ("GPU", ("gpu",)), ("driver", ("meta", "gpu", "driver")),
    ("profiler", ("tool_version",)), ("torch", ("meta", "versions", "torch")),
    ("triton", ("meta", "versions", "triton")), ("attention", ("meta", "attention_backend")),
    ("attention kernel", ("meta", "attention_kernel")),
    ("dtype", ("meta", "dtype")), ("code", ("meta", "git_commit")), ("env", ("meta", "settings", "env")),
    ("tiles file", ("meta", "settings", "tiles_sha256")), ("workload", ("meta", "workload")),
    # nsys --cuda-graph-trace: graph (a graph launch one op) or node (its kernels and copies one
    # by one): the kernels' instance counts and the GPU's ops differ by it alone
    ("nsys", ("meta", "nsys_options")),
    # a program captured with `tracekit capture -- CMD`: its command line (another program, or
    # other arguments, is another setup)
    ("program", ("meta", "program", "argv")),
    # ncu --replay-mode: each launch replayed in place (kernel) or in a run of the program of its own
    # per pass (application): caches and memory differ between the two
    ("ncu replay", ("params", "replay_mode")),
]
_POINT = {"bs", "nc"}  # a sweep's points: compared as keys, not as setup


def _setup_runs(con, side: Side, runs: list[int] | None, cols: str) -> list[tuple]:
    """``cols`` of the runs a side's setup is read from: its run, or its sweep's runs; ``runs``:
    of a sweep, those alone (``_compared_runs``; None: all of them)."""
    if side.run_id is not None:
        return con.execute(f"SELECT {cols} FROM runs WHERE run_id = ?", [side.run_id]).fetchall()
    return con.execute(f"SELECT {cols} FROM runs WHERE json_extract_string(params, '$.sweep') = $sweep "
                       "AND ($runs IS NULL OR list_contains($runs, run_id))",
                       {"sweep": side.sweep, "runs": runs}).fetchall()


def _compared_runs(con, side: Side) -> dict[str, set[int]]:
    """A sweep's runs that a comparison compares, by point: the run that stands for the point
    in the run scopes (``Side.points``) and, of a sweep that timed requests, the one whose
    requests stand for it in the sweep scope (``point_runs.sql``); at ``Side.at``'s points
    alone. A failed capture, or an earlier one of a point captured again, is not among them."""
    runs = {p: {s.run_id} for p, s in side.points.items() if s.run_id is not None}
    if side.timed:
        params = {"base": side.sweep, "new": None, "base_run": None, "new_run": None}
        for _side, point, run in con.execute(_sql("point_runs"), params).fetchall():
            if side.at is None or point in side.at:
                runs.setdefault(point, set()).add(run)
    return runs


def _points_runs(con, base: Side, new: Side) -> tuple[list[int], list[int]] | None:
    """Of two sweeps, each one's runs compared at the points both have a run compared at
    (``_compared_runs``), which their setups are read from: a point one sweep has alone is not
    compared, and a setup its run (or a run not compared: a failed capture) differs in would
    hide the sweeps' difference at the others. None where a side is a run, or they share no
    such point."""
    if base.run_id is not None or new.run_id is not None:
        return None
    b, n = _compared_runs(con, base), _compared_runs(con, new)
    shared = b.keys() & n.keys()
    if not shared:
        return None
    return sorted({r for p in shared for r in b[p]}), sorted({r for p in shared for r in n[p]})


def _setup(con, side: Side, runs: list[int] | None = None) -> dict[str, Any]:
    """The side's SETUP values, flattened (``env TRACEKIT_TILES``, ``workload d_model``);
    for a sweep, the values all its runs (``runs`` of them; None: all) share (a value its
    runs differ in is left out)."""
    rows = _setup_runs(con, side, runs, "params, meta, gpu, tool_version")
    flats: list[dict[str, str]] = []  # per run: label -> its value as JSON
    for params, meta, gpu, tool_version in rows:
        flat: dict[str, str] = {}
        flats.append(flat)
        row = {"params": json.loads(params or "{}"), "meta": json.loads(meta or "{}"), "gpu": gpu,
               "tool_version": tool_version}
        for label, path in SETUP:
            if side.run_id is None and label in _POINT:
                continue
            v: Any = row
            for part in path:
                v = v.get(part) if isinstance(v, dict) else None
            items = v.items() if isinstance(v, dict) else [(None, v)]
            for k, x in items:
                if x is not None:
                    flat[label if k is None else f"{label} {k}"] = json.dumps(x, sort_keys=True)
        flat["settings"] = json.dumps(isinstance(row["meta"].get("settings"), dict))
    # settings recorded (as captures do since they record them): a variable not in a run's
    # env was unset there, and no tiles file is the built-in tiles, not something unknown
    if all(f["settings"] == "true" for f in flats):
        named = {k for f in flats for k in f if k.startswith("env ") or k == "tiles file"}
        for f in flats:
            for k in named - f.keys():
                f[k] = json.dumps("(unset)" if k.startswith("env ") else "(none: the built-in tiles)")
    seen: dict[str, set] = {}
    for f in flats:
        for k, x in f.items():
            seen.setdefault(k, set()).add(x)
    return {k: json.loads(next(iter(v))) for k, v in seen.items() if len(v) == 1}


def _tiles(con, side: Side, runs: list[int] | None = None) -> str | None:
    """The tiles every run of the side (``runs`` of a sweep, as ``_setup``) ran, as its
    captures recorded them: the tiles file's sha256, or 'built-in' (no file); None where a run
    did not record it or the runs differ."""
    found = set()
    for (meta,) in _setup_runs(con, side, runs, "meta"):
        settings = json.loads(meta or "{}").get("settings")
        if not isinstance(settings, dict) or "tiles_sha256" not in settings:
            return None
        found.add(settings["tiles_sha256"] or "built-in")
    return next(iter(found)) if len(found) == 1 else None


#: what may differ between two captures of one workload under two profilers (SETUP's labels)
_PROFILER_SETUP = ("tool", "profiler", "ncu replay", "nsys")


def same_workload(con, run_id: int, kind: str) -> int | None:
    """The latest captured ok run of ``kind`` (nsys, ncu) of run ``run_id``'s workload: a capture of the
    same command whose setup differs in the profiler alone (the HSTU workload at the run's bs, nc
    and preset, or the same program with the same arguments); None where the store has none, or
    the run did not record what it ran (a bare export)."""
    recorded = ("coalesce(json_extract_string(params, '$.bs') || ',' || json_extract_string(params, '$.nc'), "
                "json_extract_string(meta, '$.program.argv')) IS NOT NULL")
    if not con.execute(f"SELECT 1 FROM runs WHERE run_id = ? AND {recorded}", [run_id]).fetchall():
        return None
    others = con.execute(f"SELECT run_id FROM runs WHERE list_contains(string_split(kind, ','), ?) AND {recorded} "
                         "AND coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok' AND run_id <> ? "
                         "ORDER BY run_captured_us(meta) DESC NULLS LAST, run_id DESC", [kind, run_id]).fetchall()
    for (other,) in others:
        differ = setup_differences(con, Side(str(run_id), run_id=run_id), Side(str(other), run_id=other))
        if all(d.split(" ")[0] in _PROFILER_SETUP for d in differ):
            return other
    return None


def setup_differences(con, base: Side, new: Side, points: bool = True) -> list[str]:
    """What differs between the two sides' captures (``SETUP``), as ``label base -> new``;
    a value one side did not record is not compared (a setting of a capture that recorded
    its settings is recorded: unset, or the built-in tiles). ``points``: a run's bs and nc
    count (False where the runs stand for their sweeps, compared point by point)."""
    rb, rn = _points_runs(con, base, new) or (None, None)
    b, n = _setup(con, base, rb), _setup(con, new, rn)
    builtin = "(none: the built-in tiles)"
    if b.get("settings") and n.get("settings"):
        for one, other in ((b, n), (n, b)):
            for k in other:
                if k.startswith("env ") and k not in one:
                    one[k] = "(unset)"
            if "tiles file" in other and "tiles file" not in one:
                one["tiles file"] = builtin
    changed = [k for k in b if k in n and b[k] != n[k] and k not in ("settings", "workload preset")
               and (points or k not in _POINT)]
    if "preset" in changed:  # (the workload's sizes follow from its preset)
        changed = [k for k in changed if not k.startswith("workload ")]
    tiles = _tiles(con, base, rb)
    if tiles is not None and tiles == _tiles(con, new, rn):
        # (the tiles file's content is the same, or both ran the built-in tiles: where it lay does not matter)
        changed = [k for k in changed if k != "env TRACEKIT_TILES"]

    def shown(k: str, v: Any) -> str:
        text = str(v)
        if k == "code":  # a commit: its first 12 digits, and whether the tree was dirty
            head, plus, rest = text.partition("+")
            text = head[:12] + plus + rest
        elif k == "tiles file" and not text.startswith("("):  # its content's sha256
            text = f"sha256 {text[:12]}"
        return cut_end(text, 100)

    out = []
    for k in changed:
        if k == "program" and isinstance(b[k], list) and isinstance(n[k], list):
            out.append(f"{k} {' -> '.join(_commands(b[k], n[k]))}")
        else:
            out.append(f"{k} {shown(k, b[k])} -> {shown(k, n[k])}")
    return out


def _commands(a: list, b: list) -> tuple[str, str]:
    """Two command lines as a shell writes them, where they differ: the arguments both
    start with shown as ``…`` after the program's name (a long ``-c`` script would hide
    the one argument that changed), each cut to 100 characters."""
    import shlex

    a, b = [str(x) for x in a], [str(x) for x in b]
    same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

    def one(argv: list[str]) -> str:
        if not argv:
            return "(none)"
        head = Path(argv[0]).name if same >= 1 else argv[0]
        rest = argv[max(same, 1):]
        return cut_end(" ".join([shlex.quote(head), *(["…"] if same > 1 else []), *map(shlex.quote, rest)]), 100)

    return one(a), one(b)


# -- entry point --------------------------------------------------------------------


def scopes_asked(by: str | list[str] | tuple[str, ...] | None, choices: tuple[str, ...],
                 why: Callable[[str], str] = lambda scope: "") -> list[str]:
    """The scopes ``--by`` names, lowercased, in order ([] where it is not given: every
    scope): each item may hold several, comma-separated. A ``--by`` naming none (an empty
    list, "" or "," from an unset variable: not every scope) or a scope not in ``choices``
    is a ``ParamError`` naming it as typed (``why(scope)`` adds a reason)."""
    expect(by, (str, list, tuple, type(None)), "--by")
    given = [by] if isinstance(by, str) else list(by or [])
    for item in given:
        expect(item, str, "--by")
    blank = [item for item in given if not item.replace(",", "").strip()]
    if (by is not None and not given) or blank:
        out = "" if blank else " (None)"  # (the library's empty list: its None is every scope)
        raise ParamError(f"--by {(blank or [by])[0]!r}: no scope in it; choose from {', '.join(choices)}, "
                         f"or leave --by out{out} for every scope")
    typed = [b.strip() for item in given for b in item.split(",") if b.strip()]
    for b in typed:
        if b.lower() not in choices:
            raise ParamError(f"--by {b!r}: choose from {', '.join(choices)}{why(b.lower())}")
    return [b.lower() for b in typed]


def _pair_rows(con, sb: Side, sn: Side, scopes: list[str], threshold: float, point: str | None = None,
               unlined: list[str] | None = None, uncompared: list[str] | None = None,
               paths: bool | None = None) -> list[_Row]:
    """The rows of two runs in the run scopes ``scopes`` (all but sweep), unsorted; ``point``:
    the two sweeps' point they are, where a run without source lines to compare is one of
    ``unlined`` (the error), not an error, and the point and the kernels whose lines are not
    compared are added to ``uncompared``. ``paths``: whether GPU memory is compared per NVTX
    path (default: where both runs traced NVTX; two sweeps': where both sweeps did, at every
    point alike)."""
    params = {"base": sb.run_id, "new": sn.run_id}
    cuda = ["CUDA" not in side.untraced for side in (sb, sn)]
    host_judged = not any(cuda)  # host time is the programs' own: neither traced CUDA
    rows: list[_Row] = []
    matched = _match_kernels(con, params) if {"kernel", "gpu"} & set(scopes) else None
    launches = con.sql(_sql("ncu_launches"), params=params).pl() if {"ncu", "source"} & set(scopes) else None
    kernel_ids: dict[str, int] = {}
    for scope in scopes:
        if scope == "kernel":
            kernel_rows, kernel_ids = _kernel_scope(con, params, threshold, matched)
            rows += kernel_rows
        elif scope == "nvtx":
            rows += _nvtx_scope(con, params, threshold, gpu=all(cuda), host_judged=host_judged,
                                cpu=not any("CPU sample" in side.untraced for side in (sb, sn)))
        elif scope == "api":
            con.register("_diff_keymap", _namesakes(con, _present(con, params, "_api_calls")))
            try:
                api = _simple_scope(con, "api", _sql("samples_api"), params, threshold,
                                    [("total_ns", "total", 1), ("calls", "count", 1), ("med_ns", "median", 1)], True)
            finally:
                con.unregister("_diff_keymap")
            for r in api:  # a polling call's count is how often the host asked while it waited
                if r.metric == "calls" and r.verdict in ("regressed", "improved") and POLLS.match(r.key):
                    r.verdict, r.note = "unchanged", _join(r.note, POLL_NOTE)
            rows += api
        elif scope == "memcpy":
            mem = _simple_scope(con, "memcpy", _sql("samples_memcpy"), params, threshold,
                                [("total_ns", "total", 1), ("count", "count", 1), ("med_ns", "median", 1)], False)
            kinds = _memory_kinds(con, params)
            for r in mem:  # (the same bytes from pinned memory move several times faster than from pageable)
                if r.key in kinds:
                    r.note = _join(r.note, kinds[r.key])
            rows += mem
        elif scope == "gpu":
            rows += _gpu_scope(con, params, threshold, matched[0])
        elif scope == "um":  # (counts, not time: after the GPU time rows, effect 0)
            rows += _simple_scope(con, "um", _sql("samples_um"), params, threshold, [("faults", "total", 1)], False,
                                  effect_scale=0.0)
        elif scope == "cpu":
            rows += _cpu_scope(con, params, threshold)
        elif scope == "python":
            rows += _python_scope(con, params, threshold)
        elif scope == "memory":  # (bytes and counts, not time: after the GPU time rows, effect 0)
            rows += _memory_scope(con, params, threshold, paths=paths if paths is not None else
                                  "nvtx" in sb.scopes() and "nvtx" in sn.scopes())
        elif scope == "ncu":
            rows += _ncu_scope(con, params, threshold, launches)
        elif scope == "source":
            try:
                rows += _source_scope(con, params, threshold, (sb.label, sn.label), launches, point, uncompared)
            except NoSourceLines as err:
                if unlined is None:
                    raise
                unlined.append(err)  # ('run 3 (...) has no source lines ...'; said without how to get them)
                uncompared.append(f"{point}: {str(err).removeprefix('--by source: ').partition('; ')[0]}")
        elif scope == "bench":
            rows += _bench_scope(con, params, threshold)
    if matched is not None:
        _with_the_sm_clock(con, rows, params, matched[0], kernel_ids, threshold, (sb.label, sn.label))
    if any(s in scopes for s in ("kernel", "memcpy", "nvtx")):
        gpu_time = max((t for _, t in con.execute(_sql("gpu_time"), params).fetchall()), default=0.0)
        floor = MATERIAL_PCT / 100 * gpu_time
        for r in rows:
            if (r.scope, r.metric) in _MATERIAL and r.verdict in ("regressed", "improved") and r.effect < floor:
                r.verdict = "unchanged"
                r.note = _join(r.note, f"immaterial: the key's time moved by {_human('x_ns', r.effect)}, "
                                       f"< {MATERIAL_PCT:g}% of the run's GPU time")
    return rows


def _at_the_runs_point(con, sb: Side, sn: Side) -> tuple[Side, Side]:
    """A program's sweep (one that timed no requests) against a run: the sweep's run at the
    run's point ('m=1024,dtype=fp16', macro grid_point) stands for the sweep, where it has
    one, and a run at none of its points is an error; else the pair is as given (``_scopes``
    says what is wrong with it)."""
    for i, (sweep, run) in enumerate(((sb, sn), (sn, sb))):
        if sweep.run_id is None and not sweep.timed and sweep.points and run.run_id is not None and not run.pending:
            point = con.execute("SELECT grid_point(params) FROM runs WHERE run_id = ?", [run.run_id]).fetchall()[0][0]
            if point in sweep.points:
                at = sweep.points[point]
                if at.run_id == run.run_id:  # (every row would read unchanged: not what was meant)
                    raise QueryError(f"diff: {run.label} is {sweep.label}'s own run at {point}: compared with "
                                     "itself; give another sweep's run at that point, or two sweeps")
                return (at, run) if i == 0 else (run, at)
            # (a program's sweep has no scope of its own a run could be compared in)
            shown = list(sweep.points)[:4]
            more = f" and {len(sweep.points) - len(shown)} more" if len(sweep.points) > len(shown) else ""
            raise QueryError(f"diff: {run.label} is at none of the points of {sweep.label} the store holds ("
                             f"{'the run is at ' + point if point else 'the run is of no grid'}; the sweep's: "
                             f"{', '.join(shown)}{more}: tracekit query {_points_query(sweep)} -p "
                             f"sweep={sweep.sweep}): a program's sweep is compared with a run by its run at the "
                             "run's point; give a run at one of those points (or ingest the sweep's run at the "
                             "run's point), or two sweeps")
    return sb, sn


def at_points(con, sweeps: list[Side]) -> frozenset[str] | None:
    """The points ``sweeps`` have a run compared at (``_compared_runs``), where a repeat of the
    base measures the noise of their comparisons with the base (``compare``): a point no run
    is compared at would give the repeat's rows alone, and what it lacks there would be said
    for nothing. None where one of them is not a sweep (a run stands for a point, or for its
    sweep)."""
    if not sweeps or any(s.run_id is not None or s.sweep is None for s in sweeps):
        return None
    return frozenset(p for s in sweeps for p in _compared_runs(con, s))


def _at(con, base: Side, new: Side, at: frozenset[str] | None) -> tuple[Side, Side] | None:
    """Two sweeps at points ``at`` alone (``Side.at``); as given where ``at`` is None or a side
    is not a sweep; None where the two have no run compared at any of those points
    (``_points_runs``)."""
    if at is None or base.run_id is not None or new.run_id is not None:
        return base, new
    cut = [replace(s, at=at, points={p: r for p, r in s.points.items() if p in at}) for s in (base, new)]
    return (cut[0], cut[1]) if _points_runs(con, cut[0], cut[1]) else None


def _grid_names(points) -> list[str]:
    """The grid's parameter names in ``points`` ('m=1024,dtype=fp16': m, dtype; a quoted
    value's text is no name), in their order."""
    names = (re.findall(r'(?:^|,)([A-Za-z_][\w.-]*)=', re.sub(r'"(?:[^"\\]|\\.)*"', '""', p)) for p in points)
    return list(dict.fromkeys(n for ns in names for n in ns))


def _as_compared(con, base: Side, new: Side) -> tuple[Side, Side]:
    """The two sides as ``diff`` compares them: a program's sweep against a run by its run at
    the run's point (``_at_the_runs_point``); one run against itself as its own point, not
    its sweep; two sweeps that share points with those points alone (their scopes, and what
    their points did not trace, are of the points compared: a point one sweep has alone is
    said by ``_paired_points``, from the sweeps as given)."""
    sb, sn = _at_the_runs_point(con, base, new)
    if sb.run_id is not None and sb.run_id == sn.run_id:
        sb.own_point = sn.own_point = True
    if sb.run_id is None and sn.run_id is None and (both := sb.points.keys() & sn.points.keys()):
        sb, sn = (replace(side, points={p: s for p, s in side.points.items() if p in both}) for side in (sb, sn))
    return sb, sn


def stand_in(tk, base: Any, new: Any, by: list[str] | str | None = None) -> str | None:
    """What stood in for a side of a comparison (``diff``, ``compare``) that its table's
    column does not say, as a line; None where each side stood for itself. A program's sweep
    against a run: the sweep's run at the run's point ('base sweep S is compared by its run
    at m=4096,dtype=fp16, run 3 (NAME)'). A sweep's run (by id or name) in the sweep scope: its
    whole sweep, point by point ('base run 3 (NAME) stands for its sweep S in the sweep scope
    (compared point by point)'); a run against itself is its own point.
    ``base`` and ``new`` as the comparison was given them (a file: the run it ingested), ``by``
    its scopes asked (None: every scope)."""
    with warnings.catch_warnings():  # (what resolving them says, the comparison said: a sweep folder's left-out point)
        warnings.simplefilter("ignore", CaptureWarning)
        sides = [resolve(tk, r) for r in (base, new)]
    pair = _as_compared(tk.con, *sides)
    for role, was, now in zip(("base", "new"), sides, pair, strict=True):
        if was.run_id is None and now.run_id is not None:
            point = next(p for p, s in was.points.items() if s is now)
            return f"{role} {was.label} is compared by its run at {point}, {now.label}"
    asked = scopes_asked(by, SCOPES) if by else None
    if "sweep" not in _not_one_sweep(*pair, _scopes(*pair, asked), bool(asked)):
        return None
    runs = [f"{role} {side.label} stands for its sweep {side.sweep}" for role, side in zip(("base", "new"), pair, strict=True)
            if side.run_id is not None and not side.lone_point and side.sweep is not None]
    return f"{' and '.join(runs)} in the sweep scope (compared point by point)" if runs else None


def measured_scopes(tk, base: Any, new: Any, by: list[str] | str | None = None,
                    wanted: set[str] | frozenset[str] = frozenset(),
                    at: frozenset[str] | None = None) -> tuple[list[str], list[str], str] | None:
    """The scopes ``diff(tk, base, new, by)`` compares where ``by`` is cut to the scopes both
    sides have (None: every scope both have, those compared only when asked left out), in
    ``SCOPES``' order; those of ``wanted`` it lacks (the scopes compared with another run,
    which a repeat of the base, ``new``, measures the noise of: ``compare``); and that said of
    ``new``, with its kinds of run and what it did not trace among them (diff's words: ``[nsys
    without Python sample trace] has no python scope``; "" where it lacks none). None where
    the two cannot be compared at all, or share no scope but a sweep's requests (a capture of
    another tool: no repeat of the other), and diff says why. ``at``: as ``diff``'s."""
    with warnings.catch_warnings():  # (what resolving them says, the comparison says)
        warnings.simplefilter("ignore", CaptureWarning)
        try:
            cut = _at(tk.con, resolve(tk, base), resolve(tk, new), at)
            if cut is None:
                return None
            sb, sn = _as_compared(tk.con, *cut)
            asked = scopes_asked(by, SCOPES)
            both = sb.scopes() & sn.scopes()
            if not both - {"sweep"}:
                return None
            scopes = [] if asked and not both & set(asked) else _scopes(sb, sn, [s for s in asked if s in both])
            scopes = _not_one_sweep(sb, sn, scopes, bool(asked)) if scopes else []
        except QueryError:
            return None
    lacking = [s for s in SCOPES if s in wanted and s not in scopes]
    return scopes, lacking, f"[{_kinds(sn, lacking[0])}] has no {listed(lacking, 'or')} scope" if lacking else ""


def _why_absent(con, side: Side, points: list[str], role: str) -> list[str | None]:
    """Why sweep ``side`` has no run to stand for each of ``points`` (the other sweep's), as a
    sentence where known (``sweep_points.why_absent``), else None: the other sweep has the point
    alone. ``role``: 'base' or 'new', how the lines name the side."""
    if side.sweep is None:
        return [None] * len(points)
    return [None if why is None else said(f"{role} {side.label}", p, why)
            for p, why in zip(points, why_absent(con, side.sweep, points), strict=True)]


def _paired_points(con, sb: Side, sn: Side) -> dict[str, tuple[Side, Side]]:
    """Two sweeps' points, paired (the points both have, in the base's order); the points one
    sweep lacks are said in a warning (its capture there failed, or the other has it alone),
    none in common is an error."""
    both = {p: (sb.points[p], sn.points[p]) for p in sb.points if p in sn.points}
    alone = []
    for (side, role), (other, other_role) in (((sb, "base"), (sn, "new")), ((sn, "new"), (sb, "base"))):
        lacks = [p for p in other.points if p not in side.points]
        why = _why_absent(con, side, lacks, role)
        alone += [w for w in why if w is not None]
        if None in why:
            alone.append(f"{other_role} {other.label} alone has {', '.join(p for p, w in zip(lacks, why, strict=True) if w is None)}")
    neither = {role: _absent_points(con, side) for side, role in ((sb, "base"), (sn, "new"))}
    for p in neither["base"]:  # (a point of the grid that both lack: said too, not left out)
        if p in neither["new"] and p not in sb.points and p not in sn.points:
            alone += [said(f"{role} {side.label}", p, neither[role][p]) for side, role in ((sb, "base"), (sn, "new"))]
    # (a point of one sweep's grid alone that it has no run of, its capture failed there: said, a
    # fact of that sweep the comparison cannot show)
    for (side, role), other in (((sb, "base"), "new"), ((sn, "new"), "base")):
        alone += [said(f"{role} {side.label}", p, why) for p, why in neither[role].items()
                  if p not in sb.points and p not in sn.points and p not in neither[other]]
    if not both:
        raise QueryError(f"diff: {sb.label} and {sn.label} share no point ({'; '.join(alone)}); "
                         "compare two sweeps of one grid, or two of their runs")
    if alone:
        warn_from_caller(CaptureWarning(f"diff: {'; '.join(alone)}: compared at the points both have"))
    return both


def diff(tk, base: Any, new: Any, by: list[str] | str | None = None, threshold_pct: float = 5.0,
         at: frozenset[str] | None = None) -> pl.DataFrame:
    """Compare ``new`` against ``base`` (run ids, run names, sweep ids or files); see the
    module docstring for the columns and the verdict rule. ``at``: two sweeps compared at
    those points alone (``at_points``; ``NoPointsCompared`` where they have no run compared at any)."""
    for side, ref in (("base", base), ("new", new)):
        expect(ref, (str, int, os.PathLike), f"diff: {side}")
    expect(threshold_pct, (int, float), "--threshold")  # (not "5": a bool or text is no percentage)
    threshold = float(threshold_pct)
    if not threshold > 0 or math.isinf(threshold):
        raise ParamError(f"--threshold {threshold_pct!r}: must be a positive percentage (e.g. 5)")
    by = scopes_asked(by, SCOPES)
    # run references first, files (ingested) last: a bad reference leaves the store as it was
    files = [_is_file(r) for r in (base, new)]
    sides = {i: resolve(tk, r) for i, r in enumerate((base, new)) if not files[i]}
    for i, r in enumerate((base, new)):  # a file the other side cannot be compared with is not ingested
        if files[i]:
            sides[i] = resolve(tk, r, pair_check(sides.get(1 - i), i == 0, by))
    if (cut := _at(tk.con, sides[0], sides[1], at)) is None:
        its = [] if sides[1].run_id is not None else tk.con.execute(
            "SELECT DISTINCT grid_point(params) FROM runs WHERE in_sweep(params, ?)", [sides[1].sweep]).fetchall()
        grids = [_grid_names(p for (p,) in its), _grid_names(at or ())]
        if grids[0] and grids[0] != grids[1]:
            raise QueryError(f"diff: {sides[1].label}'s grid ({', '.join(grids[0])}) is not that of the points "
                             f"compared ({', '.join(grids[1])}): it cannot measure their noise; give a sweep of "
                             "that grid taken again")
        raise NoPointsCompared(f"diff: {sides[0].label} and {sides[1].label} have no run compared at any of the points "
                         f"compared ({', '.join(sorted(at or ()))})")
    sides[0], sides[1] = cut
    sb, sn = _as_compared(tk.con, sides[0], sides[1])
    if sb.run_id is not None and sb.run_id == sn.run_id and str(base).strip() != str(new).strip():
        # (a run folder already in the store is that run; the same text twice is asked on purpose,
        # and each row's note says identical: as diff --jobs says of a job)
        warn_from_caller(CaptureWarning(f"diff: {base} and {new} name one run ({sb.label}): it is compared with "
                                        "itself; name two runs (tracekit runs)"))
    _not_by_a_shared_name(tk, sb, sn)
    scopes = _not_one_sweep(sb, sn, _scopes(sb, sn, by), bool(by))
    # (what one capture did not trace is said, not dropped in silence: of the scopes both have where
    # none were asked, else what the memory scope asked for cannot compare)
    for side, lacks in untraced_scopes(sb, sn):
        memory = MEMORY_WITHOUT_PATHS if "nvtx" in lacks and "memory" in scopes else ""
        if by and memory:
            warn_from_caller(UntracedScopes(f"diff: {side.label} [{_kinds(side, 'nvtx')}]: {memory}"))
        elif not by:
            warn_from_caller(UntracedScopes(
                f"diff: {side.label} [{_kinds(side, lacks)}] has no {listed(lacks, 'or')} scope: the "
                f"{listed(lacks)} rows are not compared" + (f"; {memory}" if memory else "")))
    for side in (sb,) if sb.run_id is not None and sb.run_id == sn.run_id else (sb, sn):
        if side.status not in (None, "ok"):
            why = f" ({side.error})" if side.error else ""
            warn_from_caller(CaptureWarning(f"diff: {side.label}: the capture's status is {side.status!r}{why}; "
                                            "its numbers may be partial"))
        if (side.run_id is not None and not side.pending and "nsys" in side.kinds and "CUDA" not in side.untraced
                and reads_cuda(scopes) and no_cuda_event(tk, side.run_id)):
            # (its kernels would read as removed, or added, by the program: the capture missed them)
            warn_from_caller(CaptureWarning(f"diff: {side.label} {NO_CUDA_EVENT}; its kernels, CUDA API calls, copies "
                                            "and GPU time are compared as none"))
    con = tk.con
    # two sweeps, or two runs that name their sweeps compared in the sweep scope alone: the sweeps
    # are compared point by point, and the points' own bs and nc are not a difference of setup
    whole = (sb.run_id is None and sn.run_id is None) or (scopes == ["sweep"] and not (sb.lone_point or sn.lone_point))
    differs = setup_differences(con, sb, sn, points=not whole) if (sb.run_id, sb.sweep) != (sn.run_id, sn.sweep) \
        else []
    run_scopes = [sc for sc in scopes if sc != "sweep"]
    pairs = _paired_points(con, sides[0], sides[1]) if run_scopes and sb.run_id is None and sn.run_id is None else {}
    if pairs:  # a program's command, which each point's values change, compared at one point ('--slow' added)
        pb, pn = next(iter(pairs.values()))
        differs += [d for d in setup_differences(con, pb, pn) if d.startswith("program ") and d not in differs]
    if differs:
        warn_from_caller(CaptureWarning(f"diff: the captures differ in setup: {'; '.join(differs)}"))
    rows: list[_Row] = []
    if pairs:  # two sweeps: point by point
        unlined: list[NoSourceLines] = []  # (the errors of the points whose reports hold no source lines to compare)
        uncompared: list[str] = []  # (the points and kernels whose lines are not compared, said once)
        paths = "nvtx" in sb.scopes() and "nvtx" in sn.scopes()  # (memory's keys alike at every point)
        for point, (pb, pn) in pairs.items():
            for r in _pair_rows(con, pb, pn, run_scopes, threshold, point, unlined, uncompared, paths):
                r.key = f"{point}: {r.key}"
                rows.append(r)
        if unlined and len(unlined) == len(pairs):  # (the base's where it lacks them at every point)
            raise NoSourceLines(f"--by source: no point of {sb.label} and {sn.label} has source lines to compare; "
                                f"at {next(iter(pairs))}: {str(unlined[0]).removeprefix('--by source: ')}",
                                max(err.side for err in unlined))
        if uncompared:
            warn_from_caller(CaptureWarning(_not_compared(uncompared)))
    elif run_scopes:
        rows += _pair_rows(con, sb, sn, run_scopes, threshold)
    if "sweep" in scopes:
        rows += _sweep_scope(con, sb, sn, threshold)
    # GPU time (or latency; host time in runs without CUDA) first; API calls change host
    # time only: after, by that change
    rows.sort(key=lambda r: (r.scope == "api", -r.effect, SCOPES.index(r.scope), -r.weight, r.key, r.order))
    data = {c: [] for c in COLUMNS}
    for r in rows:
        delta = None if r.base is None or r.new is None else r.new - r.base
        for c, v in (("scope", r.scope), ("key", r.key), ("metric", r.metric), ("base", r.base), ("new", r.new),
                     ("delta", delta), ("delta_pct", _pct(delta, r.base)), ("verdict", r.verdict),
                     ("p_value", r.p_value), ("note", r.note), ("delta_pct_low", r.low), ("delta_pct_high", r.high)):
            data[c].append(v)
    return pl.DataFrame(data, schema=SCHEMA)


# -- terminal table -----------------------------------------------------------------


def held_by_repeats(df: pl.DataFrame) -> str:
    """How many of a diff's changes its repeats held (``diff --repeat``), as the end of its
    count line: those rows' notes are cut in a narrow table. A row counts where the repeats
    left it unchanged (a job's row judged on some ranks names others held: it is judged); where
    no row has a noise measured (the repeats lack the scopes compared), it says that instead."""
    from .compare import NOISE_NOTE

    if "noise_pct" not in df.columns:
        return ""
    n = df.filter(pl.col("note").str.contains(NOISE_NOTE, literal=True) & (pl.col("verdict") == "unchanged")).height
    if n:
        return f"; {n} change(s) within the repeats' noise, not judged"
    if df.height and df["noise_pct"].is_null().all():  # (repeats without the scopes compared: a warning says so)
        return "; the repeats measured the noise of none of these rows"
    return "; no change was within the repeats' noise"


def nothing_to_compare() -> pl.Expr:
    """Whether a row is a sweep point with no run to compare on a side (its note ends with
    ``NOTHING_TO_COMPARE``): not judged, and shown whatever the limit, as a change is."""
    return pl.col("note").fill_null("").str.ends_with(NOTHING_TO_COMPARE)


def said_first() -> pl.Expr:
    """Whether a reader sees a row whatever the limit: judged changed (its verdict not
    ``unchanged``), or a point with nothing to compare (``nothing_to_compare``)."""
    return (pl.col("verdict") != "unchanged") | nothing_to_compare()


def changes_first(df: pl.DataFrame, limit: int) -> pl.DataFrame:
    """The rows a reader sees first, in the diff's order: every row ``said_first`` (judged
    changed, or with nothing to compare), then the largest others up to ``limit`` rows in all
    (0: all rows)."""
    if not limit or df.height <= limit:
        return df
    keep = df.with_row_index("_first_i").with_columns(said_first().alias("_said"))
    said = keep.filter(pl.col("_said"))
    rest = keep.filter(~pl.col("_said")).head(max(limit - said.height, 0))
    return pl.concat([said, rest]).sort("_first_i").drop("_first_i", "_said")


_STAT = {"range_total_ns": "total", "range_med_ns": "median", "latency_med_ms": "median", "latency_p95_ms": "p95",
         "peak_mem_allocated_mb": "allocated", "peak_mem_reserved_mb": "reserved", "peak_alloc_mb": "allocated",
         "peak_reserved_mb": "reserved"}


def moved(df: pl.DataFrame, top: int = 3) -> list[str]:
    """What moved beyond the noise, in a few lines for a reader, from the diff's rows
    (``diff``): only keys judged changed (regressed, improved, added, removed). Each GPU's
    busy time; the kernel time in all and the kernels that moved (with their share of it), the
    same for memory operations; Unified Memory's page faults that moved; the GPU memory (a device's
    kind, an NVTX path's allocations) that moved; the NVTX paths and the
    functions whose sampled CPU time moved; NVTX paths judged on wall time (runs without CUDA); ncu's
    launches per kernel, with its theoretical occupancy where that moved and why (the note's
    reasons, whole), and those whose durations moved with the SM clock in as many cycles
    (held, and said so: the clock, not the code), and the nsys kernel and busy times held so;
    a benchmark's variants whose time per call moved; the request latency points (where one
    changed, over two or more shared points, the speedup of their medians: ``_speedup_line``),
    their peak memory and a benchmark variant's, and those held because the host's pace moved
    them. Each line names the ``top`` that moved most and counts those it leaves out. Empty
    where nothing was judged changed or held."""
    def val(x: float | None) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    def delta(r: dict) -> float:
        return (val(r["new"]) or 0.0) - (val(r["base"]) or 0.0)

    def how(r: dict) -> str:
        pct = val(r["delta_pct"])
        return ", ".join(([f"{pct:+z.1f} %"] if pct is not None and r["verdict"] not in ("added", "removed") else [])
                         + [r["verdict"]])

    def more(shown: int, of: int) -> str:
        """What a line of the few that moved most leaves out, counted: none goes unsaid."""
        return f"; and {of - shown} more" if of > shown else ""

    def durations(rs: list[dict], kinds: list[str]) -> str:
        """How ncu launches' durations moved: by how much (a range over several), in % and the verdicts."""
        ds = sorted(delta(r) for r in rs)
        ps = sorted(p for r in rs if (p := val(r["delta_pct"])) is not None)
        moved_by = signed_human("duration_ns", ds[0]) if len(ds) == 1 or ds[0] == ds[-1] else \
            f"{signed_human('duration_ns', ds[0])} to {signed_human('duration_ns', ds[-1])}"
        by_pct = [] if not ps else [f"{ps[0]:+z.1f} %" if ps[0] == ps[-1] else f"{ps[0]:+z.1f} to {ps[-1]:+z.1f} %"]
        return f"{moved_by} ({', '.join([*by_pct, *kinds])})"

    changed = df.filter(pl.col("verdict") != "unchanged")
    # every key named as the diff's table names it, told apart from every other key of the diff (not
    # only from the few named here): two kernels `at::native::vectorized_elementwise_kernel` read apart
    label = short_keys(df)
    lines = []
    for r in changed.filter((pl.col("scope") == "gpu") & (pl.col("metric") == "busy_ns")).iter_rows(named=True):
        lines.append(f"GPU busy, {r['key']}: {signed_human('busy_ns', delta(r))} ({how(r)})")
    for scope, what in (("kernel", "Kernel time"), ("memcpy", "Memory operations' time")):
        judged = {}  # key -> its first judged row (its total's where that is judged)
        for r in changed.filter(pl.col("scope") == scope).iter_rows(named=True):
            if r["key"] not in judged or r["metric"] == "total_ns":
                judged[r["key"]] = r
        if not judged:
            continue
        totals = {r["key"]: r for r in df.filter((pl.col("scope") == scope) & (pl.col("metric") == "total_ns"))
                  .iter_rows(named=True)}
        total = sum(delta(r) for r in totals.values())
        moves = {k: delta(totals[k]) if k in totals else 0.0 for k in judged}
        movers = sorted(judged, key=lambda k: -abs(moves[k]))[:top]
        # shares only where every judged key moved the total's way: else they pass 100 % and say nothing
        shares = bool(total) and all(d * total >= 0 for d in moves.values())
        parts = []
        for k in movers:
            d, r = moves[k], judged[k]
            share = [f"{min(100 * d / total, 100):.0f} % of it"] if shares and d else []
            verdict = r["verdict"] if r["metric"] == "total_ns" else f"{r['metric']} {r['verdict']}"
            memory = [p for p in (r["note"] or "").split("; ") if p.startswith(MEMORY_NOTE)]  # (what changed the time)
            parts.append(f"{label[k]} {signed_human('total_ns', d)} ({', '.join([*share, verdict, *memory])})")
        lines.append(f"{what} {signed_human('total_ns', total)} in all: " + "; ".join(parts) + more(len(parts), len(judged)))
    faults = list(changed.filter(pl.col("scope") == "um").iter_rows(named=True))
    if faults:  # (what a prefetch or a memory advice changes: the faults, beside the migrations' time above)
        lines.append("Unified Memory page faults: " + "; ".join(
            f"{r['key'].replace(' page faults', '')} "
            f"{_human('faults', val(r['base']) or 0)} -> {_human('faults', val(r['new']) or 0)} ({how(r)})"
            for r in faults))
    memory: dict[str, list[dict]] = {}  # key -> its changed rows (GPU memory: a device's kind, an NVTX path's)
    for r in changed.filter(pl.col("scope") == "memory").iter_rows(named=True):
        memory.setdefault(r["key"], []).append(r)
    if memory:
        lines.append("GPU memory: " + "; ".join(
            f"{key} " + ", ".join(f"{MEMORY_WORDS[r['metric']]} {_human(r['metric'], val(r['base']) or 0)} -> "
                                  f"{_human(r['metric'], val(r['new']) or 0)} ({how(r)})" for r in rows_)
            for key, rows_ in list(memory.items())[:top]) + more(top, len(memory)))
    # (host code: what a launch-bound loop spends its CPU on, beside the GPU's time above)
    for what, rows_ in (("NVTX ranges", changed.filter((pl.col("scope") == "nvtx") & (pl.col("metric") == "cpu_ns"))),
                        ("functions", changed.filter(pl.col("scope") == "cpu"))):
        sampled = sorted(rows_.iter_rows(named=True), key=lambda r: -abs(delta(r)))[:top]  # (the largest change first)
        if sampled:
            named = label if what == "functions" else {r["key"]: r["key"] for r in sampled}  # (paths whole)
            lines.append(f"CPU time in {what} (sampled): " + "; ".join(
                f"{named[r['key']]} {_human('x_ns', val(r['base']) or 0)} -> {_human('x_ns', val(r['new']) or 0)} "
                f"({how(r)})" for r in sampled) + more(len(sampled), rows_.height))
    # nsys times held because the SM clock moved them (the GPU's sampled counters): said, not judged
    clocked_nsys = [r for r in df.filter(pl.col("scope").is_in(["gpu", "kernel"]) & (pl.col("verdict") == "unchanged")
                                         & pl.col("metric").is_in(["busy_ns", "total_ns"])).iter_rows(named=True)
                    if held_by(r["note"]) == CLOCK_NOTE]
    if clocked_nsys:
        shown = sorted(clocked_nsys, key=lambda r: (r["scope"] != "gpu", -abs(delta(r))))[:top + 1]
        lines.append(f"Times {CLOCK_NOTE} in as many cycles: " + "; ".join(
            (f"GPU busy, {r['key']}" if r["scope"] == "gpu" else label[r["key"]])
            + f" {signed_human(r['metric'], delta(r))} ({val(r['delta_pct']):+z.1f} %) "
            + r["note"][r["note"].index(CLOCK_NOTE) + len(CLOCK_NOTE):].partition(" in as many")[0].strip()
            for r in shown) + ": the clock, not the code (not judged)")
    wall = changed.filter((pl.col("scope") == "nvtx") & pl.col("metric").is_in(["range_total_ns", "range_med_ns"]))
    if wall.height:
        rows = {r["key"]: r for r in wall.iter_rows(named=True) if r["metric"] == "range_total_ns"}
        rows.update({r["key"]: r for r in wall.iter_rows(named=True) if r["key"] not in rows})
        shown = sorted(rows.values(), key=lambda r: -abs(delta(r)))[:top]
        lines.append("NVTX wall time: " + "; ".join(
            f"{label[r['key']]} {_STAT[r['metric']]} {signed_human(r['metric'], delta(r))} ({how(r)})" for r in shown)
            + more(len(shown), len(rows)))
    # ncu: per kernel (its keys: one per NVTX path), its launches' time in all, where it was
    # judged changed, or held because the SM clock moved it in as many cycles
    ncu_rows = df.filter(pl.col("scope") == "ncu")
    keys: dict[str, dict[str, list[dict]]] = {}  # kernel -> metric -> its keys' rows
    for r in ncu_rows.iter_rows(named=True):
        keys.setdefault(r["key"].partition(" @ ")[0], {}).setdefault(r["metric"], []).append(r)

    def launches(m: dict[str, list[dict]]) -> str:
        counted = m.get("launches") or [{"base": 1.0 if val(r["base"]) is not None else None,
                                          "new": 1.0 if val(r["new"]) is not None else None}
                                         for r in m.get("duration_ns", [])]  # (rows without a count: a key a launch)
        side = [sum(val(r[s]) or 0 for r in counted) for s in ("base", "new")]
        n = [int(x) for x in side if x]
        text = f"{n[0]:,} -> {n[1]:,}" if len(n) == 2 and n[0] != n[1] else f"{max(n or [0]):,}"
        return f"{text} launch{'' if n == [1] or n == [1, 1] else 'es'}"

    def clocked(r: dict) -> bool:
        return r["verdict"] == "unchanged" and CLOCK_NOTE in (r["note"] or "")

    judged = {k: m for k, m in keys.items() if any(r["verdict"] != "unchanged" for rs in m.values() for r in rs)}
    held = {k: m for k, m in keys.items() if any(clocked(r) for r in m.get("duration_ns", []))}

    def moved_by(k: str) -> float:
        return abs(sum(delta(r) for r in keys[k].get("launch_total_ns", [])))

    def occupancy(m: dict[str, list[dict]]) -> list[str]:
        """The kernel's theoretical occupancy where it moved, with why (its note's reasons): a
        narrow table cuts the note, and it is often what changed the time. Of a kernel under
        several NVTX paths (a key each) that moved unlike each other, each path's, named."""
        said: dict[str, list[str]] = {}  # what moved -> the NVTX paths it moved so under
        for r in m.get("theoretical_occupancy_pct", []):
            b, n = val(r["base"]), val(r["new"])
            if b is not None and n is not None and b != n:
                why = [p for p in (r["note"] or "").split("; ")
                       if p.startswith(OCCUPANCY_WHY[:2]) or OCCUPANCY_WHY[2].match(p)]
                text = f"{b:.3g} % -> {n:.3g} %" + (f" ({'; '.join(why)})" if why else "")
                said.setdefault(text, []).append(r["key"].partition(" @ ")[2])
        return [f"theoretical occupancy{' @ ' + ', '.join(paths) if len(said) > 1 and all(paths) else ''} {text}"
                for text, paths in said.items()]

    label = short_keys(sorted(keys))  # (an ncu key is its kernel @ its NVTX path: the kernels told apart)
    for name in sorted(judged, key=lambda k: -moved_by(k))[:top]:
        m = judged[name]
        timed = [r for metric in NCU_TIME for r in m.get(metric, []) if r["verdict"] != "unchanged"]
        if not timed:  # (its time unchanged: what was judged instead, e.g. a launch setting)
            rs = [r for rs in m.values() for r in rs if r["verdict"] != "unchanged"]
            metrics = list(dict.fromkeys(r["metric"] for r in rs))
            lines.append(f"ncu {label[name]}: " + ", ".join(
                f"{x} ({how(next(r for r in rs if r['metric'] == x))})" for x in metrics[:top]))
            continue
        kinds = list(dict.fromkeys(r["verdict"] for r in timed))
        if kinds in (["added"], ["removed"]):
            lines.append(f"ncu {label[name]}, {launches(m)}: {kinds[0]}")
            continue
        medians = m.get("duration_ns", [])
        if any(val(r["base"]) != val(r["new"]) for r in m.get("launches", [])):
            # other numbers of launches profiled: their sums differ by that; the median launch moved
            lines.append(f"ncu {label[name]}, {launches(m)}: the median launch {durations(medians, kinds)}"
                         + "".join(f"; {o}" for o in occupancy(m)))
            continue
        totals = m.get("launch_total_ns", [])
        base = sum(val(r["base"]) or 0 for r in totals)
        total = sum(delta(r) for r in totals)
        pct = [f"{100 * total / base:+z.1f} %"] if base else []
        per = "unchanged" if all(delta(r) == 0 for r in medians) else durations(medians, []).partition(" (")[0]
        single = all(val(r["base"]) in (None, 1.0) and val(r["new"]) in (None, 1.0) for r in m.get("launches", []))
        lines.append(f"ncu {label[name]}, {launches(m)}: {signed_human('duration_ns', total)} in all "
                     f"({', '.join([*pct, *kinds])}); {'a' if single else 'the median'} launch {per}"
                     + "".join(f"; {o}" for o in occupancy(m)))
    if len(judged) > top:
        n = len(judged) - top
        lines.append(f"ncu: and {n} more kernel{'s' if n > 1 else ''} judged changed")
    # durations held because the SM clock moved them: said, so that no one reads them as the code's
    for name in sorted(held, key=lambda k: -moved_by(k))[:top]:
        rs = [r for r in held[name]["duration_ns"] if clocked(r)]
        clocks = [r["note"][r["note"].index(CLOCK_NOTE) + len(CLOCK_NOTE):].partition(" in as many")[0].strip()
                  for r in rs]
        lines.append(f"ncu {label[name]}, {launches(held[name])}: duration {durations(rs, [])} "
                     f"{CLOCK_NOTE}{' ' + clocks[0] if len(set(clocks)) == 1 else ''} in as many cycles: "
                     "the clock, not the code (not judged)")
    # source lines whose time per launch was judged changed: where in its code a kernel's change is
    source = changed.filter((pl.col("scope") == "source") & (pl.col("metric") == "time_ns"))
    if source.height:
        named = short_keys(df)
        shown = sorted(source.iter_rows(named=True), key=lambda r: -abs(delta(r)))[:top]
        lines.append("Source lines (mean time per launch): " + "; ".join(
            f"{named[r['key']]} {signed_human('time_ns', delta(r))} ({how(r)})" for r in shown)
            + more(len(shown), source.height))
    # a benchmark's variants whose time per call was judged changed (a variant that failed on a side: said so)
    bench = sorted(changed.filter((pl.col("scope") == "bench") & (pl.col("metric") == "med_ns")).iter_rows(named=True),
                   key=lambda r: (r["base"] is not None and r["new"] is not None, -abs(delta(r))))  # (failed first)
    if bench:
        lines.append("Benchmark, median time of a call: " + "; ".join(
            f"{r['key']} {signed_human('med_ns', delta(r))} ({how(r)})" if r["base"] is not None and r["new"] is not None
            else f"{r['key']} ({r['verdict']}: {r['note']})" for r in bench[:top]) + more(min(top, len(bench)), len(bench)))
    points = df.filter(pl.col("scope") == "sweep")
    # a point whose capture failed on a side has no value there (_sweep_scope): not a shared point
    failed = set(points.filter(~pl.col("verdict").is_in(["added", "removed"])
                               & (pl.col("base").is_null() | pl.col("new").is_null()))["key"].to_list())
    shared = [k for k in points.filter(~pl.col("verdict").is_in(["added", "removed"]))["key"].unique().to_list()
              if k not in failed]
    # the latencies held because the host's pace moved them
    paced = [r for r in points.iter_rows(named=True) if r["verdict"] == "unchanged" and held_by(r["note"]) == HOST_PACE_NOTE]
    judged = {}
    latency = changed.filter((pl.col("scope") == "sweep") & ~pl.col("metric").is_in(SWEEP_MEMORY))
    for r in latency.iter_rows(named=True):
        if r["key"] in shared or r["key"] in failed:
            judged.setdefault(r["key"], []).append(r)
    if judged:
        order = sorted(judged, key=lambda k: -max(abs(val(r["delta_pct"]) or 0) for r in judged[k]))[:top]
        def part(k: str) -> str:
            failed = [r for r in judged[k] if val(r["base"]) is None or val(r["new"]) is None]
            if failed:  # (a point whose capture failed on one side: _sweep_scope)
                side = "new" if val(failed[0]["new"]) is None else "base"
                return f"{k} (its capture failed in the {side} sweep, {failed[0]['verdict']})"
            return (f"{k} " if k != "requests" else "") + ", ".join(
                f"{_STAT[r['metric']]} ({how(r)})" for r in judged[k])

        parts = [part(k) for k in order] + ([f"and {len(judged) - len(order)} more"] if len(judged) > len(order) else [])
        alone = {side: points.filter(pl.col("verdict") == v)["key"].n_unique()
                 for side, v in (("base", "removed"), ("new", "added"))}
        moved_shared = sum(k in shared for k in judged)
        counts = [f"{moved_shared} of {len(shared)} shared points changed"] if len(shared) > 1 else []
        counts += [f"{n} failed on one side" for n in [sum(k in failed for k in judged)] if n]
        counts += [f"{n} only in the {side}" for side, n in alone.items() if n]
        lines.append("Request latency: " + "; ".join(parts) + (f" ({'; '.join(counts)})" if counts else ""))
        if (speedup := _speedup_line(points, shared, {r["key"] for r in paced})) is not None:
            lines.append(speedup)
    memory: dict[str, list[dict]] = {}
    for r in changed.filter(pl.col("scope").is_in(["sweep", "bench"]) & pl.col("metric").is_in([*SWEEP_MEMORY, *BENCH_MEMORY])
                            ).iter_rows(named=True):  # (a point's, a bench variant's)
        memory.setdefault(r["key"], []).append(r)
    if memory:  # (a point's largest change first)
        order = sorted(memory, key=lambda k: -max(abs(val(r["delta_pct"]) or 0) for r in memory[k]))
        lines.append("Peak memory: " + "; ".join(
            (f"{k} " if k != "requests" else "") + ", ".join(f"{_STAT[r['metric']]} ({how(r)})" for r in memory[k])
            for k in order[:top]) + more(top, len(order)))
    if paced:  # (latencies held because the host's pace moved them: said, so that no one reads them as the code's)
        def pace(r: dict) -> str:
            note = r["note"]
            said = note[note.index(HOST_PACE_NOTE) + len(HOST_PACE_NOTE):].partition(":")[0].strip(" (")
            return re.sub(r"(\d)%", r"\1 %", said)  # (as the line writes its percentages: +48.7 %)

        shown = sorted(paced, key=lambda r: -abs(val(r["delta_pct"]) or 0))[:top]
        more = len(paced) - len(shown)
        lines.append(f"Request latency {HOST_PACE_NOTE}: " + "; ".join(
            (f"{r['key']} " if r["key"] != "requests" else "") + f"{_STAT[r['metric']]} {val(r['delta_pct']):+z.1f} % "
            f"({pace(r)})" for r in shown) + (f" and {more} more" if more else "")
            + ": the host, not the code (not judged)")
    return lines


def _speedup_line(points: pl.DataFrame, shared: list[str], paced: set[str] = frozenset()) -> str | None:
    """The change over a grid in one line, as a benchmark of two implementations sums it up:
    the speedup of each shared point's median latency (base / new: above 1x the new run is
    faster), their geometric mean (the mean of ratios that neither side's scale dominates) and
    the smallest and largest with their points. None for fewer than two shared points (one
    point's change is its own row). Points whose latency the host's pace moved (``paced``)
    count as measured, and the line says how many there are: their speedup is the host's too."""
    med = points.filter(pl.col("key").is_in(shared) & (pl.col("metric") == "latency_med_ms")
                        & (pl.col("base") > 0) & (pl.col("new") > 0))
    if med.height < 2:
        return None
    ratio = {r["key"]: r["base"] / r["new"] for r in med.iter_rows(named=True)}
    lo, hi = min(ratio, key=ratio.get), max(ratio, key=ratio.get)
    gmean = math.exp(sum(math.log(v) for v in ratio.values()) / len(ratio))
    reading = ("about 1x: neither run is faster over the grid" if f"{gmean:.2f}" == "1.00" else
               "below 1x the new run is slower" if gmean < 1 else "above 1x the new run is faster")
    host = sum(k in paced for k in ratio)
    host = f"; {host} of these points moved with the host's pace (below)" if host else ""
    return (f"Speedup of the median latency (base / new) over {len(ratio)} shared points: {gmean:.2f}x geometric "
            f"mean, from {ratio[lo]:.2f}x ({lo}) to {ratio[hi]:.2f}x ({hi}); {reading}{host}")


def signed_human(metric: str, v: float) -> str:
    """A change ``v`` in the metric's unit with its sign (``+2.1 ms``, ``-512 B``): ``+`` where
    it reads as zero, as a percentage's ``z`` format has it (not ``-0 ns``)."""
    text = _human(metric, abs(v))
    return ("-" if v < 0 and any(c in "123456789" for c in text) else "+") + text


def _human(metric: str, v: float | None, other: float | None = None) -> str:
    """``v`` in the metric's unit; a plain number below 1,000 to three significant digits
    (31.0 beside 62.1, not 31), or whole where it is an integer, unless ``other`` (the
    other run's value, beside it) is not: then with as many decimals as ``other`` (1.00
    beside 1.17)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if metric.endswith("_ns"):
        for unit, f in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
            if abs(v) >= f:
                return f"{v / f:,.3f} {unit}"
        return f"{v:,.0f} ns"
    if metric.endswith("_ms"):
        return f"{v:,.3f} ms"
    if metric.endswith("_mb"):  # (requests.csv's memory peaks: MiB, what the seeds' benchmarks call MB)
        return f"{v:,.1f} MiB"
    if metric.endswith("_pct"):
        return f"{v:,.2f}%"
    if metric.endswith("_hz"):
        return f"{v / 1e6:,.0f} MHz"
    if metric.endswith("_bytes"):  # (as tables show bytes: SI prefixes)
        from .table import si

        return si(v, "B")
    if metric.endswith("_per_s"):
        for unit, f in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
            if abs(v) >= f:
                return f"{v / f:,.2f} {unit}/s"
        return f"{v:,.0f}/s"
    if abs(v) >= 999.5:  # (what three significant digits would write as 1.00e+03)
        return f"{v:,.0f}"
    if not float(v).is_integer():
        return f"{v:#.3g}".removesuffix(".")  # (three significant digits, trailing zeros kept: 31.0, 3.50)
    if other is None or (isinstance(other, float) and math.isnan(other)) or float(other).is_integer() \
            or abs(other) >= 999.5:
        return f"{v:,.0f}"
    shown = f"{other:#.3g}".removesuffix(".")
    decimals = min(len(shown.partition(".")[2]), 3) if "e" not in shown else 0  # (5.000 beside 0.000123, no more)
    return f"{v:,.{decimals}f}"


#: a key of two sweeps compared point by point: the point, then the key there
#: ('m=1024,dtype=fp16: softmax_warp_forward')
_GRID_VALUE = r'(?:"(?:[^"\\]|\\.)*"|[^,=:"\\\s]*)'  # (macro grid_value: a JSON string, or plain)
POINT_KEY = re.compile(rf"((?:[A-Za-z_][A-Za-z0-9_]*={_GRID_VALUE},)*[A-Za-z_][A-Za-z0-9_]*={_GRID_VALUE}): (.*)",
                       re.S)


#: the scopes whose keys are functions' names (kernels, an ncu key's kernel, CPU functions; a
#: sweep point's key): shortened as names, without parameter lists; every other scope's key
#: (an NVTX path, an API call, a Python function with its file, a benchmark) is text
NAME_SCOPES = ("kernel", "ncu", "source", "cpu", "sweep")


#: a label's bracketed tag at its end (``[layer7]``: what tells a kernel's key from its other keys)
_LABEL_TAG = re.compile(r" (\[[^\]]*\])$")
#: a source line's location's line number, and its mark of a line only in the new report
_LINE_NUMBER = re.compile(r":(\d+)( \(new\))?$")


#: the width a sweep point's key needs beyond its point to keep it first (``shorten_key``, ``short_keys``)
POINT_ROOM = 14


def shorten_key(key: str, width: int, name: bool = True, located: bool = False) -> str:
    """A kernel name (or an ncu ``kernel @ path`` key) shortened by the kernel-name
    shortener; NVTX paths, API names and sweep points cut like other text (a '(' or '<' in a
    path of ranges, 'step(bs=8)/mlp', is the ranges' text, not a parameter list: a kernel's
    name holds no '/'); ``name`` False: ``key`` is text whatever it holds (an NVTX range
    'step(bs=8)', a Python function 'main (bench.py)'). An empty key (an NVTX range with no
    text) is ``(unnamed)``; a sweep point's key keeps its point first. ``located``: a source
    line's key (or its label), ``kernel @ file:line``: the location kept whole and the kernel
    shortened beside it, a label's bracketed tag kept (``[layer7]``: what tells it from the
    kernel's other keys); too narrow for both, the tag and the location's end, or its line
    number alone (``[layer7] :434``)."""
    at_point = POINT_KEY.fullmatch(key)
    if at_point and located and len(at_point[1]) + POINT_ROOM > width:
        # (a source line's key keeps its point first where its tag and line number fit beside it: what tells a
        # line at one point, or of one layer, from the same line at another; else the tag and the number)
        head, _, loc = at_point[2].rpartition(" @ ")
        tag, number = _LABEL_TAG.search(head), _LINE_NUMBER.search(loc)
        need = len(at_point[1]) + 2 + (len(tag[1]) + 1 if tag else 0) + (len(number[1]) + 1 if number else 5)
        if need > width:
            at_point = None
    if at_point and (len(at_point[1]) + POINT_ROOM <= width or located):
        return f"{at_point[1]}: {shorten_key(at_point[2], width - len(at_point[1]) - 2, name, located)}"
    if not key.strip():
        return UNNAMED
    if located:
        head, _, loc = key.rpartition(" @ ")
        room = width - len(loc) - 3
        tag = _LABEL_TAG.search(head) if len(head) > room else None
        if room < 6 or (tag and len(tag[1]) + 5 > room):  # (too narrow for the kernel: its tag, the location's end)
            # (else the line's number at least, whole: what tells a kernel's lines apart, its file mostly the same)
            at = _LINE_NUMBER.search(loc)
            lines = [f":{at[1]}{at[2] or ''}", f":{at[1]}"] if at else []
            for kept in ([f"{tag[1]} "] if tag else []) + [""]:
                end = width - len(kept)
                if len(loc) <= end:
                    return kept + loc
                if lines and end >= len(lines[0]) + 3:
                    return kept + ELLIPSIS + loc[len(loc) - end + 1:]
                for line in lines:
                    if len(line) <= end:
                        return kept + line
            return (ELLIPSIS + loc[len(loc) - width + 1:])[:max(width, 0)]
        if tag is None:
            return f"{shorten_key(head, room, name)} @ {loc}"
        return f"{shorten_key(head[:tag.start()], room - len(tag[1]) - 1, name)} {tag[1]} @ {loc}"
    head, at, path = key.partition(" @ ")
    if name and "/" not in head and (head.startswith("void ") or any(c in head for c in "<(")):
        head = short_name(head, width)
    if not at or len(head) + 3 + len(path) <= width or width < 24:
        return cut_text(head + at + path, width)
    # an ncu key, kernel @ NVTX path: the kernel's name first, then the path's last part
    # whole where it fits beside 8 characters of the name
    last = path.rstrip("/").rsplit("/", 1)[-1]
    tail = min(max(len(last) + 2, 12), width - 11)
    head = cut_end(head, max(min(width * 3 // 5, width - 3 - tail), 8))
    out = f"{head} @ {cut_text(path, width - len(head) - 3)}"
    if len(out) <= width and out.endswith(last):
        return out
    return cut_text(head + at + path, width)  # (too narrow for both: the path's end)


def text_keys(df: pl.DataFrame) -> set[str]:
    """The keys of a comparison's rows (``scope``, ``key``) that are text, not functions'
    names (``NAME_SCOPES``): those only scopes of text have."""
    named = pl.col("scope").is_in(NAME_SCOPES)
    return set(df.filter(~named)["key"].to_list()) - set(df.filter(named)["key"].to_list())


def short_keys(keys: list[str] | pl.DataFrame, width: int = 60) -> dict[str, str]:
    """Each key as a person reads it: the labels tables and charts use
    (``names.distinct_labels``: two different keys never read alike). ``keys``: the keys, or
    a comparison's rows (``scope``, ``key``), whose keys of text (``text_keys``) keep their
    parentheses."""
    texts = text_keys(keys) if isinstance(keys, pl.DataFrame) else set()
    unique = list(dict.fromkeys(keys["key"].to_list() if isinstance(keys, pl.DataFrame) else keys))
    # a source line's key: its kernel's key told apart from the other kernels', then its location whole
    located = {k: k.rpartition(" @ ") for k in source_keys(keys)}
    out = {}
    room = width - 3 - max((len(k[2]) for k in located.values()), default=0)
    if located and room >= 8:
        heads = short_keys(list(dict.fromkeys(k[0] for k in located.values())), room)
        out = {k: f"{heads[head]} @ {loc}" for k, (head, _, loc) in located.items()}
    # a sweep's keys: the point first, whole, then the rest as the rests of every point's keys tell
    # it apart (told apart as whole keys, the words that part them are the kernel's, and the point
    # would be cut away; one kernel reads alike at every point)
    pointed = {k: m for k in unique if k not in out and (m := POINT_KEY.fullmatch(k)) and len(m[1]) + POINT_ROOM <= width}
    if pointed:
        rests: dict[str, list[str]] = {}  # rest -> its keys
        for k, m in pointed.items():
            rests.setdefault(m[2], []).append(k)
        room = width - 2 - max(len(m[1]) for m in pointed.values())
        told = dict(zip(rests, distinct_labels(list(rests), room, lambda r, w: shorten_key(
            r, w, any(k not in texts for k in rests[r]), any(k in located for k in rests[r]))), strict=True))
        out.update({k: f"{m[1]}: {told[m[2]]}" for k, m in pointed.items()})
    out.update(zip([k for k in unique if k not in out], distinct_labels(
        [k for k in unique if k not in out], width, lambda k, w: shorten_key(k, w, k not in texts, k in located)),
        strict=True))
    return {k: out[k] for k in unique}


def source_keys(keys: list[str] | pl.DataFrame) -> set[str]:
    """The keys of a comparison's rows (``scope``, ``key``) that are source lines' (``kernel @
    file:line``, the source scope's); none of a list of keys."""
    return set(keys.filter(pl.col("scope") == "source")["key"].to_list()) if isinstance(keys, pl.DataFrame) else set()


#: the least room a sweep point's key gives its kernel's name beside the point in a table
#: (``key_floor``)
KEY_NAME_FLOOR = 20


def key_floor(df: pl.DataFrame, labels: dict[str, str] | None = None) -> int:
    """The least width of a comparison's key column (``Rows.floors``) below which a key no
    longer says what it is, from the labels ``short_keys`` gives (``df``: its rows): a sweep
    point's key its point and ``KEY_NAME_FLOOR`` characters of its kernel (its whole label,
    where shorter), a source line's file and line, a benchmark's configuration/variant whole;
    0 where no key needs more than any text. ``labels``: ``short_keys(df)``, where the caller has them."""
    labels = short_keys(df) if labels is None else labels
    located = source_keys(df)
    need = [0]
    for scope, key in df.select("scope", "key").unique().iter_rows():
        label = labels[key]
        if key in located:
            need.append(len(key.rpartition(" @ ")[2].rpartition("/")[2]))
        elif (m := POINT_KEY.fullmatch(key)) and label.startswith(m[1] + ": "):
            need.append(min(len(label), len(m[1]) + 2 + KEY_NAME_FLOOR))
        elif scope == "bench":
            need.append(len(label))
    return max(need)


def label_shortener(df: pl.DataFrame, labels: dict[str, str] | None = None) -> Callable[[str, int], str]:
    """How a table narrows further the labels ``short_keys(df)`` gives a comparison's keys
    (``labels``, where the caller has them), by ``shorten_key``: a label of text as text, a
    source line's keeping its location."""
    labels = short_keys(df) if labels is None else labels
    text_labels = {labels[k] for k in text_keys(df)}
    located = {labels[k] for k in source_keys(df)}
    return lambda v, w: shorten_key(v, w, v not in text_labels, v in located)


#: the columns a terminal shows by default (p with --all-columns): the note says why a
#: verdict was held back, so it stays, narrowed first
DISPLAY = ["scope", "key", "metric", "base", "new", "delta", "verdict", "note"]


def display_columns(df: pl.DataFrame) -> list[str]:
    """The table's columns of a diff: ``DISPLAY``, with the repeats' ``noise`` after the
    change where repeats measured it (``diff --repeat``)."""
    if "noise_pct" not in df.columns:
        return DISPLAY
    at = DISPLAY.index("delta") + 1
    return [*DISPLAY[:at], "noise", *DISPLAY[at:]]


def shown_verdicts(df: pl.DataFrame) -> list[str]:
    """The verdict column as a table shows it: a change held back from any verdict (its
    note says "not judged": host-timed values, a slowest rank that moved) is ``not judged``,
    not ``unchanged``, which the file formats keep (the note says why)."""
    return ["not judged" if v == "unchanged" and n and "not judged" in n else v
            for v, n in zip(df["verdict"], df["note"], strict=True)]


def verdict_counts(df: pl.DataFrame) -> list[tuple[str, int]]:
    """How many rows each verdict has as a table shows them (``shown_verdicts``), most first."""
    from collections import Counter

    return Counter(shown_verdicts(df)).most_common()


def display(df: pl.DataFrame, among: pl.DataFrame | None = None) -> pl.DataFrame:
    """The diff for a terminal: values in human units, keys as ``short_keys`` labels
    them, told apart from ``among``'s (the whole diff, where ``df`` is the rows shown:
    a kernel reads as in every other table of the diff, whichever rows are shown), deltas as
    signed percentages, an ncu key's note without the match of a key on both sides as it is."""
    short = short_keys(df if among is None else among)
    cols = {
        "scope": df["scope"],
        "key": [short[k] for k in df["key"]],
        "metric": df["metric"],
        "base": [_human(m, v, other) for m, v, other in zip(df["metric"], df["base"], df["new"], strict=True)],
        "new": [_human(m, v, other) for m, v, other in zip(df["metric"], df["new"], df["base"], strict=True)],
        "delta": ["" if p is None else f"{p:+z.1f}%" for p in df["delta_pct"]],
    }
    if "noise_pct" in df.columns:  # (the repeats' largest change of the key, interval included: diff --repeat)
        cols["noise"] = ["" if p is None else f"±{p:.1f}%" for p in df["noise_pct"]]
    cols.update({
        "verdict": shown_verdicts(df),
        "p": ["" if p is None else _fmt_p(p) for p in df["p_value"]],
        "note": [_without_same_key(s, n) for s, n in zip(df["scope"], df["note"], strict=True)],
    })
    return pl.DataFrame(cols, schema=dict.fromkeys(cols, pl.Utf8))


def _without_same_key(scope: str, note: str | None) -> str | None:
    """An ncu row's note without the match every key found on both sides has (``NCU_SAME_KEY``):
    a narrow table keeps the width for what differs."""
    if scope != "ncu" or not note:
        return note
    for how in NCU_SAME_KEY:
        if note == how:
            return ""
        if note.startswith(how + "; "):
            return note[len(how) + 2:]
    return note

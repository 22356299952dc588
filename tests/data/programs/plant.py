"""Writes PLANT.md + plant.json for the fixtures with planted changes.

    python3 plant.py diff  OUTDIR    # OUTDIR/nsys_diff_regressed (against nsys_diff_base_a/b)
    python3 plant.py ranks OUTDIR [NAME]   # OUTDIR/NAME (default nsys_ranks)
    python3 plant.py jobs  OUTDIR    # OUTDIR/nsys_jobs: its three jobs (each as ranks) and the pair's plant
    python3 plant.py missed OUTDIR [NAME]  # OUTDIR/NAME (default nsys_jobs/missed): a rank's window missed its work
    python3 plant.py mixed OUTDIR NAME   # OUTDIR/NAME: a job whose ranks were captured with different options

The expectations come from the programs (nsys_diff.py, nsys_ranks.py: what was planted,
where, in which direction); the kernel names are taken as nsys prints them from the
fixtures' own `nsys stats` CSVs (cuda_gpu_kern_sum), and the figures quoted beside each
change are NVIDIA's numbers, so a test can derive what to expect without asking tracekit.
Stdlib only: runs on the GPU machine right after the captures.
"""

from __future__ import annotations

import ast
import csv
import json
import lzma
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace


def _constants(program: str) -> SimpleNamespace:
    """The module-level integer constants of a fixture program, read without running it."""
    tree = ast.parse((Path(__file__).parent / program).read_text())
    values = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
            values[node.targets[0].id] = node.value.value
    return SimpleNamespace(**values)


#: planted kernel -> a substring that identifies its demangled name in cuda_gpu_kern_sum
DIFF_KERNELS = {
    "more_launches": "at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl<"
                     "at::native::direct_copy_kernel_cuda",
    "new_kernel": "attn_bias_kernel",
    "slower": "silu_kernel",
}


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _kern(folder: Path) -> dict[str, dict]:
    return {r["Name"]: r for r in _csv(folder / "stats" / "cuda_gpu_kern_sum.csv")}


def _one(names, needle: str, where: Path) -> str:
    hits = [n for n in names if needle in n]
    if len(hits) != 1:
        raise SystemExit(f"{where}: {len(hits)} kernels match {needle!r}: {hits}")
    return hits[0]


def _stats(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {"instances": int(row["Instances"]), "total_ns": int(row["Total Time (ns)"]),
            "med_ns": float(row["Med (ns)"])}


def diff(out: Path) -> None:
    prog = _constants("nsys_diff.py")

    reg_dir = out / "nsys_diff_regressed"
    bases = {n: out / f"nsys_diff_base_{n}" for n in ("a", "b")}
    reg = _kern(reg_dir)
    base = {n: _kern(d) for n, d in bases.items()}
    names = {p: _one(reg, needle, reg_dir) for p, needle in DIFF_KERNELS.items()}
    for n, kern in base.items():
        assert names["new_kernel"] not in kern, f"base {n} has the new kernel"

    def observed(name):
        return {**{f"base_{n}": _stats(kern.get(name)) for n, kern in base.items()},
                "regressed": _stats(reg.get(name))}

    changes = [
        {"plant": "more_launches", "flag": "--more-launches", "scope": "kernel",
         "key": names["more_launches"], "nvtx_path": "step/mlp", "nvtx_range": ":mlp",
         "metric": "instances", "direction": "up", "base_per_step": 1, "regressed_per_step": 2,
         "expected_verdict": "regressed",
         "also": "total_ns up (about 2x); med_ns about the same (the same work per launch: an "
                 "8 x 8 conversion to float)",
         "nsys_stats": observed(names["more_launches"])},
        {"plant": "new_kernel", "flag": "--new-kernel", "scope": "kernel",
         "key": names["new_kernel"], "nvtx_path": "step/attn", "nvtx_range": ":attn",
         "metric": "total_ns", "direction": "up", "base_per_step": 0, "regressed_per_step": 1,
         "expected_verdict": "added", "nsys_stats": observed(names["new_kernel"])},
        {"plant": "slower", "flag": "--slower", "scope": "kernel", "key": names["slower"],
         "nvtx_path": "step/mlp", "nvtx_range": ":mlp", "metric": "med_ns", "direction": "up",
         "min_change_pct": 25, "base_reps": 1, "regressed_reps": prog.SLOW_REPS,
         "expected_verdict": "regressed",
         "also": "total_ns up; instances unchanged (one launch per step in both)",
         "nsys_stats": observed(names["slower"])},
    ]
    planted = set(names.values())
    unchanged = sorted(n for n in reg if n not in planted)
    for n, kern in base.items():
        assert set(kern) == set(reg) - {names["new_kernel"]}, f"base {n}: other kernel names"
        for name in unchanged:
            assert kern[name]["Instances"] == reg[name]["Instances"], f"{name}: instances differ"
    plant = {
        "program": "tests/data/programs/nsys_diff.py",
        "steps": prog.STEPS,
        "base": [f"nsys_diff_base_{n}" for n in bases],
        "regressed": "nsys_diff_regressed",
        "regressed_flags": [c["flag"] for c in changes],
        "changes": changes,
        "unchanged_kernels": unchanged,
        "consequences": [
            {"scope": "nvtx", "key": p, "direction": "up",
             "why": "holds a planted change (more launches, a new kernel or a slower kernel)"}
            for p in ("step", "step/attn", "step/mlp")
        ] + [{"scope": "api", "key": "cudaLaunchKernel", "metric": "calls", "direction": "up",
              "why": "one more conversion launch per step (PyTorch launches through cudaLaunchKernel)"},
             {"scope": "api", "key": "cuLaunchKernelEx", "metric": "calls", "direction": "up",
              "why": "attn_bias_kernel: one more Triton launch per step (Triton launches through "
                     "the driver API)"}],
    }
    (reg_dir / "plant.json").write_text(json.dumps(plant, indent=2) + "\n")
    lines = [
        "# Planted changes: nsys_diff_regressed against nsys_diff_base_a / nsys_diff_base_b",
        "",
        f"One program, `tests/data/programs/nsys_diff.py` ({prog.STEPS} steps in a cudaProfilerApi "
        "capture range; NVTX `step` > `embed` / `attn` / `mlp`), captured three times with the same "
        "nsys settings on the same GPU in one session: `nsys_diff_base_a` and `nsys_diff_base_b` "
        "unchanged (a noise pair), `nsys_diff_regressed` with "
        f"`{' '.join(plant['regressed_flags'])}`. Machine-readable: `plant.json`.",
        "",
        "| plant | kernel (as nsys prints it) | NVTX path | metric | expected | base a | base b | regressed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in changes:
        o = c["nsys_stats"]

        def fmt(s):
            return "absent" if s is None else f"{s['instances']} x, med {s['med_ns']:.0f} ns, total {s['total_ns']} ns"

        lines.append(f"| {c['plant']} | `{c['key']}` | `{c['nvtx_path']}` | {c['metric']} | "
                     f"{c['expected_verdict']} ({c['direction']}) | {fmt(o['base_a'])} | {fmt(o['base_b'])} | "
                     f"{fmt(o['regressed'])} |")
    lines += [
        "",
        f"- more_launches: the 8 x 8 conversion to float of the values read back at the end of `mlp` "
        f"runs twice per step instead of once (instances {prog.STEPS} -> {2 * prog.STEPS}).",
        "- new_kernel: the Triton kernel `attn_bias_kernel` runs once per step at the start of "
        "`attn`, on a small buffer of its own, and nowhere else; absent from both base captures.",
        f"- slower: the Triton kernel `silu_kernel` applies SiLU {prog.SLOW_REPS} times per element "
        "instead of once: same name, same grid, same instances, more work per launch.",
        "",
        "Everything else is identical: every other kernel has the same name and instance count "
        "in all three captures (`unchanged_kernels` in plant.json) and should not be flagged. "
        "Real consequences a tool may report: the NVTX ranges `step`, `step/attn` "
        "and `step/mlp` get longer (they hold the changes; each of the three inner ranges ends "
        "with a synchronize, so its duration is its GPU work), and the launch APIs get more calls "
        "(`cudaLaunchKernel` for the conversion, `cuLaunchKernelEx` for the Triton kernel). `step/embed` "
        "holds no change.",
        "",
        "Figures are NVIDIA's (`stats/cuda_gpu_kern_sum.csv` of each folder).",
    ]
    (reg_dir / "PLANT.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {reg_dir}/plant.json and PLANT.md")


def _query(export_xz: Path, sql: str) -> list[tuple] | None:
    """The rows of ``sql`` on the compressed export (None where a table it reads is not in it)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "export.sqlite"
        with lzma.open(export_xz) as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst)
        con = sqlite3.connect(db)
        try:
            return con.execute(sql).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return None
            raise
        finally:
            con.close()


def _device_memory_peak(export_xz: Path) -> int | None:
    """The most device memory (memKind 2) the process held at once, in bytes, from the
    export's CUDA_GPU_MEMORY_USAGE_EVENTS (--cuda-memory-usage=true; None without it)."""
    rows = _query(export_xz, "SELECT CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END "
                             "FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind = 2 ORDER BY start, memoryOperationType DESC")
    if rows is None:
        return None
    held = peak = 0
    for (change,) in rows:
        held += change
        peak = max(peak, held)
    return peak


def _step_children(export_xz: Path) -> dict[str, list[int]]:
    """Per `step` instance (in order), the duration in ns of each child range, from the export."""
    rows = _query(export_xz, "SELECT coalesce(e.text, s.value), e.start, e.\"end\" FROM NVTX_EVENTS e "
                             "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 ORDER BY e.start") or []
    steps = [(a, b) for name, a, b in rows if name == "step"]
    out: dict[str, list[int]] = {}
    for name in ("forward", "exchange", "backward"):
        spans = [(a, b) for n, a, b in rows if n == name]
        out[name] = [next(b - a for a, b in spans if s0 <= a and b <= s1) for s0, s1 in steps]
    out["step"] = [b - a for a, b in steps]
    return out


def _devices(folder: Path) -> list[int]:
    """The GPUs (device ids) the rank's GPU ops ran on, from NVIDIA's cuda_gpu_trace CSV
    ("NVIDIA H200 (1)" -> 1)."""
    with lzma.open(folder / "stats" / "cuda_gpu_trace.csv.xz", "rt", newline="") as fh:
        return sorted({int(r["Device"].rsplit("(", 1)[1].rstrip(")")) for r in csv.DictReader(fh) if r["Device"]})


def _program_args(folder: Path) -> tuple[int | None, str]:
    """(--straggler, --backend) of the rank's program, as its capture.txt command gave them
    (None, gloo: the program's defaults)."""
    command = _command(folder)
    straggler = re.search(r"--straggler[ =](\d+)", command)
    backend = re.search(r"--backend[ =](\w+)", command)
    return (int(straggler.group(1)) if straggler else None), (backend.group(1) if backend else "gloo")


def _command(folder: Path) -> str:
    return next((line for line in (folder / "capture.txt").read_text().splitlines()
                 if line.startswith("command:")), "")


def _backward_layers(folder: Path) -> int:
    """--backward-layers of the rank's program (its default where not given)."""
    given = re.search(r"--backward-layers[ =](\d+)", _command(folder))
    return int(given.group(1)) if given else _constants("nsys_ranks.py").BACKWARD_LAYERS


def ranks(out: Path, name: str = "nsys_ranks") -> None:
    prog = _constants("nsys_ranks.py")

    root = out / name
    rank_dirs = sorted(p for p in root.glob("rank*") if p.is_dir())
    asked, backend = _program_args(rank_dirs[0])
    prog.STRAGGLER = prog.STRAGGLER if asked is None else asked
    nccl = backend == "nccl"
    world = len(rank_dirs)
    devices = {d.name: _devices(d) for d in rank_dirs}
    gpus = len(set().union(*devices.values()))
    observed = {}
    for d in rank_dirs:
        rows = {r["Range"]: r for r in _csv(d / "stats" / "nvtx_sum.csv")}
        observed[d.name] = {rng: {"instances": int(rows[rng]["Instances"]), "med_ns": float(rows[rng]["Med (ns)"]),
                                  "total_ns": int(rows[rng]["Total Time (ns)"])}
                            for rng in (":step", ":forward", ":exchange", ":backward") if rng in rows}
    per_step = {d.name: _step_children(d / "export.sqlite.xz") for d in rank_dirs}
    n_steps = min(len(v["step"]) for v in per_step.values())
    straggler = f"rank{prog.STRAGGLER}"
    # NCCL: the all-reduce kernel's time per rank, by NVIDIA's cuda_gpu_kern_sum (the wait is on the GPU)
    nccl_ns = {d.name: sum(int(r["Total Time (ns)"]) for r in _csv(d / "stats" / "cuda_gpu_kern_sum.csv")
                           if r["Name"].startswith("ncclDevKernel")) for d in rank_dirs} if nccl else {}
    slowest_forward = sum(
        max(per_step, key=lambda r: per_step[r]["forward"][i]) == straggler for i in range(n_steps))
    shortest_exchange = sum(
        min(per_step, key=lambda r: per_step[r]["exchange"][i]) == straggler for i in range(n_steps))
    plant = {
        "program": "tests/data/programs/nsys_ranks.py",
        "backend": backend,
        "world_size": world,
        "gpus": gpus,
        "steps": prog.STEPS,
        "backward_layers": _backward_layers(rank_dirs[0]),
        "ranks": {d.name: {"rank": int(d.name[4:]), "export": f"{d.name}/export.sqlite.xz",
                           "devices": devices[d.name]} for d in rank_dirs},
        "straggler": {
            "rank": prog.STRAGGLER, "nvtx_path": "step/forward", "nvtx_range": ":forward",
            "work_factor": 1.5, "layers": {"straggler": prog.FORWARD_LAYERS * 3 // 2, "others": prog.FORWARD_LAYERS},
            "work": "each forward layer: a host-side CPU matmul + tanh (one thread) and a GPU GEMM + ReLU",
            "expected": f"rank {prog.STRAGGLER} is the slowest rank in step/forward in most step instances",
        },
        "consequences": [{"nccl_kernel_ns": "down on the straggler", "exposed_nccl": "down on the straggler",
                          "why": "the other ranks wait for it inside NCCL's all-reduce kernel, on their GPU"}]
        if nccl else [{"nvtx_path": "step/exchange", "direction": "down on the straggler",
                       "why": "the other ranks wait for it in the all-reduce"}],
        **({"nsys_stats_nccl_kernel_total_ns": nccl_ns} if nccl else {}),
        "unchanged": ["step/backward: the same work on every rank",
                      "step: the ranks are in lock-step, so step durations agree across ranks"],
        "nvtx_paths": ["warmup", "warmup/forward", "warmup/exchange", "warmup/backward",
                       "step", "step/forward", "step/exchange", "step/backward"],
        "nsys_stats_nvtx_sum_all_instances": observed,
        "observed_per_step": {
            "steps": n_steps,
            "straggler_slowest_in_forward": slowest_forward,
            "straggler_shortest_exchange": shortest_exchange,
            "duration_ns": per_step,
        },
    }
    peaks = {d.name: _device_memory_peak(d / "export.sqlite.xz") for d in rank_dirs}
    if any(v is not None for v in peaks.values()):
        plant["device_memory_peak_bytes"] = peaks
    (root / "plant.json").write_text(json.dumps(plant, indent=2) + "\n")
    lines = [
        f"# {name}: a {world}-rank job with a planted straggler",
        "",
        f"`tests/data/programs/nsys_ranks.py`, {world} processes started together on "
        f"{'one GPU' if gpus == 1 else f'{gpus} GPUs (rank r on GPU r % {gpus}, from NVIDIA cuda_gpu_trace)'}, each "
        "under its own `nsys profile` (one export per rank: `rankN/export.sqlite.xz` + `rankN/stats/`). "
        f"RANK/WORLD_SIZE from the environment; torch.distributed {backend} on localhost; a barrier before "
        f"every step keeps the ranks in lock-step, so step N of every rank is the same step. "
        f"{prog.STEPS} steps, each NVTX `step` > `forward` / `exchange` (all-reduce over {backend}"
        f"{' on the GPU' if nccl else ''}) / `backward`; one warm-up step inside `warmup` before them.",
        "",
        f"Plant: rank {prog.STRAGGLER} runs `forward` with 1.5x the layers ({prog.FORWARD_LAYERS * 3 // 2} "
        f"instead of {prog.FORWARD_LAYERS}; each layer a host-side transform on the rank's one CPU thread "
        "and a GPU GEMM + ReLU), so it is the slowest rank in `step/forward` and the other "
        + ("ranks wait for it inside NCCL's all-reduce kernel, on their GPU (the host only enqueues it: "
           "`step/exchange` is short on every rank): their NCCL kernel time is longer, and exposed, no compute "
           "kernel beside it (`tracekit query comm-overlap`, `rank-summary`). " if nccl else
           "ranks wait for it inside `step/exchange`. ")
        + f"`step/backward` is the same work on every rank ({_backward_layers(rank_dirs[0])} GEMM + tanh layers). "
        "Machine-readable: `plant.json`.",
        "",
        f"Each export's timestamps count from its own nsys session's start (the {world} sessions started "
        "within a few hundred ms of each other): align ranks by step index, or through each "
        "export's session start time (TARGET_INFO_SESSION_START_TIME), not by raw timestamps.",
        "",
        "Medians per rank from NVIDIA's `stats/nvtx_sum.csv` (all instances of the range name, the "
        "warm-up step's included):",
        "",
        "| rank | :step med ns | :forward med ns | :exchange med ns | :backward med ns |",
        "|---|---|---|---|---|",
    ]
    for name, o in observed.items():
        lines.append(f"| {name[4:]} | " + " | ".join(f"{o[r]['med_ns']:.0f}" if r in o else "-" for r in
                                                     (":step", ":forward", ":exchange", ":backward")) + " |")
    if nccl:
        lines += ["", "NCCL kernel time per rank (NVIDIA's `stats/cuda_gpu_kern_sum.csv`, ncclDevKernel_*): "
                  + ", ".join(f"rank {r[4:]} {ns / 1e6:,.3f} ms" for r, ns in nccl_ns.items()) + "."]
    lines += ["", f"Per `step` instance (from the exports, {n_steps} steps): rank {prog.STRAGGLER} has the longest "
              f"`forward` in {slowest_forward} and the shortest `exchange` in {shortest_exchange} of them "
              "(`observed_per_step` in plant.json holds every duration)."]
    if "device_memory_peak_bytes" in plant:
        hold = re.search(r"--hold-rank[ =](\d+) --hold-mb[ =](\d+)", _command(rank_dirs[0]))
        lines += ["", "Captured with `--cuda-memory-usage=true`"
                  + (f" and `--hold-rank {hold.group(1)} --hold-mb {hold.group(2)}` (rank {hold.group(1)} allocates "
                     f"{hold.group(2)} MiB more in its warm-up and holds it to the end)" if hold else "")
                  + ". Device memory at its peak per rank, from the exports (CUDA_GPU_MEMORY_USAGE_EVENTS): "
                  + ", ".join(f"rank {r[4:]} {v:,} B" for r, v in peaks.items() if v is not None) + "."]
    if gpus == world:
        lines += ["", "Each rank has a GPU of its own; `forward` is bound by each rank's own CPU thread (the "
                  "host-side transforms)."]
    else:
        share = ("The ranks share one GPU (only one-GPU machines were lent), whose contexts are time-sliced; "
                 if gpus == 1 else f"The ranks share {gpus} GPUs ({world // gpus} per GPU), whose contexts are time-sliced; ")
        lines += ["", share + "`forward` is bound by each rank's own CPU thread (the host-side transforms), which is "
                  "what makes the straggler visible in its range durations although GPUs are shared. "
                  "`step/backward` (GPU GEMMs only) varies between ranks with that time-slicing."]
    (root / "PLANT.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {root}/plant.json and PLANT.md")


def jobs(out: Path) -> None:
    """nsys_jobs: the same 4-rank program three times, a job against a job (tracekit diff
    --jobs): base, base_again (the same program again: the noise) and after (the straggler
    moved to another rank, backward given more layers on every rank)."""
    root = out / "nsys_jobs"
    names = ("base", "base_again", "after")
    for name in names:
        ranks(out, f"nsys_jobs/{name}")
    plants = {name: json.loads((root / name / "plant.json").read_text()) for name in names}
    # kernel instances per rank and kernel, NVIDIA's cuda_gpu_kern_sum
    instances = {name: {d: {r["Name"]: int(r["Instances"]) for r in _csv(root / name / d / "stats" / "cuda_gpu_kern_sum.csv")}
                        for d in sorted(plants[name]["ranks"])} for name in names}
    base, after = plants["base"], plants["after"]
    pair = {
        "program": "tests/data/programs/nsys_ranks.py",
        "jobs": {name: {"folder": name, "straggler": plants[name]["straggler"]["rank"],
                        "backward_layers": plants[name]["backward_layers"], "world_size": plants[name]["world_size"]}
                 for name in names},
        "noise": "base_again is base's program again: what differs between them is noise",
        "planted": [
            {"what": "backward layers", "from": base["backward_layers"], "to": after["backward_layers"],
             "ranks": "every rank", "expected": "step/backward's kernels: instances and kernel time "
             f"x{after['backward_layers'] / base['backward_layers']:g} on every rank (regressed)"},
            {"what": "straggler", "from": base["straggler"]["rank"], "to": after["straggler"]["rank"],
             "expected": f"step/forward's kernels x1.5 on rank {after['straggler']['rank']} (regressed) and x2/3 on "
             f"rank {base['straggler']['rank']} (improved); the slowest rank of step/forward moves"},
        ],
        "nsys_stats_kernel_instances": instances,
    }
    (root / "plant.json").write_text(json.dumps(pair, indent=2) + "\n")
    lines = [
        "# nsys_jobs: a 4-rank job against a 4-rank job",
        "",
        "`tests/data/programs/nsys_ranks.py` three times, each a 4-rank job on one GPU (each rank under its own "
        "`nsys profile`, as `nsys_ranks`; each job's PLANT.md says more): `tracekit diff --jobs` compares them "
        "rank by rank.",
        "",
        "| job | straggler (1.5x forward layers) | backward layers | what it is |",
        "|---|---|---|---|",
        *(f"| {n} | rank {plants[n]['straggler']['rank']} | {plants[n]['backward_layers']} | {w} |"
          for n, w in zip(names, ("the base", "the base's program again: the noise",
                                  "the straggler moved, backward heavier on every rank"), strict=True)),
        "",
        f"Planted between base (or base_again) and after: `step/backward` runs {after['backward_layers']} GEMM + "
        f"tanh layers instead of {base['backward_layers']} on every rank (its kernels' instances and time "
        f"x{after['backward_layers'] / base['backward_layers']:g}); the straggler moves from rank "
        f"{base['straggler']['rank']} to rank {after['straggler']['rank']} (`step/forward`'s kernels x1.5 on rank "
        f"{after['straggler']['rank']}, x2/3 on rank {base['straggler']['rank']}). Machine-readable: `plant.json`, "
        "with NVIDIA's kernel instances per rank (`cuda_gpu_kern_sum`).",
        "",
        "Median `step` per rank (NVIDIA's nvtx_sum, ns): "
        + "; ".join(f"{n}: " + ", ".join(f"{plants[n]['nsys_stats_nvtx_sum_all_instances'][d][':step']['med_ns']:.0f}"
                                         for d in sorted(plants[n]['ranks'])) for n in names)
        + ". base and base_again are the same program minutes apart: their step times differ by tens of per cent "
        "(host time; the GPU's kernel times agree within about 1 %).",
    ]
    (root / "PLANT.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {root}/plant.json and PLANT.md")


def _job_ranks(root: Path) -> tuple[list[Path], list[str], dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """A job folder's rank folders (by rank), its program's arguments (rank 0's command), and
    per rank NVIDIA's kernel and NVTX range instances (none where nsys stats wrote no report)."""
    rank_dirs = sorted((p for p in root.glob("rank*") if p.is_dir()), key=lambda p: int(p.name[4:]))
    args = _command(rank_dirs[0]).split("nsys_ranks.py", 1)[1].split()
    counts = [{d.name: {r[key]: int(r["Instances"]) for r in _csv(d / "stats" / report)}
               if (d / "stats" / report).exists() else {} for d in rank_dirs}
              for report, key in (("cuda_gpu_kern_sum.csv", "Name"), ("nvtx_sum.csv", "Range"))]
    return rank_dirs, args, counts[0], counts[1]


def missed(out: Path, name: str = "nsys_jobs/missed") -> None:
    """nsys_jobs/missed: base's program captured again as a job whose rank ``--teardown-rank``
    was captured with its capture range on its host-only ``teardown`` range (options
    ranks_missed): CUDA traced, none of the rank's GPU work in the window. Against base, ranks
    other than that one are the noise; that rank's pair is a capture's mistake, not the
    program's change."""
    prog = _constants("nsys_ranks.py")
    root = out / name
    rank_dirs, args, kern, nvtx = _job_ranks(root)
    rank = int(args[args.index("--teardown-rank") + 1])
    if kern[f"rank{rank}"] or not all(kern[d.name] for d in rank_dirs if d.name != f"rank{rank}"):
        raise SystemExit(f"{root}: expected no kernel on rank {rank} alone, NVIDIA's kernel sums: "
                         f"{ {d: len(k) for d, k in kern.items()} }")
    plant = {
        "program": "tests/data/programs/nsys_ranks.py",
        "args": args,
        "world_size": len(rank_dirs),
        "straggler": prog.STRAGGLER,
        "backward_layers": prog.BACKWARD_LAYERS,
        "missed_rank": rank,
        "missed": f"rank {rank}'s capture range is its NVTX range teardown (the last barrier and the process "
                  "group's teardown, after the GPU work): CUDA traced, no CUDA event recorded",
        "expected": f"against nsys_jobs/base: rank {rank}'s pair left out (its capture missed the GPU work); "
                    "ranks " + ", ".join(d.name[4:] for d in rank_dirs if d.name != f"rank{rank}")
                    + " are base's program again: noise",
        "nsys_stats_kernel_instances": kern,
        "nsys_stats_nvtx_instances": nvtx,
    }
    (root / "plant.json").write_text(json.dumps(plant, indent=2) + "\n")
    lines = [
        f"# {name}: base's job again, rank {rank}'s capture window missing its GPU work",
        "",
        f"`tests/data/programs/nsys_ranks.py {' '.join(args)}`, {len(rank_dirs)} processes started together on "
        f"one GPU, each under its own `nsys profile`, as nsys_jobs/base (straggler rank {prog.STRAGGLER}, "
        f"{prog.BACKWARD_LAYERS} backward layers). Rank {rank} alone was captured with `--capture-range=nvtx "
        "--nvtx-capture=teardown --capture-range-end=stop`: its window is its NVTX range `teardown` (the last "
        "barrier and the process group's teardown, host work only), after all its GPU work, so its export traced "
        "CUDA and holds no CUDA event (NVIDIA's reports that wrote nothing: its capture.txt).",
        "",
        f"Against nsys_jobs/base, ranks other than {rank} are the same program again (noise); rank {rank}'s pair "
        "is a capture's mistake, not a change of the program. Machine-readable: `plant.json`, with NVIDIA's kernel "
        "and NVTX range instances per rank.",
    ]
    (root / "PLANT.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {root}/plant.json and PLANT.md")


def _traced(folder: Path) -> dict[str, bool]:
    """What the rank's nsys command traced of what tracekit's optional scopes need: NVTX
    (``-t``'s list) and GPU memory (``--cuda-memory-usage=true``)."""
    command = _command(folder)
    trace = re.search(r"(?:-t|--trace)[ =]([\w,]+)", command)
    return {"nvtx": bool(trace) and "nvtx" in trace.group(1).split(","),
            "cuda_memory_usage": "--cuda-memory-usage=true" in command}


def mixed(out: Path, name: str) -> None:
    """A job whose ranks were captured with different nsys options (RANKS_KINDS): the same
    program on every rank, so against a job of the same program and arguments it is the
    noise; each rank's options say which scopes it has (without NVTX: no job or nvtx scope;
    without --cuda-memory-usage: no memory scope)."""
    root = out / name
    rank_dirs, args, kern, nvtx = _job_ranks(root)
    traced = {d.name: _traced(d) for d in rank_dirs}
    peaks = {d.name: _device_memory_peak(d / "export.sqlite.xz") for d in rank_dirs}
    for d in rank_dirs:  # the export holds what its options traced, and nothing else
        t = traced[d.name]
        if bool(nvtx[d.name]) != t["nvtx"] or (peaks[d.name] is not None) != t["cuda_memory_usage"] or not kern[d.name]:
            raise SystemExit(f"{d}: options {t}, but NVIDIA's nvtx_sum has {len(nvtx[d.name])} ranges, the export "
                             f"{'has' if peaks[d.name] is not None else 'has no'} GPU memory usage and "
                             f"cuda_gpu_kern_sum {len(kern[d.name])} kernels")

    def lacks(t: dict[str, bool]) -> list[str]:
        return [w for k, w in (("nvtx", "NVTX (no job or nvtx scope)"),
                               ("cuda_memory_usage", "GPU memory usage (no memory scope)")) if not t[k]]

    plant = {
        "program": "tests/data/programs/nsys_ranks.py",
        "args": args,
        "world_size": len(rank_dirs),
        "traced": traced,
        "lacking": {d: lacks(t) for d, t in traced.items() if lacks(t)},
        "expected": "the same program and arguments on every rank as a job captured with every rank's options: "
                    "noise; each rank has the scopes its options traced",
        "nsys_stats_kernel_instances": kern,
        "nsys_stats_nvtx_instances": nvtx,
        "device_memory_peak_bytes": peaks,
    }
    (root / "plant.json").write_text(json.dumps(plant, indent=2) + "\n")
    lines = [
        f"# {name}: one job, its ranks captured with different options",
        "",
        f"`tests/data/programs/nsys_ranks.py {' '.join(args)}`, {len(rank_dirs)} processes started together on "
        "one GPU, each under its own `nsys profile`, as the other jobs of this program, but not "
        "with the same options on every rank (RANKS_KINDS in capture_fixtures.sh; each rank's capture.txt has its "
        "command):",
        "",
        *(f"- rank {d[4:]}: " + (f"without {' and without '.join(lacks(t))}" if lacks(t) else
                                  "NVTX and GPU memory usage traced")
          + (f"; device memory peak {peaks[d]:,} B" if peaks[d] is not None else "") for d, t in traced.items()),
        "",
        "Against a job of the same program captured with every rank's options, what the ranks share is noise, and "
        "a comparison of the jobs has only the scopes every rank traced. Machine-readable: `plant.json`, with "
        "NVIDIA's kernel and NVTX range instances per rank and each rank's device memory peak from its export.",
    ]
    (root / "PLANT.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {root}/plant.json and PLANT.md")


if __name__ == "__main__":
    what, where = sys.argv[1], Path(sys.argv[2])
    {"diff": diff, "ranks": ranks, "jobs": jobs, "missed": missed, "mixed": mixed}[what](where, *sys.argv[3:])

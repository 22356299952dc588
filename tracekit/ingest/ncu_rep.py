""".ncu-rep reports, read through NVIDIA's ``ncu_report`` module (no GPU needed).

``ncu_report.load_report`` silently returns an empty or partial context for a
truncated or corrupt file, so the container is checked first: ``"NVR\\0"``, a
length-prefixed file header, then blocks of [u32 header size][block header protobuf]
[payload of PayloadSize bytes], the block header carrying NumSources (field 1),
NumResults (field 2, kernel results), PayloadSize (field 5), the profiled process
(field 6: its id, host name and executable), an entry about the system (field 3; in some
blocks field 8 of it, repeated: {1: name, 2: version} of a component, "Nsight Compute
Target" the ncu that made the report, from ncu 2020.3 on) and the counts of the other kinds of
result (field 7: ranges of ``--replay-mode range``/``app-range``; field 9, seen on whole
graphs of ``--graph-profiling graph``). The payload is a run of [u32 size][message]
entries, the block's sources first, then its results; counting the entries counts the
results of every kind. The walk must end exactly at the end of each payload and of the
file, and ``ncu_report`` must load as many results as the blocks hold.

Each report is read in a fresh interpreter: ``ncu_report`` keeps metric definitions for
the whole process, so a second report read in it took the units the first one gave its
derived metrics (ncu_full's ``thread`` read as ``inst`` after ncu_sections had been read).
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from ..errors import InputError
from . import ncu_rules, ncu_source, tool_version
from .ncu_csv import KERNEL_SCHEMA, METRICS_SECTION, WORKLOADS
from .ncu_head import MAGIC


def _varint(b: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("varint past end")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return out, i


def _fields(b: bytes, repeated: tuple[int, ...] = ()) -> tuple[dict[int, int], dict[int, Any]]:
    """The varint fields and the length-delimited fields of a protobuf message: the first
    of each number, or for the numbers in ``repeated`` the list of them all; fixed-width
    fields skipped."""
    i, ints, blobs = 0, {}, {}
    while i < len(b):
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            ints[field], i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ValueError("field overruns the message")
            if field in repeated:
                blobs.setdefault(field, []).append(b[i:i + n])
            else:
                blobs.setdefault(field, b[i:i + n])
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    if i != len(b):
        raise ValueError("message overruns its length")
    return ints, blobs


def _process(blob: bytes | None) -> tuple[int | None, str | None, str | None]:
    """(process id, host name, executable's file name) of a block header's process field."""
    if not blob:
        return None, None, None
    ints, blobs = _fields(blob)

    def text(n):
        return blobs[n].decode("utf-8", "replace") or None if n in blobs else None

    exe = text(3)
    return ints.get(1), text(2), exe.rsplit("/", 1)[-1] if exe else None


def _components(blob: bytes | None) -> list[tuple[str, str]]:
    """(name, version) of each component a block header's system field names
    ({8: {1: name, 2: version}}, repeated: "CUDA Version", "PerfWorks", "Nsight Compute
    Target"; one per block in some reports, all three in one block in others, such as
    an app-range report)."""
    if not blob:
        return []
    out = []
    try:
        _, info = _fields(blob, repeated=(8,))
        for entry in info.get(8, []):
            _, kv = _fields(entry)
            if 1 in kv and 2 in kv:
                out.append((kv[1].decode("utf-8", "replace"), kv[2].decode("utf-8", "replace")))
    except (ValueError, IndexError):  # (system information of another shape: no version in it)
        return out
    return out


#: the component whose version is the ncu that wrote the report (a report's system field)
NCU_COMPONENT = "Nsight Compute Target"


class Container(NamedTuple):
    """What the walk of a report's blocks found: each result's process (id, host name,
    executable's name; ncu's CSV pages print these) in the file's order, where each
    source entry (a loaded module) lies: (process id, byte offset, size), and the versions
    the report names (component -> version text, e.g. "Nsight Compute Target" ->
    "2025.3.1.0 (build 36398880) (public-release)"; none in reports before ncu 2020.3)."""

    processes: list[tuple[int | None, str | None, str | None]]
    sources: list[tuple[int | None, int, int]]
    versions: dict[str, str]


def check_container(path: Path) -> Container:
    """Walk the report's blocks and their payloads' entries; InputError if the file is
    truncated or corrupt."""
    size = path.stat().st_size
    processes, sources, versions = [], [], {}
    with open(path, "rb") as fh:
        if fh.read(4) != MAGIC:
            raise InputError(f"{path}: not an Nsight Compute report (no NVR header)")
        (hsize,) = struct.unpack("<I", fh.read(4) or b"\0\0\0\0")
        pos = 8 + hsize
        while pos < size:
            fh.seek(pos)
            raw = fh.read(4)
            if len(raw) < 4:
                break
            (bsize,) = struct.unpack("<I", raw)
            block = fh.read(bsize)
            if len(block) < bsize:
                pos += 4 + bsize  # where the block would end
                break
            try:
                ints, blobs = _fields(block)
                process = _process(blobs.get(6))
            except (ValueError, IndexError):
                raise InputError(
                    f"{path}: corrupt block header at byte {pos}; the report is damaged, re-profile"
                ) from None
            for component in _components(blobs.get(3)):
                versions.setdefault(*component)
            start = pos + 4 + bsize
            end = start + ints.get(5, 0)
            if end > size:
                pos = end
                break
            entries, at = [], start
            while at < end:  # [u32 size][message], the sources then the results
                fh.seek(at)
                raw = fh.read(4)
                n = struct.unpack("<I", raw)[0] if len(raw) == 4 else size
                entries.append((at + 4, n))
                at += 4 + n
            n_sources = ints.get(1, 0)
            if at != end or len(entries) < n_sources:
                raise InputError(f"{path}: corrupt payload in the block at byte {pos} (its entries overrun it); "
                                 "the report is damaged, re-profile")
            sources += [(process[0], *e) for e in entries[:n_sources]]
            processes += [process] * (len(entries) - n_sources)
            pos = end
        if pos != size:
            where = (f"a block ends at byte {pos}, past the file's {size} bytes" if pos > size
                     else f"a block header is cut at byte {pos}, the file has {size} bytes")
            raise InputError(f"{path}: truncated report ({where}); copy the report again or re-profile")
    return Container(processes, sources, versions)


def module_functions(path: Path, sources: list[tuple[int | None, int, int]]) -> dict[tuple[int | None, int], str]:
    """(process id, address) -> symbol of every function of the modules the report holds:
    a source entry carries its module (field 4: the cubin) and its functions (field 9:
    {1: repeated {1: symbol, 2: address}}), by which ncu's Source page names the functions
    of a range or a graph."""
    out = {}
    with open(path, "rb") as fh:
        for pid, offset, n in sources:
            fh.seek(offset)
            try:
                _, blobs = _fields(fh.read(n))
                for entry in _fields(blobs.get(9, b""), repeated=(1,))[1].get(1, []):
                    ints, names = _fields(entry)
                    if 1 in names and 2 in ints:
                        out[(pid, ints[2])] = names[1].decode("utf-8", "replace")
            except (ValueError, IndexError):
                raise InputError(f"{path}: corrupt module entry at byte {offset}; the report is damaged, "
                                 "re-profile") from None
    return out


def function_name(symbol: str) -> str:
    """A kernel's name without parameters or template arguments from its symbol: the
    qualified name of an Itanium-mangled C++ function (``_Z9block_sumPKfPfi`` ->
    ``block_sum``, ``_ZN2at6native29vectorized_elementwise_kernelILi4E...`` ->
    ``at::native::vectorized_elementwise_kernel``), any other symbol as it is (extern "C"
    and Triton kernels are not mangled)."""
    if not symbol.startswith("_Z"):
        return symbol
    i, nested = 2, symbol[2:3] == "N"
    i += nested
    parts = []
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        n = int(symbol[i:j])
        if j + n > len(symbol):
            return symbol
        parts.append(symbol[j:j + n])
        i = j + n
        if not nested:
            break
    return "::".join(parts) if parts else symbol


def _value(m):
    """(value, text_value) of an ncu_report metric. A number ncu could not compute (NaN,
    as ncu_report gives launch__occupancy_limit_shared_mem of a Jetson Xavier report, or
    an infinity) is no value: NULL with its text as ncu's CSV pages print it ("nan"), the
    rule of ``ncu_csv._values``."""
    if m is None or not m.has_value():
        return None, "n/a"
    v = m.value()
    if isinstance(v, str):
        return None, v
    if isinstance(v, (bool, int, float)):
        v = float(v)
        return (v, None) if math.isfinite(v) else (None, str(v))
    return None, str(v)


#: the instruction-level tables a report may carry (``ncu_source``), by file in the child's output
SOURCE_TABLES = {"ncu_source": "source.parquet", "ncu_source_stalls": "stalls.parquet",
                 "ncu_source_lines": "lines.parquet"}


#: the folder this process imported the tracekit package from
_IMPORT_ROOT = Path(__file__).resolve().parents[2]


def _child_env() -> dict[str, str] | None:
    """The report reader's environment: this one, where this tracekit is the one installed;
    else with its folder first on PYTHONPATH (a checkout put on sys.path, or one installed in
    development mode): the child reads the report with this code, not with another tracekit
    found first, or none, which it blamed on the report."""
    installed = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    if _IMPORT_ROOT in installed:
        return None
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(_IMPORT_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


class ReportRead:
    """A report being read in a child interpreter (``start_report``): ``result()`` waits for
    it, ``cancel()`` stops it; either removes its files."""

    def __init__(self, path: Path, source_only: bool) -> None:
        self.path = path
        self._tmp = tempfile.TemporaryDirectory(prefix="tracekit-ncu-")
        out = Path(self._tmp.name)
        argv = [sys.executable, "-m", __name__, str(path), str(out)] + (["--source-only"] if source_only else [])
        with (out / "stderr").open("w") as err:  # (a file: a pipe unread until the end could fill)
            self._proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=_child_env())

    def result(self) -> tuple[dict, pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, dict[str, pl.DataFrame]]:
        """What ``read_report`` returns; the child's one-line refusal raised as the same InputError."""
        try:
            code = self._proc.wait()
            out = Path(self._tmp.name)
            lines = (out / "stderr").read_text().strip().splitlines()
            if code == 2 and lines and lines[-1].startswith(f"{self.path}: "):  # (a refusal names the report)
                raise InputError(lines[-1])
            if code != 0:
                why = lines[-1] if lines else f"exit status {code}"
                raise InputError(f"{self.path}: ncu_report failed reading it ({why}); the report is damaged, or "
                                 "written by an ncu newer than the ncu_report installed")
            meta = json.loads((out / "meta.json").read_text())

            def frame(name):
                return pl.read_parquet(out / name) if (out / name).exists() else None

            source = {t: frame(f) for t, f in SOURCE_TABLES.items() if (out / f).exists()}
            return meta, frame("kernels.parquet"), frame("metrics.parquet"), frame("rules.parquet"), source
        finally:
            self.cancel()

    def cancel(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._tmp.cleanup()


def start_report(path: Path, *, source_only: bool = False) -> ReportRead:
    """Start reading a .ncu-rep in a child interpreter (see the module's docstring), so that
    the caller can parse something else meanwhile; ``source_only`` as in ``read_report``."""
    return ReportRead(Path(path), source_only)


def read_report(path: Path, *, source_only: bool = False
                ) -> tuple[dict, pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, dict[str, pl.DataFrame]]:
    """Parse a .ncu-rep -> (meta, kernels, metrics, rule results, instruction-level tables),
    in a child interpreter; its one-line refusal (the container check included) is raised
    here as the same InputError. The instruction-level tables (``SOURCE_TABLES``) are there
    only for launches profiled with Source Counters. ``source_only``: the launches and the
    instruction-level tables, no metrics or rules (metrics and rules None), for a run folder
    that reads those from ncu's CSV pages."""
    return start_report(path, source_only=source_only).result()


def _functions(path: Path, container: Container, actions: list, workloads: dict, IA) -> dict[int, dict[int, str]]:
    """kernel_id -> {first address: name} of the functions each range or graph ran
    (``launch__function_pcs``), named from the report's modules: a function the report
    also holds a kernel launch of takes that launch's demangled name (the functions of both
    count together in ncu-source), any other its name without parameters
    (``function_name``). None for kernel launches."""
    several = [kid for kid, a in enumerate(actions) if workloads.get(a.workload_type(), "kernel") != "kernel"]
    if not several:
        return {}
    demangled = {a.name(IA.NameBase_MANGLED): a.name(IA.NameBase_DEMANGLED) for a in actions
                 if workloads.get(a.workload_type(), "kernel") == "kernel"}
    names = {k: demangled.get(symbol) or function_name(symbol) for k, symbol in module_functions(path, container.sources).items()}
    out = {}
    for kid in several:
        m = actions[kid].metric_by_name("launch__function_pcs")
        pid = container.processes[kid][0]
        pcs = [m.as_uint64(i) for i in range(m.num_instances())] if m is not None else []
        out[kid] = {pc: names[(pid, pc)] for pc in pcs if (pid, pc) in names}
    return out


def _read_here(path: Path, source_only: bool = False
               ) -> tuple[dict, pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, dict[str, pl.DataFrame]]:
    container = check_container(path)
    processes = container.processes
    try:
        import ncu_report
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise InputError(
            f"{path}: reading .ncu-rep needs the ncu-report package (pip install ncu-report)"
        ) from err
    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as err:  # the SWIG layer raises plain RuntimeError and friends
        raise InputError(
            f"{path}: ncu_report cannot load it ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
        ) from err
    actions = ncu_source.launches(ctx)
    if len(actions) != len(processes):
        raise InputError(
            f"{path}: ncu_report loaded {len(actions)} of the {len(processes)} results the file holds; "
            "the report is damaged, copy it again or re-profile"
        )
    if not actions:
        raise InputError(f"{path}: the report holds no profiled launches (empty report)")
    IA = ncu_report.IAction
    workloads = {getattr(IA, f"WorkloadType_{w.upper()}"): w for w in WORKLOADS if hasattr(IA, f"WorkloadType_{w.upper()}")}
    functions = _functions(path, container, actions, workloads, IA)
    kernels, rules, k_ids, m_names, m_units, m_vals, m_texts = [], [], [], [], [], [], []
    gpus, sections = set(), set()
    for kid, a in enumerate(actions):
        demangled, names = a.name(IA.NameBase_DEMANGLED), list(a.metric_names())
        if not demangled or not names:  # (a flipped byte leaves a result with neither)
            raise InputError(f"{path}: profiled launch {kid} has no {'kernel name' if not demangled else 'metrics'}; "
                             "the report is damaged, copy it again or re-profile")

        def num(name, _a=a):
            v, _ = _value(_a.metric_by_name(name))
            return int(v) if v is not None else None

        ranges, start_end = [], []
        state = a.nvtx_state()
        if state is not None:
            for dom_id in state.domains():
                dom = state.domain_by_id(dom_id)
                dname = dom.name()
                prefix = "" if dname in ("<default domain>", "") else f"{dname}:"
                ranges += [prefix + r for r in dom.push_pop_ranges()]
                start_end += [prefix + r for r in dom.start_end_ranges()]
        major, minor = (
            num("device__attribute_compute_capability_major"),
            num("device__attribute_compute_capability_minor"),
        )
        _, gpu = _value(a.metric_by_name("device__attribute_display_name"))
        if gpu and gpu != "n/a":
            gpus.add(gpu)
        workload = workloads.get(a.workload_type(), "kernel")
        # a range or a whole graph launches several kernels: its launch__ values are the maxima
        # over them (launch__grid_dim_x of a graph of 16384- and 8192-block kernels is 16384)
        launch = workload == "kernel"
        pid, host, exe = processes[kid]
        kernels.append(
            {
                "kernel_id": kid,
                "name": demangled,
                "mangled_name": a.name(IA.NameBase_MANGLED),
                "function_name": a.name(IA.NameBase_FUNCTION),
                "workload": workload,
                "process_id": pid,
                "process_name": exe,
                "host_name": host,
                # (a launch ncu collected no launch metrics of: the device's own index)
                "device_id": next((d for d in (num("launch__device_id"), num("device__attribute_device_index"))
                                   if d is not None), None),
                "context_id": num("launch__context_id"),
                "stream_id": num("launch__stream_id") if workload != "range" else None,  # (as ncu prints it: n/a)
                "cc": f"{major}.{minor}" if major is not None else None,
                **{f"{k}_{d}": num(f"launch__{k}_dim_{d}") if launch else None
                   for k in ("grid", "block") for d in "xyz"},
                "nvtx_ranges": ranges,
                "nvtx_start_end": start_end,
            }
        )
        sections.update(x.identifier() for x in a.sections() if x.name() != METRICS_SECTION)
        if source_only:
            continue
        rules += ncu_rules.from_report(kid, a.rule_results_as_dicts())
        for name in names:
            m = a.metric_by_name(name)
            v, t = _value(m)
            k_ids.append(kid)
            m_names.append(name)
            m_units.append(m.unit() if m is not None else "")
            m_vals.append(v)
            m_texts.append(t)
    metrics = pl.DataFrame(
        {
            "kernel_id": k_ids,
            "metric": m_names,
            "unit": m_units,
            "value": m_vals,
            "text_value": m_texts,
        },
        schema={
            "kernel_id": pl.Int64,
            "metric": pl.Utf8,
            "unit": pl.Utf8,
            "value": pl.Float64,
            "text_value": pl.Utf8,
        },
    )
    meta = {
        "ncu_export": "ncu-rep",
        "ncu_report_module": ctx.get_version() if hasattr(ctx, "get_version") else None,
        "sections": len(sections),
        # the ncu that wrote the report, as the report says (runs.tool_version; None: it does not)
        "tool_version": tool_version(container.versions.get(NCU_COMPONENT)),
    }
    if gpus:
        meta["gpu"] = ", ".join(sorted(gpus))
    source = ncu_source.read(actions, functions)
    tables = dict(zip(SOURCE_TABLES, source, strict=True)) if source is not None else {}
    kernels = pl.DataFrame(kernels, schema=KERNEL_SCHEMA)
    if source_only:
        return meta, kernels, None, None, tables
    # (no sections, as with ncu --metrics alone: ncu ran no rules, so the report holds no rule results)
    return meta, kernels, metrics, ncu_rules.frame(rules) if sections else None, tables


def _main(argv: list[str]) -> int:
    """``python -m tracekit.ingest.ncu_rep REPORT OUTDIR [--source-only]``: the report read
    into OUTDIR (meta.json, kernels.parquet, metrics.parquet, rules.parquet and, where the
    report has Source Counters, the SOURCE_TABLES' files); a refusal is one line on stderr, exit 2."""
    path, out = Path(argv[0]), Path(argv[1])
    try:
        meta, kernels, metrics, rules, source = _read_here(path, "--source-only" in argv[2:])
    except InputError as err:
        print(str(err), file=sys.stderr)
        return 2
    (out / "meta.json").write_text(json.dumps(meta))
    files = {"kernels.parquet": kernels, "metrics.parquet": metrics, "rules.parquet": rules}
    files.update({SOURCE_TABLES[t]: df for t, df in source.items()})
    for name, df in files.items():
        if df is not None:
            df.write_parquet(out / name, compression="uncompressed")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

""".ncu-rep reports, read through NVIDIA's ``ncu_report`` module (no GPU needed).

``ncu_report.load_report`` silently returns an empty or partial context for a
truncated or corrupt file, so the container is checked first: ``"NVR\\0"``, a
length-prefixed file header, then blocks of [u32 header size][block header protobuf]
[payload of PayloadSize bytes], the block header carrying NumSources (field 1),
NumResults (field 2) and PayloadSize (field 5). The walk must end exactly at the end of
the file, and ``ncu_report`` must load as many results as the blocks announce.

Each report is read in a fresh interpreter: ``ncu_report`` keeps metric definitions for
the whole process, so a second report read in it took the units the first one gave its
derived metrics (ncu_full's ``thread`` read as ``inst`` after ncu_sections had been read).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from ..errors import InputError
from . import ncu_rules, ncu_source
from .ncu_csv import KERNEL_SCHEMA
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


def _varint_fields(b: bytes) -> dict[int, int]:
    """The varint fields of a protobuf message (other wire types skipped)."""
    i, out = 0, {}
    while i < len(b):
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            out[field], i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    if i != len(b):
        raise ValueError("message overruns its length")
    return out


def check_container(path: Path) -> int:
    """Walk the report's blocks; return the number of results; InputError if truncated/corrupt."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if fh.read(4) != MAGIC:
            raise InputError(f"{path}: not an Nsight Compute report (no NVR header)")
        (hsize,) = struct.unpack("<I", fh.read(4) or b"\0\0\0\0")
        pos = 8 + hsize
        results = 0
        while pos < size:
            fh.seek(pos)
            raw = fh.read(4)
            if len(raw) < 4:
                break
            (bsize,) = struct.unpack("<I", raw)
            block = fh.read(bsize)
            if len(block) < bsize:
                pos = size + 1
                break
            try:
                fields = _varint_fields(block)
            except (ValueError, IndexError):
                raise InputError(
                    f"{path}: corrupt block header at byte {pos}; the report is damaged, re-profile"
                ) from None
            results += fields.get(2, 0)
            pos += 4 + bsize + fields.get(5, 0)
        if pos != size:
            raise InputError(
                f"{path}: truncated report (blocks end at byte {pos}, file has {size}); copy the report again or re-profile"
            )
    return results


def _value(m):
    """(value, text_value) of an ncu_report metric."""
    if m is None or not m.has_value():
        return None, "n/a"
    v = m.value()
    if isinstance(v, str):
        return None, v
    if isinstance(v, bool):
        return float(v), None
    if isinstance(v, (int, float)):
        return float(v), None
    return None, str(v)


#: the instruction-level tables a report may carry (``ncu_source``), by file in the child's output
SOURCE_TABLES = {"ncu_source": "source.parquet", "ncu_source_stalls": "stalls.parquet",
                 "ncu_source_lines": "lines.parquet"}


class ReportRead:
    """A report being read in a child interpreter (``start_report``): ``result()`` waits for
    it, ``cancel()`` stops it; either removes its files."""

    def __init__(self, path: Path, source_only: bool) -> None:
        self.path = path
        self._tmp = tempfile.TemporaryDirectory(prefix="tracekit-ncu-")
        out = Path(self._tmp.name)
        argv = [sys.executable, "-m", __name__, str(path), str(out)] + (["--source-only"] if source_only else [])
        with (out / "stderr").open("w") as err:  # (a file: a pipe unread until the end could fill)
            self._proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)

    def result(self) -> tuple[dict, pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, dict[str, pl.DataFrame]]:
        """What ``read_report`` returns; the child's one-line refusal raised as the same InputError."""
        try:
            code = self._proc.wait()
            out = Path(self._tmp.name)
            lines = (out / "stderr").read_text().strip().splitlines()
            if code == 2 and lines:
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


def _read_here(path: Path, source_only: bool = False
               ) -> tuple[dict, pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, dict[str, pl.DataFrame]]:
    expected = check_container(path)
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
    actions = [
        ctx.range_by_idx(r).action_by_idx(a)
        for r in range(ctx.num_ranges())
        for a in range(ctx.range_by_idx(r).num_actions())
    ]
    if len(actions) != expected:
        raise InputError(
            f"{path}: ncu_report loaded {len(actions)} of the {expected} results the file announces; "
            "the report is damaged, copy it again or re-profile"
        )
    if not actions:
        raise InputError(f"{path}: the report holds no profiled launches (empty report)")
    IA = ncu_report.IAction
    source = ncu_source.start(list(enumerate(actions)))  # (in processes of its own, meanwhile)
    kernels, rules, k_ids, m_names, m_units, m_vals, m_texts = [], [], [], [], [], [], []
    gpus = set()
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
        kernels.append(
            {
                "kernel_id": kid,
                "name": demangled,
                "mangled_name": a.name(IA.NameBase_MANGLED),
                "function_name": a.name(IA.NameBase_FUNCTION),
                "process_id": None,
                "process_name": None,
                "host_name": None,
                "device_id": num("launch__device_id"),
                "context_id": num("launch__context_id"),
                "stream_id": num("launch__stream_id"),
                "cc": f"{major}.{minor}" if major is not None else None,
                "grid_x": num("launch__grid_dim_x"),
                "grid_y": num("launch__grid_dim_y"),
                "grid_z": num("launch__grid_dim_z"),
                "block_x": num("launch__block_dim_x"),
                "block_y": num("launch__block_dim_y"),
                "block_z": num("launch__block_dim_z"),
                "nvtx_ranges": ranges,
                "nvtx_start_end": start_end,
            }
        )
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
    }
    if gpus:
        meta["gpu"] = ", ".join(sorted(gpus))
    source = source()
    tables = dict(zip(SOURCE_TABLES, source, strict=True)) if source is not None else {}
    kernels = pl.DataFrame(kernels, schema=KERNEL_SCHEMA)
    if source_only:
        return meta, kernels, None, None, tables
    return meta, kernels, metrics, ncu_rules.frame(rules), tables


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

"""A sweep's points beyond what the store holds: each point's key, what the sweep's manifest
says of it, and why a point has no run to show.

`tracekit sweep` writes a manifest, ``SWEEP_ID.json``, beside its run folders: each point's grid
values (a program's ``values``, the HSTU workload's ``bs`` and ``nc``), its status (ok, failed,
interrupted, not_run), its error and its run folder. A failed capture leaves nothing to ingest
(or a run labelled failed), so the store alone cannot say that a point is missing, nor why;
diff and the sweep queries read the manifest for that."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from .jsonfile import load_json
from .names import cut_end

#: a grid value written as a JSON string in a point's key (macro grid_value)
_QUOTED_VALUE = re.compile(r'[,=:"\\\s]')


def grid_point(values: dict[str, Any]) -> str:
    """A point's key from its grid's values in the grid's order, as the macro grid_point
    makes it from a run's params ('m=1024,dtype=fp16', 'shape="1024,1024"')."""
    return ",".join(f"{k}={json.dumps(v, ensure_ascii=False) if _QUOTED_VALUE.search(v) or not v else v}"
                    for k, v in ((k, str(v)) for k, v in values.items()))


class Planned(NamedTuple):
    """What a sweep's manifest says of one point."""
    status: str  # ok, failed, interrupted, not_run; pending: not run yet, the sweep still running
    error: str | None
    run_dir: Path | None  # its run folder, found beside the manifest


def manifest_points(con, sweep: str) -> dict[str, Planned]:
    """Point -> what the manifest of ``sweep`` says of it, in the sweep's order; empty where no
    folder a run of the sweep was ingested from (or the folder above it) holds the manifest
    (moved, or a store from elsewhere)."""
    folders = [Path(p).parent for (p,) in con.execute(
        "SELECT DISTINCT source_path FROM runs WHERE json_extract_string(params, '$.sweep') = ? "
        "AND source_path IS NOT NULL ORDER BY 1", [sweep]).fetchall()]
    for folder in dict.fromkeys(f for near in folders for f in (near, near.parent)):
        try:
            manifest = load_json(folder / f"{sweep}.json")
            running = manifest.get("status") == "running"
            return {grid_point(p["values"] if "values" in p else {"bs": p["bs"], "nc": p["nc"]}):
                    Planned("pending" if running and p.get("status") == "not_run" else str(p.get("status")),
                            p.get("error"), _beside(folder, p["run_dir"]) if p.get("run_dir") else None)
                    for p in manifest["points"]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return {}


def _beside(folder: Path, run_dir: str) -> Path:
    """A point's run folder as found now: the manifest names it where the sweep ran, and the
    folders may have moved together since (beside the manifest, or in a folder below it); where
    neither holds it, the path beside the manifest (which is no folder: ``_absent`` says so)."""
    name = Path(run_dir).name
    for at in (folder / name, *folder.glob(f"*/{name}")):
        if at.is_dir():
            return at
    return folder / name


def failed_points(con, sweep: str) -> dict[str, str]:
    """The points of ``sweep`` whose every run in the store failed (status not ok), as the
    point -> the first line of the error its latest captured run recorded ('' where none)."""
    rows = con.execute("""
        SELECT grid_point(params) AS point,
               first(coalesce(json_extract_string(meta, '$.error'), '')
                     ORDER BY run_captured_us(meta) DESC NULLS LAST, run_id DESC) AS error,
               bool_and(coalesce(json_extract_string(meta, '$.status'), 'ok') <> 'ok') AS failed
        FROM runs WHERE json_extract_string(params, '$.sweep') = ? AND grid_point(params) IS NOT NULL
        GROUP BY point""", [sweep]).fetchall()
    return {point: cut_end(error.splitlines()[0] if error else "", 120) for point, error, failed in rows if failed}


class Absent(NamedTuple):
    """Why a sweep has no run at a point: what happened there and what says more."""
    what: str  # failed, interrupted, not_run, pending, not_ingested, gone
    detail: str  # the error (failed), the run folder to ingest (not_ingested) or its name (gone); '' where none


def why_absent(con, sweep: str, points: list[str]) -> list[Absent | None]:
    """Why ``sweep`` has no ok run at each of ``points``, where the store or the manifest knows:
    its capture failed (its runs there in the store labelled failed, or the manifest says so),
    was interrupted or never ran, its run is not ingested, or its run folder is found nowhere
    the manifest's folders are; None where neither knows."""
    failed = failed_points(con, sweep)
    return _absent(points, failed, manifest_points(con, sweep) if set(points) - set(failed) else {})


def _absent(points: list[str], failed: dict[str, str], manifest: dict[str, Planned]) -> list[Absent | None]:
    """``why_absent`` of the store's failed points and the manifest's, read once by the caller."""
    out: list[Absent | None] = []
    for p in points:
        planned = manifest.get(p, Planned("", None, None))
        if planned.status in ("ok", "failed") and planned.run_dir is not None:
            # its folder's own word: a capture that failed after the manifest said ok leaves no run
            # to ingest; one the manifest says failed whose folder says ok failed after its capture
            # (its ingest into the sweep's store): the folder is there to ingest
            folder = _folder_status(planned.run_dir)
            if folder in ("ok", "failed"):
                planned = planned._replace(status=folder)
        if p in failed or planned.status == "failed":
            out.append(Absent("failed", failed[p] if p in failed else _error(planned)))
        elif planned.status in ("interrupted", "not_run", "pending"):
            out.append(Absent(planned.status, ""))
        elif planned.status == "ok" and planned.run_dir is not None:
            out.append(Absent("not_ingested", str(planned.run_dir)) if planned.run_dir.is_dir()
                       else Absent("gone", planned.run_dir.name))
        else:
            out.append(None)
    return out


def _folder_status(run_dir: Path) -> str | None:
    """The status a run folder's meta.json records (None where it cannot be read): the manifest
    may say ok of a point whose folder says failed (its capture ended so after the manifest was
    written, or the folder was labelled so), which ingest leaves out when it left nothing to read;
    or failed of a point whose folder says ok (the capture done, its ingest failed)."""
    try:
        status = load_json(run_dir / "meta.json").get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if isinstance(status, str) else None


def _error(planned: Planned) -> str:
    """A failed point's error, its first line: its run folder's own (the manifest's wraps it)."""
    error = planned.error
    if planned.run_dir is not None:
        try:
            error = load_json(planned.run_dir / "meta.json").get("error") or error
        except (OSError, ValueError, AttributeError):
            pass
    return cut_end(str(error).splitlines()[0], 120) if error else ""


def said(name: str, point: str, why: Absent) -> str:
    """``why`` as a sentence whose subject is ``name`` (a sweep, e.g. 'base sweep sweep-…')."""
    if why.what == "failed":
        return f"{name}'s capture of {point} failed" + (f" ({why.detail})" if why.detail else "")
    if why.what == "interrupted":
        return f"{name}'s capture of {point} was interrupted"
    if why.what == "not_run":
        return f"{name} never ran {point} (it stopped before)"
    if why.what == "pending":
        return f"{name} has not run {point} yet (its manifest says it is running)"
    if why.what == "gone":
        return f"{name}'s run at {point} is not in the store, and its run folder {why.detail} is not beside its manifest"
    return f"{name}'s run at {point} is not in the store (tracekit ingest {why.detail})"


def absent_points(con, sweep: str) -> tuple[dict[str, Absent], int]:
    """The points of ``sweep`` with no ok run in the store where the manifest or the store
    knows why (point -> why, in the sweep's order), and how many points the sweep has in all
    (the manifest's, else the store's)."""
    ok = {p for (p,) in con.execute(
        "SELECT DISTINCT grid_point(params) FROM runs WHERE json_extract_string(params, '$.sweep') = ? "
        "AND coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok' AND grid_point(params) IS NOT NULL",
        [sweep]).fetchall()}
    manifest, failed = manifest_points(con, sweep), failed_points(con, sweep)
    missing = [p for p in dict.fromkeys([*manifest, *failed]) if p not in ok]
    total = len(set(manifest) | ok | set(missing))
    return {p: why for p, why in zip(missing, _absent(missing, failed, manifest), strict=True) if why is not None}, total


def left_out(con, sweep: str) -> tuple[int, list[str]]:
    """The points of ``sweep`` with no ok run in the store, each with why, where the manifest
    or the store knows ('bs=8,nc=4096: its capture failed (…)'), and how many points the sweep
    has in all (the manifest's, else the store's)."""
    absent, total = absent_points(con, sweep)
    return total, [f"{p}: " + {"failed": "its capture failed" + (f" ({why.detail})" if why.detail else ""),
                               "interrupted": "its capture was interrupted",
                               "not_run": "never ran (the sweep stopped before)",
                               "pending": "not run yet (the sweep's manifest says it is running)",
                               "not_ingested": f"not ingested (tracekit ingest {why.detail})",
                               "gone": f"not ingested, and its run folder {why.detail} is not beside the sweep's "
                                       "manifest"}[why.what]
                   for p, why in absent.items()]

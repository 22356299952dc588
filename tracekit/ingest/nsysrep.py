"""``.nsys-rep`` reports: exported to SQLite with ``nsys export`` before ingest."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


@contextmanager
def export_if_needed(path: Path) -> Iterator[Path]:
    """Yield ``path`` itself, or for an nsys report a temporary SQLite export of it.

    Needs ``nsys`` (PATH, $TRACEKIT_NSYS, known install folders); without it the error
    says so and how to export elsewhere.
    """
    if path.suffix not in REPORT_SUFFIXES or not path.is_file():
        yield path
        return
    with open(path, "rb") as fh:
        head = fh.read(16)
    if not head:  # (not a reason to look for nsys: nothing could export it)
        raise InputError(f"{path}: empty file")
    if head.startswith(b"SQLite format 3"):
        yield path
        return
    from ..tools import find_tool

    try:
        nsys = find_tool("nsys")
    except Exception as err:
        raise InputError(
            f"{path}: an nsys report needs `nsys export --type sqlite` and {err}; "
            "or export it where nsys is installed and ingest the .sqlite"
        ) from err
    with tempfile.TemporaryDirectory(prefix="tracekit-nsys-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        _, proc = export_sqlite(nsys, path, out)
        if proc.returncode != 0 or not out.exists():
            raise InputError(f"{path}: nsys export failed (exit {proc.returncode}): {last_line(proc)}")
        yield out


def export_argv(nsys: str, report: Path, out: Path, blobs: bool = True) -> list[str]:
    """``nsys export`` of ``report`` to the SQLite file ``out``; ``blobs``: with the NVTX
    payloads (--include-blobs), where nsys writes the Python stacks it records."""
    return [nsys, "export", "--type", "sqlite", "--quiet", "true", *(["--include-blobs=true"] if blobs else []),
            "--force-overwrite", "true", "-o", str(out), str(report)]


def export_sqlite(nsys: str, report: Path, out: Path, timeout: float | None = None
                  ) -> tuple[list[str], subprocess.CompletedProcess]:
    """Export ``report`` to ``out`` with its NVTX payloads; again without them where this nsys
    does not know --include-blobs. The command run last and its result (output captured)."""
    argv = export_argv(nsys, report, out)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 and "include-blobs" in proc.stdout + proc.stderr:  # (an nsys older than the option)
        argv = export_argv(nsys, report, out, blobs=False)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return argv, proc


def last_line(proc: subprocess.CompletedProcess) -> str:
    """The last line a finished command printed (nsys's error), stderr before stdout; 'no output'."""
    return ((proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"])[0]

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
        if fh.read(16).startswith(b"SQLite format 3"):
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
        proc = subprocess.run(
            [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out), str(path)],
            capture_output=True, text=True,
        )
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise InputError(f"{path}: nsys export failed (exit {proc.returncode}): {last[0]}")
        yield out

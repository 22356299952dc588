"""tracekit: capture and analyse Nsight Systems / Nsight Compute profiles of HSTU inference.

Library first::

    import tracekit
    tk = tracekit.open("tracekit.duckdb")
    tk.ingest("export.sqlite")
    tk.query("top-kernels", limit=10)      # -> polars.DataFrame

torch and triton are never imported here: ingest, query and chart work without them.
"""

from typing import TYPE_CHECKING

from .errors import (
    CaptureError,
    InputError,
    ParamError,
    QueryError,
    ToolNotFoundError,
    TracekitError,
)

if TYPE_CHECKING:
    from .store import IngestResult, Tracekit, open

__version__ = "0.1.0"


def __getattr__(name: str):
    # the store (DuckDB) is imported on first use: `tracekit --version` and `--help` need none of it
    if name in ("IngestResult", "Tracekit", "open"):
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")


__all__ = [
    "CaptureError",
    "IngestResult",
    "InputError",
    "ParamError",
    "QueryError",
    "ToolNotFoundError",
    "Tracekit",
    "TracekitError",
    "open",
    "__version__",
]

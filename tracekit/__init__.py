"""tracekit: capture and analyse Nsight Systems / Nsight Compute profiles of HSTU inference.

Library first::

    import tracekit
    tk = tracekit.open("tracekit.duckdb")
    tk.ingest("export.sqlite")
    tk.query("top-kernels", limit=10)      # -> polars.DataFrame

torch and triton are never imported here: ingest, query and chart work without them.
"""

from .errors import (
    CaptureError,
    InputError,
    ParamError,
    QueryError,
    ToolNotFoundError,
    TracekitError,
)
from .store import IngestResult, Tracekit, open

__version__ = "0.1.0"

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

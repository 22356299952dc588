"""The TracekitError hierarchy.

Every error the library raises on bad input is a ``TracekitError``; the CLI prints its
one-line message and exits with ``exit_code`` (2), showing a traceback only with
``--debug``. Messages name the file or value and say what to do.
"""


class TracekitError(Exception):
    """Base class: a problem the user can fix; ``str(err)`` is one line."""

    exit_code = 2


class InputError(TracekitError):
    """A file that cannot be ingested (missing, truncated, wrong kind, wrong schema)."""


class QueryError(TracekitError):
    """An unknown query, a bad parameter, or a query the data cannot answer."""


class ParamError(QueryError):
    """A parameter value that does not fit its declared type."""


class ToolNotFoundError(TracekitError):
    """A profiler (nsys, ncu) that is needed but cannot be found."""


class CaptureError(TracekitError):
    """A capture that failed (profiler exit status, workload crash, bad settings)."""


class OutputError(TracekitError):
    """An output file that cannot be written (no such folder, the store itself, a full disk)."""


class StoreBusy(TracekitError):
    """The store is locked by another process (an ingest under way): try again later."""


class Interrupted(TracekitError):
    """Ctrl-C during a command that writes the store; the message says what was kept."""

    exit_code = 130


class CaptureWarning(UserWarning):
    """A run whose capture did not finish well (its run folder recorded a status other than
    ok) used in a comparison: its numbers may be partial. The CLI prints it as a warning line."""

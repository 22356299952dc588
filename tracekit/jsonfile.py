"""JSON files that anyone may have written (a run folder's meta.json, a sweep's manifest, a
bench file), read so that any way the bytes are not a JSON value is one ``ValueError`` whose
message says how, for the caller to name the file in its one line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def load_json(path: str | os.PathLike) -> Any:
    """The JSON value in ``path``: ``OSError`` where it cannot be read; ``ValueError`` where
    its bytes are not UTF-8 JSON (``json.JSONDecodeError``'s message, or what else is wrong:
    bytes that are not UTF-8, arrays or objects nested deeper than Python's parser reaches)."""
    data = Path(path).read_bytes()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text (byte {err.start}: {err.reason})") from None
    except RecursionError:
        raise ValueError("arrays or objects nested too deeply to read") from None

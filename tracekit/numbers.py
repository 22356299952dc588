"""Whole numbers as people type them: plain (12100481), grouped in thousands as
tracekit's tables print them (12,100,481), or with underscores as Python writes them
(12_100_481). One grammar for every integer given as text: a query's ``-p`` parameter,
a chart's, a CLI option of type ``Ns``. A number copied from a table works anywhere, and
a comma in the wrong place (``1,2``) is an error, not 12."""

from __future__ import annotations

import re

_WHOLE = re.compile(r"[-+]?(\d+|\d{1,3}(,\d{3})+|\d+(_\d+)+)", re.ASCII)  # (0-9 only: not ١٢٣)


def whole_number(text: str) -> int:
    """``text`` (blanks around it ignored) as an int; ValueError where it is not a whole
    number in one of the forms above."""
    s = text.strip()
    if not _WHOLE.fullmatch(s):
        raise ValueError(f"{text!r} is not a whole number")
    return int(s.replace(",", "").replace("_", ""))

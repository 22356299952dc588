"""Kernel names made readable: the one shortener of the charts and the terminal tables."""

from __future__ import annotations

import re


def short_name(name: str | None, width: int = 48) -> str:
    """A readable kernel name: no return type, template arguments or parameters."""
    if not name:
        return "?"
    s = re.sub(r"^void\s+", "", name.strip())
    depth, out = 0, []
    for ch in s:  # drop <...> and (...) groups
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = re.sub(r"(::)+", "::", "".join(out).strip()) or name
    s = s.split("::")[-1] if len(s) > width else s
    return s if len(s) <= width else s[: width - 1] + "…"


def hint(name: str) -> str:
    """A word from a kernel's template arguments that tells instantiations apart (addcmul, silu, ...)."""
    inner = name[name.find("<") + 1 :] if "<" in name else ""
    words = re.findall(
        r"([A-Za-z][A-Za-z0-9]*?)(?:_cuda)?_(?:kernel|functor|impl)\b|(\w+)Functor", inner
    )
    for a, b in words:
        w = a or b
        if w and w not in ("vectorized_elementwise", "elementwise", "gpu"):
            return w
    return ""

"""The Vega, Vega-Lite and Vega-Embed JavaScript that tracekit's HTML inlines, so that a
chart or a report opens offline.

vl-convert builds the bundle in its embedded JavaScript engine: 1.1–1.3 s on the 2-core
machine, every time, which was most of ``tracekit chart -o x.html`` and of ``tracekit
report``. The bundle depends only on the vl-convert and Vega-Lite versions, so it is kept
in the user's cache folder (``$XDG_CACHE_HOME/tracekit``, else ``~/.cache/tracekit``),
named by both versions and written whole or not at all; where the folder cannot be
written the bundle is built each time. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracekit"


def vegalite_version() -> str | None:
    """The Vega-Lite version Altair's specs are written for, as vl-convert names it
    (``6.4``), or None (vl-convert's default) when vl-convert does not have it."""
    import altair as alt
    import vl_convert as vlc

    version = alt.SCHEMA_VERSION.lstrip("v").rsplit(".", 1)[0]  # v6.4.1 -> 6.4
    return version if version in vlc.get_vegalite_versions() else None


def bundle() -> str:
    """The JavaScript of Vega, Vega-Lite and Vega-Embed (``vegaEmbed`` a global), safe to
    put inside a ``<script>`` element."""
    import vl_convert as vlc

    vl_version = vegalite_version()
    path = cache_dir() / f"vega-bundle-vlconvert{getattr(vlc, '__version__', 'unknown')}-vl{vl_version or 'default'}.js"
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    js = vlc.javascript_bundle(vl_version=vl_version).replace("</script", "<\\/script")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(js)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # no cache (read-only home, full disk): built again next time
        pass
    return js


def script_json(text: str) -> str:
    """JSON text made safe inside an HTML ``<script>`` element: every ``<``, ``>`` and ``&``
    as its JSON escape (they occur only inside JSON strings), so that no ``</script>`` ends
    the element and no ``<!--`` turns the parser's script states on (a kernel named
    ``<!--<script>`` kept the rest of the page from running)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_page(spec: dict, title: str = "tracekit chart") -> str:
    """One self-contained HTML page drawing the Vega-Lite ``spec`` (the libraries inlined)."""
    import html

    data = script_json(json.dumps(spec))
    return "\n".join([
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{margin:16px;font-family:system-ui,sans-serif}</style>",
        f"<script>{bundle()}</script>",
        "</head><body>",
        '<div id="vis"></div>',
        f'<script type="application/json" id="spec">{data}</script>',
        "<script>",
        # (the menu saves the chart and shows its source; not "Open in Vega Editor", which would send
        # the spec, kernel names and paths in it, to vega.github.io)
        'vegaEmbed("#vis", JSON.parse(document.getElementById("spec").textContent), {actions: {editor: false}})',
        '  .then(function (res) { window.tracekitChart = {done: true, view: res.view}; })',
        '  .catch(function (err) { window.tracekitChart = {done: true, error: String(err)}; console.error(err); });',
        "</script>",
        "</body></html>",
    ])

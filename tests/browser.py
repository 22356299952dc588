"""Headless Chromium driven over the DevTools protocol on a pipe (no extra packages).

``load(path)`` opens a local HTML file with the network off (offline emulation, a proxy
that goes nowhere, background networking disabled), waits for the page to report that it
is done, and returns what the page said: console errors, uncaught exceptions, requests
that left the machine, the value of a JS expression, and, asked for, PNG screenshots.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class Page:
    console_errors: list[str] = field(default_factory=list)
    console_warnings: list[str] = field(default_factory=list)  # Vega's own: "WARN Conflicting legend ..."
    exceptions: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    value: object = None
    png: bytes = b""  # the full page (load(screenshot=True))
    thumb: bytes = b""  # the full page at 1/8 scale, small enough to read pixel by pixel (likewise)
    crops: list[bytes] = field(default_factory=list)  # the (top, height) regions asked for, full scale


class _Pipe:
    def __init__(self, proc, write_fd, read_fd):
        self.proc, self.w, self.r = proc, write_fd, read_fd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []
        self.profile = ""  # (the browser's user data folder)

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()})")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read_message(deadline))
        except TimeoutError:
            pass


#: the process's browser (``_browser``): one Chromium serves every page, each in a browser
#: context of its own (its own storage and cache), as a fresh browser would
_OPEN: list[_Pipe] = []


def _browser() -> _Pipe:
    """The process's Chromium, started at the first page (and again after one failed),
    closed when the process exits: starting one took a quarter of a page's time."""
    if _OPEN and _OPEN[0].proc.poll() is None:
        return _OPEN[0]
    _close()
    exe = chromium()
    if exe is None:
        raise RuntimeError("no chromium")
    profile = tempfile.mkdtemp(prefix="tk-chromium-")
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    # the child reads commands on fd 3 and writes answers on fd 4 (--remote-debugging-pipe)
    hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
    hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)

    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--remote-debugging-pipe", f"--user-data-dir={profile}", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-quic", "--disable-extensions", "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>", "--allow-file-access-from-files", "about:blank"]
    # fds 3 and 4 are set up by a shell, not by a preexec_fn: that forks this whole process (a
    # test worker of several GB of address space), which the kernel once refused (ENOMEM)
    redirect = f'exec "$0" "$@" 3<&{hi_r} 4>&{hi_w} {hi_r}<&- {hi_w}>&-'
    proc = subprocess.Popen(["bash", "-c", redirect, *args], pass_fds=(hi_r, hi_w),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for fd in (to_child_r, from_child_w, hi_r, hi_w):
        os.close(fd)
    pipe = _Pipe(proc, to_child_w, from_child_r)
    pipe.profile = profile
    _OPEN.append(pipe)
    return pipe


def _close() -> None:
    """Close the process's Chromium, if one runs, and remove its profile."""
    while _OPEN:
        pipe = _OPEN.pop()
        try:
            pipe.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - closing a browser that is already gone
            pass
        try:
            pipe.proc.wait(10)
        except subprocess.TimeoutExpired:
            pipe.proc.kill()
            pipe.proc.wait()
        os.close(pipe.w)
        os.close(pipe.r)
        shutil.rmtree(pipe.profile, ignore_errors=True)


atexit.register(_close)


def load(path: Path, done_js: str, value_js: str, width: int = 1400, timeout: float = 90,
         regions: tuple[tuple[int, int], ...] = (), screenshot: bool = False) -> Page:
    """Open ``path`` offline, wait until ``done_js`` is true, return ``value_js``'s value,
    the console errors, uncaught exceptions and non-local requests; with ``screenshot`` (or
    ``regions``), the page's screenshots too (``Page``: half a second a page, which the pages
    only read through ``value_js`` do without). A page that fails takes its browser with it."""
    pipe = _browser()
    pipe.events.clear()
    page = Page()
    done = False
    try:
        context = pipe.send("Target.createBrowserContext")["browserContextId"]
        target = pipe.send("Target.createTarget", {"url": "about:blank", "browserContextId": context})["targetId"]
        sid = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            pipe.send(method, session=sid)
        pipe.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                       "uploadThroughput": -1}, session=sid)
        pipe.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 1000, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=sid)
        pipe.send("Page.navigate", {"url": path.resolve().as_uri()}, session=sid)
        deadline = time.monotonic() + timeout
        while True:
            r = pipe.send("Runtime.evaluate", {"expression": f"Boolean({done_js})", "returnByValue": True},
                          session=sid)
            if r.get("result", {}).get("value") is True:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path}: the page did not finish ({done_js}) in {timeout} s")
            pipe.drain(0.05)
        r = pipe.send("Runtime.evaluate", {"expression": f"JSON.stringify({value_js})", "returnByValue": True},
                      session=sid)
        page.value = json.loads(r["result"]["value"])
        # the page at its full height, as a screenshot takes it: what its charts say as they
        # fit the new size is collected too
        metrics = pipe.send("Page.getLayoutMetrics", session=sid)
        height = int(min(metrics["cssContentSize"]["height"], 16000))
        pipe.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=sid)
        if screenshot or regions:
            _screenshots(pipe, sid, page, width, height, regions)
        pipe.drain(0.2)
        pipe.send("Target.disposeBrowserContext", {"browserContextId": context})  # (its page closes with it)
        done = True
    finally:
        if not done:
            _close()
    for ev in (e for e in pipe.events if e.get("sessionId") == sid):
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            page.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "warning":
            page.console_warnings.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            page.exceptions.append(d.get("exception", {}).get("description") or d.get("text", "?"))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            page.console_errors.append(params["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(("file:", "data:", "blob:", "about:")):
                page.external_requests.append(url)
    return page


def _screenshots(pipe: _Pipe, sid: str, page: Page, width: int, height: int,
                 regions: tuple[tuple[int, int], ...]) -> None:
    """The page's full-height screenshot (``height``: the page resized to it), its 1/8-scale
    copy and the ``regions`` into ``page``."""
    pipe.drain(0.5)
    shot = pipe.send("Page.captureScreenshot", {"format": "png"}, session=sid)
    page.png = base64.b64decode(shot["data"])
    clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 0.125}
    shot = pipe.send("Page.captureScreenshot", {"format": "png", "clip": clip}, session=sid)
    page.thumb = base64.b64decode(shot["data"])
    for top, h in regions:
        clip = {"x": 0, "y": top, "width": width, "height": h, "scale": 1}
        shot = pipe.send("Page.captureScreenshot", {"format": "png", "clip": clip}, session=sid)
        page.crops.append(base64.b64decode(shot["data"]))


#: a saved chart page's state (charts.save: window.tracekitChart): its error, its data marks'
#: items by mark type (rect, symbol, ...: role "mark", not axes or legends) and the page's height
_CHART_MARKS_JS = """(function () {
  var c = window.tracekitChart, marks = {};
  (function walk(node) {
    if (node.marktype && node.role === "mark" && node.marktype !== "group")
      marks[node.marktype] = (marks[node.marktype] || 0) + (node.items || []).length;
    (node.items || []).forEach(walk);
  })(c.view ? c.view.scenegraph().root : {});
  return {error: c.error || null, marks: marks, height: document.body.scrollHeight};
})()"""


def chart_marks(path: Path) -> Page:
    """A chart page (``charts.save``'s) drawn in Chromium: ``value`` is ``{"error", "marks":
    {mark type: items drawn}, "height"}``, with the console errors and exceptions."""
    return load(path, "window.tracekitChart && window.tracekitChart.done", _CHART_MARKS_JS)


#: the comparison tables (diff, compare, jobs) wider than their section at the page's width,
#: as [section id, table width, room] in CSS px: empty where each fits, its notes wrapping
COMPARISONS_OVERFLOW_JS = """Array.prototype.filter.call(document.querySelectorAll(".scroll"), function (d) {
    return d.querySelector("table.diff") && d.scrollWidth > d.clientWidth; }).map(function (d) {
    return [d.closest("section").id, d.scrollWidth, d.clientWidth]; })"""


def report_drawn(path: Path) -> Page:
    """A report (``tracekit report``'s) drawn in Chromium: ``value`` is ``window.tracekitReport``
    (charts, rendered, failed, marks per chart), with the console errors and exceptions."""
    return load(path, "window.tracekitReport && window.tracekitReport.done", "window.tracekitReport")


def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the RGB(A) rows of an 8-bit PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(png):
        (length,), kind = struct.unpack(">I", png[pos:pos + 4]), png[pos + 4:pos + 8]
        data = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows

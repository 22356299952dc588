"""Fixture workload ``odd_nvtx``: NVTX as real programs misuse it.

Range names with '/', non-ASCII text and an empty name; the same name at several depths;
a 24-deep stack; an extra pop on an empty stack; push ranges and a start/end range never
closed before the program exits; a start/end range closed from another thread; ranges
with and without GPU work; marks; named domains, categories, payloads and colors from
the ``nvtx`` package when present. Also captured with ``-t cuda`` only
(``odd_nvtx_cuda_only``: an export without any NVTX table).
"""

import threading

import torch

try:
    import nvtx
except Exception:  # pragma: no cover
    nvtx = None

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop
dev = torch.device("cuda")
a = torch.randn(256, 256, device=dev)
torch.cuda.synchronize()

pop()  # extra pop on an empty stack
rng("io/read")  # '/' inside a range name
a = a @ a
pop()
rng("注意力 → attention")
a = torch.softmax(a, -1)
pop()
rng("")
a = a + 1
pop()
rng("no_gpu_work")
sum(range(10000))
pop()
rng("deep")
for d in range(24):
    rng("level")
    a = a * 1.0001
for d in range(24):
    pop()
pop()
for i in range(3):  # the same name at depth 0, 1 and 2
    rng("same")
    rng("same")
    rng("same")
    a = a.relu()
    pop()
    pop()
    pop()
torch.cuda.nvtx.mark("plain.mark")

rid = torch.cuda.nvtx.range_start("closed.elsewhere")
t = threading.Thread(target=lambda: torch.cuda.nvtx.range_end(rid))
a = a @ a
t.start()
t.join()

if nvtx is not None:
    dom = nvtx.get_domain("tracekit.odd")
    with nvtx.annotate("domain.range", domain="tracekit.odd", color="red", category="cat1", payload=7):
        a = a @ a
        with nvtx.annotate("domain.inner", domain="tracekit.odd", payload=2.5):
            a = a.relu()
    with nvtx.annotate("default.domain.colored", color="blue"):
        a = a + 2
    nvtx.mark("domain.mark", domain="tracekit.odd", payload=3)
    r = nvtx.start_range("domain.startend", domain="tracekit.odd")
    a = a * 2
    nvtx.end_range(r)

torch.cuda.nvtx.range_start("never.ended")
rng("left.open.outer")
rng("left.open.inner")
a = a @ a
torch.cuda.synchronize()
print("odd_nvtx done", float(a.sum()))

"""Fixture workload ``diff``: one program captured as a noise pair and with planted changes.

A small transformer-like step, ``STEPS`` times, each step an NVTX range ``step`` with
``embed`` / ``attn`` / ``mlp`` inside it:

* ``embed``: host-to-device copy of token ids (pinned), embedding lookup, ``tanh``;
* ``attn``: cuBLAS GEMMs (scores, output) and a softmax;
* ``mlp``: cuBLAS GEMMs, GELU, the Triton kernel ``silu_kernel``, a residual add and a
  device-to-host copy of a few values.

Each of the three ranges ends with a synchronize, as a profiling harness does, so a
range's duration is the GPU time of its work rather than the host's launch time (which
varied by 25-40 % between two otherwise identical captures without it).

Profiled with ``--capture-range=cudaProfilerApi``: warm-up (cuBLAS heuristics, Triton
compilation) runs before ``cudaProfilerStart``, so only the ``STEPS`` steps are captured.

Planted changes, each chosen by a flag (the ``diff_regressed`` fixture uses all three):

* ``--more-launches``: the small conversion of the values read back in ``mlp``
  (``x[:8, :8].float()``, PyTorch's ``elementwise_kernel<128, 4, ...direct_copy...>``)
  runs twice per step instead of once. A small kernel on purpose: a second ``tanh`` over
  the embeddings (32 MB) changed which data the L2 cache held, and made the softmax in
  ``attn`` 22 % faster although nothing in ``attn`` changed;
* ``--new-kernel``: a second Triton kernel, ``attn_bias_kernel``, runs once per step at
  the start of ``attn`` (nowhere else), on a small buffer of its own: it must not warm
  the L2 cache for the kernels after it (run on the attention scores, it made the softmax
  that reads them 40 % faster);
* ``--slower``: ``silu_kernel`` applies its SiLU ``SLOW_REPS`` times per element instead
  of once: the same kernel name and launch configuration, more work per launch.

Runs on CPU too (``--device cpu`` with ``TRITON_INTERPRET=1``, NVTX skipped) to check
the program's logic without a GPU.
"""

import argparse
import contextlib

import torch
import triton
import triton.language as tl

STEPS = 400
SLOW_REPS = 8  # SiLU repetitions per element with --slower (1 otherwise)


@triton.jit
def silu_kernel(x_ptr, out_ptr, n, REPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    for _ in tl.static_range(REPS):  # a dependent chain: each repetition is real work
        x = x * tl.sigmoid(x)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def attn_bias_kernel(bias_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(bias_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, b * scale + 1.0, mask=mask)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--more-launches", action="store_true")
    ap.add_argument("--new-kernel", action="store_true")
    ap.add_argument("--slower", action="store_true")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    vocab, d, seq, batch, hidden = 32768, 1024, 1024, 16, 4096
    if not cuda:  # the logic only, at a size the interpreter runs in seconds
        vocab, d, seq, batch, hidden = 512, 64, 32, 2, 128

    @contextlib.contextmanager
    def rng(name, sync=False):
        if cuda:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if cuda:
                if sync:
                    torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()

    g = torch.Generator().manual_seed(0)
    emb = torch.randn(vocab, d, generator=g).to(dev, dtype)
    wq, wk, wv, wo = (torch.randn(d, d, generator=g).mul_(d ** -0.5).to(dev, dtype) for _ in range(4))
    w1 = torch.randn(d, hidden, generator=g).mul_(d ** -0.5).to(dev, dtype)
    w2 = torch.randn(hidden, d, generator=g).mul_(hidden ** -0.5).to(dev, dtype)
    bias = torch.randn(seq, generator=g).to(dev, torch.float32)
    bias_out = torch.empty_like(bias)
    ids_host = torch.randint(0, vocab, (args.steps + 1, batch * seq), generator=g)
    if cuda:
        ids_host = ids_host.pin_memory()
    reps = SLOW_REPS if args.slower else 1

    def step(i: int) -> torch.Tensor:
        with rng("step"):
            with rng("embed", sync=True):
                ids = ids_host[i].to(dev, non_blocking=True)
                x = torch.tanh(emb[ids])
            with rng("attn", sync=True):
                if args.new_kernel:
                    attn_bias_kernel[(triton.cdiv(seq, 1024),)](bias, bias_out, seq, 0.5, BLOCK=1024)
                xb = x.view(batch, seq, d)
                q, k, v = xb @ wq, xb @ wk, xb @ wv
                s = (q @ k.transpose(1, 2)).float()
                p = torch.softmax(s, dim=-1).to(dtype)
                x = x + (p @ v).view(batch * seq, d) @ wo
            with rng("mlp", sync=True):
                h = torch.nn.functional.gelu(x @ w1)
                h2 = torch.empty_like(h)
                n = h.numel()
                silu_kernel[(triton.cdiv(n, 1024),)](h, h2, n, REPS=reps, BLOCK=1024)
                x = x + h2 @ w2
                out = x[:8, :8].float()
                if args.more_launches:  # a redundant second conversion: the same small kernel again
                    out = x[:8, :8].float()
                out = out.cpu()
        return out

    step(args.steps)  # warm-up: compiles the Triton kernels, picks the cuBLAS kernels
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    for i in range(args.steps):
        out = step(i)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    flags = [f for f in ("more_launches", "new_kernel", "slower") if getattr(args, f)]
    print("diff done", args.steps, "steps", "plants:", ",".join(flags) or "none", float(out.sum()))


if __name__ == "__main__":
    main()

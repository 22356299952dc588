"""Fixture workload ``jax``: a JAX program (XLA through the CUDA driver API), one process, every GPU.

What the other fixtures lack: no CUDA runtime API from the program itself (XLA launches
through the driver API: cuLaunchKernel, cuMemcpy*Async, cuStreamWaitEvent, cuEventRecord...),
XLA's fused kernels (loop_*_fusion, input_reduce_fusion...) and its cuBLAS GEMMs, and one
process driving every visible GPU: a training step jit'ed over a mesh of the devices (2 on a
2-GPU machine), the batch sharded across them and the parameters replicated, so XLA
all-reduces the gradients (its collectives, NCCL where there are two).

STEPS steps, each an NVTX range ``step`` (through torch.cuda.nvtx, whose NVTX calls need no
CUDA context from torch) holding ``transfer`` (device_put of a new batch), ``train``, ``scan``
(a jit'ed lax.scan: a loop run on the GPU) and ``transfer`` again (the loss to the host).
All steps sit in one range ``steps``, which starts and ends the capture
(``--capture-range=nvtx --nvtx-capture=steps``: compilation, with its subprocesses, and
XLA's own NVTX ranges of it stay out; a first capture of the whole program made nsys's import
fail part-way, see tests/data/nsys_jax/README.md). XLA's autotuning is off and its allocator
does not preallocate.
"""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("XLA_FLAGS", "--xla_gpu_autotune_level=0")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402  (its NVTX bindings only)
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

STEPS = 6
rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop
devices = jax.local_devices()
n = len(devices)
mesh = Mesh(np.array(devices), ("d",))
replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("d"))


def loss_fn(p, x, y):
    h = jax.nn.gelu(x @ p["w1"])
    return jnp.mean((h @ p["w2"] - y) ** 2)


@jax.jit
def train(p, x, y):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g), loss


@jax.jit
def scan_fn(v):
    def body(c, _):
        c = jnp.tanh(c @ c.T * 1e-3) + c
        return c, jnp.sum(c)
    return jax.lax.scan(body, v, None, length=8)


k1, k2 = jax.random.split(jax.random.PRNGKey(0))
params = jax.device_put({"w1": jax.random.normal(k1, (512, 2048)) * 0.02,
                         "w2": jax.random.normal(k2, (2048, 512)) * 0.02}, replicated)
r = np.random.default_rng(0)


def batch():
    return (jax.device_put(r.standard_normal((n * 128, 512), dtype=np.float32), sharded),
            jax.device_put(r.standard_normal((n * 128, 512), dtype=np.float32), sharded))


v = jnp.ones((256, 256))
x, y = batch()
params, loss = train(params, x, y)  # compile outside the steps
scan_fn(v)[0].block_until_ready()

rng("steps")  # (the range that starts the capture)
for _ in range(STEPS):
    rng("step")
    rng("transfer")
    x, y = batch()
    pop()
    rng("train")
    params, loss = train(params, x, y)
    pop()
    rng("scan")
    v, sums = scan_fn(v)
    pop()
    rng("transfer")
    host_loss = float(jax.device_get(loss))
    pop()
    pop()
jax.block_until_ready(v)
pop()
print(f"jax done on {n} device(s): loss {host_loss:.4f}, scan {float(sums[-1]):.1f}")

"""Launching a Triton kernel through its compiled handle, past the JIT's per-call dispatch.

Triton's ``kernel[grid](...)`` binds and specialises every argument, looks the compiled
kernel up and launches it: tens of microseconds of host time per call for a kernel of ~50
arguments, which a small attention call (GPU time ~50 µs) cannot hide. ``launch`` keeps the
compiled kernel per specialisation key and launches it directly on later calls; the first
call of a key goes through the JIT (compiling it if needed)."""

from __future__ import annotations


def spec(x) -> tuple:
    """What Triton specialises a kernel on for one argument (its cache key): a tensor's dtype
    and 16-byte alignment; an int's width, whether it is 1 and whether 16 divides it; a
    float is passed as fp32 whatever its value."""
    t = type(x)  # exact types: this runs for every argument of every launch
    if t is int:
        return (-(2**31) <= x < 2**31, x == 1, x % 16 == 0)
    if t is float:
        return _FP32
    if t is bool:
        return ("i1", x)
    return (x.dtype, x.data_ptr() % 16 == 0)  # a tensor; anything else: AttributeError, the JIT


_FP32 = ("fp32",)


def _signature_ok(kernel, n_args: int, consts: dict) -> bool:
    """Whether ``args`` then ``consts`` (in this order) are the kernel's parameters in order:
    the compiled handle takes them positionally."""
    params = getattr(kernel, "params", None)
    if params is None:
        return False
    plain = [p for p in params if not p.is_constexpr]
    const = [p.name for p in params if p.is_constexpr]
    return len(plain) == n_args and const == list(consts) and params[n_args:] == [p for p in params if p.is_constexpr]


def launch(kernel, handles: dict, grid: tuple, args: tuple, consts: dict, options: dict, device):
    """``kernel[grid](*args, **consts, **options)``, through the compiled handle when this
    specialisation (device, constants, options, argument specs) was launched before.

    ``args`` are the kernel's non-constexpr parameters in order and ``consts`` its constexpr
    ones in order (checked once per key; if they are not, every call goes through the JIT).
    Only CUDA launches are kept (not the interpreter's). Returns the compiled kernel."""
    try:
        key = (device.index, tuple(consts.values()), tuple(sorted(options.items())), tuple(spec(a) for a in args))
    except AttributeError:  # an argument of a kind spec does not know: the JIT handles it
        return kernel[grid](*args, **consts, **options)
    compiled = handles.get(key)
    if compiled is not None:
        compiled[tuple(grid) + (1,) * (3 - len(grid))](*args, *consts.values())
        return compiled
    compiled = kernel[grid](*args, **consts, **options)
    if (compiled is not None and hasattr(compiled, "run") and device.type == "cuda"
            and _signature_ok(kernel, len(args), consts)):
        handles[key] = compiled
    return compiled


def cdiv(a: int, b: int) -> int:
    """``triton.cdiv`` for host ints: that one is a JIT function, a few microseconds a call."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """``triton.next_power_of_2`` for host ints (n >= 0), without its JIT-call overhead."""
    return 1 << (n - 1).bit_length() if n > 0 else 0

"""Triton's interpreter (TRITON_INTERPRET=1) without its rescans of triton.language.

At every call of a ``@triton.jit`` helper from a kernel the interpreter patches the
language again (``interpreter._patch_lang``): ``_patch_builtin`` lists every member of
``tl``, ``tl.tensor``, ``tl.math`` and the tensor descriptor with ``inspect.getmembers``
to find the Triton builtins among them and wrap them, though after the launch's own patch
none is left to wrap. The kernels call helpers in every tile, so those scans are much of
the kernel tests' time (docs/performance.md, eighty-sixth session). Here the names of a
package's builtins are listed at its first scan and looked up by name after: the same
members are wrapped, in the same order, at every call (a package gains no builtin while
the tests run)."""

from __future__ import annotations

import inspect


def without_rescans() -> None:
    """Replace ``triton.runtime.interpreter._patch_builtin`` as the module's docstring says
    (once a process; left as it is where this Triton's interpreter has no such function)."""
    import triton.language as tl
    from triton.runtime import interpreter

    scan = getattr(interpreter, "_patch_builtin", None)
    if scan is None or getattr(scan, "_names", None) is not None:
        return
    names: dict[object, list[str]] = {}  # package (a module or class) -> its builtins' names

    def patch_builtin(pkg, builder, scope) -> None:
        if pkg not in names:
            names[pkg] = [n for n, m in inspect.getmembers(pkg) if tl.core.is_builtin(m)]
        for name in names[pkg]:
            member = getattr(pkg, name)
            if tl.core.is_builtin(member):
                interpreter._patch_attr(pkg, name, member, builder, scope)

    patch_builtin._names = names
    interpreter._patch_builtin = patch_builtin

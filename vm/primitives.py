"""The compiled kernels of an executable's primitives, and what a kernel's failure means.

Runtime layer (``vm``); imports ``vm.errors``, and numba (through ``vm.prebuild`` and
``vm.shape_funcs``) only when kernels are loaded, never ``compiler``. The interpreter, the
straight-line tier and the ahead-of-time executor all call kernels loaded here.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vm.errors import VMError

__all__ = ["interruption_of", "kernel_descriptions", "load_kernels"]

#: One call's arguments of each primitive's kernel, by primitive index (inputs then
#: outputs, ``(shape, dtype)`` each): :func:`vm.aot.kernel_examples`.
Examples = Mapping[int, Sequence[tuple[tuple[int, ...], str]]]


def kernel_descriptions(
    exe: Any, examples: Callable[[], Examples] | None = None
) -> tuple[list[Any], Callable[[], list[Any]]]:
    """The descriptions of the numba kernels of ``exe``'s primitives (shape functions run
    in Python and are left out), and a callable that gives, aligned with them, what
    ``examples`` gives for their primitives (None where it gives nothing), as
    :func:`vm.prebuild.build_in_processes` takes them."""
    from vm.shape_funcs import is_shape_func  # deferred: numba, until kernels are loaded

    kernels_at = [i for i, p in enumerate(exe.primitives) if not is_shape_func(p.description)]

    def aligned() -> list[Any]:
        known = examples() if examples is not None else {}
        return [known.get(i) for i in kernels_at]

    return [exe.primitives[i].description for i in kernels_at], aligned


def load_kernels(exe: Any, examples: Callable[[], Examples] | None = None) -> list[Any]:
    """The compiled kernel of every primitive of ``exe``, in primitive-index order.

    ``examples`` returns, by primitive index, the arguments of one call of the primitive's
    kernel (:func:`vm.aot.kernel_examples`); it is called only if builder processes start,
    which then run each kernel they build once on zeros of those shapes.

    Raises
    ------
    vm.VMError
        If a kernel cannot be built (naming the primitive).
    """
    if not exe.primitives:
        return []
    # Imported here so that ``import vm`` does not import numba; shape functions run in
    # Python (vm.shape_funcs), everything else is a numba kernel.
    from vm.prebuild import build_in_processes  # deferred: numba, until kernels are loaded
    from vm.shape_funcs import load_primitive  # deferred: numba, as above

    # The kernels no process built before compile in builder processes first (one per
    # CPU); the loop below then loads them from the disk cache, and reports any error.
    # An invalid description raises here too: the loop then names its primitive.
    with contextlib.suppress(Exception):
        descriptions, aligned = kernel_descriptions(exe, examples)
        build_in_processes(descriptions, examples=aligned)
    kernels = []
    for index, primitive in enumerate(exe.primitives):
        try:
            kernels.append(load_primitive(primitive.description))
        except Exception as err:
            raise VMError(
                f"cannot build the kernel of primitive {index} ({primitive.name}): "
                f"{type(err).__name__}: {err}"
            ) from err
    return kernels


def interruption_of(error: Exception) -> BaseException | None:
    """What interrupted a kernel, if ``error`` is the stand-in compiled code raises when a
    kernel's call into Python was interrupted (Ctrl-C's KeyboardInterrupt): that is to be
    raised instead, and the call not run again."""
    bridge = sys.modules.get("vm.kernels.runtime.bridge")
    if bridge is not None and isinstance(error, bridge.Interrupted):
        return bridge.interruption()
    return None

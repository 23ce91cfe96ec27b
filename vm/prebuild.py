"""Build a set of kernels ahead of first use, telling a callback how far along it is.

Runtime layer (``vm``); imports numba through :mod:`vm.kernels.library`. It sits beside
the kernel library rather than in it: generated kernels never reach it, so it is no part
of their cache key.

A virtual machine builds its kernels (compiles them, or loads their machine code from the
disk cache) when it is made, which takes seconds per kernel on a cold cache. Calling
:func:`build_kernels` first does the same work with a progress hook, and the machine then
finds every kernel in the in-process table. The hook is a plain callback: this layer never
prints; the command line (:mod:`vm.cli`) turns the callback into a bar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from vm.kernels.description import parse_description
from vm.kernels.library import CompiledKernel, kernel_key, load_kernel

#: ``progress(done, total)``: ``done`` kernels of ``total`` are built.
ProgressHook = Callable[[int, int], None]


def build_kernels(
    descriptions: Iterable[object], progress: ProgressHook | None = None
) -> list[CompiledKernel]:
    """Build (compile or load from the disk cache) the kernel of every description.

    Parameters
    ----------
    descriptions : iterable of kernel descriptions
        The ``description`` of each primitive to build (shape functions excluded: they
        are not numba kernels). Descriptions of the same kernel are built once.
    progress : callable, optional
        Called as ``progress(0, total)`` before the first build and as
        ``progress(done, total)`` after each distinct kernel, where ``total`` is the number
        of distinct kernels. Kernels already in this process count, and report at once.

    Returns
    -------
    list of CompiledKernel
        One per distinct kernel, in the order the descriptions first name it.

    Raises
    ------
    KernelDescriptionError
        If a description is invalid (checked for all before any is built).
    KernelBuildError
        If a valid description fails to compile.
    """
    distinct: dict[str, object] = {}
    for description in descriptions:
        distinct.setdefault(kernel_key(parse_description(description)), description)
    total = len(distinct)
    if progress is not None:
        progress(0, total)
    kernels = []
    for done, description in enumerate(distinct.values(), start=1):
        kernels.append(load_kernel(description))
        if progress is not None:
            progress(done, total)
    return kernels

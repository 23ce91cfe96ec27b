"""The VM's kernel library: numba kernels built from structured primitive descriptions.

Runtime layer (``vm.kernels``); imports numpy and numba, never ``compiler``.

A primitive in an executable is a plain-data *description* (format in :mod:`vm.program`).
:func:`check_description` validates one without compiling; :func:`load_kernel` returns
its :class:`CompiledKernel`, generating a numba module on first use and caching the
machine code on disk (:func:`cache_dir`) so later processes load it without compiling.
Kernels use destination-passing style: call ``kernel.entry(*inputs, *outputs)`` with
outputs the caller allocated.

The package has two halves. The generator lives here: descriptions
(:mod:`~vm.kernels.description`), the operator table and its rules (:mod:`~vm.kernels.table`,
:mod:`~vm.kernels.rules`, the ``emit_*`` modules), the source builder and code generator
(:mod:`~vm.kernels.source`, :mod:`~vm.kernels.codegen`), and the cache and loader
(:mod:`~vm.kernels.cache`, :mod:`~vm.kernels.library`). What generated kernels call while
they run lives in :mod:`vm.kernels.runtime`.

Kernels are compiled without numba's ``parallel=True``: big matrix products, convolutions
and pools are split between the calling thread and a small pool of worker threads of
their own (:mod:`vm.kernels.runtime.threads`; ``RELAYVM_NUM_THREADS`` sets the count), so
any number of virtual machines may run kernels from any number of threads.
"""

from vm import vector_width

# First, before the imports below import numba: it reads its target once.
vector_width.prefer_full_width()

from vm.kernels.cache import cache_dir  # noqa: E402
from vm.kernels.description import KernelDescriptionError, check_description  # noqa: E402
from vm.kernels.library import CompiledKernel, KernelBuildError, load_kernel  # noqa: E402
from vm.kernels.table import supported_ops  # noqa: E402

__all__ = [
    "CompiledKernel",
    "KernelBuildError",
    "KernelDescriptionError",
    "cache_dir",
    "check_description",
    "load_kernel",
    "supported_ops",
]

"""What compiled kernel code depends on: the kernel library's source, hashed.

Runtime layer (``vm.kernels``); standard library only, so that the cache machinery can
import it before any module with compiled functions.

numba checks a cached function against its own file's modification time, not against the
functions it calls, and a fresh clone gives every file a new time. The library's cached
code is therefore keyed by one hash over every module generated kernels can reach: a
change anywhere in the library invalidates all of it, and an unchanged library is found
again from any checkout or installation on the machine.
"""

from __future__ import annotations

import hashlib
import pathlib

#: The modules whose source determines what a generated kernel does.
LIBRARY_MODULES = (
    "atomics.py",
    "blas.py",
    "bridge.py",
    "callbacks.py",
    "codegen.py",
    "conv_loops.py",
    "depthwise.py",
    "description.py",
    "dtypes.py",
    "emit_activation.py",
    "emit_conv.py",
    "emit_elementwise.py",
    "emit_index.py",
    "emit_layout.py",
    "emit_nn.py",
    "emit_norm.py",
    "emit_pool.py",
    "emit_reduce.py",
    "emit_spatial.py",
    "emit_vision.py",
    "fingerprint.py",
    "gemm.py",
    "helpers.py",
    "jobs.py",
    "newshape.py",
    "openblas.py",
    "packed.py",
    "panels.py",
    "pointwise.py",
    "pool_loops.py",
    "rules.py",
    "shape_rules.py",
    "source.py",
    "spin.py",
    "table.py",
    "target.py",
    "threads.py",
    "vecmath.py",
    "windows.py",
    "winograd.py",
)

_LIBRARY_HASH: str | None = None


def library_hash() -> str:
    """sha256 over the kernel library's source files (helpers and emitters).

    An installation without the ``.py`` files (bytecode only) hashes the package version
    instead, which changes whenever the installed library does.
    """
    global _LIBRARY_HASH
    if _LIBRARY_HASH is None:
        digest = hashlib.sha256()
        here = pathlib.Path(__file__).resolve().parent
        try:
            for name in LIBRARY_MODULES:
                digest.update(name.encode())
                digest.update((here / name).read_bytes())
        except OSError:
            from importlib import metadata

            try:
                version = metadata.version("relayvm")
            except metadata.PackageNotFoundError:
                version = "unknown"
            digest = hashlib.sha256(f"relayvm {version}".encode())
        _LIBRARY_HASH = digest.hexdigest()
    return _LIBRARY_HASH

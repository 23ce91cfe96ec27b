"""What compiled kernel code depends on: the kernel library's source, hashed.

Runtime layer, kernel generator (``vm.kernels``); standard library only, so that the cache machinery
can import it before any module with compiled functions.

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
    "codegen.py",
    "description.py",
    "dtypes.py",
    "emit_activation.py",
    "emit_conv.py",
    "emit_elementwise.py",
    "emit_image.py",
    "emit_index.py",
    "emit_layout.py",
    "emit_nn.py",
    "emit_norm.py",
    "emit_pool.py",
    "emit_reduce.py",
    "emit_spatial.py",
    "emit_vision.py",
    "fingerprint.py",
    "newshape.py",
    "rules.py",
    "runtime/atomics.py",
    "runtime/bridge.py",
    "runtime/callbacks.py",
    "runtime/conv_jobs.py",
    "runtime/conv_loops.py",
    "runtime/convolution.py",
    "runtime/depthwise.py",
    "runtime/helpers.py",
    "runtime/jobs.py",
    "runtime/openblas.py",
    "runtime/packed.py",
    "runtime/panels.py",
    "runtime/pointwise.py",
    "runtime/pool_loops.py",
    "runtime/products.py",
    "runtime/resample.py",
    "runtime/rows.py",
    "runtime/spin.py",
    "runtime/symbols.py",
    "runtime/taps.py",
    "runtime/target.py",
    "runtime/threads.py",
    "runtime/transpose.py",
    "runtime/vecmath.py",
    "runtime/vector_ir.py",
    "runtime/winograd.py",
    "runtime/window_rows.py",
    "shape_rules.py",
    "source.py",
    "table.py",
    "windows.py",
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

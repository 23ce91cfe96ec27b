"""The element types relayvm knows: the one list every layer reads.

Lowest layer (``serialization``); standard library only.

A file may hold arrays of these dtypes (:mod:`serialization.ndarray`), a kernel description
may use them (:mod:`vm.kernels.dtypes`) and the compiler's types accept them
(:mod:`compiler.ir.types`); each of those reads this tuple instead of keeping its own.
"""

from __future__ import annotations

#: Every dtype, by its numpy name, in a fixed order (messages list them in this order).
DTYPE_NAMES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)

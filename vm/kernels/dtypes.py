"""Dtype tables for the kernel library: which dtypes kernels accept and how numba sees them.

Runtime layer, kernel generator (``vm.kernels``); standard library and the dtype list of
``serialization``.

Every tensor has a *storage* type (the element type of the numba array the kernel is
given) and a *compute* type (the scalar type arithmetic happens in). They are the same
except for ``float16``: numba cannot load, store or compute ``float16`` on the CPU, so a
``float16`` array is passed as its ``uint16`` bit pattern, decoded to ``float32`` for
arithmetic and rounded back to ``float16`` after every operator (which is what numpy
does for ``float16`` too).
"""

from __future__ import annotations

from serialization.dtypes import DTYPE_NAMES

#: Every dtype a kernel description may use, by its numpy name (all the dtypes there are).
DTYPES: tuple[str, ...] = DTYPE_NAMES

FLOATS = frozenset({"float16", "float32", "float64"})
SIGNED = frozenset({"int8", "int16", "int32", "int64"})
UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64"})
INTS = SIGNED | UNSIGNED
NUMERIC = FLOATS | INTS

#: The largest rank a kernel accepts (numpy's own limit is 64; TVM and the loader use 32).
MAX_NDIM = 32

_BITS = {
    "int8": 8,
    "int16": 16,
    "int32": 32,
    "int64": 64,
    "uint8": 8,
    "uint16": 16,
    "uint32": 32,
    "uint64": 64,
}


def kind(dtype: str) -> str:
    """``"float"``, ``"int"`` (signed or unsigned) or ``"bool"``."""
    if dtype in FLOATS:
        return "float"
    if dtype == "bool":
        return "bool"
    return "int"


def storage(dtype: str) -> str:
    """The numpy name of the element type numba stores ``dtype`` as."""
    return "uint16" if dtype == "float16" else dtype


def compute(dtype: str) -> str:
    """The numpy name of the scalar type arithmetic on ``dtype`` happens in."""
    return "float32" if dtype == "float16" else dtype


def numba_type(dtype: str) -> str:
    """The ``numba.types`` attribute naming ``dtype``'s storage type, e.g. ``types.int8``."""
    name = storage(dtype)
    return "types.boolean" if name == "bool" else f"types.{name}"


def np_type(dtype: str) -> str:
    """The numpy scalar type (as source text) of ``dtype``'s compute type, e.g. ``np.float32``."""
    name = compute(dtype)
    return "np.bool_" if name == "bool" else f"np.{name}"


def np_storage_type(dtype: str) -> str:
    """The numpy scalar type (as source text) of ``dtype``'s storage type."""
    name = storage(dtype)
    return "np.bool_" if name == "bool" else f"np.{name}"


def int_range(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of integer ``dtype``."""
    bits = _BITS[dtype]
    if dtype in UNSIGNED:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1

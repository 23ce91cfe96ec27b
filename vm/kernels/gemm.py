"""Matrix products called straight from compiled kernels: numpy's OpenBLAS ``gemm``, no GIL.

Runtime layer (``vm.kernels``); imports numpy, numba, llvmlite and ctypes.

:mod:`vm.kernels.bridge` reaches numpy from compiled code through a ctypes callback, which
takes the GIL and builds arrays in Python: about 25 us a call, as long as the whole
product for a one-row ``dense`` (an MLP at batch 1). Products too small to be split
between threads therefore call ``cblas_sgemm``/``cblas_dgemm`` of numpy's own OpenBLAS
directly. The functions are registered with LLVM under fixed symbols
(``relayvm_sgemm``, ``relayvm_dgemm``, ``relayvm_blas_threads``), so kernels loaded from
numba's disk cache link to them by name in every process, whatever address the library
got. Each call runs OpenBLAS on the calling thread only (its thread-local thread count is
set to 1 and restored), as :mod:`vm.kernels.threads` explains.

numpy 2's wheels ship OpenBLAS with 64-bit integers under ``scipy_``-prefixed names; the
symbols are declared with 64-bit integers to match. Where numpy uses another BLAS, or an
OpenBLAS with 32-bit integers, the symbols are Python callbacks doing the product with
numpy (correct, with the callback's cost).
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import binding
from numba import njit, types

from vm.kernels import threads

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112

#: (single, double) precision gemm names of a 64-bit-integer OpenBLAS, most specific first.
_ILP64_NAMES = (
    ("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"),
    ("cblas_sgemm64_", "cblas_dgemm64_"),
)


def _signature(real: type) -> tuple:
    # order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc
    i32, i64 = ctypes.c_int, ctypes.c_int64
    return (None, i32, i32, i32, i64, i64, i64, real, i64, i64, i64, i64, real, i64, i64)


def _view(address: int, rows: int, cols: int, ld: int, dtype: np.dtype) -> np.ndarray:
    if rows == 0 or cols == 0:
        return np.zeros((rows, cols), dtype)
    count = (rows - 1) * ld + cols
    buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    flat = np.frombuffer(buffer, dtype, count)
    return np.lib.stride_tricks.as_strided(
        flat, (rows, cols), (ld * dtype.itemsize, dtype.itemsize)
    )


def _numpy_gemm(dtype: np.dtype):
    """A cblas gemm (row-major only) computed by numpy, for when OpenBLAS is not at hand."""

    def gemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        x = _view(a, k, m, lda, dtype).T if trans_a == _TRANS else _view(a, m, k, lda, dtype)
        y = _view(b, n, k, ldb, dtype).T if trans_b == _TRANS else _view(b, k, n, ldb, dtype)
        out = _view(c, m, n, ldc, dtype)
        product = alpha * np.matmul(x, y)
        out[...] = product if beta == 0 else product + beta * out

    return gemm


def _resolve() -> dict[str, int]:
    """Addresses for the three symbols: OpenBLAS's functions, or Python fallbacks."""
    library = threads.openblas()
    if library is not None:
        for single, double in _ILP64_NAMES:
            try:
                sgemm, dgemm = getattr(library, single), getattr(library, double)
                local = library.openblas_set_num_threads_local
            except AttributeError:
                continue
            return {
                "relayvm_sgemm": ctypes.cast(sgemm, ctypes.c_void_p).value,
                "relayvm_dgemm": ctypes.cast(dgemm, ctypes.c_void_p).value,
                "relayvm_blas_threads": ctypes.cast(local, ctypes.c_void_p).value,
            }
    for name, real, dtype in (
        ("relayvm_sgemm", ctypes.c_float, np.dtype(np.float32)),
        ("relayvm_dgemm", ctypes.c_double, np.dtype(np.float64)),
    ):
        _FALLBACKS[name] = ctypes.CFUNCTYPE(*_signature(real))(_numpy_gemm(dtype))
    _FALLBACKS["relayvm_blas_threads"] = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda n: 1)
    return {name: ctypes.cast(f, ctypes.c_void_p).value for name, f in _FALLBACKS.items()}


#: The Python fallbacks, kept alive for as long as compiled code may call them.
_FALLBACKS: dict[str, object] = {}
for _name, _address in _resolve().items():
    binding.add_symbol(_name, _address)
#: True when products run in OpenBLAS without the GIL.
DIRECT = not _FALLBACKS


def _gemm_type(real: types.Float) -> types.ExternalFunction:
    i32, i64 = types.int32, types.int64
    return types.void(i32, i32, i32, i64, i64, i64, real, i64, i64, i64, i64, real, i64, i64)


_sgemm = types.ExternalFunction("relayvm_sgemm", _gemm_type(types.float32))
_dgemm = types.ExternalFunction("relayvm_dgemm", _gemm_type(types.float64))
_blas_threads = types.ExternalFunction("relayvm_blas_threads", types.int32(types.int32))


@njit(nogil=True)
def fits(a):
    """Whether BLAS can read 2-D ``a`` in place: its elements are contiguous along rows."""
    return a.shape[1] <= 1 or a.strides[1] == a.itemsize


@njit(nogil=True)
def _leading(a):
    # A single row may carry any stride; BLAS only asks that it cover the row.
    if a.shape[0] > 1:
        return a.strides[0] // a.itemsize
    return max(a.shape[1], 1)


@njit(nogil=True)
def gemm(a, b, out, trans_a, trans_b):
    """``out[...] = op(a) @ op(b)`` for 2-D float32 or float64 arrays that :func:`fits`,
    ``op`` swapping the axes when asked; on the calling thread, without the GIL."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    ta = _TRANS if trans_a else _NO_TRANS
    tb = _TRANS if trans_b else _NO_TRANS
    lda, ldb, ldc = _leading(a), _leading(b), _leading(out)
    pa, pb, pc = a.ctypes.data, b.ctypes.data, out.ctypes.data
    previous = _blas_threads(1)
    if out.itemsize == 4:
        one, zero = np.float32(1.0), np.float32(0.0)
        _sgemm(_ROW_MAJOR, ta, tb, m, n, k, one, pa, lda, pb, ldb, zero, pc, ldc)
    else:
        _dgemm(_ROW_MAJOR, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, ldc)
    _blas_threads(previous)

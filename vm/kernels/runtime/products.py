"""Matrix products: numpy's OpenBLAS ``gemm`` called straight from compiled code, products by
weights packed in register-tile panels, and the entry points generated kernels call for
``nn.dense``, ``nn.matmul``, ``nn.batch_matmul`` and the packed dense.

Runtime layer (``vm.kernels.runtime``); imports numpy, numba, llvmlite, ctypes and the
runtime modules :mod:`~vm.kernels.runtime.jobs`, :mod:`~vm.kernels.runtime.packed`,
:mod:`~vm.kernels.runtime.callbacks` and :mod:`~vm.kernels.runtime.threads`.

:mod:`vm.kernels.runtime.bridge` reaches numpy from compiled code through a ctypes
callback, which takes the GIL and builds arrays in Python: about 25 us a call, as long as
the whole product for a one-row ``dense`` (an MLP at batch 1). Kernels therefore call
``cblas_sgemm``/``cblas_dgemm`` of numpy's own OpenBLAS directly. The functions are
registered with LLVM under fixed symbols (:mod:`vm.kernels.runtime.symbols`), so kernels
loaded from numba's disk cache link to them by name in every process, whatever address
they got. OpenBLAS runs on the calling thread only (its thread-local thread count is set
to 1 and restored), as :mod:`vm.kernels.runtime.threads` explains.

Splitting between threads. A product of at least :data:`PARALLEL_FLOPS` multiply-adds is
cut as :func:`partition` says and shared with the polling workers through the slot of
:mod:`vm.kernels.runtime.jobs`, without the GIL on either side; a stack of products
(:func:`batched`) shares its items the same way. That is the only way a product is split:
Python callers (:func:`product`) reach the same compiled code. The cuts follow the
product's shape, never the thread count, so results do not depend on who computes what.

numpy 2's wheels ship OpenBLAS with 64-bit integers under ``scipy_``-prefixed names; the
symbols are declared with 64-bit integers to match. Where numpy uses another BLAS, or an
OpenBLAS with 32-bit integers, the symbols are Python callbacks doing the product with
numpy (correct, with the callback's cost).
"""

from __future__ import annotations

import ctypes

import numpy as np
from numba import carray, njit, types
from numba.extending import register_jitable

from vm.kernels.runtime import callbacks, jobs, packed, symbols, threads, transpose
from vm.kernels.runtime.openblas import openblas
from vm.kernels.runtime.packed import floats, int64s

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
    library = openblas()
    if library is not None:
        for single, double in _ILP64_NAMES:
            try:
                sgemm, dgemm = getattr(library, single), getattr(library, double)
                local = library.openblas_set_num_threads_local
            except AttributeError:
                continue
            return {
                symbols.SGEMM: ctypes.cast(sgemm, ctypes.c_void_p).value,
                symbols.DGEMM: ctypes.cast(dgemm, ctypes.c_void_p).value,
                symbols.BLAS_THREADS: ctypes.cast(local, ctypes.c_void_p).value,
            }
    for name, real, dtype in (
        (symbols.SGEMM, ctypes.c_float, np.dtype(np.float32)),
        (symbols.DGEMM, ctypes.c_double, np.dtype(np.float64)),
    ):
        _FALLBACKS[name] = ctypes.CFUNCTYPE(*_signature(real))(_numpy_gemm(dtype))
    _FALLBACKS[symbols.BLAS_THREADS] = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda n: 1)
    return {name: ctypes.cast(f, ctypes.c_void_p).value for name, f in _FALLBACKS.items()}


#: The Python fallbacks, kept alive for as long as compiled code may call them.
_FALLBACKS: dict[str, object] = {}
for _name, _address in _resolve().items():
    symbols.export(_name, _address)


def _gemm_type(real: types.Float) -> types.ExternalFunction:
    i32, i64 = types.int32, types.int64
    return types.void(i32, i32, i32, i64, i64, i64, real, i64, i64, i64, i64, real, i64, i64)


_sgemm = types.ExternalFunction(symbols.SGEMM, _gemm_type(types.float32))
_dgemm = types.ExternalFunction(symbols.DGEMM, _gemm_type(types.float64))
_blas_threads = types.ExternalFunction(symbols.BLAS_THREADS, types.int32(types.int32))


@njit(nogil=True)
def fits(a):
    """Whether BLAS can read 2-D ``a`` in place: its elements are contiguous along rows."""
    return a.shape[1] <= 1 or a.strides[1] == a.itemsize


@njit(nogil=True)
def leading(a):
    """The row stride of 2-D ``a`` in elements, as BLAS takes it: a single row may carry
    any stride; BLAS only asks that it cover the row."""
    if a.shape[0] > 1:
        return a.strides[0] // a.itemsize
    return max(a.shape[1], 1)


# --- jobs shared with the worker threads, without the GIL (vm.kernels.runtime.jobs) ------------

#: Multiply-adds from which a product is shared with polling workers (about 2 us on one core).
#: Small as that is, handing half to a polling worker pays: a one-row product by a
#: 512x128 weight (an LSTM gate step) streams 256 KiB of weights, at L2 bandwidth about
#: 3 us on one core, and each core streams half of it, 4.1 -> 2.9-3.2 us with the handoff.
PARALLEL_FLOPS = 1 << 15

# The words of a product job in the slot (see _shared):
_A, _B, _C, _M, _N, _K, _LDA, _LDB, _LDC, _TA, _TB, _ITEMSIZE, _ROWS = range(
    jobs.FIRST_ARGUMENT, jobs.FIRST_ARGUMENT + 13
)
_A_COLS, _C_COLS, _ROWS_OUTER, _POST = range(jobs.FIRST_ARGUMENT + 13, jobs.FIRST_ARGUMENT + 17)


@njit(nogil=True)
def _raw(itemsize, ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc):
    if itemsize == 4:
        one, zero = np.float32(1.0), np.float32(0.0)
        _sgemm(_ROW_MAJOR, ta, tb, m, n, k, one, pa, lda, pb, ldb, zero, pc, ldc)
    else:
        _dgemm(_ROW_MAJOR, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, ldc)


@njit(nogil=True)
def view_at(address, shape, strides):
    """The float32 array of ``shape`` at byte ``address``, ``strides`` in bytes (a job's
    arrays reach the workers as addresses)."""
    extent = 1
    for d in range(len(shape)):
        if shape[d] == 0:
            extent = 0
            break
        extent += (shape[d] - 1) * (strides[d] // 4)
    flat = carray(floats(address), (extent,))
    return np.lib.stride_tricks.as_strided(flat, shape, strides)


@njit(nogil=True)
def _product_words(slot):
    """The product job in the slot: ``(m, n, k, pa, lda, pb, ldb, pc, ldc)``."""
    word = jobs.word
    return (word(slot, _M), word(slot, _N), word(slot, _K), word(slot, _A), word(slot, _LDA),
            word(slot, _B), word(slot, _LDB), word(slot, _C), word(slot, _LDC))  # fmt: skip


@jobs.chunk(jobs.BLAS)
def _blas_chunk(slot, index, parts):
    """Rows or columns ``index`` of ``parts`` of the BLAS product job in the slot, with
    OpenBLAS on this thread only."""
    m, n, k, pa, lda, pb, ldb, pc, ldc = _product_words(slot)
    ta, tb, size = jobs.word(slot, _TA), jobs.word(slot, _TB), jobs.word(slot, _ITEMSIZE)
    product = (ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, size)
    previous = _blas_threads(1)
    _blas_part(product, jobs.word(slot, _ROWS) != 0, index, parts)
    _blas_threads(previous)


@jobs.chunk(jobs.PACKED, links=(symbols.TILE,))
def _packed_chunk(slot, index, parts):
    """Tiles or panels ``index`` of ``parts`` of the packed product job in the slot."""
    m, n, k, pa, lda, pb, _, pc, ldc = _product_words(slot)
    a = (pa, lda, jobs.word(slot, _A_COLS))
    c = (pc, ldc, jobs.word(slot, _C_COLS))
    _packed_part(a, pb, k, m, n, c, index, parts, jobs.word(slot, _ROWS),
                 jobs.word(slot, _ROWS_OUTER), jobs.word(slot, _POST))  # fmt: skip


@njit(nogil=True)
def _blas_part(product, rows, index, parts):
    """Chunk ``index`` of ``parts`` of the BLAS product ``(ta, tb, m, n, k, pa, lda, pb,
    ldb, pc, ldc, itemsize)``: a range of its output rows or columns, one OpenBLAS call."""
    ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, size = product
    if rows:
        lo, hi = m * index // parts, m * (index + 1) // parts
        pa += (lo if ta == _TRANS else lo * lda) * size
        pc += lo * ldc * size
        m = hi - lo
    else:
        lo, hi = n * index // parts, n * (index + 1) // parts
        pb += (lo * ldb if tb == _TRANS else lo) * size
        pc += lo * size
        n = hi - lo
    if m > 0 and n > 0:
        _raw(size, ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc)


@njit(nogil=True)
def _packed_part(a, pw, k, m, units, c, index, parts, by_rows, rows_outer, post):
    # Chunks of whole tiles (rows) or panels (columns), so no tile is cut in two; each
    # applies the epilogue (post, if not 0) to what it computed.
    panels = -(-units // packed.PANEL)
    if by_rows:
        tiles = -(-m // packed.ROWS)
        lo = tiles * index // parts * packed.ROWS
        hi = min(m, tiles * (index + 1) // parts * packed.ROWS)
        packed.product_range(a, pw, k, units, c, (lo, hi), (np.int64(0), panels), rows_outer, post)
    else:
        lo, hi = panels * index // parts, panels * (index + 1) // parts
        packed.product_range(a, pw, k, units, c, (np.int64(0), m), (lo, hi), rows_outer, post)


#: Where the words of a product job go (see :func:`_shared`).
_PRODUCT_AT = (_A, _B, _C, _M, _N, _K, _LDA, _LDB, _LDC, _TA, _TB, _ITEMSIZE, _ROWS, _A_COLS,
               _C_COLS, _ROWS_OUTER, _POST)  # fmt: skip


@njit(nogil=True)
def _shared(m, n, k, ta, tb, pa, lda, pb, ldb, pc, ldc, itemsize, kind, packing):
    """Share the product with the polling workers; False (nothing done) if none polls or
    another job holds the slot. ``kind`` is :data:`vm.kernels.runtime.jobs.BLAS` or
    :data:`vm.kernels.runtime.jobs.PACKED`; ``packing`` is a packed product's (column stride of
    a, column stride of c, rows outer, epilogue address or 0), zeros for a BLAS one."""
    slot = jobs.slot()
    threads = jobs.claim(slot, kind, m * n * k)
    if threads == 0:
        return False
    if kind == jobs.PACKED:
        # Whole tiles per chunk, each element's sum in one order whatever the chunks
        # (see vm.kernels.runtime.packed), so the chunks may follow the number of threads.
        tiles, panels = -(-m // packed.ROWS), -(-n // packed.PANEL)
        rows = tiles >= panels
        extent = tiles if rows else panels
        parts = min(2 * threads, extent, max(1, m * n * k // (PARALLEL_FLOPS // 2)))
    else:
        rows, parts = partition(m, n, k)
    # Every word an int64, so the tuple is uniform and becomes an array directly (unrolling
    # a mixed one took a second to compile).
    i64 = np.int64
    words = (i64(pa), i64(pb), i64(pc), i64(m), i64(n), i64(k), i64(lda), i64(ldb), i64(ldc),
             i64(ta), i64(tb), i64(itemsize), i64(1 if rows else 0), i64(packing[0]),
             i64(packing[1]), i64(packing[2]), i64(packing[3]))  # fmt: skip
    values = np.array(words)
    jobs.post(slot, parts, kind, _PRODUCT_AT, values)
    return True


@njit(nogil=True)
def gemm(a, b, out, trans_a, trans_b):
    """``out[...] = op(a) @ op(b)`` for 2-D float32 or float64 arrays that :func:`fits`,
    ``op`` swapping the axes when asked; without the GIL, shared with polling workers when
    it has at least :data:`PARALLEL_FLOPS` multiply-adds."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    _run(_product_of(a, b, out, trans_a, trans_b))


@njit(nogil=True)
def _product_of(a, b, out, trans_a, trans_b):
    """The product ``out = op(a) @ op(b)`` as BLAS takes it: ``(ta, tb, m, n, k, pa, lda,
    pb, ldb, pc, ldc, itemsize)``, all int64."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    return (np.int64(_TRANS if trans_a else _NO_TRANS), np.int64(_TRANS if trans_b else _NO_TRANS),
            np.int64(m), np.int64(n), np.int64(k), np.int64(a.ctypes.data), np.int64(leading(a)),
            np.int64(b.ctypes.data), np.int64(leading(b)), np.int64(out.ctypes.data),
            np.int64(leading(out)), np.int64(out.itemsize))  # fmt: skip


@njit(nogil=True)
def _run(product):
    """A product of :func:`_product_of`'s form with ``m``, ``n`` and ``k`` above 0, on this
    thread and the polling workers, in :func:`partition`'s cut."""
    ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, size = product
    rows, parts = partition(m, n, k)
    none = np.int64(0)
    packing = (none, none, none, none)
    if parts > 1 and _shared(
        m, n, k, ta, tb, pa, lda, pb, ldb, pc, ldc, size, np.int64(jobs.BLAS), packing
    ):
        return
    _parts(product, rows, 0, parts, parts)


@njit(nogil=True)
def _parts(product, rows, first, last, parts):
    """Parts ``first:last`` of ``parts`` of ``product``, on this thread, with OpenBLAS on this
    thread only."""
    previous = _blas_threads(1)
    for index in range(first, last):
        _blas_part(product, rows, index, parts)
    _blas_threads(previous)


#: The most chunks a product is cut into, whatever the number of threads. OpenBLAS picks a
#: kernel by the shape of each call (small-matrix and direct kernels below sizes of its
#: own, packed panels above), and they add an element's terms in different orders: cut
#: another way, a product differs in the last bits of many elements. So the chunks of a
#: product follow its shape only; threads only choose which chunks they take, and a
#: thread alone takes them all, in the same cuts.
PRODUCT_PARTS = 4


@njit(nogil=True)
def partition(m, n, k):
    """How a product ``(m, k) @ (k, n)`` is cut, whoever computes it: ``(rows, parts)``,
    ``parts`` ranges of output rows (``rows``) or columns, the longer side; one part below
    :data:`PARALLEL_FLOPS` multiply-adds, and none smaller than half of that."""
    rows = m >= n
    if m * n * k < PARALLEL_FLOPS:
        return rows, 1
    extent = m if rows else n
    return rows, max(1, min(PRODUCT_PARTS, extent, m * n * k // (PARALLEL_FLOPS // 2)))


@njit(nogil=True)
def gemm_parts(a, b, out, trans_a, trans_b, first, last):
    """Parts ``first:last`` of :func:`partition`'s cut of :func:`gemm`'s product, on this
    thread (with OpenBLAS on this thread only): what a thread computes for a product
    shared some other way (a Python task per part) equals what :func:`gemm` computes.
    ``k == 0`` zeroes the parts."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if m == 0 or n == 0:
        return
    rows, parts = partition(m, n, k)
    if k == 0:
        for index in range(first, last):
            if rows:
                out[m * index // parts : m * (index + 1) // parts] = 0
            else:
                out[:, n * index // parts : n * (index + 1) // parts] = 0
        return
    _parts(_product_of(a, b, out, trans_a, trans_b), rows, first, last, parts)


#: Items from which a stack of products is shared by items (each item whole on one thread,
#: in :func:`partition`'s cuts) rather than each item by its parts: one job for the stack
#: instead of a job per item (an attention layer's heads), with a chunk or more per thread.
BATCH_ITEMS = 4


@njit(nogil=True)
def batched(a, b, out, trans_a, trans_b):
    """``out[i] = op(a[i or 0]) @ op(b[i or 0])`` for 3-D float32 or float64 stacks whose
    items :func:`fits` (a stack of one item broadcasts), ``op`` swapping the last two axes
    when asked; without the GIL. From :data:`BATCH_ITEMS` items on, the polling workers
    share the items, else each item's parts (:func:`gemm`). Either way an item is cut as
    :func:`partition` cuts it, so the result does not depend on who computes what."""
    batch, m, n = out.shape
    k = a.shape[1] if trans_a else a.shape[2]
    if batch == 0 or m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    _run_batched(*_stack_of(a, b, out, trans_a, trans_b))


@njit(nogil=True)
def _stack_of(a, b, out, trans_a, trans_b):
    """The stack of products :func:`batched` computes: its first item as
    :func:`_product_of` gives it, the byte steps from item to item of ``a``, ``b`` and
    ``out`` (0 for a broadcast operand), and the item count."""
    step_a = np.int64(a.strides[0] if a.shape[0] > 1 else 0)
    step_b = np.int64(b.strides[0] if b.shape[0] > 1 else 0)
    steps = (step_a, step_b, np.int64(out.strides[0]))
    return _product_of(a[0], b[0], out[0], trans_a, trans_b), steps, np.int64(out.shape[0])


@njit(nogil=True)
def _item(product, steps, item):
    """Item ``item`` of a stack of :func:`_stack_of`'s form."""
    ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, size = product
    return (ta, tb, m, n, k, pa + item * steps[0], lda, pb + item * steps[1], ldb,
            pc + item * steps[2], ldc, size)  # fmt: skip


@njit(nogil=True)
def _run_batched(product, steps, batch):
    """A stack of :func:`_stack_of`'s form, its items' ``m``, ``n`` and ``k`` above 0."""
    m, n, k = product[2], product[3], product[4]
    work = batch * m * n * k
    if batch >= BATCH_ITEMS and work >= PARALLEL_FLOPS:
        words = (*product, *steps, batch)
        if jobs.share(jobs.BATCHED, batch, np.array(words), work):
            return
    for item in range(batch):
        _run(_item(product, steps, item))


@jobs.chunk(jobs.BATCHED)
def _batched_chunk(slot, index, parts):
    """Items ``index`` of ``parts`` of the stack :func:`batched` shares, each item in every
    part of its :func:`partition` cut, with OpenBLAS on this thread only."""
    a = jobs.argument
    product = (a(slot, 0), a(slot, 1), a(slot, 2), a(slot, 3), a(slot, 4), a(slot, 5),
               a(slot, 6), a(slot, 7), a(slot, 8), a(slot, 9), a(slot, 10),
               a(slot, 11))  # fmt: skip
    steps, batch = (a(slot, 12), a(slot, 13), a(slot, 14)), a(slot, 15)
    rows, cuts = partition(product[2], product[3], product[4])
    for item in range(batch * index // parts, batch * (index + 1) // parts):
        _parts(_item(product, steps, item), rows, 0, cuts, cuts)


@njit(nogil=True)
def whole(a, b, out):
    """``out[...] = a @ b`` for 2-D float32 or float64 arrays that :func:`fits`, in one
    OpenBLAS call on this thread, never cut: for products whose callers share several of
    them between threads (a Winograd convolution's planes)."""
    m, n = out.shape
    k = a.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    previous = _blas_threads(1)
    _raw(out.itemsize, _NO_TRANS, _NO_TRANS, m, n, k, np.int64(a.ctypes.data), leading(a),
         np.int64(b.ctypes.data), leading(b), np.int64(out.ctypes.data), leading(out))  # fmt: skip
    _blas_threads(previous)


@njit(nogil=True)
def packed_product(a, weight, out, post=0):
    """``out[...] = a @ w.T`` for float32 2-D ``a`` and ``out`` whose rows are contiguous
    and ``w`` packed in ``NC32n`` panels (C-contiguous ``(panels, k, 32)``, see
    :mod:`vm.kernels.runtime.packed`): a dense layer. ``post``: the address of its
    epilogue (:func:`vm.kernels.runtime.packed.post_epilogue`, one bias per output
    column; the residual laid out as ``out``), or 0."""
    m, k = a.shape
    _packed(m, k, out.shape[1], addressed(a.ctypes.data, leading(a), 1), weight,
            addressed(out.ctypes.data, leading(out), 1), np.int64(post))  # fmt: skip


@njit(nogil=True)
def packed_columns(columns, weight, out, post=0):
    """``out[...] = act(w @ columns + bias + residual)`` for a float32 ``(k, pixels)``
    im2col matrix and ``out`` ``(units, pixels)``, both with contiguous rows, ``w`` packed
    as for :func:`packed_product`, ``post`` the address of the epilogue
    (:func:`vm.kernels.runtime.packed.post_epilogue`) or 0: a convolution whose pixels
    are the rows of the register tiles (see :func:`_transposed`)."""
    k, m = columns.shape
    _by_symbol(m, k, addressed(columns.ctypes.data, 1, leading(columns)), weight, out,
               np.int64(post))  # fmt: skip


@njit(nogil=True)
def packed_pixel_rows(rows, weight, out, post=0):
    """:func:`packed_columns` for a float32 ``(pixels, k)`` matrix of pixel rows (an
    im2row matrix, :func:`vm.kernels.runtime.conv_loops.im2row`): a convolution whose
    tiles read each pixel along ``k`` (see
    :func:`vm.kernels.runtime.convolution.conv_packed`)."""
    m, k = rows.shape
    _by_symbol(m, k, addressed(rows.ctypes.data, leading(rows), 1), weight, out, np.int64(post))


@register_jitable
def addressed(address, rows, cols):
    """``(address, row stride, column stride)`` of an operand as int64s, the one set of
    types the packed products' loops take: numba compiles a callee again for each set of
    argument types, and ``ctypes.data`` is unsigned, a literal stride a type of its own."""
    return np.int64(address), np.int64(rows), np.int64(cols)


@njit(nogil=True)
def _by_symbol(m, k, a, weight, out, post):
    """:func:`_transposed` through its C entry point (:data:`run_transposed`), which takes
    the weight and the output by address: both must be C-contiguous."""
    panels = weight.shape[0]
    if weight.shape[1] != k or weight.shape[2] != packed.PANEL or out.shape[1] != m:
        raise ValueError("packed product: the weight, the data and the output do not agree")
    if not (weight.flags.c_contiguous and out.flags.c_contiguous):
        raise ValueError("packed product: the packed weight and the output must be C-contiguous")
    pa, a_rows, a_cols = a
    run_transposed(m, k, pa, a_rows, a_cols, weight.ctypes.data, panels, out.ctypes.data,
                   out.shape[0], post)  # fmt: skip


@njit(nogil=True)
def _transposed(m, k, a, weight, out, post):
    """``out`` ``(units, m)`` = the transpose of the product of the ``m`` rows of ``a`` by
    the packed ``weight``, with the epilogue at ``post`` (or 0).

    The tiles store whole rows of 32 output channels into a pixel-major buffer; the
    epilogue's bias and activation are applied to each strip of it while it is in cache
    (:func:`vm.kernels.runtime.packed.post_columns`), and the buffer is transposed into
    ``out`` by register tiles (:func:`vm.kernels.runtime.transpose.batched_f32`). An
    epilogue with a residual, laid out as ``out``, is applied by the transpose's tiles to
    what each stored, shared as they are from :data:`vm.kernels.runtime.transpose.SPLIT_ELEMENTS`:
    applied after the transpose on the calling thread alone, it took a fifth of RegNetY's
    512-channel 1x1 layers at 14x14 (623 against 516 us without the residual; AMD EPYC
    Zen 4, two threads; such planes now run by pixel panels, see
    :data:`vm.kernels.runtime.convolution.POINTWISE_DEEP_PLANE`). Stored into ``out``
    directly, a tile's 32 columns were 32 floats written to 32 rows, each alone."""
    units = out.shape[0]
    if k >= packed.BLOCKED_MIN_DEPTH:
        # The blocks of a deep product already go through a buffer of their own.
        _packed(m, k, units, a, weight, addressed(out.ctypes.data, 1, leading(out)), np.int64(0))
        packed.apply_post(out, post)
        return
    fused = post
    if post != 0 and packed.post_fields(post)[3]:
        fused = 0
    if m == 1:
        # One pixel: the buffer would be out itself.
        _packed(m, k, units, a, weight, addressed(out.ctypes.data, units, 1), post)
        return
    buffer = np.empty((m, units), np.float32)
    _packed(m, k, units, a, weight, addressed(buffer.ctypes.data, units, 1), fused)
    transpose.batched_f32(buffer, out, 1, m, units, post - fused)


@njit(nogil=True)
def _packed(m, k, units, a, weight, c, post):
    # Without the GIL; shared with polling workers from PARALLEL_FLOPS multiply-adds.
    if m == 0 or units == 0:
        return
    pc, c_rows, c_cols = c
    if k == 0:
        for r in range(m):
            for u in range(units):
                packed.store(pc, r * c_rows + u * c_cols, 0.0)
        if post != 0:
            i = np.int64
            packed.post_columns(i(pc), i(c_rows), (i(0), i(m)), (i(0), i(units)), i(post))
        return
    panels = weight.shape[0]
    rows_outer = 1 if weight.size * 4 <= packed.CACHED_WEIGHT_BYTES else 0
    pa, a_rows, a_cols = a
    i = np.int64
    pw = i(weight.ctypes.data)
    packing = (i(a_cols), i(c_cols), i(rows_outer), i(post))
    if m * units * k >= PARALLEL_FLOPS and _shared(
        m, units, k, i(0), i(0), pa, a_rows, pw, i(0), pc, c_rows, i(4), i(jobs.PACKED), packing
    ):
        return
    every_row, every_panel = (i(0), i(m)), (i(0), i(panels))
    packed.product_range(a, pw, k, units, c, every_row, every_panel, i(rows_outer), i(post))


# --- from Python ------------------------------------------------------------------------------

_BLAS_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def blas_reads(x: np.ndarray) -> bool:
    """Whether BLAS reads 2-D ``x`` in place: :func:`fits`, for a float32
    or float64 array whose rows lie a whole row or more apart."""
    if x.dtype not in _BLAS_TYPES or not x.flags.aligned:
        return False
    (rows, cols), (row, col) = x.shape, x.strides
    if cols > 1 and col != x.itemsize:
        return False
    return rows <= 1 or (row % x.itemsize == 0 and row >= max(cols, 1) * x.itemsize)


def _stored(x: np.ndarray, transposed: bool) -> tuple[np.ndarray, bool] | None:
    """``op(x)`` (``x`` transposed if ``transposed``) as an array BLAS reads in place and
    whether BLAS transposes it; ``x`` itself first, as compiled code passes it."""
    if blas_reads(x):
        return x, transposed
    if blas_reads(x.T):
        return x.T, not transposed
    return None


def product(
    a: np.ndarray, b: np.ndarray, out: np.ndarray, trans_a: bool = False, trans_b: bool = False
) -> None:
    """``out[...] = op(a) @ op(b)`` for 2-D operands (any strides), ``op`` transposing when
    asked. When BLAS reads the operands in place this is :func:`gemm`,
    shared with the polling workers without the GIL (the one way a product is split
    between threads); else numpy's product on this thread."""
    first, second = _stored(a, trans_a), _stored(b, trans_b)
    if (
        first is not None
        and second is not None
        and a.dtype == b.dtype == out.dtype
        and blas_reads(out)
        and not (np.may_share_memory(out, a) or np.may_share_memory(out, b))
    ):
        (pa, ta), (pb, tb) = first, second
        _gemm(pa, pb, out, ta, tb)
        return
    with threads.single_threaded_blas():
        np.matmul(a.T if trans_a else a, b.T if trans_b else b, out=out)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = a @ b`` for 2-D operands (any strides); see :func:`product`."""
    product(a, b, out)


@njit(nogil=True, cache=True)
def _gemm(a, b, out, trans_a, trans_b):
    """:func:`gemm`, cached on disk: called from Python, it would otherwise
    compile in every process (about 2 s)."""
    gemm(a, b, out, trans_a, trans_b)


# --- the entry points generated kernels call ---------------------------------------------------


@njit(nogil=True)
def product_into(x, y, out, transpose_x, transpose_y):
    """``out[...] = op(x) @ op(y)`` for 2-D float32 or float64 operands, ``op`` transposing
    when asked: ``nn.dense`` is ``product_into(x, w, out, False, True)``. Without the GIL,
    shared with the polling workers when big (:func:`gemm`)."""
    if not fits(x):
        x = np.ascontiguousarray(x)
    if not fits(y):
        y = np.ascontiguousarray(y)
    if not fits(out):
        result = np.empty(out.shape, out.dtype)
        product_into(x, y, result, transpose_x, transpose_y)
        # Element by element: an array assignment compiles numba's shape-mismatch message
        # (about a second a process) for a branch kernels never take.
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = result[i, j]
        return
    m, n = out.shape
    if m == 0 or n == 0:
        return
    if (y.shape[0] if transpose_x else x.shape[1]) == 0:
        out[...] = 0
        return
    block = np.empty(12, np.int64)
    words = _product_of(x, y, out, transpose_x, transpose_y)
    for i in range(12):
        block[i] = words[i]
    _product_symbol(block.ctypes.data)
    callbacks.alive(block, x, y)


@njit(nogil=True)
def packed_into(x, w, out, post):
    """``out[...] = x @ unpacked(w).T`` for float32 ``x`` and a weight ``w`` in 32-wide
    ``NC32n`` panels (see :mod:`vm.kernels.runtime.packed`); without the GIL, shared with polling
    workers when big, through ``relayvm_packed``. ``post`` is the epilogue the product's
    threads apply to what they computed (:func:`vm.kernels.runtime.packed.post_epilogue`:
    a bias per column of ``out``, a residual laid out as ``out``, an activation), or an
    empty array for none."""
    if x.shape[0] > 1 and x.strides[1] != x.itemsize:
        x = np.ascontiguousarray(x)
    if w.strides[2] != w.itemsize or w.strides[1] != w.shape[2] * w.itemsize:
        w = np.ascontiguousarray(w)
    block = np.empty(11, np.int64)
    words = (np.int64(x.ctypes.data), x.shape[0], x.shape[1], leading(x),
             np.int64(w.ctypes.data), w.shape[0], w.shape[1], np.int64(out.ctypes.data),
             out.shape[1], leading(out), packed.post_address(post))  # fmt: skip
    for i in range(len(words)):
        block[i] = words[i]
    _packed_symbol(block.ctypes.data)
    callbacks.alive(block, x, w)


#: Rows of each product from which :func:`matmul_into` transposes a transposed second
#: operand before the product: with fewer, the pass over it would cost about as much as
#: it saves.
FLIP_MIN_ROWS = 16


@njit(nogil=True)
def matmul_into(x, y, out, transpose_x, transpose_y):
    """``out[...] = op(x) @ op(y)`` for 3-D float32 or float64 stacks, ``op`` swapping the
    last two axes when asked; a stack of one item broadcasts. Without the GIL, the items
    or their parts shared with the polling workers (:func:`batched`)."""
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    if transpose_y and y.itemsize == 4 and out.shape[1] >= FLIP_MIN_ROWS:  # float32
        # OpenBLAS multiplies by a transposed float32 operand, in the parts products are
        # cut in, at half the speed of a plain one: an attention layer's 12 products of
        # (128, 64) by (64, 128) took 232 us with the keys transposed, 117 plain (AMD
        # EPYC Zen 4, 2 threads). Transposing the operand first costs a pass over it.
        flipped = np.empty((y.shape[0], y.shape[2], y.shape[1]), y.dtype)
        transpose.batched_f32(y, flipped, y.shape[0], y.shape[1], y.shape[2])
        y, transpose_y = flipped, False
    if not out.flags.c_contiguous:
        result = np.empty(out.shape, out.dtype)
        matmul_into(x, y, result, transpose_x, transpose_y)
        for b in range(out.shape[0]):  # element by element: see product_into
            for i in range(out.shape[1]):
                for j in range(out.shape[2]):
                    out[b, i, j] = result[b, i, j]
        return
    batch, m, n = out.shape
    if batch == 0 or m == 0 or n == 0:
        return
    if (x.shape[1] if transpose_x else x.shape[2]) == 0:
        out[...] = 0
        return
    product, steps, count = _stack_of(x, y, out, transpose_x, transpose_y)
    words = (*product, *steps, count)
    block = np.empty(16, np.int64)
    for i in range(16):
        block[i] = words[i]
    _batched_symbol(block.ctypes.data)
    callbacks.alive(block, x, y)


# A product stored transposed is a C entry point compiled once: the column blocks' entry
# point, the grouped convolutions', the Winograd planes' chunk code and the pixel rows of
# a convolution each compiled it again (10-12 s with an empty cache on an AMD EPYC Zen 4,
# the biggest part of the column blocks' 37 s), in each builder process that needed it.
_TRANSPOSED = types.void(*([types.int64] * 10))


@callbacks.entry(symbols.TRANSPOSED, _TRANSPOSED, links=(symbols.TILE,))
def _transposed_entry(m, k, pa, a_rows, a_cols, pw, panels, pc, units, post):
    """:func:`_transposed` of ``m`` rows of ``a`` (address, row and column strides in
    elements) by the C-contiguous packed weight of ``panels`` panels at ``pw`` into the
    C-contiguous ``(units, m)`` output at ``pc``; ``post`` as there."""
    weight = carray(floats(pw), (panels, k, packed.PANEL))
    _transposed(m, k, (pa, a_rows, a_cols), weight, carray(floats(pc), (units, m)), post)


#: :func:`_transposed` by symbol, for compiled code (link ``symbols.TRANSPOSED`` first).
run_transposed = types.ExternalFunction(symbols.TRANSPOSED, _TRANSPOSED)


# numba optimises each kernel's whole module with the code of every function it calls
# linked in: each kernel that multiplied by a packed weight spent 4-10 s compiling the
# register tiles again. Kernels call this C entry point by symbol instead (compiled, or
# loaded from numba's cache, once per process when a kernel calling it is loaded).
_ENTRY = types.int64(types.int64)


@callbacks.entry(symbols.PACKED, _ENTRY, links=(symbols.TILE,))
def _packed_entry(address):
    """:func:`packed_product` on the block of :func:`packed_into`: the
    data's address, rows, columns and row stride, the weight's address, panels and depth,
    the output's address, columns and row stride, and the epilogue's address (or 0)."""
    b = carray(int64s(address), (11,))
    if b[1] > 0 and b[8] > 0:
        x = view_at(b[0], (b[1], b[2]), (b[3] * 4, 4))
        w = carray(floats(b[4]), (b[5], b[6], packed.PANEL))
        packed_product(x, w, view_at(b[7], (b[1], b[8]), (b[9] * 4, 4)), b[10])
    return 1


_packed_symbol = types.ExternalFunction(symbols.PACKED, _ENTRY)


@callbacks.entry(symbols.PRODUCT, _ENTRY)
def _product_entry(address):
    """:func:`gemm` on the block of :func:`product_into`: the product as
    :func:`_product_of` gives it."""
    b = carray(int64s(address), (12,))
    _run((b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11]))
    return 1


@callbacks.entry(symbols.BATCHED, _ENTRY)
def _batched_entry(address):
    """:func:`batched` on the block of :func:`matmul_into`: the stack as :func:`_stack_of`
    gives it."""
    b = carray(int64s(address), (16,))
    product = (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11])
    _run_batched(product, (b[12], b[13], b[14]), b[15])
    return 1


_product_symbol = types.ExternalFunction(symbols.PRODUCT, _ENTRY)
_batched_symbol = types.ExternalFunction(symbols.BATCHED, _ENTRY)


#: What each entry point above needs before a kernel that calls it is compiled or loaded
#: (:mod:`vm.kernels.library` prepares it): the kinds of job it shares with the workers
#: and the C entry points it calls by symbol.
NEEDS = {
    "product_into": jobs.Needs((jobs.BLAS,), (symbols.PRODUCT,)),
    "matmul_into": jobs.Needs((jobs.BLAS, jobs.BATCHED, jobs.TRANSPOSE), (symbols.BATCHED,)),
    "packed_into": jobs.Needs((jobs.PACKED,), (symbols.TILE, symbols.PACKED)),
}

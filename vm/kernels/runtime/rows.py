"""Row-wise float32 operators along a contiguous last axis, shared between threads by rows:
softmax and layer normalization.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba,
:mod:`vm.kernels.runtime.jobs`, :mod:`vm.kernels.runtime.products` (arrays at addresses) and
:mod:`vm.kernels.runtime.vecmath`. Generated kernels (:mod:`vm.kernels.emit_nn`,
:mod:`vm.kernels.emit_norm`) import this module as ``rw``.

Each row is computed by one thread with the same operations in the same order whatever
the number of threads, so the bits do not depend on it. Rows are cut into chunks in
order, as the products before them cut their rows: the caller takes the first ones and
a worker the last (see :mod:`vm.kernels.runtime.jobs`).
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit

from vm.kernels.runtime import jobs, products
from vm.kernels.runtime import vecmath as vx

#: Elements from which a softmax or a layer normalization is shared with the polling
#: workers. Alone against shared, two threads of an AMD EPYC Zen 4, the least of 600
#: calls: softmax of 2048 2.0 -> 1.6 us, 4096 5.0 -> 3.6, 8192 7.4 -> 4.2; layer norm of
#: 2048 even (1.8), 4096 3.2 -> 3.0, 8192 4.7 -> 3.5; of 1024 sharing lost 0.2 us.
SPLIT = 1 << 12
#: Multiply-adds a job counts per element (exponentials, sums, scaling) when it asks for
#: workers (:func:`vm.kernels.runtime.jobs.claim`).
_WORK_PER_ELEMENT = 16


@njit(nogil=True)
def softmax_f32(x, out):
    """``out`` = the softmax of each row of the C-contiguous float32 matrix ``x`` (``out``
    the same shape): the row's maximum, the exponentials of the differences (0 below
    float32's normal range: masked entries, :func:`vm.kernels.runtime.vecmath.exp_flushed_f32`)
    written ahead and summed in float64, then scaled by the sum's reciprocal.

    Raises
    ------
    ValueError
        If ``out`` does not have ``x``'s shape.
    """
    m, n = x.shape
    if out.shape[0] != m or out.shape[1] != n:
        raise ValueError("softmax_f32: out needs the shape of x")
    if x.size >= SPLIT and m > 1:
        arguments = (np.int64(x.ctypes.data), np.int64(m), np.int64(n),
                     np.int64(out.ctypes.data))  # fmt: skip
        if jobs.share(jobs.SOFTMAX_ROWS, m, arguments, x.size * _WORK_PER_ELEMENT):
            return
    softmax_range(x, out, 0, m)


@njit(nogil=True, cache=True)
def softmax_range(x, out, first, last):
    """Rows ``first:last`` of :func:`softmax_f32`."""
    n = x.shape[1]
    for a in range(first, last):
        row, result = x[a], out[a]
        top = vx.max_f32(row)
        for j in range(n):
            result[j] = vx.exp_flushed_f32(row[j] - top)
        # One division per row: a float64 division per element cost a quarter of the
        # kernel. Scaled in float64, each result rounds to float32 as the quotient does
        # but for quotients within a float64 ulp of a rounding boundary.
        scale = 1.0 / vx.sum_f64(result)
        for j in range(n):
            result[j] = np.float32(result[j] * scale)


@jobs.chunk(jobs.SOFTMAX_ROWS)
def _softmax_chunk(slot, index, parts):
    """Rows ``index`` of ``parts`` of the softmax :func:`softmax_f32` shares."""
    a = jobs.argument
    m, n = a(slot, 1), a(slot, 2)
    x = carray(products.floats(a(slot, 0)), (m, n))
    out = carray(products.floats(a(slot, 3)), (m, n))
    softmax_range(x, out, m * index // parts, m * (index + 1) // parts)


@njit(nogil=True)
def layer_norm_f32(x, gamma, beta, epsilon, scale, center, out):
    """``out`` = each row of the C-contiguous float32 matrix ``x`` normalized to mean 0 and
    variance 1 (``epsilon`` added to the variance), times ``gamma`` if ``scale``, plus
    ``beta`` if ``center`` (both one element per column). The mean and the squared
    deviations are summed in float64; every other step rounds to float32, as numpy's
    float32 arithmetic does.

    Raises
    ------
    ValueError
        If ``out`` does not have ``x``'s shape, or ``gamma`` or ``beta`` (when used) is not
        one element per column.
    """
    m, n = x.shape
    if out.shape[0] != m or out.shape[1] != n:
        raise ValueError("layer_norm_f32: out needs the shape of x")
    if (scale and gamma.shape[0] != n) or (center and beta.shape[0] != n):
        raise ValueError("layer_norm_f32: gamma and beta need one element per column")
    if x.size >= SPLIT and m > 1:
        # The float32 epsilon travels as the bits of a float64 word.
        eps = np.array([np.float64(epsilon)]).view(np.int64)[0]
        flags = (1 if scale else 0) | (2 if center else 0)
        arguments = (np.int64(x.ctypes.data), np.int64(m), np.int64(n),
                     np.int64(gamma.ctypes.data), np.int64(beta.ctypes.data), eps,
                     np.int64(flags), np.int64(out.ctypes.data))  # fmt: skip
        if jobs.share(jobs.LAYER_NORM_ROWS, m, arguments, x.size * _WORK_PER_ELEMENT):
            return
    layer_norm_range(x, gamma, beta, np.float32(epsilon), scale, center, out, 0, m)


@njit(nogil=True, cache=True)
def layer_norm_range(x, gamma, beta, epsilon, scale, center, out, first, last):
    """Rows ``first:last`` of :func:`layer_norm_f32`."""
    n = x.shape[1]
    for a in range(first, last):
        row, result = x[a], out[a]
        mean = np.float32(vx.sum_f64(row) / n)
        var = np.float32(vx.squared_deviations_f64(row, mean) / n)
        denom = np.float32(np.sqrt(np.float32(var + epsilon)))
        for j in range(n):
            v = np.float32(np.float32(row[j] - mean) / denom)
            if scale:
                v = np.float32(v * gamma[j])
            if center:
                v = np.float32(v + beta[j])
            result[j] = v


@jobs.chunk(jobs.LAYER_NORM_ROWS)
def _layer_norm_chunk(slot, index, parts):
    """Rows ``index`` of ``parts`` of the normalization :func:`layer_norm_f32` shares."""
    a = jobs.argument
    m, n = a(slot, 1), a(slot, 2)
    flags = a(slot, 6)
    x = carray(products.floats(a(slot, 0)), (m, n))
    gamma = carray(products.floats(a(slot, 3)), (n,))
    beta = carray(products.floats(a(slot, 4)), (n,))
    out = carray(products.floats(a(slot, 7)), (m, n))
    epsilon = np.float32(np.array([a(slot, 5)]).view(np.float64)[0])
    first, last = m * index // parts, m * (index + 1) // parts
    layer_norm_range(x, gamma, beta, epsilon, (flags & 1) != 0, (flags & 2) != 0, out, first,
                     last)  # fmt: skip


#: What each entry point generated kernels call needs before such a kernel is compiled or
#: loaded (:mod:`vm.kernels.library` prepares it): the kind of job it shares.
NEEDS = {
    "softmax_f32": jobs.Needs(kinds=(jobs.SOFTMAX_ROWS,)),
    "layer_norm_f32": jobs.Needs(kinds=(jobs.LAYER_NORM_ROWS,)),
}

"""Compiled loops for the pooling kernels over NCHW data.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy and numba.

Generated kernels (see :mod:`vm.kernels.emit_pool` and :mod:`vm.kernels.emit_reduce`) import
this module as ``pool``; window sizes, strides and padding are arguments, so each loop
compiles once per process and dtype. Big float pools are split by planes between the threads
of :mod:`vm.kernels.runtime.threads` (called through :mod:`vm.kernels.runtime.bridge`, so the
loops they run are called from Python too, and cached on disk themselves); float32 max
pooling and the row sums of means over trailing axes (:func:`row_sums_f32`) are shared
without the GIL instead while the workers poll (jobs of :func:`vm.kernels.runtime.jobs.share`).
A windowed pool walks one output row at a time: for each window offset it combines the
matching input row into the whole output row, over the range of columns whose input lies
inside the image (so the inner loop has no bounds checks), in window-offset order, which is
the order the compiler's references combine them in. Its source is part of the kernel cache
key.
"""

from __future__ import annotations

import itertools

import numpy as np
from numba import carray, njit
from numba import uint64 as _u

from vm.kernels.runtime import bridge, jobs, packed, products, symbols, threads
from vm.kernels.runtime import taps as taps_ir
from vm.kernels.runtime import vecmath as vx
from vm.kernels.runtime.conv_loops import valid_range

#: Output elements times window size from which a float pool is split between threads.
SPLIT_WORK = 1 << 17


def _plane_chunks(function, x, out, *args) -> None:
    """Run ``function(x, out, *args, first, last)`` over chunks of planes on the threads."""
    planes = x.shape[0] * x.shape[1]
    parts = min(planes, 2 * threads.threads())
    bounds = [planes * i // parts for i in range(parts + 1)]
    chunks = [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]
    threads.run([_chunk(function, x, out, args, lo, hi) for lo, hi in chunks])


def _chunk(function, x, out, args, lo, hi):
    return lambda: function(x, out, *args, lo, hi)


def _max_pool_planes(x, out, *window) -> None:
    _plane_chunks(max_pool2d, x, out, *window, -np.inf)


def _avg_pool_planes(x, out, *window) -> None:
    _plane_chunks(avg_pool2d, x, out, *window[:-1], bool(window[-1]))


_MAX_POOL = bridge.register(symbols.MAX_POOL_PLANES, _max_pool_planes, 2)
_AVG_POOL = bridge.register(symbols.AVG_POOL_PLANES, _avg_pool_planes, 2)


@njit(nogil=True)
def _window_block(x, out, values):
    block = np.empty(24, np.int64)
    at = bridge.put(block, 1, x)
    at = bridge.put(block, at, out)
    for value in values:
        block[at] = value
        at += 1
    return block, at


@njit(nogil=True)
def _reach(ph, pw, x):
    """The most input elements one window reads: a window wider than the input (see
    :func:`_taps`) reads no more than the input."""
    return min(ph, x.shape[2]) * min(pw, x.shape[3])


@njit(nogil=True)
def float32_in_c_order(x, out):
    """Whether ``x`` and ``out`` are float32 arrays in C order: what the chunk code of a
    shared job reads at their addresses."""
    return (
        taps_ir.is_float32(x)
        and taps_ir.is_float32(out)
        and x.flags.c_contiguous
        and out.flags.c_contiguous
    )


@njit(nogil=True)
def max_pool2d_float(x, out, ph, pw, sh, sw, dh, dw, pt, pl):
    """:func:`max_pool2d` of float data over every plane, split between threads by planes
    when it is big enough."""
    planes = x.shape[0] * x.shape[1]
    if out.size * _reach(ph, pw, x) < SPLIT_WORK:
        # The range as int64, as the chunk code passes it: one compile of the loops.
        max_pool2d(x, out, ph, pw, sh, sw, dh, dw, pt, pl, -np.inf, np.int64(0), planes)
        return
    if float32_in_c_order(x, out):
        # Shared without the GIL while workers poll (inside a model, after a convolution).
        arguments = (np.int64(x.ctypes.data), x.shape[0], x.shape[1], x.shape[2], x.shape[3],
                     np.int64(out.ctypes.data), out.shape[2], out.shape[3], np.int64(ph),
                     np.int64(pw), np.int64(sh), np.int64(sw), np.int64(dh), np.int64(dw),
                     np.int64(pt), np.int64(pl))  # fmt: skip
        if jobs.share(jobs.MAX_POOL, planes, arguments, np.int64(0)):
            return
    block, at = _window_block(x, out, (ph, pw, sh, sw, dh, dw, pt, pl))
    bridge.invoke(_MAX_POOL, block, at)


@njit(nogil=True)
def avg_pool2d_float(x, out, ph, pw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad):
    """:func:`avg_pool2d` over every plane, split between threads by planes when it is big
    enough."""
    planes = x.shape[0] * x.shape[1]
    if out.size * _reach(ph, pw, x) < SPLIT_WORK:
        avg_pool2d(x, out, ph, pw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad, 0, planes)
        return
    window = (ph, pw, sh, sw, dh, dw, pt, pl, pb, pr, 1 if include_pad else 0)
    block, at = _window_block(x, out, window)
    bridge.invoke(_AVG_POOL, block, at)


@njit(nogil=True, cache=True)
def max_pool2d(x, out, ph, pw, sh, sw, dh, dw, pt, pl, lowest, first, last):
    """Planes ``first:last`` (image * channel) of ``out`` = the maximum over each window of
    ``x``; padding and positions past it count as ``lowest``; a NaN in a window wins."""
    height, width = x.shape[2], x.shape[3]
    out_h, out_w = out.shape[2], out.shape[3]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    # Each output row first takes the maximum of its window's input rows into ``rows``
    # (contiguous, so the loop is vectorised), then slides the window along that one
    # row: the strided reads, scalar but at a column stride of 2 (below), are pw per
    # output instead of ph * pw (a 3x3 stride-2 pool: 3x faster).
    rows = np.empty(width, x.dtype)
    # At a column stride of 2, float32 rows are split into their even and odd columns
    # (by vector shuffles), so each window offset reads one of them contiguously and its
    # loop is vectorised too (ResNet's 3x3 stride-2 pool of 64 planes of 112x112, one
    # thread: 504 -> 252 us; benchmarks/NOTES.md).
    split = sw == 2 and taps_ir.is_float32(x)
    phases = np.empty(2 * (width // 2 + 1), x.dtype)
    evens, odds = phases[: width // 2 + 1], phases[width // 2 + 1 :]
    for plane in range(first, last):
        xb = plane * height * width
        for r in range(out_h):
            d0 = _u((plane * out_h + r) * out_w)
            for q in range(_u(out_w)):
                of[d0 + q] = lowest
            seen = False
            i0, i1 = _taps(ph, dh, r * sh - pt, height, 0)
            for i in range(i0, i1):
                ih = r * sh - pt + i * dh
                s0 = _u(xb + ih * width)
                if not seen:
                    for q in range(_u(width)):
                        rows[q] = xf[s0 + q]
                    seen = True
                    continue
                for q in range(_u(width)):
                    v, best = xf[s0 + q], rows[q]
                    rows[q] = v if (v > best or v != v) else best
            if not seen:
                continue
            j0, j1 = _taps(pw, dw, -pl, width, (out_w - 1) * sw)
            if split:
                packed.split_row(rows.ctypes.data, evens.ctypes.data, odds.ctypes.data, width)
            for j in range(j0, j1):
                off = j * dw - pl
                lo, hi = valid_range(off, sw, width, out_w)
                db = d0 + _u(lo)
                if split:
                    # Output q reads column 2 q + off: phase off % 2, index q + off // 2.
                    phase = odds if off % 2 else evens
                    s0 = _u(lo + off // 2)
                    for q in range(_u(max(hi - lo, 0))):
                        v = phase[s0 + q]
                        best = of[db + q]
                        of[db + q] = v if (v > best or v != v) else best
                    continue
                s0 = _u(off + lo * sw)
                step = _u(sw)
                for q in range(_u(max(hi - lo, 0))):
                    v = rows[s0 + q * step]
                    best = of[db + q]
                    of[db + q] = v if (v > best or v != v) else best


@njit(nogil=True, cache=True)
def _taps(pool, dilation, start, size, span):
    """The taps ``[lo, hi)`` of a window along one axis, out of ``pool``, that can read the
    input: tap ``i`` reads ``start + i * dilation`` (and, along a row, up to ``span``
    further on), which must fall in ``[0, size)``. A window far bigger than its input
    (EfficientNet's 1280-wide average pool over 7x7 features, under ``ceil_mode``) then
    costs what it reads, not what it spans."""
    lo = max(0, -((start + span) // dilation))
    hi = min(pool, -((start - size) // dilation))
    return lo, max(lo, hi)


@njit(nogil=True, cache=True)
def _window_counts(out_n, size, pool, stride, dilation, before, after, include_pad):
    """How many positions of each window along one axis are counted by an average."""
    counts = np.zeros(out_n, np.int64)
    low, high = (-before, size + after) if include_pad else (0, size)
    for r in range(out_n):
        for i in range(pool):
            position = r * stride - before + i * dilation
            if low <= position < high:
                counts[r] += 1
    return counts


@njit(nogil=True, cache=True)
def avg_pool2d(x, out, ph, pw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad, first, last):
    """Planes ``first:last`` of ``out`` = the sum over each window of ``x`` (in ``out``'s
    dtype, window offsets in order) divided by the number of input elements in it, or with
    ``include_pad`` of input and padding elements; a window with nothing to count averages
    to 0."""
    height, width = x.shape[2], x.shape[3]
    out_h, out_w = out.shape[2], out.shape[3]
    rows = _window_counts(out_h, height, ph, sh, dh, pt, pb, include_pad)
    cols = _window_counts(out_w, width, pw, sw, dw, pl, pr, include_pad)
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    # Windows wider than a row of outputs (a pool over all of a small plane, EfficientNet's
    # last): each output sums its own window, clipped to the input, in the same order. The
    # loop by taps would find a column range per tap for one or two outputs (1280 planes
    # of 7x7: 354 us, now 65 for a whole VM call).
    wide = dw == 1 and pw > out_w
    for plane in range(first, last):
        xb = plane * height * width
        for r in range(out_h):
            d0 = _u((plane * out_h + r) * out_w)
            for q in range(_u(out_w)):
                of[d0 + q] = 0
            i0, i1 = _taps(ph, dh, r * sh - pt, height, 0)
            if wide:
                for q in range(out_w):
                    c0 = max(0, q * sw - pl)
                    c1 = min(width, q * sw - pl + pw)
                    total = of[d0 + _u(q)]
                    for i in range(i0, i1):
                        s0 = _u(xb + (r * sh - pt + i * dh) * width)
                        for c in range(_u(c0), _u(max(c0, c1))):
                            total += xf[s0 + c]
                    of[d0 + _u(q)] = total
            else:
                j0, j1 = _taps(pw, dw, -pl, width, (out_w - 1) * sw)
                for i in range(i0, i1):
                    ih = r * sh - pt + i * dh
                    for j in range(j0, j1):
                        off = j * dw - pl
                        lo, hi = valid_range(off, sw, width, out_w)
                        s0 = _u(xb + ih * width + off + lo * sw)
                        db = d0 + _u(lo)
                        step = _u(sw)
                        for q in range(_u(max(hi - lo, 0))):
                            of[db + q] += xf[s0 + q * step]
            for q in range(out_w):
                of[d0 + _u(q)] = of[d0 + _u(q)] / max(rows[r] * cols[q], 1)


@jobs.chunk(jobs.MAX_POOL)
def _max_pool_chunk(slot, index, parts):
    """Planes ``index`` of ``parts`` of the float32 max pool that
    :func:`max_pool2d_float` shares through :func:`vm.kernels.runtime.jobs.share`."""
    a = jobs.argument
    x_shape = (a(slot, 1), a(slot, 2), a(slot, 3), a(slot, 4))
    out_shape = (x_shape[0], x_shape[1], a(slot, 6), a(slot, 7))
    x = carray(products.floats(a(slot, 0)), x_shape)
    out = carray(products.floats(a(slot, 5)), out_shape)
    ph, pw, sh, sw = a(slot, 8), a(slot, 9), a(slot, 10), a(slot, 11)
    dh, dw, pt, pl = a(slot, 12), a(slot, 13), a(slot, 14), a(slot, 15)
    planes = x_shape[0] * x_shape[1]
    lo, hi = planes * index // parts, planes * (index + 1) // parts
    max_pool2d(x, out, ph, pw, sh, sw, dh, dw, pt, pl, -np.inf, lo, hi)


@njit(nogil=True)
def global_max_pool2d(x, out):
    """``out[n, c, 0, 0]`` = the maximum of plane ``x[n, c]`` (a NaN wins)."""
    planes, size = x.shape[0] * x.shape[1], x.shape[2] * x.shape[3]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    for plane in range(planes):
        base = _u(plane * size)
        best = xf[base]
        for q in range(_u(1), _u(size)):
            v = xf[base + q]
            if v > best or v != v:
                best = v
                if v != v:
                    break
        of[plane] = best


#: Elements from which the sums of :func:`row_sums_f32` are shared with the polling workers.
#: A squeeze-excite block averages the image a convolution shared between the threads has just
#: written, half of it in each core's cache: one thread alone read the other half across
#: cores, 69 us for EfficientNet-B0's 32x112x112 (Intel Xeon, Emerald Rapids).
ROW_SUMS_SPLIT = 1 << 15


@njit(nogil=True)
def row_sums_f32(rows, out, mean):
    """``out[i]`` = the float64 sum of row ``i`` of the C-contiguous float32 matrix ``rows``
    (divided by the row's length if ``mean``), rounded to float32 (``out`` 1-D, contiguous):
    the planes of a global average pool or any mean over trailing axes, shared between
    threads by rows when big enough."""
    m, n = rows.shape
    if out.shape[0] != m:
        raise ValueError("row_sums_f32: out needs one element per row")
    if rows.size >= ROW_SUMS_SPLIT and m > 1:
        arguments = (np.int64(rows.ctypes.data), np.int64(m), np.int64(n),
                     np.int64(out.ctypes.data), np.int64(1 if mean else 0))  # fmt: skip
        if jobs.share(jobs.ROW_SUMS, m, arguments, np.int64(0)):
            return
    row_sums_range(rows, out, mean, 0, m)


@njit(nogil=True, cache=True)
def row_sums_range(rows, out, mean, first, last):
    """Rows ``first:last`` of :func:`row_sums_f32`."""
    count = rows.shape[1]
    for i in range(first, last):
        total = vx.sum_f64(rows[i])
        if not mean:
            out[i] = np.float32(total)
        else:
            # numpy's mean of nothing is NaN; numba would raise on the division.
            out[i] = np.float32(total / count) if count else np.float32(np.nan)


@jobs.chunk(jobs.ROW_SUMS)
def _row_sums_chunk(slot, index, parts):
    """Rows ``index`` of ``parts`` of the sums :func:`row_sums_f32` shares."""
    a = jobs.argument
    m, n = a(slot, 1), a(slot, 2)
    rows = carray(products.floats(a(slot, 0)), (m, n))
    out = carray(products.floats(a(slot, 3)), (m,))
    row_sums_range(rows, out, a(slot, 4) != 0, m * index // parts, m * (index + 1) // parts)


@njit(nogil=True)
def global_avg_pool2d(x, out):
    """``out[n, c, 0, 0]`` = the mean of plane ``x[n, c]``, summed in float64."""
    planes, size = x.shape[0] * x.shape[1], x.shape[2] * x.shape[3]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    for plane in range(planes):
        base = _u(plane * size)
        total = 0.0
        for q in range(_u(size)):
            total += xf[base + q]
        of[plane] = total / size


@njit(nogil=True)
def adaptive_avg_pool2d(x, out):
    """``out[..., i, j]`` = the mean of PyTorch's adaptive bin ``(i, j)`` of ``x``: rows
    ``floor(i * H / OH) .. ceil((i + 1) * H / OH)``, and the same for columns."""
    planes, height, width = x.shape[0] * x.shape[1], x.shape[2], x.shape[3]
    out_h, out_w = out.shape[2], out.shape[3]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    for plane in range(planes):
        for i in range(out_h):
            h0, h1 = (i * height) // out_h, ((i + 1) * height + out_h - 1) // out_h
            for j in range(out_w):
                w0, w1 = (j * width) // out_w, ((j + 1) * width + out_w - 1) // out_w
                total = 0.0
                for r in range(h0, h1):
                    base = _u((plane * height + r) * width)
                    for q in range(_u(w0), _u(w1)):
                        total += xf[base + q]
                of[(plane * out_h + i) * out_w + j] = total / ((h1 - h0) * (w1 - w0))


#: What each entry point generated kernels call needs before such a kernel is compiled or
#: loaded (:mod:`vm.kernels.library` prepares it): the kind of job it shares.
NEEDS = {
    "max_pool2d_float": jobs.Needs(kinds=(jobs.MAX_POOL,)),
    "row_sums_f32": jobs.Needs(kinds=(jobs.ROW_SUMS,)),
}

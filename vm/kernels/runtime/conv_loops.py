"""Compiled loops for the convolution kernels: im2col and im2row, the depthwise direct loop,
col2im and integer matrix products.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba and the
vector shuffles of :mod:`vm.kernels.runtime.packed`.

Float convolutions call these loops from Python (:mod:`vm.kernels.runtime.convolution`, between the
threads), so those are cached on disk; integer convolution kernels (see
:mod:`vm.kernels.emit_conv`) import this module as ``cv`` and call the per-(image, group)
blocks at the end. Either way the loops compile once per process and dtype instead of
once per kernel. Arrays are C-contiguous
and indexed through flat views with unsigned offsets: numba then emits no negative-index
wraparound, and the copy loops vectorize (about 4x faster than indexing the 4-D arrays).
Its source is part of the kernel cache key.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba import uint64 as _u

from vm.kernels.runtime import callbacks, packed, window_rows
from vm.kernels.runtime.taps import is_float32
from vm.kernels.runtime.target import has_avx512


@njit(nogil=True, cache=True)
def valid_range(offset, stride, size, count):
    """The ``q`` in ``[lo, hi)`` among ``0..count-1`` with ``0 <= q * stride + offset < size``."""
    lo = 0
    if offset < 0:
        lo = (-offset + stride - 1) // stride
    last = size - 1 - offset
    hi = 0 if last < 0 else last // stride + 1
    if hi > count:
        hi = count
    if lo > hi:
        lo = hi
    return lo, hi


@njit(nogil=True, cache=True)
def im2col(x, n, c0, cg, cols, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, r0, r1):
    """Fill output rows ``r0:r1`` of ``cols`` (``cg * kh * kw``, ``out_h * out_w``) with the
    windows of channels ``c0:c0+cg`` of image ``n`` of the NCHW array ``x``; padding reads
    as 0. Disjoint row ranges may be filled by different threads."""
    _, channels, height, width = x.shape
    xf = x.reshape(x.size)
    cf = cols.reshape(cols.size)
    plane = out_h * out_w
    for c in range(cg):
        base = ((n * channels + c0 + c) * height) * width
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                off = j * dw - pl
                lo, hi = valid_range(off, sw, width, out_w)
                for r in range(r0, r1):
                    ih = r * sh - pt + i * dh
                    d0 = _u(row * plane + r * out_w)
                    if ih < 0 or ih >= height:
                        for q in range(_u(out_w)):
                            cf[d0 + q] = 0
                        continue
                    for q in range(_u(lo)):
                        cf[d0 + q] = 0
                    db = d0 + _u(lo)
                    s0 = _u(base + ih * width + off + lo * sw)
                    if sw == 1:
                        for q in range(_u(hi - lo)):
                            cf[db + q] = xf[s0 + q]
                    elif sw == 2 and is_float32(xf) and is_float32(cf) and hi - lo > 1:
                        # By shuffles: numba's strided loop is a gather per element. The
                        # last element alone, as the shuffles read one past it.
                        last = _u(hi - lo - 1)
                        packed.take_evens(xf.ctypes.data + s0 * 4, cf.ctypes.data + db * 4, last)
                        cf[db + last] = xf[s0 + 2 * last]
                    else:
                        step = _u(sw)
                        for q in range(_u(hi - lo)):
                            cf[db + q] = xf[s0 + q * step]
                    for q in range(_u(hi), _u(out_w)):
                        cf[d0 + q] = 0


@njit(nogil=True, cache=True)
def im2row(x, n, rows, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, r0, r1):
    """Fill the pixels of output rows ``r0:r1`` into ``rows`` (``out_h * out_w``,
    ``channels * kh * kw``): row ``p`` is output pixel ``p``'s window over every channel
    of image ``n`` of the NCHW array ``x``, in the (channel, kernel row, kernel column)
    order of a flattened OIHW weight; padding reads as 0. This is :func:`im2col`
    transposed, for products whose register tiles read each pixel's row along ``k``
    (:mod:`vm.kernels.runtime.packed`). Disjoint row ranges may be filled by different
    threads."""
    if kh == 3 and kw == 3:
        _im2row3(x, n, rows, sh, sw, pt, pl, dh, dw, out_h, out_w, r0, r1)
        return
    _, channels, height, width = x.shape
    xf = x.reshape(x.size)
    rf = rows.reshape(rows.size)
    plane = height * width
    depth = channels * kh * kw
    image = n * channels * plane
    for r in range(r0, r1):
        top = r * sh - pt
        for q in range(out_w):
            left = q * sw - pl
            d = _u((r * out_w + q) * depth)
            for c in range(channels):
                for i in range(kh):
                    ih = top + i * dh
                    for j in range(kw):
                        iw = left + j * dw
                        if 0 <= ih < height and 0 <= iw < width:
                            rf[d] = xf[_u(image + c * plane + ih * width + iw)]
                        else:
                            rf[d] = 0
                        d += _u(1)


#: Whether :func:`_im2row3` copies float32 windows 16 pixels at a time: with AVX-512, whose
#: masked loads and stores are single instructions. Without it they are AVX's ``vmaskmov``,
#: whose stores some AMD cores run as microcode, element by element; not measured on such a
#: host, so those keep the element-wise copy.
WINDOW_BLOCKS = has_avx512()


@njit(nogil=True, cache=True)
def _im2row3_blocks(x, n, rows, sh, sw, pt, pl, dh, dw, out_w, r0, r1):
    """:func:`_im2row3` of float32 at a column stride ``sw`` of 1 or 2: each channel's taps
    for up to 16 pixels of an output row at once. Both arrays C-contiguous (as
    :func:`im2row` takes them)."""
    _, channels, height, width = x.shape
    i64 = np.int64
    plane = i64(height * width * 4)
    depth = i64(channels * 9)
    image = i64(x.ctypes.data) + i64(n) * channels * plane
    matrix = i64(rows.ctypes.data)
    # The rows in the padding read from a row of zeros, so that the taps' masks are the same
    # for the three rows and stay in registers across the channels.
    zeros = np.zeros(width, np.float32)
    blank = i64(zeros.ctypes.data)
    for r in range(r0, r1):
        top = r * sh - pt
        o0, k0 = _tap(top, 0, 0, 0, dh, dw, height, width)
        o1, k1 = _tap(top, 0, 1, 0, dh, dw, height, width)
        o2, k2 = _tap(top, 0, 2, 0, dh, dw, height, width)
        for q0 in range(0, out_w, window_rows.PIXELS):
            valid = i64(min(window_rows.PIXELS, out_w - q0))
            first = i64(q0 * sw - pl)
            at = matrix + i64((r * out_w + q0) * depth * 4)
            channel = image
            for _ in range(channels):
                row0 = channel + i64(o0) * 4 if k0 else blank
                row1 = channel + i64(o1) * 4 if k1 else blank
                row2 = channel + i64(o2) * 4 if k2 else blank
                if sw == 1:
                    window_rows.window_rows3_s1(at, depth, row0, row1, row2, first, i64(dw),
                                                i64(width), valid)  # fmt: skip
                else:
                    window_rows.window_rows3_s2(at, depth, row0, row1, row2, first, i64(dw),
                                                i64(width), valid)  # fmt: skip
                at += i64(36)
                channel += plane
    callbacks.alive(zeros)


@njit(nogil=True, cache=True)
def _tap(top, left, i, j, dh, dw, height, width):
    """The offset of tap ``(i, j)`` of the window at ``(top, left)`` in its channel, and
    whether it lies inside the image (else the offset is 0, a safe place to read)."""
    ih, iw = top + i * dh, left + j * dw
    inside = 0 <= ih < height and 0 <= iw < width
    return _u(ih * width + iw if inside else 0), inside


@njit(nogil=True, cache=True)
def _im2row3(x, n, rows, sh, sw, pt, pl, dh, dw, out_h, out_w, r0, r1):
    """:func:`im2row` of a 3x3 window, its nine taps written out: float32 at a column
    stride of 1 or 2 by blocks of 16 pixels of a row, transposed in registers
    (:mod:`vm.kernels.runtime.window_rows`); else each tap's offset and whether it is
    inside are found once per pixel, and every channel reads the nine with a select
    instead of a branch (loops of three per channel and a branch per element ran 2-4
    times slower)."""
    if WINDOW_BLOCKS and is_float32(x) and is_float32(rows) and (sw == 1 or sw == 2):
        _im2row3_blocks(x, n, rows, sh, sw, pt, pl, dh, dw, out_w, r0, r1)
        return
    _, channels, height, width = x.shape
    xf = x.reshape(x.size)
    rf = rows.reshape(rows.size)
    plane = _u(height * width)
    depth = channels * 9
    image = _u(n * channels * height * width)
    zero = xf.dtype.type(0)
    for r in range(r0, r1):
        top = r * sh - pt
        for q in range(out_w):
            left = q * sw - pl
            o0, k0 = _tap(top, left, 0, 0, dh, dw, height, width)
            o1, k1 = _tap(top, left, 0, 1, dh, dw, height, width)
            o2, k2 = _tap(top, left, 0, 2, dh, dw, height, width)
            o3, k3 = _tap(top, left, 1, 0, dh, dw, height, width)
            o4, k4 = _tap(top, left, 1, 1, dh, dw, height, width)
            o5, k5 = _tap(top, left, 1, 2, dh, dw, height, width)
            o6, k6 = _tap(top, left, 2, 0, dh, dw, height, width)
            o7, k7 = _tap(top, left, 2, 1, dh, dw, height, width)
            o8, k8 = _tap(top, left, 2, 2, dh, dw, height, width)
            d = _u((r * out_w + q) * depth)
            at = image
            for _ in range(channels):
                rf[d] = xf[at + o0] if k0 else zero
                rf[d + _u(1)] = xf[at + o1] if k1 else zero
                rf[d + _u(2)] = xf[at + o2] if k2 else zero
                rf[d + _u(3)] = xf[at + o3] if k3 else zero
                rf[d + _u(4)] = xf[at + o4] if k4 else zero
                rf[d + _u(5)] = xf[at + o5] if k5 else zero
                rf[d + _u(6)] = xf[at + o6] if k6 else zero
                rf[d + _u(7)] = xf[at + o7] if k7 else zero
                rf[d + _u(8)] = xf[at + o8] if k8 else zero
                d += _u(9)
                at += plane


@njit(nogil=True, cache=True)
def im2col_strided(x, n, c0, cg, cols, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, r0, r1):
    """:func:`im2col` for a column stride ``sw > 1``: the input rows the output rows
    ``r0:r1`` read are first split into ``sw`` phases (every ``sw``-th element), once, so
    each window row becomes a contiguous copy instead of a strided gather (which numba
    does not vectorize); worth it when windows overlap a lot (``kw > 2 * sw``)."""
    _, channels, height, width = x.shape
    xf = x.reshape(x.size)
    cf = cols.reshape(cols.size)
    plane = out_h * out_w
    first = max(r0 * sh - pt, 0)
    last = min((r1 - 1) * sh - pt + (kh - 1) * dh + 1, height)
    per = (width + sw - 1) // sw
    phases = np.zeros((max(last - first, 0), sw, per), x.dtype)
    for c in range(cg):
        base = ((n * channels + c0 + c) * height) * width
        for ih in range(first, last):
            source = base + ih * width
            if sw == 2 and is_float32(xf) and is_float32(phases):
                # Both phases by vector shuffles (see packed.split_row).
                at = phases.ctypes.data + ((ih - first) * 2 * per) * 4
                packed.split_row(xf.ctypes.data + source * 4, at, at + per * 4, width)
                continue
            for t in range(sw):
                target = phases[ih - first, t]
                for k in range((width - t + sw - 1) // sw):
                    target[k] = xf[source + k * sw + t]
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                off = j * dw - pl
                lo, hi = valid_range(off, sw, width, out_w)
                shift, phase = off // sw, off % sw
                for r in range(r0, r1):
                    ih = r * sh - pt + i * dh
                    d0 = _u(row * plane + r * out_w)
                    if ih < 0 or ih >= height:
                        for q in range(_u(out_w)):
                            cf[d0 + q] = 0
                        continue
                    for q in range(_u(lo)):
                        cf[d0 + q] = 0
                    src = phases[ih - first, phase]
                    db = d0 + _u(lo)
                    s0 = _u(lo + shift)
                    for q in range(_u(hi - lo)):
                        cf[db + q] = src[s0 + q]
                    for q in range(_u(hi), _u(out_w)):
                        cf[d0 + q] = 0


@njit(nogil=True, cache=True)
def depthwise(x, w3, out3, n, g0, g1, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """Groups ``g0:g1`` of image ``n`` of a convolution whose groups each read one input
    channel (depthwise), as direct loops accumulating in ``out3``'s dtype; ``w3`` is
    (groups, channels per group, kh * kw) and ``out3`` (images, channels, out_h * out_w)."""
    _, channels, height, width = x.shape
    og = w3.shape[1]
    out_channels = out3.shape[1]
    xf = x.reshape(x.size)
    wf = w3.reshape(w3.size)
    of = out3.reshape(out3.size)
    plane = out_h * out_w
    for g in range(g0, g1):
        for m in range(og):
            o = g * og + m
            ob = (n * out_channels + o) * plane
            for q in range(_u(plane)):
                of[_u(ob) + q] = 0
            for i in range(kh):
                for j in range(kw):
                    wv = wf[(o * kh + i) * kw + j]
                    off = j * dw - pl
                    lo, hi = valid_range(off, sw, width, out_w)
                    if lo >= hi:
                        continue
                    count = _u(hi - lo)
                    for r in range(out_h):
                        ih = r * sh - pt + i * dh
                        if ih < 0 or ih >= height:
                            continue
                        s0 = _u(((n * channels + g) * height + ih) * width + off + lo * sw)
                        d0 = _u(ob + r * out_w + lo)
                        if sw == 1:
                            for q in range(count):
                                of[d0 + q] += wv * xf[s0 + q]
                        else:
                            step = _u(sw)
                            for q in range(count):
                                of[d0 + q] += wv * xf[s0 + q * step]


@njit(nogil=True, cache=True)
def col2im(cols, out, n, o0, og, kh, kw, sh, sw, pt, pl, dh, dw, height, width):
    """Set output channels ``o0:o0+og`` of image ``n`` to the sum of the transposed
    convolution's contributions ``cols`` (``og * kh * kw``, ``height * width``), cropped
    by the padding; contributions to one element add in kernel-offset order."""
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    of = out.reshape(out.size)
    cf = cols.reshape(cols.size)
    plane = out_h * out_w
    pixels = height * width
    for m in range(og):
        ob = (n * out_channels + o0 + m) * plane
        for q in range(_u(plane)):
            of[_u(ob) + q] = 0
        for i in range(kh):
            for j in range(kw):
                row = (m * kh + i) * kw + j
                off = j * dw - pl
                lo, hi = valid_range(off, sw, out_w, width)
                if lo >= hi:
                    continue
                count = _u(hi - lo)
                step = _u(sw)
                for h in range(height):
                    oh = h * sh + i * dh - pt
                    if oh < 0 or oh >= out_h:
                        continue
                    d0 = _u(ob + oh * out_w + off + lo * sw)
                    s0 = _u(row * pixels + h * width + lo)
                    for q in range(count):
                        of[d0 + q * step] += cf[s0 + q]


def _matmul_loops(widen):
    """Compiled ``out = a @ b`` (2-D) accumulating each row in ``widen``'s type (``np.int64``,
    ``np.uint64`` or ``np.float64``) and storing with ``out``'s dtype (integers wrap)."""

    @njit(nogil=True)
    def matmul(a, b, out):
        m, k = a.shape
        n = b.shape[1]
        acc = np.empty(n, widen)
        for i in range(m):
            acc[:] = 0
            for p in range(k):
                av = widen(a[i, p])
                for j in range(n):
                    acc[j] += av * widen(b[p, j])
            for j in range(n):
                out[i, j] = acc[j]

    return matmul


matmul_signed = _matmul_loops(np.int64)
matmul_unsigned = _matmul_loops(np.uint64)


def _conv_block(matmul):
    """The per-(image, group) step of an integer convolution: direct loops when each group
    reads one input channel (depthwise), else im2col (skipped when a 1x1 input is its own
    column matrix, signalled by an empty ``cols``) and the product with the group's
    weights by the compiled ``matmul``. (Float convolutions run through
    :func:`vm.kernels.runtime.convolution.conv_image`.)"""

    @njit(nogil=True)
    def block(x, w3, out3, cols, n, g, cg, og, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
        o0 = g * og
        if cg == 1:
            depthwise(x, w3, out3, n, g, g + 1, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w)
            return
        if cols.size == 0:
            # A 1x1 input is its own column matrix, but the loop needs it 2-D.
            columns = np.ascontiguousarray(x[n, g * cg : g * cg + cg]).reshape((cg, -1))
        else:
            im2col(x, n, g * cg, cg, cols, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, 0, out_h)
            columns = cols
        matmul(w3[g], columns, out3[n, o0 : o0 + og])

    return block


conv_block_signed = _conv_block(matmul_signed)
conv_block_unsigned = _conv_block(matmul_unsigned)


def _conv_transpose_block(matmul):
    """The per-(image, group) step of an integer transposed convolution: every input
    pixel's contribution to every (output channel, kernel offset), then col2im."""

    @njit(nogil=True)
    def block(x, w, out, cols, n, g, cg, og, kh, kw, sh, sw, pt, pl, dh, dw):
        c0 = g * cg
        height, width = x.shape[2], x.shape[3]
        weights = np.ascontiguousarray(w[c0 : c0 + cg]).reshape((cg, -1))
        pixels = np.ascontiguousarray(x[n, c0 : c0 + cg]).reshape((cg, -1))
        matmul(weights.T, pixels, cols)
        col2im(cols, out, n, g * og, og, kh, kw, sh, sw, pt, pl, dh, dw, height, width)

    return block


conv_transpose_block_signed = _conv_transpose_block(matmul_signed)
conv_transpose_block_unsigned = _conv_transpose_block(matmul_unsigned)

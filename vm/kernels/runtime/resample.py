"""Compiled loops that resample NCHW images: ``image.resize2d`` and ``nn.upsampling``.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy and numba.

Resampling is separable. Each output row and column reads one (nearest), two (linear) or
four (cubic) input rows or columns, with weights: the *tables* of an axis, made once per
call from the sizes and the operator's rules (:func:`resize_table` for ``image.resize2d``,
whose coordinates, rounding and weights are onnxruntime's, computed in float32 as it does;
:func:`upsampling_table` for TVM's ``nn.upsampling``, in float64). One engine,
:func:`resample_planes`, applies the tables of both axes to planes (image * channel): each
input row the outputs read is interpolated along its columns once, then each output row
is a contiguous weighted sum of such rows, a loop LLVM vectorizes. The arithmetic happens
in the weights' type. Nearest sampling copies without arithmetic (any dtype), and an
output row that samples the same input row as the row before copies that row. Float32
outputs from :data:`SPLIT` elements are shared by planes with the workers polling
(job kind ``RESAMPLE``), which read the tables at their addresses; fewer planes than
:data:`UNITS` (an RGB image) are shared by bands of output rows.

Generated kernels (:mod:`vm.kernels.emit_image`, :mod:`vm.kernels.emit_spatial`) import
this module as ``rs``; the coordinate, method and rounding codes they pass are positions
in :mod:`vm.kernels.emit_image`'s tuples. Its source is part of the kernel cache key.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit

from vm.kernels.runtime import jobs
from vm.kernels.runtime.packed import doubles, floats, int64s
from vm.kernels.runtime.pool_loops import float32_in_c_order

#: Output elements from which a float32 resampling is shared between the threads by planes.
SPLIT = 1 << 15
#: Shared work comes in at least this many units: planes, or with fewer planes (an RGB
#: image) bands of each plane's output rows, so that every thread gets a part.
UNITS = 8

# Methods: positions in emit_image.RESIZE_METHODS.
NEAREST, LINEAR, CUBIC = 0, 1, 2
# Coordinate transformations: positions in emit_image.COORDINATE_MODES.
HALF_PIXEL, ALIGN_CORNERS, ASYMMETRIC, PYTORCH_HALF_PIXEL = 0, 1, 2, 3
TF_HALF_PIXEL_FOR_NN, TF_CROP_AND_RESIZE, HALF_PIXEL_SYMMETRIC = 4, 5, 6
# Nearest rounding: positions in emit_image.ROUNDING_METHODS ("" is resolved before).
ROUND, FLOOR, CEIL, ROUND_PREFER_FLOOR, ROUND_PREFER_CEIL = 1, 2, 3, 4, 5

_f = np.float32


@njit(nogil=True)
def _coordinate(coord, i, size, out_n, start, end):
    """The float32 input coordinate output index ``i`` of an axis samples, operation by
    operation as onnxruntime computes it (so that ties round the same way)."""
    x = _f(i)
    scale = _f(out_n) / _f(size)
    if coord == HALF_PIXEL or (coord == PYTORCH_HALF_PIXEL and out_n > 1):
        return (x + _f(0.5)) / scale - _f(0.5)
    if coord == PYTORCH_HALF_PIXEL:
        return _f(0.0)
    if coord == ALIGN_CORNERS:
        return x * _f(size - 1) / _f(out_n - 1) if out_n > 1 else _f(0.0)
    if coord == ASYMMETRIC:
        return x / scale
    if coord == TF_HALF_PIXEL_FOR_NN:
        return (x + _f(0.5)) / scale
    if coord == HALF_PIXEL_SYMMETRIC:
        adjustment = _f(out_n) / (scale * _f(size))
        offset = _f(size) / _f(2) * (_f(1) - adjustment)
        return offset + (x + _f(0.5)) / scale - _f(0.5)
    if out_n == 1:  # tf_crop_and_resize
        return _f(0.5) * (start + end) * _f(size - 1)
    return start * _f(size - 1) + x * (end - start) * _f(size - 1) / _f(out_n - 1)


@njit(nogil=True)
def _rounded(c, rounding):
    """The float32 coordinate ``c`` rounded to an index by ``rounding`` (before clamping)."""
    low = np.floor(c)
    if rounding == FLOOR:
        return low
    if rounding == CEIL:
        return np.ceil(c)
    if c - low == _f(0.5):
        if rounding == ROUND_PREFER_FLOOR:
            return low
        if rounding == ROUND_PREFER_CEIL or c > 0:
            return np.ceil(c)
        return low
    return np.floor(c + _f(0.5))


@njit(nogil=True)
def _cubic_outer(a, t):
    """Keys' weight of the taps one and a half pixels out, at distance ``t`` + 1."""
    u = t + _f(1)
    return ((_f(a) * u - _f(5 * a)) * u + _f(8 * a)) * u - _f(4 * a)


@njit(nogil=True)
def _cubic_inner(a, t):
    """Keys' weight of the taps within a pixel, at distance ``t``."""
    return ((_f(a + 2) * t - _f(a + 3)) * t) * t + _f(1)


# numpy's error model: with cubic_exclude, an output sampling far outside the input (only
# tf_crop_and_resize's, which are filled) has no tap left and 0 / 0 weights, not an error.
@njit(nogil=True, error_model="numpy")
def resize_table(size, out_n, method, coord, rounding, alpha, exclude, start, end):
    """The input indices and float32 weights of every output index of one axis of an
    ``image.resize2d``, and which outputs sample outside the input.

    Returns
    -------
    (indices, weights, outside)
        int64 and float32 arrays of shape (taps, ``out_n``), indices clamped into the
        axis, and a bool vector (``tf_crop_and_resize`` only; all false otherwise).
    """
    last = size - 1
    taps = 1 if method == NEAREST else (2 if method == LINEAR else 4)
    indices = np.empty((taps, out_n), np.int64)
    weights = np.ones((taps, out_n), np.float32)
    outside = np.zeros(out_n, np.bool_)
    for i in range(out_n):
        c = _coordinate(coord, i, size, out_n, _f(start), _f(end))
        if coord == TF_CROP_AND_RESIZE:
            outside[i] = c < 0 or c > last
        if method == NEAREST:
            indices[0, i] = min(max(np.int64(_rounded(c, rounding)), 0), last)
        elif method == LINEAR:
            clamped = min(max(c, _f(0)), _f(last))
            low = np.floor(clamped)
            frac = clamped - low
            indices[0, i] = np.int64(low)
            indices[1, i] = min(np.int64(low) + 1, last)
            weights[0, i] = _f(1) - frac
            weights[1, i] = frac
        else:
            low = np.floor(c)
            s = c - low
            t = _f(1) - s
            weights[0, i] = _cubic_outer(alpha, s)
            weights[1, i] = _cubic_inner(alpha, s)
            weights[2, i] = _cubic_inner(alpha, t)
            weights[3, i] = _cubic_outer(alpha, t)
            total = _f(0)
            for k in range(4):
                raw = np.int64(low) - 1 + k
                if exclude and (raw < 0 or raw > last):
                    weights[k, i] = _f(0)
                total += weights[k, i]
                indices[k, i] = min(max(raw, 0), last)
            if exclude:
                for k in range(4):
                    weights[k, i] = weights[k, i] / total
    return indices, weights, outside


@njit(nogil=True)
def upsampling_table(size, out_n, align_corners, nearest):
    """The input indices and float64 weights of every output index of one axis of an
    ``nn.upsampling`` (TVM's coordinates; nearest rounds ``floor(c + 1e-5)``, ``round``
    with ``align_corners``): one tap for nearest, two for bilinear."""
    taps = 1 if nearest else 2
    indices = np.empty((taps, out_n), np.int64)
    weights = np.ones((taps, out_n), np.float64)
    for i in range(out_n):
        if align_corners:
            c = i * ((size - 1) / (out_n - 1)) if out_n > 1 else 0.0
        else:
            c = i * (size / out_n)
        if nearest:
            index = np.rint(c) if align_corners else np.floor(c + 1e-5)
            indices[0, i] = min(max(np.int64(index), 0), size - 1)
            continue
        low = np.floor(c)
        weight = c - low
        indices[0, i] = min(max(np.int64(low), 0), size - 1)
        indices[1, i] = min(max(np.int64(low) + 1, 0), size - 1)
        weights[0, i] = 1 - weight
        weights[1, i] = weight
    return indices, weights


@njit(nogil=True)
def upsample_nearest(x, out, align_corners):
    """``out`` = ``x`` sampled at each output pixel's nearest input pixel (``nn.upsampling``)."""
    rows, row_w = upsampling_table(x.shape[2], out.shape[2], align_corners, True)
    cols, col_w = upsampling_table(x.shape[3], out.shape[3], align_corners, True)
    resample(x, out, rows, row_w, cols, col_w, True)


@njit(nogil=True)
def upsample_bilinear(x, out, align_corners):
    """``out`` = ``x`` interpolated between the two nearest rows and columns, in float64
    (``nn.upsampling``)."""
    rows, row_w = upsampling_table(x.shape[2], out.shape[2], align_corners, False)
    cols, col_w = upsampling_table(x.shape[3], out.shape[3], align_corners, False)
    resample(x, out, rows, row_w, cols, col_w, False)


@njit(nogil=True)
def resize2d(x, out, zero, method, coord, rounding, alpha, exclude, roi, fill):
    """``out`` = NCHW ``x`` resized to ``out``'s height and width (``image.resize2d``).

    ``zero`` is a zero of the type to interpolate in (float32, or float64 for float64
    data); ``roi`` the (start_h, start_w, end_h, end_w) of ``tf_crop_and_resize``, whose
    outputs sampling outside the input are ``fill`` (of ``out``'s type)."""
    if out.size == 0:
        return
    rows, row_w, out_rows = resize_table(
        x.shape[2], out.shape[2], method, coord, rounding, alpha, exclude, roi[0], roi[2]
    )
    cols, col_w, out_cols = resize_table(
        x.shape[3], out.shape[3], method, coord, rounding, alpha, exclude, roi[1], roi[3]
    )
    row_weights = np.full(row_w.shape, zero)
    row_weights[:] = row_w
    col_weights = np.full(col_w.shape, zero)
    col_weights[:] = col_w
    resample(x, out, rows, row_weights, cols, col_weights, method == NEAREST)
    if coord != TF_CROP_AND_RESIZE:
        return
    for n in range(out.shape[0]):
        for c in range(out.shape[1]):
            for r in range(out.shape[2]):
                for q in range(out.shape[3]):
                    if out_rows[r] or out_cols[q]:
                        out[n, c, r, q] = fill


@njit(nogil=True)
def resample(x, out, rows, row_w, cols, col_w, nearest):
    """:func:`resample_planes` over every plane, shared with the workers when it pays."""
    planes = x.shape[0] * x.shape[1]
    if out.size >= SPLIT and float32_in_c_order(x, out):
        width = 0 if nearest else row_w.itemsize
        bands = min(-(-UNITS // planes), out.shape[2]) if planes < UNITS else 1
        arguments = (np.int64(x.ctypes.data), x.shape[0], x.shape[1], x.shape[2], x.shape[3],
                     np.int64(out.ctypes.data), out.shape[2], out.shape[3], rows.shape[0],
                     np.int64(rows.ctypes.data), np.int64(row_w.ctypes.data),
                     np.int64(cols.ctypes.data), np.int64(col_w.ctypes.data),
                     np.int64(width), np.int64(bands))  # fmt: skip
        if jobs.share(jobs.RESAMPLE, planes * bands, arguments, out.size * 4):
            return
    resample_planes(x, out, rows, row_w, cols, col_w, nearest, 1, 0, planes)


@njit(nogil=True, cache=True)
def resample_planes(x, out, rows, row_w, cols, col_w, nearest, bands, first, last):
    """Units ``first:last`` of ``x`` resampled into ``out`` by the tables of its rows and
    columns (indices and weights, shape (taps, output size)): unit ``u`` is band
    ``u % bands`` of the ``bands`` equal bands of output rows of plane ``u // bands``
    (planes are image * channel).

    The products and sums per output pixel are those of interpolating its inputs along
    the columns first, then the rows, taps in order; so results are bit for bit those of
    interpolating each pixel on its own that way. Per output element the loops of
    ``nn.upsampling`` took about 2 ns before they shared tables and rows, the coordinates
    worked out again for every row of every plane and every interpolation read at four
    gathered places (AMD EPYC Zen 4)."""
    height, width = x.shape[2], x.shape[3]
    out_h, out_w = out.shape[2], out.shape[3]
    taps = rows.shape[0]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    if nearest:
        # Doubling the width (the 2x nearest upsampling of feature pyramids) is a store of
        # each input value twice, which LLVM vectorizes as interleaved stores; the gather
        # through the column table took three times as long (AMD EPYC Zen 4).
        doubled = out_w == 2 * width
        for q in range(out_w if doubled else 0):
            doubled = doubled and cols[0, q] == q >> 1
        for unit in range(first, last):
            plane, r0, r1 = _band(unit, bands, out_h)
            for r in range(r0, r1):
                d0 = (plane * out_h + r) * out_w
                target = of[d0 : d0 + out_w]
                if r > r0 and rows[0, r] == rows[0, r - 1]:
                    previous = of[d0 - out_w : d0]
                    for q in range(out_w):
                        target[q] = previous[q]
                    continue
                s0 = (plane * height + rows[0, r]) * width
                source = xf[s0 : s0 + width]
                if doubled:
                    for j in range(width):
                        value = source[j]
                        target[2 * j] = value
                        target[2 * j + 1] = value
                else:
                    for q in range(out_w):
                        target[q] = source[cols[0, q]]
        return
    needed = np.zeros(height, np.bool_)
    across = np.empty((height, out_w), row_w.dtype)
    for unit in range(first, last):
        plane, r0, r1 = _band(unit, bands, out_h)
        if bands > 1 or unit == first:  # the input rows this band reads
            needed[:] = False
            for k in range(taps):
                for r in range(r0, r1):
                    needed[rows[k, r]] = True
        for i in range(height):
            if not needed[i]:
                continue
            row = xf[(plane * height + i) * width : (plane * height + i + 1) * width]
            line = across[i]
            if taps == 2:
                for q in range(out_w):
                    line[q] = row[cols[0, q]] * col_w[0, q] + row[cols[1, q]] * col_w[1, q]
            else:
                for q in range(out_w):
                    line[q] = (
                        (row[cols[0, q]] * col_w[0, q] + row[cols[1, q]] * col_w[1, q])
                        + row[cols[2, q]] * col_w[2, q]
                    ) + row[cols[3, q]] * col_w[3, q]
        for r in range(r0, r1):
            target = of[(plane * out_h + r) * out_w : (plane * out_h + r + 1) * out_w]
            a, b, wa, wb = across[rows[0, r]], across[rows[1, r]], row_w[0, r], row_w[1, r]
            if taps == 2:
                for q in range(out_w):
                    target[q] = a[q] * wa + b[q] * wb
            else:
                c, d, wc, wd = across[rows[2, r]], across[rows[3, r]], row_w[2, r], row_w[3, r]
                for q in range(out_w):
                    target[q] = ((a[q] * wa + b[q] * wb) + c[q] * wc) + d[q] * wd


@njit(nogil=True, inline="always")
def _band(unit, bands, out_h):
    """The plane and the output rows ``r0:r1`` of ``unit`` (no division for whole planes)."""
    if bands == 1:
        return unit, 0, out_h
    band = unit % bands
    return unit // bands, out_h * band // bands, out_h * (band + 1) // bands


@jobs.chunk(jobs.RESAMPLE)
def _resample_chunk(slot, index, parts):
    """Units ``index`` of ``parts`` of the float32 resampling :func:`resample` shares."""
    a = jobs.argument
    x_shape = (a(slot, 1), a(slot, 2), a(slot, 3), a(slot, 4))
    x = carray(floats(a(slot, 0)), x_shape)
    out_h, out_w = a(slot, 6), a(slot, 7)
    out = carray(floats(a(slot, 5)), (x_shape[0], x_shape[1], out_h, out_w))
    taps = a(slot, 8)
    rows = carray(int64s(a(slot, 9)), (taps, out_h))
    cols = carray(int64s(a(slot, 11)), (taps, out_w))
    bands = a(slot, 14)
    units = x_shape[0] * x_shape[1] * bands
    lo, hi = units * index // parts, units * (index + 1) // parts
    if a(slot, 13) == 8:
        row_w = carray(doubles(a(slot, 10)), (taps, out_h))
        col_w = carray(doubles(a(slot, 12)), (taps, out_w))
        resample_planes(x, out, rows, row_w, cols, col_w, False, bands, lo, hi)
    else:
        row_w32 = carray(floats(a(slot, 10)), (taps, out_h))
        col_w32 = carray(floats(a(slot, 12)), (taps, out_w))
        resample_planes(x, out, rows, row_w32, cols, col_w32, a(slot, 13) == 0, bands, lo, hi)


#: What each entry point generated kernels call needs before such a kernel is compiled or
#: loaded (:mod:`vm.kernels.library` prepares it): the kind of job it shares.
NEEDS = {
    "upsample_nearest": jobs.Needs(kinds=(jobs.RESAMPLE,)),
    "upsample_bilinear": jobs.Needs(kinds=(jobs.RESAMPLE,)),
    "resize2d": jobs.Needs(kinds=(jobs.RESAMPLE,)),
}

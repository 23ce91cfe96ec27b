"""Compiled transforms of the Winograd F(2x2, 3x3) convolution.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy and numba.

A 3x3, stride-1 convolution computes each 2x2 output tile from a 4x4 input tile with 16
multiplications per (input, output) channel pair instead of 36: with ``U = G g G^T`` the transformed
3x3 kernel, ``V = B^T d B`` the transformed input tile and ``A^T (U * V) A`` the output tile, the
sum over input channels becomes 16 independent matrix products ``M[k] = U[k] @ V[k]`` ((out, in) @
(in, tiles)), done in :mod:`vm.kernels.runtime.convolution` by OpenBLAS, or by the register
tiles where the compiler packed each plane of ``U`` in panels. The matrices are Lavin and
Gray's (2016)::

    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

The transforms here each fill a range of channels, so threads can share them. They are
called from Python (object-mode code in the kernels), so they are cached on disk. Its
source is part of the kernel cache key.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def transform_weights(w, u, o0, o1):
    """``u[:, o, c] = G w[o, c] G^T`` (flattened 4x4) for output channels ``o0:o1``."""
    channels = w.shape[1]
    for o in range(o0, o1):
        for c in range(channels):
            for r in range(4):
                # Row r of G g (three values), then that row times G^T.
                if r == 0:
                    a, b, e = w[o, c, 0, 0], w[o, c, 0, 1], w[o, c, 0, 2]
                elif r == 3:
                    a, b, e = w[o, c, 2, 0], w[o, c, 2, 1], w[o, c, 2, 2]
                else:
                    sign = 1.0 if r == 1 else -1.0
                    a = 0.5 * (w[o, c, 0, 0] + sign * w[o, c, 1, 0] + w[o, c, 2, 0])
                    b = 0.5 * (w[o, c, 0, 1] + sign * w[o, c, 1, 1] + w[o, c, 2, 1])
                    e = 0.5 * (w[o, c, 0, 2] + sign * w[o, c, 1, 2] + w[o, c, 2, 2])
                u[4 * r, o, c] = a
                u[4 * r + 1, o, c] = 0.5 * (a + b + e)
                u[4 * r + 2, o, c] = 0.5 * (a - b + e)
                u[4 * r + 3, o, c] = e


@njit(nogil=True, cache=True)
def _pad_channel(x, n, c, pt, pl, padded):
    """Channel ``c`` of image ``n`` into ``padded`` at ``(pt, pl)``, zeros around it, so
    that every tile reads inside the buffer."""
    height, width = x.shape[2], x.shape[3]
    padded[:] = 0
    rows = min(height, padded.shape[0] - pt)
    span = min(width, padded.shape[1] - pl)
    for i in range(rows):
        for j in range(span):
            padded[i + pt, j + pl] = x[n, c, i, j]


@njit(nogil=True, cache=True)
def tile_starts(tiles_h, tiles_w, tile, width):
    """Where each input tile starts in a channel's padded plane of ``width`` columns,
    flattened (tile ``th * tiles_w + tw`` at row ``tile * th``, column ``tile * tw``).

    The transforms loop over every tile of a channel at once, reading through these, not
    over the tiles of one row: a row of 14 or 7 tiles is shorter than a vector of 16 lanes,
    so those loops ran as scalar code. AMD EPYC Zen 5, one thread, F(4x4, 3x3): the input
    transform of 64 channels at 56x56 331 -> 263 us, 128 at 28x28 214 -> 140, 64 at
    112x112 1458 -> 1044; the output transform 193 -> 90, 137 -> 44, 631 -> 354; F(2x2,
    3x3)'s output transform of 256 channels at 14x14 83 -> 27 (the same values, bit for
    bit)."""
    starts = np.empty(tiles_h * tiles_w, np.int64)
    for th in range(tiles_h):
        for tw in range(tiles_w):
            starts[th * tiles_w + tw] = tile * (th * width + tw)
    return starts


@njit(nogil=True, cache=True)
def pixel_sources(out_h, out_w, tile, tiles_w):
    """For each output pixel of a channel, flattened, where its value lies among the
    channel's ``tile * tile`` rows of tile outputs (row ``tile * i + k`` holds the pixel
    ``(i, k)`` of every tile): the output transforms compute whole rows of tiles, then
    gather each output row from them (see :func:`tile_starts`)."""
    tiles = -(-out_h // tile) * tiles_w
    sources = np.empty(out_h * out_w, np.int64)
    for r in range(out_h):
        for col in range(out_w):
            row = (r % tile) * tile + col % tile
            sources[r * out_w + col] = row * tiles + (r // tile) * tiles_w + col // tile
    return sources


@njit(nogil=True, cache=True)
def transform_input(x, n, c0, c1, pt, pl, tiles_h, tiles_w, v):
    """``v[:, c, tile] = B^T d B`` (flattened 4x4) for channels ``c0:c1`` of image ``n``,
    ``d`` the 4x4 input tile starting at ``(2 * row - pt, 2 * col - pl)`` (0 outside).

    Each tile row is transformed in two passes of loops over its tiles (columns, then
    rows), which vectorize, instead of one 4x4 tile at a time. Unlike the other
    transforms, this one keeps loops over a row of tiles (see :func:`tile_starts`): its
    stride-2 reads vectorize without gathers, and over all tiles at once it ran 64
    channels at 56x56 in 326 us against 202 (14x14 90 against 110)."""
    padded = np.zeros((2 * tiles_h + 2, 2 * tiles_w + 2), v.dtype)
    cols = np.empty((4, 4, tiles_w), v.dtype)
    for c in range(c0, c1):
        _pad_channel(x, n, c, pt, pl, padded)
        for th in range(tiles_h):
            for a in range(4):
                row = padded[2 * th + a]
                for tw in range(tiles_w):
                    d0, d1 = row[2 * tw], row[2 * tw + 1]
                    d2, d3 = row[2 * tw + 2], row[2 * tw + 3]
                    cols[a, 0, tw] = d0 - d2
                    cols[a, 1, tw] = d1 + d2
                    cols[a, 2, tw] = d2 - d1
                    cols[a, 3, tw] = d1 - d3
            base = th * tiles_w
            for j in range(4):
                for tw in range(tiles_w):
                    s0, s1 = cols[0, j, tw], cols[1, j, tw]
                    s2, s3 = cols[2, j, tw], cols[3, j, tw]
                    v[j, c, base + tw] = s0 - s2
                    v[4 + j, c, base + tw] = s1 + s2
                    v[8 + j, c, base + tw] = s2 - s1
                    v[12 + j, c, base + tw] = s1 - s3


@njit(nogil=True, cache=True)
def transform_output(m, out3, n, o0, o1, tiles_w, out_h, out_w):
    """Output channels ``o0:o1`` of image ``n``: each 2x2 tile ``A^T m A`` from the products
    ``m`` (16, out channels, tiles), written into ``out3`` (images, channels, out_h * out_w)
    where it lies inside the output."""
    tiles = (out_h + 1) // 2 * tiles_w
    sources = pixel_sources(out_h, out_w, 2, tiles_w)
    part = np.empty((2, 4, tiles), m.dtype)
    y = np.empty((4, tiles), m.dtype)
    flat = y.reshape(y.size)
    for o in range(o0, o1):
        # A^T applied down each column j of the tiles: two rows per tile ...
        for j in range(4):
            for t in range(tiles):
                m1, m2 = m[4 + j, o, t], m[8 + j, o, t]
                part[0, j, t] = m[j, o, t] + m1 + m2
                part[1, j, t] = m1 - m2 - m[12 + j, o, t]
        # ... then along each of those rows.
        for i in range(2):
            for t in range(tiles):
                y[2 * i, t] = part[i, 0, t] + part[i, 1, t] + part[i, 2, t]
                y[2 * i + 1, t] = part[i, 1, t] - part[i, 2, t] - part[i, 3, t]
        for q in range(out_h * out_w):
            out3[n, o, q] = flat[sources[q]]


# --- F(4x4, 3x3) -------------------------------------------------------------------------------
#
# Each 4x4 output tile from a 6x6 input tile with 36 multiplications per channel pair instead
# of 144 (2.25 times fewer than F(2x2, 3x3) needs per output), and 6x6 tiles overlap less,
# so the transforms touch fewer values per output too. The weights arrive transformed
# (``nn.contrib_conv2d_winograd_weight_transform`` with ``tile_size=4``, folded at compile
# time). With the interpolation points 0, 1, -1, 2, -2 and infinity (Lavin and Gray):
#
#     B^T = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
#            [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
#     A^T = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]


@njit(nogil=True, cache=True)
def _of(dtype, value):
    """``value`` in the data's own type: a float literal would promote float32 to float64."""
    return np.full(1, value, dtype)[0]


@njit(nogil=True, cache=True)
def transform_input4(x, n, c0, c1, pt, pl, tiles_h, tiles_w, v):
    """``v[:, c, tile] = B^T d B`` (flattened 6x6) for channels ``c0:c1`` of image ``n``,
    ``d`` the 6x6 input tile starting at ``(4 * row - pt, 4 * col - pl)`` (0 outside),
    in two passes over all of a channel's tiles (see :func:`tile_starts`)."""
    width = 4 * tiles_w + 2
    padded = np.zeros((4 * tiles_h + 2, width), v.dtype)
    flat = padded.reshape(padded.size)
    tiles = tiles_h * tiles_w
    starts = tile_starts(tiles_h, tiles_w, 4, width)
    cols = np.empty((6, 6, tiles), v.dtype)
    two, four, five = _of(v.dtype, 2.0), _of(v.dtype, 4.0), _of(v.dtype, 5.0)
    for c in range(c0, c1):
        _pad_channel(x, n, c, pt, pl, padded)
        # B^T applied along each of the tiles' six rows ...
        for a in range(6):
            row = a * width
            for t in range(tiles):
                b = starts[t] + row
                d0, d1, d2 = flat[b], flat[b + 1], flat[b + 2]
                d3, d4, d5 = flat[b + 3], flat[b + 4], flat[b + 5]
                cols[a, 0, t] = four * d0 - five * d2 + d4
                cols[a, 1, t] = -four * (d1 + d2) + d3 + d4
                cols[a, 2, t] = four * (d1 - d2) - d3 + d4
                cols[a, 3, t] = two * (d3 - d1) - d2 + d4
                cols[a, 4, t] = two * (d1 - d3) - d2 + d4
                cols[a, 5, t] = four * d1 - five * d3 + d5
        # ... then down each of their six columns.
        for j in range(6):
            for t in range(tiles):
                s0, s1, s2 = cols[0, j, t], cols[1, j, t], cols[2, j, t]
                s3, s4, s5 = cols[3, j, t], cols[4, j, t], cols[5, j, t]
                v[j, c, t] = four * s0 - five * s2 + s4
                v[6 + j, c, t] = -four * (s1 + s2) + s3 + s4
                v[12 + j, c, t] = four * (s1 - s2) - s3 + s4
                v[18 + j, c, t] = two * (s3 - s1) - s2 + s4
                v[24 + j, c, t] = two * (s1 - s3) - s2 + s4
                v[30 + j, c, t] = four * s1 - five * s3 + s5


@njit(nogil=True, cache=True)
def transform_output4(m, out3, n, o0, o1, tiles_w, out_h, out_w):
    """Output channels ``o0:o1`` of image ``n``: each 4x4 tile ``A^T m A`` from the products
    ``m`` (36, out channels, tiles), written into ``out3`` (images, channels, out_h * out_w)
    where it lies inside the output."""
    tiles = (out_h + 3) // 4 * tiles_w
    sources = pixel_sources(out_h, out_w, 4, tiles_w)
    part = np.empty((4, 6, tiles), m.dtype)
    y = np.empty((16, tiles), m.dtype)
    flat = y.reshape(y.size)
    two, four, eight = _of(m.dtype, 2.0), _of(m.dtype, 4.0), _of(m.dtype, 8.0)
    for o in range(o0, o1):
        # A^T applied down each column j of the tiles: four rows per tile ...
        for j in range(6):
            for t in range(tiles):
                m0, m1 = m[j, o, t], m[6 + j, o, t]
                m2, m3 = m[12 + j, o, t], m[18 + j, o, t]
                m4, m5 = m[24 + j, o, t], m[30 + j, o, t]
                part[0, j, t] = m0 + m1 + m2 + m3 + m4
                part[1, j, t] = m1 - m2 + two * (m3 - m4)
                part[2, j, t] = m1 + m2 + four * (m3 + m4)
                part[3, j, t] = m1 - m2 + eight * (m3 - m4) + m5
        # ... then along each of those rows.
        for i in range(4):
            for t in range(tiles):
                p0, p1, p2 = part[i, 0, t], part[i, 1, t], part[i, 2, t]
                p3, p4, p5 = part[i, 3, t], part[i, 4, t], part[i, 5, t]
                y[4 * i, t] = p0 + p1 + p2 + p3 + p4
                y[4 * i + 1, t] = p1 - p2 + two * (p3 - p4)
                y[4 * i + 2, t] = p1 + p2 + four * (p3 + p4)
                y[4 * i + 3, t] = p1 - p2 + eight * (p3 - p4) + p5
        for q in range(out_h * out_w):
            out3[n, o, q] = flat[sources[q]]


# --- the weight transform as an operator -------------------------------------------------------


@njit(nogil=True, cache=True)
def weight_transform(w, u, tile):
    """``u[a, b, o, i] = (G w[o, i] G^T)[a, b]`` for F(2x2, 3x3) (``tile`` 2) or F(4x4, 3x3)
    (``tile`` 4), summed in float64: ``nn.contrib_conv2d_winograd_weight_transform`` when
    its weight is not a constant the compiler folds it on."""
    alpha = tile + 2
    g = np.zeros((alpha, 3))
    if tile == 2:
        g[0, 0] = 1.0
        g[1, 0], g[1, 1], g[1, 2] = 0.5, 0.5, 0.5
        g[2, 0], g[2, 1], g[2, 2] = 0.5, -0.5, 0.5
        g[3, 2] = 1.0
    else:
        g[0, 0] = 0.25
        g[1, 0], g[1, 1], g[1, 2] = -1.0 / 6, -1.0 / 6, -1.0 / 6
        g[2, 0], g[2, 1], g[2, 2] = -1.0 / 6, 1.0 / 6, -1.0 / 6
        g[3, 0], g[3, 1], g[3, 2] = 1.0 / 24, 1.0 / 12, 1.0 / 6
        g[4, 0], g[4, 1], g[4, 2] = 1.0 / 24, -1.0 / 12, 1.0 / 6
        g[5, 2] = 1.0
    half = np.empty((alpha, 3))
    for o in range(w.shape[0]):
        for i in range(w.shape[1]):
            for a in range(alpha):
                for s in range(3):
                    total = 0.0
                    for r in range(3):
                        total += g[a, r] * w[o, i, r, s]
                    half[a, s] = total
            for a in range(alpha):
                for b in range(alpha):
                    total = 0.0
                    for s in range(3):
                        total += half[a, s] * g[b, s]
                    u[a, b, o, i] = total

"""Direct loops for depthwise and narrow grouped float convolutions (NCHW data, OIHW weights).

Runtime layer (``vm.kernels``); imports numpy and numba only. The generated kernels call
these functions (as ``dwc``) from :mod:`vm.kernels.emit_conv` for every ``nn.conv2d`` with
``groups > 1`` whose groups read few input channels each.

A depthwise layer does ``kh * kw`` multiply-adds per output element and reads each input
element about as often, so it is bound by loads, not by arithmetic: per group and image,
an im2col matrix plus a product (the ungrouped path) moves ``kh * kw`` times the data for
a product too thin for BLAS to pay. Here each group's input channels are first copied into
a zero-bordered workspace, split by column phase for the stride (phase ``p`` holds padded
columns ``p, p + sw, p + 2 sw, ...``), so that every tap of every output row reads a
contiguous run of the workspace: the innermost loop runs along an output row without
bounds checks or strided loads, and LLVM vectorizes it at the host's vector width (numba
compiles for the CPU it runs on). 3x3 kernels (most depthwise layers) sum all nine taps
per output element in registers; kernels 3 or 5 wide sum one row of taps at a time; other
sizes take one tap at a time. Depthwise layers with short output rows (MobileNet's 7x7
stages) instead run channels-last (:func:`image_channels_last`), the innermost
loop across channels. The caller applies the fused epilogue to each group's
output channels right after :func:`group_image` returns (to the image after
:func:`image_channels_last`), while they are in cache.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba import uint64 as _u


@njit(nogil=True, cache=True)
def _geometry(kh, kw, sh, sw, dh, dw, out_h, out_w):
    """Rows of the padded input the output reads, and the width of one column phase."""
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_w - 1) * sw + (kw - 1) * dw + 1
    return rows, (cols + sw - 1) // sw


@njit(nogil=True, cache=True)
def workspace_size(cg, kh, kw, sh, sw, dh, dw, out_h, out_w):
    """Elements of the workspace :func:`group_image` needs for ``cg`` channels per group.

    Parameters
    ----------
    cg : int
        Input channels per group.
    kh, kw, sh, sw, dh, dw : int
        Kernel size, strides and dilation.
    out_h, out_w : int
        Output height and width.

    Returns
    -------
    int
        The size of the flat, zero-filled array to pass as ``pad``.
    """
    rows, phase = _geometry(kh, kw, sh, sw, dh, dw, out_h, out_w)
    return cg * rows * sw * phase


@njit(nogil=True, cache=True)
def _fill(x, pad, n, g, cg, sh, sw, pt, pl, rows, phase):
    """Copy group ``g``'s input channels of image ``n`` into the interior of ``pad``.

    Only interior positions are written, the same ones for every group, so the border
    stays as zero as the caller made it.
    """
    _, channels, height, width = x.shape
    xf = x.reshape(x.size)
    row_len = sw * phase
    for c in range(cg):
        src_plane = (n * channels + g * cg + c) * height
        for pr in range(rows):
            ih = pr - pt
            if ih < 0 or ih >= height:
                continue
            src = (src_plane + ih) * width
            dst = (c * rows + pr) * row_len
            for p in range(sw):
                # Padded column k * sw + p is input column k * sw + p - pl.
                k0 = max(0, -((p - pl) // sw))
                k1 = min(phase, -((p - pl - width) // sw))
                if k0 >= k1:
                    continue
                # Unsigned indices: numba then needs no negative-index wraparound, which
                # would keep LLVM from vectorizing.
                s0 = _u(src + k0 * sw + p - pl)
                d0 = _u(dst + p * phase + k0)
                count = _u(k1 - k0)
                if sw == 1:
                    for k in range(count):
                        pad[d0 + k] = xf[s0 + k]
                else:
                    step = _u(sw)
                    for k in range(count):
                        pad[d0 + k] = xf[s0 + k * step]


@njit(nogil=True, cache=True)
def group_image(x, w3, out3, pad, n, g, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """Output channels of group ``g`` of image ``n`` of a grouped float convolution.

    Parameters
    ----------
    x : ndarray
        Data, ``(images, channels, height, width)``, in the compute dtype.
    w3 : ndarray
        Weight viewed as ``(groups, out channels per group, cg * kh * kw)``.
    out3 : ndarray
        Output viewed as ``(images, out channels, out_h * out_w)``; group ``g``'s channels
        of image ``n`` are overwritten.
    pad : ndarray
        Flat workspace of :func:`workspace_size` elements, zero wherever a previous call
        did not write (zero-filled once per kernel call is enough).
    n, g : int
        Image and group.
    kh, kw, sh, sw, pt, pl, dh, dw : int
        Kernel size, strides, top and left padding, dilation.
    out_h, out_w : int
        Output height and width.
    """
    _, og, k = w3.shape
    cg = k // (kh * kw)
    rows, phase = _geometry(kh, kw, sh, sw, dh, dw, out_h, out_w)
    row_len = sw * phase
    _fill(x, pad, n, g, cg, sh, sw, pt, pl, rows, phase)
    wf = w3.reshape(w3.size)
    of = out3.reshape(out3.size)
    out_channels = out3.shape[1]
    plane = out_h * out_w
    # Where tap column j starts within a padded row (its phase, then its shift).
    shifts = np.empty(kw, np.int64)
    for j in range(kw):
        shifts[j] = ((j * dw) % sw) * phase + (j * dw) // sw
    for m in range(og):
        o = g * og + m
        ob = (n * out_channels + o) * plane
        for q in range(_u(plane)):
            of[_u(ob) + q] = 0
        for c in range(cg):
            wb = (o * cg + c) * kh * kw
            if kh == 3 and kw == 3:
                _taps3x3(pad, wf, of, wb, shifts, c, rows, row_len, ob, sh, dh, out_h, out_w)
                continue
            width = _u(out_w)
            for r in range(out_h):
                d = _u(ob + r * out_w)
                for i in range(kh):
                    base = (c * rows + r * sh + i * dh) * row_len
                    wi = wb + i * kw
                    if kw == 3:
                        a0 = _u(base + shifts[0])
                        a1 = _u(base + shifts[1])
                        a2 = _u(base + shifts[2])
                        w0, w1, w2 = wf[wi], wf[wi + 1], wf[wi + 2]
                        for q in range(width):
                            of[d + q] += w0 * pad[a0 + q] + w1 * pad[a1 + q] + w2 * pad[a2 + q]
                    elif kw == 5:
                        a0 = _u(base + shifts[0])
                        a1 = _u(base + shifts[1])
                        a2 = _u(base + shifts[2])
                        a3 = _u(base + shifts[3])
                        a4 = _u(base + shifts[4])
                        w0, w1, w2, w3_, w4 = wf[wi], wf[wi + 1], wf[wi + 2], wf[wi + 3], wf[wi + 4]
                        for q in range(width):
                            of[d + q] += (
                                w0 * pad[a0 + q]
                                + w1 * pad[a1 + q]
                                + w2 * pad[a2 + q]
                                + w3_ * pad[a3 + q]
                                + w4 * pad[a4 + q]
                            )
                    else:
                        for j in range(kw):
                            a = _u(base + shifts[j])
                            wv = wf[wi + j]
                            for q in range(width):
                                of[d + q] += wv * pad[a + q]


@njit(nogil=True, cache=True)
def _taps3x3(pad, wf, of, wb, shifts, c, rows, row_len, ob, sh, dh, out_h, out_w):
    """Add one input channel's 3x3 taps to an output plane, all nine per element at once."""
    w00, w01, w02 = wf[wb], wf[wb + 1], wf[wb + 2]
    w10, w11, w12 = wf[wb + 3], wf[wb + 4], wf[wb + 5]
    w20, w21, w22 = wf[wb + 6], wf[wb + 7], wf[wb + 8]
    s1, s2 = _u(shifts[1] - shifts[0]), _u(shifts[2] - shifts[0])
    step = _u(dh * row_len)
    width = _u(out_w)
    for r in range(out_h):
        d = _u(ob + r * out_w)
        a0 = _u((c * rows + r * sh) * row_len + shifts[0])
        a1 = a0 + step
        a2 = a1 + step
        for q in range(width):
            of[d + q] += (
                w00 * pad[a0 + q]
                + w01 * pad[a0 + s1 + q]
                + w02 * pad[a0 + s2 + q]
                + w10 * pad[a1 + q]
                + w11 * pad[a1 + s1 + q]
                + w12 * pad[a1 + s2 + q]
                + w20 * pad[a2 + q]
                + w21 * pad[a2 + s1 + q]
                + w22 * pad[a2 + s2 + q]
            )


@njit(nogil=True, cache=True)
def channels_last_size(channels, kh, kw, sh, sw, dh, dw, out_h, out_w):
    """Elements of the ``pad`` workspace :func:`image_channels_last` needs.

    Parameters
    ----------
    channels : int
        Output channels (input channels times the channel multiplier).
    kh, kw, sh, sw, dh, dw : int
        Kernel size, strides and dilation.
    out_h, out_w : int
        Output height and width.

    Returns
    -------
    int
        The size of the flat, zero-filled array to pass as ``pad``.
    """
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_w - 1) * sw + (kw - 1) * dw + 1
    return rows * cols * channels


@njit(nogil=True, cache=True)
def image_channels_last(x, w3, out3, pad, acc, n, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w):
    """Image ``n`` of a depthwise convolution (one input channel per group, any channel
    multiplier), vectorized across channels.

    Small output planes leave too short a row for the per-group loops to fill a vector
    register, so this copies the image into a zero-bordered channels-last workspace and
    runs the innermost loop over the channels instead, then writes the result back to
    NCHW. Output channel ``o`` reads input channel ``o // multiplier``.

    Parameters
    ----------
    x, w3, out3 : ndarray
        As for :func:`group_image`, with one input channel per group.
    pad : ndarray
        Flat workspace of :func:`channels_last_size` elements, zero wherever a previous
        call did not write.
    acc : ndarray
        Flat workspace of ``out_h * out_w * channels`` elements (any contents).
    n : int
        Image.
    kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w : int
        As for :func:`group_image`.
    """
    _, channels, height, width = x.shape
    groups, og, _ = w3.shape
    oc = groups * og
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_w - 1) * sw + (kw - 1) * dw + 1
    xf = x.reshape(x.size)
    wf = w3.reshape(w3.size)
    of = out3.reshape(out3.size)
    lanes = _u(oc)
    w0, w1 = max(0, -pl), min(width, cols - pl)
    for c in range(channels):
        for ih in range(max(0, -pt), min(height, rows - pt)):
            src = ((n * channels + c) * height + ih) * width
            for iw in range(w0, w1):
                d = _u(((ih + pt) * cols + iw + pl) * oc + c * og)
                v = xf[_u(src + iw)]
                for m in range(_u(og)):
                    pad[d + m] = v
    plane = out_h * out_w
    taps = kh * kw
    # The weights tap-major, so each tap's channel run is contiguous.
    wt = np.empty(taps * oc, wf.dtype)
    for o in range(oc):
        for t in range(taps):
            wt[t * oc + o] = wf[o * taps + t]
    for r in range(out_h):
        for q in range(out_w):
            a = _u((r * out_w + q) * oc)
            for o in range(lanes):
                acc[a + o] = 0
            for i in range(kh):
                for j in range(kw):
                    s = _u(((r * sh + i * dh) * cols + q * sw + j * dw) * oc)
                    t = _u((i * kw + j) * oc)
                    for o in range(lanes):
                        acc[a + o] += wt[t + o] * pad[s + o]
    for o in range(oc):
        d = _u((n * oc + o) * plane)
        for p in range(_u(plane)):
            of[d + p] = acc[p * lanes + _u(o)]

"""Small numba functions that generated kernels call: float16 bits, integer division, checks,
strided views.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy and numba.

Generated kernel modules import this module as ``h``. The functions are
``register_jitable``: numba compiles them once per process for each (non-literal)
argument type signature, so a message or a constant argument does not cause a new
specialization, and links them into each kernel that calls them. numba does not notice
when this file changes, so the kernel cache key includes a hash of this file's source
(see ``vm.kernels.library``).

Semantics follow the compiler's numpy references: integer ``divide``/``mod`` truncate
toward zero, ``floor_divide``/``floor_mod`` floor, integer division by zero raises
``ZeroDivisionError`` (never a hardware trap: ``x // -1`` is computed as ``-x``), and
``float16`` values are rounded to nearest-even exactly as numpy's ``astype`` does.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.cpython.unsafe.tuple import tuple_setitem
from numba.extending import intrinsic, register_jitable
from numba.np.arrayobj import make_array, populate_array

# --- float16 as uint16 bits --------------------------------------------------------------------


@register_jitable
def f16_to_f32(bits):
    """The float32 value of the float16 with bit pattern ``bits`` (exact)."""
    b = np.int64(bits)
    exponent = (b >> 10) & 0x1F
    mantissa = b & 0x3FF
    if exponent == 0:
        value = math.ldexp(np.float64(mantissa), -24)
    elif exponent == 31:
        value = np.inf if mantissa == 0 else np.nan
    else:
        value = math.ldexp(np.float64(mantissa + 1024), exponent - 25)
    if b & 0x8000:
        value = -value
    return np.float32(value)


@register_jitable
def f32_to_f16(x):
    """The float16 bit pattern nearest to ``x`` (ties to even; overflow to infinity)."""
    v = np.float64(x)
    if v != v:
        return np.uint16(0x7E00)
    sign = 0
    if v < 0.0 or (v == 0.0 and math.copysign(1.0, v) < 0.0):
        sign = 0x8000
    a = abs(v)
    if a >= 65520.0:
        return np.uint16(sign | 0x7C00)
    if a < 6.103515625e-05:  # below 2**-14: subnormal, in units of 2**-24
        m = np.int64(np.rint(a * 16777216.0))
        return np.uint16(sign | m)
    fraction, exponent = math.frexp(a)
    m = np.int64(np.rint(fraction * 2048.0))
    e = exponent + 14
    if m == 2048:
        m = 1024
        e += 1
    if e >= 31:
        return np.uint16(sign | 0x7C00)
    return np.uint16(sign | (e << 10) | (m - 1024))


@register_jitable
def f16_round(x):
    """``x`` rounded to the nearest float16 value, as a float32."""
    return f16_to_f32(f32_to_f16(x))


# --- integer division --------------------------------------------------------------------------


@register_jitable
def divide_s(a, b):
    """Signed ``a / b`` rounded toward zero."""
    if b == 0:
        raise ZeroDivisionError("divide: integer division by zero")
    if b == -1:
        return -a
    q = a // b
    if a % b != 0 and (a < 0) != (b < 0):
        q += 1
    return q


@register_jitable
def divide_u(a, b):
    """Unsigned ``a / b``."""
    if b == 0:
        raise ZeroDivisionError("divide: integer division by zero")
    return a // b


@register_jitable
def floor_divide_s(a, b):
    """Signed ``floor(a / b)``."""
    if b == 0:
        raise ZeroDivisionError("floor_divide: integer division by zero")
    if b == -1:
        return -a
    return a // b


@register_jitable
def floor_divide_u(a, b):
    """Unsigned ``floor(a / b)``."""
    if b == 0:
        raise ZeroDivisionError("floor_divide: integer division by zero")
    return a // b


@register_jitable
def mod_s(a, b):
    """Signed remainder with the sign of ``a`` (truncated division)."""
    if b == 0:
        raise ZeroDivisionError("mod: integer division by zero")
    if b == -1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


@register_jitable
def mod_u(a, b):
    """Unsigned remainder."""
    if b == 0:
        raise ZeroDivisionError("mod: integer division by zero")
    return a % b


@register_jitable
def floor_mod_s(a, b):
    """Signed remainder with the sign of ``b`` (floored division)."""
    if b == 0:
        raise ZeroDivisionError("floor_mod: integer division by zero")
    if b == -1:
        return a - a
    return a % b


@register_jitable
def floor_mod_u(a, b):
    """Unsigned remainder."""
    if b == 0:
        raise ZeroDivisionError("floor_mod: integer division by zero")
    return a % b


@register_jitable
def power_s(a, b):
    """Signed ``a ** b`` wrapping on overflow; a negative ``b`` keeps the integer meaning
    ``trunc(1 / a ** -b)``: 1 for ``a == 1``, +-1 for ``a == -1``, 0 otherwise."""
    base = np.int64(a)
    e = np.int64(b)
    if e < 0:
        if base == 0:
            raise ZeroDivisionError("power: zero raised to a negative power")
        if base == 1:
            return np.int64(1)
        if base == -1:
            return np.int64(-1) if e % 2 != 0 else np.int64(1)
        return np.int64(0)
    result = np.int64(1)
    while e > 0:
        if e & 1:
            result *= base
        base *= base
        e >>= 1
    return result


@register_jitable
def power_u(a, b):
    """Unsigned ``a ** b`` wrapping on overflow."""
    base = np.uint64(a)
    e = np.uint64(b)
    result = np.uint64(1)
    one = np.uint64(1)
    while e > 0:
        if e & one:
            result *= base
        base *= base
        e >>= one
    return result


# --- float helpers -----------------------------------------------------------------------------


@register_jitable
def fmax(a, b):
    """numpy's ``maximum``: a NaN operand wins."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a >= b else b


@register_jitable
def fmin(a, b):
    """numpy's ``minimum``: a NaN operand wins."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


# --- run-time shape and index checks -----------------------------------------------------------


class _Formatted:
    """An exception whose message is ``args[0].format(*args[1:])``.

    A kernel that builds its message in compiled code (``str`` of a number, string
    concatenation) makes numba compile its string machinery: about a second per process,
    in the first kernel that checks a size. Raising a template and plain values costs
    nothing to compile; Python formats them when the message is read."""

    def __str__(self) -> str:
        if not self.args:
            return ""
        template, *values = self.args
        return str(template).format(*values)


class KernelValueError(_Formatted, ValueError):
    """A kernel's ``ValueError`` (a size or value it cannot take), formatted on reading."""


class KernelIndexError(_Formatted, IndexError):
    """A kernel's ``IndexError`` (an index out of range), formatted on reading."""


@register_jitable
def bcast(a, b, what):
    """The numpy broadcast of dimensions ``a`` and ``b``, or ``ValueError`` naming ``what``."""
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    raise KernelValueError("{}: dimensions {} and {} do not broadcast", what, a, b)


@register_jitable
def expect(found, expected, what):
    """``ValueError`` naming ``what`` unless ``found == expected``."""
    if found != expected:
        raise KernelValueError("{}: expected {}, found {}", what, expected, found)


@register_jitable
def fail(what):
    """Raise ``ValueError(what)``."""
    raise ValueError(what)


@register_jitable
def take_index(i, n, mode):
    """Index ``i`` into an axis of size ``n``: mode 0 clips, 1 wraps, 2 must be in range."""
    j = np.int64(i)
    if mode == 0:
        if j < 0:
            return np.int64(0)
        if j >= n:
            return np.int64(n - 1)
        return j
    if mode == 1:
        r = j % n
        return r + n if r < 0 else r
    if j < 0 or j >= n:
        raise KernelIndexError(
            "take: index {} is out of range for an axis of size {} (mode='fast' does not clip or "
            "wrap)",
            j,
            n,
        )
    return j


@register_jitable
def index_out_of_range(what, i, n):
    """Raise ``IndexError`` naming ``what``, index ``i`` and the axis size ``n`` (kernels
    check gather and scatter indices inline and call this only for a bad one)."""
    raise KernelIndexError(
        "{}: index {} is out of range for an axis of size {}", what, np.int64(i), n
    )


@register_jitable
def slice_start(dim, begin, end, has_end, stride):
    """Python's ``slice(begin, end, stride).indices(dim)``: the first index and the count."""
    if stride < 0:
        lower = np.int64(-1)
        upper = dim - 1
    else:
        lower = np.int64(0)
        upper = np.int64(dim)
    start = np.int64(begin)
    if start < 0:
        start += dim
        if start < lower:
            start = lower
    elif start > upper:
        start = upper
    if not has_end:
        stop = lower if stride < 0 else upper
    else:
        stop = np.int64(end)
        if stop < 0:
            stop += dim
            if stop < lower:
                stop = lower
        elif stop > upper:
            stop = upper
    if stride < 0:
        count = (start - stop - stride - 1) // (-stride) if stop < start else 0
    else:
        count = (stop - start + stride - 1) // stride if start < stop else 0
    return start, np.int64(count)


@register_jitable
def index_error(what):
    """Raise ``IndexError(what)``."""
    raise IndexError(what)


# --- sorting -----------------------------------------------------------------------------------

#: A line at least this many times longer than the positions wanted from it is selected
#: (a partition, then a sort of the kept ones) rather than sorted whole: RetinaNet's top
#: 1000 of 958,386 scores took 136 ms sorted whole.
SELECT_RATIO = 8


@register_jitable
def _stable_order(line, ascending):
    """Positions of ``line`` in stable sorted order (equal elements by position; NaN last
    ascending, first descending, as numpy's argsort of the line and of its reverse)."""
    n = line.size
    if ascending:
        return np.argsort(line, kind="mergesort")
    # Stable descending: sort the reversed line, read it backwards, map positions back.
    rev = np.argsort(line[::-1].copy(), kind="mergesort")
    return n - 1 - rev[::-1]


@register_jitable
def sorted_positions(line, keep, ascending):
    """The positions of the first ``keep`` elements of ``line`` in stable sorted order (see
    :func:`_stable_order`), the same as sorting it whole.

    A long line without NaN is first partitioned around its ``keep``-th element: the
    elements strictly before it and, in order of position, as many equal to it as fill
    ``keep``, are the ones a stable sort puts first; only they are sorted.
    """
    n = line.size
    if keep * SELECT_RATIO > n or keep < 1:
        return _stable_order(line, ascending)[:keep]
    for i in range(n):
        if line[i] != line[i]:  # NaN: its rank is the whole sort's business
            return _stable_order(line, ascending)[:keep]
    ranked = np.partition(line, keep - 1 if ascending else n - keep)
    pivot = ranked[keep - 1] if ascending else ranked[n - keep]
    chosen = np.empty(keep, np.int64)
    count = 0
    for i in range(n):
        if (line[i] < pivot) if ascending else (line[i] > pivot):
            chosen[count] = i
            count += 1
    for i in range(n):
        if count == keep:
            break
        if line[i] == pivot:
            chosen[count] = i
            count += 1
    # Strictly-before elements come first and equal ones after them, each in order of
    # position, so a stable sort of the chosen values gives the whole sort's first `keep`.
    return chosen[_stable_order(line[chosen], ascending)]


# --- strided views -----------------------------------------------------------------------------


@register_jitable
def _axis_from(shape, k):
    """The first axis at or after ``k`` of more than one element (``len(shape)`` if none)."""
    while k < len(shape) and shape[k] == 1:
        k += 1
    return k


@register_jitable
def restride(a, shape):
    """``a``, of any strides, seen with ``shape`` (of the same element count): a view of its
    memory where numpy could reshape it without a copy, else a C-contiguous copy.

    numba reshapes only arrays it knows contiguous; generated kernels reshape views of
    slices and transposes here (``vm.kernels.codegen``), so a head split reads the
    projection it slices in place. The rule is numpy's: each run of axes of ``a`` that
    becomes a run of new axes must be contiguous within itself; axes of size 1 do not
    count. Nothing is allocated unless a copy is needed.
    """
    strides = shape
    size = 1
    for d in shape:
        size *= d
    ok = size == a.size
    if ok and size > 0:
        new = len(shape)
        ni, oi = 0, _axis_from(a.shape, 0)
        # New axes ni:nj take old axes oi..last, both runs grown until their sizes agree.
        while ok and ni < new and oi < a.ndim:
            nj, last = ni + 1, oi
            new_size, old_size = shape[ni], a.shape[oi]
            while new_size != old_size:
                if new_size < old_size:
                    new_size *= shape[nj]
                    nj += 1
                else:
                    following = _axis_from(a.shape, last + 1)
                    if a.strides[last] != a.shape[following] * a.strides[following]:
                        ok = False
                    old_size *= a.shape[following]
                    last = following
            strides = tuple_setitem(strides, nj - 1, a.strides[last])
            for k in range(nj - 1, ni, -1):
                strides = tuple_setitem(strides, k - 1, strides[k] * shape[k])
            ni, oi = nj, _axis_from(a.shape, last + 1)
        # Trailing axes of size 1 (any stride reads the one element).
        for k in range(ni, new):
            strides = tuple_setitem(strides, k, a.itemsize)
    if ok:
        return np.lib.stride_tricks.as_strided(a, shape, strides)
    return np.ascontiguousarray(a).reshape(shape)


@intrinsic
def unit_row(typingctx, a, offset, count):
    """The ``count`` elements of ``a`` from ``offset`` bytes past its first, as a
    C-contiguous 1-D array sharing ``a``'s memory (and keeping it alive).

    For views of any strides whose last axis has unit stride (the caller checks): numba
    types a strided view's layout "A" and loops over it one element at a time, since its
    stride is unknown, where over a C-contiguous row LLVM vectorizes. An LSTM's cell update,
    three gate slices of one projection, took 1.56 us over 128 elements through the views
    and 0.20 through rows at the same addresses (the same bits; AMD EPYC Zen 4).
    """
    if not isinstance(a, types.Array):
        return None
    row = types.Array(a.dtype, 1, "C")

    def codegen(context, builder, signature, args):
        source = make_array(signature.args[0])(context, builder, args[0])
        result = make_array(row)(context, builder)
        bytes_ = builder.bitcast(source.data, ir.IntType(8).as_pointer())
        data = builder.bitcast(builder.gep(bytes_, [args[1]]), source.data.type)
        populate_array(
            result,
            data=data,
            shape=cgutils.pack_array(builder, [args[2]]),
            strides=cgutils.pack_array(builder, [source.itemsize]),
            itemsize=source.itemsize,
            meminfo=source.meminfo,
            parent=source.parent,
        )
        return impl_ret_borrowed(context, builder, row, result._getvalue())

    return row(a, types.intp, types.intp), codegen

"""What the run-time shape rules share: argument checks and shape arithmetic on concrete
sizes.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

An operator's run-time shape rule (``rule(arg_shapes, attrs, out_ranks) -> output
shapes``) is part of its row in the kernel table: each ``emit_*`` module defines the rules
of its operators next to their kernels (``RULES.shape``), and :mod:`vm.shape_funcs` runs
them. The helpers here validate what types could not know before run time and raise
:class:`~vm.kernels.rules.RuleError`; :func:`vm.shape_funcs.op_output_shapes` adds the
operator's name and the input shapes to the message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from vm.kernels import windows
from vm.kernels.newshape import newshape_dims
from vm.kernels.rules import RuleError, norm_axes, norm_axis

Shape = tuple[int, ...]

AXIS_NAMES = windows.AXIS_NAMES


def fmt_shape(shape: Sequence[int]) -> str:
    """``(2, 3)``; a one-dimensional shape keeps Python's trailing comma: ``(4,)``."""
    return str(tuple(int(d) for d in shape))


def axis_of(value: int, ndim: int, name: str = "axis", extra: int = 0) -> int:
    """``value`` as an axis of a rank-``ndim`` shape (:func:`~vm.kernels.rules.norm_axis`)."""
    return norm_axis(name, value, ndim, extra)


def axes_of(values: Sequence[int], ndim: int, name: str = "axis") -> list[int]:
    """Each of ``values`` as an axis, duplicates rejected (:func:`~vm.kernels.rules.norm_axes`)."""
    return norm_axes(name, values, ndim)


def ints(value: Any) -> tuple[int, ...]:
    """An ``ints`` attribute as a tuple (a single int becomes a 1-tuple)."""
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    return (int(value),)


def prod(dims: Sequence[int]) -> int:
    """The product of ``dims`` (1 for none)."""
    total = 1
    for d in dims:
        total *= d
    return total


def broadcast_dim(a: int | None, b: int | None) -> int | None:
    """numpy's rule for one dimension, where ``None`` is a size not known until run time
    (the compiler's ``?``).

    ``?`` against 1 stays ``?``; ``?`` against ``k != 1`` is ``k`` (the run time must
    agree). The compiler's type relations and the run-time shape rules both use it.

    Raises
    ------
    RuleError
        If two known sizes differ and neither is 1.
    """
    if a is None:
        return b if b is not None and b != 1 else None
    if b is None:
        return a if a != 1 else None
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    raise RuleError(f"dimension {a} vs {b}")


def broadcast_shapes(shapes: Sequence[Shape]) -> Shape:
    """numpy broadcasting of ``shapes`` (right-aligned); :class:`RuleError` if they do not."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for p in range(ndim):
        dim = 1
        for s in shapes:
            k = p - (ndim - len(s))
            if k < 0:
                continue
            try:
                known = broadcast_dim(dim, s[k])  # never None: every size here is known
            except RuleError:
                raise RuleError(
                    f"cannot broadcast {' and '.join(fmt_shape(x) for x in shapes)}: "
                    f"dimension {p} of the result would be both {dim} and {s[k]}"
                ) from None
            dim = dim if known is None else known
        out.append(dim)
    return tuple(out)


def broadcast_to_shape(dims: Shape, target: Shape) -> Shape:
    """``target``, after checking that ``dims`` broadcasts to it (``broadcast_to``)."""
    offset = len(target) - len(dims)
    if offset < 0 or any(d not in (1, target[offset + k]) for k, d in enumerate(dims)):
        raise RuleError(f"cannot broadcast {fmt_shape(dims)} to shape {fmt_shape(target)}")
    return target


def expect(found: int, expected: int, what: str) -> None:
    """``found`` equals ``expected``; the message names ``what``."""
    if found != expected:
        raise RuleError(f"{what}: expected {expected}, found {found}")


def pair(value: Any, name: str, minimum: int = 1) -> tuple[int, int]:
    """A (height, width) attribute (:func:`vm.kernels.windows.pair`)."""
    return windows.pair(name, ints(value), minimum)


def padding4(value: Any) -> tuple[int, int, int, int]:
    """TVM's padding as (top, left, bottom, right) (:func:`vm.kernels.windows.padding4`)."""
    return windows.padding4(ints(value))


def window_output(
    size: int,
    window: int,
    stride: int,
    dilation: int,
    before: int,
    after: int,
    axis: int,
    what: str,
    ceil_mode: bool = False,
) -> int:
    """Window positions along a spatial axis (:func:`vm.kernels.windows.window_count`)."""
    if window < 1:
        raise RuleError(f"the {what} {AXIS_NAMES[axis]} must be at least 1, found {window}")
    return windows.window_count(
        size, window, stride, dilation, before, after, axis, what, ceil_mode
    )


def rank(shape: Shape, low: int, high: int | None, name: str) -> None:
    """``shape``'s rank is in ``[low, high]`` (``high=None``: no upper bound)."""
    if len(shape) < low or (high is not None and len(shape) > high):
        want = str(low) if high == low else f"at least {low}" if high is None else f"{low}..{high}"
        raise RuleError(f"{name} {fmt_shape(shape)} must have rank {want}")


def nchw(shape: Shape) -> Shape:
    """``shape`` as a 4-D NCHW shape."""
    rank(shape, 4, 4, "data (NCHW)")
    return shape


def channel_vectors(data: Shape, vectors: Sequence[Shape], names: Sequence[str], axis: int):
    """Each of ``vectors`` is a vector as long as ``data``'s ``axis``."""
    for name, vec in zip(names, vectors):
        if vec != (data[axis],):
            raise RuleError(
                f"{name} has shape {fmt_shape(vec)}, but axis {axis} of data "
                f"{fmt_shape(data)} has length {data[axis]}"
            )


def reshape_shape(shape: Shape, newshape: Sequence[int]) -> Shape:
    """``reshape``'s output shape with TVM's special values (0, -1, -2, -3, -4)."""
    return newshape_dims(shape, newshape, fmt_shape(shape))  # type: ignore[return-value]


def same_as_first(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    """The rule of operators whose output has their first argument's shape."""
    return [shapes[0]]


def arange_length(start: Any, stop: Any, step: Any) -> int:
    """TVM's element count of ``arange``: ``max(ceil((stop - start) / step), 0)`` (the
    run-time shape function's and the compiler's numpy reference's)."""
    if step == 0:
        raise RuleError("step must not be 0")
    count = (stop - start) / step
    if not math.isfinite(count):
        raise RuleError(f"the bounds start={start}, stop={stop}, step={step} are not finite")
    return max(math.ceil(count), 0)

"""Shared pieces of the spatial operators (convolutions, pools, padding, upsampling).

Compiler layer (``compiler.op``). Reads the attributes these operators have in common
(``strides``, ``dilation``, ``pool_size``/``kernel_size`` as (height, width) pairs, TVM's
1-, 2- or 4-int ``padding``, ``nn.pad``'s ``pad_width`` pairs, the NCHW layout strings) and
computes window output sizes, so that the relations check them the same way and their
messages read alike. The pairs, paddings and window sizes are read by
:mod:`vm.kernels.windows`, the helpers the kernels and run-time shape functions use too;
every helper here raises :class:`OpTypeError` naming the operator and attribute. This
module registers no operator, so the ``relay.nn`` builders may import it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.registry import OpTypeError
from compiler.op.typerel import fmt_type, tensor_arg
from vm.kernels import windows
from vm.kernels.rules import RuleError

# Only the canonical layouts are implemented; TVM's other layouts are rejected by name.
NCHW = windows.NCHW
OUT_LAYOUTS = ("", NCHW)
AXIS_NAMES = windows.AXIS_NAMES


def fmt_attr(value: object) -> str:
    """An attribute value as it appears in messages: ``(1, 2)``, ``3``, ``'NCHW'``."""
    if isinstance(value, str):
        return repr(value)
    return str(value)


def nchw_data(op: str, ty: Type, name: str = "data") -> TensorType:
    """``ty`` as a 4-D tensor type, read as (batch, channels, height, width)."""
    data = tensor_arg(op, ty, name)
    if data.ndim != 4:
        raise OpTypeError(
            f"{op}: argument {name} must be a 4-D NCHW tensor (batch, channels, height, "
            f"width), found {fmt_type(data)}"
        )
    return data


def check_layout(op: str, attrs: Attrs, name: str, allowed: Sequence[str]) -> None:
    """Attribute ``name`` is one of the ``allowed`` layout strings."""
    value = attrs[name]
    if value not in allowed:
        expected = " or ".join(repr(a) for a in allowed)
        raise OpTypeError(
            f"{op}: attribute {name}={fmt_attr(value)} is not supported; expected {expected} "
            "(only the NCHW data layout is implemented)"
        )


def _named(op: str, error: RuleError) -> OpTypeError:
    return OpTypeError(f"{op}: {error}")


def pair(op: str, attrs: Attrs, name: str, minimum: int = 1) -> tuple[int, int]:
    """Attribute ``name`` as (height, width); a single value applies to both.

    Each value must be at least ``minimum`` (1 for sizes, strides and dilations).
    """
    if attrs[name] is None:
        raise OpTypeError(f"{op}: attribute {name} is required")
    try:
        return windows.pair(name, attrs[name], minimum)
    except RuleError as error:
        raise _named(op, error) from None


def padding4(op: str, attrs: Attrs, name: str = "padding") -> tuple[int, int, int, int]:
    """TVM's padding forms as (top, left, bottom, right).

    One int pads every side; two ints are (top and bottom, left and right); four ints are
    (top, left, bottom, right).
    """
    try:
        return windows.padding4(attrs[name], name)
    except RuleError as error:
        raise _named(op, error) from None


def padding_tuple(padding: object) -> object:
    """A builder's ``padding`` in TVM's 4-int form, as ``relay.nn`` builders store it.

    TVM's Python builders expand an int or a 2-tuple to (top, left, bottom, right); other
    values pass through for the type relation to judge.
    """
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * 4
    if isinstance(padding, (list, tuple)) and len(padding) in (1, 2):
        items = tuple(padding)
        return items * (4 // len(items))
    return padding


def pair_tuple(value: object) -> object:
    """A builder's int size/stride/dilation as a (height, width) pair, like TVM's builders."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    return value


def window_output(
    op: str,
    data: TensorType,
    axis: int,
    window: Dim,
    stride: int,
    dilation: int,
    pad_before: int,
    pad_after: int,
    what: str,
    ceil_mode: bool = False,
) -> Dim:
    """The number of window positions along spatial ``axis`` (0 height, 1 width) of ``data``
    (:func:`vm.kernels.windows.window_count`); ``?`` input or window sizes give ``?``."""
    size = data.shape[2 + axis]
    if isinstance(size, Any) or isinstance(window, Any):
        return Any()
    where = f" of data {fmt_type(data)}"
    try:
        return windows.window_count(
            size, window, stride, dilation, pad_before, pad_after, axis, what, ceil_mode, where
        )
    except RuleError as error:
        raise _named(op, error) from None


def pad_pairs(op: str, pad_width: object, ndim: int | None = None) -> tuple[tuple[int, int], ...]:
    """``pad_width`` as a tuple of ``(before, after)`` int pairs, one per axis when ``ndim``
    is given; ``OpTypeError`` (a ``TypeError``) naming the malformed part otherwise."""
    shape_hint = "((before_1, after_1), ..., (before_N, after_N))"
    if not isinstance(pad_width, (tuple, list)):
        raise OpTypeError(
            f"{op}: attribute pad_width must be a tuple of (before, after) pairs "
            f"{shape_hint}, found {pad_width!r}"
        )
    pairs = []
    for axis, item in enumerate(pad_width):
        ok = (
            isinstance(item, (tuple, list))
            and len(item) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in item)
        )
        if not ok:
            raise OpTypeError(
                f"{op}: attribute pad_width must be a tuple of (before, after) int pairs "
                f"{shape_hint}; entry {axis} is {item!r}"
            )
        before, after = int(item[0]), int(item[1])
        if before < 0 or after < 0:
            raise OpTypeError(
                f"{op}: attribute pad_width entry {axis} is ({before}, {after}); pad widths "
                "must not be negative"
            )
        pairs.append((before, after))
    if ndim is not None and len(pairs) != ndim:
        raise OpTypeError(
            f"{op}: attribute pad_width has {len(pairs)} (before, after) pairs but data has "
            f"rank {ndim}; expected one pair per axis"
        )
    return tuple(pairs)

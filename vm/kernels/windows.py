"""The window helpers of the windowed NCHW operators (convolutions, pools, upsampling):
the one place their attributes are read and their output sizes computed.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

``strides``, ``dilation``, ``pool_size`` and ``kernel_size`` are (height, width) pairs,
TVM's 1-, 2- or 4-int ``padding`` is (top, left, bottom, right), and only the NCHW layouts
are accepted. A problem is a :class:`RuleError`. Three readers share these functions: the
kernel rules (at validation, and :func:`window_output` emits the run-time size code), the
run-time shape functions (:mod:`vm.shape_funcs`, through :func:`window_count`) and the
compiler's type relations (``compiler/op/defs_window.py``, which adds the operator's name).
"""

from __future__ import annotations

from vm.kernels.rules import RuleError
from vm.kernels.source import ShapeCtx

NCHW = "NCHW"
AXIS_NAMES = ("height", "width")


def pair(name: str, value: object, minimum: int = 1) -> tuple[int, int]:
    """Attribute ``name`` as (height, width); one value applies to both.

    Raises
    ------
    RuleError
        If it holds other than 1 or 2 values, or a value below ``minimum``.
    """
    if value is None:
        raise RuleError(f"attribute {name} is missing")
    values = tuple(value) if isinstance(value, tuple) else (value,)  # type: ignore[arg-type]
    if len(values) == 1:
        values = values * 2
    if len(values) != 2:
        raise RuleError(
            f"attribute {name}={value!r} must hold 1 or 2 ints (height, width), found {len(values)}"
        )
    if min(values) < minimum:
        raise RuleError(f"attribute {name}={value!r} must hold values >= {minimum}")
    return values[0], values[1]


def padding4(value: object, name: str = "padding") -> tuple[int, int, int, int]:
    """TVM's padding forms as (top, left, bottom, right)."""
    values = tuple(value) if isinstance(value, tuple) else (value,)  # type: ignore[arg-type]
    if len(values) == 1:
        values = values * 4
    elif len(values) == 2:
        values = values * 2
    elif len(values) != 4:
        raise RuleError(
            f"attribute {name}={value!r} must hold 1, 2 or 4 ints ((all), (top/bottom, "
            f"left/right) or (top, left, bottom, right)), found {len(values)}"
        )
    if min(values) < 0:
        raise RuleError(f"attribute {name}={value!r} must not be negative")
    return values[0], values[1], values[2], values[3]


def check_layout(attrs: dict, name: str, allowed: tuple[str, ...]) -> None:
    """Attribute ``name`` is one of the ``allowed`` layout strings."""
    value = attrs[name]
    if value not in allowed:
        expected = " or ".join(repr(a) for a in allowed)
        raise RuleError(
            f"attribute {name}={value!r} is not supported; expected {expected} (only the NCHW "
            "data layout is implemented)"
        )


def window_count(
    size: int,
    window: int,
    stride: int,
    dilation: int,
    before: int,
    after: int,
    axis: int,
    what: str,
    ceil_mode: bool = False,
    where: str = "",
) -> int:
    """The number of window positions along spatial ``axis`` (0 height, 1 width).

    ``floor((size + pads - dilated window) / stride) + 1``; with ``ceil_mode`` the division
    rounds up, but the last window must still start inside the input or its left padding
    (so no window lies wholly in the right padding). :func:`window_output` emits the same
    arithmetic as code.

    Parameters
    ----------
    size, window, stride, dilation, before, after : int
        The input size along the axis, the window size, and the window's stride, dilation
        and padding on either side.
    axis : int
        0 (height) or 1 (width), for messages.
    what : str
        What the window is (``kernel``, ``pool window``), for messages.
    ceil_mode : bool
        Round the position count up instead of down.
    where : str
        Words placed after the input size in the message (the compiler names the data type).

    Raises
    ------
    RuleError
        If the padded input is smaller than the dilated window (with ``ceil_mode``: so much
        smaller that not even the rounded-up count has a window).
    """
    name = AXIS_NAMES[axis]
    dilated = (window - 1) * dilation + 1
    padded = size + before + after
    span = padded - dilated
    # With ceil_mode a window may overhang the input, as long as one window fits in the
    # rounding (PyTorch's rule: EfficientNet's pooler is a 1280-wide window on 7 pixels).
    out = -(-span // stride) + 1 if ceil_mode else span // stride + 1
    if span < 0 and (not ceil_mode or out < 1):
        raise RuleError(
            f"the padded input {name} {padded}{where} is smaller than the dilated {what} "
            f"{name} {dilated}"
        )
    if not ceil_mode:
        return out
    if out > 1 and (out - 1) * stride >= size + before:
        out -= 1  # a last window starting in the right padding is dropped (PyTorch's rule)
    return out


def window_output(
    ctx: ShapeCtx,
    axis: int,
    size: str,
    window: str,
    stride: int,
    dilation: int,
    before: int,
    after: int,
    what: str,
    ceil_mode: bool = False,
) -> str:
    """Emit the number of window positions along spatial ``axis``; returns its variable.

    ``floor((size + pads - dilated window) / stride) + 1``; with ``ceil_mode`` the division
    rounds up, but the last window must start inside the input or its left padding. The
    generated code raises ``ValueError`` when no window fits (see :func:`window_count`).
    """
    name = AXIS_NAMES[axis]
    dilated = ctx.let(f"({window} - 1) * {dilation} + 1")
    padded = ctx.let(f"{size} + {before + after}")
    if not window.isdigit():
        ctx.fail_if(f"{window} < 1", f"the {what} {name} must be at least 1, found 0")
    span = ctx.let(f"{padded} - {dilated}")
    if not ceil_mode:
        ctx.fail_if(
            f"{padded} < {dilated}",
            f"the padded input {name} is smaller than the dilated {what} {name}",
        )
        return ctx.let(f"{span} // {stride} + 1")
    out = ctx.let(f"({span} + {stride - 1}) // {stride} + 1")
    ctx.fail_if(f"{out} < 1", f"the padded input {name} is smaller than the dilated {what} {name}")
    # A last window starting in the right padding is dropped (PyTorch's rule).
    with ctx.src.block(f"if {out} > 1 and ({out} - 1) * {stride} >= {size} + {before}:"):
        ctx.src.line(f"{out} -= 1")
    return out

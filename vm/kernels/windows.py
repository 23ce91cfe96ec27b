"""Attribute checks and output-size code shared by the windowed NCHW operators (convolutions,
pools, upsampling).

Runtime layer (``vm.kernels``); standard library only.

The rules read ``strides``, ``dilation``, ``pool_size`` and ``kernel_size`` as (height,
width) pairs, TVM's 1-, 2- or 4-int ``padding`` as (top, left, bottom, right), and accept
only the NCHW layouts, exactly as ``compiler/op/defs_window.py`` does; an attribute problem
is a :class:`RuleError` found when the description is validated. Sizes that depend on the
input's shape are computed by the generated code, which raises ``ValueError`` naming the
node when a window does not fit.
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
    generated code raises ``ValueError`` when the padded input is smaller than the window.
    """
    name = AXIS_NAMES[axis]
    dilated = ctx.let(f"({window} - 1) * {dilation} + 1")
    padded = ctx.let(f"{size} + {before + after}")
    if not window.isdigit():
        ctx.fail_if(f"{window} < 1", f"the {what} {name} must be at least 1, found 0")
    ctx.fail_if(
        f"{padded} < {dilated}",
        f"the padded input {name} is smaller than the dilated {what} {name}",
    )
    span = ctx.let(f"{padded} - {dilated}")
    if not ceil_mode:
        return ctx.let(f"{span} // {stride} + 1")
    out = ctx.let(f"({span} + {stride - 1}) // {stride} + 1")
    # A last window starting in the right padding is dropped (PyTorch's rule).
    with ctx.src.block(f"if {out} > 1 and ({out} - 1) * {stride} >= {size} + {before}:"):
        ctx.src.line(f"{out} -= 1")
    return out

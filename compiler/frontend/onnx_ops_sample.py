"""ONNX ``GridSample``: sampling of 2-D images at the points a grid gives.

Compiler layer (``compiler.frontend``); does not import ``onnx``.

``GridSample`` (bilinear, nearest and bicubic, every padding mode): each output pixel reads
the input at a point the grid gives in normalized coordinates ([-1, 1], x then y). The point
is mapped to pixels (``align_corners`` decides whether -1 and 1 are the centres or the edges
of the border pixels); a point outside the image is clamped (``border``) or reflected off
the edges until it is inside (``reflection``); then the pixels around it are gathered from
the image flattened to ``(N * H * W, C)`` with one ``take`` each, weighted and summed. With
``zeros`` padding, pixels outside the image read as zero. This follows onnxruntime and
onnx's reference evaluator, nearest rounding half to even as they do.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_tensor import shape_text
from compiler.frontend.onnx_registry import register

_MODES = {
    "bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic",
    "cubic": "cubic",
}  # fmt: skip

#: Keys' cubic convolution parameter, as onnxruntime and PyTorch use.
_CUBIC_A = -0.75


class _Axis:
    """Sampling along one image axis of ``size`` pixels."""

    def __init__(self, node: NodeContext, size: int, align_corners: bool, padding: str) -> None:
        self.node = node
        self.size = size
        self.align = align_corners
        self.padding = padding
        self.low, self.high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)

    def f(self, value: float) -> Value:
        return self.node.scalar(value, "float32")

    def pixels(self, normalized: Value) -> Value:
        """Normalized coordinates as pixel coordinates (float)."""
        node, f = self.node, self.f
        shifted = node.call("add", normalized, f(1.0))
        if self.align:
            return node.call("multiply", shifted, f((self.size - 1) / 2.0))
        scaled = node.call("multiply", shifted, f(float(self.size)))
        return node.call("multiply", node.call("subtract", scaled, f(1.0)), f(0.5))

    def reflect(self, x: Value) -> Value:
        """``x`` reflected off ``low`` and ``high`` until it lies between them."""
        node, f = self.node, self.f
        span = self.high - self.low
        if span <= 0:
            return node.call("full_like", x, f(self.low))
        below = node.call("less", x, f(self.low))
        above = node.call("greater", x, f(self.high))
        # Distance past the nearer edge, folded by whole spans; an even count of folds
        # leaves the point measured from that edge, an odd one from the other.
        distance = node.call(
            "where",
            below,
            node.call("subtract", f(self.low), x),
            node.call("subtract", x, f(self.high)),
        )
        folds = node.call("floor", node.call("divide", distance, f(span)))
        rest = node.call("subtract", distance, node.call("multiply", folds, f(span)))
        even = node.call("equal", node.call("floor_mod", folds, f(2.0)), f(0.0))
        from_low = node.call("add", f(self.low), rest)
        from_high = node.call("subtract", f(self.high), rest)
        low_side = node.call("where", even, from_low, from_high)
        high_side = node.call("where", even, from_high, from_low)
        out = node.call("where", below, low_side, x)
        return node.call("where", above, high_side, out)

    def inside(self, x: Value) -> Value:
        """A point past the edges moved in as the padding mode says (zeros: left as is)."""
        if self.padding == "border":
            node, f = self.node, self.f
            outside = node.call(
                "logical_or",
                node.call("less", x, f(self.low)),
                node.call("greater", x, f(self.high)),
            )
            clamped = node.call("clip", x, a_min=0.0, a_max=float(self.size - 1))
            return node.call("where", outside, clamped, x)
        if self.padding == "reflection":
            return self.reflect(x)
        return x

    def index(self, i: Value) -> tuple[Value, Value | None]:
        """Integer pixel ``i`` (held as float) as an in-range int32 index, and for
        ``zeros`` padding the float mask of the positions inside the image."""
        node, f = self.node, self.f
        mask = None
        if self.padding == "zeros":
            inside = node.call(
                "logical_and",
                node.call("greater_equal", i, f(0.0)),
                node.call("less", i, f(float(self.size))),
            )
            mask = node.call("cast", inside, dtype="float32")
        elif self.padding == "reflection":
            i = self.reflect(i)
            # Truncated toward zero, as the reference casts: -0.5 reads pixel 0.
            i = node.call("multiply", node.call("sign", i), node.call("floor", node.call("abs", i)))
        clipped = node.call("clip", i, a_min=0.0, a_max=float(self.size - 1))
        return node.call("cast", clipped, dtype="int32"), mask


@register("GridSample")
def _grid_sample(node: NodeContext) -> Value:
    x, grid = node.input(0), node.input(1)
    default = "linear" if node.opset >= 20 else "bilinear"
    names = (
        ("linear", "nearest", "cubic") if node.opset >= 20 else ("bilinear", "nearest", "bicubic")
    )
    mode = node.check_attr("mode", names, default)
    padding = node.check_attr("padding_mode", ("zeros", "border", "reflection"), "zeros")
    align = bool(int(node.attr("align_corners", 0)))
    xs, gs = x.static_shape(), grid.static_shape()
    if xs is None or gs is None:
        raise node.unsupported("X and grid must have static shapes")
    if len(xs) != 4 or len(gs) != 4 or gs[-1] != 2 or gs[0] != xs[0]:
        raise node.unsupported(
            f"only 2-D sampling is supported: X (N, C, H, W) and grid (N, H_out, W_out, 2); "
            f"got X {shape_text(xs)} and grid {shape_text(gs)}"
        )
    if x.dtype != "float32" or grid.dtype != "float32":
        raise node.unsupported(f"X and grid must be float32, got {x.dtype} and {grid.dtype}")
    n, c, h, w = xs
    axis_y, axis_x = (_Axis(node, size, align, padding) for size in (h, w))

    def coordinate(axis: _Axis, field: int) -> Value:
        normalized = node.call(
            "squeeze",
            node.call("strided_slice", grid, begin=[field], end=[field + 1], axes=[3]),
            axis=[3],
        )
        pixels = axis.pixels(normalized)
        if _MODES[mode] == "nearest":
            pixels = node.call("round", pixels)  # half to even
        if _MODES[mode] == "cubic" and padding == "border":
            # onnxruntime (and PyTorch) clamp each of the 16 taps, not the point; onnx's
            # reference clamps the point, which differs beyond the image's edges.
            return pixels
        return axis.inside(pixels)

    px, py = coordinate(axis_x, 0), coordinate(axis_y, 1)
    # (N * H * W, C): row n * H * W + y * W + x is pixel (x, y) of image n.
    table = node.call(
        "reshape", node.call("transpose", x, axes=[0, 2, 3, 1]), newshape=[n * h * w, c]
    )
    base = node.const((np.arange(n, dtype="int32") * (h * w)).reshape(n, 1, 1))

    def corner(iy: Value, ix: Value) -> Value:
        """The pixels at integer coordinates (held as float), (N, H_out, W_out, C)."""
        row, mask_y = axis_y.index(iy)
        col, mask_x = axis_x.index(ix)
        flat = node.call(
            "add", base, node.call("add", node.call("multiply", row, node.scalar(w, "int32")), col)
        )
        value = node.call("take", table, flat, axis=0)
        masks = [m for m in (mask_y, mask_x) if m is not None]
        for m in masks:
            value = node.call("multiply", value, node.call("expand_dims", m, axis=3))
        return value

    if _MODES[mode] == "nearest":
        out = corner(py, px)
    elif _MODES[mode] == "cubic":
        out = None
        taps_y, taps_x = _cubic_taps(node, py), _cubic_taps(node, px)
        for yy, wy in taps_y:
            for xx, wx in taps_x:
                weight = node.call("expand_dims", node.call("multiply", wy, wx), axis=3)
                term = node.call("multiply", corner(yy, xx), weight)
                out = term if out is None else node.call("add", out, term)
    else:
        y0, x0 = node.call("floor", py), node.call("floor", px)
        one = node.scalar(1.0, "float32")
        y1, x1 = node.call("add", y0, one), node.call("add", x0, one)
        wy1, wx1 = node.call("subtract", py, y0), node.call("subtract", px, x0)
        wy0, wx0 = node.call("subtract", one, wy1), node.call("subtract", one, wx1)
        out = None
        for yy, wy in ((y0, wy0), (y1, wy1)):
            for xx, wx in ((x0, wx0), (x1, wx1)):
                weight = node.call("expand_dims", node.call("multiply", wy, wx), axis=3)
                term = node.call("multiply", corner(yy, xx), weight)
                out = term if out is None else node.call("add", out, term)
    return node.call("transpose", out, axes=[0, 3, 1, 2])


def _cubic_taps(node: NodeContext, x: Value) -> list[tuple[Value, Value]]:
    """The four pixels (held as float) around ``x`` and their cubic convolution weights."""
    f = lambda v: node.scalar(v, "float32")  # noqa: E731
    a = _CUBIC_A
    base = node.call("floor", x)
    t = node.call("subtract", x, base)

    def outer(d: Value) -> Value:  # taps 1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a
        inner = node.call("add", node.call("multiply", d, f(a)), f(-5 * a))
        inner = node.call("add", node.call("multiply", inner, d), f(8 * a))
        return node.call("add", node.call("multiply", inner, d), f(-4 * a))

    def near(d: Value) -> Value:  # taps |d| <= 1: ((a + 2) d - (a + 3)) d d + 1
        inner = node.call("add", node.call("multiply", d, f(a + 2)), f(-(a + 3)))
        return node.call("add", node.call("multiply", node.call("multiply", inner, d), d), f(1.0))

    one_minus = node.call("subtract", f(1.0), t)
    weights = [
        outer(node.call("add", t, f(1.0))),
        near(t),
        near(one_minus),
        outer(node.call("add", one_minus, f(1.0))),
    ]
    return [(node.call("add", base, f(float(k))), w) for k, w in zip((-1, 0, 1, 2), weights)]

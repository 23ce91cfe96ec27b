"""Kernel rule for image.resize2d.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

``image.resize2d(data; size, roi, layout, method, coordinate_transformation_mode,
rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)`` has TVM's
name, attributes and defaults; it resizes the height and width of NCHW data to ``size``
with onnxruntime's arithmetic (float32 coordinates and weights, interpolation in float32,
or float64 for float64 data), done by the separable loops of
:mod:`vm.kernels.runtime.resample`. Semantics mirror ``compiler/op/defs_image.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vm.kernels import dtypes
from vm.kernels import shape_rules as sr
from vm.kernels.rules import Attr, OpRule, RuleError, RuleSet, Spec, require_kind, require_rank
from vm.kernels.source import EmitCtx, ShapeCtx, const, float_literal, plain
from vm.kernels.windows import NCHW, check_layout, pair

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

# The runtime's codes are positions in these tuples (vm/kernels/runtime/resample.py).
RESIZE_METHODS = ("nearest_neighbor", "linear", "cubic")
COORDINATE_MODES = (
    "half_pixel",
    "align_corners",
    "asymmetric",
    "pytorch_half_pixel",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
    "half_pixel_symmetric",
)
ROUNDING_METHODS = ("", "round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")


def resolved_rounding(attrs: Mapping[str, Any]) -> str:
    """``rounding_method``, with TVM's choice for ``""``: ``round`` for ``align_corners``
    coordinates, ``floor`` otherwise."""
    rounding = attrs["rounding_method"]
    if rounding:
        return rounding
    return "round" if attrs["coordinate_transformation_mode"] == "align_corners" else "floor"


def check_resize2d(attrs: Mapping[str, Any]) -> None:
    """The attribute values a kernel cannot take: a size below one, a region of interest
    of other than four numbers, a coefficient or region that is not finite.

    Raises
    ------
    RuleError
        Naming the attribute.
    """
    pair("size", attrs["size"])
    roi = attrs["roi"]
    if len(roi) != 4:
        raise RuleError(
            f"attribute roi={roi!r} must hold 4 numbers (start_h, start_w, end_h, end_w), "
            f"found {len(roi)}"
        )
    if not all(math.isfinite(v) for v in roi):
        raise RuleError(f"attribute roi={roi!r} must hold finite numbers")
    if not math.isfinite(attrs["cubic_alpha"]):
        raise RuleError(f"attribute cubic_alpha={attrs['cubic_alpha']} must be finite")


def _resize2d_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data = args[0]
    require_rank("data", data, 4, 4)
    check_layout(attrs, "layout", (NCHW,))
    nearest = attrs["method"] == "nearest_neighbor"
    require_kind("data", data, "numeric" if nearest else "float")
    check_resize2d(attrs)
    out_dtype = attrs["out_dtype"] or data.dtype
    if out_dtype not in dtypes.NUMERIC:
        raise RuleError(f"attribute out_dtype={out_dtype!r} must be a numeric dtype")
    return (Spec(out_dtype, 4),)


def _resize2d_shape(ctx: ShapeCtx) -> list[list[str]]:
    n, c, h, w = ctx.arg_dims[0]
    out_h, out_w = pair("size", ctx.attrs["size"])
    ctx.fail_if(
        f"{n} * {c} > 0 and ({h} < 1 or {w} < 1)",
        f"cannot resize an image with no rows or columns to size ({out_h}, {out_w})",
    )
    return [[n, c, str(out_h), str(out_w)]]


def _resize2d_emit(ctx: EmitCtx) -> None:
    attrs = ctx.attrs
    data_dtype, out_dtype = ctx.arg_specs[0].dtype, ctx.out_specs[0].dtype
    zero = "np.float64(0.0)" if data_dtype == "float64" else "np.float32(0.0)"
    roi = ", ".join(float_literal(v) for v in attrs["roi"])
    ctx.src.line(
        f"rs.resize2d({ctx.args[0]}, {ctx.outs[0]}, {zero}, "
        f"{plain(RESIZE_METHODS.index(attrs['method']))}, "
        f"{plain(COORDINATE_MODES.index(attrs['coordinate_transformation_mode']))}, "
        f"{plain(ROUNDING_METHODS.index(resolved_rounding(attrs)))}, "
        f"np.float64({float_literal(attrs['cubic_alpha'])}), "
        f"{plain(bool(attrs['cubic_exclude']))}, "
        f"({roi}), {const(attrs['extrapolation_value'], out_dtype)})"
    )


RULES.register(
    OpRule(
        "image.resize2d",
        1,
        (
            Attr("size", "ints", required=True),
            Attr("roi", "floats", (0.0, 0.0, 0.0, 0.0)),
            Attr("layout", "str", NCHW),
            Attr("method", "str", "linear", choices=RESIZE_METHODS),
            Attr("coordinate_transformation_mode", "str", "half_pixel", choices=COORDINATE_MODES),
            Attr("rounding_method", "str", "", choices=ROUNDING_METHODS),
            Attr("cubic_alpha", "float", -0.5),
            Attr("cubic_exclude", "int", 0),
            Attr("extrapolation_value", "float", 0.0),
            Attr("out_dtype", "dtype_or_empty", ""),
        ),
        _resize2d_infer,
        _resize2d_shape,
        emit=_resize2d_emit,
        numeric=True,
    )
)


@RULES.shape("image.resize2d")
def _run_resize2d(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    n, c, h, w = sr.nchw(shapes[0])
    out_h, out_w = pair("size", attrs["size"])
    if n * c > 0 and (h < 1 or w < 1):
        raise RuleError(
            f"cannot resize data {sr.fmt_shape(shapes[0])}, an image with no rows or columns, "
            f"to size ({out_h}, {out_w})"
        )
    return [(n, c, out_h, out_w)]

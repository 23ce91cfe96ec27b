"""The ``relay.image`` namespace: builders for the image operators.

Compiler layer (``compiler.op``). ``relay.image.resize2d`` returns a ``Call`` like the
builders in :mod:`compiler.op.api`, with TVM's name, argument order and defaults; what it
computes is in :mod:`compiler.op.defs_image`.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.expr import Call
from compiler.op.api import SCHEMA, call_op, schema_defaults, static_attr

__all__ = ["resize2d"]


@schema_defaults("image.resize2d")
def resize2d(
    data: object,
    size: int | Sequence[int],
    roi: Sequence[float] | None = None,
    layout: str = SCHEMA,
    method: str = SCHEMA,
    coordinate_transformation_mode: str = SCHEMA,
    rounding_method: str = SCHEMA,
    cubic_alpha: float = SCHEMA,
    cubic_exclude: int = SCHEMA,
    extrapolation_value: float = SCHEMA,
    out_dtype: str | None = SCHEMA,
) -> Call:
    """Resize the height and width of NCHW ``data`` to ``size``.

    Parameters
    ----------
    data : Expr
        The images, ``(N, C, H, W)``; float for ``linear`` and ``cubic``, any numeric dtype
        for ``nearest_neighbor``.
    size : int or (int, int)
        The output (height, width).
    roi : (float, float, float, float), optional
        The region (start_h, start_w, end_h, end_w), normalized, that
        ``tf_crop_and_resize`` samples; ignored by the other coordinate modes.
    layout : str
        ``"NCHW"``, the one supported.
    method : str
        ``"nearest_neighbor"``, ``"linear"`` or ``"cubic"``.
    coordinate_transformation_mode : str
        ``"half_pixel"``, ``"align_corners"``, ``"asymmetric"``, ``"pytorch_half_pixel"``,
        ``"tf_half_pixel_for_nn"``, ``"tf_crop_and_resize"`` or ONNX's
        ``"half_pixel_symmetric"``.
    rounding_method : str
        How ``nearest_neighbor`` rounds: ``"round"``, ``"floor"``, ``"ceil"``,
        ``"round_prefer_floor"``, ``"round_prefer_ceil"``, or ``""`` (``round`` with
        ``align_corners``, ``floor`` otherwise).
    cubic_alpha : float
        The cubic kernel's coefficient (onnxruntime's default is -0.75).
    cubic_exclude : int
        Nonzero: drop cubic taps outside the image and renormalize the rest.
    extrapolation_value : float
        The value of ``tf_crop_and_resize`` outputs that sample outside the input.
    out_dtype : str or None
        The result's dtype; ``""`` or None (TVM's default) keeps data's.

    Returns
    -------
    Call
        ``(N, C, size[0], size[1])``.
    """
    size = static_attr("image.resize2d", "size", size)
    roi = (0.0, 0.0, 0.0, 0.0) if roi is None else static_attr("image.resize2d", "roi", roi)
    return call_op(
        "image.resize2d", [data], size=size, roi=roi, layout=layout, method=method,
        coordinate_transformation_mode=coordinate_transformation_mode,
        rounding_method=rounding_method, cubic_alpha=cubic_alpha, cubic_exclude=cubic_exclude,
        extrapolation_value=extrapolation_value, out_dtype=out_dtype or "",
    )  # fmt: skip

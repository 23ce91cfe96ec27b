"""Channels-last convolutions and pools, as the NCHW operators relayvm's kernels run.

Compiler layer (``compiler.op``), used by the ``relay.nn`` builders.

TVM scripts build NHWC networks (``relay.nn.conv2d(x, w, data_layout="NHWC",
kernel_layout="HWIO")``, ``relay.nn.max_pool2d(x, layout="NHWC")``), usually for models
from TensorFlow. Every convolution and pooling kernel relayvm has works on NCHW planes, so
the builders write such a call as the NCHW operator between ``transpose`` calls: the data
into NCHW, the weight into OIHW (at once when it is a constant), the result back into the
layout asked for. Answers are the NHWC operator's; the transposes are what
``relay.transform.ConvertLayout`` then moves and cancels between neighbouring operators.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Constant, Expr
from compiler.op.api import call_op

__all__ = ["DATA_LAYOUTS", "from_nchw", "kernel_to_oihw", "output_layout", "to_nchw"]

#: The data layouts the builders take, and the permutation each applies to NCHW's axes.
DATA_LAYOUTS = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 2, 3, 1)}


def _permutation(op: str, what: str, layout: object) -> tuple[int, ...]:
    if not isinstance(layout, str) or layout not in DATA_LAYOUTS:
        expected = " or ".join(repr(name) for name in DATA_LAYOUTS)
        raise ValueError(f"{op}: {what}={layout!r} is not supported; expected {expected}")
    return DATA_LAYOUTS[layout]


def output_layout(op: str, layout: str, out_layout: object) -> str:
    """The layout of ``op``'s result: ``out_layout``, or the data's when it is empty."""
    if out_layout in ("", None):
        return layout
    _permutation(op, "out_layout", out_layout)
    return out_layout  # type: ignore[return-value]


def to_nchw(op: str, data: object, layout: object) -> object:
    """``data`` of ``layout`` as NCHW: itself, or a ``transpose`` of it."""
    perm = _permutation(op, "layout", layout)
    if perm == DATA_LAYOUTS["NCHW"]:
        return data
    return call_op("transpose", [data], axes=list(np.argsort(perm).tolist()))


def from_nchw(op: str, result: Expr, layout: object) -> Expr:
    """An NCHW ``result`` in ``layout``: itself, or a ``transpose`` of it."""
    perm = _permutation(op, "out_layout", layout)
    if perm == DATA_LAYOUTS["NCHW"]:
        return result
    return call_op("transpose", [result], axes=list(perm))


def kernel_to_oihw(op: str, weight: object, kernel_layout: object) -> object:
    """``weight`` of ``kernel_layout`` (any order of the letters ``O``, ``I``, ``H``,
    ``W``: ``HWIO``, ``OHWI``, ``HWOI``...) as OIHW; a constant is transposed at once."""
    if not isinstance(kernel_layout, str) or sorted(kernel_layout) != sorted("OIHW"):
        raise ValueError(
            f"{op}: kernel_layout={kernel_layout!r} is not supported; expected the letters "
            "O, I, H and W in some order, such as 'OIHW' or 'HWIO'"
        )
    axes = [kernel_layout.index(letter) for letter in "OIHW"]
    if axes == [0, 1, 2, 3]:
        return weight
    if isinstance(weight, Constant) and weight.data.ndim == 4:
        return Constant(np.ascontiguousarray(np.transpose(weight.data, axes)))
    if isinstance(weight, np.ndarray) and weight.ndim == 4:
        return Constant(np.ascontiguousarray(np.transpose(weight, axes)))
    return call_op("transpose", [weight], axes=axes)

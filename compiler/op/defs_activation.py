"""Activation-style neural-network operators: ``nn.leaky_relu``, ``nn.prelu`` and
``nn.dropout``.

Compiler layer (``compiler.op``). ``nn.leaky_relu`` and ``nn.prelu`` compute
``x > 0 ? x : alpha * x`` (a scalar attribute ``alpha``, or a 1-D tensor ``alpha`` along
``axis``). ``nn.dropout`` has TVM's inference semantics: it returns the tuple ``(data,
mask)`` where the output is the input unchanged and the mask is all ones. All three take
floating-point data. (``nn.relu`` lives with the element-wise operators.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import TupleType, Type
from compiler.op.defs_common import define, result
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import (
    fmt_type,
    merge_dims,
    normalize_axis,
    require_dtype,
    require_same_dtype,
    tensor_arg,
)

# --- nn.leaky_relu -----------------------------------------------------------------------------


def _leaky_relu_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.leaky_relu(data; alpha): data's type (floating point)."""
    data = tensor_arg("nn.leaky_relu", arg_types[0], "data")
    require_dtype("nn.leaky_relu", data, "data", "float")
    return data


def _leaky_relu(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    alpha = x.dtype.type(attrs["alpha"])
    with np.errstate(all="ignore"):
        return result(np.where(x > 0, x, x * alpha), x.dtype)


define(
    "nn.leaky_relu",
    ("data",),
    _leaky_relu_rel,
    _leaky_relu,
    OpPattern.ELEMWISE,
    doc="x if x > 0 else alpha * x",
)


# --- nn.prelu ----------------------------------------------------------------------------------


def _prelu_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.prelu(data, alpha; axis): data's type; alpha is 1-D along data's axis."""
    op = "nn.prelu"
    data = tensor_arg(op, arg_types[0], "data")
    alpha = tensor_arg(op, arg_types[1], "alpha")
    require_same_dtype(op, [("data", data), ("alpha", alpha)])
    require_dtype(op, data, "data", "float")
    if data.ndim == 0:
        raise OpTypeError(f"{op}: argument data must have rank >= 1, found {fmt_type(data)}")
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    if alpha.ndim != 1:
        raise OpTypeError(f"{op}: argument alpha must be a 1-D tensor, found {fmt_type(alpha)}")
    what = f"alpha {fmt_type(alpha)} does not match axis {axis} of data {fmt_type(data)}"
    merge_dims(op, what, data.shape[axis], alpha.shape[0])
    return data


def _prelu(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, alpha = args
    axis = normalize_axis("nn.prelu", attrs["axis"], x.ndim)  # type: ignore[arg-type]
    if alpha.shape != (x.shape[axis],):
        raise OpTypeError(
            f"nn.prelu: alpha has shape {alpha.shape}, but axis {axis} of data with shape "
            f"{x.shape} has length {x.shape[axis]}"
        )
    shape = [1] * x.ndim
    shape[axis] = alpha.shape[0]
    with np.errstate(all="ignore"):
        return result(np.where(x > 0, x, x * alpha.reshape(shape)), x.dtype)


define(
    "nn.prelu",
    ("data", "alpha"),
    _prelu_rel,
    _prelu,
    OpPattern.BROADCAST,
    doc="x if x > 0 else alpha * x, with alpha per channel along axis",
)


# --- nn.dropout --------------------------------------------------------------------------------


def _dropout_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.dropout(data; rate) -> (data's type, data's type): the output and the mask."""
    op = "nn.dropout"
    data = tensor_arg(op, arg_types[0], "data")
    require_dtype(op, data, "data", "float")
    rate = attrs["rate"]
    if not 0.0 <= rate <= 1.0:  # type: ignore[operator]
        raise OpTypeError(f"{op}: attribute rate={rate} must be between 0 and 1")
    return TupleType([data, data])


def _dropout(args: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, np.ndarray]:
    (x,) = args
    return x.copy(), np.ones_like(x)


define(
    "nn.dropout",
    ("data",),
    _dropout_rel,
    _dropout,
    OpPattern.OPAQUE,
    doc="dropout at inference: (data unchanged, a mask of ones)",
)

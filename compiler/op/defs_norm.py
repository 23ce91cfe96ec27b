"""Normalization operators: ``nn.batch_norm``, ``nn.layer_norm`` and ``nn.group_norm``.

Compiler layer (``compiler.op``). Semantics are TVM's at inference: ``nn.batch_norm``
normalizes with the given moving statistics and returns the tuple ``(normalized data,
moving_mean, moving_var)``; ``nn.layer_norm`` normalizes over the single axis ``axis``;
``nn.group_norm`` splits the channel axis into ``num_groups`` groups and normalizes each
group over its channels and every axis after them. Variances are biased (divide by the
count). ``scale=False`` ignores ``gamma`` and ``center=False`` ignores ``beta``; both are
1-D tensors as long as the normalized channel axis. All three take floating-point data
and are OPAQUE: a simplification pass rewrites them into element-wise arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, TupleType, Type
from compiler.op.defs_common import define, required, result
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import (
    fmt_type,
    merge_dims,
    normalize_axis,
    require_dtype,
    require_same_dtype,
    tensor_arg,
)


def _check_epsilon(op: str, attrs: Attrs) -> None:
    if attrs["epsilon"] < 0:  # type: ignore[operator]
        raise OpTypeError(f"{op}: attribute epsilon={attrs['epsilon']} must not be negative")


def _normalized(
    op: str, arg_types: Sequence[Type], names: Sequence[str], attrs: Attrs
) -> tuple[TensorType, int, Dim]:
    """The data type, its normalized channel axis, and the channel count after checking that
    every other argument is a 1-D tensor of that length and data's dtype."""
    data = tensor_arg(op, arg_types[0], "data")
    require_dtype(op, data, "data", "float")
    if data.ndim == 0:
        raise OpTypeError(f"{op}: argument data must have rank >= 1, found {fmt_type(data)}")
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    _check_epsilon(op, attrs)
    vectors = [tensor_arg(op, ty, name) for ty, name in zip(arg_types[1:], names)]
    require_same_dtype(op, [("data", data), *zip(names, vectors)])
    channels = data.shape[axis]
    for name, vec in zip(names, vectors):
        if vec.ndim != 1:
            raise OpTypeError(f"{op}: argument {name} must be a 1-D tensor, found {fmt_type(vec)}")
        what = (
            f"argument {name} {fmt_type(vec)} does not match axis {axis} of data {fmt_type(data)}"
        )
        channels = merge_dims(op, what, channels, vec.shape[0])
    return data, axis, channels


def _along(vector: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = vector.shape[0]
    return vector.reshape(shape)


def _affine(out: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axis: int, attrs: Attrs):
    if attrs["scale"]:
        out = out * _along(gamma, out.ndim, axis)
    if attrs["center"]:
        out = out + _along(beta, out.ndim, axis)
    return out


def _check_lengths(op: str, data: np.ndarray, axis: int, named: Sequence[tuple[str, np.ndarray]]):
    """Run-time check of the vector lengths that were ``?`` when type checking."""
    for name, vec in named:
        if vec.shape != (data.shape[axis],):
            raise OpTypeError(
                f"{op}: argument {name} has shape {vec.shape}, but axis {axis} of data with "
                f"shape {data.shape} has length {data.shape[axis]}"
            )


# --- nn.batch_norm -----------------------------------------------------------------------------

_BN_VECTORS = ("gamma", "beta", "moving_mean", "moving_var")


def _batch_norm_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.batch_norm(data, gamma, beta, moving_mean, moving_var) -> (data, (C,), (C,))."""
    data, _, channels = _normalized("nn.batch_norm", arg_types, _BN_VECTORS, attrs)
    vector = TensorType([channels], data.dtype)
    return TupleType([data, vector, vector])


def _batch_norm(args: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
    op = "nn.batch_norm"
    data, gamma, beta, mean, var = args
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    _check_lengths(op, data, axis, list(zip(_BN_VECTORS, args[1:])))
    with np.errstate(all="ignore"):
        inv_std = 1.0 / np.sqrt(var + data.dtype.type(attrs["epsilon"]))
        out = (data - _along(mean, data.ndim, axis)) * _along(inv_std, data.ndim, axis)
        out = _affine(out, gamma, beta, axis, attrs)
    return result(out, data.dtype), mean.copy(), var.copy()


define(
    "nn.batch_norm",
    ("data", *_BN_VECTORS),
    _batch_norm_rel,
    _batch_norm,
    OpPattern.OPAQUE,
    doc="batch normalization with moving statistics (inference)",
)


# --- nn.layer_norm -----------------------------------------------------------------------------


def _layer_norm_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.layer_norm(data, gamma, beta): data's type, normalized along axis."""
    data, _, _ = _normalized("nn.layer_norm", arg_types, ("gamma", "beta"), attrs)
    return data


def _standardize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    return centered / np.sqrt(var + x.dtype.type(epsilon))


def _layer_norm(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    op = "nn.layer_norm"
    data, gamma, beta = args
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    _check_lengths(op, data, axis, [("gamma", gamma), ("beta", beta)])
    with np.errstate(all="ignore"):
        out = _standardize(data, (axis,), attrs["epsilon"])  # type: ignore[arg-type]
        out = _affine(out, gamma, beta, axis, attrs)
    return result(out, data.dtype)


define(
    "nn.layer_norm",
    ("data", "gamma", "beta"),
    _layer_norm_rel,
    _layer_norm,
    OpPattern.OPAQUE,
    doc="layer normalization along axis",
)


# --- nn.group_norm -----------------------------------------------------------------------------


def _check_groups(op: str, data: TensorType | np.ndarray, axis: int, attrs: Attrs) -> int:
    groups = required(op, attrs, "num_groups")
    if groups < 1:  # type: ignore[operator]
        raise OpTypeError(f"{op}: attribute num_groups={groups} must be >= 1")
    channels = data.shape[axis]
    if not isinstance(channels, Any) and channels % groups:  # type: ignore[operator]
        raise OpTypeError(
            f"{op}: the {channels} channels on axis {axis} of data "
            f"{fmt_type(data) if isinstance(data, TensorType) else data.shape} are not "
            f"divisible by num_groups={groups}"
        )
    return groups  # type: ignore[return-value]


def _group_norm_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.group_norm(data, gamma, beta; num_groups): data's type."""
    op = "nn.group_norm"
    data, axis, _ = _normalized(op, arg_types, ("gamma", "beta"), attrs)
    _check_groups(op, data, axis, attrs)
    return data


def _group_norm(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    op = "nn.group_norm"
    data, gamma, beta = args
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    groups = _check_groups(op, data, axis, attrs)
    _check_lengths(op, data, axis, [("gamma", gamma), ("beta", beta)])
    shape = data.shape
    # (..., C, ...) -> (..., groups, C / groups, ...); each group is normalized over its
    # channels and every axis after them.
    split = shape[:axis] + (groups, shape[axis] // groups) + shape[axis + 1 :]
    reduce_axes = tuple(range(axis + 1, len(split)))
    with np.errstate(all="ignore"):
        out = _standardize(data.reshape(split), reduce_axes, attrs["epsilon"])  # type: ignore[arg-type]
        out = _affine(out.reshape(shape), gamma, beta, axis, attrs)
    return result(out, data.dtype)


define(
    "nn.group_norm",
    ("data", "gamma", "beta"),
    _group_norm_rel,
    _group_norm,
    OpPattern.OPAQUE,
    doc="group normalization over num_groups groups of channels",
)

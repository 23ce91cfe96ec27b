"""Reductions: sum, mean, max, min, prod, all, any, argmax and argmin.

Compiler layer (``compiler.op``). Every reduction takes TVM's ``axis`` (``None`` means
every axis; an int or a list of ints), ``keepdims`` and ``exclude`` (reduce every axis
*not* listed). Results keep the input dtype, except ``argmax``/``argmin`` which give
``int32`` indices; over several axes the index is the row-major position within the
reduced axes, as TVM computes it.

Empty reductions follow the identity of the operation: 0 for ``sum``, 1 for ``prod``,
``-inf``/``+inf`` (or the dtype's extreme integer) for ``max``/``min``, ``True`` for ``all``,
``False`` for ``any``, ``nan`` for a floating-point ``mean``; an integer ``mean`` or an
``argmax``/``argmin`` over no elements is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.registry import OpPattern
from compiler.op.typerel import dtype_kind, normalize_axes, require_dtype, tensor_arg


def reduce_axes(op: str, ndim: int, attrs: Attrs) -> tuple[int, ...]:
    """The axes a reduction removes, sorted; TVM's rules for ``axis`` and ``exclude``."""
    axis = attrs.get("axis")
    if axis is None:
        return tuple(range(ndim))
    listed = normalize_axes(op, axis, ndim)  # type: ignore[arg-type]
    if attrs.get("exclude"):
        return tuple(a for a in range(ndim) if a not in listed)
    return tuple(sorted(listed))


def _reduce_rel(op: str, kind: str | None, out_dtype: str | None) -> Callable:
    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        data = tensor_arg(op, arg_types[0], "data")
        if kind is not None:
            require_dtype(op, data, "data", kind)
        axes = reduce_axes(op, data.ndim, attrs)
        if attrs.get("keepdims"):
            shape = tuple(1 if i in axes else d for i, d in enumerate(data.shape))
        else:
            shape = tuple(d for i, d in enumerate(data.shape) if i not in axes)
        return TensorType(shape, out_dtype or data.dtype)

    rel.__doc__ = f"{op}(data; axis, keepdims, exclude): data with the reduced axes removed."
    return rel


def _numpy_reduce(op: str, fn: Callable[..., object]) -> Callable:
    def reference(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = args
        axes = reduce_axes(op, x.ndim, attrs)
        with np.errstate(all="ignore"):
            value = fn(x, axis=axes, keepdims=bool(attrs["keepdims"]))
        return result(value, x.dtype)

    return reference


def _sum(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> object:
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _prod(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> object:
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _extreme(fn: Callable[..., object], lowest: bool) -> Callable:
    def reduce(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> object:
        kind = dtype_kind(x.dtype.name)
        if kind == "float":
            initial = -np.inf if lowest else np.inf
        elif kind == "bool":
            initial = not lowest
        else:
            info = np.iinfo(x.dtype)
            initial = info.min if lowest else info.max
        # initial= only matters for empty reductions; nan still propagates.
        return fn(x, axis=axis, keepdims=keepdims, initial=x.dtype.type(initial))

    return reduce


def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> object:
    count = 1
    for a in axis:
        count *= x.shape[a]
    if dtype_kind(x.dtype.name) == "float":
        # float16 accumulates in float32, as numpy's mean does; 0 / 0 gives nan quietly.
        wide = np.float32 if x.dtype == np.float16 else x.dtype.type
        total = np.sum(x, axis=axis, keepdims=keepdims, dtype=wide)
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / wide(count)
    if count == 0:
        raise ValueError(f"mean: cannot average an integer tensor over zero elements ({x.shape})")
    # Exact sum in 64 bits, then TVM's truncating integer division.
    wide = np.uint64 if x.dtype.kind == "u" else np.int64
    total = np.sum(x, axis=axis, keepdims=keepdims, dtype=wide)
    quotient = np.abs(total) // count
    return np.where(total < 0, -quotient, quotient)


_REDUCTIONS = [
    # name, dtype kind, reference
    ("sum", "numeric", _numpy_reduce("sum", _sum)),
    ("mean", "numeric", _numpy_reduce("mean", _mean)),
    ("prod", "numeric", _numpy_reduce("prod", _prod)),
    ("max", None, _numpy_reduce("max", _extreme(np.max, lowest=True))),
    ("min", None, _numpy_reduce("min", _extreme(np.min, lowest=False))),
    ("all", "bool", _numpy_reduce("all", np.all)),
    ("any", "bool", _numpy_reduce("any", np.any)),
]

for _name, _kind, _ref in _REDUCTIONS:
    define(
        _name,
        ("data",),
        _reduce_rel(_name, _kind, None),
        _ref,
        OpPattern.COMM_REDUCE,
        doc=f"{_name} over axis",
    )


def _arg_reduce(op: str, fn: Callable[..., np.ndarray]) -> Callable:
    def reference(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = args
        axes = reduce_axes(op, x.ndim, attrs)
        kept = [a for a in range(x.ndim) if a not in axes]
        # Move the reduced axes last and flatten them: the index is row-major among them.
        moved = np.transpose(x, kept + list(axes))
        kept_shape = tuple(x.shape[a] for a in kept)
        count = 1
        for a in axes:
            count *= x.shape[a]
        if count == 0:
            raise ValueError(f"{op}: cannot take {op} over zero elements (shape {x.shape})")
        flat = moved.reshape(kept_shape + (count,))
        if attrs["select_last_index"]:
            index = count - 1 - fn(flat[..., ::-1], axis=-1)
        else:
            index = fn(flat, axis=-1)
        if attrs["keepdims"]:
            index = index.reshape(tuple(1 if a in axes else x.shape[a] for a in range(x.ndim)))
        return result(index, "int32")

    return reference


for _name, _fn in (("argmax", np.argmax), ("argmin", np.argmin)):
    define(
        _name,
        ("data",),
        _reduce_rel(_name, None, "int32"),
        _arg_reduce(_name, _fn),
        OpPattern.COMM_REDUCE,
        doc=f"int32 index of the {_name[3:]}imum over axis",
    )

"""Operator builder functions: ``relay.add``, ``relay.sum``, ``relay.reshape`` and the rest.

Compiler layer (``compiler.op``). Each builder takes TVM's arguments and attributes and
returns ``Call(get_op(name), args, attrs)`` with the attributes normalized by the
operator's schema (every attribute present, defaults filled), so a built call prints,
parses and compares equal to the same call written in the text format. A builder's
attribute parameters default to ``SCHEMA``, which :func:`schema_defaults` replaces by the
schema's default, so no default is written twice. Arguments may be
Relay expressions, Python scalars or numpy arrays (wrapped with ``relay.const``).

Several builders deliberately shadow Python builtins (``sum``, ``max``, ``min``, ``abs``,
``round``, ``all``, ``any``); this module never uses those builtins itself, and
``from compiler.op.api import *`` exports only the names in ``__all__``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from compiler.ir.expr import Call, Constant, Expr, Tuple, const
from compiler.op.registry import get_def, get_op
from vm.kernels.table import get_rule

F = TypeVar("F", bound=Callable[..., object])

__all__ = [  # the operator builders, sorted
    "abs", "add", "all", "any", "arange", "argmax", "argmin", "argsort", "argwhere",
    "broadcast_to", "cast",
    "ceil", "clip", "concatenate", "copy", "cos", "divide", "equal", "erf", "exp",
    "expand_dims", "floor", "floor_divide", "floor_mod", "full", "full_like", "gather",
    "gather_nd", "greater",
    "greater_equal", "layout_transform", "less", "less_equal", "log", "logical_and",
    "logical_not", "logical_or", "max", "maximum", "mean", "min", "minimum", "mod", "multiply",
    "ndarray_size", "negative", "not_equal", "ones", "ones_like", "power", "prod", "reshape",
    "round", "rsqrt", "scatter", "scatter_add", "scatter_elements", "scatter_nd", "shape_of",
    "sigmoid", "sign", "sin", "split", "sqrt", "squeeze", "stack",
    "strided_slice", "subtract", "sum", "take", "tanh", "topk", "transpose", "where", "zeros",
    "zeros_like",
]  # fmt: skip


class _SchemaDefault:
    """The marker :data:`SCHEMA`: "this parameter's default is the attribute schema's"."""

    def __repr__(self) -> str:
        return "SCHEMA"


#: A builder parameter's default meaning "the operator's attribute schema's default";
#: :func:`schema_defaults` puts the schema's value in its place.
SCHEMA: Any = _SchemaDefault()


def schema_defaults(op: str) -> Callable[[F], F]:
    """Give a builder's ``SCHEMA`` parameters the defaults of operator ``op``'s attributes.

    The defaults are written once, in the operator's schema (its kernel rule, read from
    :mod:`vm.kernels.table`); the builder's signature, ``help()`` and
    ``inspect.signature`` show them as ordinary defaults.

    Parameters
    ----------
    op : str
        The operator whose schema the builder's parameters are named after.

    Raises
    ------
    ValueError
        At decoration, if a ``SCHEMA`` parameter names no attribute of ``op`` with a default.
    """
    rule = get_rule(op)
    schema = {spec.name: spec for spec in rule.attrs} if rule is not None else {}

    def default(fn: F, name: str) -> object:
        spec = schema.get(name)
        if spec is None or spec.required:
            raise ValueError(f"builder {fn.__name__}: {op} has no attribute {name} with a default")
        return spec.default

    def decorate(fn: F) -> F:
        code = fn.__code__
        positional = code.co_varnames[: code.co_argcount]
        if fn.__defaults__:
            names = positional[len(positional) - len(fn.__defaults__) :]
            fn.__defaults__ = tuple(
                default(fn, name) if value is SCHEMA else value
                for name, value in zip(names, fn.__defaults__)
            )
        if fn.__kwdefaults__:
            fn.__kwdefaults__ = {
                name: default(fn, name) if value is SCHEMA else value
                for name, value in fn.__kwdefaults__.items()
            }
        return fn

    return decorate


def as_expr(value: object) -> Expr:
    """``value`` itself if it is an expression, else ``relay.const(value)``."""
    return value if isinstance(value, Expr) else const(value)


def call_op(name: str, args: Sequence[object], **attrs: object) -> Call:
    """``Call(get_op(name), args, attrs)`` with ``attrs`` validated and defaults filled.

    Raises ``TypeError`` naming the operator and attribute if an attribute is unknown,
    missing or of the wrong kind.
    """
    opdef = get_def(name)
    # A dtype may be given as a numpy type (np.float32) or np.dtype; attributes hold names.
    plain = {
        key: np.dtype(value).name if _is_numpy_dtype(value) else value
        for key, value in attrs.items()
    }
    return Call(get_op(name), [as_expr(a) for a in args], opdef.normalize_attrs(plain))


def _is_numpy_dtype(value: object) -> bool:
    return isinstance(value, np.dtype) or (
        isinstance(value, type) and issubclass(value, np.generic)
    )


def _is_dynamic(value: object) -> bool:
    """A shape-like argument given as a tensor only known at run time (TVM's ``dyn.*`` form)."""
    return isinstance(value, Expr) and not isinstance(value, Constant)


def _static_ints(value: object) -> object:
    """Shape-like attributes may be given as a constant tensor; attributes hold plain ints."""
    if isinstance(value, Constant):
        return tuple(int(v) for v in value.data.reshape(-1).tolist())
    return value


def static_attr(op: str, name: str, value: object) -> object:
    """Attribute ``name`` of a builder of ``op`` as plain Python values: a number or list as
    given, a constant as its values; a tensor computed at run time is refused by name.

    Raises
    ------
    TypeError
        If ``value`` is an expression other than a constant.
    """
    if isinstance(value, Constant):
        return value.data.tolist()
    if isinstance(value, Expr):
        raise TypeError(
            f"{op}: {name} must be given as numbers or a constant; a {name} computed at run "
            "time is not supported"
        )
    return value


def _tuple_arg(data: object) -> Expr:
    """A list/tuple of expressions becomes a ``relay.Tuple``; a tuple-typed expression stays."""
    if isinstance(data, Expr):
        return data
    if isinstance(data, (list, tuple)):
        return Tuple([as_expr(d) for d in data])
    raise TypeError(
        f"expected a list or tuple of expressions or a tuple-typed expression, got {data!r}"
    )


# --- binary ------------------------------------------------------------------------------------


def add(lhs: object, rhs: object) -> Call:
    """``lhs + rhs`` with numpy broadcasting."""
    return call_op("add", [lhs, rhs])


def subtract(lhs: object, rhs: object) -> Call:
    """``lhs - rhs`` with numpy broadcasting."""
    return call_op("subtract", [lhs, rhs])


def multiply(lhs: object, rhs: object) -> Call:
    """``lhs * rhs`` with numpy broadcasting."""
    return call_op("multiply", [lhs, rhs])


def divide(lhs: object, rhs: object) -> Call:
    """``lhs / rhs``; integer division truncates toward zero."""
    return call_op("divide", [lhs, rhs])


def floor_divide(lhs: object, rhs: object) -> Call:
    """``floor(lhs / rhs)``."""
    return call_op("floor_divide", [lhs, rhs])


def mod(lhs: object, rhs: object) -> Call:
    """Remainder of truncating division (the sign of ``lhs``)."""
    return call_op("mod", [lhs, rhs])


def floor_mod(lhs: object, rhs: object) -> Call:
    """Remainder of floor division (the sign of ``rhs``)."""
    return call_op("floor_mod", [lhs, rhs])


def power(lhs: object, rhs: object) -> Call:
    """``lhs ** rhs``."""
    return call_op("power", [lhs, rhs])


def maximum(lhs: object, rhs: object) -> Call:
    """Element-wise maximum."""
    return call_op("maximum", [lhs, rhs])


def minimum(lhs: object, rhs: object) -> Call:
    """Element-wise minimum."""
    return call_op("minimum", [lhs, rhs])


def equal(lhs: object, rhs: object) -> Call:
    """``lhs == rhs`` (bool)."""
    return call_op("equal", [lhs, rhs])


def not_equal(lhs: object, rhs: object) -> Call:
    """``lhs != rhs`` (bool)."""
    return call_op("not_equal", [lhs, rhs])


def less(lhs: object, rhs: object) -> Call:
    """``lhs < rhs`` (bool)."""
    return call_op("less", [lhs, rhs])


def less_equal(lhs: object, rhs: object) -> Call:
    """``lhs <= rhs`` (bool)."""
    return call_op("less_equal", [lhs, rhs])


def greater(lhs: object, rhs: object) -> Call:
    """``lhs > rhs`` (bool)."""
    return call_op("greater", [lhs, rhs])


def greater_equal(lhs: object, rhs: object) -> Call:
    """``lhs >= rhs`` (bool)."""
    return call_op("greater_equal", [lhs, rhs])


def logical_and(lhs: object, rhs: object) -> Call:
    """Element-wise ``and`` of bool tensors."""
    return call_op("logical_and", [lhs, rhs])


def logical_or(lhs: object, rhs: object) -> Call:
    """Element-wise ``or`` of bool tensors."""
    return call_op("logical_or", [lhs, rhs])


# --- unary -------------------------------------------------------------------------------------


def negative(data: object) -> Call:
    """``-data``."""
    return call_op("negative", [data])


def abs(data: object) -> Call:
    """``|data|``."""
    return call_op("abs", [data])


def exp(data: object) -> Call:
    """``e ** data`` (floating point)."""
    return call_op("exp", [data])


def log(data: object) -> Call:
    """Natural logarithm (floating point)."""
    return call_op("log", [data])


def sqrt(data: object) -> Call:
    """Square root (floating point)."""
    return call_op("sqrt", [data])


def rsqrt(data: object) -> Call:
    """``1 / sqrt(data)`` (floating point)."""
    return call_op("rsqrt", [data])


def sin(data: object) -> Call:
    """Sine (floating point)."""
    return call_op("sin", [data])


def cos(data: object) -> Call:
    """Cosine (floating point)."""
    return call_op("cos", [data])


def tanh(data: object) -> Call:
    """Hyperbolic tangent (floating point)."""
    return call_op("tanh", [data])


def sigmoid(data: object) -> Call:
    """``1 / (1 + e ** -data)`` (floating point)."""
    return call_op("sigmoid", [data])


def erf(data: object) -> Call:
    """The Gauss error function (floating point)."""
    return call_op("erf", [data])


def floor(data: object) -> Call:
    """Round toward -inf (identity on integers)."""
    return call_op("floor", [data])


def ceil(data: object) -> Call:
    """Round toward +inf (identity on integers)."""
    return call_op("ceil", [data])


def round(data: object) -> Call:
    """Round half to even (identity on integers)."""
    return call_op("round", [data])


def sign(data: object) -> Call:
    """-1, 0 or 1 by the sign of each element."""
    return call_op("sign", [data])


def logical_not(data: object) -> Call:
    """Element-wise ``not`` of a bool tensor."""
    return call_op("logical_not", [data])


def copy(data: object) -> Call:
    """A copy of ``data``."""
    return call_op("copy", [data])


def zeros_like(data: object) -> Call:
    """Zeros of ``data``'s shape and dtype."""
    return call_op("zeros_like", [data])


def ones_like(data: object) -> Call:
    """Ones of ``data``'s shape and dtype."""
    return call_op("ones_like", [data])


def clip(a: object, a_min: float, a_max: float) -> Call:
    """``a`` limited to ``[a_min, a_max]``."""
    return call_op("clip", [a], a_min=a_min, a_max=a_max)


def cast(data: object, dtype: str) -> Call:
    """``data`` converted to ``dtype``."""
    return call_op("cast", [data], dtype=dtype)


# --- fills -------------------------------------------------------------------------------------


@schema_defaults("zeros")
def zeros(shape: Sequence[int] | Expr, dtype: str = SCHEMA) -> Call:
    """A tensor of ``shape`` filled with 0 (``dyn.zeros`` when ``shape`` is a tensor)."""
    if _is_dynamic(shape):
        return call_op("dyn.zeros", [shape], dtype=dtype)
    return call_op("zeros", [], shape=_static_ints(shape), dtype=dtype)


@schema_defaults("ones")
def ones(shape: Sequence[int] | Expr, dtype: str = SCHEMA) -> Call:
    """A tensor of ``shape`` filled with 1 (``dyn.ones`` when ``shape`` is a tensor)."""
    if _is_dynamic(shape):
        return call_op("dyn.ones", [shape], dtype=dtype)
    return call_op("ones", [], shape=_static_ints(shape), dtype=dtype)


@schema_defaults("full")
def full(fill_value: object, shape: Sequence[int] | Expr = (), dtype: str = SCHEMA) -> Call:
    """A tensor of ``shape`` filled with the scalar ``fill_value`` (``dtype=""``: its dtype;
    ``dyn.full`` when ``shape`` is a tensor)."""
    if _is_dynamic(shape):
        return call_op("dyn.full", [fill_value, shape], dtype=dtype)
    return call_op("full", [fill_value], shape=_static_ints(shape), dtype=dtype)


def full_like(data: object, fill_value: object) -> Call:
    """A tensor of ``data``'s shape and dtype filled with the scalar ``fill_value``."""
    return call_op("full_like", [data, fill_value])


# --- reductions --------------------------------------------------------------------------------


def _reduce(name: str, data: object, axis: object, keepdims: bool, exclude: bool) -> Call:
    return call_op(name, [data], axis=axis, keepdims=keepdims, exclude=exclude)


@schema_defaults("sum")
def sum(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Sum over ``axis`` (every axis if ``None``; the other axes if ``exclude``)."""
    return _reduce("sum", data, axis, keepdims, exclude)


@schema_defaults("mean")
def mean(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Mean over ``axis`` (integers: the truncated exact mean)."""
    return _reduce("mean", data, axis, keepdims, exclude)


@schema_defaults("max")
def max(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Maximum over ``axis``."""
    return _reduce("max", data, axis, keepdims, exclude)


@schema_defaults("min")
def min(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Minimum over ``axis``."""
    return _reduce("min", data, axis, keepdims, exclude)


@schema_defaults("prod")
def prod(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Product over ``axis``."""
    return _reduce("prod", data, axis, keepdims, exclude)


@schema_defaults("all")
def all(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Logical ``and`` over ``axis`` of a bool tensor."""
    return _reduce("all", data, axis, keepdims, exclude)


@schema_defaults("any")
def any(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Logical ``or`` over ``axis`` of a bool tensor."""
    return _reduce("any", data, axis, keepdims, exclude)


@schema_defaults("argmax")
def argmax(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA, select_last_index: bool = SCHEMA,
) -> Call:  # fmt: skip
    """int32 index of the maximum over ``axis`` (first one unless ``select_last_index``)."""
    return call_op(
        "argmax", [data], axis=axis, keepdims=keepdims, exclude=exclude,
        select_last_index=select_last_index,
    )  # fmt: skip


@schema_defaults("argmin")
def argmin(
    data: object, axis: int | Sequence[int] | None = SCHEMA, keepdims: bool = SCHEMA,
    exclude: bool = SCHEMA, select_last_index: bool = SCHEMA,
) -> Call:  # fmt: skip
    """int32 index of the minimum over ``axis`` (first one unless ``select_last_index``)."""
    return call_op(
        "argmin", [data], axis=axis, keepdims=keepdims, exclude=exclude,
        select_last_index=select_last_index,
    )  # fmt: skip


# --- transforms --------------------------------------------------------------------------------


def reshape(data: object, newshape: int | Sequence[int] | Expr) -> Call:
    """``data`` with a new shape; 0 copies an input dimension, -1 is inferred (-2/-3/-4 too).

    A non-constant tensor ``newshape`` gives ``dyn.reshape``: one program for every value.
    """
    if _is_dynamic(newshape):
        return call_op("dyn.reshape", [data, newshape])
    return call_op("reshape", [data], newshape=_static_ints(newshape))


def layout_transform(data: object, src_layout: str, dst_layout: str) -> Call:
    """``data`` rearranged from ``src_layout`` to ``dst_layout``; only ``"NC"`` to
    ``"NC{n}n"`` (panels of ``n`` rows, as ``nn.contrib_dense_pack`` takes its weight)."""
    return call_op("layout_transform", [data], src_layout=src_layout, dst_layout=dst_layout)


@schema_defaults("transpose")
def transpose(data: object, axes: Sequence[int] | None = SCHEMA) -> Call:
    """Permute the axes (reverse them if ``axes`` is ``None``)."""
    return call_op("transpose", [data], axes=axes)


@schema_defaults("squeeze")
def squeeze(data: object, axis: int | Sequence[int] | None = SCHEMA) -> Call:
    """Remove size-1 axes (the listed ones, or every statically size-1 axis)."""
    return call_op("squeeze", [data], axis=axis)


@schema_defaults("expand_dims")
def expand_dims(data: object, axis: int, num_newaxis: int = SCHEMA) -> Call:
    """Insert ``num_newaxis`` size-1 axes at ``axis``."""
    return call_op("expand_dims", [data], axis=axis, num_newaxis=num_newaxis)


@schema_defaults("concatenate")
def concatenate(data: object, axis: int = SCHEMA) -> Call:
    """Join tensors along ``axis``; ``data`` is a list/tuple of exprs or a tuple-typed expr."""
    return call_op("concatenate", [_tuple_arg(data)], axis=axis)


@schema_defaults("stack")
def stack(data: object, axis: int = SCHEMA) -> Call:
    """Stack same-shaped tensors along a new axis ``axis``."""
    return call_op("stack", [_tuple_arg(data)], axis=axis)


@schema_defaults("split")
def split(data: object, indices_or_sections: int | Sequence[int], axis: int = SCHEMA) -> Call:
    """Split into equal sections or at indices; the call has a tuple type (index it)."""
    return call_op(
        "split", [data], indices_or_sections=_static_ints(indices_or_sections), axis=axis
    )


@schema_defaults("strided_slice")
def strided_slice(
    data: object, begin: Sequence[int], end: Sequence[int],
    strides: Sequence[int] | None = SCHEMA, axes: Sequence[int] | None = SCHEMA,
    slice_mode: str = SCHEMA,
) -> Call:  # fmt: skip
    """``data[begin:end:strides]`` per axis (``slice_mode="size"``: ``end`` holds sizes).

    If ``begin``, ``end`` or ``strides`` is a non-constant tensor, the slice is
    ``dyn.strided_slice`` over the leading axes (``axes`` must then be ``None``).
    """
    if _is_dynamic(begin) or _is_dynamic(end) or _is_dynamic(strides):
        if axes is not None:
            raise ValueError(
                "strided_slice: axes must be None when begin, end or strides is a tensor"
            )
        begin_e, end_e = as_expr(_as_list(begin)), as_expr(_as_list(end))
        strides_e = as_expr(_as_list(strides if strides is not None else [1]))
        return call_op(
            "dyn.strided_slice", [data, begin_e, end_e, strides_e], slice_mode=slice_mode
        )
    return call_op(
        "strided_slice", [data], begin=_static_ints(begin), end=_static_ints(end),
        strides=None if strides is None else _static_ints(strides), axes=axes,
        slice_mode=slice_mode,
    )  # fmt: skip


@schema_defaults("take")
def take(
    data: object, indices: object, axis: int | None = SCHEMA, batch_dims: int = SCHEMA,
    mode: str = SCHEMA,
) -> Call:  # fmt: skip
    """Gather along ``axis`` (flattened if ``None``); ``mode`` clip, wrap or fast."""
    return call_op("take", [data, indices], axis=axis, batch_dims=batch_dims, mode=mode)


@schema_defaults("gather")
def gather(data: object, axis: int, indices: object) -> Call:
    """``data`` at ``indices`` along ``axis``, every other index the element's own
    (TVM's argument order; ONNX's ``GatherElements``, torch's ``gather``)."""
    return call_op("gather", [data, indices], axis=axis)


@schema_defaults("gather_nd")
def gather_nd(
    data: object, indices: object, batch_dims: int = SCHEMA, index_rank: int | None = SCHEMA
) -> Call:
    """``data`` at the index tuples along ``indices``' first axis, after ``batch_dims``
    batch axes shared by both; ``index_rank`` is the tuple length where that axis is ``?``."""
    return call_op("gather_nd", [data, indices], batch_dims=batch_dims, index_rank=index_rank)


@schema_defaults("scatter_elements")
def scatter_elements(
    data: object, indices: object, updates: object, axis: int = SCHEMA, reduction: str = SCHEMA
) -> Call:
    """``data`` with ``updates`` written where ``gather(data, axis, indices)`` reads;
    ``reduction`` (``update``, ``add``, ``mul``, ``mean``, ``min``, ``max``) combines each
    update with what is there, repeats in order."""
    return call_op("scatter_elements", [data, indices, updates], axis=axis, reduction=reduction)


def scatter(data: object, indices: object, updates: object, axis: int = 0) -> Call:
    """``scatter_elements`` with ``reduction="update"`` (TVM's older name)."""
    return scatter_elements(data, indices, updates, axis=axis, reduction="update")


def scatter_add(data: object, indices: object, updates: object, axis: int = 0) -> Call:
    """``scatter_elements`` with ``reduction="add"`` (TVM's older name)."""
    return scatter_elements(data, indices, updates, axis=axis, reduction="add")


@schema_defaults("scatter_nd")
def scatter_nd(data: object, indices: object, updates: object, mode: str = SCHEMA) -> Call:
    """``data`` with ``updates`` written at the index tuples along ``indices``' first axis
    (``mode``: ``update``, ``add``, ``mul``, ``min``, ``max``)."""
    return call_op("scatter_nd", [data, indices, updates], mode=mode)


def where(condition: object, x: object, y: object) -> Call:
    """``x`` where ``condition`` (bool) holds, else ``y``; all three broadcast."""
    return call_op("where", [condition, x, y])


def broadcast_to(data: object, shape: Sequence[int] | Expr) -> Call:
    """``data`` broadcast to ``shape`` (``dyn.broadcast_to`` when ``shape`` is a tensor)."""
    if _is_dynamic(shape):
        return call_op("dyn.broadcast_to", [data, shape])
    return call_op("broadcast_to", [data], shape=_static_ints(shape))


def _as_list(value: object) -> object:
    """A tuple of ints becomes a list, so ``relay.const`` makes a vector of it."""
    return list(value) if isinstance(value, tuple) else value


# --- shapes, ranges and sorting ----------------------------------------------------------------


@schema_defaults("shape_of")
def shape_of(data: object, dtype: str = SCHEMA) -> Call:
    """The shape of ``data`` as a one-dimensional tensor."""
    return call_op("shape_of", [data], dtype=dtype)


def argwhere(condition: object) -> Call:
    """The index of every nonzero element of ``condition``, one row each in C order: a
    ``Tensor[(?, ndim), int32]`` whose row count is known only when it runs (TVM's
    ``relay.argwhere``)."""
    return call_op("argwhere", [condition])


@schema_defaults("ndarray_size")
def ndarray_size(data: object, dtype: str = SCHEMA) -> Call:
    """The number of elements of ``data`` as a scalar."""
    return call_op("ndarray_size", [data], dtype=dtype)


@schema_defaults("arange")
def arange(start: object, stop: object = None, step: object = None, dtype: str = SCHEMA) -> Call:
    """``start, start + step, ...`` below ``stop``; one argument is ``stop`` (from 0), as in
    TVM. Bounds are scalars of ``dtype`` (Python numbers are made constants of it)."""
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    bounds = [b if isinstance(b, Expr) else const(b, dtype) for b in (start, stop, step)]
    return call_op("arange", bounds, dtype=dtype)


@schema_defaults("argsort")
def argsort(
    data: object, axis: int = SCHEMA, is_ascend: bool = SCHEMA, dtype: str = SCHEMA
) -> Call:
    """The indices that sort ``data`` along ``axis`` (equal elements keep their order)."""
    return call_op("argsort", [data], axis=axis, is_ascend=bool(is_ascend), dtype=dtype)


@schema_defaults("topk")
def topk(
    data: object, k: int = SCHEMA, axis: int = SCHEMA, ret_type: str = SCHEMA,
    is_ascend: bool = SCHEMA, dtype: str = SCHEMA,
) -> Call:  # fmt: skip
    """The ``k`` largest (or, with ``is_ascend``, smallest) elements along ``axis`` and their
    indices; ``k < 1`` keeps them all. ``ret_type="both"`` gives a tuple (values, indices).
    A ``k`` computed at run time (an integer scalar expression) gives ``dyn.topk``, whose
    kept length is known when it runs, as in TVM."""
    if isinstance(k, Constant):
        k = int(k.data)
    if isinstance(k, Expr):
        return call_op(
            "dyn.topk", [data, k], axis=axis, ret_type=ret_type, is_ascend=bool(is_ascend),
            dtype=dtype,
        )  # fmt: skip
    return call_op(
        "topk", [data], k=k, axis=axis, ret_type=ret_type, is_ascend=bool(is_ascend), dtype=dtype
    )

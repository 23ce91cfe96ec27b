"""Kernel rules for elementwise and broadcasting operators.

Runtime layer, kernel generator (``vm.kernels``); imports numpy (for float16/float32 constant
rounding).

Each rule returns a scalar expression in its dtype's compute type; the code generator
puts a chain of them inside one loop over the output (see :mod:`vm.kernels.codegen`),
brings integer results back to their width and rounds ``float16`` results. Semantics
mirror the compiler's numpy references (``compiler/op/defs_elemwise.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from vm.kernels import dtypes
from vm.kernels import shape_rules as sr
from vm.kernels.rules import (
    Attr,
    OpRule,
    RuleError,
    RuleSet,
    Spec,
    check_float_attr,
    norm_axis,
    require_kind,
    require_rank,
    require_same_dtype,
)
from vm.kernels.source import ExprCtx, ShapeCtx, cast, const

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

# --- shapes ------------------------------------------------------------------------------------


def broadcast_dims(ctx: ShapeCtx, arg_dims: list[list[str]], ndim: int) -> list[str]:
    """numpy broadcasting of the argument shapes (right-aligned) to rank ``ndim``."""
    out: list[str] = []
    for p in range(ndim):
        dim: str | None = None
        for dims in arg_dims:
            offset = ndim - len(dims)
            if p < offset:
                continue
            d = dims[p - offset]
            dim = d if dim is None else ctx.bcast(dim, d)
        out.append(dim if dim is not None else "1")
    return out


def _broadcast_shape(ctx: ShapeCtx) -> list[list[str]]:
    return [broadcast_dims(ctx, ctx.arg_dims, ctx.out_specs[0].ndim)]


def _first_arg_shape(ctx: ShapeCtx) -> list[list[str]]:
    return [list(ctx.arg_dims[0])]


def _attr_shape(ctx: ShapeCtx) -> list[list[str]]:
    return [[str(int(d)) for d in ctx.attrs["shape"]]]


# --- inference helpers -------------------------------------------------------------------------


def _binary_infer(kind: str | None, out_dtype: str | None) -> Callable:
    def infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
        dtype = require_same_dtype(["lhs", "rhs"], args)
        if kind is not None:
            require_kind("lhs", args[0], kind)
        return (Spec(out_dtype or dtype, max(a.ndim for a in args)),)

    return infer


def _unary_infer(kind: str | None) -> Callable:
    def infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
        if kind is not None:
            require_kind("data", args[0], kind)
        return (args[0],)

    return infer


def _check_shape_attr(attrs: dict) -> None:
    shape = attrs["shape"]
    if len(shape) > dtypes.MAX_NDIM:
        raise RuleError(
            f"ndim out of range: attribute shape has {len(shape)} dimensions; "
            f"at most {dtypes.MAX_NDIM} allowed"
        )
    for d in shape:
        if d < 0:
            raise RuleError(f"attribute shape={tuple(shape)} has a negative dimension {d}")


# --- expressions -------------------------------------------------------------------------------


def _by_kind(float_expr: str, signed: str, unsigned: str) -> Callable[[ExprCtx], str]:
    """An expression template chosen by the operand dtype; ``{a}``/``{b}`` are the operands."""

    def expr(ctx: ExprCtx) -> str:
        dtype = ctx.arg_specs[0].dtype
        if dtype in dtypes.FLOATS:
            template = float_expr
        elif dtype in dtypes.UNSIGNED:
            template = unsigned
        else:
            template = signed
        names = dict(zip("abc", ctx.args))
        return template.format(**names, one=const(1, dtype), zero=const(0, dtype))

    return expr


def _same(template: str) -> Callable[[ExprCtx], str]:
    return _by_kind(template, template, template)


def _int_helper(float_expr: str, helper: str) -> Callable[[ExprCtx], str]:
    """Floats use ``float_expr``; integers call ``h.<helper>_s`` or ``h.<helper>_u``."""
    return _by_kind(float_expr, f"h.{helper}_s({{a}}, {{b}})", f"h.{helper}_u({{a}}, {{b}})")


_BINARY: list[tuple[str, Callable[[ExprCtx], str]]] = [
    ("add", _same("({a} + {b})")),
    ("subtract", _same("({a} - {b})")),
    ("multiply", _same("({a} * {b})")),
    ("divide", _int_helper("({a} / {b})", "divide")),
    ("floor_divide", _int_helper("np.floor({a} / {b})", "floor_divide")),
    ("mod", _int_helper("np.fmod({a}, {b})", "mod")),
    ("floor_mod", _int_helper("({a} - np.floor({a} / {b}) * {b})", "floor_mod")),
    ("power", _int_helper("np.power({a}, {b})", "power")),
]


def _maximum(ctx: ExprCtx) -> str:
    a, b = ctx.args
    if ctx.arg_specs[0].dtype in dtypes.FLOATS:
        return f"h.fmax({a}, {b})"
    return f"({a} if {a} >= {b} else {b})"


def _minimum(ctx: ExprCtx) -> str:
    a, b = ctx.args
    if ctx.arg_specs[0].dtype in dtypes.FLOATS:
        return f"h.fmin({a}, {b})"
    return f"({a} if {a} <= {b} else {b})"


def _compare(symbol: str) -> Callable[[ExprCtx], str]:
    def expr(ctx: ExprCtx) -> str:
        a, b = ctx.args
        return f"({a} {symbol} {b})"

    return expr


def _binary(name: str, kind: str | None, out: str | None, expr: Callable, exact: bool) -> None:
    RULES.register(
        OpRule(
            name,
            2,
            (),
            _binary_infer(kind, out),
            _broadcast_shape,
            expr=expr,
            f16_exact=exact,
        )
    )


for _name, _expr in _BINARY:
    _binary(_name, "numeric", None, _expr, False)
_binary("maximum", None, None, _maximum, True)
_binary("minimum", None, None, _minimum, True)
for _name, _symbol in (
    ("equal", "=="),
    ("not_equal", "!="),
    ("less", "<"),
    ("less_equal", "<="),
    ("greater", ">"),
    ("greater_equal", ">="),
):
    _binary(_name, None, "bool", _compare(_symbol), False)
_binary("logical_and", "bool", "bool", _same("({a} and {b})"), False)
_binary("logical_or", "bool", "bool", _same("({a} or {b})"), False)


# --- unary -------------------------------------------------------------------------------------

_SIGMOID = (
    "(({one} / ({one} + np.exp(-{a}))) if {a} >= {zero} else (np.exp({a}) / ({one} + np.exp({a}))))"
)


def _vectorizable(helper: str, template: str) -> Callable[[ExprCtx], str]:
    """float32 calls ``vx.<helper>`` (see :mod:`vm.kernels.runtime.vecmath`); other dtypes use
    ``template``."""
    other = _same(template)

    def expr(ctx: ExprCtx) -> str:
        if ctx.arg_specs[0].dtype == "float32":
            return f"vx.{helper}({ctx.args[0]})"
        return other(ctx)

    return expr


_UNARY: list[tuple[str, str | None, Callable[[ExprCtx], str], bool]] = [
    # name, dtype kind, expression, float16-exact
    ("negative", "numeric", _same("(-{a})"), True),
    ("abs", "numeric", _by_kind("abs({a})", "abs({a})", "{a}"), True),
    ("exp", "float", _vectorizable("exp_f32", "np.exp({a})"), False),
    ("log", "float", _same("np.log({a})"), False),
    ("sqrt", "float", _same("np.sqrt({a})"), False),
    ("rsqrt", "float", _same("({one} / np.sqrt({a}))"), False),
    ("sin", "float", _same("np.sin({a})"), False),
    ("cos", "float", _same("np.cos({a})"), False),
    ("tanh", "float", _vectorizable("tanh_f32", "np.tanh({a})"), False),
    ("sigmoid", "float", _vectorizable("sigmoid_f32", _SIGMOID), False),
    ("erf", "float", _vectorizable("erf_f32", "math.erf(np.float64({a}))"), False),
    ("floor", "numeric", _by_kind("np.floor({a})", "{a}", "{a}"), True),
    ("ceil", "numeric", _by_kind("np.ceil({a})", "{a}", "{a}"), True),
    ("round", "numeric", _by_kind("np.rint({a})", "{a}", "{a}"), True),
    ("sign", "numeric", _by_kind("np.sign({a})", "np.sign({a})", "({a} > {zero})"), True),
    ("logical_not", "bool", _same("(not {a})"), True),
    ("copy", None, _same("{a}"), True),
    ("nn.relu", "numeric", _same("({a} if {a} > {zero} else {zero})"), True),
]

for _name, _kind, _expr, _exact in _UNARY:
    RULES.register(
        OpRule(_name, 1, (), _unary_infer(_kind), _first_arg_shape, expr=_expr, f16_exact=_exact)
    )


def _fill_like(value: int) -> Callable[[ExprCtx], str]:
    def expr(ctx: ExprCtx) -> str:
        return const(value, ctx.out_spec.dtype)

    return expr


for _name, _value in (("zeros_like", 0), ("ones_like", 1)):
    RULES.register(
        OpRule(
            _name,
            1,
            (),
            _unary_infer(None),
            _first_arg_shape,
            expr=_fill_like(_value),
            f16_exact=True,
            shape_only_args=(0,),
        )
    )


# --- clip and cast -----------------------------------------------------------------------------


def _clip_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("data", args[0], "numeric")
    a_min, a_max = attrs["a_min"], attrs["a_max"]
    if args[0].dtype not in dtypes.FLOATS:
        check_float_attr("a_min", a_min, allow_nan=False)
        check_float_attr("a_max", a_max, allow_nan=False)
    if a_min > a_max:
        raise RuleError(f"attribute a_min={a_min} must not exceed a_max={a_max}")
    return (args[0],)


def clip_bounds(dtype: str, a_min: float, a_max: float) -> tuple[Any, Any]:
    """The bounds ``clip`` applies to ``dtype``, as the compiler's reference computes them."""
    if dtype in dtypes.FLOATS:
        np_dtype = np.dtype(dtype)
        return float(np_dtype.type(a_min)), float(np_dtype.type(a_max))
    low, high = dtypes.int_range(dtype)
    lo = low if a_min == -math.inf else max(low, min(high, math.ceil(a_min)))
    hi = high if a_max == math.inf else min(high, max(low, math.floor(a_max)))
    return lo, hi


def _clip(ctx: ExprCtx) -> str:
    (a,) = ctx.args
    dtype = ctx.arg_specs[0].dtype
    lo, hi = clip_bounds(dtype, ctx.attrs["a_min"], ctx.attrs["a_max"])
    lo_c, hi_c = const(lo, dtype), const(hi, dtype)
    if dtype in dtypes.FLOATS:
        return f"h.fmin(h.fmax({a}, {lo_c}), {hi_c})"
    return f"min(max({a}, {lo_c}), {hi_c})"


RULES.register(
    OpRule(
        "clip",
        1,
        (Attr("a_min", "float", required=True), Attr("a_max", "float", required=True)),
        _clip_infer,
        _first_arg_shape,
        expr=_clip,
        f16_exact=True,
    )
)


def _cast_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    return (Spec(attrs["dtype"], args[0].ndim),)


def _cast(ctx: ExprCtx) -> str:
    return cast(ctx.args[0], ctx.arg_specs[0].dtype, ctx.out_spec.dtype)


RULES.register(
    OpRule(
        "cast",
        1,
        (Attr("dtype", "dtype", required=True),),
        _cast_infer,
        _first_arg_shape,
        expr=_cast,
        f16_exact=True,
    )
)


# --- fills -------------------------------------------------------------------------------------


def _init_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    _check_shape_attr(attrs)
    return (Spec(attrs["dtype"], len(attrs["shape"])),)


for _name, _value in (("zeros", 0), ("ones", 1)):
    RULES.register(
        OpRule(
            _name,
            0,
            (Attr("shape", "ints", required=True), Attr("dtype", "dtype", "float32")),
            _init_infer,
            _attr_shape,
            expr=_fill_like(_value),
            f16_exact=True,
        )
    )


def _full_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_rank("fill_value", args[0], 0, 0)
    _check_shape_attr(attrs)
    return (Spec(attrs["dtype"] or args[0].dtype, len(attrs["shape"])),)


def _full(ctx: ExprCtx) -> str:
    return cast(ctx.args[0], ctx.arg_specs[0].dtype, ctx.out_spec.dtype)


RULES.register(
    OpRule(
        "full",
        1,
        (Attr("shape", "ints", required=True), Attr("dtype", "dtype_or_empty", "")),
        _full_infer,
        _attr_shape,
        expr=_full,
        f16_exact=True,
    )
)


def _full_like_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_rank("fill_value", args[1], 0, 0)
    return (args[0],)


def _full_like(ctx: ExprCtx) -> str:
    return cast(ctx.args[1], ctx.arg_specs[1].dtype, ctx.out_spec.dtype)


RULES.register(
    OpRule(
        "full_like",
        2,
        (),
        _full_like_infer,
        _first_arg_shape,
        expr=_full_like,
        f16_exact=True,
        shape_only_args=(0,),
    )
)


# --- where, broadcast_to, bias_add -------------------------------------------------------------


def _where_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("condition", args[0], "bool")
    dtype = require_same_dtype(["x", "y"], args[1:])
    return (Spec(dtype, max(a.ndim for a in args)),)


def _where(ctx: ExprCtx) -> str:
    c, x, y = ctx.args
    return f"({x} if {c} else {y})"


RULES.register(OpRule("where", 3, (), _where_infer, _broadcast_shape, expr=_where, f16_exact=True))


def _broadcast_to_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    _check_shape_attr(attrs)
    if args[0].ndim > len(attrs["shape"]):
        raise RuleError(
            f"ndim out of range: cannot broadcast a rank-{args[0].ndim} tensor to "
            f"shape {tuple(attrs['shape'])}"
        )
    return (Spec(args[0].dtype, len(attrs["shape"])),)


def _broadcast_to_shape(ctx: ShapeCtx) -> list[list[str]]:
    target = [str(int(d)) for d in ctx.attrs["shape"]]
    dims = ctx.arg_dims[0]
    offset = len(target) - len(dims)
    for k, d in enumerate(dims):
        want = target[offset + k]
        ctx.fail_if(
            f"{d} != 1 and {d} != {want}",
            f"cannot broadcast the input to shape {tuple(ctx.attrs['shape'])}",
        )
    return [target]


RULES.register(
    OpRule(
        "broadcast_to",
        1,
        (Attr("shape", "ints", required=True),),
        _broadcast_to_infer,
        _broadcast_to_shape,
        expr=_same("{a}"),
        f16_exact=True,
    )
)


def _bias_add_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_same_dtype(["data", "bias"], args)
    require_kind("data", args[0], "numeric")
    require_rank("data", args[0], 1)
    require_rank("bias", args[1], 1, 1)
    norm_axis("axis", attrs["axis"], args[0].ndim)
    return (args[0],)


def _bias_axis(attrs: dict, ndim: int) -> int:
    axis = attrs["axis"]
    return axis + ndim if axis < 0 else axis


def _bias_add_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = list(ctx.arg_dims[0])
    axis = _bias_axis(ctx.attrs, len(dims))
    dims[axis] = ctx.bcast(dims[axis], ctx.arg_dims[1][0])
    return [dims]


def _bias_add_map(ctx: Any, i: int, positions: tuple[int, ...]) -> tuple[int, ...]:
    if i == 0:
        return positions
    return (positions[_bias_axis(ctx.attrs, len(positions))],)


RULES.register(
    OpRule(
        "nn.bias_add",
        2,
        (Attr("axis", "int", 1),),
        _bias_add_infer,
        _bias_add_shape,
        expr=_same("({a} + {b})"),
        arg_map=_bias_add_map,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------

RULES.shape(
    "abs", "ceil", "copy", "cos", "erf", "exp", "floor", "log", "logical_not", "negative",
    "nn.relu", "round", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "tanh", "zeros_like",
    "ones_like", "cast", "clip", "full_like",
)(sr.same_as_first)  # fmt: skip


@RULES.shape(
    "add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power",
    "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "where",
)  # fmt: skip
def _run_broadcast(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    return [sr.broadcast_shapes(shapes)]


@RULES.shape("nn.bias_add")
def _run_bias_add(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data, bias = shapes
    sr.rank(data, 1, None, "data")
    sr.rank(bias, 1, 1, "bias")
    axis = sr.axis_of(attrs["axis"], len(data))
    out = list(data)
    out[axis] = sr.broadcast_shapes([(data[axis],), bias])[0]
    return [tuple(out)]


@RULES.shape("broadcast_to")
def _run_broadcast_to(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    return [sr.broadcast_to_shape(shapes[0], sr.ints(attrs["shape"]))]


@RULES.shape("zeros", "ones", "full")
def _run_fill(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    return [sr.ints(attrs["shape"])]

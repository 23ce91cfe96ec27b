"""Binding named function parameters to constants (``relay.bind_params_by_name``), and
variables to expressions (``relay.bind``).

Compiler layer (``compiler.ir``). Used by ``relay.vm.compile(..., params=...)`` and
``relay.build`` to turn weights into constants before optimizing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any as AnyT

import numpy as np

from compiler.ir.expr import Constant, Expr, Function, Var, const
from compiler.ir.types import Any, TensorType
from compiler.ir.visitor import substitute


def bind_params_by_name(func: Function, params: Mapping[str, object]) -> Function:
    """Replace the parameters named in ``params`` by constants and drop them from ``func``.

    Parameters
    ----------
    func : Function
        The function whose parameters to bind; it is not modified.
    params : mapping of str to array-like
        Values by parameter name: numpy arrays, numpy or Python scalars, or
        ``relay.Constant``. A Python scalar takes the dtype of the parameter's tensor
        annotation when it has one (else ``relay.const``'s rule). Names that match no
        parameter are ignored.

    Returns
    -------
    Function
        A new function without the bound parameters, whose body uses the constants.

    Raises
    ------
    ValueError
        If two parameters share a name that ``params`` binds (the binding would be
        ambiguous), or a value's dtype or shape contradicts the parameter's annotation.
    """
    if not isinstance(func, Function):
        raise TypeError(f"bind_params_by_name expects a relay.Function, got {type(func).__name__}")
    counts: dict[str, int] = {}
    for p in func.params:
        counts[p.name_hint] = counts.get(p.name_hint, 0) + 1
    mapping: dict[Var, Expr] = {}
    for p in func.params:
        if p.name_hint not in params:
            continue
        if counts[p.name_hint] > 1:
            raise ValueError(
                f"cannot bind parameter {p.name_hint!r}: the function has "
                f"{counts[p.name_hint]} parameters with that name"
            )
        mapping[p] = _constant_for(p, params[p.name_hint])
    if not mapping:
        return func
    body = substitute(func.body, mapping)
    kept = [p for p in func.params if p not in mapping]
    out = Function(kept, body, func.ret_type, func.type_params, func.attrs)
    out.span = func.span
    return out


def _constant_for(param: Var, value: object) -> Constant:
    ann = param.type_annotation
    if isinstance(value, Constant):
        c = value
    elif isinstance(ann, TensorType) and isinstance(value, (bool, int, float)):
        c = const(value, ann.dtype)
    else:
        c = const(value)
    if isinstance(ann, TensorType):
        data = c.data
        if data.dtype.name != ann.dtype:
            raise ValueError(
                f"cannot bind parameter {param.name_hint!r}: it is annotated {_text(ann)}, "
                f"but the value has dtype {data.dtype.name}"
            )
        compatible = len(ann.shape) == data.ndim and all(
            isinstance(d, Any) or d == n for d, n in zip(ann.shape, data.shape)
        )
        if not compatible:
            raise ValueError(
                f"cannot bind parameter {param.name_hint!r}: it is annotated {_text(ann)}, "
                f"but the value has shape {tuple(np.shape(data))}"
            )
    return c


def _text(t: TensorType) -> str:
    dims = ["?" if isinstance(d, Any) else str(d) for d in t.shape]
    shape = f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"
    return f"Tensor[{shape}, {t.dtype}]"


def bind(expr: Expr, binds: Mapping[Var, Expr]) -> AnyT:
    """TVM's ``relay.bind``: ``expr`` with the variables ``binds`` names replaced by their
    expressions; a function also loses the parameters bound.

    Parameters
    ----------
    expr : Expr
        The expression or function; it is not modified.
    binds : mapping of Var to Expr
        What each variable becomes.

    Returns
    -------
    Expr
        A new expression (``expr`` itself when nothing is bound).

    Raises
    ------
    TypeError
        If a key is not a ``relay.Var`` or a value not a relay expression (named).
    """
    if not isinstance(binds, Mapping):
        raise TypeError(f"relay.bind: binds must map relay.Var to expressions, got {binds!r}")
    for bound, value in binds.items():
        if not isinstance(bound, Var):
            raise TypeError(f"relay.bind: the key {bound!r} is not a relay.Var")
        if not isinstance(value, Expr):
            raise TypeError(
                f"relay.bind: the value for %{bound.name_hint} must be a relay expression, "
                f"got {type(value).__name__} (wrap arrays in relay.const)"
            )
    if not binds:
        return expr
    mapping = dict(binds)
    if isinstance(expr, Function):
        body = substitute(expr.body, mapping)
        params = [p for p in expr.params if p not in mapping]
        return Function(params, body, expr.ret_type, expr.type_params, expr.attrs)
    return substitute(expr, mapping)

"""``SimplifyInference``: rewrite inference-time normalization and dropout into arithmetic.

Compiler layer (``compiler.transform``).

Rewrites (``x`` is the data, ``C`` the normalized axis, vectors broadcast along it):

- ``nn.batch_norm(x, gamma, beta, mean, var)``, field 0: ``x * scale + shift`` with
  ``scale = 1 / sqrt(var + eps) * gamma`` and ``shift = -mean * scale + beta``, which is
  ``(x - mean) / sqrt(var + eps) * gamma + beta`` arranged (as TVM does) so that the parts
  depending only on the parameters fold to two vectors when they are constants. Without
  ``scale`` the ``* gamma`` is left out, without ``center`` the ``+ beta``. Fields 1 and 2
  (the moving statistics, returned unchanged at inference) become ``mean`` and ``var``.
- ``nn.dropout(x)``: field 0 becomes ``x``, field 1 (the mask) ``ones_like(x)``.
- ``nn.layer_norm(x, gamma, beta)``: ``(x - m) / sqrt(v + eps) * gamma + beta`` with ``m``
  and ``v`` the mean and (biased) variance over the axis, kept as size-1 dimensions.
- ``nn.group_norm(x, gamma, beta)``: ``x`` is reshaped so the channel axis splits into
  ``(num_groups, C / num_groups)``, standardized over the channels of each group and every
  later axis, reshaped back, then scaled and shifted like ``layer_norm``.

A 1-D vector is lined up with axis ``a`` of an ``n``-D tensor by ``expand_dims(v, axis=1,
num_newaxis=n - 1 - a)``; broadcasting supplies the leading axes. Projections are found
both in dataflow form (``%bn.0`` of the call itself) and after ``let`` binding (``let %t =
nn.batch_norm(...); %t.0``); the call is left for dead-code elimination to remove.

The operators are recognised by name when met, so this pass works whatever subset of them
the registry defines. It type-checks the module first (data ranks and dtypes decide the
rewrite) when, and only when, one of them occurs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.expr import Call, Constant, Expr, Let, Node, Op, TupleGetItem, Var
from compiler.ir.module import IRModule
from compiler.ir.types import Any, TensorType, Type
from compiler.op import api
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_primitive, rewrite_module

__all__ = ["SimplifyInference", "simplify_inference"]

_PROJECTED = ("nn.batch_norm", "nn.dropout")
_CALLS = ("nn.layer_norm", "nn.group_norm")


def _op_name(expr: object) -> str | None:
    if isinstance(expr, Call) and isinstance(expr.op, Op):
        return expr.op.name
    return None


def _attrs(call: Call) -> Attrs:
    """The call's attributes with defaults filled (hand-built calls may omit some)."""
    return get_def(call.op.name).normalize_attrs(call.attrs)  # type: ignore[attr-defined]


def _tensor_type(ty: Type, what: str) -> TensorType:
    if not isinstance(ty, TensorType):
        raise TypeError(f"SimplifyInference: {what} should be a tensor, found {ty}")
    return ty


def _axis(axis: object, ndim: int) -> int:
    a = int(axis)  # type: ignore[call-overload]
    return a + ndim if a < 0 else a


def _scalar(value: float, dtype: str) -> Constant:
    return Constant(np.asarray(value, dtype=dtype))


def _along(vector: Expr, ndim: int, axis: int) -> Expr:
    """A 1-D ``vector`` shaped to broadcast along ``axis`` of an ``ndim``-D tensor."""
    trailing = ndim - 1 - axis
    return api.expand_dims(vector, axis=1, num_newaxis=trailing) if trailing > 0 else vector


def _affine(out: Expr, gamma: Expr, beta: Expr, attrs: Attrs, ndim: int, axis: int) -> Expr:
    if attrs["scale"]:
        out = api.multiply(out, _along(gamma, ndim, axis))
    if attrs["center"]:
        out = api.add(out, _along(beta, ndim, axis))
    return out


def _standardize(x: Expr, axes: tuple[int, ...], eps: Constant) -> Expr:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` (biased variance, kept dimensions)."""
    mean = api.mean(x, axis=axes, keepdims=True)
    centered = api.subtract(x, mean)
    var = api.mean(api.multiply(centered, centered), axis=axes, keepdims=True)
    return api.divide(centered, api.sqrt(api.add(var, eps)))


def batch_norm_output(call: Call, data_type: TensorType) -> Expr:
    """Field 0 of ``nn.batch_norm`` as arithmetic (see the module docstring)."""
    data, gamma, beta, mean, var = call.args
    attrs = _attrs(call)
    ndim, dtype = len(data_type.shape), data_type.dtype
    axis = _axis(attrs["axis"], ndim)
    eps = _scalar(attrs["epsilon"], dtype)  # type: ignore[arg-type]
    scale: Expr = api.divide(_scalar(1.0, dtype), api.sqrt(api.add(var, eps)))
    if attrs["scale"]:
        scale = api.multiply(scale, gamma)
    shift: Expr = api.multiply(api.negative(mean), scale)
    if attrs["center"]:
        shift = api.add(shift, beta)
    return api.add(api.multiply(data, _along(scale, ndim, axis)), _along(shift, ndim, axis))


def layer_norm(call: Call, data_type: TensorType) -> Expr:
    """``nn.layer_norm`` as arithmetic."""
    data, gamma, beta = call.args
    attrs = _attrs(call)
    ndim, dtype = len(data_type.shape), data_type.dtype
    axis = _axis(attrs["axis"], ndim)
    out = _standardize(data, (axis,), _scalar(attrs["epsilon"], dtype))  # type: ignore[arg-type]
    return _affine(out, gamma, beta, attrs, ndim, axis)


def group_norm(call: Call, data_type: TensorType) -> Expr:
    """``nn.group_norm`` as arithmetic."""
    data, gamma, beta = call.args
    attrs = _attrs(call)
    shape = data_type.shape
    ndim, dtype = len(shape), data_type.dtype
    axis = _axis(attrs["axis"], ndim)
    groups = int(attrs["num_groups"])  # type: ignore[call-overload]
    if any(isinstance(d, Any) for d in shape):
        # Shapes known only at run time: reshape's special values (0 copies a dimension,
        # -4 splits one, -3 merges two, -2 copies the rest) say the same thing.
        split: tuple[int, ...] = (0,) * axis + (-4, groups, -1, -2)
        merged: tuple[int, ...] = (0,) * axis + (-3, -2)
    else:
        dims = tuple(int(d) for d in shape)  # type: ignore[call-overload]
        split = dims[:axis] + (groups, dims[axis] // groups) + dims[axis + 1 :]
        merged = dims
    grouped = api.reshape(data, split)
    reduce_axes = tuple(range(axis + 1, ndim + 1))
    out = _standardize(grouped, reduce_axes, _scalar(attrs["epsilon"], dtype))  # type: ignore[arg-type]
    return _affine(api.reshape(out, merged), gamma, beta, attrs, ndim, axis)


_CALL_REWRITES: dict[str, Callable[[Call, TensorType], Expr]] = {
    "nn.layer_norm": layer_norm,
    "nn.group_norm": group_norm,
}


class _Simplifier(BindingMutator):
    def __init__(self, keep: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.bound: dict[Var, Call] = {}  # let variables bound to batch_norm / dropout calls
        self.keep = keep

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def enter_let(self, let: Let, value: Expr) -> None:
        if _op_name(value) in _PROJECTED:
            self.bound[let.var] = value  # type: ignore[assignment]

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, TupleGetItem):
            tup = new.tuple_value
            call = self.bound.get(tup) if isinstance(tup, Var) else tup
            name = _op_name(call)
            if name in _PROJECTED:
                return self._project(old, new, call, name)  # type: ignore[arg-type]
            return new
        name = _op_name(new)
        if name in _CALL_REWRITES and name not in self.keep:
            ty = _tensor_type(old.checked_type, f"the result of {name}")  # type: ignore[attr-defined]
            return _CALL_REWRITES[name](new, ty)  # type: ignore[arg-type]
        return new

    @staticmethod
    def _project(old: Node, new: TupleGetItem, call: Call, name: str) -> Expr:
        index = new.index
        if name == "nn.dropout":
            data = call.args[0]
            if index == 0:
                return data
            return api.ones_like(data) if index == 1 else new
        if index == 0:
            ty = _tensor_type(old.checked_type, "field 0 of nn.batch_norm")  # type: ignore[attr-defined]
            return batch_norm_output(call, ty)
        # Fields 1 and 2 are the moving statistics, returned unchanged at inference.
        return call.args[index + 2] if index in (1, 2) else new


_TARGETS = frozenset(_PROJECTED) | frozenset(_CALLS)


def simplify_inference(mod: IRModule, keep: Iterable[str] = ()) -> IRModule:
    """Rewrite batch norm, dropout, layer norm and group norm into arithmetic.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it uses those operators.
    keep : iterable of str
        Of ``"nn.layer_norm"`` and ``"nn.group_norm"``, the operators to leave as they are.

    Returns
    -------
    IRModule
        A new module (type-checked first if anything was rewritten).
    """
    kept = frozenset(keep)
    unknown = kept - frozenset(_CALLS)
    if unknown:
        raise ValueError(
            f"SimplifyInference can keep only {', '.join(_CALLS)}, not {', '.join(sorted(unknown))}"
        )
    targets = _TARGETS - kept
    return rewrite_module(mod, lambda node: _op_name(node) in targets, lambda: _Simplifier(kept))


class SimplifyInference(Pass):
    """Rewrite inference-time ``nn.batch_norm``, ``nn.dropout``, ``nn.layer_norm`` and
    ``nn.group_norm`` into element-wise arithmetic (TVM's ``SimplifyInference``,
    ``opt_level=0``). See :mod:`compiler.transform.simplify_inference`.

    Parameters
    ----------
    keep : iterable of str
        Norms to leave as operators (relayvm's extension; TVM rewrites all four). The VM's
        own pipeline keeps ``nn.layer_norm``, whose kernel is one pass over each row.
    """

    def __init__(self, keep: Iterable[str] = ()) -> None:
        super().__init__("SimplifyInference", opt_level=0)
        self.keep = tuple(keep)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return simplify_inference(mod, self.keep)

    def __repr__(self) -> str:
        return f"SimplifyInference(keep={self.keep})" if self.keep else "SimplifyInference()"

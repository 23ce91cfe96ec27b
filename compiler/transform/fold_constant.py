"""``FoldConstant``: evaluate at compile time what depends only on constants.

Compiler layer (``compiler.transform``).

What folds:

- a call of a registered operator whose arguments are all constants (or tuples of
  constants) is evaluated with the operator's numpy reference and replaced by a constant
  (a tuple result by a tuple of constants). The result has exactly the dtype and shape
  the operator's type relation gives for those arguments;
- a tuple projection of a tuple of constants becomes the field;
- ``let %v = <constant>; body`` becomes ``body`` with the constant in place of ``%v``
  (also inside local functions that capture ``%v``: a constant means the same everywhere);
- ``if`` on a constant condition becomes the branch taken.

What does not: calls of functions, closures, global functions and constructors (only
operator calls are evaluated, so folding never crosses a function boundary), operators
the registry does not know (their effects are unknown), calls whose evaluation fails or
is ill-typed (the error is left for type checking or run time to report), the creation
operators ``zeros``, ``ones`` and ``full`` (storing their output would only make the
executable bigger; TVM leaves ``full`` alone too), and anything inside a primitive
function (``Primitive=1``, a kernel body). Function parameters are never constants.

No type inference is needed: the types of constant arguments are known from their data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.expr import Call, Constant, Expr, If, Let, Node, Op, Tuple, TupleGetItem, Var
from compiler.ir.module import IRModule
from compiler.ir.types import Any, TensorType, TupleType, Type
from compiler.op.registry import OpDef, get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_primitive

__all__ = ["FoldConstant", "fold_constant"]

#: Operators that create a tensor from attributes alone; folding them only grows constants.
_NOT_FOLDED = frozenset({"zeros", "ones", "full"})

#: A folded value: an array, or a tuple of values.
Value = object


def _value_type(value: Value) -> Type:
    if isinstance(value, tuple):
        return TupleType([_value_type(v) for v in value])
    assert isinstance(value, np.ndarray)
    return TensorType(value.shape, value.dtype.name)


def _as_expr(result: object, ty: Type, span: object) -> tuple[Expr, Value] | None:
    """The constant expression for ``result`` of type ``ty``, or None if they disagree."""
    if isinstance(ty, TensorType):
        if isinstance(result, (tuple, list)):
            return None
        array = np.asarray(result)
        if array.ndim != len(ty.shape):
            return None
        for dim, size in zip(ty.shape, array.shape):
            if not isinstance(dim, Any) and dim != size:
                return None
        if array.dtype != np.dtype(ty.dtype):
            array = array.astype(ty.dtype)
        if array.flags.writeable and array.base is None:
            # References return fresh arrays, never views of their inputs: frozen in
            # place, the result becomes the constant's data without a copy.
            array.flags.writeable = False
        const = Constant(array)
        const.span = span  # type: ignore[assignment]
        return const, const.data
    if isinstance(ty, TupleType):
        if not isinstance(result, (tuple, list)) or len(result) != len(ty.fields):
            return None
        fields: list[Expr] = []
        values: list[Value] = []
        for item, field_ty in zip(result, ty.fields):
            made = _as_expr(item, field_ty, span)
            if made is None:
                return None
            fields.append(made[0])
            values.append(made[1])
        tup = Tuple(fields)
        tup.span = span  # type: ignore[assignment]
        return tup, tuple(values)
    # Functions, ADTs and type variables are not values an operator folds to.
    return None


class _Folder(BindingMutator):
    def __init__(self) -> None:
        super().__init__()
        # id(expr) -> its value, for constants and tuples of constants in the output.
        self.values: dict[int, Value] = {}
        self.bound: dict[Var, Expr] = {}

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def enter_let(self, let: Let, value: Expr) -> None:
        if id(value) in self.values:
            self.bound[let.var] = value

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, Constant):
            self.values[id(new)] = new.data
            return new
        if isinstance(new, Var):
            return self.bound.get(new, new)
        if isinstance(new, Let):
            return new.body if old.var in self.bound else new  # type: ignore[attr-defined]
        if isinstance(new, Tuple):
            if all(id(f) in self.values for f in new.fields):
                self.values[id(new)] = tuple(self.values[id(f)] for f in new.fields)
            return new
        if isinstance(new, TupleGetItem):
            tup = new.tuple_value
            if isinstance(tup, Tuple) and id(tup) in self.values and new.index < len(tup.fields):
                return tup.fields[new.index]
            return new
        if isinstance(new, If):
            cond = new.cond
            if isinstance(cond, Constant) and cond.data.dtype == np.bool_ and cond.data.ndim == 0:
                return new.true_branch if bool(cond.data) else new.false_branch
            return new
        if isinstance(new, Call) and isinstance(new.op, Op):
            return self._fold_call(new)
        return new

    def _fold_call(self, call: Call) -> Node:
        name = call.op.name  # type: ignore[attr-defined]
        if name in _NOT_FOLDED or not all(id(a) in self.values for a in call.args):
            return call
        try:
            opdef = get_def(name)
        except ValueError:
            return call  # an operator outside the registry: unknown semantics and effects
        args = [self.values[id(a)] for a in call.args]
        made = _evaluate(opdef, call, args)
        if made is None:
            return call
        expr, value = made
        self.values[id(expr)] = value
        return expr


def _evaluate(opdef: OpDef, call: Call, args: Sequence[Value]) -> tuple[Expr, Value] | None:
    """Run ``opdef``'s reference on ``args``; None when the call is ill-typed or fails."""
    try:
        ty = opdef.type_rel([_value_type(a) for a in args], call.attrs)
        with np.errstate(all="ignore"):
            result = opdef.reference(list(args), call.attrs)
    except Exception:
        # An ill-typed or failing call is not folded: type checking or the program's own
        # run reports it, with the position and the values involved.
        return None
    return _as_expr(result, ty, call.span)


def fold_constant(mod: IRModule) -> IRModule:
    """Fold the constant parts of every function of ``mod`` (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module with the same globals and type definitions.
    """
    out = mod.copy()
    for gvar, func in mod.functions.items():
        out[gvar] = _Folder().visit(func)
    return out


class FoldConstant(Pass):
    """Evaluate operator calls on constants at compile time (TVM's ``FoldConstant``,
    ``opt_level=2``). See :mod:`compiler.transform.fold_constant` for what folds."""

    def __init__(self) -> None:
        super().__init__("FoldConstant", opt_level=2)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return fold_constant(mod)

    def __repr__(self) -> str:
        return "FoldConstant()"

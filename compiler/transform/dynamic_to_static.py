"""``DynamicToStatic``: shapes the types already know become constants, and ``dyn.*``
operators whose shape arguments are then constant become their static forms.

Compiler layer (``compiler.transform``).

A model imported from a framework computes shapes at run time (``shape_of``, slices and
concatenations of it, ``dyn.reshape`` of the result) even where every input has a static
shape. TVM scripts call ``relay.transform.DynamicToStatic()`` after importing, and so can
ours: each round infers types, replaces ``shape_of`` and ``ndarray_size`` of a tensor whose
type is static by the constant it computes, folds constants (:mod:`fold_constant`), and
rebuilds ``dyn.reshape``, ``dyn.broadcast_to``, ``dyn.zeros``, ``dyn.ones``, ``dyn.full``
and ``dyn.strided_slice`` calls whose shape arguments are constants with the builders of
:mod:`compiler.op.api`, which pick the static operator. A static result may make further
shapes static, so rounds repeat until one changes nothing. The result is type-checked;
types once ``?`` are then exact, which the static kernels, memory planning and the AOT
executor need.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.ir.expr import Call, Constant, Expr, Function, Node, Op
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.ir.visitor import ExprMutator
from compiler.op import api
from compiler.transform.fold_constant import fold_constant
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.typed_rewrite import is_primitive, known_type
from compiler.typing import infer_types

__all__ = ["DynamicToStatic", "dynamic_to_static"]


def _static(call: Call, *positions: int) -> bool:
    return all(isinstance(call.args[i], Constant) for i in positions)


def _strided_slice(call: Call) -> Expr | None:
    if not _static(call, 1, 2, 3):
        return None
    data, begin, end, strides = call.args
    return api.strided_slice(data, begin, end, strides, slice_mode=call.attrs["slice_mode"])


#: For each dynamic operator: the static call when its shape arguments are constants.
_STATIC_FORMS: dict[str, Callable[[Call], Expr | None]] = {
    "dyn.reshape": lambda c: api.reshape(c.args[0], c.args[1]) if _static(c, 1) else None,
    "dyn.broadcast_to": lambda c: api.broadcast_to(c.args[0], c.args[1]) if _static(c, 1) else None,
    "dyn.zeros": lambda c: api.zeros(c.args[0], c.attrs["dtype"]) if _static(c, 0) else None,
    "dyn.ones": lambda c: api.ones(c.args[0], c.attrs["dtype"]) if _static(c, 0) else None,
    "dyn.full": lambda c: (
        api.full(c.args[0], c.args[1], c.attrs["dtype"]) if _static(c, 1) else None
    ),
    "dyn.strided_slice": _strided_slice,
}


def _static_shape(expr: Expr) -> tuple[int, ...] | None:
    ty = known_type(expr)
    return ty.concrete_shape if isinstance(ty, TensorType) and ty.is_static else None


class _Staticizer(ExprMutator):
    def __init__(self) -> None:
        super().__init__()
        self.changed = False

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if not isinstance(new, Call) or not isinstance(new.op, Op):
            return new
        name = new.op.name
        replacement: Expr | None = None
        if name in ("shape_of", "ndarray_size"):
            # The argument's type comes from the original node, which inference typed.
            shape = _static_shape(old.args[0])  # type: ignore[attr-defined]
            if shape is not None:
                dtype = new.attrs["dtype"]
                value = shape if name == "shape_of" else int(np.prod(shape, dtype=np.int64))
                replacement = Constant(np.array(value, dtype=dtype))
        elif name in _STATIC_FORMS:
            replacement = _STATIC_FORMS[name](new)
        if replacement is None:
            return new
        replacement.span = new.span
        self.changed = True
        return replacement


def dynamic_to_static(mod: IRModule) -> IRModule:
    """Make the shapes of ``mod`` static where its types allow (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check.

    Returns
    -------
    IRModule
        A new, type-checked module with the same globals and type definitions.
    """
    out = infer_types(mod)
    # Each round that changes something removes at least one dynamic call, so the number
    # of rounds is bounded by the program's size; in practice two or three.
    while True:
        staticized = out.copy()
        changed = False
        for gvar, func in out.functions.items():
            mutator = _Staticizer()
            new = mutator.visit(func)
            if mutator.changed:
                # The return type inferred before (or annotated) may have ? dimensions
                # the body no longer has: let inference find it again.
                new = Function(new.params, new.body, None, new.type_params, new.attrs)
                new.span = func.span
                changed = True
            staticized[gvar] = new
        if not changed:
            return out
        out = infer_types(fold_constant(staticized))


class DynamicToStatic(Pass):
    """Turn shapes known from the types into constants and ``dyn.*`` operators with
    constant shapes into static ones (TVM's ``DynamicToStatic``, ``opt_level=3``). See
    :mod:`compiler.transform.dynamic_to_static`."""

    def __init__(self) -> None:
        super().__init__("DynamicToStatic", opt_level=3)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return dynamic_to_static(mod)

    def __repr__(self) -> str:
        return "DynamicToStatic()"

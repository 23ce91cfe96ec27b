"""Explicit squeeze axes: ``squeeze(%x)`` without ``axis`` names the axes its type removes.

Compiler layer (``compiler.transform``); runs on a type-checked module, before fusion.

The type relation removes only dimensions known to be 1 (as TVM's does): ``squeeze`` of a
``Tensor[(?, 1, 3)]`` is a ``Tensor[(?, 3)]``, even when the ``?`` is 1 at run time. A
kernel or shape function sees only run-time shapes and could not tell which 1s to keep,
so the lowering writes the axes down while the types are at hand. The reference
interpreter makes the same choice from the same types, so both agree.
"""

from __future__ import annotations

from compiler.ir.attrs import Attrs
from compiler.ir.expr import Call, Node, Op
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType, Type
from compiler.ir.visitor import ExprMutator
from compiler.transform.typed_rewrite import carry_type, known_type

__all__ = ["explicit_squeeze_axes", "static_unit_axes"]


def static_unit_axes(ty: Type) -> list[int] | None:
    """The axes of tensor type ``ty`` known to have size 1 (None if ``ty`` is no tensor)."""
    if not isinstance(ty, TensorType):
        return None
    return [i for i, d in enumerate(ty.shape) if isinstance(d, int) and d == 1]


def explicit_squeeze_axes(mod: IRModule) -> IRModule:
    """Give every ``squeeze`` call without ``axis`` the axes its argument's type removes.

    Parameters
    ----------
    mod : IRModule
        A type-checked module; it is not modified.

    Returns
    -------
    IRModule
        A copy with those calls rewritten; types are kept, so no new inference is needed.
    """
    out = mod.copy()
    for gvar, func in mod.functions.items():
        out[gvar] = _Rewriter().visit(func)
    return out


class _Rewriter(ExprMutator):
    def rewrite(self, old: Node, new: Node) -> Node:
        if (
            isinstance(new, Call)
            and isinstance(new.op, Op)
            and new.op.name == "squeeze"
            and new.attrs.get("axis") is None
        ):
            axes = static_unit_axes(known_type(old.args[0]))  # type: ignore[attr-defined]
            if axes is not None:
                attrs = Attrs({**dict(new.attrs), "axis": axes})
                new = Call(new.op, new.args, attrs, new.type_args)
        return carry_type(old, new)

"""The ``InferType`` pass: a typed copy of a module.

Compiler layer (``compiler.transform``); a thin pass object over
:func:`compiler.typing.infer_types`, and TVM's ``InferTypeLocal`` over
:func:`compiler.typing.infer_expr`.
"""

from __future__ import annotations

from compiler.ir.expr import Expr
from compiler.ir.module import IRModule
from compiler.ir.types import Type
from compiler.transform.pass_manager import Pass, PassContext
from compiler.typing import infer_expr, infer_types


class InferType(Pass):
    """Type-check every function of a module (TVM's ``relay.transform.InferType()``,
    ``opt_level=0``).

    Calling the pass on an IRModule returns a new IRModule whose expression nodes carry
    ``checked_type``; the input module is left unchanged. Raises
    :class:`compiler.typing.RelayTypeError` for an ill-typed program.
    """

    def __init__(self) -> None:
        super().__init__("InferType", opt_level=0)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return infer_types(mod)

    def __repr__(self) -> str:
        return "InferType()"


def InferTypeLocal(expr: Expr) -> Type:
    """The type of one expression, inferred without a module (TVM's ``InferTypeLocal``).

    Parameters
    ----------
    expr : Expr
        The expression; its free variables may be annotated or typed by their uses. Its
        nodes get ``checked_type`` set, as TVM's does.

    Returns
    -------
    Type
        The expression's type.

    Raises
    ------
    compiler.typing.RelayTypeError
        If the expression is ill-typed.
    """
    return infer_expr(expr)

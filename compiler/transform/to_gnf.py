"""``ToGraphNormalForm``: ``let`` bindings become shared sub-expressions.

Compiler layer (``compiler.transform``).

The inverse of A-normal form (:mod:`compiler.transform.to_anf`): each use of a
let-bound variable is replaced by the bound expression itself, one node shared by all of
its uses, and the ``let`` is dropped, as TVM's ``ToGraphNormalForm`` does. A binding
nothing uses disappears with its value (Relay's operators are pure). A local function
that calls itself through its own variable keeps its ``let``: the variable is how it
refers to itself. Primitive functions are left as they are.
"""

from __future__ import annotations

from compiler.ir.expr import Expr, Function, Let, Node, Var
from compiler.ir.module import IRModule
from compiler.ir.visitor import free_vars
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, map_functions
from compiler.transform.typed_rewrite import is_primitive

__all__ = ["ToGraphNormalForm", "to_gnf"]


class _Inliner(BindingMutator):
    def __init__(self) -> None:
        super().__init__()
        self.inline: dict[Var, Expr] = {}

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def enter_let(self, let: Let, value: Expr) -> None:
        if not (isinstance(value, Function) and let.var in free_vars(value)):
            self.inline[let.var] = value

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, Var):
            return self.inline.get(new, new)
        if isinstance(old, Let) and old.var in self.inline:
            return new.body  # type: ignore[attr-defined]
        return new


def to_gnf(mod: IRModule) -> IRModule:
    """Replace the ``let`` bindings of every function of ``mod`` by shared expressions.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module with the same globals and type definitions.
    """
    return map_functions(mod, lambda func: _Inliner().visit(func))


class ToGraphNormalForm(Pass):
    """Turn ``let`` bindings into shared sub-expressions (TVM's ``ToGraphNormalForm``,
    ``opt_level=1``). See :mod:`compiler.transform.to_gnf`."""

    def __init__(self) -> None:
        super().__init__("ToGraphNormalForm", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return to_gnf(mod)

    def __repr__(self) -> str:
        return "ToGraphNormalForm()"

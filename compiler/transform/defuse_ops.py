"""``DefuseOps``: the inverse of ``FuseOps``, each call of a primitive function replaced by
the function's body.

Compiler layer (``compiler.transform``). A fused program calls ``fn (%p0, ...) { ... }``
marked ``Primitive=1`` once per kernel; TVM scripts call ``DefuseOps`` to read or rewrite
the operators again, one by one. The body is inlined with each parameter replaced by the
call's argument, so the program computes what it did before fusion, in graph form.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Node
from compiler.ir.module import IRModule
from compiler.ir.visitor import ExprMutator, substitute
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import map_functions
from compiler.transform.typed_rewrite import is_primitive

__all__ = ["DefuseOps", "defuse_ops"]


class _Defuser(ExprMutator):
    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, Call) and is_primitive(new.op):
            func = new.op
            return substitute(func.body, dict(zip(func.params, new.args)))  # type: ignore[attr-defined]
        return new


def defuse_ops(mod: IRModule) -> IRModule:
    """Inline every call of a primitive function in ``mod``.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module with no primitive functions left in call position.
    """
    return map_functions(mod, lambda func: _Defuser().visit(func))


class DefuseOps(Pass):
    """Replace each call of a fused primitive function by its body (TVM's ``DefuseOps``,
    ``opt_level=0``). See :mod:`compiler.transform.defuse_ops`."""

    def __init__(self) -> None:
        super().__init__("DefuseOps", opt_level=0)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return defuse_ops(mod)

    def __repr__(self) -> str:
        return "DefuseOps()"

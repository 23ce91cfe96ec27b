"""``Legalize``: calls of operators with a registered legalization become what it returns.

Compiler layer (``compiler.transform``). TVM's pass of that name, run before lowering:
for each call outside primitive functions whose operator has a function registered by
:func:`compiler.op.legalize.register_legalize` (``relay.op.register_legalize``), the
function is given the call's attributes, its arguments (already legalized) and the types of
the arguments followed by the result's, and the call is replaced by the expression it
returns; None keeps the call. The replacement must have the call's type: a program whose
values would change type is refused, naming the operator, rather than failing later in a
pass that does not know where the mismatch came from.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Expr, Node, Var
from compiler.ir.module import IRModule
from compiler.ir.types import Type
from compiler.ir.visitor import free_vars, substitute
from compiler.op.legalize import any_legalize, get_legalize
from compiler.transform.infer_type import InferTypeLocal
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_primitive, rewrite_module
from compiler.typing import RelayTypeError

__all__ = ["Legalize", "legalize"]

#: The only attribute map relayvm keeps (TVM's quantized variants have no operators here).
ATTR_NAME = "FTVMLegalize"


def _op_name(node: object) -> str | None:
    if isinstance(node, Call):
        return getattr(node.op, "name", None)
    return None


def _wanted(node: Node) -> bool:
    name = _op_name(node)
    return name is not None and get_legalize(name) is not None


def _type_of(expr: Expr, name: str) -> Type:
    """The type of a legalization's result. Its free variables are the call's arguments'
    (and the function's) variables, typed in the program but not all annotated (a let's
    variable): a copy of ``expr`` over annotated variables of those types is inferred."""
    annotated = {
        v: Var(v.name_hint, v._checked_type)  # type: ignore[attr-defined]
        for v in free_vars(expr)
        if v.type_annotation is None and getattr(v, "_checked_type", None) is not None
    }
    try:
        return InferTypeLocal(substitute(expr, annotated) if annotated else expr)
    except RelayTypeError as error:
        raise TypeError(
            f"Legalize: the legalization of {name} returned an expression that does not "
            f"type-check: {error}"
        ) from None


class _Rewriter(BindingMutator):
    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        name = _op_name(old)
        function = None if name is None else get_legalize(name)
        if function is None:
            return new
        assert isinstance(old, Call) and isinstance(new, Call)
        arg_types = [arg._checked_type for arg in old.args]  # type: ignore[attr-defined]
        want = old._checked_type  # type: ignore[attr-defined]
        out = function(old.attrs, list(new.args), [*arg_types, want])
        if out is None:
            return new
        if not isinstance(out, Expr):
            raise TypeError(
                f"Legalize: the legalization of {name} returned {type(out).__name__}, not a "
                "Relay expression (or None to keep the call)"
            )
        got = _type_of(out, name)
        if got != want:
            raise TypeError(
                f"Legalize: the legalization of {name} returned an expression of type {got} "
                f"where the call has type {want}"
            )
        return out


def legalize(mod: IRModule) -> IRModule:
    """Replace every call outside primitive functions whose operator has a registered
    legalization by what the legalization returns (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module.

    Raises
    ------
    TypeError
        If a legalization returns something other than an expression or None, or an
        expression that does not have the call's type (the message names the operator).
    """
    if not any_legalize():  # nothing registered: no walk over a whole model
        return mod.copy()
    return rewrite_module(mod, _wanted, _Rewriter)


class Legalize(Pass):
    """Apply the legalizations registered with ``relay.op.register_legalize``
    (``opt_level=1``), as TVM's pass of that name. See :mod:`compiler.transform.legalize`.

    Parameters
    ----------
    legalize_map_attr_name : str
        TVM's name of the attribute holding the functions: ``"FTVMLegalize"``, the only one
        relayvm keeps.

    Raises
    ------
    ValueError
        For another attribute name (TVM's ``FTVMQnnLegalize`` and ``FTVMQnnCanonicalize``
        belong to quantized operators relayvm does not have).
    """

    def __init__(self, legalize_map_attr_name: str = ATTR_NAME) -> None:
        if legalize_map_attr_name != ATTR_NAME:
            raise ValueError(
                f"Legalize: legalize_map_attr_name {legalize_map_attr_name!r} is not "
                f"supported; relayvm keeps legalizations under {ATTR_NAME!r} only"
            )
        super().__init__("Legalize", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return legalize(mod)

    def __repr__(self) -> str:
        return "Legalize()"

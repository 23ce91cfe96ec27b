"""Eta-expansion of constructors used as values: ``@foldr(Cons, Nil(), %xs)`` gets a real function.

Compiler layer (``compiler.transform``).

A constructor is only code when it is called (it becomes ``AllocADT``). Where one is
passed around as a value, this pass substitutes a global wrapper function, one per
constructor, generic over the data type's type parameters::

    def @eta_Cons[A](%x0: A, %x1: List[A]) -> List[A] { Cons(%x0, %x1) }

so the code generator sees an ordinary global used as a value (``AllocClosure`` with no
captured values). TVM's ``EtaExpand(expand_constructor=True)`` does the same with local
functions, which lambda lifting would turn into these globals anyway.
As in type inference, a constructor named without a call is a function even when it
has no fields: ``Nil`` is ``fn () -> List[A]``, its value is ``Nil()``. Global functions
used as values need no expansion: they compile to closures directly.

:class:`EtaExpand` is TVM's pass object: ``expand_constructor=True`` runs the above, and
``expand_global_var=True`` replaces each global function used as a value by a local
function that calls it, ``fn (%x0, ...) { @f(%x0, ...) }`` (generic over fresh type
parameters where ``@f`` is), as TVM's does.
"""

from __future__ import annotations

from compiler.ir.expr import (
    Call,
    Clause,
    Constructor,
    Function,
    GlobalVar,
    Node,
    Pattern,
    Var,
)
from compiler.ir.module import IRModule
from compiler.ir.types import TypeCall, TypeVar
from compiler.ir.visitor import ExprMutator, children, rebuild
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import map_functions
from compiler.transform.typed_rewrite import carry_type, is_primitive, substitute_type


def eta_expand(mod: IRModule) -> IRModule:
    """Replace every constructor used as a value by a global function that calls it.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module with one ``@eta_<Constructor>`` global per constructor used as a
        value (added after the existing functions) and those uses replaced by it.
    """
    out = mod.copy()
    wrappers: dict[Constructor, GlobalVar] = {}

    def wrapper_for(ctor: Node) -> GlobalVar | None:
        if not isinstance(ctor, Constructor):
            return None
        gvar = wrappers.get(ctor)
        if gvar is None:
            name = _unique_name(out, f"eta_{ctor.name_hint}")
            gvar = GlobalVar(name)
            out[gvar] = _constructor_function(mod, ctor)
            wrappers[ctor] = gvar
        return gvar

    for gvar, func in mod.functions.items():
        out[gvar] = _Expander(wrapper_for).visit(func)
    return out


class _Expander(ExprMutator):
    """Replaces what ``wrapper_for`` wraps (it returns None for anything else) wherever it
    is used as a value."""

    def __init__(self, wrapper_for) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self._wrapper_for = wrapper_for

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        # Patterns name constructors without using them as values; a call's callee is a use
        # as code. Every other expression child is a value position.
        if isinstance(new, (Pattern, Clause)):
            return new
        kids = children(new)
        start = 1 if isinstance(new, Call) else 0
        replaced = list(kids)
        changed = False
        for i in range(start, len(kids)):
            wrapper = self._wrapper_for(kids[i])
            if wrapper is not None:
                replaced[i] = wrapper
                changed = True
        if changed:
            new = rebuild(new, tuple(replaced))
        return carry_type(old, new)


def _constructor_function(mod: IRModule, ctor: Constructor) -> Function:
    data = mod.get_type_data(ctor.belong_to)
    # Fresh type parameters: the wrapper must not share binders with the data type itself.
    fresh = [TypeVar(tv.name_hint) for tv in data.type_vars]
    mapping = dict(zip(data.type_vars, fresh))
    params = [Var(f"x{i}", substitute_type(t, mapping)) for i, t in enumerate(ctor.inputs)]
    ret = TypeCall(ctor.belong_to, fresh)
    return Function(params, Call(ctor, params), ret, fresh)


def _unique_name(mod: IRModule, base: str) -> str:
    name, k = base, 0
    while name in mod:
        k += 1
        name = f"{base}_{k}"
    return name


def expand_global_vars(mod: IRModule) -> IRModule:
    """Replace every global function used as a value by a local function calling it.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module where a global appears only as the callee of calls.
    """
    wrappers: dict[GlobalVar, Function] = {}

    def wrapper_for(node: Node) -> Function | None:
        if not isinstance(node, GlobalVar) or node not in mod:
            return None
        if node not in wrappers:
            wrappers[node] = _global_function(mod[node], node)
        return wrappers[node]

    return map_functions(mod, lambda func: _Expander(wrapper_for).visit(func))


def _global_function(func: Function, gvar: GlobalVar) -> Function:
    # Fresh type parameters, as for the constructors' wrappers.
    fresh = [TypeVar(tv.name_hint) for tv in func.type_params]
    mapping = dict(zip(func.type_params, fresh))

    def typed(ty):  # type: ignore[no-untyped-def]
        return substitute_type(ty, mapping) if ty is not None else None

    params = [Var(f"x{i}", typed(p.type_annotation)) for i, p in enumerate(func.params)]
    return Function(params, Call(gvar, params), typed(func.ret_type), fresh)


class EtaExpand(Pass):
    """Give constructors and global functions used as values a function to stand in for
    them (TVM's ``EtaExpand``, ``opt_level=0``). See :mod:`compiler.transform.eta_expand`.

    Parameters
    ----------
    expand_constructor : bool
        Constructors used as values become global wrapper functions.
    expand_global_var : bool
        Global functions used as values become local functions calling them.
    """

    def __init__(self, expand_constructor: bool = False, expand_global_var: bool = False) -> None:
        super().__init__("EtaExpand", opt_level=0)
        self.expand_constructor = bool(expand_constructor)
        self.expand_global_var = bool(expand_global_var)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # Constructors first: with both, their wrappers are globals used as values too,
        # and then get local functions, so that no constructor or global is left a value.
        if self.expand_constructor:
            mod = eta_expand(mod)
        if self.expand_global_var:
            mod = expand_global_vars(mod)
        return mod

    def __repr__(self) -> str:
        return (
            f"EtaExpand(expand_constructor={self.expand_constructor}, "
            f"expand_global_var={self.expand_global_var})"
        )

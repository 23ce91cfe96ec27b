"""``SpecializeConstantArguments``: a recursive function gets a copy with its loop-invariant
constant arguments inside it.

Compiler layer (``compiler.transform``).

A loop written as a recursive global function takes its weights as parameters and passes
them on unchanged at every step::

    def @loop(%i, %h, %w) { ... @loop(add(%i, 1), %h2, %w) ... }
    def @main(%h0) { @loop(0, %h0, meta[Constant][0]) }

``relay.vm.compile(mod, params=...)`` binds the weights in ``@main`` only, so inside the
loop they stay variables: the passes that work on constant weights (``FoldConstant``,
``AlterOpLayout``'s packed layouts, ``CombineSummedDense``) never see them, and every step
passes them along as arguments. A parameter is *invariant* when every call from inside
the function passes the parameter itself at its position and every call from elsewhere
passes one and the same constant there; this pass then adds ``@loop_specialized`` (the
body with those constants in place of the parameters, which it no longer takes) and
points every call of ``@loop`` at it, recursive calls included. ``@loop`` itself stays
as it was, so a caller that invokes it by name with all its arguments is served as
before. This is the static argument transformation of functional compilers, restricted
to constants.

A function is left alone when it is ``@main`` (its parameters are the program's inputs),
generic (has type parameters), a primitive, or used other than by being called (passed as
a value, say), or when no call from elsewhere reaches it. Constants are the same when
they are one node or hold equal arrays of one dtype. The pass runs at ``opt_level`` 2,
before ``FoldConstant``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.expr import Call, Constant, Expr, Function, GlobalVar, Node, Var
from compiler.ir.module import IRModule
from compiler.ir.visitor import ExprMutator, children, post_order, substitute
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import is_primitive

__all__ = ["SpecializeConstantArguments", "specialize_constant_arguments"]

#: Appended to the name of a function to name its specialized copy.
SUFFIX = "_specialized"


def _outside(node: Node) -> bool:
    return not is_primitive(node)


def _calls_of(mod: IRModule, gvar: GlobalVar) -> dict[GlobalVar, list[Call]] | None:
    """The calls of ``gvar`` in each function of ``mod``; None if ``gvar`` is used other
    than as the function of a call."""
    found: dict[GlobalVar, list[Call]] = {}
    for owner, func in mod.functions.items():
        for node in post_order(func, descend=_outside):
            if not _outside(node):
                continue
            for position, child in enumerate(children(node)):
                if child is not gvar:
                    continue
                if not (isinstance(node, Call) and position == 0):
                    return None
                found.setdefault(owner, []).append(node)
    return found


def _same_constant(a: Constant, b: Constant) -> bool:
    if a is b:
        return True
    x, y = a.data, b.data
    return x.dtype == y.dtype and x.shape == y.shape and bool(np.array_equal(x, y))


def _invariant(params: Sequence[Var], inner: list[Call], outer: list[Call]) -> dict[int, Constant]:
    """Positions of the invariant parameters and the constant each one is given, for a
    function with ``params`` called by ``inner`` (in itself) and ``outer`` (elsewhere)."""
    if any(len(c.args) != len(params) for c in (*inner, *outer)):
        return {}  # a wrong number of arguments: the type checker will say so
    found: dict[int, Constant] = {}
    for k, param in enumerate(params):
        first = outer[0].args[k]
        passed_on = all(c.args[k] is param for c in inner)
        if passed_on and isinstance(first, Constant):
            given = [c.args[k] for c in outer]
            if all(isinstance(g, Constant) and _same_constant(first, g) for g in given):
                found[k] = first
    return found


class _Redirect(ExprMutator):
    """Calls of ``old`` become calls of ``new`` without the arguments at ``dropped``."""

    def __init__(self, old: GlobalVar, new: GlobalVar, dropped: set[int]) -> None:
        super().__init__()
        self.old, self.new, self.dropped = old, new, dropped

    def descend(self, node: Node) -> bool:
        return _outside(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, Call) and new.op is self.old:
            kept = [a for k, a in enumerate(new.args) if k not in self.dropped]
            return Call(self.new, kept, new.attrs, new.type_args)
        return new


def _fresh_name(mod: IRModule, name: str) -> str:
    candidate, n = name + SUFFIX, 1
    while candidate in mod:
        n += 1
        candidate = f"{name}{SUFFIX}{n}"
    return candidate


def _specialize(mod: IRModule, gvar: GlobalVar) -> IRModule | None:
    """``mod`` with ``gvar``'s specialized copy and its calls redirected, or None if
    ``gvar`` has no invariant constant parameter."""
    func = mod[gvar]
    if gvar.name_hint == "main" or func.type_params or is_primitive(func) or not func.params:
        return None
    calls = _calls_of(mod, gvar)
    if not calls:
        return None
    inner = calls.get(gvar, [])
    outer = [c for owner, found in calls.items() if owner is not gvar for c in found]
    if not outer:
        return None
    constants = _invariant(func.params, inner, outer)
    if not constants:
        return None
    copy = GlobalVar(_fresh_name(mod, gvar.name_hint))
    redirect = _Redirect(gvar, copy, set(constants))
    body: Expr = substitute(func.body, {func.params[k]: c for k, c in constants.items()})
    kept = [p for k, p in enumerate(func.params) if k not in constants]
    out = mod.copy()
    for owner, other in mod.functions.items():
        if owner is not gvar and owner in calls:
            out[owner] = redirect.visit(other)
    specialized = Function(kept, redirect.visit(body), func.ret_type, [], func.attrs)
    specialized.span = func.span
    out[copy] = specialized
    return out


def specialize_constant_arguments(mod: IRModule) -> IRModule:
    """Give each global function whose callers all pass it the same constants, which it
    passes on unchanged, a copy with those constants inside (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module: the original functions, the specialized copies, and every call
        outside a specialized function's original pointed at its copy.
    """
    out = mod.copy()
    for gvar in mod.get_global_vars():
        specialized = _specialize(out, out.get_global_var(gvar.name_hint))
        if specialized is not None:
            out = specialized
    return out


class SpecializeConstantArguments(Pass):
    """Copy recursive functions with their loop-invariant constant arguments inside
    (``opt_level=2``). See :mod:`compiler.transform.specialize_arguments`."""

    def __init__(self) -> None:
        super().__init__("SpecializeConstantArguments", opt_level=2)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return specialize_constant_arguments(mod)

    def __repr__(self) -> str:
        return "SpecializeConstantArguments()"

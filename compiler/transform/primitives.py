"""Primitive extraction: every operator call becomes a call of a primitive function.

Compiler layer (``compiler.transform``).

``add(%x, 1f)`` becomes::

    (fn (%p0: Tensor[(2), float32], %p1: float32, Primitive=1) { add(%p0, %p1) })(%x, 1f)

A primitive function is the unit the code generator turns into one kernel and one
``InvokePacked``. Its body is a small dataflow graph of operator calls over its
parameters; :func:`compiler.transform.fuse_ops` builds primitives of several operators the
same way. In the VM pipeline this pass runs after fusion and only finds operator calls
when ``FuseOps`` was disabled; it is also the simplest way to lower a module unfused.
Tuple literals given to an operator (the input of ``concatenate``) are passed field by
field, so the kernel receives tensors; an expression passed twice (``add(%x, %x)``)
becomes one parameter used twice.

Parameter types come from type inference (run it first); where a type is unknown the
parameter is left unannotated for the next inference to fill in.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Expr, Function, Node, Op, Tuple, Var
from compiler.ir.module import IRModule
from compiler.ir.types import FuncType
from compiler.ir.visitor import ExprMutator
from compiler.transform.typed_rewrite import carry_type, is_primitive, known_type, with_type


def wrap_primitives(mod: IRModule) -> IRModule:
    """Turn every operator call outside primitive functions into a primitive-function call.

    Parameters
    ----------
    mod : IRModule
        A module, ideally type-checked so primitive parameters get annotated; it is not
        modified.

    Returns
    -------
    IRModule
        A new module in which operators are only called inside ``Primitive=1`` functions.
    """
    out = mod.copy()
    for gvar, func in mod.functions.items():
        out[gvar] = wrap_primitives_expr(func)
    return out


def wrap_primitives_expr(expr: Expr) -> Expr:
    """:func:`wrap_primitives` for one expression."""
    return _Wrapper().visit(expr)


class _Wrapper(ExprMutator):
    def descend(self, node: Node) -> bool:
        # Operator calls already inside a primitive function belong to its kernel.
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, Op):
            return new
        if isinstance(new, Call) and isinstance(new.op, Op):
            assert isinstance(old, Call)
            return self._wrap(old, new)
        return carry_type(old, new)

    def _wrap(self, old: Call, new: Call) -> Call:
        params = _Params()
        body_args = [params.tree(o, n) for o, n in zip(old.args, new.args)]
        body = with_type(Call(new.op, body_args, new.attrs, new.type_args), old._checked_type)
        func = Function(params.vars, body, old._checked_type, attrs={"Primitive": 1})
        arg_types = [p.type_annotation for p in params.vars]
        if old._checked_type is not None and all(t is not None for t in arg_types):
            func._checked_type = FuncType(arg_types, old._checked_type)  # type: ignore[arg-type]
        call = Call(func, params.actuals)
        call.span = old.span
        return with_type(call, old._checked_type)  # type: ignore[return-value]


class _Params:
    """The parameters of one primitive function and the actual arguments they stand for.

    An expression passed twice (``add(%x, %x)``) becomes one parameter used twice.
    """

    def __init__(self) -> None:
        self.vars: list[Var] = []
        self.actuals: list[Expr] = []
        self._by_actual: dict[int, Var] = {}

    def tree(self, old_arg: Expr, arg: Expr) -> Expr:
        """The body's argument for one operator argument: a parameter, or a tuple of them
        when the argument is a tuple literal (its fields become separate parameters)."""
        results: dict[int, Expr] = {}
        stack: list[tuple[Expr, Expr, bool]] = [(old_arg, arg, False)]
        while stack:
            o, n, expanded = stack.pop()
            if id(n) in results:
                continue
            if not isinstance(n, Tuple):
                results[id(n)] = self._param(o, n)
                continue
            o_fields = o.fields if isinstance(o, Tuple) else n.fields
            if not expanded:
                stack.append((o, n, True))
                stack.extend((of, nf, False) for of, nf in reversed(list(zip(o_fields, n.fields))))
                continue
            rebuilt = Tuple([results[id(f)] for f in n.fields])
            results[id(n)] = with_type(rebuilt, known_type(o))
        return results[id(arg)]

    def _param(self, old_arg: Expr, arg: Expr) -> Var:
        existing = self._by_actual.get(id(arg))
        if existing is not None:
            return existing
        ty = known_type(old_arg) or known_type(arg)
        param = Var(f"p{len(self.vars)}", ty)
        with_type(param, ty)
        self.vars.append(param)
        self.actuals.append(arg)
        self._by_actual[id(arg)] = param
        return param

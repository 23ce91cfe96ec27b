"""The ``relay.analysis`` namespace: read-only questions about expressions.

Compiler layer (``compiler.relay``). The variable queries are the iterative ones of
:mod:`compiler.ir.visitor`; :func:`free_type_vars` lists the type variables that an
expression's annotations use without binding; :func:`well_formed` checks that no variable
is bound twice; :func:`list_op_freqs` counts a module's operator calls and
:func:`get_total_mac_number` the multiply-accumulates of its convolutions and products.
"""

from __future__ import annotations

import math
from collections import Counter

from compiler.ir.expr import Call, Expr, Function, Node, Op, Var
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType, Type, TypeVar
from compiler.ir.visitor import (
    all_vars,
    bound_vars,
    children,
    free_vars,
    post_order,
    post_order_visit,
)
from compiler.typing.infer import infer_expr
from compiler.typing.typeops import free_type_vars_of_type

__all__ = [
    "all_vars", "bound_vars", "free_type_vars", "free_vars", "get_total_mac_number",
    "list_op_freqs", "post_order_visit", "well_formed",
]  # fmt: skip


def well_formed(expr: Node) -> bool:
    """Whether no variable of ``expr`` is bound twice (by two lets, parameters or
    patterns), as TVM's ``relay.analysis.well_formed`` asks: a program that binds one
    variable in two places cannot be given to the passes, which key values by variable."""
    bound = bound_vars(expr)
    return len(bound) == len(set(map(id, bound)))


def list_op_freqs(mod: IRModule) -> dict[str, int]:
    """How many calls of each operator the functions of ``mod`` make (TVM's
    ``relay.analysis.list_op_freqs``), a node shared by several users counted once."""
    if not isinstance(mod, IRModule):
        raise TypeError(f"list_op_freqs expects a relay.IRModule, got {type(mod).__name__}")
    counts: Counter[str] = Counter()
    for func in mod.functions.values():
        for node in post_order(func):
            if isinstance(node, Call) and isinstance(node.op, Op):
                counts[node.op.name] += 1
    return dict(counts)


def get_total_mac_number(expr: Expr) -> int:
    """The multiply-accumulates of the convolutions (``nn.conv2d``,
    ``nn.conv2d_transpose``) and products (``nn.dense``, ``nn.matmul``,
    ``nn.batch_matmul``) in ``expr``, as TVM's ``relay.analysis.get_total_mac_number``
    counts them; ``expr`` is type-checked first, and its shapes must be static."""
    infer_expr(expr)
    total = 0
    for node in post_order(expr):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.op.name in _MACS:
            total += _MACS[node.op.name](node)
    return total


def _shape(node: Node, what: str) -> tuple[int, ...]:
    ty = getattr(node, "_checked_type", None)
    if not isinstance(ty, TensorType) or not ty.is_static:
        raise ValueError(f"get_total_mac_number: the {what} has no static shape ({ty})")
    return ty.concrete_shape


def _conv2d_macs(call: Call) -> int:
    # Each output element sums in_channels / groups planes of the kernel.
    weight = _shape(call.args[1], "nn.conv2d weight")
    return math.prod(_shape(call, "nn.conv2d result")) * math.prod(weight[1:])


def _conv2d_transpose_macs(call: Call) -> int:
    # Each input element is spread over out_channels / groups planes of the kernel.
    weight = _shape(call.args[1], "nn.conv2d_transpose weight")
    return math.prod(_shape(call.args[0], "nn.conv2d_transpose data")) * math.prod(weight[1:])


def _product_macs(call: Call) -> int:
    # Each output element sums the reduced axis of the first operand: its last, or, for
    # a matmul with transpose_a, the one before.
    data = _shape(call.args[0], f"{call.op.name} operand")
    axis = -2 if call.attrs.get("transpose_a", False) else -1
    return math.prod(_shape(call, f"{call.op.name} result")) * data[axis]


_MACS = {
    "nn.conv2d": _conv2d_macs,
    "nn.conv2d_transpose": _conv2d_transpose_macs,
    "nn.dense": _product_macs,
    "nn.matmul": _product_macs,
    "nn.batch_matmul": _product_macs,
}


def free_type_vars(node: Node | Type) -> list[TypeVar]:
    """Type variables used in ``node`` but not bound by it, in order of first appearance.

    For a type, these are the type variables outside any function type's parameters.
    For an expression, they are those of its annotations (variables, function return
    types, call type arguments) not bound by an enclosing function's ``type_params``.
    """
    if isinstance(node, Type):
        return free_type_vars_of_type(node)
    out: list[TypeVar] = []
    seen: set[TypeVar] = set()
    # Pre-order with the type variables bound around each node; a node shared under two
    # different scopes is looked at once per scope.
    stack: list[tuple[Node, frozenset[TypeVar]]] = [(node, frozenset())]
    visited: set[tuple[int, frozenset[TypeVar]]] = set()
    while stack:
        n, scope = stack.pop()
        if (id(n), scope) in visited:
            continue
        visited.add((id(n), scope))
        types: list[Type] = []
        if isinstance(n, Function):
            scope = scope | frozenset(n.type_params)
            if n.ret_type is not None:
                types.append(n.ret_type)
        elif isinstance(n, Var) and n.type_annotation is not None:
            types.append(n.type_annotation)
        elif isinstance(n, Call):
            types.extend(n.type_args)
        for t in types:
            for tv in free_type_vars_of_type(t, scope):
                if tv not in seen:
                    seen.add(tv)
                    out.append(tv)
        stack.extend((c, scope) for c in reversed(children(n)))
    return out

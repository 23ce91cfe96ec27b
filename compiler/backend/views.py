"""View primitives: primitive functions that only reshape their one tensor parameter.

Compiler layer (``compiler.backend``). Such a primitive never runs a kernel: the code
generator (:mod:`compiler.backend.dynamic`) turns it into ``reshape_tensor``, a view that
shares its input's memory, and the memory plan (:mod:`compiler.backend.memory_plan`) gives
it no buffer of its own. Both ask :func:`is_view_primitive`.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Expr, Op
from compiler.ir.types import TensorType
from compiler.transform.typed_rewrite import is_primitive, known_type

__all__ = ["VIEW_OPS", "is_view_primitive"]

#: Operators that only reinterpret the shape of a C-contiguous tensor.
VIEW_OPS = frozenset({"reshape", "squeeze", "expand_dims", "nn.batch_flatten"})


def is_view_primitive(func: Expr) -> bool:
    """Whether ``func`` is a primitive function that only reshapes its one tensor parameter.

    Its body must be a chain of :data:`VIEW_OPS` calls ending at the parameter, so the
    result is the parameter's elements in the same order: a view needs no copy.
    """
    if not is_primitive(func) or len(func.params) != 1:  # type: ignore[attr-defined]
        return False
    param = func.params[0]  # type: ignore[attr-defined]
    if not isinstance(known_type(param), TensorType):
        return False
    node: Expr = func.body  # type: ignore[attr-defined]
    depth = 0
    while isinstance(node, Call):
        if not isinstance(node.op, Op) or node.op.name not in VIEW_OPS or len(node.args) != 1:
            return False
        node = node.args[0]
        depth += 1
    return depth > 0 and node is param

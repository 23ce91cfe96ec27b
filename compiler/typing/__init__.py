"""Type inference for Relay: unification with incomplete types, ``?`` dimensions, ADTs.

Compiler layer (``compiler.typing``).

Entry points: :func:`infer_types` (a typed copy of an IRModule, the ``InferType`` pass)
and :func:`infer_expr` (the type of one expression). Ill-typed programs raise
:class:`RelayTypeError`, a ``TypeError`` naming the expression, its position, the
expected and the found type.

Dynamic dimensions: ``?`` (``relay.Any()``) unifies with any dimension, so an argument
of type ``Tensor[(5, 10)]`` is accepted for a parameter ``Tensor[(?, 10)]`` (the call's
result type comes from the callee). Where two types meet (the branches of an ``if``, the
clauses of a ``match``, the uses of an unannotated variable) the result keeps ``?``
wherever they differ. Dtypes and ranks must always agree.
"""

from compiler.typing.errors import RelayTypeError
from compiler.typing.infer import infer_expr, infer_types

__all__ = ["RelayTypeError", "infer_expr", "infer_types"]

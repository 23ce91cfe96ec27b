"""Compiler passes: pure ``IRModule -> IRModule`` functions, one per module.

Compiler layer (``compiler.passes``). The VM lowering (:mod:`compiler.relay.vm`) runs
them in this order, with type inference in between:

- :func:`eta_expand`: constructors used as values become global functions;
- :func:`wrap_primitives`: each operator call becomes a call of a primitive function;
- :func:`to_anf`: A-normal form, every non-atomic sub-expression bound by a ``let``;
- :func:`lambda_lift`: local functions become globals, closures capture free variables.

No pass mutates its input.
"""

from compiler.passes.eta_expand import eta_expand
from compiler.passes.lambda_lift import lambda_lift
from compiler.passes.primitives import wrap_primitives
from compiler.passes.to_anf import to_anf

__all__ = ["eta_expand", "lambda_lift", "to_anf", "wrap_primitives"]

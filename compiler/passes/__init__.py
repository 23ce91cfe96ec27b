"""Compiler passes: pure ``IRModule -> IRModule`` functions, one per module.

Compiler layer (``compiler.passes``). The VM lowering (:mod:`compiler.relay.vm`) runs
them in this order, with type inference in between:

- :func:`eta_expand`: constructors used as values become global functions;
- :func:`fuse_ops`: operator calls are grouped into primitive functions, one kernel each,
  by TVM's fusion rules (:mod:`compiler.passes.fuse_graph` finds the groups);
- :func:`wrap_primitives`: each operator call still outside a primitive gets its own;
- :func:`to_anf`: A-normal form, every non-atomic sub-expression bound by a ``let``;
- :func:`lambda_lift`: local functions become globals, closures capture free variables.

No pass mutates its input. :class:`FuseOps` is also ``relay.transform.FuseOps``.
"""

from compiler.passes.eta_expand import eta_expand
from compiler.passes.fuse_ops import FuseOps, fuse_ops
from compiler.passes.lambda_lift import lambda_lift
from compiler.passes.primitives import wrap_primitives
from compiler.passes.to_anf import to_anf

__all__ = ["FuseOps", "eta_expand", "fuse_ops", "lambda_lift", "to_anf", "wrap_primitives"]

"""``run_infer_type`` and ``run_opt_pass``: one expression through passes, as TVM's tests write.

Compiler layer (``compiler.relay``). TVM's ``relay.testing`` offers these two so that a pass
can be tried on a bare expression: the expression is wrapped in a module as ``main``, the
passes run, and the same kind of thing comes back (a function for a function, otherwise
the body of ``main``).
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.expr import Expr, Function
from compiler.ir.module import IRModule
from compiler.prelude import Prelude
from compiler.transform import InferType, Pass, Sequential

__all__ = ["run_infer_type", "run_opt_pass"]


def run_opt_pass(expr: Expr, opt_pass: Pass | Sequence[Pass], import_prelude: bool = False) -> Expr:
    """``expr`` after ``opt_pass`` (a pass or a list of them, run in order).

    Parameters
    ----------
    expr : Expr
        The expression; a function is wrapped as ``main`` as it is, anything else as the
        body of a function of its free variables.
    opt_pass : Pass or sequence of Pass
        What to run, under the current ``PassContext``.
    import_prelude : bool
        Add the prelude's list and option types and functions to the module first.

    Returns
    -------
    Expr
        ``main`` when ``expr`` is a function, otherwise ``main``'s body.
    """
    mod = IRModule.from_expr(expr)
    if import_prelude:
        Prelude(mod)
    passes = list(opt_pass) if isinstance(opt_pass, Sequence) else [opt_pass]
    mod = Sequential(passes)(mod)
    main = mod["main"]
    return main if isinstance(expr, Function) else main.body


def run_infer_type(expr: Expr) -> Expr:
    """``expr`` with its types inferred (``run_opt_pass(expr, InferType())``)."""
    return run_opt_pass(expr, InferType())

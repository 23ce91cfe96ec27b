"""``SimplifyPower``: ``power`` by a small whole constant becomes multiplications.

Compiler layer (``compiler.transform``).

``power(x, 3)`` (GPT-2's GELU approximation, ``0.5 * x * (1 + tanh(c * (x + 0.044715 *
x ** 3)))``) and ``power(x, 2)`` (the variance of T5's RMS norm and of exported layer
norms) are compiled by numba as calls to ``powf``, which LLVM cannot vectorize: about 8 ns
an element, most of the cost of a GELU. With the exponent a float scalar constant of 1, 2,
3 or 4 the call becomes ``x``, ``x * x``, ``x * x * x`` or ``(x * x) * (x * x)``, which
fuse and vectorize like any multiplication. The products round once or twice where
``powf`` rounds once: results may differ from it in the last bit. Fractional exponents
stay as they are (``sqrt`` would differ from ``powf`` at ``-0.0``). The pass runs at
``opt_level`` 1.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Call, Constant, Node
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.op.api import call_op
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_op_call, is_primitive, rewrite_module

__all__ = ["SimplifyPower", "simplify_power"]

_WHOLE = (1.0, 2.0, 3.0, 4.0)


def _is_power(node: object) -> bool:
    return is_op_call(node, "power")


def _exponent(old: Call) -> float | None:
    """The whole exponent of ``old`` when rewriting it keeps its type, else None."""
    base, exponent = old.args
    base_type = getattr(base, "_checked_type", None)
    if not isinstance(exponent, Constant) or not isinstance(base_type, TensorType):
        return None
    data = exponent.data
    if data.size != 1 or data.ndim > base_type.ndim or data.dtype.kind != "f":
        return None  # a larger exponent would broadcast the result to another shape
    if np.dtype(base_type.dtype) != data.dtype:
        return None
    value = float(data.reshape(()))
    return value if value in _WHOLE else None


class _Rewriter(BindingMutator):
    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if not _is_power(old) or not _is_power(new):
            return new
        value = _exponent(old)  # type: ignore[arg-type]
        if value is None:
            return new
        x = new.args[0]  # type: ignore[attr-defined]
        if value == 1.0:
            return x
        square = call_op("multiply", [x, x])
        if value == 2.0:
            return square
        if value == 3.0:
            return call_op("multiply", [square, x])
        return call_op("multiply", [square, square])


def simplify_power(mod: IRModule) -> IRModule:
    """Rewrite ``power`` by a whole constant of 1 to 4 as multiplications (see the module
    doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it calls ``power``.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _is_power, _Rewriter)


class SimplifyPower(Pass):
    """Turn ``power`` by 1, 2, 3 or 4 into multiplications (``opt_level=1``). See
    :mod:`compiler.transform.simplify_power`."""

    def __init__(self) -> None:
        super().__init__("SimplifyPower", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return simplify_power(mod)

    def __repr__(self) -> str:
        return "SimplifyPower()"

"""``tvm.ir`` over relayvm: the module and operator classes.

Compiler layer (``compiler.tvm``); a facade of re-exports (see :mod:`compiler.tvm`).
"""

from __future__ import annotations

from typing import Any

from compiler.tvm._names import resolve

_EXPORTS = {
    "IRModule": "compiler.ir.module:IRModule",
    "op": "compiler.tvm.ir.op",
    "Op": "compiler.tvm.ir.op:Op",
    "structural_equal": "compiler.ir.structural:structural_equal",
    "assert_structural_equal": "compiler.ir.structural:assert_structural_equal",
    "structural_hash": "compiler.ir.structural:structural_hash",
    "transform": "compiler.transform",
}

_MISSING = {
    "PrimFunc": "relayvm has no TIR; kernels are generated from compiler.op's descriptions",
    "register_op_attr": "an operator is one row of compiler.op's tables (attributes, type "
    "relation, shape function, reference, kernel)",
}


def __getattr__(name: str) -> Any:
    value = resolve("tvm.ir", name, _EXPORTS, _MISSING)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

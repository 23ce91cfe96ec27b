"""``tvm.tir`` over relayvm: the immediates Relay programs use, nothing of TIR itself.

Compiler layer (``compiler.tvm``); a facade of re-exports (see :mod:`compiler.tvm`).
``tvm.tir.IntImm("int32", 1)``, ``FloatImm`` and ``StringImm`` are typed constants that TVM
code passes as function and operator attributes (:mod:`compiler.ir.immediate`); any other
name raises an ``AttributeError`` saying that relayvm has no TIR.
"""

from __future__ import annotations

from typing import Any

from compiler.tvm._names import resolve

_EXPORTS = {
    "IntImm": "compiler.ir.immediate:IntImm",
    "FloatImm": "compiler.ir.immediate:FloatImm",
    "StringImm": "compiler.ir.immediate:StringImm",
}

_NO_TIR = (
    "relayvm has no TIR; kernels are generated from compiler.op's descriptions (tvm.tir "
    "offers only IntImm, FloatImm and StringImm, for attributes)"
)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS and not name.startswith("__"):
        raise AttributeError(f"relayvm does not implement tvm.tir.{name}: {_NO_TIR}")
    value = resolve("tvm.tir", name, _EXPORTS, {})
    globals()[name] = value
    return value

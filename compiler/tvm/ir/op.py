"""``tvm.ir.op`` over relayvm: the operator class.

Compiler layer (``compiler.tvm``); a facade of re-exports (see :mod:`compiler.tvm`).
"""

from __future__ import annotations

from compiler.ir.expr import Op
from compiler.op import registry as _registry  # noqa: F401  (gives Op its TVM ``get``)

__all__ = ["Op"]

"""``tvm.ir.op`` over relayvm: the operator class.

Compiler layer (``compiler.tvm``); a facade of re-exports (see :mod:`compiler.tvm`).
"""

from __future__ import annotations

from compiler.ir.expr import Op

__all__ = ["Op"]

"""The ``InferType`` pass: a typed copy of a module.

Compiler layer (``compiler.transform``); a thin pass object over
:func:`compiler.typing.infer_types`.
"""

from __future__ import annotations

from compiler.ir.module import IRModule
from compiler.typing import infer_types


class InferType:
    """Type-check every function of a module (TVM's ``relay.transform.InferType()``).

    Calling the pass on an IRModule returns a new IRModule whose expression nodes carry
    ``checked_type``; the input module is left unchanged. Raises
    :class:`compiler.typing.RelayTypeError` for an ill-typed program.
    """

    name = "InferType"

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"InferType expects an IRModule, got {type(mod).__name__}")
        return infer_types(mod)

    def __repr__(self) -> str:
        return "InferType()"

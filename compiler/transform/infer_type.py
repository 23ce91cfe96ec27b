"""The ``InferType`` pass: a typed copy of a module.

Compiler layer (``compiler.transform``); a thin pass object over
:func:`compiler.typing.infer_types`.
"""

from __future__ import annotations

from compiler.ir.module import IRModule
from compiler.transform.pass_manager import Pass, PassContext
from compiler.typing import infer_types


class InferType(Pass):
    """Type-check every function of a module (TVM's ``relay.transform.InferType()``,
    ``opt_level=0``).

    Calling the pass on an IRModule returns a new IRModule whose expression nodes carry
    ``checked_type``; the input module is left unchanged. Raises
    :class:`compiler.typing.RelayTypeError` for an ill-typed program.
    """

    def __init__(self) -> None:
        super().__init__("InferType", opt_level=0)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return infer_types(mod)

    def __repr__(self) -> str:
        return "InferType()"

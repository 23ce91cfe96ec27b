"""The ``relay.transform`` namespace: module-to-module passes.

Compiler layer (``compiler.transform``). Each pass is an object with a ``name`` that is
called on an IRModule and returns a new IRModule.
"""

from compiler.transform.infer_type import InferType

__all__ = ["InferType"]

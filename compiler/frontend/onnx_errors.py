"""The errors the ONNX frontend raises.

Compiler layer (``compiler.frontend``); standard library only, so the error classes can be
imported (and caught) without the optional ``onnx`` package.
"""

from __future__ import annotations


class OnnxImportError(ValueError):
    """The model cannot be imported: it is malformed, fails ``onnx.checker``, references
    external data unsafely, or is inconsistent (shapes, dtypes, constant operands).

    The message names the node (or tensor, or file) and says what was expected and found.
    """


class OpNotImplemented(NotImplementedError):
    """The model is valid ONNX but uses operators, or operator modes, the frontend does not
    support. For unsupported operator types the message lists every one used by the graph,
    each with the names of the nodes using it."""

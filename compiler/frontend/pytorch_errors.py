"""The errors the PyTorch frontend raises.

Compiler layer (``compiler.frontend``); standard library only, so the error classes can be
imported (and caught) without the optional ``torch`` package. Unsupported operators raise
the ONNX frontend's :class:`~compiler.frontend.onnx_errors.OpNotImplemented` (one class for
every importer, as TVM's ``tvm.error.OpNotImplemented``).
"""

from __future__ import annotations

from compiler.frontend.onnx_errors import OpNotImplemented


class PyTorchImportError(ValueError):
    """The TorchScript module cannot be imported: ``input_infos`` does not match the graph,
    or a node's operands are inconsistent (shapes, dtypes, constant operands).

    The message names the node (its operator and output) and says what was expected and
    found.
    """


__all__ = ["OpNotImplemented", "PyTorchImportError"]

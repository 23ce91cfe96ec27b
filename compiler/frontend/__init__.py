"""Importers from other model formats into Relay: ``relay.frontend.from_onnx``.

Compiler layer. Importing this package does not import any optional dependency; each
importer loads its format's package when it is called.
"""

from compiler.frontend.onnx import from_onnx
from compiler.frontend.onnx_errors import OnnxImportError, OpNotImplemented

__all__ = ["OnnxImportError", "OpNotImplemented", "from_onnx"]

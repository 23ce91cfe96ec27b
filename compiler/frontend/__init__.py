"""Importers from other model formats into Relay: ``relay.frontend.from_onnx`` and
``relay.frontend.from_pytorch``.

Compiler layer. Importing this package does not import any optional dependency; each
importer loads its format's package when it is called.
"""

from compiler.frontend.onnx import from_onnx
from compiler.frontend.onnx_errors import OnnxImportError, OpNotImplemented
from compiler.frontend.pytorch import from_pytorch
from compiler.frontend.pytorch_errors import PyTorchImportError

__all__ = ["OnnxImportError", "OpNotImplemented", "PyTorchImportError", "from_onnx", "from_pytorch"]

"""The table of ONNX operator converters, filled by the ``onnx_ops_*`` modules.

Compiler layer (``compiler.frontend``); does not import ``onnx``. A converter takes a
:class:`~compiler.frontend.onnx_context.NodeContext` and returns the node's output values
(one :class:`~compiler.frontend.onnx_context.Value` or a sequence, one per output).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from compiler.frontend.onnx_context import NodeContext, Value

Converter = Callable[[NodeContext], "Value | Sequence[Value]"]

#: Converters by ONNX operator type (the default ``ai.onnx`` domain).
CONVERTERS: dict[str, Converter] = {}

_MODULES = (
    "compiler.frontend.onnx_ops_math",
    "compiler.frontend.onnx_ops_tensor",
    "compiler.frontend.onnx_ops_nn",
    "compiler.frontend.onnx_ops_reduce",
    "compiler.frontend.onnx_ops_resize",
    "compiler.frontend.onnx_ops_index",
    "compiler.frontend.onnx_ops_activation",
    "compiler.frontend.onnx_ops_scatter",
    "compiler.frontend.onnx_ops_rnn",
    "compiler.frontend.onnx_ops_quant",
    "compiler.frontend.onnx_ops_sample",
    "compiler.frontend.onnx_ops_control",
    "compiler.frontend.onnx_ops_vision",
)


def register(*op_types: str) -> Callable[[Converter], Converter]:
    """Decorator: register a converter for each of ``op_types`` (each type once)."""

    def decorate(func: Converter) -> Converter:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"an ONNX converter for {op_type} is already registered")
            CONVERTERS[op_type] = func
        return func

    return decorate


def converters() -> dict[str, Converter]:
    """Every registered converter (the ``onnx_ops_*`` modules are imported on first use)."""
    for module in _MODULES:
        importlib.import_module(module)
    return CONVERTERS


def supported_ops() -> list[str]:
    """The ONNX operator types the frontend converts, sorted."""
    return sorted(converters())

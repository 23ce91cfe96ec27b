"""``relay.frontend.from_onnx``: import an ONNX model as a Relay module and its parameters.

Compiler layer (``compiler.frontend``). The ``onnx`` package is an optional dependency
(the ``onnx`` extra): it is imported when :func:`from_onnx` is called, never when this
module is, so ``from compiler import relay`` works without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from compiler.ir.module import IRModule


def _require_onnx() -> None:
    try:
        importlib.import_module("onnx")
    except ImportError:
        raise ImportError(
            "relay.frontend.from_onnx needs the onnx package; install it with "
            "`pip install 'relayvm[onnx]'` (or `pip install onnx`)"
        ) from None


def from_onnx(
    model: Any,
    shape: Mapping[str, Sequence[Any]] | None = None,
    dtype: str | Mapping[str, str] = "float32",
    opset: int | None = None,
    freeze_params: bool = True,
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert an ONNX model to a Relay module, like TVM's ``relay.frontend.from_onnx``.

    Parameters
    ----------
    model : onnx.ModelProto, str, os.PathLike or bytes
        The model, a path to a ``.onnx`` file, or its serialized bytes. External tensor
        data is read only for a path, and only from files inside the model's directory.
    shape : dict of str to sequence, optional
        Shapes for graph inputs, overriding the model's. A dimension given as ``None``,
        ``-1``, ``"?"``, any string or ``relay.Any()`` is known only at run time.
    dtype : str or dict of str to str
        The dtype of inputs whose element type the model leaves undefined (a dict gives
        per-input dtypes and overrides the model's).
    opset : int, optional
        The ``ai.onnx`` opset whose operator semantics to apply; defaults to the model's.
    freeze_params : bool
        ONNX lets a graph input have an initializer as its default value. With ``True``
        (the default) such an input is a parameter with that value; with ``False`` it
        stays an input of ``main`` to be supplied at run time.

    Returns
    -------
    (IRModule, dict of str to numpy.ndarray)
        ``main`` takes the graph inputs, then one parameter per initializer it uses
        (named as in the model); ``params`` holds those initializers' values. Bind them
        with ``relay.vm.compile(mod, params=params)`` or
        ``relay.create_executor(..., params=params)``; they are read-only arrays, which
        compiling binds without copying them (``.copy()`` one to change it). A single
        graph output is returned as is; several as a tuple. Initializers read at import
        time only (target shapes, axes, pads) do not become parameters.

    Raises
    ------
    ImportError
        If the ``onnx`` package is not installed.
    OnnxImportError
        (a ``ValueError``) If the model is malformed, fails ``onnx.checker``, refers to
        external data outside its directory, or is inconsistent; the message names the
        node, tensor or file.
    OpNotImplemented
        (a ``NotImplementedError``) If the model uses operators the frontend does not
        support (all of them are listed, with their nodes) or unsupported operator modes.
    """
    _require_onnx()
    from compiler.frontend.onnx_graph import (  # deferred: onnx, an optional extra
        GraphImporter,
        model_opset,
    )
    from compiler.frontend.onnx_load import load_model  # deferred: onnx, an optional extra

    proto = load_model(model)
    version = model_opset(proto) if opset is None else int(opset)
    importer = GraphImporter(proto.graph, version, shape, dtype, bool(freeze_params))
    return importer.run()

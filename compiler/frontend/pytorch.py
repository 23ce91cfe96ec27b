"""``relay.frontend.from_pytorch``: import a TorchScript module as a Relay module and its
parameters.

Compiler layer (``compiler.frontend``). ``torch`` is an optional dependency: it is imported
when :func:`from_pytorch` is called, never when this module is, so ``from compiler import
relay`` works without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from compiler.ir.module import IRModule


def _require_torch() -> None:
    try:
        importlib.import_module("torch")
    except ImportError:
        raise ImportError(
            "relay.frontend.from_pytorch needs the torch package; install it with "
            "`pip install torch`"
        ) from None


def from_pytorch(
    script_module: Any,
    input_infos: Sequence[tuple[str, Any]],
    custom_convert_map: Mapping[str, Callable[..., Any]] | None = None,
    default_dtype: str = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert a TorchScript module to a Relay module, like TVM's
    ``relay.frontend.from_pytorch``.

    Parameters
    ----------
    script_module : torch.jit.ScriptModule
        A traced (``torch.jit.trace``) or scripted (``torch.jit.script``) module, in
        inference mode (``.eval()``): dropout is dropped and batch norm uses its running
        statistics.
    input_infos : list of (str, shape) or (str, (shape, dtype))
        One entry per input of ``forward``, in order: the name ``main`` gives the input and
        its static shape, with its dtype (``default_dtype`` when omitted).
    custom_convert_map : dict of str to callable, optional
        Converters for operators the frontend lacks (or to override one), keyed by the
        TorchScript kind (``"aten::erfinv"``). Each is called as ``convert(inputs,
        input_types)``: ``inputs`` holds, per operand, a Relay expression for a tensor or
        the Python value (int, float, bool, list, None) of a constant; ``input_types``
        the operands' dtypes (``None`` for non-tensors). It returns a Relay expression, or
        a list/tuple of them for a node with several outputs.
    default_dtype : str
        The dtype of inputs whose entry in ``input_infos`` gives none.

    Returns
    -------
    (IRModule, dict of str to numpy.ndarray)
        ``main`` takes the inputs named in ``input_infos``, then one parameter per weight
        or buffer the graph reads, named by its ``state_dict`` key (``"0.weight"``);
        ``params`` holds their values. Bind them with ``relay.vm.compile(mod,
        params=params)`` or ``relay.create_executor(..., params=params)``. Several outputs
        (a tuple returned by ``forward``) become a Relay tuple.

    Raises
    ------
    ImportError
        If ``torch`` is not installed.
    TypeError
        If ``script_module`` is not a TorchScript module.
    PyTorchImportError
        (a ``ValueError``) If ``input_infos`` does not match ``forward``'s inputs, or a
        node's operands are inconsistent; the message names the node.
    OpNotImplemented
        (a ``NotImplementedError``) If the graph uses operators the frontend does not
        convert and ``custom_convert_map`` does not cover (all of them are listed, with
        their count), or unsupported operator modes.
    """
    _require_torch()
    from compiler.frontend.pytorch_graph import TorchGraphImporter  # deferred: torch, optional

    importer = TorchGraphImporter(
        script_module, input_infos, dict(custom_convert_map or {}), default_dtype
    )
    return importer.run()

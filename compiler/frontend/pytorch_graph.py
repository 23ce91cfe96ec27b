"""Converting a TorchScript graph into a Relay ``main`` function.

Compiler layer (``compiler.frontend``). Imports the optional ``torch`` package, so only
:func:`compiler.frontend.pytorch.from_pytorch` imports this module (at call time).

The module's graph is inlined (submodule calls become their bodies), then its nodes are
converted in order with a plain loop over an explicit stack of blocks: the branch of a
``prim::If`` whose condition is known at import time (``self.training``, ``bias is not
None``, rank checks of scripted modules) is converted in place, so no Python recursion grows
with the graph. Each TorchScript value maps to a typed
:class:`~compiler.frontend.onnx_context.Value` for a tensor, or to the Python value of a
constant, list, tuple, submodule or ``None``. Operators without a converter do not stop the
walk: their outputs are marked unavailable, everything depending on them is skipped, and one
:class:`OpNotImplemented` lists them all at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any as AnyT

import numpy as np
import torch

# Importing the op-family modules registers their converters.
import compiler.frontend.pytorch_ops_nn
import compiler.frontend.pytorch_ops_tensor  # noqa: F401
from compiler.frontend.onnx_context import Value, constant_value
from compiler.frontend.pytorch_errors import OpNotImplemented, PyTorchImportError
from compiler.frontend.pytorch_ops import (
    CONVERTERS,
    ModuleRef,
    TorchNode,
    flatten_output,
)
from compiler.ir.expr import Expr, Function, Var
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.ir.types import normalize_dtype as _normalize_dtype
from compiler.ir.visitor import free_vars

#: Kinds whose blocks are walked for the listing of unsupported operators when they cannot
#: be converted themselves.
_BLOCK_KINDS = ("prim::If", "prim::Loop")
#: Kinds the importer handles itself rather than through a converter.
_BUILTIN = (*_BLOCK_KINDS, "prim::GetAttr", "prim::Constant")


#: Iterations, in all, of the prim::Loop nodes evaluated at import time.
MAX_LOOP_ITERATIONS = 10000


class _Frame:
    """A block being walked: the graph's, a static ``prim::If``'s branch, or one iteration
    of a ``prim::Loop`` body (``owner`` is the If or Loop node)."""

    def __init__(self, nodes: Iterator[AnyT], owner: AnyT, block: AnyT) -> None:
        self.nodes = nodes
        self.owner = owner
        self.block = block
        self.iteration = 0
        self.trips = 0


class _Unavailable:
    """The output of a node that could not be converted (its operator is unsupported)."""


_UNAVAILABLE = _Unavailable()


def _describe(value: AnyT) -> str:
    if isinstance(value, Value):
        return f"tensor {value.dtype}{list(value.shape)}"
    if isinstance(value, ModuleRef):
        return f"module {value.path or 'self'}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse_infos(
    input_infos: Sequence[tuple[str, AnyT]], default_dtype: str
) -> list[tuple[str, tuple[int, ...], str]]:
    if isinstance(input_infos, (str, bytes)) or not isinstance(input_infos, Sequence):
        raise PyTorchImportError(
            f"input_infos must be a list of (name, shape) or (name, (shape, dtype)) pairs, "
            f"found {type(input_infos).__name__}"
        )
    parsed = []
    for position, entry in enumerate(input_infos):
        where = f"input_infos[{position}]"
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise PyTorchImportError(
                f"{where} must be a (name, shape) or (name, (shape, dtype)) pair, found {entry!r}"
            )
        name, spec = entry
        if not isinstance(name, str) or not name:
            raise PyTorchImportError(
                f"{where}: the name must be a non-empty string, found {name!r}"
            )
        dtype = default_dtype
        if (
            isinstance(spec, (tuple, list))
            and len(spec) == 2
            and isinstance(spec[1], (str, np.dtype, torch.dtype))
        ):
            spec, dtype = spec
        if isinstance(dtype, torch.dtype):
            dtype = str(dtype).replace("torch.", "")
        try:
            dims = tuple(int(d) for d in spec)
        except (TypeError, ValueError):
            raise PyTorchImportError(
                f"{where} ({name!r}): the shape must be a sequence of ints, found {spec!r}"
            ) from None
        if any(d < 0 for d in dims):
            raise PyTorchImportError(
                f"{where} ({name!r}): shape {dims} has a negative dimension; the PyTorch "
                "frontend needs static shapes"
            )
        try:
            dtype = _normalize_dtype(str(np.dtype(dtype)) if isinstance(dtype, np.dtype) else dtype)
        except (TypeError, ValueError) as exc:
            raise PyTorchImportError(f"{where} ({name!r}): dtype {dtype!r}: {exc}") from None
        parsed.append((name, dims, dtype))
    names = [name for name, _, _ in parsed]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PyTorchImportError(f"input_infos names {duplicates} more than one input")
    return parsed


class TorchGraphImporter:
    """One conversion of a TorchScript module to a Relay module.

    Parameters
    ----------
    module : torch.jit.ScriptModule
        The traced or scripted module.
    input_infos : sequence
        ``(name, shape)`` or ``(name, (shape, dtype))`` per input of ``forward``.
    custom_convert_map : mapping of str to callable
        User converters by TorchScript kind (see :func:`from_pytorch`).
    default_dtype : str
        The dtype of inputs given without one.
    """

    def __init__(
        self,
        module: AnyT,
        input_infos: Sequence[tuple[str, AnyT]],
        custom_convert_map: Mapping[str, Callable[..., AnyT]],
        default_dtype: str,
    ) -> None:
        if not isinstance(module, torch.jit.ScriptModule):
            raise TypeError(
                "from_pytorch needs a TorchScript module (from torch.jit.trace or "
                f"torch.jit.script), found {type(module).__name__}"
            )
        self.module = module
        self.infos = _parse_infos(input_infos, default_dtype)
        self.custom = dict(custom_convert_map)
        for kind, func in self.custom.items():
            if not callable(func):
                raise TypeError(f"custom_convert_map[{kind!r}] must be callable, found {func!r}")
        self.default_dtype = default_dtype
        self.values: dict[int, AnyT] = {}
        self.inputs: list[Var] = []
        self.params: dict[str, tuple[Var, np.ndarray]] = {}
        self.missing: dict[str, int] = {}
        self.count = 0
        self.iterations = 0

    # --- driver --------------------------------------------------------------------------------

    def run(self) -> tuple[IRModule, dict[str, np.ndarray]]:
        """Convert the graph: ``(module, params)``."""
        try:
            graph = self.module.graph.copy()
        except RuntimeError as exc:
            raise PyTorchImportError(f"the module has no forward graph to convert: {exc}") from None
        torch._C._jit_pass_inline(graph)
        self._bind_inputs(graph)
        stack: list[_Frame] = [_Frame(iter(graph.nodes()), None, None)]
        while stack:
            frame = stack[-1]
            node = next(frame.nodes, None)
            if node is not None:
                inner = self._visit(node)
                if inner is not None:
                    stack.append(inner)
                continue
            stack.pop()
            if frame.owner is None:
                continue
            results = [self.values[v.unique()] for v in frame.block.outputs()]
            if frame.owner.kind() == "prim::If":
                self._store(frame.owner, results)
                continue
            # The end of one iteration of an import-time prim::Loop.
            frame.iteration += 1
            if bool(results[0]) and frame.iteration < frame.trips:
                stack.append(self._loop_iteration(frame, results[1:]))
            else:
                self._store(frame.owner, results[1:])
        if self.missing:
            self._raise_missing()
        return self._finish(graph)

    def _bind_inputs(self, graph: AnyT) -> None:
        graph_inputs = list(graph.inputs())
        self.values[graph_inputs[0].unique()] = ModuleRef(self.module, "")
        tensors = graph_inputs[1:]
        if len(tensors) != len(self.infos):
            names = ", ".join(v.debugName() for v in tensors) or "none"
            raise PyTorchImportError(
                f"input_infos gives {len(self.infos)} input(s) but the module's forward takes "
                f"{len(tensors)} ({names})"
            )
        for value, (name, dims, dtype) in zip(tensors, self.infos):
            var = Var(name, TensorType(dims, dtype))
            self.values[value.unique()] = Value(var, var.type_annotation)
            self.inputs.append(var)

    # --- nodes ---------------------------------------------------------------------------------

    def _visit(self, node: AnyT) -> AnyT:
        """Convert one node; return the block to walk next for a static ``prim::If`` or an
        import-time ``prim::Loop``."""
        self.count += 1
        kind = node.kind()
        args = [self.values.get(v.unique(), _UNAVAILABLE) for v in node.inputs()]
        if any(a is _UNAVAILABLE for a in args):
            # Downstream of an unsupported node: not converted, but still listed if it is
            # unsupported itself.
            if kind not in self.custom and kind not in CONVERTERS and kind not in _BUILTIN:
                self._record(kind, node)
            elif kind in _BLOCK_KINDS:
                self._scan_blocks(node)
            self._store(node, [_UNAVAILABLE] * node.outputsSize())
            return None
        if kind in self.custom:
            self._store(node, self._custom(node, kind, args))
            return None
        if kind == "prim::If":
            condition = args[0]
            if isinstance(condition, Value):
                condition = None if condition.static is None else bool(condition.static)
            if isinstance(condition, (bool, int)):
                block = list(node.blocks())[0 if condition else 1]
                return _Frame(iter(block.nodes()), node, block)
            self._record("prim::If (condition known only at run time)", node)
            return None
        if kind == "prim::Loop":
            return self._loop(node, args)
        if kind in ("prim::GetAttr",):
            self._store(node, [self._get_attr(node, args[0])])
            return None
        if kind == "prim::Constant":
            self._store(node, [self._constant(node)])
            return None
        converter = CONVERTERS.get(kind)
        if converter is None:
            self._record(kind, node)
            return None
        context = TorchNode(node, args, self.count, self.default_dtype)
        try:
            produced = converter(context)
        except (IndexError, KeyError, TypeError, AttributeError) as exc:
            if self.missing:
                # Likely a consequence of an unsupported node before it (a list it should
                # have filled); the listing of those is the error to report.
                self._store(node, [_UNAVAILABLE] * node.outputsSize())
                return None
            shown = ", ".join(_describe(a) for a in args)
            raise context.error(f"cannot convert operands ({shown}): {exc}") from None
        if node.outputsSize() == 1:
            self._store(node, [produced])
        else:
            self._store(node, list(produced))
        return None

    def _loop(self, node: AnyT, args: list[AnyT]) -> _Frame | None:
        """Start an import-time ``prim::Loop``: one whose trip count and condition are
        Python values (loops over shape lists, list comprehensions of scripted code)."""
        trips, condition, carried = args[0], args[1], args[2:]
        if isinstance(trips, Value) or isinstance(condition, Value):
            self._record("prim::Loop (trip count or condition known only at run time)", node)
            return None
        if not condition or trips <= 0:
            self._store(node, carried)
            return None
        frame = _Frame(iter(()), node, next(iter(node.blocks())))
        frame.trips = int(trips)
        return self._loop_iteration(frame, carried)

    def _loop_iteration(self, frame: _Frame, carried: list[AnyT]) -> _Frame:
        self.iterations += 1
        if self.iterations > MAX_LOOP_ITERATIONS:
            raise OpNotImplemented(
                f"the model's prim::Loop nodes run more than {MAX_LOOP_ITERATIONS} iterations "
                "in all at import time; the PyTorch frontend evaluates loops only over "
                "values known at import time, and not this many"
            )
        inputs = list(frame.block.inputs())
        for value, bound in zip(inputs, [frame.iteration, *carried]):
            self.values[value.unique()] = bound
        frame.nodes = iter(frame.block.nodes())
        return frame

    def _record(self, kind: str, node: AnyT) -> None:
        """Note an unsupported node (and those in its blocks); its outputs are unavailable."""
        self.missing[kind] = self.missing.get(kind, 0) + 1
        self._scan_blocks(node)
        self._store(node, [_UNAVAILABLE] * node.outputsSize())

    def _scan_blocks(self, node: AnyT) -> None:
        """Note the unsupported operators inside the blocks of a node not converted."""
        pending = list(node.blocks())
        while pending:
            for inner in pending.pop().nodes():
                inner_kind = inner.kind()
                pending.extend(inner.blocks())
                if inner_kind in CONVERTERS or inner_kind in self.custom or inner_kind in _BUILTIN:
                    continue
                self.missing[inner_kind] = self.missing.get(inner_kind, 0) + 1

    def _store(self, node: AnyT, results: Sequence[AnyT]) -> None:
        outputs = list(node.outputs())
        if len(results) != len(outputs):
            raise PyTorchImportError(
                f"node {node.kind()}: the converter gave {len(results)} result(s) for "
                f"{len(outputs)} output(s)"
            )
        for value, result in zip(outputs, results):
            self.values[value.unique()] = result

    def _raise_missing(self) -> None:
        parts = [
            f"{kind} (x{count})" if count > 1 else kind
            for kind, count in sorted(self.missing.items())
        ]
        plural = "s" if len(parts) > 1 else ""
        raise OpNotImplemented(
            f"the PyTorch frontend does not support {len(parts)} operator{plural} used by this "
            f"model: {', '.join(parts)}; convert them with custom_convert_map"
        )

    def _constant(self, node: AnyT) -> AnyT:
        output = node.output()
        value = output.toIValue()
        if isinstance(value, torch.Tensor):
            return constant_value(value.detach().cpu().numpy())
        return value

    def _get_attr(self, node: AnyT, owner: AnyT) -> AnyT:
        name = node.s("name")
        if not isinstance(owner, ModuleRef):
            raise PyTorchImportError(
                f"node prim::GetAttr[name={name!r}]: its operand is not a module"
            )
        path = f"{owner.path}.{name}" if owner.path else name
        try:
            attr = getattr(owner.obj, name)
        except AttributeError:
            raise PyTorchImportError(
                f"node prim::GetAttr: the module at {owner.path or 'the top'!r} has no "
                f"attribute {name!r}"
            ) from None
        if isinstance(attr, torch.Tensor):
            return self._param(path, attr)
        if isinstance(attr, (torch.nn.Module, torch.jit.ScriptModule)):
            return ModuleRef(attr, path)
        return attr

    def _param(self, path: str, tensor: AnyT) -> Value:
        if path not in self.params:
            array = tensor.detach().cpu().numpy()
            array = np.array(array, order="C")
            var = Var(path, TensorType(array.shape, array.dtype.name))
            self.params[path] = (var, array)
        var, array = self.params[path]
        return Value(var, var.type_annotation, array)

    def _custom(self, node: AnyT, kind: str, args: list[AnyT]) -> list[AnyT]:
        inputs = [a.expr if isinstance(a, Value) else a for a in args]
        types = [a.dtype if isinstance(a, Value) else None for a in args]
        result = self.custom[kind](inputs, types)
        results = (
            list(result)
            if isinstance(result, (list, tuple)) and node.outputsSize() != 1
            else [result]
        )
        context = TorchNode(node, args, self.count, self.default_dtype)
        return [context.typed(r) if isinstance(r, Expr) else r for r in results]

    # --- the main function ---------------------------------------------------------------------

    def _finish(self, graph: AnyT) -> tuple[IRModule, dict[str, np.ndarray]]:
        outputs = [self.values[v.unique()] for v in graph.outputs()]
        body = flatten_output(outputs[0] if len(outputs) == 1 else tuple(outputs))
        used = set(free_vars(body))
        params = [var for var, _ in self.params.values() if var in used]
        values = {var.name_hint: array for var, array in self.params.values() if var in used}
        return IRModule({"main": Function([*self.inputs, *params], body)}), values

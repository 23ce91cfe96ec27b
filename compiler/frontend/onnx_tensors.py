"""ONNX tensors, element types and node attributes as numpy arrays and plain Python values.

Compiler layer (``compiler.frontend``). Imports the optional ``onnx`` package, so only
:func:`compiler.frontend.onnx.from_onnx` imports this module (at call time). The operator
converters never see protobuf objects: they get the plain values made here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.frontend.onnx_context import SubgraphAttribute, UnsupportedAttribute
from compiler.frontend.onnx_dtypes import relay_dtype
from compiler.frontend.onnx_errors import OnnxImportError, OpNotImplemented


def tensor_to_array(tensor: onnx.TensorProto, what: str) -> np.ndarray:
    """A tensor's value (its data already in memory) as a read-only numpy array of a Relay
    dtype, which owns its memory."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise OnnxImportError(
            f"{what} still refers to external data; it should have been loaded with the model"
        )
    dtype = relay_dtype(tensor.data_type, what)
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # protobuf/numpy reasons vary; the tensor is malformed either way
        raise OnnxImportError(f"cannot read the data of {what}: {exc}") from None
    owned = np.array(array, dtype=dtype, order="C")
    # Read-only, the array becomes a constant's data as it is: binding ResNet-50's 94 MB of
    # initializers copied every one of them again (0.14 s of a warm start).
    owned.flags.writeable = False
    return owned


def decode_attributes(node: onnx.NodeProto, what: str) -> dict[str, Any]:
    """A node's attributes as plain values: int, float, str, lists of those, numpy arrays.

    Strings are decoded as UTF-8; tensor attributes become arrays; a graph attribute
    becomes a :class:`SubgraphAttribute` holding the graph (a list of graphs is refused
    when read: no supported operator takes one).
    """
    out: dict[str, Any] = {}
    kinds = onnx.AttributeProto
    for attr in node.attribute:
        where = f"attribute {attr.name!r} of {what}"
        if attr.ref_attr_name:
            raise OpNotImplemented(
                f"{where} refers to a function attribute ({attr.ref_attr_name!r}); only "
                "main-graph nodes with literal attributes are supported"
            )
        kind = attr.type
        if kind == kinds.INT:
            out[attr.name] = int(attr.i)
        elif kind == kinds.FLOAT:
            out[attr.name] = float(attr.f)
        elif kind == kinds.STRING:
            out[attr.name] = _text(attr.s, where)
        elif kind == kinds.INTS:
            out[attr.name] = [int(v) for v in attr.ints]
        elif kind == kinds.FLOATS:
            out[attr.name] = [float(v) for v in attr.floats]
        elif kind == kinds.STRINGS:
            out[attr.name] = [_text(v, where) for v in attr.strings]
        elif kind == kinds.TENSOR:
            out[attr.name] = tensor_to_array(attr.t, f"the tensor in {where}")
        elif kind == kinds.GRAPH:
            out[attr.name] = SubgraphAttribute(attr.name, attr.g)
        else:
            # Sparse tensors, type protos and tensor lists: no supported operator takes them.
            out[attr.name] = UnsupportedAttribute(attr.name, kinds.AttributeType.Name(kind))
    return out


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise OnnxImportError(f"{where} is not valid UTF-8 text") from None


def iter_tensors(graph: onnx.GraphProto) -> Iterator[tuple[onnx.TensorProto, str]]:
    """Every tensor stored in ``graph`` and its subgraphs, with a description of where it is.

    Initializers, sparse initializers' values and indices, and tensor attributes of nodes
    (``Constant``'s ``value``, ``ConstantOfShape``'s ``value``), walked with an explicit
    stack so that deeply nested subgraphs cannot exhaust Python's recursion limit.
    """
    stack = [graph]
    while stack:
        g = stack.pop()
        for tensor in g.initializer:
            yield tensor, f"initializer {tensor.name!r}"
        for sparse in g.sparse_initializer:
            yield sparse.values, f"sparse initializer {sparse.values.name!r}"
            yield sparse.indices, f"the indices of sparse initializer {sparse.values.name!r}"
        for node in g.node:
            label = f"node {node.name!r} ({node.op_type})" if node.name else node.op_type
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t, f"attribute {attr.name!r} of {label}"
                for t in attr.tensors:
                    yield t, f"attribute {attr.name!r} of {label}"
                if attr.HasField("g"):
                    stack.append(attr.g)
                stack.extend(attr.graphs)

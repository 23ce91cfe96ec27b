"""Shared helpers for the ONNX frontend tests: build small models with ``onnx.helper``,
import them, run them on the reference interpreter (or the VM) and on onnxruntime.

Test modules call ``pytest.importorskip`` for ``onnx`` (and for ``onnxruntime`` when they
compare with it only) before importing this module; :func:`run_ort` imports it when called;
tests that need onnxruntime are marked :data:`needs_ort`, and
:func:`check_against_reference` compares with onnx's own numpy reference evaluator, so that
CI without onnxruntime still checks the cases where the two agree.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import relay

#: onnxruntime reads models up to this IR version; opsets 7-18 all fit in IR version 8.
IR_VERSION = 8

_ONNX_TYPES = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "int8": TensorProto.INT8,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
}


def info(name: str, dtype: str, shape: Sequence[object] | None) -> onnx.ValueInfoProto:
    """A tensor value description (``shape=None``: rank unknown)."""
    return helper.make_tensor_value_info(name, _ONNX_TYPES[dtype], shape)


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[str, Sequence[object]]],
    outputs: Sequence[str] | Mapping[str, tuple[str, Sequence[object] | None]],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    """A model: ``inputs`` maps names to (dtype, shape); ``outputs`` are names (their types
    filled in by ONNX shape inference) or a mapping of names to (dtype, shape)."""
    if isinstance(outputs, Mapping):
        out_infos = [info(name, dtype, shape) for name, (dtype, shape) in outputs.items()]
    else:
        out_infos = [helper.make_empty_tensor_value_info(name) for name in outputs]
    graph = helper.make_graph(
        list(nodes),
        "test",
        [info(name, dtype, shape) for name, (dtype, shape) in inputs.items()],
        out_infos,
        initializer=[numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION
    )
    if isinstance(outputs, Mapping):
        return proto
    return onnx.shape_inference.infer_shapes(proto)


def run_ort(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs for ``feeds`` (the oracle)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, dict(feeds))


def as_list(result: object) -> list[np.ndarray]:
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else [np.asarray(result)]


def run_relay(
    proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray], **kwargs: object
) -> list[np.ndarray]:
    """The imported model's outputs on the reference interpreter."""
    mod, params = relay.frontend.from_onnx(proto, **kwargs)
    func = relay.create_executor("debug", mod, params=params).evaluate()
    return as_list(func(**feeds))


def run_vm(
    proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray], **kwargs: object
) -> list[np.ndarray]:
    """The imported model's outputs on the VM (static input shapes taken from ``feeds``)."""
    import vm

    shapes = {name: value.shape for name, value in feeds.items()}
    mod, params = relay.frontend.from_onnx(proto, shape=shapes, **kwargs)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    return as_list(machine.invoke("main", **feeds))


def assert_outputs_close(
    got: Sequence[np.ndarray], expected: Sequence[np.ndarray], rtol: float, atol: float
) -> None:
    assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        assert g.shape == e.shape, f"output {i}: shape {g.shape}, expected {e.shape}"
        assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype}, expected {e.dtype}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {i}")


def check_against_ort(
    proto: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-6,
    **kwargs: object,
) -> list[np.ndarray]:
    """Import ``proto``, run it on the reference interpreter and compare with onnxruntime."""
    expected = run_ort(proto, feeds)
    got = run_relay(proto, feeds, **kwargs)
    assert_outputs_close(got, expected, rtol, atol)
    return got


def single_op(
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, object] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    input_order: Sequence[str] | None = None,
    outputs: int = 1,
    opset: int = 17,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model with one ``op_type`` node: ``inputs`` become graph inputs (fed with their
    values), ``constants`` initializers; ``input_order`` lists the node's input names
    (``""`` for an omitted optional one), default inputs then constants."""
    order = list(input_order) if input_order is not None else [*inputs, *(constants or {})]
    out_names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op_type, order, out_names, name=f"{op_type.lower()}_0", **(attrs or {}))
    proto = model(
        [node],
        {name: (value.dtype.name, value.shape) for name, value in inputs.items()},
        out_names,
        constants,
        opset,
    )
    return proto, dict(inputs)


#: Whether onnxruntime is installed (tests that need it as the oracle are skipped without it).
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None

needs_ort = pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")


def run_reference(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of onnx's own numpy reference evaluator (the oracle without onnxruntime)."""
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(r) for r in ReferenceEvaluator(proto).run(None, dict(feeds))]


def check_against_reference(
    proto: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-6,
    **kwargs: object,
) -> list[np.ndarray]:
    """Like :func:`check_against_ort`, with onnx's reference evaluator as the oracle."""
    expected = run_reference(proto, feeds)
    got = run_relay(proto, feeds, **kwargs)
    assert_outputs_close(got, expected, rtol, atol)
    return got

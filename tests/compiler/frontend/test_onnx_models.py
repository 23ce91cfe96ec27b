"""Whole models through from_onnx (returns): an MLP and a small CNN against onnxruntime on
the reference interpreter and the VM, the (module, params) contract, the API's arguments,
and a graph far deeper than Python's recursion limit.

VM runs compile numba kernels (about a second each when cold), so only a few models run
on the VM.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx
from onnx import helper

from compiler import relay
from compiler.backend.codegen import CodegenError
from tests.compiler.frontend._onnx_helpers import (
    assert_outputs_close,
    check_against_ort,
    model,
    run_ort,
    run_relay,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(2024)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def mlp() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"], name="fc1", transB=1),
        helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
        helper.make_node("MatMul", ["a1", "w2"], ["h2"], name="fc2"),
        helper.make_node("Add", ["h2", "b2"], ["h3"], name="bias2"),
        helper.make_node("Softmax", ["h3"], ["y"], name="softmax", axis=-1),
    ]
    weights = {"w1": randn(16, 8), "b1": randn(16), "w2": randn(16, 4), "b2": randn(4)}
    return model(nodes, {"x": ("float32", ["batch", 8])}, ["y"], weights)


def cnn() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c1", "g", "beta", "mu", "var"], ["n1"], name="bn1"
        ),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node(
            "MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("Conv", ["p1", "cw2"], ["c2"], name="conv2", strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    weights = {
        "cw": randn(4, 3, 3, 3),
        "cb": randn(4),
        "g": randn(4),
        "beta": randn(4),
        "mu": randn(4),
        "var": np.abs(randn(4)) + 0.5,
        "cw2": randn(6, 4, 3, 3),
        "fw": randn(5, 6),
        "fb": randn(5),
    }
    return model(nodes, {"x": ("float32", ["N", 3, 12, 12])}, ["y"], weights)


# --- end to end ------------------------------------------------------------------------------


def test_mlp_matches_onnxruntime_on_the_interpreter_and_the_vm():
    proto = mlp()
    feeds = {"x": randn(3, 8)}
    expected = run_ort(proto, feeds)
    assert_outputs_close(run_relay(proto, feeds), expected, rtol=1e-5, atol=1e-6)
    assert_outputs_close(run_vm(proto, feeds), expected, rtol=1e-5, atol=1e-6)


def test_mlp_module_takes_inputs_then_initializers_and_returns_their_values():
    mod, params = relay.frontend.from_onnx(mlp())
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["x", "w1", "b1", "w2", "b2"]
    assert str(main.params[0].type_annotation) == "Tensor[(?, 8), float32]"
    assert sorted(params) == ["b1", "b2", "w1", "w2"]
    assert params["w1"].shape == (16, 8) and params["w1"].dtype == np.float32
    # The printed module parses back to the same program.
    assert relay.structural_equal(relay.fromtext(mod.astext()), mod)


def test_cnn_matches_onnxruntime_on_the_interpreter():
    proto = cnn()
    check_against_ort(proto, {"x": randn(2, 3, 12, 12)}, rtol=1e-4, atol=1e-5)


def test_cnn_on_the_vm_when_its_kernels_exist():
    proto = cnn()
    feeds = {"x": randn(1, 3, 12, 12)}
    mod, params = relay.frontend.from_onnx(proto, shape={"x": (1, 3, 12, 12)})
    mod = relay.transform.SimplifyInference()(mod)
    try:
        exe = relay.vm.compile(mod, params=params)
    except CodegenError as exc:
        if "unknown op" not in str(exc):
            raise
        pytest.skip(f"the VM kernel library lacks an operator of this CNN yet: {exc}")
    import vm

    got = vm.VirtualMachine(exe).invoke("main", **feeds)
    assert_outputs_close([np.asarray(got)], run_ort(proto, feeds), rtol=1e-4, atol=1e-5)


def test_attention_block_on_the_vm():
    # Batched MatMul, Transpose, Reshape, Slice, Gather and Concat in one VM program.
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["attn"], axis=-1),
        helper.make_node("MatMul", ["attn", "x"], ["ctx"]),
        helper.make_node("Slice", ["ctx", "s0", "s1", "ax"], ["head"]),
        helper.make_node("Gather", ["x", "idx"], ["rows"], axis=1),
        helper.make_node("Concat", ["head", "rows"], ["joined"], axis=1),
        helper.make_node("Reshape", ["joined", "shape"], ["y"]),
    ]
    consts = {
        "wq": randn(6, 6),
        "wk": randn(6, 6),
        "s0": np.array([1], "int64"),
        "s1": np.array([3], "int64"),
        "ax": np.array([1], "int64"),
        "idx": np.array([0, -1], "int64"),
        "shape": np.array([0, -1], "int64"),
    }
    proto = model(nodes, {"x": ("float32", [2, 4, 6])}, ["y"], consts)
    feeds = {"x": randn(2, 4, 6)}
    expected = run_ort(proto, feeds)
    assert_outputs_close(run_relay(proto, feeds), expected, rtol=1e-5, atol=1e-5)
    assert_outputs_close(run_vm(proto, feeds), expected, rtol=1e-5, atol=1e-5)


# --- the API ---------------------------------------------------------------------------------


def test_model_may_be_given_as_a_path_or_as_bytes(tmp_path):
    proto = mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save_model(proto, path)
    feeds = {"x": randn(2, 8)}
    expected = run_ort(proto, feeds)
    for given in (path, str(path), proto.SerializeToString()):
        assert_outputs_close(run_relay(given, feeds), expected, rtol=1e-5, atol=1e-6)


def test_several_outputs_become_a_tuple():
    nodes = [
        helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
        helper.make_node("Mul", ["a", "b"], ["c"]),
    ]
    outputs = {"c": ("float32", [2, 2]), "a": ("float32", [2, 2]), "x": ("float32", [2, 4])}
    proto = model(nodes, {"x": ("float32", [2, 4])}, outputs, opset=18)
    got = check_against_ort(proto, {"x": randn(2, 4)})
    assert len(got) == 3


def test_initializer_listed_as_graph_input_is_frozen_unless_asked_not_to():
    node = helper.make_node("Add", ["x", "bias"], ["y"])
    bias = np.arange(3, dtype="float32")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("bias", onnx.TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
        initializer=[onnx.numpy_helper.from_array(bias, "bias")],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = randn(3)

    mod, params = relay.frontend.from_onnx(proto)
    assert [p.name_hint for p in mod["main"].params] == ["x", "bias"]
    assert list(params) == ["bias"]
    func = relay.create_executor("debug", mod, params=params).evaluate()
    np.testing.assert_allclose(func(x), x + bias)

    mod, params = relay.frontend.from_onnx(proto, freeze_params=False)
    assert [p.name_hint for p in mod["main"].params] == ["x", "bias"]
    assert params == {}
    other = np.full(3, 10.0, dtype="float32")
    np.testing.assert_allclose(relay.create_executor("debug", mod).evaluate()(x, other), x + other)


def test_shape_and_dtype_arguments_override_the_model():
    proto, _ = single_op("Relu", {"x": randn(2, 3)})
    mod, _ = relay.frontend.from_onnx(proto, shape={"x": (None, "?")})
    assert str(mod["main"].params[0].type_annotation) == "Tensor[(?, ?), float32]"
    mod, _ = relay.frontend.from_onnx(proto, shape={"x": (4, 3)}, dtype={"x": "float64"})
    assert str(mod["main"].params[0].type_annotation) == "Tensor[(4, 3), float64]"


def test_opset_argument_overrides_the_models_opset():
    x = randn(2, 3, 4)
    proto, feeds = single_op("Softmax", {"x": x}, {"axis": 1}, opset=13)
    per_axis = run_relay(proto, feeds)[0]
    as_matrix = run_relay(proto, feeds, opset=11)[0]
    np.testing.assert_allclose(per_axis.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(as_matrix.reshape(2, -1).sum(axis=1), 1.0, rtol=1e-5)


def test_a_graph_deeper_than_the_recursion_limit_imports_prints_and_runs():
    depth = 3 * sys.getrecursionlimit()
    nodes = []
    previous = "x"
    for i in range(depth):
        op = "Neg" if i % 2 else "Abs"
        nodes.append(helper.make_node(op, [previous], [f"v{i}"], name=f"n{i}"))
        previous = f"v{i}"
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    proto = model(nodes, {"x": ("float32", [4])}, {"y": ("float32", [4])})
    mod, params = relay.frontend.from_onnx(proto)
    assert mod.astext().count("negative(") == depth // 2
    x = randn(4)
    got = relay.create_executor("debug", mod, params=params).evaluate()(x)
    np.testing.assert_allclose(got, -np.abs(x))


def test_importing_relay_does_not_import_onnx():
    code = (
        "import sys\n"
        "import compiler\n"
        "from compiler import relay\n"
        "relay.frontend.from_onnx\n"
        "print('onnx' in sys.modules, 'onnxruntime' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]

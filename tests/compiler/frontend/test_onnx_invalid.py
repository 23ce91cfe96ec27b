"""Models from_onnx refuses, with messages that name the node, tensor or file:

- malformed: bytes that are not an ONNX model, wrong argument kinds, missing files;
- invalid: models onnx.checker rejects, inconsistent models, bad shape=/dtype= arguments;
- unsupported: operators (every one listed at once), operator modes and element types;
- unsafe external data: absolute paths, '..', symlinks out of the model's directory,
  missing files, lengths and offsets that do not fit, external data without a directory.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler import relay
from compiler.frontend import OnnxImportError, OpNotImplemented
from tests.compiler.frontend._onnx_helpers import IR_VERSION, model, run_relay, single_op

X = np.arange(6, dtype="float32").reshape(2, 3)


def graph_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION
    )


def vinfo(name, shape=(2, 3), elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


# --- malformed ---------------------------------------------------------------------------------


def test_bytes_that_are_not_a_model_are_rejected():
    with pytest.raises(OnnxImportError, match="cannot parse the given bytes as an ONNX model"):
        relay.frontend.from_onnx(b"\x08\x01\x12\x03abc\xff\xff\xff")
    # Empty bytes decode (every protobuf field is optional) but are no model.
    with pytest.raises(OnnxImportError, match="invalid: The model does not have an ir_version"):
        relay.frontend.from_onnx(b"")


def test_a_file_that_is_not_a_model_is_named(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff" * 10)
    with pytest.raises(OnnxImportError, match=r"cannot parse file '.*junk\.onnx'"):
        relay.frontend.from_onnx(path)


def test_an_argument_of_the_wrong_kind_is_a_type_error():
    with pytest.raises(TypeError, match=r"onnx\.ModelProto, a path .* got int"):
        relay.frontend.from_onnx(42)


def test_a_missing_file_is_reported_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothere\.onnx"):
        relay.frontend.from_onnx(tmp_path / "nothere.onnx")


# --- invalid -----------------------------------------------------------------------------------


def test_checker_errors_name_the_node():
    proto = graph_model(
        [helper.make_node("Relu", ["x", "x"], ["y"], name="bad_relu")], [vinfo("x")], [vinfo("y")]
    )
    with pytest.raises(OnnxImportError, match=r"invalid at node 'bad_relu' \(Relu\).*input size"):
        relay.frontend.from_onnx(proto)


def test_checker_errors_about_graph_order_name_the_node():
    nodes = [
        helper.make_node("Relu", ["t"], ["y"], name="late"),
        helper.make_node("Neg", ["x"], ["t"], name="early"),
    ]
    proto = graph_model(nodes, [vinfo("x")], [vinfo("y")])
    with pytest.raises(OnnxImportError, match=r"node 'late' \(Relu\).*topologically sorted"):
        relay.frontend.from_onnx(proto)


def test_operand_types_that_relay_rejects_name_the_node():
    nodes = [helper.make_node("Add", ["x", "i"], ["y"], name="mixed")]
    proto = graph_model(nodes, [vinfo("x"), vinfo("i", elem=TensorProto.INT64)], [vinfo("y")])
    with pytest.raises(OnnxImportError, match=r"node 'mixed' \(Add\): cannot apply add"):
        relay.frontend.from_onnx(proto)


def test_shapes_that_do_not_broadcast_name_the_node():
    proto, _ = single_op("Add", {"a": np.zeros((2, 3), "float32"), "b": np.zeros(3, "float32")})
    with pytest.raises(OnnxImportError, match=r"node 'add_0' \(Add\)"):
        relay.frontend.from_onnx(proto, shape={"a": (2, 3), "b": (4,)})


def test_out_of_range_constant_gather_index_names_the_node():
    proto, _ = single_op("Gather", {"x": X}, constants={"i": np.array([5], "int64")})
    with pytest.raises(OnnxImportError, match=r"gather_0.*index 5 is out of range for axis 0"):
        relay.frontend.from_onnx(proto)


def test_shape_for_an_unknown_input_lists_the_real_inputs():
    proto, _ = single_op("Relu", {"x": X})
    with pytest.raises(OnnxImportError, match=r"'y'.*not an input.*inputs are 'x'"):
        relay.frontend.from_onnx(proto, shape={"y": (2, 3)})


def test_an_impossible_dimension_in_shape_is_named():
    proto, _ = single_op("Relu", {"x": X})
    with pytest.raises(OnnxImportError, match=r"shape= for graph input 'x'.*-5"):
        relay.frontend.from_onnx(proto, shape={"x": (2, -5)})


def test_dtype_for_an_unknown_input_is_rejected():
    proto, _ = single_op("Relu", {"x": X})
    with pytest.raises(OnnxImportError, match=r"dtype= names 'z'"):
        relay.frontend.from_onnx(proto, dtype={"z": "float64"})


# --- unsupported -------------------------------------------------------------------------------


def test_every_unsupported_operator_is_listed_with_its_nodes():
    nodes = [
        helper.make_node("Unique", ["x"], ["nz1"], name="tf_a"),
        helper.make_node("Multinomial", ["x"], ["vals"], name="draw"),
        helper.make_node("Unique", ["x"], ["nz2"], name="tf_b"),
        helper.make_node("Fused", ["x"], ["f"], name="custom", domain="com.example"),
        helper.make_node("Relu", ["x"], ["y"], name="fine"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [vinfo("x")],
        [
            vinfo("y"),
            vinfo("vals"),
            helper.make_tensor_value_info("nz1", TensorProto.INT64, [2, "n"]),
        ],
        initializer=[numpy_helper.from_array(np.array([1], "int64"), "k")],
    )
    proto = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
        ir_version=IR_VERSION,
    )
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_onnx(proto)
    message = str(info.value)
    assert "3 operator types" in message
    assert "Unique (nodes 'tf_a', 'tf_b')" in message
    assert "Multinomial (node 'draw')" in message
    assert "com.example.Fused (node 'custom')" in message
    assert "Relu" not in message


def test_a_static_operand_computed_at_run_time_is_unsupported():
    feeds = {"x": X, "p": np.array([0, 1, 0, 1], "int64")}
    proto, _ = single_op("Pad", feeds)
    with pytest.raises(OpNotImplemented, match=r"pad_0.*input 1 \(pads, 'p'\) must be known"):
        relay.frontend.from_onnx(proto)


def test_same_padding_on_a_dynamic_image_asks_for_static_shapes():
    x = np.zeros((1, 2, 5, 5), "float32")
    proto, _ = single_op(
        "Conv", {"x": x}, {"auto_pad": "SAME_UPPER"}, {"w": np.zeros((3, 2, 3, 3), "float32")}
    )
    with pytest.raises(OpNotImplemented, match=r"conv_0.*spatial shape \(\?, \?\) has dim"):
        relay.frontend.from_onnx(proto, shape={"x": (1, 2, None, None)})


def test_unsupported_operator_modes_are_named():
    scales = {"roi": np.zeros(0, "float32"), "s": np.array([1, 1, 0.5, 0.5], "float32")}
    proto, _ = single_op(
        "Resize", {"x": np.zeros((1, 1, 2, 2), "float32")}, {"mode": "linear", "antialias": 1},
        scales, opset=18,
    )  # fmt: skip
    with pytest.raises(OpNotImplemented, match=r"resize_0.*antialias=1 is not supported"):
        relay.frontend.from_onnx(proto)
    proto, _ = single_op("Pad", {"x": X}, {"mode": "wrap"}, {"p": np.zeros(4, "int64")}, opset=19)
    with pytest.raises(OpNotImplemented, match=r"attribute mode='wrap' is not supported"):
        relay.frontend.from_onnx(proto)


def test_unsupported_element_types_are_named():
    proto = graph_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [vinfo("x", elem=TensorProto.BFLOAT16)],
        [vinfo("y", elem=TensorProto.BFLOAT16)],
    )
    with pytest.raises(OpNotImplemented, match="graph input 'x' has element type BFLOAT16"):
        relay.frontend.from_onnx(proto)


def test_opsets_before_7_are_unsupported():
    proto = graph_model(
        [helper.make_node("Relu", ["x"], ["y"])], [vinfo("x")], [vinfo("y")], opset=6
    )
    with pytest.raises(OpNotImplemented, match="opset 6"):
        relay.frontend.from_onnx(proto)


# --- external data -----------------------------------------------------------------------------


def external_model(directory):
    """A model whose initializer 'w' lives in ``directory/weights.bin``; returns its path."""
    weight = np.arange(6, dtype="float32").reshape(2, 3)
    proto = model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
        {"x": ("float32", [2, 3])},
        ["y"],
        {"w": weight},
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.onnx"
    onnx.save_model(
        proto, path, save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    return path


def edit_external(path, **entries):
    """Rewrite the external-data entries of initializer 'w' in the saved model at ``path``."""
    proto = onnx.load(path, load_external_data=False)
    tensor = proto.graph.initializer[0]
    current = {e.key: e.value for e in tensor.external_data}
    current.update({k: str(v) for k, v in entries.items()})
    del tensor.external_data[:]
    for key, value in current.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    path.write_bytes(proto.SerializeToString())


def test_external_data_inside_the_model_directory_loads(tmp_path):
    path = external_model(tmp_path / "m")
    (tmp_path / "m" / "sub").mkdir()
    os.replace(tmp_path / "m" / "weights.bin", tmp_path / "m" / "sub" / "weights.bin")
    edit_external(path, location="sub/weights.bin")
    got = run_relay(path, {"x": X})
    np.testing.assert_array_equal(got[0], X + np.arange(6, dtype="float32").reshape(2, 3))


def test_external_data_with_an_absolute_path_is_rejected(tmp_path):
    path = external_model(tmp_path / "m")
    edit_external(path, location=os.path.abspath(tmp_path / "m" / "weights.bin"))
    with pytest.raises(OnnxImportError, match=r"initializer 'w' .* an absolute path"):
        relay.frontend.from_onnx(path)


@pytest.mark.parametrize("location", ["../outside.bin", "sub/../../outside.bin", "..\\outside.bin"])
def test_external_data_climbing_out_with_dotdot_is_rejected(tmp_path, location):
    (tmp_path / "outside.bin").write_bytes(b"\0" * 24)
    path = external_model(tmp_path / "m")
    edit_external(path, location=location)
    with pytest.raises(OnnxImportError, match=r"initializer 'w' .*'\.\.' component"):
        relay.frontend.from_onnx(path)


def test_external_data_through_a_symlink_out_of_the_directory_is_rejected(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\1" * 24)
    path = external_model(tmp_path / "m")
    os.symlink(secret, tmp_path / "m" / "link.bin")
    edit_external(path, location="link.bin")
    with pytest.raises(OnnxImportError, match=r"initializer 'w' .*'link.bin'.*symbolic link"):
        relay.frontend.from_onnx(path)


def test_missing_external_data_file_is_named(tmp_path):
    path = external_model(tmp_path / "m")
    edit_external(path, location="gone.bin")
    with pytest.raises(OnnxImportError, match=r"'gone.bin', which does not exist"):
        relay.frontend.from_onnx(path)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"length": 8}, "length 8 .* does not match the 24 bytes"),
        ({"offset": 16}, "offset 16 with 24 bytes runs past the end"),
        ({"offset": -1}, "offset '-1' .* must be a non-negative integer"),
    ],
)
def test_external_data_ranges_must_fit_the_file_and_the_tensor(tmp_path, entries, message):
    path = external_model(tmp_path / "m")
    edit_external(path, **entries)
    with pytest.raises(OnnxImportError, match=message):
        relay.frontend.from_onnx(path)


def test_external_data_needs_the_model_path(tmp_path):
    path = external_model(tmp_path / "m")
    proto = onnx.load(path, load_external_data=False)
    for given in (proto, proto.SerializeToString()):
        with pytest.raises(OnnxImportError, match=r"initializer 'w' .* pass the path"):
            relay.frontend.from_onnx(given)


def test_loading_external_data_leaves_the_callers_model_untouched(tmp_path):
    path = external_model(tmp_path / "m")
    before = path.read_bytes()
    relay.frontend.from_onnx(path)
    assert path.read_bytes() == before

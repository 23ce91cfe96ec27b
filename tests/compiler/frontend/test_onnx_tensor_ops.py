"""ONNX data-movement operators imported by from_onnx agree with onnxruntime (returns):
constants and shapes, reshapes, slicing, gathering, joining, splitting, broadcasting,
tiling and padding; shape computations fold to constants at import time."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper

from compiler import relay
from tests.compiler.frontend._onnx_helpers import check_against_ort, model, single_op

RNG = np.random.default_rng(11)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype="int64")


@pytest.mark.parametrize(
    ("shape", "target"),
    [((2, 3, 4), (6, 4)), ((2, 3, 4), (0, -1)), ((2, 3, 4), (-1,)), ((2, 3, 4), (4, 0, 2))],
)
def test_reshape_with_zero_and_minus_one(shape, target):
    proto, feeds = single_op("Reshape", {"x": randn(*shape)}, constants={"s": ints(*target)})
    check_against_ort(proto, feeds)


def test_reshape_keeps_a_dynamic_batch_dimension():
    proto, feeds = single_op("Reshape", {"x": randn(2, 3, 4)}, constants={"s": ints(0, -1)})
    mod, _ = relay.frontend.from_onnx(proto, shape={"x": (None, 3, 4)})
    assert "Tensor[(?, 12), float32]" in str(relay.transform.InferType()(mod))
    check_against_ort(proto, feeds, shape={"x": ("batch", 3, 4)})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, 3])
def test_flatten_at_every_axis(axis):
    check_against_ort(*single_op("Flatten", {"x": randn(2, 3, 4)}, {"axis": axis}))


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    check_against_ort(*single_op("Transpose", {"x": randn(2, 3, 4)}, attrs))


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_and_unsqueeze_take_axes_as_attribute_or_input(opset):
    x = randn(2, 1, 3, 1)
    if opset < 13:
        squeeze = single_op("Squeeze", {"x": x}, {"axes": [1, -1]}, opset=opset)
        unsqueeze = single_op("Unsqueeze", {"x": randn(2, 3)}, {"axes": [0, 3]}, opset=opset)
    else:
        squeeze = single_op("Squeeze", {"x": x}, constants={"a": ints(1, -1)}, opset=opset)
        unsqueeze = single_op(
            "Unsqueeze", {"x": randn(2, 3)}, constants={"a": ints(3, 0)}, opset=opset
        )
    check_against_ort(*squeeze)
    check_against_ort(*unsqueeze)


def test_squeeze_without_axes_removes_every_size_one_axis():
    check_against_ort(*single_op("Squeeze", {"x": randn(1, 3, 1, 2)}))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = {0: [(1, 3), (2, 3)], 1: [(2, 1), (2, 2)], -1: [(2, 2), (2, 3)]}[axis]
    feeds = {"a": randn(*shapes[0]), "b": randn(*shapes[1]), "c": randn(*shapes[0])}
    feeds["c"] = randn(*shapes[1])
    check_against_ort(*single_op("Concat", feeds, {"axis": axis}))


@pytest.mark.parametrize(
    ("opset", "attrs", "constants", "outputs"),
    [
        (17, {"axis": 1}, {}, 7),  # equal parts
        (17, {"axis": 1}, {"s": ints(1, 5, 1)}, 3),  # sizes as an input
        (11, {"axis": 1, "split": [2, 5]}, {}, 2),  # sizes as an attribute
        (18, {"axis": 1, "num_outputs": 4}, {}, 4),  # 7 = 2 + 2 + 2 + 1, opset 18
    ],
    ids=["equal", "sizes-input", "sizes-attribute", "num-outputs"],
)
def test_split(opset, attrs, constants, outputs):
    proto, feeds = single_op(
        "Split", {"x": randn(2, 7, 3)}, attrs, constants, outputs=outputs, opset=opset
    )
    check_against_ort(proto, feeds)


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ((1,), (3,), (0,), None),
        ((0, 1), (2, -1), (1, 2), None),
        ((-1,), (-(2**63),), (2,), (-1,)),  # reversed, ends at "minus infinity"
        ((0, 2**63 - 1), (2**63 - 1, 0), (0, 1), (2, -2)),
        ((1,), (1000,), (-1,), (3,)),
    ],
)
def test_slice_with_clamped_and_negative_bounds(starts, ends, axes, steps):
    constants = {"s": ints(*starts), "e": ints(*ends), "a": ints(*axes)}
    if steps is not None:
        constants["t"] = ints(*steps)
    check_against_ort(*single_op("Slice", {"x": randn(4, 5, 6)}, constants=constants))


def test_slice_attributes_before_opset_10():
    proto, feeds = single_op(
        "Slice", {"x": randn(4, 5)}, {"starts": [1, 0], "ends": [3, -1], "axes": [0, 1]}, opset=9
    )
    check_against_ort(proto, feeds)


@pytest.mark.parametrize(
    ("indices", "axis"),
    [(ints(0, 2, -1), 0), (ints(1), 1), (np.array(2, "int64"), 1), (ints(-3, 2), -1)],
)
def test_gather_with_constant_indices(indices, axis):
    check_against_ort(
        *single_op("Gather", {"x": randn(3, 4, 5)}, {"axis": axis}, constants={"i": indices})
    )


def test_gather_with_indices_computed_at_run_time_counts_negatives_from_the_end():
    feeds = {"x": randn(5, 3), "i": np.array([[0, -1], [4, -5]], dtype="int32")}
    check_against_ort(*single_op("Gather", feeds))


@pytest.mark.parametrize(
    ("shape", "target"), [((3, 1), (2, 3, 4)), ((1,), (2, 2)), ((2, 1, 4), (3, 1)), ((3,), (3,))]
)
def test_expand_broadcasts_both_ways(shape, target):
    proto, feeds = single_op("Expand", {"x": randn(*shape)}, constants={"s": ints(*target)})
    check_against_ort(proto, feeds)


def test_expand_with_a_dynamic_input_dimension():
    proto, feeds = single_op("Expand", {"x": randn(3, 1)}, constants={"s": ints(2, 1, 4)})
    check_against_ort(proto, feeds, shape={"x": (None, 1)})


def test_tile():
    proto, feeds = single_op("Tile", {"x": randn(2, 3)}, constants={"r": ints(2, 3)})
    check_against_ort(proto, feeds)


def test_range_folds_to_a_constant():
    nodes = [
        helper.make_node("Range", ["s", "l", "d"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=1),
        helper.make_node("Add", ["x", "rf"], ["y"]),
    ]
    consts = {"s": np.array(1, "int64"), "l": np.array(10, "int64"), "d": np.array(3, "int64")}
    proto = model(nodes, {"x": ("float32", [3])}, ["y"], consts)
    check_against_ort(proto, {"x": randn(3)})


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_modes(mode):
    constants = {"p": ints(0, 1, 2, 0, 2, 1)}
    check_against_ort(*single_op("Pad", {"x": randn(2, 4, 5)}, {"mode": mode}, constants))


def test_pad_with_a_constant_value_and_negative_pads():
    constants = {"p": ints(1, -1, 0, 2), "v": np.array(2.5, "float32")}
    check_against_ort(*single_op("Pad", {"x": randn(3, 4)}, constants=constants))


def test_pad_with_axes_in_opset_18():
    constants = {"p": ints(1, 2), "v": np.array(-1.0, "float32"), "a": ints(-1)}
    proto, feeds = single_op("Pad", {"x": randn(3, 4)}, constants=constants, opset=18)
    check_against_ort(proto, feeds)


def test_pad_attributes_before_opset_11():
    proto, feeds = single_op(
        "Pad", {"x": randn(2, 3)}, {"pads": [1, 0, 0, 2], "value": 1.5}, opset=10
    )
    check_against_ort(proto, feeds)


def test_shape_gather_concat_reshape_chain_folds_to_a_static_reshape():
    # The pattern exporters emit for x.view(x.size(0), -1).
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    consts = {"zero": np.array(0, "int64"), "axes": ints(0), "minus_one": ints(-1)}
    proto = model(nodes, {"x": ("float32", [2, 3, 4])}, ["y"], consts)
    check_against_ort(proto, {"x": randn(2, 3, 4)})
    mod, params = relay.frontend.from_onnx(proto)
    text = mod.astext()
    assert "reshape(%x, newshape=[2, -1])" in text
    assert params == {}  # the integer initializers were only read at import time
    assert [p.name_hint for p in mod["main"].params] == ["x"]


def test_shape_with_start_and_end_in_opset_15():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
        helper.make_node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(
            np.array([3.0], "float32")
        )),
    ]  # fmt: skip
    proto = model(nodes, {"x": ("float32", [2, 3, 4, 5])}, ["y"], opset=15)
    check_against_ort(proto, {"x": randn(2, 3, 4, 5)})


def test_size_and_constant_of_shape_default_to_float_zeros():
    nodes = [
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("ConstantOfShape", ["n1"], ["z"]),
        helper.make_node("Cast", ["x"], ["xf"], to=1),
        helper.make_node("Reshape", ["xf", "n1"], ["flat"]),
        helper.make_node("Add", ["flat", "z"], ["y"]),
    ]
    proto = model(nodes, {"x": ("int32", [2, 3])}, ["y"], {"axes": ints(0)})
    check_against_ort(proto, {"x": np.arange(6, dtype="int32").reshape(2, 3)})


@pytest.mark.parametrize(
    "attr",
    [
        {"value": numpy_helper.from_array(np.arange(6, dtype="float32").reshape(2, 3))},
        {"value_float": 2.0},
        {"value_floats": [1.0, 2.0, 3.0]},
    ],
    ids=["tensor", "float", "floats"],
)
def test_constant_attribute_kinds(attr):
    nodes = [
        helper.make_node("Constant", [], ["c"], **attr),
        helper.make_node("Mul", ["x", "c"], ["y"]),
    ]
    proto = model(nodes, {"x": ("float32", [2, 3])}, ["y"])
    check_against_ort(proto, {"x": randn(2, 3)})


@pytest.mark.parametrize("attr", [{"value_int": 4}, {"value_ints": [1, 2, 3]}])
def test_integer_constant_attribute_kinds(attr):
    nodes = [
        helper.make_node("Constant", [], ["c"], **attr),
        helper.make_node("Add", ["x", "c"], ["y"]),
    ]
    proto = model(nodes, {"x": ("int64", [3])}, ["y"])
    check_against_ort(proto, {"x": ints(5, 6, 7)})

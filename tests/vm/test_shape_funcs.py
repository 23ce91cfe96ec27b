"""Run-time shape functions (vm.shape_funcs): rules per operator, the walk, the runnable form.

Returns: every operator's rule agrees with the compiler's type relation on static shapes
(through the kernel description the compiler writes, when the kernel library has the
operator), and fused descriptions are walked node by node. Traps: shapes an operator
cannot take raise ShapeFuncError naming the operator and the shapes. Invalid: shape
function descriptions with the wrong keys, signature or kernel are refused. Nothing here
compiles a numba kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler import relay
from compiler.backend.kernel_desc import describe_primitive
from compiler.ir.expr import Function
from compiler.ir.types import TensorType, TupleType
from compiler.ir.visitor import post_order
from compiler.op.registry import get_def, get_op, list_ops
from compiler.transform.primitives import wrap_primitives
from compiler.transform.typed_rewrite import is_primitive
from compiler.typing import infer_types
from vm.kernels import KernelDescriptionError, supported_ops
from vm.shape_funcs import (
    SHAPE_RULES,
    VALUE_KEY_LIMIT,
    VALUE_RULES,
    ShapeFuncError,
    ShapeFunction,
    check_primitive,
    check_shape_func,
    is_shape_func,
    load_primitive,
    load_shape_function,
    op_output_shapes,
    output_shapes,
    shape_func_description,
    shape_func_ops,
)

F = "float32"
B = "bool"
I32 = "int32"

# op -> list of (argument (shape, dtype) pairs, attributes). ``concatenate`` and ``stack``
# take their fields as one tuple argument.
_UNARY_FLOAT = ["cos", "erf", "exp", "log", "rsqrt", "sigmoid", "sin", "sqrt", "tanh"]
_UNARY_NUMERIC = ["abs", "ceil", "copy", "floor", "negative", "nn.relu", "round", "sign"]
_BINARY = [
    "add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power",
    "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal",
]  # fmt: skip
_REDUCE = ["sum", "mean", "prod", "max", "min", "argmax", "argmin"]

CASES: dict[str, list[tuple[list[tuple[tuple[int, ...], str]], dict[str, Any]]]] = {
    **{op: [([((2, 3), F)], {}), ([((), F)], {})] for op in _UNARY_FLOAT},
    **{op: [([((4, 1, 5), F)], {})] for op in _UNARY_NUMERIC},
    **{op: [([((2, 1, 3), F), ((4, 3), F)], {}), ([((3,), F), ((), F)], {})] for op in _BINARY},
    **{
        op: [
            ([((2, 3, 4), F)], {"axis": [1]}),
            ([((2, 3, 4), F)], {"axis": [0, -1], "keepdims": True}),
            ([((2, 3, 4), F)], {"axis": [1], "exclude": True}),
            ([((2, 3, 4), F)], {}),
        ]
        for op in _REDUCE
    },
    "all": [([((2, 3), B)], {"axis": [0]})],
    "any": [([((2, 3), B)], {"axis": [1], "keepdims": True})],
    "logical_not": [([((3,), B)], {})],
    "logical_and": [([((2, 1), B), ((1, 5), B)], {})],
    "logical_or": [([((2, 3), B), ((3,), B)], {})],
    "where": [([((2, 1), B), ((1, 3), F), ((2, 3), F)], {})],
    "cast": [([((2, 3), F)], {"dtype": "int32"})],
    "clip": [([((2, 3), F)], {"a_min": -1.0, "a_max": 1.0})],
    "zeros_like": [([((2, 3), F)], {})],
    "ones_like": [([((2, 3), F)], {})],
    "full_like": [([((2, 3), F), ((), F)], {})],
    "zeros": [([], {"shape": [2, 3]})],
    "ones": [([], {"shape": [4], "dtype": "int32"})],
    "full": [([((), F)], {"shape": [3, 2]})],
    "broadcast_to": [([((3, 1), F)], {"shape": [2, 3, 4]})],
    "shape_of": [([((2, 0, 5), F)], {}), ([((), F)], {"dtype": "int64"})],
    "ndarray_size": [([((2, 3), F)], {})],
    "argsort": [([((3, 4), F)], {"axis": 0}), ([((5,), F)], {"is_ascend": False})],
    "topk": [
        ([((3, 4), F)], {"k": 2}),
        ([((3, 4), F)], {"k": 9, "axis": 0, "ret_type": "values"}),
        ([((3, 4), F)], {"k": 0, "ret_type": "indices"}),
    ],
    "nn.bias_add": [
        ([((2, 5, 3), F), ((5,), F)], {"axis": 1}),
        ([((2, 5), F), ((5,), F)], {"axis": -1}),
    ],
    "nn.softmax": [([((2, 7), F)], {"axis": -1})],
    "nn.log_softmax": [([((2, 7, 3), F)], {"axis": 1})],
    "nn.leaky_relu": [([((2, 3), F)], {"alpha": 0.1})],
    "nn.prelu": [([((2, 4, 3), F), ((4,), F)], {"axis": 1})],
    "nn.dropout": [([((2, 3), F)], {"rate": 0.5})],
    "nn.layer_norm": [([((2, 3, 8), F), ((8,), F), ((8,), F)], {})],
    "nn.group_norm": [([((2, 6, 4), F), ((6,), F), ((6,), F)], {"num_groups": 3})],
    "nn.batch_norm": [([((2, 4, 3, 3), F)] + [((4,), F)] * 4, {})],
    "reshape": [
        ([((2, 3, 4), F)], {"newshape": [6, -1]}),
        ([((2, 3, 4), F)], {"newshape": [0, -1]}),
        ([((2, 3, 4), F)], {"newshape": [-2]}),
        ([((2, 3, 4), F)], {"newshape": [-3, 4]}),
        ([((2, 6, 4), F)], {"newshape": [0, -4, 2, -1, 4]}),
        ([((2, 3, 4), F)], {"newshape": [24]}),
    ],
    "squeeze": [
        ([((1, 3, 1, 2), F)], {"axis": [0]}),
        ([((1, 3, 1, 2), F)], {}),
    ],
    "expand_dims": [
        ([((2, 3), F)], {"axis": 1, "num_newaxis": 2}),
        ([((2, 3), F)], {"axis": -1}),
    ],
    "nn.batch_flatten": [([((2, 3, 4, 5), F)], {}), ([((4,), F)], {})],
    "transpose": [([((2, 3, 4), F)], {"axes": [1, 0, 2]}), ([((2, 3, 4), F)], {})],
    "concatenate": [
        ([((2, 3), F), ((4, 3), F)], {"axis": 0}),
        ([((2, 3), F), ((2, 1), F), ((2, 5), F)], {"axis": -1}),
    ],
    "stack": [([((2, 3), F), ((2, 3), F)], {"axis": 1}), ([((3,), F)] * 3, {"axis": -1})],
    "split": [
        ([((6, 4), F)], {"indices_or_sections": 3, "axis": 0}),
        ([((2, 10), F)], {"indices_or_sections": [2, 7], "axis": 1}),
    ],
    "strided_slice": [
        ([((10, 8), F)], {"begin": [1, 0], "end": [8, 8], "strides": [2, 3]}),
        ([((10, 8), F)], {"begin": [-3], "end": [100]}),
        ([((10, 8), F)], {"begin": [9], "end": [0], "strides": [-2]}),
        ([((10, 8), F)], {"begin": [2], "end": [3], "axes": [1], "slice_mode": "size"}),
    ],
    "take": [
        ([((5, 4), F), ((2, 3), I32)], {"axis": 0}),
        ([((5, 4), F), ((2, 3), I32)], {}),
        ([((3, 5, 4), F), ((3, 2), I32)], {"axis": 1, "batch_dims": 1}),
    ],
    "gather": [
        ([((5, 4), F), ((2, 4), I32)], {"axis": 0}),
        ([((5, 4), F), ((3, 7), I32)], {"axis": -1}),
    ],
    "gather_nd": [
        ([((5, 4, 3), F), ((2, 6), I32)], {}),
        ([((2, 4, 3), F), ((1, 2, 5), I32)], {"batch_dims": 1}),
    ],
    "scatter_elements": [
        ([((5, 4), F), ((2, 4), I32), ((2, 4), F)], {"axis": 0, "reduction": "add"}),
    ],
    "scatter_nd": [
        ([((5, 4), F), ((1, 3), I32), ((3, 4), F)], {}),
        ([((5, 4), F), ((2, 3), I32), ((3,), F)], {"mode": "max"}),
    ],
    "nn.dense": [
        ([((2, 5), F), ((3, 5), F)], {}),
        ([((4, 2, 5), F), ((3, 5), F)], {"units": 3}),
    ],
    "nn.matmul": [
        ([((2, 5), F), ((5, 3), F)], {}),
        ([((4, 2, 5), F), ((3, 5), F)], {"units": 3, "transpose_b": True}),
        ([((5, 2), F), ((3, 5), F)], {"transpose_a": True, "transpose_b": True}),
    ],
    "nn.contrib_dense_pack": [
        ([((2, 5), F), ((3, 5, 32), F)], {}),
        ([((4, 2, 5), F), ((3, 5, 32), F)], {"units": 70}),
        ([((4, 5), F), ((2, 5, 4), F)], {"units": 7, "weight_layout": "NC4n"}),
    ],
    "nn.contrib_conv2d_gemm_without_weight_transform": [
        ([((1, 4, 9, 9), F), ((2, 36, 32), F)], {"channels": 40, "kernel_size": [3, 3]}),
        (
            [((2, 8, 9, 8), F), ((1, 8, 32), F)],
            {"channels": 3, "kernel_size": [1, 1], "strides": [2, 1], "padding": [0, 1]},
        ),
    ],
    "layout_transform": [
        ([((70, 5), F)], {"src_layout": "NC", "dst_layout": "NC32n"}),
        ([((8, 3), F)], {"src_layout": "NC", "dst_layout": "NC4n"}),
    ],
    "nn.batch_matmul": [
        ([((2, 3, 4), F), ((2, 5, 4), F)], {}),
        ([((1, 4, 3), F), ((6, 4, 5), F)], {"transpose_a": True, "transpose_b": False}),
    ],
    "nn.conv2d": [
        ([((1, 4, 9, 9), F), ((8, 4, 3, 3), F)], {"strides": [2, 2], "padding": [1, 1]}),
        ([((2, 6, 7, 8), F), ((6, 1, 3, 3), F)], {"groups": 6, "dilation": [2, 1]}),
        ([((1, 4, 5, 5), F), ((2, 2, 1, 1), F)], {"groups": 2, "padding": [0, 1, 2, 3]}),
    ],
    "nn.contrib_conv2d_winograd_weight_transform": [([((8, 4, 3, 3), F)], {})],
    "nn.contrib_conv2d_winograd_without_weight_transform": [
        ([((1, 4, 9, 9), F), ((4, 4, 8, 4), F)], {"padding": [1, 1], "kernel_size": [3, 3]}),
        ([((2, 3, 7, 6), F), ((4, 4, 5, 3), F)], {"padding": [0, 1, 2, 0], "kernel_size": [3, 3]}),
        # Each plane packed in panels of 32 output channels.
        (
            [((1, 4, 9, 9), F), ((32, 4, 32), F)],
            {"padding": [1, 1], "kernel_size": [3, 3], "channels": 40},
        ),
    ],
    "nn.conv2d_transpose": [
        ([((1, 4, 5, 5), F), ((4, 3, 3, 3), F)], {"strides": [2, 2], "padding": [1, 1]}),
        (
            [((1, 4, 5, 6), F), ((4, 1, 3, 2), F)],
            {"groups": 2, "strides": [2, 3], "output_padding": [1, 2], "channels": 2},
        ),
    ],
    "nn.max_pool2d": [
        ([((1, 2, 9, 9), F)], {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1]}),
        ([((1, 2, 8, 8), F)], {"pool_size": [3, 3], "strides": [2, 2], "ceil_mode": True}),
    ],
    "nn.avg_pool2d": [
        ([((2, 3, 7, 5), F)], {"pool_size": [2, 3], "dilation": [2, 1], "ceil_mode": True}),
    ],
    "nn.global_avg_pool2d": [([((2, 3, 7, 5), F)], {})],
    "nn.global_max_pool2d": [([((2, 3, 7, 5), F)], {})],
    "nn.adaptive_avg_pool2d": [
        ([((2, 3, 7, 5), F)], {"output_size": [3, 2]}),
        ([((2, 3, 7, 5), F)], {"output_size": [4]}),
        ([((2, 3, 7, 5), F)], {}),
    ],
    "nn.pad": [
        ([((2, 3), F), ((), F)], {"pad_width": [[1, 2], [0, 3]]}),
        ([((2, 3), F), ((), F)], {"pad_width": [[1, 1], [2, 2]], "pad_mode": "reflect"}),
    ],
    "nn.upsampling": [
        ([((1, 2, 3, 5), F)], {"scale_h": 2.0, "scale_w": 1.5}),
        ([((1, 2, 3, 4), F)], {"scale_h": 0.5, "scale_w": 0.25}),
    ],
    "image.resize2d": [
        ([((1, 2, 3, 5), F)], {"size": [7, 2]}),
        ([((0, 2, 0, 5), F)], {"size": 4, "method": "cubic"}),
    ],
    "vision.roi_align": [
        ([((2, 3, 10, 12), F), ((7, 5), F)], {"pooled_size": [3, 4], "spatial_scale": 0.5}),
        ([((1, 2, 4, 4), F), ((0, 5), F)], {"pooled_size": 2, "spatial_scale": 1.0}),
    ],
    "vision.all_class_non_max_suppression": [
        ([((2, 9, 4), F), ((2, 3, 9), F), ((), "int64"), ((1,), F), ((0,), F)], {}),
        ([((1, 0, 4), F), ((1, 5, 0), F), ((1,), "int32"), ((), F), ((), F)], {}),
    ],
}

ALL_CASES = [
    pytest.param(op, args, attrs, id=f"{op}-{i}")
    for op, cases in sorted(CASES.items())
    for i, (args, attrs) in enumerate(cases)
]


def _relation_shapes(op: str, args: list[tuple[tuple[int, ...], str]], attrs: dict) -> list:
    """The output shapes the compiler's type relation gives on these static shapes."""
    types = [TensorType(shape, dtype) for shape, dtype in args]
    if op in ("concatenate", "stack"):
        types = [TupleType(types)]
    definition = get_def(op)
    out = definition.type_rel(types, definition.normalize_attrs(attrs))
    leaves = out.fields if isinstance(out, TupleType) else [out]
    return [tuple(leaf.shape) for leaf in leaves]


def _kernel_description(op: str, args: list[tuple[tuple[int, ...], str]], attrs: dict) -> dict:
    """The description the compiler writes for a primitive calling ``op`` once."""
    params = [relay.var(f"p{i}", shape=shape, dtype=dtype) for i, (shape, dtype) in enumerate(args)]
    call_args: list = [relay.Tuple(params)] if op in ("concatenate", "stack") else params
    func = relay.Function(params, relay.Call(get_op(op), call_args, attrs))
    # Not relay.vm.optimize: SimplifyInference would turn the norms into arithmetic.
    lowered = infer_types(wrap_primitives(infer_types(relay.IRModule.from_expr(func))))
    (primitive,) = [n for n in post_order(lowered["main"]) if is_primitive(n)]
    assert isinstance(primitive, Function)
    return describe_primitive(primitive)[1]


# --- returns -----------------------------------------------------------------------------------


def test_every_kernel_operator_and_every_registered_operator_has_a_rule_and_a_case() -> None:
    assert set(supported_ops()) <= set(shape_func_ops())
    assert set(list_ops()) <= set(SHAPE_RULES) | set(VALUE_RULES)
    assert set(SHAPE_RULES) <= set(CASES), sorted(set(SHAPE_RULES) - set(CASES))


@pytest.mark.parametrize(("op", "args", "attrs"), ALL_CASES)
def test_rule_agrees_with_the_type_relation_on_static_shapes(
    op: str, args: list, attrs: dict
) -> None:
    expected = _relation_shapes(op, args, attrs)
    shapes = [shape for shape, _ in args]
    if op in supported_ops():
        # Through the description the compiler writes (attributes as the runtime sees them).
        assert output_shapes(_kernel_description(op, args, attrs), shapes) == expected
    normalized = get_def(op).normalize_attrs(attrs)
    ranks = [len(s) for s in expected]
    assert op_output_shapes(op, shapes, normalized, ranks) == expected


def test_fused_description_is_walked_node_by_node() -> None:
    x = relay.var("x", shape=(relay.Any(), 5))
    w = relay.var("w", shape=(3, 5))
    b = relay.var("b", shape=(3,))
    body = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
    lowered, _ = relay.vm.optimize(relay.IRModule.from_expr(relay.Function([x, w, b], body)))
    (primitive,) = [n for n in post_order(lowered["main"]) if is_primitive(n)]
    _, description = describe_primitive(primitive)
    assert [n["op"] for n in description["nodes"]] == ["nn.dense", "nn.bias_add", "nn.relu"]
    for batch in (1, 7, 64):
        assert output_shapes(description, [(batch, 5), (3, 5), (3,)]) == [(batch, 3)]


def test_tuple_outputs_get_one_shape_each() -> None:
    description = {
        "inputs": [["float32", 2]],
        "outputs": [["float32", 2]] * 3,
        "nodes": [
            {
                "op": "split",
                "args": [0],
                "attrs": {"indices_or_sections": [1, 3], "axis": 0},
                "outputs": [["float32", 2]] * 3,
            }
        ],
        "results": [1, 2, 3],
    }
    assert output_shapes(description, [(5, 2)]) == [(1, 2), (2, 2), (2, 2)]


def test_shape_function_writes_shapes_and_byte_sizes_in_place() -> None:
    kernel = _kernel_description(
        "concatenate", [((2, 3), "float16"), ((2, 1), "float16")], {"axis": 1}
    )
    function = load_shape_function(shape_func_description(kernel))
    shape = np.full(2, -1, dtype=np.int64)
    size = np.array(-1, dtype=np.int64)
    function.entry(np.array([5, 3]), np.array([5, 1]), shape, size)
    assert shape.tolist() == [5, 4] and size.item() == 5 * 4 * 2  # float16: 2 bytes each
    function(np.array([0, 3]), np.array([0, 7]), shape, size)  # cached path and a fresh one
    assert shape.tolist() == [0, 10] and size.item() == 0
    function(np.array([5, 3]), np.array([5, 1]), shape, size)
    assert shape.tolist() == [5, 4] and size.item() == 40


def test_data_dependent_shape_function_reads_the_shape_tensor_itself() -> None:
    kernel = _kernel_description("dyn.reshape", [((6,), F), ((2,), "int64")], {})
    description = shape_func_description(kernel)
    assert description["values"] == [1]
    assert description["inputs"] == [["int64", 1], ["int64", 1]]
    function = load_shape_function(description)
    shape = np.full(2, -1, dtype=np.int64)
    size = np.array(-1, dtype=np.int64)
    function(np.array([6]), np.array([3, -1]), shape, size)
    assert shape.tolist() == [3, 2] and size.item() == 24
    function(np.array([6]), np.array([1, 6]), shape, size)
    assert shape.tolist() == [1, 6]
    with pytest.raises(
        ShapeFuncError, match=r"dyn\.reshape: cannot reshape \(6,\) .*: 6 elements vs 8"
    ):
        function(np.array([6]), np.array([4, 2]), shape, size)


def test_a_long_value_input_sizes_the_outputs_without_being_remembered() -> None:
    # argwhere's condition (1.3M scores in RetinaNet) would cost more as a key than a count.
    kernel = _kernel_description("argwhere", [((5000,), "bool")], {})
    function = load_shape_function(shape_func_description(kernel))
    shape = np.full(2, -1, dtype=np.int64)
    size = np.array(-1, dtype=np.int64)
    rng = np.random.default_rng(0)
    for density in (0.5, 0.0, 0.5, 1.0):
        condition = rng.random(5000) < density
        function(condition, shape, size)
        count = int(condition.sum())
        assert shape.tolist() == [count, 1] and size.item() == count * 4  # int32 rows
        assert function.compute([(5000,)], {0: condition})[0] == [(count, 1)]
    # The function is shared by every argwhere over a vector; short conditions may be kept.
    assert all(len(key[0]) <= VALUE_KEY_LIMIT for key in function._cache)


@pytest.mark.parametrize(
    ("op", "shapes", "values", "expected"),
    [
        ("dyn.broadcast_to", [(3, 1), (2,)], [None, [3, 4]], [(3, 4)]),
        ("dyn.zeros", [(3,)], [[2, 0, 1]], [(2, 0, 1)]),
        ("dyn.full", [(), (1,)], [None, [5]], [(5,)]),
        ("dyn.strided_slice", [(6, 4), (2,), (2,), (1,)], [None, [1, -3], [5, 4], [2]], [(2, 2)]),
        ("arange", [(), (), ()], [2, 11, 3], [(3,)]),
        ("arange", [(), (), ()], [0.0, 1.0, 0.25], [(4,)]),
    ],
)
def test_value_rules(op: str, shapes: list, values: list, expected: list) -> None:
    arrays = [None if v is None else np.array(v) for v in values]
    assert op_output_shapes(op, shapes, {}, [len(e) for e in expected], arrays) == expected


@pytest.mark.parametrize(
    ("op", "shapes", "values", "pattern"),
    [
        ("dyn.zeros", [(2,)], [[2, -1]], r"negative size"),
        ("arange", [(), (), ()], [0, 4, 0], r"step must not be 0"),
        ("arange", [(), (), ()], [0.0, float("inf"), 1.0], r"not finite"),
        ("dyn.broadcast_to", [(3, 2), (2,)], [None, [3, 4]], r"cannot broadcast"),
        ("dyn.reshape", [(6,), (2,)], [None, None], r"values of argument\(s\) \[1\]"),
    ],
)
def test_value_rules_refuse_values_that_do_not_fit(
    op: str, shapes: list, values: list, pattern: str
) -> None:
    arrays = [None if v is None else np.array(v) for v in values]
    with pytest.raises(ShapeFuncError, match=pattern):
        op_output_shapes(op, shapes, {}, (1,), arrays)


def test_a_value_argument_computed_inside_the_kernel_is_refused() -> None:
    description = {
        "inputs": [["float32", 1], ["int64", 1]],
        "outputs": [["float32", 2]],
        "nodes": [
            {"op": "negative", "args": [1], "attrs": {}, "outputs": [["int64", 1]]},
            {"op": "dyn.reshape", "args": [0, 2], "attrs": {}, "outputs": [["float32", 2]]},
        ],
        "results": [3],
    }
    with pytest.raises(KernelDescriptionError, match="reads argument 1 by value"):
        shape_func_description(description)
    good = _kernel_description("dyn.reshape", [((6,), F), ((2,), "int64")], {})
    with pytest.raises(KernelDescriptionError, match="values must list"):
        check_shape_func({**shape_func_description(good), "values": []})


def test_load_primitive_dispatches_shape_functions_without_numba_and_shares_them() -> None:
    kernel = _kernel_description("add", [((2, 3), F), ((3,), F)], {})
    description = shape_func_description(kernel)
    assert is_shape_func(description) and not is_shape_func(kernel)
    first = load_primitive(description)
    assert isinstance(first, ShapeFunction)
    assert load_primitive(dict(description)) is first
    check_primitive(description)
    check_primitive(kernel)


def test_reshape_infers_minus_one_from_a_run_time_batch() -> None:
    attrs = {"newshape": [0, -1]}
    for batch in (1, 3, 64):
        assert op_output_shapes("reshape", [(batch, 4, 5)], attrs) == [(batch, 20)]
    assert op_output_shapes("reshape", [(0, 4, 5)], attrs) == [(0, 20)]


# --- traps ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "shapes", "attrs", "pattern"),
    [
        ("add", [(3, 4), (5, 4)], {}, r"add: cannot broadcast \(3, 4\) and \(5, 4\)"),
        ("where", [(2,), (3,), (3,)], {}, r"where: cannot broadcast"),
        ("nn.dense", [(2, 5), (3, 4)], {}, r"nn.dense: the input features differ.*\(2, 5\)"),
        (
            "nn.matmul",
            [(2, 5), (4, 3)],
            {},
            r"nn.matmul: the reduction dimensions of tensor_a \(2, 5\) and tensor_b \(4, 3\)",
        ),
        ("nn.matmul", [(2, 3, 5), (5, 3)], {"transpose_a": True}, r"tensor_a .* must have rank 2"),
        (
            "nn.contrib_dense_pack",
            [(2, 5), (3, 4, 32)],
            {},
            r"nn.contrib_dense_pack: the input features differ",
        ),
        ("nn.contrib_dense_pack", [(2, 5), (3, 5, 32)], {"units": 20}, r"units=20 does not fit"),
        ("nn.contrib_dense_pack", [(2, 5), (3, 5, 16)], {}, r"panel width"),
        (
            "nn.contrib_conv2d_gemm_without_weight_transform",
            [(1, 4, 9, 9), (2, 27, 32)],
            {"channels": 40, "kernel_size": [3, 3]},
            r"depth of weight",
        ),
        (
            "nn.batch_matmul",
            [(2, 3, 4), (2, 5, 3)],
            {"transpose_b": True},
            r"nn.batch_matmul: the reduction dimensions",
        ),
        ("reshape", [(2, 3)], {"newshape": [4, -1]}, r"reshape: cannot reshape \(2, 3\) .*divide"),
        ("reshape", [(2, 3)], {"newshape": [5]}, r"reshape: cannot reshape \(2, 3\) .*6 elements"),
        ("concatenate", [(2, 3), (3, 4)], {"axis": 0}, r"concatenate: field 1 \(3, 4\) differs"),
        ("split", [(5, 2)], {"indices_or_sections": 2}, r"split: axis 0 of size 5 does not"),
        ("squeeze", [(2, 3)], {"axis": [0]}, r"squeeze: cannot squeeze axis 0: it has size 2"),
        (
            "nn.conv2d",
            [(1, 3, 8, 8), (4, 2, 3, 3)],
            {"groups": 1},
            r"nn.conv2d: data \(1, 3, 8, 8\) has 3 input channels",
        ),
        ("nn.max_pool2d", [(1, 1, 2, 2)], {"pool_size": [3, 3]}, r"smaller than the dilated pool"),
        ("nn.bias_add", [(2, 4), (3,)], {"axis": 1}, r"nn.bias_add: cannot broadcast"),
        ("take", [(3, 4), (2, 2)], {"axis": 1, "batch_dims": 1}, r"take: batch dimension 0"),
        ("gather", [(3, 4), (2, 5)], {"axis": 0}, r"gather: indices \(2, 5\) are longer than"),
        (
            "scatter_nd",
            [(5, 4), (1, 3), (3, 5)],
            {},
            r"scatter_nd: indices \(1, 3\) and updates \(3, 5\) do not fit",
        ),
        ("broadcast_to", [(3,)], {"shape": [2, 4]}, r"broadcast_to: cannot broadcast \(3,\)"),
    ],
)
def test_incompatible_shapes_raise_naming_the_operator_and_shapes(
    op: str, shapes: list, attrs: dict, pattern: str
) -> None:
    with pytest.raises(ShapeFuncError, match=pattern) as caught:
        op_output_shapes(op, shapes, attrs, ())
    assert isinstance(caught.value, ValueError)
    assert "input shapes" in str(caught.value)


def test_squeeze_without_axis_refuses_a_rank_it_was_not_compiled_for() -> None:
    assert op_output_shapes("squeeze", [(1, 3, 1)], {}, (1,)) == [(3,)]
    with pytest.raises(ShapeFuncError, match="compiled for rank 2"):
        op_output_shapes("squeeze", [(1, 3, 1)], {}, (2,))


def test_walk_refuses_an_input_of_the_wrong_rank() -> None:
    kernel = _kernel_description("exp", [((2, 3), F)], {})
    with pytest.raises(ShapeFuncError, match=r"input 0 of the kernel has shape \(2,\)"):
        output_shapes(kernel, [(2,)])
    with pytest.raises(ShapeFuncError, match="takes 1 inputs, given 2"):
        output_shapes(kernel, [(2, 3), (2, 3)])


def test_shape_function_refuses_output_vectors_of_the_wrong_length() -> None:
    function = load_shape_function(
        shape_func_description(_kernel_description("exp", [((2, 3), F)], {}))
    )
    with pytest.raises(ShapeFuncError, match="vector of 2 elements"):
        function(np.array([2, 3]), np.zeros(3, np.int64), np.zeros((), np.int64))
    with pytest.raises(ShapeFuncError, match="takes 3 arrays, given 2"):
        function(np.array([2, 3]), np.zeros(2, np.int64))


# --- invalid descriptions ----------------------------------------------------------------------


def _valid() -> dict:
    return shape_func_description(_kernel_description("add", [((2, 3), F), ((3,), F)], {}))


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d.update(extra=1), "unknown extra"),
        (lambda d: d.pop("inputs"), "missing inputs"),
        (lambda d: d.update(inputs=[["int64", 1]]), "inputs must be"),
        (lambda d: d.update(outputs=[["int64", 1], ["int32", 0]]), "outputs must be"),
        (lambda d: d["shape_func"].update(nodes="x"), "the kernel it computes shapes for"),
        (lambda d: d.update(shape_func=[]), "the kernel it computes shapes for"),
    ],
)
def test_invalid_shape_function_descriptions_are_refused(mutate: Any, pattern: str) -> None:
    description = _valid()
    mutate(description)
    with pytest.raises(KernelDescriptionError, match=pattern):
        check_shape_func(description)
    with pytest.raises(KernelDescriptionError, match=pattern):
        check_primitive(description)


def test_a_description_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(KernelDescriptionError, match="expected a mapping"):
        check_shape_func([("shape_func", {})])

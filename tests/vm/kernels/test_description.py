"""Kernel description validation: bad descriptions are rejected, without compiling, with a
message naming the node, its operator and the problem.

Malformed group: wrong container types and keys. Invalid group: unknown operators, wrong
argument counts, bad value indices, attribute problems, dtypes and ranks the operator does
not allow, declared outputs that disagree with the operator, bad results. (The compiler's registry
takes its attribute schemas from the kernel table, so the two cannot disagree.)
"""

from __future__ import annotations

import copy

import pytest

from vm.kernels import KernelDescriptionError, check_description, supported_ops

BRIEF_OPS = [
    "add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power",
    "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_not", "negative", "abs", "exp",
    "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "floor", "ceil", "round",
    "sign", "clip", "cast", "copy", "zeros", "ones", "full", "zeros_like", "ones_like",
    "full_like", "sum", "mean", "max", "min", "prod", "argmax", "argmin", "all", "any",
    "reshape", "transpose", "squeeze", "expand_dims", "concatenate", "stack", "split",
    "strided_slice", "take", "where", "broadcast_to", "nn.dense", "nn.bias_add", "nn.relu",
    "nn.softmax", "nn.log_softmax", "nn.batch_flatten", "nn.batch_matmul",
]  # fmt: skip

#: Shapes as values, data-dependent shapes and sorting (TVM's VM tests, issue 14).
DYNAMIC_OPS = [
    "shape_of", "ndarray_size", "dyn.reshape", "dyn.broadcast_to", "dyn.zeros", "dyn.ones",
    "dyn.full", "dyn.strided_slice", "arange", "argsort", "topk", "argwhere", "dyn.topk",
]  # fmt: skip

#: The detection operators, and the gathers and scatters by index tensors (issue 17).
VISION_OPS = [
    "vision.roi_align", "vision.all_class_non_max_suppression", "gather", "gather_nd",
    "scatter_elements", "scatter_nd", "image.resize2d",
]  # fmt: skip

#: The neural-network operators of the performance milestone (issue 4).
NN_OPS = [
    "nn.conv2d", "nn.conv2d_transpose", "nn.max_pool2d", "nn.avg_pool2d",
    "nn.global_avg_pool2d", "nn.global_max_pool2d", "nn.adaptive_avg_pool2d", "nn.batch_norm",
    "nn.layer_norm", "nn.group_norm", "nn.pad", "nn.dropout", "nn.leaky_relu", "nn.prelu",
    "nn.upsampling", "nn.contrib_conv2d_winograd_weight_transform",
    "nn.contrib_conv2d_winograd_without_weight_transform", "nn.matmul", "nn.contrib_dense_pack",
    "layout_transform", "nn.contrib_conv2d_gemm_without_weight_transform",
]  # fmt: skip


def good() -> dict:
    """A valid two-node description: exp(a + b)."""
    return {
        "inputs": [["float32", 2], ["float32", 1]],
        "outputs": [["float32", 2]],
        "nodes": [
            {"op": "add", "args": [0, 1], "attrs": {}, "outputs": [["float32", 2]]},
            {"op": "exp", "args": [2], "attrs": {}, "outputs": [["float32", 2]]},
        ],
        "results": [3],
    }


def one_node(op: str, inputs: list, outputs: list, attrs: dict | None = None, args=None) -> dict:
    return {
        "inputs": inputs,
        "outputs": outputs,
        "nodes": [
            {
                "op": op,
                "args": list(range(len(inputs))) if args is None else args,
                "attrs": attrs or {},
                "outputs": outputs,
            }
        ],
        "results": [len(inputs) + k for k in range(len(outputs))],
    }


def rejects(description: object, *fragments: str) -> None:
    with pytest.raises(KernelDescriptionError) as info:
        check_description(description)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


# --- valid -------------------------------------------------------------------------------------


def test_a_valid_description_is_accepted() -> None:
    assert check_description(good()) is None


def test_supported_ops_are_the_required_set() -> None:
    assert sorted(BRIEF_OPS + NN_OPS + DYNAMIC_OPS + VISION_OPS) == supported_ops()


def test_omitted_attributes_take_their_defaults() -> None:
    desc = one_node("sum", [["int32", 3]], [["int32", 0]])
    check_description(desc)
    desc = one_node("sum", [["int32", 3]], [["int32", 2]], {"axis": 1})
    check_description(desc)


# --- malformed ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "fragments"),
    [
        (lambda d: [], ("top level", "expected a mapping")),
        (lambda d: {**d, "extra": 1}, ("unknown key(s) extra",)),
        (lambda d: {k: v for k, v in d.items() if k != "results"}, ("missing key 'results'",)),
        (lambda d: {**d, "inputs": "float32"}, ("inputs must be a list",)),
        (lambda d: {**d, "inputs": [["float32"]]}, ("inputs[0] must be a [dtype, ndim] pair",)),
        (lambda d: {**d, "nodes": {}}, ("nodes must be a list",)),
        (lambda d: {**d, "outputs": []}, ("at least one output",)),
        (lambda d: {**d, "results": [3.0]}, ("results must be a list of value indices",)),
    ],
)
def test_malformed_structure_is_rejected(mutate, fragments) -> None:
    rejects(mutate(good()), *fragments)


def test_malformed_nodes_are_rejected() -> None:
    desc = good()
    desc["nodes"][1] = "exp"
    rejects(desc, "node 1", "expected a mapping")
    desc = good()
    desc["nodes"][1]["when"] = 0
    rejects(desc, "node 1 (exp)", "unknown key(s) when")
    desc = good()
    desc["nodes"][0]["op"] = 3
    rejects(desc, "node 0", "op must be an operator name")
    desc = good()
    del desc["nodes"][1]["outputs"]
    rejects(desc, "node 1 (exp)", "missing key 'outputs'")
    desc = good()
    desc["nodes"][1]["attrs"] = [1]
    rejects(desc, "node 1 (exp)", "attrs must be a mapping")


# --- invalid -----------------------------------------------------------------------------------


def test_unknown_op_suggests_close_names() -> None:
    desc = good()
    desc["nodes"][0]["op"] = "ad"
    rejects(desc, "node 0 (ad)", "unknown op 'ad'", "did you mean add")


@pytest.mark.parametrize(
    ("desc", "fragments"),
    [
        (one_node("add", [["float32", 1]], [["float32", 1]]), ("wrong arg count", "expected 2")),
        (one_node("concatenate", [["float32", 1]], [["float32", 1]], args=[]),
         ("wrong arg count", "at least 1")),
        (one_node("zeros", [["float32", 1]], [["float32", 1]], {"shape": [1]}),
         ("wrong arg count", "expected 0 arguments, found 1")),
    ],
)  # fmt: skip
def test_wrong_argument_counts_are_rejected(desc: dict, fragments: tuple) -> None:
    rejects(desc, *fragments)


@pytest.mark.parametrize("bad", [-1, 3, 4])
def test_argument_indices_must_be_defined_values(bad: int) -> None:
    # Value 3 is node 1's own output and value 4 does not exist at all.
    desc = good()
    desc["nodes"][1]["args"] = [bad]
    rejects(desc, "node 1 (exp)", f"refers to value {bad}", "values 0..2 are defined")


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (["complex64", 1], "dtype not allowed"),
        (["float8", 1], "dtype not allowed"),
        ([3, 1], "dtype not allowed"),
        (["float32", 33], "ndim out of range"),
        (["float32", -1], "ndim out of range"),
        (["float32", True], "ndim out of range"),
        (["float32", "2"], "ndim out of range"),
    ],
)
def test_input_dtypes_and_ranks_are_checked(spec: list, fragment: str) -> None:
    desc = good()
    desc["inputs"][0] = spec
    rejects(desc, "top level", fragment)


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "attrs", "fragments"),
    [
        ("reshape", [["float32", 2]], [["float32", 1]], {}, ("attribute newshape is missing",)),
        ("exp", [["float32", 2]], [["float32", 2]], {"axis": 0}, ("unknown attribute(s) axis",)),
        ("sum", [["float32", 2]], [["float32", 1]], {"axis": "1"}, ("attribute axis must be",)),
        ("sum", [["float32", 2]], [["float32", 2]], {"keepdims": 1}, ("keepdims must be a bool",)),
        ("sum", [["float32", 2]], [["float32", 1]], {"axis": [2]}, ("axis=2 is out of range",)),
        ("sum", [["float32", 2]], [["float32", 0]], {"axis": [0, -2]}, ("more than once",)),
        ("clip", [["float32", 2]], [["float32", 2]], {"a_min": "x", "a_max": 1.0},
         ("a_min must be a number",)),
        ("clip", [["float32", 2]], [["float32", 2]], {"a_min": 2.0, "a_max": 1.0},
         ("must not exceed",)),
        ("cast", [["float32", 2]], [["float32", 2]], {"dtype": "float8"},
         ("attribute dtype must be a dtype name",)),
        ("reshape", [["float32", 2]], [["float32", 1]], {"newshape": [1.5]},
         ("newshape must hold 64-bit ints",)),
        ("reshape", [["float32", 2]], [["float32", 2]], {"newshape": [-1, -1]},
         ("-1 only once",)),
        ("transpose", [["float32", 2]], [["float32", 2]], {"axes": [0, 0]}, ("more than once",)),
        ("split", [["float32", 2]], [["float32", 2]], {"indices_or_sections": 0},
         ("must be >= 1",)),
        ("take", [["float32", 2], ["int32", 1]], [["float32", 2]], {"mode": "raise"},
         ("mode must be one of 'clip', 'wrap', 'fast'",)),
        ("take", [["float32", 2], ["int32", 1]], [["float32", 2]], {"axis": 0, "batch_dims": 2},
         ("batch_dims=2 is out of range",)),
        ("strided_slice", [["float32", 2]], [["float32", 2]],
         {"begin": [0], "end": [1], "strides": [0]}, ("0 step",)),
        ("expand_dims", [["float32", 2]], [["float32", 3]], {"axis": 4},
         ("axis=4 is out of range",)),
    ],
)  # fmt: skip
def test_attribute_problems_are_named(op, inputs, outputs, attrs, fragments) -> None:
    rejects(one_node(op, inputs, outputs, attrs), f"node 0 ({op})", *fragments)


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "fragment"),
    [
        ("exp", [["int32", 1]], [["int32", 1]], "must be a floating-point tensor, found int32"),
        ("logical_and", [["float32", 1], ["float32", 1]], [["bool", 1]], "must be a bool tensor"),
        ("add", [["float32", 1], ["float64", 1]], [["float32", 1]], "must share one dtype"),
        ("add", [["bool", 1], ["bool", 1]], [["bool", 1]], "must be a numeric tensor"),
        ("take", [["float32", 1], ["float32", 1]], [["float32", 1]], "must be an integer tensor"),
        ("where", [["int32", 1], ["float32", 1], ["float32", 1]], [["float32", 1]],
         "condition must be a bool tensor"),
    ],
)  # fmt: skip
def test_dtypes_the_operator_does_not_allow_are_rejected(op, inputs, outputs, fragment) -> None:
    rejects(one_node(op, inputs, outputs), f"node 0 ({op})", "dtype not allowed", fragment)


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "fragment"),
    [
        (
            "nn.bias_add",
            [["float32", 2], ["float32", 2]],
            [["float32", 2]],
            "bias must have rank 1",
        ),
        ("nn.dense", [["float32", 2], ["float32", 3]], [["float32", 2]], "weight must have rank 2"),
        ("nn.softmax", [["float32", 0]], [["float32", 0]], "at least 1"),
        ("full", [["float32", 1]], [["float32", 1]], "fill_value must have rank 0"),
    ],
)
def test_ranks_the_operator_does_not_allow_are_rejected(op, inputs, outputs, fragment) -> None:
    attrs = {"shape": [2]} if op == "full" else {}
    rejects(one_node(op, inputs, outputs, attrs), f"node 0 ({op})", "ndim out of range", fragment)


@pytest.mark.parametrize(
    ("outputs", "fragment"),
    [
        ([["int32", 2]], "output 0 is declared int32[rank 2] but add of"),
        ([["float32", 1]], "produces float32[rank 2]"),
        ([["float32", 2], ["float32", 2]], "produces 1 output(s) but 2 are declared"),
    ],
)
def test_declared_outputs_must_be_what_the_operator_produces(outputs: list, fragment: str) -> None:
    desc = good()
    desc["nodes"][0]["outputs"] = outputs
    rejects(desc, "node 0 (add)", fragment)


def test_comparisons_produce_bool_and_argmax_int32() -> None:
    check_description(one_node("less", [["int8", 2], ["int8", 1]], [["bool", 2]]))
    rejects(one_node("less", [["int8", 2], ["int8", 1]], [["int8", 2]]), "produces bool[rank 2]")
    check_description(one_node("argmax", [["float16", 3]], [["int32", 0]]))
    rejects(one_node("argmax", [["float16", 3]], [["int64", 0]]), "produces int32[rank 0]")


def test_split_declares_one_output_per_piece() -> None:
    outputs = [["float32", 2]] * 3
    check_description(one_node("split", [["float32", 2]], outputs, {"indices_or_sections": 3}))
    rejects(
        one_node("split", [["float32", 2]], outputs[:2], {"indices_or_sections": [1, 4]}),
        "node 0 (split)",
        "produces 3 output(s) but 2 are declared",
    )


@pytest.mark.parametrize(
    ("results", "outputs", "fragment"),
    [
        ([4], [["float32", 2]], "results out of range: result 0 refers to value 4"),
        ([-1], [["float32", 2]], "results out of range"),
        ([3, 2], [["float32", 2]], "2 result(s) for 1 output(s)"),
        ([0], [["float32", 1]], "output 0 is declared float32[rank 1] but result value 0"),
    ],
)
def test_results_must_exist_and_match_the_outputs(results, outputs, fragment) -> None:
    desc = good()
    desc["results"] = results
    desc["outputs"] = outputs
    rejects(desc, "results", fragment)


def test_huge_descriptions_are_refused_before_code_generation() -> None:
    desc = good()
    node = desc["nodes"][1]
    desc["nodes"] = desc["nodes"][:1] + [copy.deepcopy(node) for _ in range(10_001)]
    rejects(desc, "nodes; at most 10000 allowed")


def test_validation_never_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    import vm.kernels.library as library

    def refuse(*args: object) -> None:
        raise AssertionError("check_description compiled something")

    monkeypatch.setattr(library, "_build", refuse)
    check_description(good())


# --- invalid: the neural-network operators -----------------------------------------------------

CONV = ("nn.conv2d", [["float32", 4], ["float32", 4]], [["float32", 4]])
POOL = [["float32", 4]], [["float32", 4]]
BN_IN = [["float32", 4]] + [["float32", 1]] * 4
BN_OUT = [["float32", 4], ["float32", 1], ["float32", 1]]
NORM_IN = [["float32", 3], ["float32", 1], ["float32", 1]]
PAD_IN = [["float32", 2], ["float32", 0]]


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "attrs", "fragments"),
    [
        (*CONV, {"data_layout": "NHWC"}, ("data_layout='NHWC' is not supported",)),
        (*CONV, {"kernel_layout": "HWIO"}, ("expected 'OIHW'",)),
        (*CONV, {"strides": [1, 2, 3]}, ("strides=(1, 2, 3) must hold 1 or 2 ints",)),
        (*CONV, {"dilation": [0]}, ("dilation=(0,) must hold values >= 1",)),
        (*CONV, {"padding": [1, 2, 3]}, ("must hold 1, 2 or 4 ints",)),
        (*CONV, {"padding": [-1]}, ("must not be negative",)),
        (*CONV, {"groups": 0}, ("groups=0 must be >= 1",)),
        (*CONV, {"channels": 0}, ("channels=0 must be >= 1",)),
        (*CONV, {"kernel_size": [3, 0]}, ("kernel_size=(3, 0) must hold values >= 1",)),
        (*CONV, {"out_dtype": "bool"}, ("out_dtype must be a numeric dtype",)),
        ("nn.conv2d_transpose", *CONV[1:], {"strides": [2, 2], "output_padding": [2, 0]},
         ("output_padding=(2, 0) must be smaller than the stride or the dilation",)),
        ("nn.max_pool2d", *POOL, {"pool_size": [0, 2]}, ("pool_size=(0, 2) must hold values",)),
        ("nn.max_pool2d", *POOL, {"layout": "NHWC"}, ("layout='NHWC' is not supported",)),
        ("nn.avg_pool2d", *POOL, {"ceil_mode": 1}, ("ceil_mode must be a bool",)),
        ("nn.adaptive_avg_pool2d", *POOL, {"output_size": [1, 2, 3]}, ("1 or 2 ints",)),
        ("nn.adaptive_avg_pool2d", *POOL, {"output_size": [0]}, ("values >= 1",)),
        ("nn.batch_norm", BN_IN, BN_OUT, {"epsilon": -1.0}, ("epsilon=-1.0 must not be negative",)),
        ("nn.batch_norm", BN_IN, BN_OUT, {"axis": 4}, ("axis=4 is out of range",)),
        ("nn.group_norm", NORM_IN, [["float32", 3]], {}, ("attribute num_groups is missing",)),
        ("nn.group_norm", NORM_IN, [["float32", 3]], {"num_groups": 0}, ("must be >= 1",)),
        ("nn.pad", PAD_IN, [["float32", 2]], {"pad_width": [[1, 1]]},
         ("pad_width has 1 (before, after) pairs but data has rank 2",)),
        ("nn.pad", PAD_IN, [["float32", 2]], {"pad_width": [[1, 1], [0, -2]]},
         ("entry 1 is (0, -2)",)),
        ("nn.pad", PAD_IN, [["float32", 2]], {"pad_width": [[1, 1], 2]}, ("entry 1 is 2",)),
        ("nn.pad", PAD_IN, [["float32", 2]], {"pad_width": [[0, 0]] * 2, "pad_mode": "wrap"},
         ("pad_mode must be one of 'constant', 'edge', 'reflect'",)),
        ("nn.upsampling", *POOL, {"method": "bicubic"}, ("must be one of",)),
        ("nn.upsampling", *POOL, {"scale_h": 0.0}, ("scale_h=0.0 must be a finite number > 0",)),
        ("image.resize2d", *POOL, {}, ("attribute size is missing",)),
        ("image.resize2d", *POOL, {"size": [2, 0]}, ("size=(2, 0) must hold values >= 1",)),
        ("image.resize2d", *POOL, {"size": 2, "method": "bicubic"}, ("must be one of",)),
        ("image.resize2d", *POOL, {"size": 2, "roi": [0, 1, 2]}, ("must hold 4 numbers",)),
        ("image.resize2d", *POOL, {"size": 2, "roi": ["a"]}, ("must be a list of numbers",)),
        ("image.resize2d", *POOL, {"size": 2, "cubic_alpha": float("inf")},
         ("cubic_alpha=inf must be finite",)),
        ("image.resize2d", *POOL, {"size": 2, "out_dtype": "bool"},
         ("out_dtype='bool' must be a numeric dtype",)),
        ("nn.dropout", [["float32", 2]], [["float32", 2]] * 2, {"rate": 1.5},
         ("rate=1.5 must be between 0 and 1",)),
    ],
)  # fmt: skip
def test_nn_attribute_problems_are_named(op, inputs, outputs, attrs, fragments) -> None:
    rejects(one_node(op, inputs, outputs, attrs), f"node 0 ({op})", *fragments)


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "attrs", "fragment"),
    [
        ("nn.conv2d", [["float32", 4], ["float32", 3]], [["float32", 4]], {},
         "ndim out of range: weight must have rank 4, found 3"),
        ("nn.conv2d", [["bool", 4], ["bool", 4]], [["bool", 4]], {},
         "dtype not allowed: data must be a numeric tensor"),
        ("nn.conv2d", [["float32", 4], ["float16", 4]], [["float32", 4]], {},
         "dtype not allowed: data has dtype float32 but weight has dtype float16"),
        ("nn.avg_pool2d", [["int32", 4]], [["int32", 4]], {},
         "dtype not allowed: data must be a floating-point tensor"),
        ("nn.global_max_pool2d", [["float32", 3]], [["float32", 3]], {},
         "ndim out of range: data must have rank 4"),
        ("nn.layer_norm", [["int32", 2], ["int32", 1], ["int32", 1]], [["int32", 2]], {},
         "dtype not allowed"),
        ("nn.layer_norm", [["float32", 2], ["float32", 2], ["float32", 1]], [["float32", 2]],
         {}, "ndim out of range: gamma must have rank 1"),
        ("nn.pad", [["float32", 2], ["float32", 1]], [["float32", 2]],
         {"pad_width": [[0, 0]] * 2}, "ndim out of range: pad_value must have rank 0"),
        ("nn.upsampling", [["int8", 4]], [["int8", 4]], {"method": "bilinear"},
         "dtype not allowed: data must be a floating-point tensor"),
        ("image.resize2d", [["int8", 4]], [["int8", 4]], {"size": 2},
         "dtype not allowed: data must be a floating-point tensor"),
        ("nn.leaky_relu", [["int32", 2]], [["int32", 2]], {}, "dtype not allowed"),
        ("nn.prelu", [["float32", 2], ["float32", 2]], [["float32", 2]], {},
         "ndim out of range: alpha must have rank 1"),
    ],
)  # fmt: skip
def test_nn_dtypes_and_ranks_are_checked(op, inputs, outputs, attrs, fragment) -> None:
    rejects(one_node(op, inputs, outputs, attrs), f"node 0 ({op})", fragment)


def test_nn_operators_with_several_outputs_declare_them_all() -> None:
    rejects(one_node("nn.batch_norm", BN_IN, BN_OUT[:1]), "produces 3 output(s) but 1 are declared")
    rejects(
        one_node("nn.dropout", [["float32", 2]], [["float32", 2]]),
        "produces 2 output(s) but 1 are declared",
    )
    check_description(one_node("nn.batch_norm", BN_IN, BN_OUT))

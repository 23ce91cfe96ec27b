"""The registry holds exactly the required operators, with TVM's fusion patterns and schemas."""

from __future__ import annotations

import subprocess
import sys

import pytest

from compiler.op import api, image, nn, vision
from compiler.op.registry import OpPattern, get_def, get_op, list_ops

E, B, I, R, O, X = (
    OpPattern.ELEMWISE,
    OpPattern.BROADCAST,
    OpPattern.INJECTIVE,
    OpPattern.COMM_REDUCE,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    OpPattern.OPAQUE,
)

BROADCAST_OPS = [
    "add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power",
    "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "where", "broadcast_to", "nn.bias_add",
]  # fmt: skip
ELEMWISE_OPS = [
    "logical_not", "negative", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "erf", "floor", "ceil", "round", "sign", "clip", "zeros", "ones", "full",
    "zeros_like", "ones_like", "full_like", "nn.relu",
]  # fmt: skip
INJECTIVE_OPS = [
    "cast", "copy", "reshape", "transpose", "squeeze", "expand_dims", "concatenate", "stack",
    "split", "strided_slice", "take", "nn.batch_flatten", "gather", "gather_nd",
]  # fmt: skip
REDUCE_OPS = ["sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin"]

EXPECTED_PATTERNS = {
    **dict.fromkeys(BROADCAST_OPS, B),
    **dict.fromkeys(ELEMWISE_OPS, E),
    **dict.fromkeys(INJECTIVE_OPS, I),
    **dict.fromkeys(REDUCE_OPS, R),
    "nn.dense": O,
    "nn.matmul": O,
    "nn.batch_matmul": O,
    # Dense layers and convolutions by weights packed in panels, and the packing.
    "nn.contrib_dense_pack": O,
    "nn.contrib_conv2d_gemm_without_weight_transform": O,
    "layout_transform": X,
    "nn.softmax": X,
    "nn.log_softmax": X,
    # Convolutions, pools, normalization and the other CNN operators.
    "nn.contrib_conv2d_winograd_weight_transform": X,
    "nn.contrib_conv2d_winograd_without_weight_transform": O,
    "nn.conv2d": O,
    "nn.conv2d_transpose": O,
    "nn.max_pool2d": O,
    "nn.avg_pool2d": O,
    "nn.global_max_pool2d": O,
    "nn.global_avg_pool2d": O,
    "nn.adaptive_avg_pool2d": O,
    "nn.batch_norm": X,
    "nn.layer_norm": X,
    "nn.group_norm": X,
    "nn.pad": I,
    "nn.dropout": X,
    "nn.leaky_relu": E,
    "nn.prelu": B,
    "nn.upsampling": I,
    "image.resize2d": I,
    # Shapes as values, data-dependent shapes and sorting: never fused.
    "shape_of": X,
    "ndarray_size": X,
    "dyn.reshape": X,
    "dyn.broadcast_to": X,
    "dyn.zeros": X,
    "dyn.ones": X,
    "dyn.full": X,
    "dyn.strided_slice": X,
    "arange": X,
    "argsort": X,
    "topk": X,
    "argwhere": X,
    "dyn.topk": X,
    # Scatters write anywhere in their output: never fused.
    "scatter_elements": X,
    "scatter_nd": X,
    # Detection: region pooling and box suppression, never fused.
    "vision.roi_align": X,
    "vision.all_class_non_max_suppression": X,
}

# Builders that are a second way to build an operator (TVM's ``dropout_raw``).
ALIAS_BUILDERS = {
    "nn.dropout_raw": "nn.dropout",
    "scatter": "scatter_elements",  # TVM's older names for two reductions
    "scatter_add": "scatter_elements",
}

# TVM's dyn.* operators: the builder of the static form makes them given a tensor shape.
DYN_FORMS = {
    "dyn.reshape": "reshape",
    "dyn.broadcast_to": "broadcast_to",
    "dyn.zeros": "zeros",
    "dyn.ones": "ones",
    "dyn.full": "full",
    "dyn.strided_slice": "strided_slice",
    "dyn.topk": "topk",
}

# Operators whose schema has an attribute without a default.
REQUIRED_ATTRS = {
    "image.resize2d": "size",
    "clip": "a_min",
    "cast": "dtype",
    "zeros": "shape",
    "ones": "shape",
    "full": "shape",
    "reshape": "newshape",
    "expand_dims": "axis",
    "split": "indices_or_sections",
    "strided_slice": "begin",
    "broadcast_to": "shape",
    "nn.group_norm": "num_groups",
    "nn.pad": "pad_width",
    "vision.roi_align": "pooled_size",
}


def test_registry_lists_exactly_the_required_operators():
    assert list_ops() == sorted(EXPECTED_PATTERNS)
    assert len(list_ops()) == 111


def test_every_operator_is_registered_after_one_definitions_module_is_imported_first():
    # A pass importing a helper from one definitions module must not hide the others.
    code = (
        "import compiler.op.defs_transform\n"
        "from compiler.op.registry import list_ops\n"
        "print(len(list_ops()))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(len(EXPECTED_PATTERNS))


@pytest.mark.parametrize("name", sorted(EXPECTED_PATTERNS))
def test_operator_pattern_and_arity(name):
    opdef = get_def(name)
    assert opdef.name == name
    assert opdef.pattern == EXPECTED_PATTERNS[name]
    assert opdef.num_inputs == len(opdef.arg_names)
    assert opdef.doc
    assert get_op(name).name == name
    assert get_op(name) is get_op(name)


@pytest.mark.parametrize("name", sorted(EXPECTED_PATTERNS))
def test_defaults_fill_every_attribute_or_required_ones_are_named(name):
    opdef = get_def(name)
    if name in REQUIRED_ATTRS:
        with pytest.raises(TypeError, match=f"{name} requires attribute {REQUIRED_ATTRS[name]}"):
            opdef.normalize_attrs({})
    else:
        attrs = opdef.normalize_attrs({})
        assert list(attrs) == [spec.name for spec in opdef.attrs]


def test_arities_of_operators_with_tuple_or_no_arguments():
    assert get_def("concatenate").num_inputs == 1
    assert get_def("stack").num_inputs == 1
    assert get_def("zeros").num_inputs == 0
    assert get_def("where").num_inputs == 3
    assert get_def("nn.dense").arg_names == ("data", "weight")


def test_every_operator_has_one_builder():
    builders = (
        set(api.__all__)
        | {f"nn.{name}" for name in nn.__all__}
        | {f"vision.{name}" for name in vision.__all__}
        | {f"image.{name}" for name in image.__all__}
    )
    assert builders - set(ALIAS_BUILDERS) == set(list_ops()) - set(DYN_FORMS)
    assert set(DYN_FORMS.values()) <= builders
    assert set(ALIAS_BUILDERS.values()) <= set(list_ops())
    for name in api.__all__:
        assert callable(getattr(api, name))
    for name in nn.__all__:
        assert callable(getattr(nn, name))
    for name in vision.__all__:
        assert callable(getattr(vision, name))
    for name in image.__all__:
        assert callable(getattr(image, name))


def test_unknown_operator_suggests_close_names():
    with pytest.raises(ValueError, match=r"unknown operator 'ad'.*did you mean add"):
        get_op("ad")
    with pytest.raises(ValueError, match=r"unknown operator 'nn\.dens'"):
        get_def("nn.dens")


def test_type_relations_check_the_argument_count():
    from compiler.op.registry import OpTypeError
    from tests.compiler.op._helpers import T

    with pytest.raises(OpTypeError, match="add: expected 2 arguments, found 1"):
        get_def("add").type_rel([T((2,))], get_def("add").normalize_attrs({}))
    with pytest.raises(OpTypeError, match="exp: expected 1 argument, found 2"):
        get_def("exp").type_rel([T((2,)), T((2,))], get_def("exp").normalize_attrs({}))


def test_run_time_shape_failures_are_value_errors_naming_the_operator():
    import numpy as np

    from tests.compiler.op._helpers import ref

    # Shapes with ``?`` type-check; the actual sizes then break the rule at run time.
    with pytest.raises(ValueError, match=r"^reshape: cannot reshape Tensor\[\(2, 3\), float64\]"):
        ref("reshape", np.zeros((2, 3)), newshape=(5, 7))
    with pytest.raises(ValueError, match=r"^add: operands could not be broadcast"):
        ref("add", np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match=r"^squeeze: cannot squeeze axis 0"):
        ref("squeeze", np.zeros((2, 3)), axis=0)


def test_references_return_fresh_contiguous_arrays():
    import numpy as np

    from tests.compiler.op._helpers import ref

    x = np.arange(12, dtype="float32").reshape(3, 4)
    outputs = [
        ref("reshape", x, newshape=(4, 3)),
        ref("transpose", x),
        ref("expand_dims", x, axis=0),
        ref("strided_slice", x, begin=(0, 1), end=(3, 4), strides=(1, 2)),
        ref("broadcast_to", x[0], shape=(2, 4)),
        ref("copy", x),
        ref("nn.batch_flatten", x),
        *ref("split", x, indices_or_sections=2, axis=1),
    ]
    for out in outputs:
        assert out.flags.c_contiguous and out.flags.writeable
        assert not np.shares_memory(out, x)


def test_references_view_memory_nothing_writes_instead_of_copying_it():
    import numpy as np

    from tests.compiler.op._helpers import ref

    # A frozen constant's reshape (the folding of every packed weight) stays a view; a
    # writable input's is still copied, so that the caller's later writes do not show.
    frozen = np.arange(12, dtype="float32")
    frozen.flags.writeable = False
    out = ref("reshape", frozen, newshape=(3, 4))
    assert np.shares_memory(out, frozen) and not out.flags.writeable
    writable = np.arange(12, dtype="float32")
    out = ref("reshape", writable, newshape=(3, 4))
    assert not np.shares_memory(out, writable) and out.flags.writeable
    # A read-only view of writable memory is not safe to keep either.
    view = writable[:]
    view.flags.writeable = False
    assert not np.shares_memory(ref("reshape", view, newshape=(3, 4)), writable)


def test_relations_and_references_fill_defaults_for_hand_built_attrs():
    import numpy as np

    from compiler.ir.attrs import Attrs
    from compiler.op.registry import OpTypeError
    from tests.compiler.op._helpers import T

    sum_def = get_def("sum")
    assert sum_def.type_rel([T((2, 3))], Attrs({"axis": 1})) == T((2,))
    out = sum_def.reference([np.ones((2, 3), "float32")], Attrs())
    assert out.shape == () and out == 6
    with pytest.raises(OpTypeError, match="attribute keepdims of sum must be a bool"):
        sum_def.type_rel([T((2, 3))], Attrs({"keepdims": "no"}))
    with pytest.raises(OpTypeError, match="operator reshape requires attribute newshape"):
        get_def("reshape").type_rel([T((2, 3))], Attrs())

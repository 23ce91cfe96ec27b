"""ONNX ScatterElements, Scatter and ScatterND imported by from_onnx agree with onnxruntime
and, without it, with onnx's numpy reference (returns), with constant and run-time indices
and every reduction; out-of-range indices and mismatched updates get errors naming them
(invalid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from compiler import relay
from compiler.frontend import OnnxImportError
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    check_against_ort,
    check_against_reference,
    needs_ort,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(41)
REDUCTIONS = [(16, "none"), (16, "add"), (16, "mul"), (18, "max"), (18, "min")]


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def both(proto, feeds) -> None:
    check_against_reference(proto, feeds, rtol=1e-5, atol=1e-5)
    if HAVE_ORT:
        check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


def unique_indices(data_shape, axis, index_shape) -> np.ndarray:
    """Indices along ``axis`` without repeats within each line (ONNX leaves repeats
    undefined without a reduction)."""
    size = data_shape[axis]
    lines = np.moveaxis(np.zeros(index_shape, dtype="int64"), axis, -1)
    for pos in np.ndindex(lines.shape[:-1]):
        lines[pos] = RNG.permutation(size)[: lines.shape[-1]] - RNG.integers(0, 2) * size
    return np.ascontiguousarray(np.moveaxis(lines, -1, axis))


@pytest.mark.parametrize("known", [True, False], ids=["constant-indices", "runtime-indices"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_without_reduction(known, axis):
    data = randn(4, 5)
    shape = [3, 4]
    shape[axis] = 3
    indices = unique_indices(data.shape, axis, tuple(shape))
    updates = randn(*shape)
    if known:
        proto, feeds = single_op(
            "ScatterElements", {"x": data}, {"axis": axis}, {"i": indices, "u": updates},
            input_order=["x", "i", "u"],
        )  # fmt: skip
    else:
        proto, feeds = single_op(
            "ScatterElements", {"x": data, "i": indices, "u": updates}, {"axis": axis}
        )
    both(proto, feeds)


@pytest.mark.parametrize("known", [True, False], ids=["constant-indices", "runtime-indices"])
@pytest.mark.parametrize(("opset", "reduction"), REDUCTIONS)
def test_scatter_elements_reductions_with_repeated_indices(known, opset, reduction):
    data = randn(3, 4)
    indices = np.array([[1, 1, 0], [3, -1, 3], [2, 0, 2]], dtype="int64")
    updates = randn(3, 3)
    attrs = {"axis": 1, "reduction": reduction}
    if reduction == "none":
        indices = np.array([[1, 2, 0], [3, -2, 0], [2, 0, 1]], dtype="int64")
    if known:
        proto, feeds = single_op(
            "ScatterElements", {"x": data}, attrs, {"i": indices, "u": updates},
            input_order=["x", "i", "u"], opset=opset,
        )  # fmt: skip
    else:
        proto, feeds = single_op(
            "ScatterElements", {"x": data, "i": indices, "u": updates}, attrs, opset=opset
        )
    both(proto, feeds)


@needs_ort
def test_deprecated_scatter_at_opset_10():
    indices = np.array([[0, 2], [1, 0]], dtype="int64")
    check_against_ort(
        *single_op(
            "Scatter", {"x": randn(2, 3), "i": indices, "u": randn(2, 2)}, {"axis": 1}, opset=10
        )
    )


@pytest.mark.parametrize("known", [True, False], ids=["constant-indices", "runtime-indices"])
@pytest.mark.parametrize(
    ("dshape", "indices"),
    [((4, 3), [[1], [3], [0]]), ((4, 3), [[1, 2], [3, 0]]), ((2, 3, 4), [[[1, -1]], [[0, 2]]])],
)
def test_scatter_nd_slices_and_elements(known, dshape, indices):
    data = randn(*dshape)
    indices = np.array(indices, dtype="int64")
    updates = randn(*(indices.shape[:-1] + dshape[indices.shape[-1] :]))
    if known:
        proto, feeds = single_op(
            "ScatterND", {"x": data}, {}, {"i": indices, "u": updates},
            input_order=["x", "i", "u"],
        )  # fmt: skip
    else:
        proto, feeds = single_op("ScatterND", {"x": data, "i": indices, "u": updates})
    both(proto, feeds)


@pytest.mark.parametrize(("opset", "reduction"), REDUCTIONS[1:])
@pytest.mark.parametrize("known", [True, False], ids=["constant-indices", "runtime-indices"])
def test_scatter_nd_reductions_with_repeated_rows(opset, reduction, known):
    data = randn(4, 3)
    indices = np.array([[1], [3], [1], [1]], dtype="int64")
    updates = randn(4, 3)
    attrs = {"reduction": reduction}
    if known:
        proto, feeds = single_op(
            "ScatterND", {"x": data}, attrs, {"i": indices, "u": updates},
            input_order=["x", "i", "u"], opset=opset,
        )  # fmt: skip
    else:
        proto, feeds = single_op(
            "ScatterND", {"x": data, "i": indices, "u": updates}, attrs, opset=opset
        )
    both(proto, feeds)


def test_scatter_nd_runs_on_the_vm():
    data = randn(5, 4)
    indices = np.array([[4], [0]], dtype="int64")
    proto, feeds = single_op("ScatterND", {"x": data, "i": indices, "u": randn(2, 4)})
    expected = check_against_reference(proto, feeds)
    np.testing.assert_array_equal(run_vm(proto, feeds)[0], expected[0])


# --- invalid -----------------------------------------------------------------------------------


def test_scatter_index_out_of_range_is_named():
    proto, _ = single_op(
        "ScatterElements", {"x": randn(2, 3)}, {"axis": 1},
        {"i": np.array([[0, -4]], "int64"), "u": randn(1, 2)}, input_order=["x", "i", "u"],
    )  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"scatterelements_0.*index -4 at position \(0, 1\)"):
        relay.frontend.from_onnx(proto)


@needs_ort
def test_runtime_indices_into_a_large_tensor_with_sizes_known_only_at_run_time():
    # The RoI pooler of torchvision's Faster R-CNN scatters into a tensor whose size comes
    # from the number of boxes kept; here every size is left to run time.
    indices = RNG.integers(-2048, 2048, (2048, 3)).astype("int64")
    feeds = {"x": randn(2048, 2048), "i": indices, "u": randn(2048, 3)}
    proto, feeds = single_op("ScatterElements", feeds, {"axis": 1, "reduction": "add"}, opset=16)
    for value in proto.graph.input:
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            dim.dim_param = f"{value.name}{k}"
    check_against_ort(proto, feeds)


@needs_ort
@pytest.mark.parametrize("known", [True, False], ids=["constant-indices", "runtime-indices"])
def test_scatter_elements_with_indices_smaller_than_data_on_other_axes(known):
    indices = np.array([[2, 0], [1, -2]], dtype="int64")
    inputs = {"x": randn(3, 4), "i": indices, "u": randn(2, 2)}
    constants = None
    if known:
        constants = {"i": inputs.pop("i"), "u": inputs.pop("u")}
    proto, feeds = single_op(
        "ScatterElements", inputs, {"axis": 0}, constants, input_order=["x", "i", "u"]
    )
    check_against_ort(proto, feeds)


@needs_ort
@pytest.mark.parametrize("known", [True, False], ids=["constant-indices", "runtime-indices"])
def test_the_last_update_of_a_repeated_position_wins_without_reduction(known):
    # ONNX leaves this undefined; onnxruntime writes in order, so the last update wins.
    indices = np.array([[1], [3], [1], [0], [1]], dtype="int64")
    inputs = {"x": randn(4, 3), "i": indices, "u": randn(5, 3)}
    constants = {"i": inputs.pop("i"), "u": inputs.pop("u")} if known else None
    proto, feeds = single_op("ScatterND", inputs, {}, constants, input_order=["x", "i", "u"])
    check_against_ort(proto, feeds)

"""ONNX indexing and rearranging operators imported by from_onnx agree with onnxruntime
and, without it, with onnx's numpy reference (returns): GatherElements, GatherND, OneHot,
Trilu, CumSum, DepthToSpace, SpaceToDepth, Hardmax, TopK and ReverseSequence; indices out
of range or shapes that do not fit get errors naming them (invalid), and a TopK k fed at run
time outside the axis fails when it runs (traps)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import helper

import vm
from compiler import relay
from compiler.frontend import OnnxImportError, OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    check_against_ort,
    check_against_reference,
    model,
    needs_ort,
    run_ort,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(31)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def both(proto, feeds, **tolerance) -> None:
    """Compare with onnx's reference always, and with onnxruntime when it is installed."""
    check_against_reference(proto, feeds, **tolerance)
    if HAVE_ORT:
        check_against_ort(proto, feeds, **tolerance)


# --- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_gather_elements_along_every_axis_with_negative_indices(axis, dtype):
    data = randn(3, 4, 5)
    shape = list(data.shape)
    size = data.shape[axis]
    shape[axis] = 6
    indices = RNG.integers(-size, size, shape).astype(dtype)
    proto, feeds = single_op("GatherElements", {"x": data, "i": indices}, {"axis": axis})
    if axis >= 0:  # (onnx's reference mishandles a negative axis)
        check_against_reference(proto, feeds)
    if HAVE_ORT:
        check_against_ort(proto, feeds)


def test_gather_elements_with_constant_indices_runs_on_the_vm():
    data = randn(2, 6)
    indices = RNG.integers(-6, 6, (2, 9)).astype("int64")
    proto, feeds = single_op("GatherElements", {"x": data}, {"axis": 1}, {"i": indices})
    expected = check_against_reference(proto, feeds)
    np.testing.assert_array_equal(run_vm(proto, feeds)[0], expected[0])


@pytest.mark.parametrize(
    ("dshape", "ishape", "batch_dims"),
    [((4, 5), (3, 2), 0), ((4, 5, 3), (2, 1), 0), ((4, 5, 3), (2, 2, 3), 0),
     ((2, 4, 5), (2, 3, 1), 1), ((2, 3, 4, 5), (2, 3, 2), 2)],
)  # fmt: skip
def test_gather_nd_with_batch_dims(dshape, ishape, batch_dims):
    data = randn(*dshape)
    bounds = np.array(dshape[batch_dims : batch_dims + ishape[-1]])
    indices = (RNG.integers(0, 1 << 30, ishape) % (2 * bounds) - bounds).astype("int64")
    both(*single_op("GatherND", {"x": data, "i": indices}, {"batch_dims": batch_dims}))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_with_negative_and_out_of_range_indices(axis):
    indices = np.array([[0, 3, -1], [-5, 7, 2]], dtype="int64")
    constants = {"d": np.array(5, "int64"), "v": np.array([-2.0, 3.5], "float32")}
    both(*single_op("OneHot", {"i": indices}, {"axis": axis}, constants))


@needs_ort
def test_one_hot_truncates_float_indices():
    indices = np.array([0.0, 2.7, -1.2], dtype="float32")
    constants = {"d": np.array([4], "int64"), "v": np.array([0, 1], "int64")}
    check_against_ort(*single_op("OneHot", {"i": indices}, {}, constants))


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -7])
def test_trilu_with_every_diagonal_offset(upper, k):
    constants = None if k is None else {"k": np.array(k, "int64")}
    both(*single_op("Trilu", {"x": randn(2, 4, 5)}, {"upper": upper}, constants))


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum_exclusive_and_reverse(exclusive, reverse, axis):
    attrs = {"exclusive": exclusive, "reverse": reverse}
    constants = {"a": np.array(axis, "int64")}
    both(*single_op("CumSum", {"x": randn(3, 6)}, attrs, constants), rtol=1e-5, atol=1e-5)


def test_cumsum_of_integers_along_a_middle_axis():
    x = RNG.integers(-9, 9, (2, 5, 3)).astype("int32")
    both(*single_op("CumSum", {"x": x}, {}, {"a": np.array(1, "int32")}))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    both(*single_op("DepthToSpace", {"x": randn(2, 8, 3, 4)}, {"blocksize": 2, "mode": mode}))
    both(*single_op("SpaceToDepth", {"x": randn(2, 3, 6, 9)}, {"blocksize": 3}))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_hardmax_along_an_axis(axis):
    both(*single_op("Hardmax", {"x": randn(2, 3, 4)}, {"axis": axis}, opset=13))


@needs_ort
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_hardmax_over_flattened_trailing_axes_before_opset_13(axis):
    check_against_ort(*single_op("Hardmax", {"x": randn(2, 3, 4)}, {"axis": axis}, opset=11))


@needs_ort
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("opset", [10, 11])
def test_topk_with_constant_k(largest, axis, opset):
    attrs = {"axis": axis} if opset == 10 else {"axis": axis, "largest": largest}
    constants = {"k": np.array([3], "int64")}
    check_against_ort(
        *single_op("TopK", {"x": randn(4, 6)}, attrs, constants, outputs=2, opset=opset)
    )


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 2)])
def test_nonzero_lists_the_indices_one_row_per_axis(shape):
    x = RNG.integers(0, 2, size=shape).astype("float32")
    both(*single_op("NonZero", {"x": x}))
    both(*single_op("NonZero", {"x": x.astype(bool)}))


def test_nonzero_runs_any_input_through_one_executable():
    proto, _ = single_op("NonZero", {"x": np.zeros((3, 4), "int32")})
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    for x in (np.eye(3, 4, dtype="int32"), np.zeros((3, 4), "int32"), np.ones((3, 4), "int32")):
        got = machine.invoke("main", x).numpy()
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.array(np.nonzero(x)))


def test_nonzero_of_a_constant_is_folded():
    proto, feeds = single_op("NonZero", {}, constants={"c": np.array([[0, 2], [3, 0]], "int64")})
    both(proto, feeds)


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_with_k_fed_at_run_time_runs_every_k_through_one_executable(largest):
    x = randn(4, 7)
    proto, _ = single_op(
        "TopK", {"x": x, "k": np.array([3], "int64")}, {"axis": 1, "largest": largest},
        outputs=2, opset=11,
    )  # fmt: skip
    both(proto, {"x": x, "k": np.array([3], "int64")})
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    order = np.argsort(x if not largest else -x, axis=1, kind="stable")
    for keep in (1, 5, 7, 0):  # k = 0 keeps nothing, as onnxruntime's TopK does
        values, indices = machine.invoke("main", x, np.array([keep], "int64"))
        assert values.shape == indices.shape == (4, keep)
        np.testing.assert_array_equal(indices.numpy(), order[:, :keep])
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order[:, :keep], 1))


def test_topk_with_a_run_time_k_along_a_leading_axis():
    x = randn(6, 3)
    proto, _ = single_op(
        "TopK", {"x": x, "k": np.array([2], "int64")}, {"axis": 0}, outputs=2, opset=11
    )
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    order = np.argsort(-x, axis=0, kind="stable")
    for keep in (0, 2, 6):
        values, indices = machine.invoke("main", x, np.array([keep], "int64"))
        np.testing.assert_array_equal(indices.numpy(), order[:keep])
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order[:keep], 0))


def test_topk_with_k_as_an_attribute_before_opset_10():
    both(*single_op("TopK", {"x": randn(3, 5)}, {"k": 2}, outputs=2, opset=9))


@pytest.mark.parametrize(("batch_axis", "time_axis"), [(1, 0), (0, 1)])
def test_reverse_sequence_on_either_layout(batch_axis, time_axis):
    shape = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
    lengths = np.array([4, 1, 3], dtype="int64")
    attrs = {"batch_axis": batch_axis, "time_axis": time_axis}
    both(*single_op("ReverseSequence", {"x": randn(*shape), "l": lengths}, attrs))


# --- traps -------------------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [-1, 8])
def test_a_run_time_topk_k_outside_the_axis_fails_naming_k_and_the_machine_goes_on(keep):
    # onnxruntime refuses both; TVM's rule (k < 1 keeps all) must not apply to ONNX models.
    x = randn(4, 7)
    proto, _ = single_op(
        "TopK", {"x": x, "k": np.array([3], "int64")}, {"axis": 1}, outputs=2, opset=11
    )
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    with pytest.raises(vm.VMError, match=rf"k={keep} must lie between 0 and the length 7"):
        machine.invoke("main", x, np.array([keep], "int64"))
    values, _ = machine.invoke("main", x, np.array([2], "int64"))
    np.testing.assert_array_equal(values.numpy(), -np.sort(-x, axis=1)[:, :2])


# --- invalid -----------------------------------------------------------------------------------


def test_gather_elements_index_out_of_range_is_named():
    proto, _ = single_op(
        "GatherElements", {"x": randn(2, 3)}, {"axis": 1}, {"i": np.array([[0, 3]], "int64")}
    )
    with pytest.raises(OnnxImportError, match=r"gatherelements_0.*index 3 at position \(0, 1\)"):
        relay.frontend.from_onnx(proto)


def test_gather_nd_addressing_too_many_axes_is_named():
    node = helper.make_node("GatherND", ["x", "i"], ["y"], name="gathernd_0")
    proto = model(
        [node], {"x": ("float32", (2, 3))}, {"y": ("float32", (1,))},
        {"i": np.zeros((1, 3), "int64")},
    )  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"gathernd_0.*address 3 axes"):
        relay.frontend.from_onnx(proto)


def test_depth_to_space_with_indivisible_channels_is_named():
    node = single_op("DepthToSpace", {"x": randn(1, 8, 2, 2)}, {"blocksize": 2})[0]
    node.graph.node[0].attribute[0].i = 3
    with pytest.raises(OnnxImportError, match=r"depthtospace_0.*8 channels do not divide"):
        relay.frontend.from_onnx(node)


EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 3)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_common_equations(equation, shapes):
    feeds = {f"x{i}": randn(*shape) for i, shape in enumerate(shapes)}
    both(*single_op("Einsum", feeds, {"equation": equation}, opset=12), rtol=1e-5, atol=1e-5)


def test_einsum_with_a_diagonal_is_named_as_unsupported():
    proto, _ = single_op("Einsum", {"x": randn(3, 3)}, {"equation": "ii->i"}, opset=12)
    with pytest.raises(OpNotImplemented, match=r"einsum_0.*'ii->i'.*diagonal"):
        relay.frontend.from_onnx(proto)


@needs_ort
def test_einsum_and_topk_run_on_the_vm():
    attention = single_op(
        "Einsum", {"q": randn(2, 3, 4), "k": randn(2, 5, 4)}, {"equation": "bqd,bkd->bqk"}, opset=12
    )
    topk = single_op(
        "TopK", {"x": randn(4, 6)}, {"largest": 0}, {"k": np.array([2], "int64")}, outputs=2
    )
    for proto, feeds in (attention, topk):
        for got, expected in zip(run_vm(proto, feeds), run_ort(proto, feeds)):
            assert got.dtype == expected.dtype
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@needs_ort
def test_gather_elements_with_indices_smaller_than_data_on_other_axes():
    indices = np.array([[2, 0], [1, -3]], dtype="int64")
    check_against_ort(*single_op("GatherElements", {"x": randn(3, 4), "i": indices}, {"axis": 0}))


def test_gather_nd_takes_rows_counted_only_at_run_time():
    # NonZero's positions, transposed to rows, pick the non-zero values: the row count is
    # known only when the model runs (as for the boxes NonMaxSuppression keeps).
    nodes = [
        helper.make_node("NonZero", ["x"], ["where"]),
        helper.make_node("Transpose", ["where"], ["rows"], perm=[1, 0]),
        helper.make_node("GatherND", ["x", "rows"], ["y"]),
    ]
    proto = model(nodes, {"x": ("float32", (3, 4))}, ["y"])
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    for density in (0.0, 0.3, 1.0):
        x = np.where(RNG.random((3, 4)) < density, randn(3, 4), 0).astype("float32")
        np.testing.assert_array_equal(machine.invoke("main", x).numpy(), x[x != 0])
    both(proto, {"x": np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 4, 5]], "float32")})

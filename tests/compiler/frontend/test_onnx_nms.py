"""ONNX NonMaxSuppression imported by from_onnx agrees exactly with onnxruntime and onnx's
reference evaluator, on the reference interpreter and on the VM (returns): overlapping
boxes with tied scores, several batches and classes, corner and centre boxes, optional
inputs absent, scalar or one-element, limits of none, some and more than there are, and
thresholds that keep no box; one executable serves inputs that keep different numbers of
boxes. Wrong ranks and boxes and scores of different counts are errors naming them, at
import when the shapes are known and when the model runs otherwise; so is an IoU
threshold outside [0, 1] (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import helper, numpy_helper

import vm
from compiler import relay
from compiler.frontend import OnnxImportError, OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    model,
    needs_ort,
    run_ort,
    run_reference,
    run_relay,
    run_vm,
)

RNG = np.random.default_rng(23)

INPUTS = ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold")


def boxes_and_scores(b: int, c: int, n: int, center: bool = False) -> dict[str, np.ndarray]:
    """Boxes on a small grid (many overlap, some coincide) and scores with many ties."""
    if center:
        boxes = np.concatenate(
            [RNG.integers(0, 8, (b, n, 2)), RNG.integers(1, 5, (b, n, 2))], axis=2
        ).astype("float32")
    else:
        boxes = RNG.integers(0, 8, size=(b, n, 4)).astype("float32")
    scores = (RNG.integers(0, 5, size=(b, c, n)) / 5).astype("float32")
    return {"boxes": boxes, "scores": scores}


def nms(feeds: dict[str, np.ndarray], present=INPUTS, opset: int = 11, **attrs):
    """A NonMaxSuppression model reading ``present`` (the other optional inputs absent)
    from graph inputs."""
    names = [name if name in present else "" for name in INPUTS]
    while not names[-1]:
        names.pop()
    node = helper.make_node("NonMaxSuppression", names, ["selected"], name="nms", **attrs)
    inputs = {k: (v.dtype.name, v.shape) for k, v in feeds.items() if k in present}
    proto = model([node], inputs, {"selected": ("int64", ["selected", 3])}, opset=opset)
    return proto, {k: v for k, v in feeds.items() if k in present}


def limits(limit: int, iou: float, threshold: float, rank: int = 1) -> dict[str, np.ndarray]:
    shape = () if rank == 0 else (1,)
    return {
        "max_output_boxes_per_class": np.full(shape, limit, "int64"),
        "iou_threshold": np.full(shape, iou, "float32"),
        "score_threshold": np.full(shape, threshold, "float32"),
    }


def agree(proto, feeds, reference: bool = True) -> np.ndarray:
    """The selected indices, the same on the interpreter and the VM as from onnxruntime
    (when installed) and onnx's reference (when it can run the model)."""
    oracles = []
    if reference:
        oracles.append(("onnx reference", run_reference(proto, feeds)[0]))
    if HAVE_ORT:
        oracles.append(("onnxruntime", run_ort(proto, feeds)[0]))
    assert oracles, "no oracle for this case"
    for runner in (run_relay, run_vm):
        (got,) = runner(proto, feeds)
        for name, want in oracles:
            assert got.dtype == np.int64, f"{runner.__name__}: dtype {got.dtype}"
            np.testing.assert_array_equal(got, want, err_msg=f"{runner.__name__} vs {name}")
    return oracles[0][1]


# --- returns -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("b", "c", "n"), [(1, 1, 6), (2, 3, 10), (3, 2, 16)])
@pytest.mark.parametrize("center", [0, 1])
def test_nms_keeps_the_boxes_the_references_keep(b, c, n, center):
    for limit, iou, threshold in ((3, 0.3, 0.1), (100, 0.0, 0.0), (2, 1.0, -1.0), (4, 0.6, 0.4)):
        feeds = {**boxes_and_scores(b, c, n, bool(center)), **limits(limit, iou, threshold)}
        agree(*nms(feeds, center_point_box=center))


@pytest.mark.parametrize("opset", [10, 11])
def test_nms_on_random_boxes_in_both_opsets(opset):
    boxes = RNG.random((2, 30, 4)).astype("float32") * 10
    scores = RNG.random((2, 4, 30)).astype("float32")
    agree(*nms({"boxes": boxes, "scores": scores, **limits(5, 0.5, 0.3)}, opset=opset))


def test_nms_keeps_no_box_when_every_score_is_below_the_threshold():
    feeds = {**boxes_and_scores(2, 2, 5), **limits(5, 0.5, 0.9)}
    selected = agree(*nms(feeds))
    assert selected.shape == (0, 3)


def test_nms_breaks_ties_by_box_index():
    boxes = np.array([[[0, 0, 1, 1], [2, 2, 3, 3], [0, 0, 1, 1], [1, 1, 0, 0], [5, 5, 6, 6]]])
    feeds = {
        "boxes": boxes.astype("float32"),
        "scores": np.full((1, 1, 5), 0.5, "float32"),
        **limits(10, 0.5, 0.0),
    }
    selected = agree(*nms(feeds))
    np.testing.assert_array_equal(selected, [[0, 0, 0], [0, 0, 1], [0, 0, 4]])


@needs_ort
@pytest.mark.parametrize(
    "present",
    [INPUTS[:2], INPUTS[:3], INPUTS[:4], (*INPUTS[:3], INPUTS[4])],
    ids=["no-optional-inputs", "no-thresholds", "no-score-threshold", "no-iou-threshold"],
)
def test_nms_absent_inputs_take_the_onnx_defaults(present):
    # onnx's reference evaluator needs all five inputs; onnxruntime is the oracle here.
    feeds = {**boxes_and_scores(2, 2, 8), **limits(3, 0.4, 0.2)}
    feeds["scores"][0, 0, 1] = -np.inf  # kept only when there is no score threshold
    agree(*nms(feeds, present=present), reference=False)


@needs_ort
def test_nms_takes_scalars_of_rank_0():
    feeds = {**boxes_and_scores(2, 3, 8), **limits(3, 0.4, 0.2, rank=0)}
    agree(*nms(feeds), reference=False)


@pytest.mark.parametrize("limit", [0, -1, 1, 1 << 40])
def test_nms_keeps_at_most_the_limit_per_class(limit):
    feeds = {**boxes_and_scores(2, 2, 9), **limits(limit, 0.7, 0.0)}
    if limit >= 0:
        selected = agree(*nms(feeds))
    else:  # onnx's reference fails below 0; a negative limit keeps nothing, as 0 does
        proto, feeds = nms(feeds)
        if HAVE_ORT:
            agree(proto, feeds, reference=False)
        for runner in (run_relay, run_vm):
            (selected,) = runner(proto, feeds)
            assert selected.shape == (0, 3) and selected.dtype == np.int64
    counts = np.unique(selected[:, :2], axis=0, return_counts=True)[1]
    assert (counts <= max(limit, 0)).all()


def test_one_executable_keeps_as_many_boxes_as_each_input_allows():
    feeds = {**boxes_and_scores(1, 2, 6), **limits(6, 0.5, 0.0)}
    proto, _ = nms(feeds)
    mod, params = relay.frontend.from_onnx(proto, shape={k: v.shape for k, v in feeds.items()})
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    disjoint = np.array([[[3 * i, 0, 3 * i + 1, 1] for i in range(6)]], "float32")
    same = np.tile(np.array([0, 0, 2, 2], "float32"), (1, 6, 1))
    scores = np.tile(np.linspace(0.1, 0.9, 6, dtype="float32"), (1, 2, 1))
    # (boxes, score threshold, boxes kept): all, the three best per class, one per class, none
    for boxes, threshold, kept in ((disjoint, 0.0, 12), (disjoint, 0.5, 6), (same, 0.0, 2),
                                   (disjoint, 2.0, 0), (disjoint, 0.0, 12)):  # fmt: skip
        case = {"boxes": boxes, "scores": scores, **limits(6, 0.5, threshold)}
        got = machine.invoke("main", **case).numpy()
        assert got.shape == (kept, 3)
        np.testing.assert_array_equal(got, run_reference(proto, case)[0])


def test_one_executable_takes_any_number_of_boxes_and_classes():
    proto, _ = nms({**boxes_and_scores(1, 1, 1), **limits(3, 0.5, 0.1)}, present=INPUTS)
    for value in proto.graph.input[:2]:  # boxes and scores of any size
        for dim in value.type.tensor_type.shape.dim:
            dim.dim_param = "any"
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    for b, c, n in ((1, 1, 4), (2, 3, 11), (1, 2, 0)):
        case = {**boxes_and_scores(b, c, n), **limits(3, 0.5, 0.1)}
        np.testing.assert_array_equal(
            machine.invoke("main", **case).numpy(), run_reference(proto, case)[0]
        )


def test_nms_of_constants_is_folded_at_import():
    feeds = {**boxes_and_scores(1, 2, 6), **limits(2, 0.5, 0.1)}
    nodes = [
        helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))
        for name, value in feeds.items()
    ]
    nodes.append(helper.make_node("NonMaxSuppression", list(INPUTS), ["selected"]))
    proto = model(nodes, {}, {"selected": ("int64", ["selected", 3])}, opset=11)
    mod, _ = relay.frontend.from_onnx(proto)
    assert isinstance(mod["main"].body, relay.Constant)
    np.testing.assert_array_equal(mod["main"].body.data, run_reference(proto, {})[0])


# --- invalid -------------------------------------------------------------------------------------


def test_boxes_and_scores_of_the_wrong_rank_are_named():
    feeds = {**boxes_and_scores(1, 2, 5), **limits(3, 0.5, 0.1)}
    for name, bad in (("boxes", feeds["boxes"][0]), ("scores", feeds["scores"][0])):
        proto, _ = nms({**feeds, name: bad})
        with pytest.raises(OnnxImportError, match=rf"'nms'.*argument {name} must be 3-D"):
            relay.frontend.from_onnx(proto)


def test_boxes_and_scores_of_different_box_counts_are_named():
    feeds = {**boxes_and_scores(1, 2, 5), **limits(3, 0.5, 0.1)}
    proto, _ = nms({**feeds, "scores": feeds["scores"][:, :, :4]})
    with pytest.raises(OnnxImportError, match=r"scores boxes \(axis 2\) against boxes.*4 vs 5"):
        relay.frontend.from_onnx(proto)
    proto, _ = nms({**feeds, "boxes": feeds["boxes"][:, :, :3]})
    with pytest.raises(OnnxImportError, match=r"boxes coordinates \(axis 2\).*3 vs 4"):
        relay.frontend.from_onnx(proto)


def test_box_counts_known_only_at_run_time_are_checked_when_it_runs():
    feeds = {**boxes_and_scores(1, 2, 5), **limits(3, 0.5, 0.1)}
    proto, _ = nms(feeds)
    for value in proto.graph.input[:2]:
        for dim in value.type.tensor_type.shape.dim:
            dim.dim_param = "any"
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    with pytest.raises(vm.VMError, match=r"scores boxes \(axis 2\) against .*expected 5, found 4"):
        machine.invoke("main", **{**feeds, "scores": feeds["scores"][:, :, :4]})
    machine.invoke("main", **feeds)  # the machine is still usable


def test_an_iou_threshold_outside_0_to_1_is_refused_when_it_runs():
    feeds = {**boxes_and_scores(1, 2, 5), **limits(3, 1.5, 0.1)}
    with pytest.raises((ValueError, vm.VMError), match="iou_threshold must be between 0 and 1"):
        run_vm(*nms(feeds))
    if HAVE_ORT:  # onnxruntime refuses it too
        with pytest.raises(Exception, match=r"iou_threshold must be in range \[0, 1\]"):
            run_ort(*nms(feeds))


def test_center_point_box_other_than_0_or_1_is_unsupported():
    feeds = {**boxes_and_scores(1, 2, 5), **limits(3, 0.5, 0.1)}
    with pytest.raises(OpNotImplemented, match="center_point_box=2"):
        relay.frontend.from_onnx(nms(feeds, center_point_box=2)[0])

"""``vision.roi_align`` and ``vision.all_class_non_max_suppression``: output types from any
mix of known and ``?`` sizes, the references on small cases worked by hand (returns), and
arguments of the wrong rank, dtype or size named in the error (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.op.registry import OpTypeError
from tests.compiler.op._helpers import T, Tup, ref, rel

NMS = "vision.all_class_non_max_suppression"


def nms_types(boxes=(2, 5, 4), scores=(2, 3, 5), limit=(), iou=(1,), threshold=(0,)):
    return (
        T(boxes), T(scores), T(limit, "int64"), T(iou, "float32"), T(threshold, "float32"),
    )  # fmt: skip


# --- returns -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "rois", "pooled", "expected"),
    [
        ((2, 3, 10, 12), (7, 5), (3, 4), (7, 3, 3, 4)),
        ((None, 8, None, None), (None, 5), 2, (None, 8, 2, 2)),
        ((1, 1, 4, 4), (None, None), (1, 1), (None, 1, 1, 1)),
    ],
)
def test_roi_align_types(data, rois, pooled, expected):
    out = rel("vision.roi_align", T(data), T(rois), pooled_size=pooled, spatial_scale=0.5)
    assert out == T(expected)


@pytest.mark.parametrize(
    ("boxes", "scores", "rows"),
    [((2, 5, 4), (2, 3, 5), 30), ((None, 5, 4), (2, 3, None), 30), ((1, None, 4), (1, 2, 7), 14),
     ((1, None, None), (None, 2, None), None), ((1, 0, 4), (1, 9, 0), 0)],
)  # fmt: skip
def test_nms_types(boxes, scores, rows):
    out = rel(NMS, *nms_types(boxes, scores))
    assert out == Tup(T((rows, 3), "int64"), T((1,), "int64"))


def test_roi_align_reference_averages_the_bilinear_samples():
    # A ramp image: each bilinear sample is the ramp at its position, so every bin's
    # average is the ramp at the bin's centre.
    data = np.arange(16, dtype="float32").reshape(1, 1, 4, 4)
    rois = np.array([[0, 0, 0, 2, 2], [0, 1, 1, 3, 3]], "float32")
    out = ref("vision.roi_align", data, rois, pooled_size=1, spatial_scale=1.0, sample_ratio=2)
    np.testing.assert_allclose(out[:, 0, 0, 0], [1 * 4 + 1, 2 * 4 + 2])
    aligned = ref(
        "vision.roi_align", data, rois, pooled_size=1, spatial_scale=1.0, aligned=True
    )  # half a pixel up and left, adaptive sampling
    np.testing.assert_allclose(aligned[:, 0, 0, 0], [0.5 * 4 + 0.5, 1.5 * 4 + 1.5])


def test_nms_reference_keeps_the_best_of_each_overlapping_group():
    boxes = np.array([[[0, 0, 2, 2], [0, 0, 2, 1.9], [3, 3, 4, 4], [4, 4, 3, 3]]], "float32")
    scores = np.array([[[0.5, 0.9, 0.7, 0.7], [0.1, 0.0, 0.2, 0.3]]], "float32")
    table, count = ref(NMS, boxes, scores, np.int64(10), np.float32(0.5), np.float32(0.05))
    # Class 0: box 1 suppresses box 0, box 2 (the lower index of a tie) its swapped twin 3;
    # class 1: box 1 scores below the threshold, box 3 suppresses box 2.
    assert count.tolist() == [4]
    assert table[:4].tolist() == [[0, 0, 1], [0, 0, 2], [0, 1, 3], [0, 1, 0]]
    assert not table[4:].any()
    _, count = ref(NMS, boxes, scores, np.int64(10), np.float32(1.0), np.zeros(0, "float32"))
    assert count.tolist() == [8]  # nothing overlaps by more than an IoU of 1: every box stays


def test_builders_take_numbers_or_expressions():
    boxes = relay.var("boxes", shape=(1, 4, 4))
    scores = relay.var("scores", shape=(1, 2, 4))
    limit = relay.var("limit", shape=(), dtype="int64")
    call = relay.vision.all_class_non_max_suppression(boxes, scores, limit, 0.5)
    assert call.args[2] is limit
    assert call.args[3].data.dtype == np.float32
    assert call.args[4].data.shape == (0,)  # no score threshold
    assert call.attrs["center_point_box"] is False and call.attrs["output_format"] == "onnx"
    call = relay.vision.roi_align(relay.var("x", shape=(1, 1, 4, 4)), relay.var("r"), 2, 0.5)
    assert call.attrs["pooled_size"] == (2,) and call.attrs["sample_ratio"] == -1


# --- invalid -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "rois", "attrs", "message"),
    [
        (T((1, 3, 4)), T((2, 5)), {}, "argument data must be a 4-D NCHW tensor"),
        (T((1, 3, 4, 4)), T((2, 5, 1)), {}, "argument rois must be 2-D (regions, 5)"),
        (T((1, 3, 4, 4)), T((2, 4)), {}, "rois columns (batch index, x1, y1, x2, y2): "
         "dimension 4 vs 5"),
        (T((1, 3, 4, 4), "int32"), T((2, 5), "int32"), {}, "argument data must be a float"),
        (T((1, 3, 4, 4)), T((2, 5), "float64"), {}, "argument data has dtype float32 but "
         "argument rois has dtype float64"),
        (T((1, 3, 4, 4)), T((2, 5)), {"layout": "NHWC"}, "attribute layout='NHWC' is not "
         "supported"),
        (T((1, 3, 4, 4)), T((2, 5)), {"pooled_size": (0, 2)}, "pooled_size=(0, 2) must hold "
         "values >= 1"),
    ],
)  # fmt: skip
def test_roi_align_errors(data, rois, attrs, message):
    attrs = {"pooled_size": 2, "spatial_scale": 1.0, **attrs}
    with pytest.raises(OpTypeError) as info:
        rel("vision.roi_align", data, rois, **attrs)
    assert message in str(info.value)
    assert str(info.value).startswith("vision.roi_align: ")


@pytest.mark.parametrize(
    ("types", "message"),
    [
        (nms_types(boxes=(5, 4)), "argument boxes must be 3-D (batches, boxes, 4), found "
         "Tensor[(5, 4), float32]"),
        (nms_types(scores=(3, 5)), "argument scores must be 3-D (batches, classes, boxes)"),
        (nms_types(boxes=(2, 5, 3)), "boxes coordinates (axis 2): dimension 3 vs 4"),
        (nms_types(scores=(2, 3, 6)), "scores boxes (axis 2) against boxes (axis 1): "
         "dimension 6 vs 5"),
        (nms_types(scores=(1, 3, 5)), "scores batches (axis 0) against boxes: dimension 1 vs 2"),
        (nms_types(limit=(2,)), "argument max_output_boxes_per_class must be a scalar or hold "
         "1 element(s)"),
        (nms_types(iou=(1, 1)), "argument iou_threshold must be a scalar or hold 1 element(s)"),
        (nms_types(threshold=(2,)), "argument score_threshold must be a scalar or hold 0 or 1 "
         "element(s)"),
    ],
)  # fmt: skip
def test_nms_errors(types, message):
    with pytest.raises(OpTypeError) as info:
        rel(NMS, *types)
    assert message in str(info.value)


def test_nms_reference_refuses_an_iou_threshold_outside_0_to_1():
    boxes, scores = np.zeros((1, 2, 4), "float32"), np.zeros((1, 1, 2), "float32")
    for iou in (-0.1, 1.5, np.nan):
        with pytest.raises(ValueError, match="iou_threshold must be between 0 and 1"):
            ref(NMS, boxes, scores, np.int64(1), np.float32(iou), np.zeros(0, "float32"))


def test_roi_align_reference_refuses_a_batch_index_outside_the_batch():
    data, rois = np.zeros((2, 1, 4, 4), "float32"), np.array([[2, 0, 0, 1, 1]], "float32")
    with pytest.raises(ValueError, match=r"batch index 2.0 of region 0 .* outside the batch"):
        ref("vision.roi_align", data, rois, pooled_size=1, spatial_scale=1.0)

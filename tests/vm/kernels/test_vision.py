"""Kernels of the detection operators return what the compiler's numpy references return.

Returns group: ``vision.roi_align`` in both modes, with and without half-pixel alignment,
at fixed and adaptive sampling, on regions inside, across and outside the image, for each
float dtype; ``vision.all_class_non_max_suppression`` on overlapping boxes with tied
scores, corner and centre boxes, every form of its scalar arguments, limits of none, some
and more than there are, and NaN coordinates and scores. Traps group: values the operators
cannot take (a batch index outside the batch, an IoU threshold outside [0, 1], arguments
holding several values, boxes and scores of different counts, an output table of the wrong
size) raise ``ValueError`` naming what is wrong.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run

RNG = np.random.default_rng(17)

#: Regions (batch index, x1, y1, x2, y2) of a 2-image, 10 x 12 input: inside, the whole
#: image, across the edge, smaller than a pixel, outside, and with swapped corners.
ROIS = np.array(
    [[0, 1.0, 1.0, 6.0, 5.0], [1, 0.0, 0.0, 11.0, 9.0], [1, -3.0, 2.5, 4.0, 14.0],
     [0, 8.2, 7.1, 8.4, 7.3], [1, 20.0, 20.0, 30.0, 30.0], [0, 5.0, 5.0, 2.0, 1.0]],
)  # fmt: skip


def boxes_and_scores(b: int, c: int, n: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Boxes on a small grid, so many overlap, and scores with many ties."""
    corners = RNG.integers(0, 6, size=(b, n, 4)).astype(dtype)
    scores = (RNG.integers(0, 4, size=(b, c, n)) / 4).astype(dtype)
    return corners, scores


def nms_program(boxes, scores, limit, iou, threshold, **attrs) -> tuple[Program, list[int]]:
    program = Program([boxes, scores, limit, iou, threshold])
    return program, program.add("vision.all_class_non_max_suppression", [0, 1, 2, 3, 4], **attrs)


def scalars(limit: int, iou: float, threshold: float | None, rank: int = 1) -> list[np.ndarray]:
    shape = () if rank == 0 else (1,)
    return [
        np.full(shape, limit, "int64"),
        np.full(shape, iou, "float32"),
        np.zeros(0, "float32") if threshold is None else np.full(shape, threshold, "float32"),
    ]


# --- returns -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sample_ratio", [2, 0])
def test_roi_align_pools_every_region(dtype, mode, aligned, sample_ratio) -> None:
    data = RNG.standard_normal((2, 3, 10, 12)).astype(dtype)
    program = Program([data, ROIS.astype(dtype)])
    results = program.add(
        "vision.roi_align", [0, 1], pooled_size=(3, 4), spatial_scale=0.75,
        sample_ratio=sample_ratio, mode=mode, aligned=aligned,
    )  # fmt: skip
    check(program, results)


def test_roi_align_samples_adaptively_per_region() -> None:
    # Regions of very different sizes get grids of very different sizes.
    data = RNG.standard_normal((1, 2, 40, 40)).astype("float32")
    rois = np.array([[0, 0, 0, 39, 39], [0, 3, 3, 5, 4], [0, 10, 2, 12, 38]], "float32")
    for ratio in (0, -1):
        program = Program([data, rois])
        check(program, program.add("vision.roi_align", [0, 1], pooled_size=2, spatial_scale=1.0,
                                   sample_ratio=ratio))  # fmt: skip


def test_roi_align_with_no_regions_or_channels() -> None:
    for data, rois in (
        (np.ones((1, 2, 4, 4), "float32"), np.zeros((0, 5), "float32")),
        (np.ones((1, 0, 4, 4), "float32"), ROIS[:1].astype("float32")),
    ):
        program = Program([data, rois])
        check(program, program.add("vision.roi_align", [0, 1], pooled_size=(2, 2),
                                   spatial_scale=1.0))  # fmt: skip


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("center", [False, True])
def test_nms_keeps_the_best_box_of_each_overlapping_group(dtype, center) -> None:
    boxes, scores = boxes_and_scores(2, 3, 12, dtype)
    for limit, iou, threshold in ((3, 0.3, 0.2), (100, 0.0, None), (2, 1.0, 0.0), (5, 0.5, -1.0)):
        program, results = nms_program(
            boxes, scores, *scalars(limit, iou, threshold), center_point_box=center
        )
        check(program, results)


def test_nms_takes_scalar_arguments_of_rank_0_and_1() -> None:
    boxes, scores = boxes_and_scores(1, 2, 9, "float32")
    for rank in (0, 1):
        program, results = nms_program(boxes, scores, *scalars(4, 0.4, 0.1, rank))
        check(program, results)


@pytest.mark.parametrize("limit", [0, -3, 1, 1 << 40])
def test_nms_keeps_at_most_the_limit_per_class(limit) -> None:
    boxes, scores = boxes_and_scores(2, 2, 8, "float32")
    program, results = nms_program(boxes, scores, *scalars(limit, 0.5, None))
    check(program, results)


def test_nms_breaks_ties_by_box_index_and_keeps_disjoint_boxes() -> None:
    boxes = np.array([[[0, 0, 1, 1], [2, 2, 3, 3], [0, 0, 1, 1], [4, 4, 5, 5]]], "float32")
    scores = np.full((1, 1, 4), 0.5, "float32")
    program, (table, count) = nms_program(boxes, scores, *scalars(10, 0.5, None))
    np.testing.assert_array_equal(program.values[count], [3])
    np.testing.assert_array_equal(program.values[table][:3], [[0, 0, 0], [0, 0, 1], [0, 0, 3]])
    check(program, [table, count])


def test_nms_with_nan_coordinates_and_scores() -> None:
    boxes, scores = boxes_and_scores(1, 2, 10, "float32")
    boxes[0, 3, 1] = np.nan
    boxes[0, 5] = np.nan
    scores[0, 0, 2] = np.nan
    scores[0, 1, 7] = np.nan
    for threshold in (None, 0.1):
        program, results = nms_program(boxes, scores, *scalars(10, 0.2, threshold))
        check(program, results)


def test_nms_of_no_boxes_or_no_classes() -> None:
    for b, c, n in ((1, 2, 0), (2, 0, 3), (0, 1, 4)):
        boxes, scores = boxes_and_scores(b, c, n, "float32")
        program, results = nms_program(boxes, scores, *scalars(3, 0.5, None))
        check(program, results)


# --- traps ---------------------------------------------------------------------------------------


def test_roi_align_refuses_a_batch_index_outside_the_batch() -> None:
    data = np.ones((2, 1, 4, 4), "float32")
    program = Program([data, ROIS[:1].astype("float32")])
    (out,) = program.add("vision.roi_align", [0, 1], pooled_size=2, spatial_scale=1.0)
    desc = program.description([out])
    for index in (2.0, -1.0, np.nan):
        rois = np.array([[index, 0, 0, 2, 2]], "float32")
        with pytest.raises(ValueError, match=r"batch index .* is outside the batch of data"):
            run(desc, [data, rois], [np.zeros((1, 1, 2, 2), "float32")])


def test_roi_align_refuses_regions_without_five_columns() -> None:
    data = np.ones((1, 1, 4, 4), "float32")
    program = Program([data, ROIS[:1].astype("float32")])
    (out,) = program.add("vision.roi_align", [0, 1], pooled_size=2, spatial_scale=1.0)
    rois = np.zeros((1, 4), "float32")
    with pytest.raises(ValueError, match=r"rois columns .*: expected 5, found 4"):
        run(program.description([out]), [data, rois], [np.zeros((1, 1, 2, 2), "float32")])


def test_nms_refuses_values_it_cannot_take() -> None:
    boxes, scores = boxes_and_scores(1, 2, 5, "float32")
    program, results = nms_program(boxes, scores, *scalars(3, 0.5, 0.1))
    desc = program.description(results)
    outs = [np.zeros((10, 3), "int64"), np.zeros(1, "int64")]
    cases = [
        (scalars(3, 1.5, 0.1), "iou_threshold must be between 0 and 1"),
        (scalars(3, np.nan, 0.1), "iou_threshold must be between 0 and 1"),
        ([np.array([3, 4]), *scalars(3, 0.5, 0.1)[1:]], "max_output_boxes_per_class must hold"),
        ([*scalars(3, 0.5, 0.1)[:2], np.zeros(2, "float32")], "score_threshold must hold one"),
    ]
    for arguments, message in cases:
        with pytest.raises(ValueError, match=message):
            run(desc, [boxes, scores, *arguments], outs)


def test_nms_refuses_boxes_and_scores_that_do_not_match() -> None:
    boxes, scores = boxes_and_scores(1, 2, 5, "float32")
    program, results = nms_program(boxes, scores, *scalars(3, 0.5, 0.1))
    desc = program.description(results)
    outs = [np.zeros((10, 3), "int64"), np.zeros(1, "int64")]
    cases = [
        (boxes[:, :4], scores, r"scores boxes \(axis 2\) against .*: expected 4, found 5"),
        (boxes[:, :, :3], scores, r"boxes coordinates \(axis 2\): expected 4, found 3"),
        (np.concatenate([boxes, boxes]), scores, "scores batches .*: expected 2, found 1"),
    ]
    for b, s, message in cases:
        with pytest.raises(ValueError, match=message):
            run(desc, [b, s, *scalars(3, 0.5, 0.1)], outs)


def test_nms_refuses_a_table_sized_for_other_inputs() -> None:
    boxes, scores = boxes_and_scores(1, 2, 5, "float32")
    program, results = nms_program(boxes, scores, *scalars(3, 0.5, 0.1))
    with pytest.raises(ValueError, match="expected 10, found 9"):
        run(
            program.description(results),
            program.inputs,
            [np.zeros((9, 3), "int64"), np.zeros(1, "int64")],
        )

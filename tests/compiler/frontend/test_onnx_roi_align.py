"""ONNX RoiAlign imported by from_onnx agrees with onnxruntime and onnx's reference evaluator
(returns): average and max pooling, both coordinate transformations, regions partly or wholly
outside the image, several images; adaptive sampling is refused by name (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from compiler.frontend import OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    check_against_ort,
    check_against_reference,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(3)


def roi_align(attrs, opset=16):
    x = RNG.standard_normal((2, 3, 10, 12)).astype("float32")
    rois = np.array(
        [[1.0, 1.0, 6.0, 5.0], [0.0, 0.0, 11.0, 9.0], [-3.0, 2.5, 4.0, 14.0],
         [8.2, 7.1, 8.4, 7.3], [20.0, 20.0, 30.0, 30.0]],
        "float32",
    )  # fmt: skip
    indices = np.array([0, 1, 1, 0, 1], "int64")
    return single_op("RoiAlign", {"x": x, "rois": rois, "i": indices}, attrs, opset=opset)


# ---- returns ------------------------------------------------------------------------------------


@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_matches_the_references(mode, transform):
    attrs = {
        "mode": mode, "coordinate_transformation_mode": transform, "output_height": 3,
        "output_width": 4, "sampling_ratio": 2, "spatial_scale": 0.75,
    }  # fmt: skip
    proto, feeds = roi_align(attrs)
    check_against_reference(proto, feeds, rtol=1e-5, atol=1e-5)
    if HAVE_ORT:
        check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


# ---- invalid ------------------------------------------------------------------------------------


def test_adaptive_sampling_is_refused_by_name():
    proto, feeds = roi_align({"output_height": 2, "output_width": 2})
    with pytest.raises(OpNotImplemented, match="sampling_ratio=0"):
        run_vm(proto, feeds)

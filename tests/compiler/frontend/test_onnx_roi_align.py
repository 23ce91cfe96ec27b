"""ONNX RoiAlign imported by from_onnx agrees with onnxruntime and onnx's reference evaluator,
on the reference interpreter and on the VM (returns): average and max pooling, both
coordinate transformations, fixed and adaptive (``sampling_ratio=0``) sampling, regions
partly or wholly outside the image or with swapped corners, several images, and any number
of regions through one executable. A batch index outside the batch is an error naming it
when the model runs (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import helper

import vm
from compiler import relay
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    assert_outputs_close,
    model,
    needs_ort,
    run_ort,
    run_reference,
    run_relay,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(3)

ROIS = np.array(
    [[1.0, 1.0, 6.0, 5.0], [0.0, 0.0, 11.0, 9.0], [-3.0, 2.5, 4.0, 14.0],
     [8.2, 7.1, 8.4, 7.3], [20.0, 20.0, 30.0, 30.0], [5.0, 5.0, 2.0, 1.0]],
    "float32",
)  # fmt: skip
INDICES = np.array([0, 1, 1, 0, 1, 0], "int64")


def roi_align(attrs, opset=16, rois=ROIS, indices=INDICES):
    x = RNG.standard_normal((2, 3, 10, 12)).astype("float32")
    return single_op("RoiAlign", {"x": x, "rois": rois, "i": indices}, attrs, opset=opset)


def agree(proto, feeds, reference: bool = True) -> None:
    """The interpreter and the VM give what onnx's reference (if asked) and onnxruntime
    (when installed) give."""
    oracles = [run_reference(proto, feeds)] if reference else []
    if HAVE_ORT:
        oracles.append(run_ort(proto, feeds))
    for got in (run_relay(proto, feeds), run_vm(proto, feeds)):
        for want in oracles:
            assert_outputs_close(got, want, rtol=1e-5, atol=1e-5)


# ---- returns ------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio", [2, 0])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_matches_the_references(mode, transform, ratio):
    attrs = {
        "mode": mode, "coordinate_transformation_mode": transform, "output_height": 3,
        "output_width": 4, "sampling_ratio": ratio, "spatial_scale": 0.75,
    }  # fmt: skip
    agree(*roi_align(attrs))


@pytest.mark.parametrize("scale", [0.25, 1.0, 2.5])
def test_adaptive_sampling_follows_each_region_size(scale):
    # Regions from a fraction of a pixel to several times the image: grids of 1 to 8 per bin.
    rois = np.array(
        [[0, 0, 11, 9], [2, 3, 2.5, 3.2], [-4, -4, 30, 20], [1, 1, 9, 2], [3, 1, 4, 9]],
        "float32",
    )
    attrs = {"output_height": 2, "output_width": 3, "spatial_scale": scale}
    agree(*roi_align(attrs, rois=rois, indices=np.array([0, 1, 0, 1, 1], "int64")))


@needs_ort
def test_roi_align_before_opset_16_uses_output_half_pixel_coordinates():
    # onnx's reference takes half_pixel at every opset; onnxruntime is the oracle here.
    proto, feeds = roi_align({"output_height": 2, "output_width": 2, "sampling_ratio": 0}, opset=10)
    agree(proto, feeds, reference=False)


def test_one_executable_takes_any_number_of_regions():
    x = RNG.standard_normal((2, 3, 10, 12)).astype("float32")
    node = helper.make_node("RoiAlign", ["x", "rois", "i"], ["y"], output_width=2)
    proto = model(
        [node],
        {"x": ("float32", x.shape), "rois": ("float32", ["r", 4]), "i": ("int64", ["r"])},
        {"y": ("float32", ["r", 3, 1, 2])},
        opset=16,
    )
    mod, params = relay.frontend.from_onnx(proto)
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    for count in (6, 1, 0, 3):
        feeds = {"x": x, "rois": ROIS[:count], "i": INDICES[:count]}
        got = machine.invoke("main", **feeds).numpy()
        np.testing.assert_allclose(got, run_reference(proto, feeds)[0], rtol=1e-5, atol=1e-5)


# ---- invalid ------------------------------------------------------------------------------------


def test_a_batch_index_outside_the_batch_is_refused_when_it_runs():
    proto, feeds = roi_align({"output_height": 2}, indices=np.array([0, 1, 2, 0, 1, 0]))
    with pytest.raises((ValueError, vm.VMError), match=r"batch index .* outside the batch"):
        run_vm(proto, feeds)

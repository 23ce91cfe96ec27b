"""ONNX GridSample imported by from_onnx agrees with onnxruntime and onnx's reference
evaluator (returns): bilinear, nearest and bicubic, every padding mode, with and without
align_corners, grids reaching far outside the image; unknown modes are named (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from compiler.frontend import OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    check_against_ort,
    check_against_reference,
    needs_ort,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(5)


def sample(mode: str, padding: str, align: int, opset: int = 20):
    x = RNG.standard_normal((2, 3, 5, 7)).astype("float32")
    # Points up to 2.5 image widths outside, to exercise repeated reflections.
    grid = RNG.uniform(-3.5, 3.5, (2, 4, 6, 2)).astype("float32")
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0, 0]]  # corners and the centre exactly
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    return single_op("GridSample", {"x": x, "g": grid}, attrs, opset=opset)


# ---- returns ------------------------------------------------------------------------------------


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_matches_the_references(mode, padding, align):
    proto, feeds = sample(mode, padding, align)
    if not (mode == "cubic" and padding == "border"):
        # For bicubic border padding, onnxruntime (as PyTorch) clamps the 16 taps and the
        # reference clamps the point: they differ beyond the edges, and we follow onnxruntime.
        check_against_reference(proto, feeds, rtol=1e-5, atol=1e-5)
    if HAVE_ORT:
        check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


@needs_ort
def test_opset_16_spells_linear_bilinear():
    # (onnx's reference evaluator knows only opset 20's names.)
    proto, feeds = sample("bilinear", "reflection", 0, opset=16)
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


# ---- invalid ------------------------------------------------------------------------------------


def test_an_unknown_mode_is_named():
    proto, feeds = sample("area", "zeros", 0)
    with pytest.raises(OpNotImplemented, match="mode='area' is not supported"):
        run_vm(proto, feeds)

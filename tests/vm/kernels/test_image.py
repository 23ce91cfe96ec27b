"""image.resize2d kernels match the compiler's reference bit for bit.

Returns group: every coordinate mode with every method (and nearest with every rounding) in
one float32 kernel, cropping with extrapolation included; float64 cubic, float16 linear,
integer nearest with an extrapolation value, and a result cast to ``out_dtype``. Traps
group: an empty image with images to fill. Invalid group: a description asking for linear
resizing of integers or an empty size is refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run
from vm.kernels.emit_image import COORDINATE_MODES, RESIZE_METHODS, ROUNDING_METHODS

RNG = np.random.default_rng(67)
EXACT = {np.dtype(d): {"rtol": 0, "atol": 0} for d in ("float32", "float64")}


def tensor(dtype: str, *shape: int) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return (RNG.standard_normal(shape) * 10).astype(dtype)
    return RNG.integers(-100, 100, shape).astype(dtype)


def _crop(coord: str) -> dict:
    if coord != "tf_crop_and_resize":
        return {}
    return {"roi": (0.1, -0.2, 0.9, 1.3), "extrapolation_value": -3.5}


# --- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "size"), [((2, 3, 5, 4), (10, 7)), ((1, 2, 9, 8), (4, 3))])
def test_every_mode_and_method_in_one_kernel(shape, size):
    program = Program([tensor("float32", *shape)])
    results, names = [], []
    for coord in COORDINATE_MODES:
        for method in RESIZE_METHODS:
            roundings = ROUNDING_METHODS if method == "nearest_neighbor" else ("",)
            for rounding in roundings:
                results += program.add(
                    "image.resize2d", [0], size=size, method=method, rounding_method=rounding,
                    coordinate_transformation_mode=coord, cubic_alpha=-0.75,
                    cubic_exclude=int(method == "cubic" and coord == "half_pixel"),
                    **_crop(coord),
                )  # fmt: skip
                names.append(f"{coord} {method} {rounding!r}")
    check(program, results, names, EXACT)


def test_other_dtypes_and_out_dtype():
    program = Program(
        [tensor("float64", 1, 2, 5, 4), tensor("float16", 1, 2, 5, 4), tensor("uint8", 2, 1, 3, 3)]
    )
    results = [
        *program.add("image.resize2d", [0], size=(9, 7), method="cubic"),
        *program.add("image.resize2d", [1], size=(3, 8)),
        *program.add(
            "image.resize2d",
            [2],
            size=(5, 6),
            method="nearest_neighbor",
            coordinate_transformation_mode="tf_crop_and_resize",
            roi=(0.0, 0.0, 1.4, 1.2),
            extrapolation_value=7.0,
        ),
        *program.add("image.resize2d", [0], size=(2, 3), out_dtype="float32"),
        *program.add("image.resize2d", [1], size=(4, 4), out_dtype="int32"),
    ]
    check(program, results, ["float64 cubic", "float16", "uint8", "to float32", "to int32"], EXACT)


# --- traps -------------------------------------------------------------------------------------


def test_an_empty_image_with_images_to_fill_is_refused():
    program = Program([tensor("float32", 1, 1, 2, 2)])
    desc = program.description(program.add("image.resize2d", [0], size=(3, 3)))
    with pytest.raises(ValueError, match=r"image\.resize2d\): cannot resize an image with no rows"):
        run(desc, [np.zeros((1, 1, 0, 2), "float32")], [np.zeros((1, 1, 3, 3), "float32")])
    empty = run(desc, [np.zeros((0, 1, 0, 2), "float32")], [np.zeros((0, 1, 3, 3), "float32")])
    assert empty[0].shape == (0, 1, 3, 3)

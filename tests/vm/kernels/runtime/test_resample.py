"""The resampling loops (vm.kernels.runtime.resample): the tables of ``image.resize2d`` and
``nn.upsampling`` and the engine that applies them.

Returns group: every coordinate mode, method and rounding's tables equal to the compiler's
numpy tables (``compiler.op.defs_image``) bit for bit; upsampled planes equal to
interpolating each output pixel on its own; resized planes equal to the compiler's reference;
the same bits shared with the polling workers as from one thread.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.op.defs_image import axis_taps, source_coordinates
from compiler.op.registry import get_def
from tests.vm.kernels.workers import assert_shared, needs_workers
from vm.kernels.emit_image import COORDINATE_MODES, RESIZE_METHODS, ROUNDING_METHODS
from vm.kernels.runtime import jobs, resample

RNG = np.random.default_rng(47)
TAPS_MODE = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}


# --- returns ---------------------------------------------------------------------------------


@pytest.mark.parametrize("coord", COORDINATE_MODES)
@pytest.mark.parametrize(("size", "out_n"), [(5, 10), (7, 3), (4, 1), (1, 6), (13, 13), (9, 17)])
def test_resize_tables_are_the_compilers_bit_for_bit(coord, size, out_n):
    region = (-0.2, 1.3)
    scale = np.float32(out_n) / np.float32(size)
    coords = source_coordinates(coord, out_n, size, scale, region)
    for method, rounding, alpha, exclude in itertools.product(
        RESIZE_METHODS, ROUNDING_METHODS[1:], (-0.75, -0.5), (False, True)
    ):
        if method != "nearest_neighbor" and rounding != "floor":
            continue
        indices, weights, outside = resample.resize_table(
            size, out_n, RESIZE_METHODS.index(method), COORDINATE_MODES.index(coord),
            ROUNDING_METHODS.index(rounding), alpha, exclude, *region,
        )  # fmt: skip
        want_i, want_w, want_out = axis_taps(
            TAPS_MODE[method], coords, size, rounding=rounding, cubic_a=alpha,
            exclude_outside=exclude, extrapolate=coord == "tf_crop_and_resize",
        )  # fmt: skip
        what = f"{method} {rounding} alpha={alpha} exclude={exclude}"
        np.testing.assert_array_equal(indices, want_i, err_msg=what)
        if method != "nearest_neighbor":
            assert want_w.dtype == np.float32
            np.testing.assert_array_equal(weights.view(np.uint32), want_w.view(np.uint32), what)
        want_out = np.zeros(out_n, bool) if want_out is None else want_out
        np.testing.assert_array_equal(outside, want_out, err_msg=what)


def resize_attrs(method: str, coord: str = "half_pixel") -> dict:
    return get_def("image.resize2d").normalize_attrs(
        {"size": (1, 1), "method": method, "coordinate_transformation_mode": coord}
    )


def resized(x: np.ndarray, out: np.ndarray, method: str, coord: str = "half_pixel") -> None:
    resample.resize2d(
        x, out, np.float32(0), RESIZE_METHODS.index(method), COORDINATE_MODES.index(coord),
        ROUNDING_METHODS.index("round_prefer_floor"), -0.75, False, (0.0, 0.0, 1.0, 1.0),
        np.float32(0),
    )  # fmt: skip


def reference(x: np.ndarray, out_h: int, out_w: int, method: str, coord: str = "half_pixel"):
    attrs = dict(resize_attrs(method, coord))
    attrs.update(size=(out_h, out_w), rounding_method="round_prefer_floor", cubic_alpha=-0.75)
    return get_def("image.resize2d").reference([x], attrs)


RESIZES = [((2, 3, 5, 7), (15, 4)), ((1, 2, 1, 1), (3, 8)), ((1, 1, 9, 4), (2, 9)),
           ((1, 2, 3, 5), (6, 10))]  # fmt: skip


@pytest.mark.parametrize("method", RESIZE_METHODS)
@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize(("shape", "size"), RESIZES)
def test_resized_planes_are_the_references(method, coord, shape, size):
    # (3, 5) -> (6, 10) doubles the width: nearest stores each value twice.
    x = RNG.standard_normal(shape).astype(np.float32)
    out = np.full((*shape[:2], *size), np.nan, np.float32)
    resized(x, out, method, coord)
    expected = reference(x, *size, method, coord)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def upsampled_pixel_by_pixel(x: np.ndarray, out_h: int, out_w: int, align: bool, method: str):
    """Each output pixel on its own, as TVM's upsampling defines it (float64 arithmetic,
    columns first for bilinear)."""
    n, c, height, width = x.shape

    def source(r: int, size: int, out_n: int) -> float:
        if align:
            return r * ((size - 1) / (out_n - 1)) if out_n > 1 else 0.0
        return r * (size / out_n)

    def nearest(r: int, size: int, out_n: int) -> int:
        s = source(r, size, out_n)
        index = np.rint(s) if align else np.floor(s + 1e-5)
        return min(max(int(index), 0), size - 1)

    def linear(r: int, size: int, out_n: int) -> tuple[int, int, float]:
        s = source(r, size, out_n)
        first = np.floor(s)
        i0 = int(first)
        return min(max(i0, 0), size - 1), min(max(i0 + 1, 0), size - 1), s - first

    out = np.empty((n, c, out_h, out_w), x.dtype)
    planes, flat = out.reshape(n * c, out_h, out_w), x.reshape(n * c, height, width)
    for r in range(out_h):
        for q in range(out_w):
            if method == "nearest":
                planes[:, r, q] = flat[:, nearest(r, height, out_h), nearest(q, width, out_w)]
                continue
            r0, r1, wy = linear(r, height, out_h)
            c0, c1, wx = linear(q, width, out_w)
            wide = flat.astype(np.float64)
            top = wide[:, r0, c0] * (1 - wx) + wide[:, r0, c1] * wx
            bottom = wide[:, r1, c0] * (1 - wx) + wide[:, r1, c1] * wx
            planes[:, r, q] = top * (1 - wy) + bottom * wy
    return out


UPSAMPLINGS = [("nearest", resample.upsample_nearest), ("bilinear", resample.upsample_bilinear)]


UPSAMPLES = [((2, 3, 5, 7), (15, 21)), ((1, 2, 1, 1), (8, 8)), ((1, 1, 6, 4), (3, 9)),
             ((1, 2, 3, 5), (6, 10))]  # fmt: skip


@pytest.mark.parametrize(("method", "function"), UPSAMPLINGS, ids=[m for m, _ in UPSAMPLINGS])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize(("shape", "size"), UPSAMPLES)
def test_upsampling_is_each_pixel_interpolated_on_its_own(method, function, align, shape, size):
    # Rows repeated by nearest sampling are copies; bilinear rows are blends of rows
    # interpolated once: the bits are those of each pixel on its own.
    x = RNG.standard_normal(shape).astype(np.float32)
    out = np.full((*shape[:2], *size), np.nan, np.float32)
    function(x, out, align)
    expected = upsampled_pixel_by_pixel(x, *size, align, method)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


@needs_workers
@pytest.mark.parametrize(("method", "function"), UPSAMPLINGS, ids=[m for m, _ in UPSAMPLINGS])
def test_an_upsampling_shared_with_the_workers_gives_the_bits_of_one_thread(method, function):
    jobs.require(jobs.RESAMPLE)
    x = RNG.standard_normal((1, 21, 16, 16)).astype(np.float32)
    out = np.full((1, 21, 64, 64), np.nan, np.float32)
    assert out.size >= resample.SPLIT
    expected = upsampled_pixel_by_pixel(x, 64, 64, False, method)

    def check() -> None:
        np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))
        out[:] = np.nan

    assert_shared(lambda: function(x, out, False), check)


@pytest.mark.parametrize("method", RESIZE_METHODS)
@pytest.mark.parametrize("bands", [1, 3, 7])
def test_bands_of_output_rows_resample_to_the_same_bits(method, bands):
    # Units are (plane, band) pairs; any split of the units writes each row exactly once,
    # from its own inputs (the later units run first: nothing is read from another band).
    x = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    expected = reference(x, 11, 7, method)
    m, c, r = RESIZE_METHODS.index(method), COORDINATE_MODES.index("half_pixel"), 4
    rows, row_w, _ = resample.resize_table(4, 11, m, c, r, -0.75, False, 0.0, 1.0)
    cols, col_w, _ = resample.resize_table(6, 7, m, c, r, -0.75, False, 0.0, 1.0)
    out = np.full((1, 2, 11, 7), np.nan, np.float32)
    units = 2 * bands
    for first, last in ((units // 2 + 1, units), (0, units // 2 + 1)):
        resample.resample_planes(x, out, rows, row_w, cols, col_w, m == 0, bands, first, last)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


@needs_workers
@pytest.mark.parametrize("method", ["linear", "cubic", "nearest_neighbor"])
@pytest.mark.parametrize("planes", [21, 3, 1])
def test_a_resize_shared_with_the_workers_gives_the_bits_of_one_thread(method, planes):
    # Three planes (an RGB image) or one are shared by bands of output rows.
    jobs.require(jobs.RESAMPLE)
    x = RNG.standard_normal((1, planes, 32, 32)).astype(np.float32)
    size = (96, 80) if planes > 3 else (240, 200)
    out = np.full((1, planes, *size), np.nan, np.float32)
    assert out.size >= resample.SPLIT
    expected = reference(x, *size, method)

    def check() -> None:
        np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))
        out[:] = np.nan

    assert_shared(lambda: resized(x, out, method), check)

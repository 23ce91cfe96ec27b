"""Batched float32 transposes by register tiles (vm.kernels.runtime.transpose) and the
``transpose`` kernels that call them.

Returns group: whole 16x16 tiles, edges short in either direction, several batches, any
range of tiles on its own (a chunk of the shared job) writing exactly its part, the work
shared with the polling workers, and the permutations the kernels recognise as a batch of
matrix transposes, and a convolution's epilogue applied by the tiles as they store, alone
and shared. Traps group: arrays that do not hold the sizes given, an epilogue on several
batches.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check
from tests.vm.kernels.workers import assert_shared, needs_workers
from vm.kernels.emit_layout import batched_transpose_groups
from vm.kernels.runtime import jobs, packed, transpose

RNG = np.random.default_rng(41)


def matrices(batches: int, rows: int, cols: int) -> np.ndarray:
    return RNG.standard_normal((batches, rows, cols)).astype("float32")


# --- returns ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(1, 16, 16), (1, 96, 3136), (2, 33, 17), (3, 5, 40), (1, 1, 1), (2, 0, 7)]
)
def test_batched_transpose_returns_numpys(shape) -> None:
    x = matrices(*shape)
    out = np.full((shape[0], shape[2], shape[1]), np.nan, "float32")
    transpose.batched_f32(x, out, *shape)
    np.testing.assert_array_equal(out, x.transpose(0, 2, 1))


def test_each_range_of_tiles_writes_its_part_only() -> None:
    # A chunk of the shared job is a range of tiles; together the ranges are the whole.
    batches, rows, cols = 2, 37, 50
    x = matrices(batches, rows, cols)
    out = np.full((batches, cols, rows), np.nan, "float32")
    tiles = batches * 3 * 4
    source, target = x.ctypes.data, out.ctypes.data
    transpose.tiles_range(source, target, batches, rows, cols, 0, 5)
    # Tiles 0-4: the first column of tiles of batch 0 (three tiles of rows) and two more.
    assert np.isnan(out[1]).all()
    assert not np.isnan(out[0, :16]).any() and np.isnan(out[0, 32:]).all()
    transpose.tiles_range(source, target, batches, rows, cols, 5, tiles)
    np.testing.assert_array_equal(out, x.transpose(0, 2, 1))


@needs_workers
def test_a_transpose_shared_with_the_workers_returns_numpys() -> None:
    jobs.require(jobs.TRANSPOSE)
    x = matrices(1, 96, 784)
    assert x.size >= transpose.SPLIT_ELEMENTS
    out = np.full((1, 784, 96), np.nan, "float32")
    assert_shared(
        lambda: transpose.batched_f32(x, out, 1, 96, 784),
        lambda: np.testing.assert_array_equal(out, x.transpose(0, 2, 1)),
    )


def _epilogue(units: int, out: np.ndarray, parts: tuple) -> np.ndarray:
    """A convolution's epilogue on ``out``: ``parts`` its bias and its residual."""
    bias, residual = parts
    return packed.post_epilogue(units, bias, 0.0, 6.0, packed.CLAMP, residual, out)


def _parts(units: int, shape: tuple) -> tuple:
    return RNG.standard_normal(units).astype("float32"), RNG.standard_normal(shape).astype(
        "float32"
    )


@pytest.mark.parametrize("shape", [(1, 37, 50), (1, 196, 512)])
def test_a_transpose_with_an_epilogue_gives_the_bits_of_the_epilogue_after_it(shape) -> None:
    # A convolution by pixel rows has its residual epilogue applied by the transpose's
    # tiles, short ones at the edges included: the same bits as a pass after the transpose.
    _, rows, cols = shape
    x = matrices(*shape)
    parts = _parts(cols, (1, cols, rows))
    expected = np.full((1, cols, rows), np.nan, "float32")
    transpose.batched_f32(x, expected, *shape)
    after = _epilogue(cols, expected, parts)  # held: the kernels take its address
    packed.apply_post(expected[0], after.ctypes.data)
    out = np.full_like(expected, np.nan)
    post = _epilogue(cols, out, parts)
    jobs.SLOT[jobs._BUSY] = 1  # as while another job holds the slot: the caller works alone
    try:
        transpose.batched_f32(x, out, *shape, post.ctypes.data)
    finally:
        jobs.SLOT[jobs._BUSY] = 0
    np.testing.assert_array_equal(out, expected)


@needs_workers
def test_a_transpose_with_an_epilogue_shared_with_the_workers_gives_the_same_bits() -> None:
    jobs.require(jobs.TRANSPOSE)
    x = matrices(1, 196, 512)
    parts = _parts(512, (1, 512, 196))
    alone = np.full((1, 512, 196), np.nan, "float32")
    post = _epilogue(512, alone, parts)
    jobs.SLOT[jobs._BUSY] = 1
    try:
        transpose.batched_f32(x, alone, 1, 196, 512, post.ctypes.data)
    finally:
        jobs.SLOT[jobs._BUSY] = 0
    shared = np.full_like(alone, np.nan)
    shared_post = _epilogue(512, shared, parts)
    assert_shared(
        lambda: transpose.batched_f32(x, shared, 1, 196, 512, shared_post.ctypes.data),
        lambda: np.testing.assert_array_equal(shared, alone),
    )


@pytest.mark.parametrize(
    ("perm", "groups"),
    [
        ((0, 2, 3, 1), (1, 2)),  # NCHW -> NHWC
        ((0, 3, 1, 2), (1, 3)),  # NHWC -> NCHW
        ((1, 0), (0, 1)),
        ((2, 0, 1), (0, 2)),
        ((0, 1, 3, 2), (2, 3)),
        ((0, 2, 1, 3), None),  # the last axis stays: rows are copied in runs
        ((3, 2, 1, 0), None),
        ((0, 1, 2), None),
    ],
)
def test_permutations_that_are_batches_of_matrix_transposes(perm, groups) -> None:
    assert batched_transpose_groups(list(perm)) == groups


@pytest.mark.parametrize("shape", [(1, 40, 9, 7), (2, 17, 5, 33)])
def test_nchw_nhwc_kernels_and_a_fused_add_return_the_reference(shape) -> None:
    x = RNG.standard_normal(shape).astype("float32")
    program = Program([x, RNG.standard_normal((shape[0], *shape[2:], shape[1])).astype("float32")])
    (nhwc,) = program.add("transpose", [0], axes=(0, 2, 3, 1))
    (back,) = program.add("transpose", [nhwc], axes=(0, 3, 1, 2))
    (added,) = program.add("add", [nhwc, 1])
    check(program, [nhwc, back, added])


# --- traps -----------------------------------------------------------------------------------


def test_an_epilogue_on_several_batches_raises() -> None:
    x = matrices(2, 8, 8)
    out = np.empty((2, 8, 8), "float32")
    post = _epilogue(8, out, _parts(8, out.shape))
    with pytest.raises(ValueError, match="single batch"):
        transpose.batched_f32(x, out, 2, 8, 8, post.ctypes.data)


def test_arrays_that_do_not_hold_the_sizes_given_raise() -> None:
    x = matrices(1, 8, 8)
    with pytest.raises(ValueError, match="batches \\* rows \\* cols"):
        transpose.batched_f32(x, np.empty((1, 8, 9), "float32"), 1, 8, 8)
    with pytest.raises(ValueError, match="batches \\* rows \\* cols"):
        transpose.batched_f32(x, np.empty((1, 8, 8), "float32"), 2, 8, 8)

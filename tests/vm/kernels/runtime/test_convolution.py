"""Which path a float32 convolution by a packed weight takes (``vm.kernels.runtime.convolution``).

Returns: column blocks take a weight that stays in cache with enough blocks to share,
except a 3x3 window of at least ``IM2ROW_MIN_CHANNELS`` channels whose im2row matrix
stays within ``IM2ROW_MAX_BYTES``, which runs by im2row and one product; a 3-channel
stem, a window other than 3x3 and a bigger matrix stay with the column blocks.
"""

from __future__ import annotations

import pytest

from vm.kernels.runtime import convolution as conv
from vm.kernels.runtime import packed


def _takes(channels: int, units: int, kernel: tuple[int, int], out: tuple[int, int]) -> bool:
    depth = channels * kernel[0] * kernel[1]
    return conv.column_blocks_take(units * depth * 4, depth, kernel, *out)


@pytest.mark.parametrize(
    ("channels", "units", "kernel", "out"),
    [
        (3, 32, (3, 3), (112, 112)),  # a stem: im2row would copy 27 floats a pixel
        (3, 64, (7, 7), (112, 112)),  # not a 3x3 window
        (conv.IM2ROW_MIN_CHANNELS - 1, 64, (3, 3), (28, 28)),
        (96, 96, (3, 3), (56, 56)),  # a 10.8 MB matrix
        (conv.IM2ROW_MIN_CHANNELS, 64, (3, 3), (56, 56)),  # 7.2 MB
    ],
)
def test_column_blocks_take_stems_other_windows_and_big_matrices(channels, units, kernel, out):
    assert _takes(channels, units, kernel, out)


@pytest.mark.parametrize(
    ("channels", "units", "out"),
    [
        (64, 128, (28, 28)),  # ResNet-18's stride-2 3x3 convolution into layer 2
        (conv.IM2ROW_MIN_CHANNELS, 64, (28, 28)),  # a 1.8 MB matrix
    ],
)
def test_wide_3x3_windows_with_a_small_matrix_run_by_im2row(channels, units, out):
    assert units * channels * 9 * 4 <= packed.CACHED_WEIGHT_BYTES
    assert not _takes(channels, units, (3, 3), out)


def test_a_weight_that_leaves_the_cache_never_takes_column_blocks():
    channels = packed.CACHED_WEIGHT_BYTES // (4 * 9 * 32) + 1
    assert not _takes(channels, 32, (3, 3), (112, 112))

"""im2row of 3x3 windows by blocks of 16 pixels (``vm.kernels.runtime.window_rows``, reached
through ``conv_loops.im2row``).

Returns: the matrix equals im2col's transposed for column strides 1 and 2, dilations,
uneven padding, rows wholly in the padding and rows whose last block is short, filled in
ranges of output rows as threads fill them; float64 takes the element-wise copy and
agrees. Traps (none): an image that ends just before an unmapped page, or starts just
after one, and a matrix that ends just before one, are read and written without a fault:
the masked loads and stores touch nothing outside the floats they copy.
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest

from vm.kernels.runtime import conv_loops

# shape, stride, pad (top, left), dilation
_WINDOWS = [
    ((1, 3, 9, 40), (1, 1), (1, 1), (1, 1)),  # blocks of 16, 16 and 8 pixels
    ((2, 4, 11, 67), (2, 2), (1, 1), (1, 1)),  # stride 2: 16, 16 and 2, the second image
    ((1, 3, 10, 45), (1, 2), (2, 0), (2, 2)),  # dilation, no left padding, stride 2 across
    ((1, 2, 5, 33), (2, 1), (4, 3), (1, 1)),  # output rows wholly in the padding
    ((1, 5, 7, 7), (1, 1), (1, 1), (1, 1)),  # one short block a row
    ((1, 1, 3, 16), (1, 1), (0, 0), (1, 1)),  # one whole block, no padding
]


def _out(shape, stride, pad, dilation) -> tuple[int, int]:
    (sh, sw), (pt, pl), (dh, dw) = stride, pad, dilation
    out_h = (shape[2] + 2 * pt - 2 * dh - 1) // sh + 1
    out_w = (shape[3] + 2 * pl - 2 * dw - 1) // sw + 1
    return out_h, out_w


def _expected(x, stride, pad, dilation) -> np.ndarray:
    (sh, sw), (pt, pl), (dh, dw) = stride, pad, dilation
    out_h, out_w = _out(x.shape, stride, pad, dilation)
    n = x.shape[0] - 1
    cols = np.zeros((x.shape[1] * 9, out_h * out_w), x.dtype)
    conv_loops.im2col(x, n, 0, x.shape[1], cols, 3, 3, sh, sw, pt, pl, dh, dw, out_h, out_w, 0,
                      out_h)  # fmt: skip
    return cols.T


def _im2row(x, rows, stride, pad, dilation, ranges) -> None:
    (sh, sw), (pt, pl), (dh, dw) = stride, pad, dilation
    out_h, out_w = _out(x.shape, stride, pad, dilation)
    for r0, r1 in ranges:
        conv_loops.im2row(x, x.shape[0] - 1, rows, 3, 3, sh, sw, pt, pl, dh, dw, out_h, out_w,
                          r0, r1)  # fmt: skip


# --- returns ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "stride", "pad", "dilation"), _WINDOWS)
def test_im2row_of_3x3_windows_is_im2col_transposed(shape, stride, pad, dilation, dtype):
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    want = _expected(x, stride, pad, dilation)
    rows = np.full(want.shape, np.nan, dtype)
    out_h = _out(shape, stride, pad, dilation)[0]
    # Two ranges of output rows, as two threads fill them.
    _im2row(x, rows, stride, pad, dilation, ((0, out_h // 2), (out_h // 2, out_h)))
    np.testing.assert_array_equal(rows, want)


# --- traps: nothing outside the copied floats is touched ----------------------------------------


def _beside_an_unmapped_page(nbytes: int, after: bool) -> tuple[mmap.mmap, int]:
    """A mapping with ``nbytes`` readable and writable bytes that end just before an
    unmapped page (``after``) or start just after one, and the address of those bytes."""
    page = mmap.PAGESIZE
    pages = -(-nbytes // page)
    region = mmap.mmap(-1, (pages + 1) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    guard = base + pages * page if after else base
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if libc.mprotect(guard, page, 0) != 0:  # PROT_NONE
        pytest.skip(f"mprotect failed: errno {ctypes.get_errno()}")
    offset = pages * page - nbytes if after else page
    return region, offset


def _placed(region: mmap.mmap, offset: int, shape: tuple, value: np.ndarray | None = None):
    array = np.frombuffer(region, np.float32, int(np.prod(shape)), offset).reshape(shape)
    if value is not None:
        array[...] = value
    return array


@pytest.mark.parametrize("after", [True, False])
@pytest.mark.parametrize(("shape", "stride", "pad", "dilation"), _WINDOWS[:3])
def test_an_image_beside_an_unmapped_page_is_read_without_a_fault(
    shape, stride, pad, dilation, after
):
    source = np.random.default_rng(4).standard_normal(shape).astype("float32")
    region, offset = _beside_an_unmapped_page(source.nbytes, after)
    x = _placed(region, offset, shape, source)
    want = _expected(source, stride, pad, dilation)
    rows = np.full(want.shape, np.nan, np.float32)
    _im2row(x, rows, stride, pad, dilation, ((0, _out(shape, stride, pad, dilation)[0]),))
    np.testing.assert_array_equal(rows, want)
    del x


@pytest.mark.parametrize(("shape", "stride", "pad", "dilation"), [_WINDOWS[0], _WINDOWS[1]])
def test_a_matrix_before_an_unmapped_page_is_written_without_a_fault(shape, stride, pad, dilation):
    # The last block of the last row is short: its pixels past the row store nothing, and
    # their rows would lie in the unmapped page.
    x = np.random.default_rng(5).standard_normal(shape).astype("float32")
    want = _expected(x, stride, pad, dilation)
    region, offset = _beside_an_unmapped_page(want.nbytes, True)
    rows = _placed(region, offset, want.shape)
    rows[...] = np.nan
    _im2row(x, rows, stride, pad, dilation, ((0, _out(shape, stride, pad, dilation)[0]),))
    np.testing.assert_array_equal(rows, want)
    del rows

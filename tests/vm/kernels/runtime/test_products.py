"""Matrix products called straight from compiled code (``vm.kernels.runtime.products``).

Returns: ``gemm`` equals numpy for both float dtypes, every transpose combination, single
rows and columns, strided rows and empty operands; OpenBLAS's per-thread thread count is
the same after a call as before; the blas entry points equal numpy for small and big
products, operands BLAS cannot read in place and broadcast stacks; the numpy fallback
used when OpenBLAS is missing computes the same products through its C signature.
Products and stacks of products big enough to share give the same answers (a stack's
items bit for bit those computed alone) when workers poll, when several
threads share at once, after a worker slept and was woken, and in a forked child.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from tests.vm.kernels.workers import (
    assert_shared,
    needs_workers,
    prepare_every_need,
    wait_until,
    workers_polling,
)
from vm.kernels.runtime import (
    callbacks,
    conv_jobs,
    conv_loops,
    jobs,
    packed,
    products,
    symbols,
    threads,
)
from vm.kernels.runtime.openblas import openblas

RNG = np.random.default_rng(5)
ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(autouse=True, scope="module")
def _every_kind_registered() -> None:
    prepare_every_need()


@njit
def _gemm(a, b, out, ta, tb):
    products.gemm(a, b, out, ta, tb)


@njit
def _fits(a):
    return products.fits(a)


def operands(m, n, k, ta, tb, dtype):
    a = RNG.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = RNG.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    return a, b, (a.T if ta else a) @ (b.T if tb else b)


def tolerance(dtype, k):
    scale = 1e-5 if dtype == "float32" else 1e-12
    return {"rtol": scale, "atol": scale * max(k, 1)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("ta", "tb"), [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 512, 128), (7, 1, 9), (16, 24, 1), (33, 17, 65)])
def test_gemm_equals_numpy(dtype, ta, tb, m, n, k):
    a, b, expected = operands(m, n, k, ta, tb, dtype)
    out = np.full((m, n), np.nan, dtype)
    _gemm(a, b, out, ta, tb)
    np.testing.assert_allclose(out, expected, **tolerance(dtype, k))


def test_gemm_reads_strided_rows_in_place():
    base = RNG.standard_normal((6, 20)).astype("float32")
    a, b = base[:, :8], RNG.standard_normal((8, 5)).astype("float32")
    out = np.empty((6, 5), "float32")
    assert _fits(a) and not _fits(base[:, ::2])
    _gemm(a, b, out, False, False)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n", "k"), [(0, 3, 4), (3, 0, 4), (3, 4, 0)])
def test_empty_operands_give_zeros_or_nothing(m, n, k):
    a, b = np.ones((m, k), "float64"), np.ones((k, n), "float64")
    out = np.full((m, n), np.nan)
    _gemm(a, b, out, False, False)
    np.testing.assert_array_equal(out, np.zeros((m, n)))


@pytest.mark.skipif(openblas() is None, reason="numpy does not use OpenBLAS")
def test_the_thread_count_is_restored_after_a_call():
    setter = threads._setter()
    previous = setter(3)
    try:
        a, b, _ = operands(4, 4, 4, False, False, "float32")
        _gemm(a, b, np.empty((4, 4), "float32"), False, False)
        assert setter(3) == 3
    finally:
        setter(previous)


@pytest.mark.parametrize("m", [1, 64])
@pytest.mark.parametrize(("ta", "tb"), [(False, True), (False, False), (True, False), (True, True)])
def test_product_into_equals_numpy_small_and_big(m, ta, tb):
    x = RNG.standard_normal((m, 784)).astype("float32")
    w = RNG.standard_normal((512, 784)).astype("float32")
    out = np.empty((m, 512), "float32")
    left = np.ascontiguousarray(x.T) if ta else x
    right = w if tb else np.ascontiguousarray(w.T)
    products.product_into(left, right, out, ta, tb)
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-4, atol=1e-3)


def test_product_into_copies_operands_blas_cannot_read_in_place():
    x = RNG.standard_normal((6, 10)).astype("float64")
    y = RNG.standard_normal((10, 8)).astype("float64")
    out = np.full((8, 6), np.nan)
    products.product_into(x[:, ::2], y[::2], out.T, False, False)  # strided columns, strided out
    np.testing.assert_allclose(out.T, x[:, ::2] @ y[::2], rtol=1e-12)


@pytest.mark.parametrize(("batch_x", "batch_y"), [(3, 3), (1, 3), (3, 1), (6, 6), (1, 6)])
def test_batch_matmul_broadcasts_a_batch_of_one(batch_x, batch_y):
    batch = max(batch_x, batch_y)
    x = RNG.standard_normal((batch_x, 9, 5)).astype("float64")
    y = RNG.standard_normal((batch_y, 7, 5)).astype("float64")
    out = np.empty((batch, 9, 7))
    products.matmul_into(x, y, out, False, True)
    np.testing.assert_allclose(out, x @ y.transpose(0, 2, 1), rtol=1e-12)


@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_equals_numpy_with_every_transpose(ta, tb):
    x = RNG.standard_normal((12, 64, 48)).astype("float32")
    y = RNG.standard_normal((12, 48, 40)).astype("float32")
    out = np.full((12, 64, 40), np.nan, "float32")
    left = np.ascontiguousarray(x.transpose(0, 2, 1)) if ta else x
    right = np.ascontiguousarray(y.transpose(0, 2, 1)) if tb else y
    products.matmul_into(left, right, out, ta, tb)
    np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)


def test_an_empty_batch_matmul_depth_gives_zeros():
    out = np.full((5, 3, 4), np.nan, "float32")
    products.matmul_into(np.empty((5, 3, 0), "float32"), np.empty((1, 0, 4), "float32"), out,
                     False, False)  # fmt: skip
    assert (out == 0).all()


@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, True)])
def test_the_numpy_fallback_computes_through_the_c_signature(ta, tb):
    dtype = np.dtype("float32")
    function = ctypes.CFUNCTYPE(*products._signature(ctypes.c_float))(products._numpy_gemm(dtype))
    a, b, expected = operands(5, 6, 7, ta, tb, dtype)
    out = np.full((5, 6), np.nan, dtype)
    trans = {False: products._NO_TRANS, True: products._TRANS}
    function(products._ROW_MAJOR, trans[ta], trans[tb], 5, 6, 7, 1.0, a.ctypes.data, a.shape[1],
             b.ctypes.data, b.shape[1], 0.0, out.ctypes.data, 6)  # fmt: skip
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


# ---- products shared with the workers ----------------------------------------------------------


@needs_workers
@pytest.mark.parametrize(("m", "n", "k", "ta", "tb"), [
    (1, 512, 784, False, True), (1, 1000, 512, False, False), (300, 64, 128, True, False),
    (64, 512, 784, False, True), (257, 3, 400, False, False),
])  # fmt: skip
def test_shared_products_equal_numpy(m, n, k, ta, tb):
    a, b, expected = operands(m, n, k, ta, tb, "float32")
    out = np.full((m, n), np.nan, "float32")
    assert m * n * k >= products.PARALLEL_FLOPS
    _gemm(a, b, out, ta, tb)  # compiled before the workers are woken

    def shared_run() -> None:
        out[...] = np.nan
        _gemm(a, b, out, ta, tb)

    assert_shared(
        shared_run, lambda: np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
    )


@needs_workers
@pytest.mark.parametrize(("batch", "broadcast"), [(12, None), (8, "a"), (5, "b")])
def test_a_shared_batch_matmul_equals_each_item_computed_alone(batch, broadcast):
    # Items shared between threads are cut as one thread cuts them: bit for bit equal.
    x = RNG.standard_normal((1 if broadcast == "a" else batch, 128, 64)).astype("float32")
    y = RNG.standard_normal((1 if broadcast == "b" else batch, 96, 64)).astype("float32")
    alone = np.empty((batch, 128, 96), "float32")
    for i in range(batch):
        _gemm(x[min(i, len(x) - 1)], y[min(i, len(y) - 1)], alone[i], False, True)
    out = np.empty_like(alone)
    products.matmul_into(x, y, out, False, True)  # compiled before the workers are woken

    def shared_run() -> None:
        out[...] = np.nan
        products.matmul_into(x, y, out, False, True)

    assert_shared(shared_run, lambda: np.testing.assert_array_equal(out, alone))


@needs_workers
def test_products_from_several_threads_at_once_are_all_right():
    problems = [operands(1 + 7 * i, 256, 512, False, True, "float64") for i in range(8)]
    errors = []

    def caller(offset):
        try:
            for round_ in range(30):
                a, b, expected = problems[(offset + round_) % len(problems)]
                out = np.empty(expected.shape)
                _gemm(a, b, out, False, True)
                np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-9)
        except AssertionError as err:  # pragma: no cover - reported below
            errors.append(err)

    assert workers_polling()
    callers = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in callers)
    assert not errors
    assert not jobs.busy()


def _asleep() -> bool:
    """Every worker counted asleep and no byte on its way to one: they stay asleep."""
    workers = threads._STATE.get("workers", 0)
    return jobs.sleeping() == workers and jobs.pending_wake_ups() == 0 and not jobs.polling()


@needs_workers
def test_an_idle_worker_sleeps_and_a_product_wakes_it():
    a, b, expected = operands(1, 512, 512, False, False, "float32")
    out = np.empty((1, 512), "float32")
    # Every worker asleep with no byte on its way: none can wake but by the product's
    # byte. (A weaker look, "some worker asleep", let a worker that was waking itself
    # start polling in between and take the product's job instead: no wake-up followed.)
    assert wait_until(_asleep)
    wake_ups = jobs.wake_ups()
    posted = jobs.jobs_posted()
    _gemm(a, b, out, False, False)  # done alone, but writes a byte to the workers' pipe
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
    assert jobs.jobs_posted() == posted  # nobody polled, so nothing was shared
    assert wait_until(lambda: jobs.wake_ups() > wake_ups)


def _bytes_in_pipe() -> int:
    import fcntl
    import termios

    count = ctypes.c_int()
    fcntl.ioctl(threads._STATE["wake"], termios.FIONREAD, count)
    return count.value


@needs_workers
def test_a_burst_of_products_leaves_no_wake_ups_behind():
    a, b, _ = operands(1, 512, 512, False, False, "float32")
    out = np.empty((1, 512), "float32")
    _gemm(a, b, out, False, False)
    assert wait_until(_asleep)
    for _ in range(20):
        # Products and Python jobs while workers go to sleep and wake up: every byte
        # written to the pipe must be read by the worker it was written for.
        for _ in range(25):
            _gemm(a, b, out, False, False)
        threads.run([lambda: None] * 4)
        assert jobs.pending_wake_ups() <= jobs.sleeping() <= threads._STATE["workers"]
    assert wait_until(_asleep)
    # Asleep with nothing pending, the pipe is empty: no byte is left to wake anyone.
    assert _bytes_in_pipe() == 0
    wake_ups = jobs.wake_ups()
    time.sleep(0.05)  # a left-over byte would show here; none can be
    assert jobs.wake_ups() == wake_ups and _asleep()


_CHILD = """
import numpy as np
from numba import njit
from vm.kernels.runtime import conv_jobs, jobs, products, threads

jobs.require(jobs.BLAS)  # gemm called directly: no kernel loader requires its kind

@njit
def product(a, b, out):
    products.gemm(a, b, out, False, False)

a, b = np.ones((1, 700)), np.ones((700, 600))
out = np.empty((1, 600))
product(a, b, out)  # the parent's workers poll now
threads.run([lambda: None] * 4)
pid = os.fork()
if pid == 0:
    threads.run([lambda: None] * 4)  # the child's own workers
    for _ in range(50):
        out[:] = 0
        product(a, b, out)
        assert (out == 700).all()
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
print("ok")
"""


@needs_workers
def test_a_forked_child_shares_products_with_workers_of_its_own():
    script = "import os\n" + _CHILD
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


_WINDOWS = [
    # shape, kernel, stride, pad, dilation
    ((1, 4, 7, 7), (3, 3), (1, 1), (1, 1), (1, 1)),  # every border pixel of a small plane
    ((2, 5, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1)),  # stride 2, odd and even sides
    ((1, 3, 10, 11), (3, 3), (1, 2), (2, 0), (2, 2)),  # dilation, uneven padding
    ((1, 2, 4, 4), (3, 3), (1, 1), (3, 3), (1, 1)),  # windows wholly in the padding
    ((1, 3, 12, 9), (5, 5), (2, 1), (2, 2), (1, 1)),  # the general loop
    ((1, 2, 6, 7), (1, 3), (1, 1), (0, 1), (1, 1)),
]


def _sizes(shape, kernel, stride, pad, dilation):
    (kh, kw), (sh, sw), (pt, pl), (dh, dw) = kernel, stride, pad, dilation
    out_h = (shape[2] + 2 * pt - dh * (kh - 1) - 1) // sh + 1
    out_w = (shape[3] + 2 * pl - dw * (kw - 1) - 1) // sw + 1
    return out_h, out_w


@pytest.mark.parametrize(("shape", "kernel", "stride", "pad", "dilation"), _WINDOWS)
def test_im2row_is_im2col_transposed(shape, kernel, stride, pad, dilation):

    x = np.random.default_rng(6).standard_normal(shape).astype("float32")
    (kh, kw), (sh, sw), (pt, pl), (dh, dw) = kernel, stride, pad, dilation
    out_h, out_w = _sizes(shape, kernel, stride, pad, dilation)
    n = shape[0] - 1
    cols = np.zeros((shape[1] * kh * kw, out_h * out_w), "float32")
    conv_loops.im2col(x, n, 0, shape[1], cols, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, 0,
                      out_h)  # fmt: skip
    rows = np.full((out_h * out_w, shape[1] * kh * kw), np.nan, "float32")
    # Two ranges of output rows, as two threads fill them.
    for r0, r1 in ((0, out_h // 2), (out_h // 2, out_h)):
        conv_loops.im2row(x, n, rows, kh, kw, sh, sw, pt, pl, dh, dw, out_h, out_w, r0, r1)
    np.testing.assert_array_equal(rows, cols.T)


@njit(nogil=True)
def _im2row(x, n, rows, kernel, stride, pad, dilation, out, share):
    conv_jobs.im2row(x, n, rows, kernel, stride, pad, dilation, out, share)


@needs_workers
@pytest.mark.parametrize(("shape", "kernel", "stride", "pad", "dilation"), _WINDOWS[:3])
def test_a_shared_im2row_matches_the_one_thread_copy(shape, kernel, stride, pad, dilation):
    x = np.random.default_rng(7).standard_normal(shape).astype("float32")
    (kh, kw) = kernel
    size = _sizes(shape, kernel, stride, pad, dilation)
    want = np.zeros((size[0] * size[1], shape[1] * kh * kw), "float32")
    args = (x, shape[0] - 1, want, kernel, stride, pad, dilation, size)
    _im2row(*args, False)  # compiled before the workers are woken
    got = np.full_like(want, np.nan)
    args = (x, shape[0] - 1, got, kernel, stride, pad, dilation, size)

    def shared_run() -> None:
        got[...] = np.nan
        _im2row(*args, True)

    assert_shared(shared_run, lambda: np.testing.assert_array_equal(got, want))


@njit(nogil=True)
def _packed_conv(x, n, weight, out, kernel, stride, pad, dilation, size, share):
    conv_jobs.packed_conv(x, n, weight, out, kernel, stride, pad, dilation, size, share)


@needs_workers
@pytest.mark.parametrize(
    ("shape", "units", "kernel", "stride", "pad"),
    [
        ((1, 3, 61, 57), 64, (7, 7), (2, 2), (3, 3)),  # the phase-split strided copy
        ((2, 6, 30, 29), 45, (3, 3), (1, 1), (1, 1)),  # short last panels and blocks
    ],
)
def test_a_shared_packed_convolution_matches_the_one_thread_one(shape, units, kernel, stride, pad):
    from tests.vm.kernels.harness import packed

    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype("float32")
    weight = rng.standard_normal((units, shape[1], *kernel)).astype("float32")
    (kh, kw), (sh, sw), (pt, pl) = kernel, stride, pad
    size = ((shape[2] + 2 * pt - kh) // sh + 1, (shape[3] + 2 * pl - kw) // sw + 1)
    assert conv_jobs.row_blocks(*size)[1] >= 4
    n = shape[0] - 1
    cols = np.zeros((shape[1] * kh * kw, size[0] * size[1]), "float32")
    conv_loops.im2col(x, n, 0, shape[1], cols, kh, kw, sh, sw, pt, pl, 1, 1, *size, 0, size[0])
    want = weight.reshape(units, -1) @ cols
    got = np.full_like(want, np.nan)
    args = (x, n, packed(weight), got, kernel, stride, pad, (1, 1), size)
    _packed_conv(*args, False)  # compiled before the workers are woken
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    def shared_run() -> None:
        got[...] = np.nan
        _packed_conv(*args, True)

    assert_shared(shared_run, lambda: np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4))


@pytest.mark.parametrize("pixels", [1, 49, 196])
@pytest.mark.parametrize("k", [24, 300, packed.BLOCKED_MIN_DEPTH + 3])
@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("activation", [packed.CLAMP, packed.SWISH])
def test_a_convolution_by_pixels_gives_the_bits_of_the_pixel_panels(
    pixels: int, k: int, with_residual: bool, activation: int
) -> None:
    # Pixels as the rows of the tiles store into a buffer transposed into place (its bias
    # and activation on the buffer, a residual after the transpose; a deep product by
    # blocks of its own): every path sums each element in the same order and applies the
    # same epilogue, so a model's bits do not depend on which one its shapes take.
    from tests.vm.kernels.harness import packed as pack

    callbacks.link(symbols.POINTWISE_ITEMS, symbols.TRANSPOSED)
    rng = np.random.default_rng(9)
    units = 33  # a whole panel of output channels and a short one
    columns = np.zeros(k * pixels + packed.PANEL, np.float32)
    columns[: k * pixels] = rng.standard_normal(k * pixels)
    matrix = columns[: k * pixels].reshape(k, pixels)
    w = rng.standard_normal((units, k)).astype(np.float32)
    weight = pack(w)
    bias = rng.standard_normal(units).astype(np.float32)
    residual = rng.standard_normal((units, pixels) if with_residual else (0,)).astype(np.float32)
    by_pixels = np.full((units, pixels), np.nan, np.float32)
    post = packed.post_epilogue(units, bias, 0.0, 6.0, activation, residual, by_pixels)
    products.packed_columns(matrix, weight, by_pixels, post.ctypes.data)
    rows = np.ascontiguousarray(matrix.T)
    by_rows = np.full_like(by_pixels, np.nan)
    post_rows = packed.post_epilogue(units, bias, 0.0, 6.0, activation, residual, by_rows)
    products.packed_pixel_rows(rows, weight, by_rows, post_rows.ctypes.data)
    panels = np.full_like(by_pixels, np.nan)
    post_panels = packed.post_epilogue(units, bias, 0.0, 6.0, activation, residual, panels)
    for first in range(0, units, packed.PANEL):
        packed.panel_product(
            weight.ctypes.data + first * k * 4, k, min(packed.PANEL, units - first),
            (columns.ctypes.data, pixels), pixels, (panels[first:].ctypes.data, pixels),
            post_panels.ctypes.data, first,
        )  # fmt: skip
    np.testing.assert_array_equal(by_pixels, panels)
    np.testing.assert_array_equal(by_rows, panels)
    expected = w.astype(np.float64) @ matrix + bias[:, None] + (residual if with_residual else 0)
    if activation == packed.SWISH:
        expected = expected / (1 + np.exp(-expected))
    else:
        expected = np.clip(expected, 0.0, 6.0)
    np.testing.assert_allclose(by_pixels, expected, rtol=1e-3, atol=1e-3)


@njit(nogil=True)
def _winograd_transform(phase, x, n, v, m, out3, pad, tiles, out, share):
    conv_jobs.winograd_transform(phase, x, n, v, m, out3, pad, tiles, out, share)


@needs_workers
@pytest.mark.parametrize(("planes", "tile"), [(16, 2), (36, 4)])
@pytest.mark.parametrize("phase", [0, 1])
def test_a_shared_winograd_transform_matches_the_one_thread_one(planes, tile, phase):
    rng = np.random.default_rng(6)
    images, channels, out_channels, size = 2, 9, 7, 13
    x = rng.standard_normal((images, channels, size, size)).astype("float32")
    tiles = (-(-size // tile),) * 2
    count = tiles[0] * tiles[1]

    def planes_apart(rows):
        # Planes a few elements further apart than their size, as the kernels lay them out.
        storage = np.full((planes, rows * count + 5), np.nan, "float32")
        return storage[:, : rows * count].reshape(planes, rows, count)

    v, m = planes_apart(channels), planes_apart(out_channels)
    m[...] = rng.standard_normal(m.shape)
    args = (x, 1, v, m)
    rest = ((1, 1), tiles, (size, size))
    want_out = np.full((images, out_channels, size * size), np.nan, "float32")
    _winograd_transform(phase, *args, want_out, *rest, False)
    want = (v if phase == 0 else want_out).copy()
    assert not np.isnan(want if phase == 0 else want[1]).any()

    out = np.empty_like(want_out)

    def shared_run() -> None:
        v[...] = np.nan
        out[...] = np.nan
        _winograd_transform(phase, *args, out, *rest, True)

    assert_shared(shared_run, lambda: np.testing.assert_array_equal(v if phase == 0 else out, want))


@njit(nogil=True)
def _share(kind, extent, arguments):
    return jobs.share(kind, extent, arguments, 0)


def test_a_product_stored_transposed_into_an_output_with_gaps_between_rows_traps() -> None:
    # Its entry point takes the output by address as C-contiguous (units, pixels): rows
    # further apart would be written at the wrong places, so the call refuses them.
    from tests.vm.kernels.harness import packed as pack

    callbacks.link(symbols.TRANSPOSED)
    columns = np.ones((8, 40), np.float32)
    weight = pack(np.ones((5, 8), np.float32))
    wide = np.zeros((5, 48), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        products.packed_columns(columns, weight, wide[:, :40])
    with pytest.raises(ValueError, match="do not agree"):
        products.packed_columns(columns, weight, wide)
    assert not wide.any()  # nothing written
    out = np.zeros((5, 40), np.float32)
    products.packed_columns(columns, weight, out)
    np.testing.assert_array_equal(out, np.full((5, 40), 8.0, np.float32))


def test_a_job_with_more_arguments_than_the_slot_holds_traps():
    too_many = tuple(range(jobs.ARGUMENTS + 1))
    with pytest.raises(ValueError, match="more arguments than the slot holds"):
        _share(jobs.MAX_POOL, 4, too_many)
    assert not jobs.busy()

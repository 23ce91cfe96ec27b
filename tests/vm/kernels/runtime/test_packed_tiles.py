"""The register tiles of packed products: every row count of a tile, short and whole
panels, both loop orders and the transposed (convolution) orientation give numpy's product;
the shuffles that read a row at a column stride of 2 (split_pairs, take_evens); an
epilogue applied after the fact reaches only the rows and pixels of its view. Traps: an
epilogue on an output that is not float32 with contiguous rows.

Runs the tile geometry of the host's instruction set (``test_target_isa`` runs the AVX2
one on a host with AVX-512). The tiles that read their weight panel ahead do not fault on
the page after the last panel.
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest
from numba import njit

from vm.kernels.runtime import callbacks, packed, symbols
from vm.kernels.runtime.panels import PANEL

RNG = np.random.default_rng(5)
# The loops call the tile by symbol (as the jobs and entry points that reach them declare).
callbacks.link(symbols.TILE, symbols.PIXEL_PANELS)


def _packed(w: np.ndarray) -> np.ndarray:
    """``w`` (units, k) in ``(panels, k, PANEL)`` panels, the short last one zero-padded."""
    units, k = w.shape
    panels = -(-units // PANEL)
    padded = np.zeros((panels * PANEL, k), np.float32)
    padded[:units] = w
    return np.ascontiguousarray(padded.reshape(panels, PANEL, k).transpose(0, 2, 1))


def _operands(rows: int, units: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of data, a weight and the weight packed."""
    a = RNG.standard_normal((rows, k)).astype(np.float32)
    w = RNG.standard_normal((units, k)).astype(np.float32)
    return a, w, _packed(w)


@pytest.mark.parametrize("rows", [1, packed.ROWS - 1, packed.ROWS, packed.ROWS + 1, 29])
@pytest.mark.parametrize("units", [1, 15, 16, 17, 32, 45, 64, 70])
@pytest.mark.parametrize("rows_outer", [0, 1])
def test_a_packed_product_is_numpys(rows: int, units: int, rows_outer: int) -> None:
    k = 37
    a, w, pw = _operands(rows, units, k)
    c = np.full((rows, units), np.nan, np.float32)
    panels = pw.shape[0]
    packed.product_range(
        (a.ctypes.data, k, 1), pw.ctypes.data, k, units, (c.ctypes.data, units, 1),
        (0, rows), (0, panels), rows_outer,
    )  # fmt: skip
    np.testing.assert_allclose(c, a @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("units", [7, 32, 40])
def test_a_transposed_output_and_a_part_of_the_rows_and_panels(units: int) -> None:
    # A convolution's orientation: c's rows are the output's columns.
    rows, k = 11, 9
    a, w, pw = _operands(rows, units, k)
    c = np.full((units, rows), np.nan, np.float32)
    panels = pw.shape[0]
    packed.product_range(
        (a.ctypes.data, k, 1), pw.ctypes.data, k, units, (c.ctypes.data, 1, rows),
        (3, rows), (0, panels), 0,
    )  # fmt: skip
    np.testing.assert_allclose(c[:, 3:], (a @ w.T).T[:, 3:], rtol=1e-5, atol=1e-5)
    assert np.isnan(c[:, :3]).all()  # rows outside the range are not written


def test_panel_products_write_whole_and_short_groups_of_columns() -> None:
    rows, k, columns = 5, 13, 45  # one whole group of 32 columns, then 13
    w = RNG.standard_normal((rows, k)).astype(np.float32)
    pw = _packed(w)  # one panel: its rows 1 element apart, its k steps PANEL apart
    b = np.zeros((k * columns + PANEL,), np.float32)
    b[: k * columns] = RNG.standard_normal(k * columns)
    bm = b[: k * columns].reshape(k, columns)
    c = np.full((rows, columns), np.nan, np.float32)
    packed.panel_product(
        pw.ctypes.data, k, rows, (b.ctypes.data, columns), columns,
        (c.ctypes.data, columns),
    )  # fmt: skip
    np.testing.assert_allclose(c, w @ bm, rtol=1e-5, atol=1e-5)


def _reference_post(c: np.ndarray, bias: np.ndarray, lo: float, hi: float, activation: int,
                    residual: np.ndarray) -> np.ndarray:  # fmt: skip
    """What the kernels' elementwise bias_add, add (of a residual) then clip, relu or
    swish give."""
    v = (c + bias[:, None]).astype(np.float32)
    if residual.size:
        v = (v + residual).astype(np.float32)
    if activation == packed.SWISH:
        with np.errstate(over="ignore"):
            v = v / (1 + np.exp(-v.astype(np.float64)))
    elif activation == packed.RELU:
        v = np.where(v > lo, v, np.float32(lo))
    else:
        v = np.minimum(np.maximum(v, np.float32(lo)), np.float32(hi))
    return v.astype(np.float32)


def _panel_operands(rows: int, k: int, columns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A weight, its packed panel, and ``columns`` columns of data with a NaN product (relu
    turns it into lo, clip and swish keep it)."""
    w = RNG.standard_normal((rows, k)).astype(np.float32)
    b = np.zeros((k * columns + PANEL,), np.float32)
    b[: k * columns] = RNG.standard_normal(k * columns)
    b[5] = np.nan
    return w, _packed(w), b


@pytest.mark.parametrize(
    ("lo", "hi", "activation"),
    [
        (0.0, 6.0, packed.CLAMP),
        (0.0, np.inf, packed.RELU),
        (-np.inf, np.inf, packed.CLAMP),
        (-np.inf, np.inf, packed.SWISH),
    ],
)
@pytest.mark.parametrize("unit", [0, 3])
@pytest.mark.parametrize("k", [11, 2 * packed.PIXEL_K_BLOCK + 37])
@pytest.mark.parametrize("with_residual", [False, True])
def test_panel_products_apply_bias_and_activation_as_they_store(
    lo: float, hi: float, activation: int, unit: int, k: int, with_residual: bool
) -> None:
    # A long k runs in blocks, the epilogue only after the last.
    rows, columns = packed.ROWS + 2, 45
    w, pw, b = _panel_operands(rows, k, columns)
    bm = b[: k * columns].reshape(k, columns)
    bias = RNG.standard_normal(unit + rows).astype(np.float32)
    c = np.full((rows, columns), np.nan, np.float32)
    shape = (rows, columns) if with_residual else (0,)
    residual = RNG.standard_normal(shape).astype(np.float32)
    post = packed.post_epilogue(unit + rows, bias, lo, hi, activation, residual, c)
    packed.panel_product(
        pw.ctypes.data, k, rows, (b.ctypes.data, columns), columns,
        (c.ctypes.data, columns), post.ctypes.data, unit,
    )  # fmt: skip
    expected = _reference_post(np.dot(w, bm), bias[unit:], lo, hi, activation, residual)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)
    assert np.array_equal(np.isnan(c), np.isnan(expected))
    # The same epilogue applied after the fact, for products that cannot fuse it.
    plain = np.dot(w, bm).astype(np.float32)
    own = packed.post_epilogue(rows, bias[unit:], lo, hi, activation, residual, plain)
    packed.apply_post(plain, own.ctypes.data)
    np.testing.assert_allclose(plain, expected, rtol=1e-4, atol=1e-4)
    assert np.array_equal(np.isnan(plain), np.isnan(expected))


@pytest.mark.parametrize("columns", [45, 64])
def test_a_swish_in_the_tiles_gives_the_bits_of_the_loops_after_them(columns: int) -> None:
    # The tiles' vector exponential and vecmath's (which the elementwise kernels and
    # apply_post use) must agree bit for bit, or a result would depend on fusion. Large
    # sums reach exp's clamps, both ends.
    rows, k = packed.ROWS + 3, 19
    w, pw, b = _panel_operands(rows, k, columns)
    w *= 20
    pw = _packed(w)
    bias = RNG.standard_normal(rows).astype(np.float32)
    fused = np.full((rows, columns), np.nan, np.float32)
    post = packed.post_epilogue(rows, bias, -np.inf, np.inf, packed.SWISH, np.empty(0, np.float32),
                                fused)  # fmt: skip
    packed.panel_product(
        pw.ctypes.data, k, rows, (b.ctypes.data, columns), columns,
        (fused.ctypes.data, columns), post.ctypes.data, 0,
    )  # fmt: skip
    after = np.full((rows, columns), np.nan, np.float32)
    packed.panel_product(
        pw.ctypes.data, k, rows, (b.ctypes.data, columns), columns, (after.ctypes.data, columns)
    )  # fmt: skip
    assert np.abs(after[np.isfinite(after)]).max() > 200
    packed.apply_post(after, post.ctypes.data)
    np.testing.assert_array_equal(fused, after)


@pytest.mark.parametrize("activation", [packed.RELU, packed.SWISH])
def test_an_epilogue_applied_to_a_band_of_rows_changes_only_that_band(activation: int) -> None:
    # A band of a plane, as a grouped convolution applies it: rows a plane apart, the
    # first pixels of each, units from `first` on.
    units, plane, pixels, first, count = 12, 50, 23, 4, 5
    full = RNG.standard_normal((units, plane)).astype(np.float32)
    before = full.copy()
    bias = RNG.standard_normal(units).astype(np.float32)
    none = np.empty(0, np.float32)
    post = packed.post_epilogue(units, bias, 0.0, np.inf, activation, none, full)
    packed.apply_post(full[first : first + count, :pixels], post.ctypes.data, first)
    band = (slice(first, first + count), slice(0, pixels))
    expected = before.copy()
    expected[band] = _reference_post(before[band], bias[band[0]], 0.0, np.inf, activation, none)
    np.testing.assert_allclose(full, expected, rtol=1e-6, atol=1e-6)
    assert np.array_equal(full[:, pixels:], before[:, pixels:])


@pytest.mark.parametrize("units", [64, 81])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("k", [packed.DIRECT_BLOCKED_MIN_DEPTH + 37, packed.BLOCKED_MIN_DEPTH + 37])
def test_a_deep_product_in_blocks_is_numpys(units: int, transposed: bool, k: int) -> None:
    # Blocks of equal depth; with 81 units the short last panel takes the unblocked path
    # beside the blocked whole ones; transposed, the result goes through a buffer, and
    # only the deeper product is blocked.
    rows = 2 * packed.ROWS + 1
    a, w, pw = _operands(rows, units, k)
    c = np.full((units, rows) if transposed else (rows, units), np.nan, np.float32)
    strides = (1, rows) if transposed else (units, 1)
    packed.product_range(
        (a.ctypes.data, k, 1), pw.ctypes.data, k, units, (c.ctypes.data, *strides),
        (1, rows), (0, pw.shape[0]), 0,
    )  # fmt: skip
    got = c.T if transposed else c
    np.testing.assert_allclose(got[1:], (a @ w.T)[1:], rtol=1e-4, atol=1e-3)
    assert np.isnan(got[0]).all()  # the row before the range is not written


def _before_an_unmapped_page(nbytes: int) -> tuple[mmap.mmap, int]:
    """A mapping whose first ``nbytes`` (whole pages) are readable and whose next page is
    not, and the address of its start."""
    page = mmap.PAGESIZE
    assert nbytes % page == 0
    region = mmap.mmap(-1, nbytes + page)
    start = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if libc.mprotect(start + nbytes, page, 0) != 0:  # PROT_NONE
        pytest.skip(f"mprotect failed: errno {ctypes.get_errno()}")
    return region, start


@pytest.mark.parametrize("rows", [packed.AHEAD_MIN_ROWS, packed.ROWS])
def test_the_last_weight_panel_before_an_unmapped_page_multiplies_as_numpy(rows: int) -> None:
    # Tiles of that many rows ask for the lines k rows past their panel as they read it;
    # after the last panel those are in the unmapped page, which a prefetch never faults on.
    k = 2 * mmap.PAGESIZE // (PANEL * 4)
    a, w, pw = _operands(rows, PANEL, k)
    region, start = _before_an_unmapped_page(pw.nbytes)
    weight = np.frombuffer(region, np.float32, pw.size).reshape(pw.shape)
    weight[...] = pw
    c = np.full((rows, PANEL), np.nan, np.float32)
    packed.product_range(
        (a.ctypes.data, k, 1), start, k, PANEL, (c.ctypes.data, PANEL, 1), (0, rows), (0, 1), 0
    )
    np.testing.assert_allclose(c, a @ w.T, rtol=1e-5, atol=1e-5)
    del weight


@pytest.mark.parametrize("rows_outer", [0, 1])
@pytest.mark.parametrize("units", [45, 300])
@pytest.mark.parametrize("k", [37, packed.DIRECT_BLOCKED_MIN_DEPTH + 5])
def test_a_dense_epilogue_reaches_every_column_of_the_range_once(
    rows_outer: int, units: int, k: int
) -> None:
    # Strips of rows across the panels, groups of panels down the rows (300 units: more
    # than one group, a short last panel), and whole panels in blocks of k beside it.
    rows = 2 * packed.ROWS + 3
    a, w, pw = _operands(rows, units, k)
    bias = RNG.standard_normal(units).astype(np.float32)
    c = np.full((rows, units), np.nan, np.float32)
    residual = RNG.standard_normal((rows, units)).astype(np.float32)
    lo, hi = np.float32(-20.0), np.float32(20.0)
    post = packed.post_epilogue(units, bias, lo, hi, packed.CLAMP, residual, c)
    packed.product_range(
        (a.ctypes.data, k, 1), pw.ctypes.data, k, units, (c.ctypes.data, units, 1),
        (1, rows), (0, pw.shape[0]), rows_outer, post.ctypes.data,
    )  # fmt: skip
    want = np.clip(a @ w.T + bias + residual, lo, hi)
    np.testing.assert_allclose(c[1:], want[1:], rtol=1e-4, atol=1e-3)
    assert np.isnan(c[0]).all()  # the row before the range is not written


def _dense_with_activation(
    activation: int, lo: np.float32, hi: np.float32
) -> tuple[np.ndarray, np.ndarray]:
    """A 30x70 product with a bias, plain and with ``activation`` in its epilogue."""
    rows, units, k = 30, 70, 24
    a, _, pw = _operands(rows, units, k)
    bias = RNG.standard_normal(units).astype(np.float32) * np.float32(3.0)
    plain = np.empty((rows, units), np.float32)
    packed.product_range(
        (a.ctypes.data, k, 1), pw.ctypes.data, k, units, (plain.ctypes.data, units, 1),
        (0, rows), (0, pw.shape[0]), 1,
    )  # fmt: skip
    c = np.empty_like(plain)
    post = packed.post_epilogue(units, bias, lo, hi, activation, np.empty(0, np.float32), c)
    packed.product_range(
        (a.ctypes.data, k, 1), pw.ctypes.data, k, units, (c.ctypes.data, units, 1),
        (0, rows), (0, pw.shape[0]), 1, post.ctypes.data,
    )  # fmt: skip
    return plain + bias, c


def test_a_dense_gelu_epilogue_gives_the_bits_of_the_scalar_gelu() -> None:
    root2, half = np.float32(np.sqrt(2.0)), np.float32(0.5)
    biased, c = _dense_with_activation(packed.GELU, root2, half)
    want = np.array([packed.gelu(v, root2, half) for v in biased.ravel()], np.float32)
    np.testing.assert_array_equal(c, want.reshape(c.shape))


def test_a_dense_tanh_gelu_epilogue_gives_the_bits_of_the_scalar_gelu() -> None:
    scale, half = np.float32(np.sqrt(2.0 / np.pi)), np.float32(0.5)
    biased, c = _dense_with_activation(packed.GELU_TANH, scale, half)
    want = np.array([packed.gelu_tanh(v, scale, half) for v in biased.ravel()], np.float32)
    np.testing.assert_array_equal(c, want.reshape(c.shape))
    # And the function is the tanh gelu, within float32 rounding.
    exact = 0.5 * biased * (1 + np.tanh(np.sqrt(2 / np.pi) * (biased + 0.044715 * biased**3)))
    np.testing.assert_allclose(c, exact, rtol=1e-5, atol=1e-6)


@njit
def _split_pairs(source: np.ndarray, even: np.ndarray, odd: np.ndarray, count: int) -> None:
    # An intrinsic: callable from compiled code only.
    packed.split_pairs(source.ctypes.data, even.ctypes.data, odd.ctypes.data, count)


@pytest.mark.parametrize("count", [0, 1, 15, 16, 17, 40])
def test_split_pairs_sends_even_and_odd_elements_apart(count: int) -> None:
    source = RNG.standard_normal(2 * count + 3).astype(np.float32)
    even = np.full(count + 2, np.nan, np.float32)
    odd = np.full(count + 2, np.nan, np.float32)
    _split_pairs(source, even, odd, count)
    np.testing.assert_array_equal(even[:count], source[0 : 2 * count : 2])
    np.testing.assert_array_equal(odd[:count], source[1 : 2 * count : 2])
    assert np.isnan(even[count:]).all() and np.isnan(odd[count:]).all()  # nothing past


@njit
def _take_evens(source: np.ndarray, even: np.ndarray, count: int) -> None:
    packed.take_evens(source.ctypes.data, even.ctypes.data, count)


@pytest.mark.parametrize("count", [0, 1, 15, 16, 17, 40])
def test_take_evens_copies_every_other_element(count: int) -> None:
    source = RNG.standard_normal(2 * count + 3).astype(np.float32)
    even = np.full(count + 2, np.nan, np.float32)
    _take_evens(source, even, count)
    np.testing.assert_array_equal(even[:count], source[0 : 2 * count : 2])
    assert np.isnan(even[count:]).all()  # nothing past


# ---- traps ------------------------------------------------------------------------------------


@pytest.mark.parametrize("view", ["rows with gaps between elements", "float64"])
def test_an_epilogue_on_an_output_that_is_not_float32_rows_raises(view: str) -> None:
    full = np.zeros((4, 10), np.float32)
    none = np.empty(0, np.float32)
    post = packed.post_epilogue(4, np.zeros(4, np.float32), 0.0, np.inf, packed.RELU, none, full)
    out = np.zeros((4, 10)) if view == "float64" else full[:, ::2]
    with pytest.raises(ValueError, match="float32 with contiguous rows"):
        packed.apply_post(out, post.ctypes.data)

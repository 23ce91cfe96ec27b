"""Pooling kernels match the compiler's references.

Returns group: max and average pooling with strides, the padding forms, dilation,
column strides of 2 on float32 rows split by phase,
``ceil_mode`` (including a last window hanging past the padding) and
``count_include_pad``, over float32, float64, float16 and integer data (max pooling pads
with the dtype's lowest value and lets NaN win); global max and average pooling; adaptive
average pooling to a given size, to a square size and to the input's size. Traps group:
windows larger than the padded input and empty planes, as ValueErrors naming the node.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from tests.vm.kernels.harness import Program, check, run
from tests.vm.kernels.workers import assert_shared, needs_workers
from vm.kernels.runtime import jobs, pool_loops

RNG = np.random.default_rng(41)


def tensor(dtype: str, *shape: int) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-128, 128, shape).astype(dtype)


def pool(op: str, data: np.ndarray, **attrs: object) -> tuple[Program, list[int]]:
    program = Program([data])
    return program, program.add(op, [0], **attrs)


RESNET_MAX = {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)}
ODD_WINDOWS = {
    "pool_size": (3, 2), "strides": (2, 3), "padding": (0, 1, 1, 0), "dilation": (1, 2),
    "ceil_mode": True,
}  # fmt: skip


# The last shape is big enough to be split between threads by planes.
@pytest.mark.parametrize("shape", [(1, 2, 9, 8), (2, 3, 16, 17), (1, 1, 3, 3), (2, 16, 63, 64)])
def test_max_pool2d_resnet_windows(shape: tuple) -> None:
    data = tensor("float32", *shape)
    data[0, 0, 1, 1] = np.nan
    check(*pool("nn.max_pool2d", data, **RESNET_MAX))


@pytest.mark.parametrize("shape", [(1, 2, 10, 9), (2, 1, 7, 12)])
def test_max_pool2d_ceil_mode_dilation_and_asymmetric_padding(shape: tuple) -> None:
    check(*pool("nn.max_pool2d", tensor("float32", *shape), **ODD_WINDOWS))


# A column stride of 2 reads float32 rows split into even and odd columns: windows whose
# offsets start at either phase, a column dilation, odd and even widths, NaN in both phases.
@pytest.mark.parametrize(
    "attrs",
    [
        {"pool_size": (2, 4), "strides": (1, 2), "padding": (0, 2, 1, 1)},
        {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 0), "dilation": (1, 2)},
        {"pool_size": (1, 5), "strides": (3, 2), "padding": (0, 3, 0, 2), "ceil_mode": True},
    ],
    ids=["even-left-padding", "column-dilation", "odd-left-padding"],
)
@pytest.mark.parametrize("width", [19, 40])
def test_max_pool2d_column_stride_2_reads_either_phase(attrs: dict, width: int) -> None:
    data = tensor("float32", 2, 3, 9, width)
    data[0, 1, 2, 4] = np.nan
    data[1, 2, 5, 7] = np.nan
    check(*pool("nn.max_pool2d", data, **attrs))


@pytest.mark.parametrize("dtype", ["int8", "float16"])
def test_max_pool2d_other_dtypes_pad_with_their_lowest_value(dtype: str) -> None:
    check(*pool("nn.max_pool2d", tensor(dtype, 2, 3, 7, 7), pool_size=(2, 2), strides=(2, 2),
                padding=(1, 1), ceil_mode=True))  # fmt: skip


# (count_include_pad=False, ceil_mode=True) is covered by the float64 and float16 test.
@pytest.mark.parametrize(("include_pad", "ceil_mode"), [(False, False), (True, True)])
def test_avg_pool2d_counts_with_and_without_padding(include_pad: bool, ceil_mode: bool) -> None:
    for shape in [(1, 2, 9, 8), (2, 3, 10, 11), (1, 32, 64, 40)]:
        program, results = pool(
            "nn.avg_pool2d", tensor("float32", *shape), pool_size=(3, 3), strides=(2, 2),
            padding=(1, 1), ceil_mode=ceil_mode, count_include_pad=include_pad,
        )  # fmt: skip
        check(program, results)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_avg_pool2d_other_float_dtypes(dtype: str) -> None:
    check(*pool("nn.avg_pool2d", tensor(dtype, 1, 2, 10, 9), **ODD_WINDOWS))


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 8, 7, 7), (1, 1, 1, 1)])
def test_global_pools(shape: tuple) -> None:
    data = tensor("float32", *shape)
    program = Program([data])
    results = [
        program.add("nn.global_max_pool2d", [0])[0],
        program.add("nn.global_avg_pool2d", [0])[0],
    ]
    check(program, results, ["global max", "global avg"])


def test_global_max_pool2d_of_integers_and_nan() -> None:
    check(*pool("nn.global_max_pool2d", tensor("int8", 2, 3, 4, 5)))
    data = tensor("float64", 1, 2, 3, 3)
    data[0, 1, 2, 0] = np.nan
    check(*pool("nn.global_max_pool2d", data))


def test_adaptive_avg_pool2d_bins_to_a_size_a_square_and_the_input_size() -> None:
    sizes = [(3, 2), 4, None]
    for shape in [(2, 3, 7, 5), (1, 2, 4, 9)]:
        program = Program([tensor("float32", *shape)])
        results = [program.add("nn.adaptive_avg_pool2d", [0], output_size=s)[0] for s in sizes]
        check(program, results, [f"output_size={s}" for s in sizes])


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d"])
def test_a_ceil_mode_window_wider_than_the_input_pools_what_it_covers(op: str) -> None:
    # EfficientNet's pooler as transformers writes it: a 1280-wide window on a 7x7 image.
    data = tensor("float32", 1, 3, 7, 7)
    program, results = pool(op, data, pool_size=(1280, 1280), strides=(1280, 1280), ceil_mode=True)
    check(program, results)
    (out,) = run(program.description(results), [data], [np.zeros((1, 3, 1, 1), "float32")])
    whole = data.max(axis=(2, 3)) if op == "nn.max_pool2d" else data.mean(axis=(2, 3))
    np.testing.assert_allclose(out.reshape(1, 3), whole, rtol=1e-6)


@pytest.mark.parametrize("include_pad", [False, True])
def test_an_avg_pool_window_wider_than_its_row_of_outputs_sums_each_window(
    include_pad: bool,
) -> None:
    # Windows 6 wide with 2 or 3 outputs per row take the loop by output element.
    for shape in [(1, 2, 7, 9), (2, 3, 8, 12)]:
        program, results = pool(
            "nn.avg_pool2d", tensor("float32", *shape), pool_size=(4, 6), strides=(2, 3),
            padding=(1, 1), count_include_pad=include_pad,
        )  # fmt: skip
        check(program, results)


def test_pools_raise_on_windows_bigger_than_the_input() -> None:
    program, results = pool("nn.max_pool2d", tensor("float32", 1, 2, 9, 8), **RESNET_MAX)
    desc = program.description(results)
    with pytest.raises(ValueError, match=r"node 0 \(nn\.max_pool2d\): the padded input height"):
        run(desc, [tensor("float32", 1, 2, 0, 8)], [np.zeros((1, 2, 1, 4), "float32")])
    program = Program([tensor("float32", 1, 2, 3, 3)])
    desc = program.description(program.add("nn.global_max_pool2d", [0]))
    with pytest.raises(ValueError, match="at least one element per window"):
        run(desc, [tensor("float32", 1, 2, 0, 3)], [np.zeros((1, 2, 1, 1), "float32")])


@njit(nogil=True)
def _max_pool(x, out, window):
    ph, pw, sh, sw, dh, dw, pt, pl = window
    pool_loops.max_pool2d_float(x, out, ph, pw, sh, sw, dh, dw, pt, pl)


@needs_workers
def test_a_max_pool_shared_with_polling_workers_matches_one_thread() -> None:
    # ResNet's 3x3/2 pool on enough planes to be split; NaN must still win its windows.
    jobs.require(jobs.MAX_POOL)  # called directly: no kernel loader requires it
    x = np.random.default_rng(7).standard_normal((2, 9, 64, 63)).astype("float32")
    x[1, 3, 4, 7] = np.nan
    window = (3, 3, 2, 2, 1, 1, 1, 1)
    want = np.empty((2, 9, 32, 32), "float32")
    assert want.size * 9 >= pool_loops.SPLIT_WORK
    pool_loops.max_pool2d(x, want, *window, -np.inf, 0, 18)
    assert np.isnan(want[1, 3]).any()
    got = np.empty_like(want)

    def shared_run() -> None:
        got[...] = 0
        _max_pool(x, got, window)

    assert_shared(shared_run, lambda: np.testing.assert_array_equal(got, want))

"""nn.dense, nn.matmul, nn.batch_matmul, nn.softmax and nn.log_softmax kernels match the references.

Returns group: products small enough for the compiled loop and big enough for BLAS (the
same kernel picks by size), integer products with a wider out_dtype, float16, batch
broadcasting and every transpose combination; softmax over each axis. Traps group:
operands whose inner dimensions disagree.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import SUMS, Program, check, packed, run

RNG = np.random.default_rng(5)


@pytest.mark.parametrize(
    ("data_shape", "units"),
    [((3, 4), 5), ((64, 128), 96), ((2, 3, 8), 4), ((1, 0), 3), ((0, 4), 2), ((16,), 3)],
)
def test_dense_float32_uses_loops_or_blas_by_size(data_shape: tuple, units: int) -> None:
    x = RNG.standard_normal(data_shape).astype("float32")
    w = RNG.standard_normal((units, data_shape[-1])).astype("float32")
    program = Program([x, w])
    check(program, program.add("nn.dense", [0, 1]), tolerances=SUMS)


@pytest.mark.parametrize(
    ("dtype", "out_dtype"),
    [("float64", ""), ("float16", ""), ("int8", "int32"), ("int32", ""), ("uint8", "float32")],
)
def test_dense_other_dtypes_accumulate_in_out_dtype(dtype: str, out_dtype: str) -> None:
    if np.dtype(dtype).kind == "f":
        x = RNG.standard_normal((4, 16)).astype(dtype)
        w = RNG.standard_normal((3, 16)).astype(dtype)
    else:
        x = RNG.integers(0 if dtype == "uint8" else -100, 100, (4, 16)).astype(dtype)
        w = RNG.integers(0 if dtype == "uint8" else -100, 100, (3, 16)).astype(dtype)
    program = Program([x, w])
    check(program, program.add("nn.dense", [0, 1], out_dtype=out_dtype), tolerances=SUMS)


def test_dense_of_large_float64_operands_matches() -> None:
    x = RNG.standard_normal((40, 50)).astype("float64")
    w = RNG.standard_normal((60, 50)).astype("float64")
    program = Program([x, w])
    check(program, program.add("nn.dense", [0, 1]), tolerances=SUMS)


@pytest.mark.parametrize(("m", "k", "n"), [(3, 4, 5), (64, 128, 96), (1, 300, 200), (0, 4, 2)])
def test_matmul_every_transpose_combination_by_loops_or_blas(m: int, k: int, n: int) -> None:
    combos = [(False, False), (False, True), (True, False), (True, True)]
    arrays = []
    for ta, tb in combos:
        arrays += [
            RNG.standard_normal((k, m) if ta else (m, k)).astype("float32"),
            RNG.standard_normal((n, k) if tb else (k, n)).astype("float32"),
        ]
    program = Program(arrays)
    results = [
        program.add("nn.matmul", [2 * i, 2 * i + 1], transpose_a=ta, transpose_b=tb)[0]
        for i, (ta, tb) in enumerate(combos)
    ]
    names = [f"transpose_a={ta} transpose_b={tb}" for ta, tb in combos]
    check(program, results, names, tolerances=SUMS)


def test_matmul_of_three_dimensional_data_and_integers() -> None:
    x = RNG.standard_normal((2, 3, 8)).astype("float32")
    w = RNG.standard_normal((8, 5)).astype("float32")
    xi = RNG.integers(-100, 100, (4, 16)).astype("int8")
    wi = RNG.integers(-100, 100, (16, 3)).astype("int8")
    program = Program([x, w, xi, wi])
    results = [
        program.add("nn.matmul", [0, 1])[0],
        program.add("nn.matmul", [2, 3], out_dtype="int32")[0],
    ]
    check(program, results, tolerances=SUMS)


@pytest.mark.parametrize(
    ("batch_x", "batch_y", "m", "k", "n"),
    [(2, 2, 3, 4, 5), (1, 3, 2, 6, 2), (4, 1, 1, 1, 1), (2, 2, 40, 30, 50), (3, 1, 20, 7, 33)],
)
def test_batch_matmul_every_transpose_combination(
    batch_x: int, batch_y: int, m: int, k: int, n: int
) -> None:
    shapes = {
        (False, False): ((batch_x, m, k), (batch_y, k, n)),
        (False, True): ((batch_x, m, k), (batch_y, n, k)),
        (True, False): ((batch_x, k, m), (batch_y, k, n)),
        (True, True): ((batch_x, k, m), (batch_y, n, k)),
    }
    arrays = []
    for xs, ys in shapes.values():
        arrays += [
            RNG.standard_normal(xs).astype("float32"),
            RNG.standard_normal(ys).astype("float32"),
        ]
    program = Program(arrays)
    results = [
        program.add("nn.batch_matmul", [2 * i, 2 * i + 1], transpose_a=ta, transpose_b=tb)[0]
        for i, (ta, tb) in enumerate(shapes)
    ]
    check(
        program,
        results,
        [f"transpose_a={ta} transpose_b={tb}" for ta, tb in shapes],
        tolerances=SUMS,
    )


def test_batch_matmul_integers_wrap_in_out_dtype() -> None:
    x = RNG.integers(-128, 128, (2, 3, 7)).astype("int8")
    y = RNG.integers(-128, 128, (2, 5, 7)).astype("int8")
    program = Program([x, y])
    results = [
        program.add("nn.batch_matmul", [0, 1])[0],
        program.add("nn.batch_matmul", [0, 1], out_dtype="int32")[0],
    ]
    check(program, results)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_softmax_and_log_softmax_along_each_axis(dtype: str) -> None:
    x = RNG.uniform(-5, 5, (3, 4, 5)).astype(dtype)
    x[0, 0, 0] = -np.inf
    program = Program([x])
    axes = [-1, 0, 1]
    results = [program.add("nn.softmax", [0], axis=a)[0] for a in axes]
    results += [program.add("nn.log_softmax", [0], axis=a)[0] for a in axes]
    check(program, results, [f"{op} axis={a}" for op in ("softmax", "log_softmax") for a in axes])


@pytest.mark.parametrize("rows", [6, 160], ids=["6 rows", "160 rows, shared by rows"])
def test_softmax_rows_with_nan_infinities_and_one_element(rows: int) -> None:
    x = RNG.uniform(-5, 5, (rows, 130)).astype("float32")
    x[1, 7] = np.nan  # the row is NaN
    x[2, 3] = np.inf  # NaN where infinite, zero elsewhere (numpy's inf - inf)
    x[3, :] = -np.inf  # all NaN
    x[4, 100:] = 80.0  # large values share the row evenly
    program = Program([x, x[:, :1].copy()])
    results = [program.add("nn.softmax", [0])[0], program.add("nn.softmax", [1])[0]]
    check(program, results, ["softmax of 130", "softmax of 1"])


def test_a_causally_masked_softmax_gives_exact_zeros_where_masked() -> None:
    # Masked entries are float32's lowest (as exporters write the mask) or far below the
    # row's maximum: their exponentials are below float32's normal range, and are 0.
    x = RNG.uniform(-5, 5, (2, 3, 40, 40)).astype("float32")
    masked = np.triu(np.ones((40, 40), bool), 1)
    x[..., masked] = np.finfo(np.float32).min
    x[0, 0, 5, :3] -= 95.0
    program = Program([x])
    results = [program.add("nn.softmax", [0])[0], program.add("nn.softmax", [0], axis=2)[0]]
    check(program, results, ["softmax of rows", "softmax of columns"])
    got = run(program.description(results), [x], program.expected(results))
    assert (got[0][..., masked] == 0.0).all() and (got[0][0, 0, 5, :3] == 0.0).all()
    assert (got[1][..., masked] == 0.0).all()


def test_products_with_disagreeing_inner_dimensions_raise() -> None:
    x = RNG.standard_normal((3, 4)).astype("float32")
    w = RNG.standard_normal((5, 4)).astype("float32")
    program = Program([x, w])
    desc = program.description(program.add("nn.dense", [0, 1]))
    with pytest.raises(ValueError, match=r"nn\.dense.*expected 5, found 4"):
        run(desc, [RNG.standard_normal((3, 5)).astype("float32"), w], [np.zeros((3, 5), "float32")])
    program = Program([x, w.T.copy()])
    desc = program.description(program.add("nn.matmul", [0, 1]))
    with pytest.raises(ValueError, match=r"nn\.matmul.*expected 5, found 4"):
        run(
            desc,
            [RNG.standard_normal((3, 5)).astype("float32"), w.T.copy()],
            [np.zeros((3, 5), "float32")],
        )


# ---- nn.contrib_dense_pack and layout_transform ------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "features", "units"),
    # Row counts around the 7-row register tile, units around the 32-wide panels, and one
    # product big enough to be shared with the worker threads.
    [(1, 16, 32), (6, 33, 40), (7, 64, 64), (8, 5, 31), (15, 100, 97), (64, 512, 256), (0, 4, 3)],
)
def test_packed_products_in_register_tiles_match_dense(
    rows: int, features: int, units: int
) -> None:
    x = RNG.standard_normal((rows, features)).astype("float32")
    w = RNG.standard_normal((units, features)).astype("float32")
    program = Program([x, packed(w)])
    check(program, program.add("nn.contrib_dense_pack", [0, 1], units=units), tolerances=SUMS)


@pytest.mark.parametrize(("dtype", "width"), [("float64", 32), ("float32", 8), ("int32", 4)])
def test_other_packed_products_run_as_loops(dtype: str, width: int) -> None:
    x = (RNG.standard_normal((2, 3, 10)) * 10).astype(dtype)
    w = (RNG.standard_normal((13, 10)) * 10).astype(dtype)
    program = Program([x, packed(w, width)])
    result = program.add("nn.contrib_dense_pack", [0, 1], units=13, weight_layout=f"NC{width}n")
    check(program, result, tolerances=SUMS)


@pytest.mark.parametrize(("units", "width"), [(64, 32), (70, 32), (5, 2), (0, 4)])
def test_layout_transform_packs_with_zero_padding(units: int, width: int) -> None:
    w = RNG.standard_normal((units, 9)).astype("float32")
    program = Program([w])
    check(program, program.add("layout_transform", [0], src_layout="NC", dst_layout=f"NC{width}n"))


def test_a_packed_weight_of_the_wrong_width_or_features_traps() -> None:
    x = RNG.standard_normal((3, 4)).astype("float32")
    w = packed(RNG.standard_normal((5, 4)).astype("float32"))
    program = Program([x, w])
    desc = program.description(program.add("nn.contrib_dense_pack", [0, 1], units=5))
    with pytest.raises(ValueError, match=r"nn\.contrib_dense_pack.*input features"):
        run(desc, [RNG.standard_normal((3, 6)).astype("float32"), w], [np.zeros((3, 5), "float32")])
    narrow = np.zeros((1, 4, 16), "float32")
    with pytest.raises(ValueError, match=r"nn\.contrib_dense_pack.*panel width"):
        run(desc, [x, narrow], [np.zeros((3, 5), "float32")])

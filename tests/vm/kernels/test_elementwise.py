"""Elementwise and broadcasting kernels return what the compiler's numpy references return.

Returns group: binary operators per dtype (one kernel per dtype computes every operator, so
the compile budget stays small), rank broadcasting, the last two axes walked as one where
the operands allow it, unary math, clip, cast between every
pair of dtypes, fills, where, broadcast_to and nn.bias_add.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import DTYPES, Program, cast_all, check
from vm.kernels import load_kernel

RNG = np.random.default_rng(1234)

ARITHMETIC = ["add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power"]
ORDERING = ["maximum", "minimum"]
COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
BINARY_OPS = {
    dtype: ARITHMETIC + ORDERING + COMPARISONS
    for dtype in ("float32", "float64", "float16", "int32", "int8", "int64", "uint8", "uint64")
}
BINARY_OPS["bool"] = ORDERING + COMPARISONS + ["logical_and", "logical_or"]

#: (lhs shape, rhs shape): same shape (the common case), broadcasting both ways, empty.
SHAPES = {
    "same": ((3, 5), (3, 5)),
    "bcast": ((3, 1), (1, 5)),
    "row": ((4, 6), (1, 6)),
    "empty": ((0, 5), (1, 5)),
}


def operands(dtype: str, lhs: tuple, rhs: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Operands valid for every binary operator: no zero divisor, no 0 ** negative."""
    if dtype == "bool":
        return RNG.random(lhs) < 0.5, RNG.random(rhs) < 0.5
    kind = np.dtype(dtype).kind
    if kind == "f":
        a = RNG.uniform(-4, 4, lhs).astype(dtype)
        b = RNG.uniform(0.5, 3, rhs) * RNG.choice([-1, 1], rhs)
        return a, b.astype(dtype)
    if kind == "u":
        return RNG.integers(0, 200, lhs).astype(dtype), RNG.integers(1, 6, rhs).astype(dtype)
    a = RNG.integers(-100, 100, lhs).astype(dtype)
    a[a == 0] = 7
    b = RNG.integers(-5, 6, rhs).astype(dtype)
    b[b == 0] = 3
    return a, b


def binary_program(dtype: str, a: np.ndarray, b: np.ndarray) -> tuple[Program, list[int]]:
    program = Program([a, b])
    results = [program.add(op, [0, 1])[0] for op in BINARY_OPS[dtype]]
    return program, results


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("dtype", sorted(BINARY_OPS))
def test_binary_operators_match_reference(dtype: str, shape: str) -> None:
    a, b = operands(dtype, *SHAPES[shape])
    program, results = binary_program(dtype, a, b)
    check(program, results, [f"{op} {dtype}" for op in BINARY_OPS[dtype]])


def test_integer_overflow_wraps_like_numpy() -> None:
    a = np.array([[127, -128, 100, -1]], dtype="int8")
    b = np.array([[1, -1, 3, -128]], dtype="int8")
    program, results = binary_program("int8", a, b)
    check(program, results, BINARY_OPS["int8"])


def test_int64_extremes_divide_without_trapping() -> None:
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    a = np.array([[lo, lo, hi, -7, 7, lo + 1]], dtype="int64")
    b = np.array([[-1, 2, -1, 2, -2, -1]], dtype="int64")
    program, results = binary_program("int64", a, b)
    check(program, results, BINARY_OPS["int64"])


def test_negative_integer_powers_keep_integer_meaning() -> None:
    a = np.array([[1, -1, -1, 2, -3, 5]], dtype="int32")
    b = np.array([[-3, -3, -2, -1, -2, 1]], dtype="int32")
    program, results = binary_program("int32", a, b)
    check(program, results, BINARY_OPS["int32"])


def test_unsigned_64_bit_values_stay_unsigned() -> None:
    top = np.iinfo(np.uint64).max
    a = np.array([[top, top - 1, 2**63, 5]], dtype="uint64")
    b = np.array([[1, 2, 3, 2]], dtype="uint64")
    program, results = binary_program("uint64", a, b)
    check(program, results, BINARY_OPS["uint64"])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_special_values_follow_ieee_and_numpy(dtype: str) -> None:
    values = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5, -2.5, 1e-3]
    a = np.array(values, dtype=dtype).reshape(1, -1).repeat(len(values), 0)
    b = a.T.copy()
    program, results = binary_program(dtype, a, b)
    check(program, results, BINARY_OPS[dtype])


RANK_PAIRS = [((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1, 1, 1), (5,)), ((2, 3, 0), (1,))]


def test_operands_of_different_rank_broadcast() -> None:
    # One kernel, several (rank 3, rank 1-2) pairs with the same ranks but different sizes.
    for lhs, rhs in RANK_PAIRS:
        a, b = operands("float32", lhs, rhs)
        program = Program([a, b])
        ops = ["add", "divide", "less"]
        results = [program.add(op, [0, 1])[0] for op in ops]
        check(program, results, [f"{op} {lhs} {rhs}" for op in ops])


#: Rank-4 pairs for one kernel: its last two axes run as one loop where each operand reads
#: them all or none, and as a nest otherwise.
FOLD_PAIRS = [
    ((1, 6, 7, 7), (1, 6, 1, 1)),  # a squeeze-excite gate: folded
    ((2, 3, 5, 4), (2, 3, 5, 4)),  # same shapes: folded
    ((1, 6, 7, 7), (1, 6, 7, 1)),  # broadcast along the columns only: the nest
    ((1, 6, 7, 7), (1, 1, 1, 7)),  # broadcast along the rows only: the nest
    ((3, 1, 5, 1), (3, 4, 1, 2)),  # both broadcast, along different axes
    ((2, 3, 0, 4), (2, 3, 1, 1)),  # empty
]


def test_the_last_two_axes_fold_only_where_each_operand_reads_them_all_or_none() -> None:
    program = Program([np.zeros((1, 1, 1, 1), "float32")] * 2)
    (value,) = program.add("multiply", [0, 1])
    source = load_kernel(program.description([value])).path.read_text()
    assert "if m0_2 == m0_3 and m1_2 == m1_3:" in source
    for lhs, rhs in FOLD_PAIRS:
        program = Program(list(operands("float32", lhs, rhs)))
        (value,) = program.add("multiply", [0, 1])
        check(program, [value], [f"multiply {lhs} {rhs}"])


def test_a_lower_rank_operand_of_the_whole_plane_folds_with_it() -> None:
    for rhs in [(7, 7), (1, 7)]:
        program = Program(list(operands("float32", (2, 3, 7, 7), rhs)))
        (value,) = program.add("add", [0, 1])
        check(program, [value], [f"add {rhs}"])


@pytest.mark.parametrize("shape", [(3, 4), (1, 7), ()])
def test_scalar_operand_broadcasts(shape: tuple) -> None:
    a = RNG.uniform(-3, 3, shape).astype("float32")
    b = np.array(1.5, dtype="float32")
    program = Program([b, a])
    ops = ["subtract", "maximum"]
    check(program, [program.add(op, [0, 1])[0] for op in ops], ops)


# --- unary ---------------------------------------------------------------------------------

FLOAT_UNARY = [
    "negative", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf",
    "floor", "ceil", "round", "sign", "copy", "zeros_like", "ones_like", "nn.relu",
]  # fmt: skip
INT_UNARY = ["negative", "abs", "floor", "ceil", "round", "sign", "copy", "zeros_like",
             "ones_like", "nn.relu"]  # fmt: skip
UNARY_OPS = {
    "float32": FLOAT_UNARY,
    "float64": FLOAT_UNARY,
    "float16": FLOAT_UNARY,
    "int32": INT_UNARY,
    "int8": INT_UNARY,
    "uint8": INT_UNARY,
    "bool": ["logical_not", "copy", "zeros_like", "ones_like"],
}
CLIP = {"a_min": -1.5, "a_max": 2.25}


def unary_input(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([[True, False, True], [False, False, True]])
    if np.dtype(dtype).kind == "f":
        special = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, np.nan, np.inf, -np.inf, 100.0, -100.0]
        return np.concatenate([special, RNG.uniform(-6, 6, 12)]).astype(dtype).reshape(4, 6)
    info = np.iinfo(dtype)
    edge = [info.min, info.max, 0, 1, 2, 5]
    return (
        np.concatenate([edge, RNG.integers(max(info.min, -99), 100, 6)]).astype(dtype).reshape(2, 6)
    )


@pytest.mark.parametrize("dtype", sorted(UNARY_OPS))
def test_unary_operators_match_reference(dtype: str) -> None:
    program = Program([unary_input(dtype)])
    ops = UNARY_OPS[dtype]
    results = [program.add(op, [0])[0] for op in ops]
    if dtype != "bool":
        results.append(program.add("clip", [0], **CLIP)[0])
        ops = [*ops, "clip"]
    check(program, results, [f"{op} {dtype}" for op in ops])


def test_integer_clip_bounds_are_the_integers_inside() -> None:
    program = Program([np.arange(-128, 128).astype("int8").reshape(16, 16)])
    bounds = [(-np.inf, 3.7), (0.5, 0.7), (-300.0, 300.0), (2.0, 2.0)]
    results = [program.add("clip", [0], a_min=lo, a_max=hi)[0] for lo, hi in bounds]
    check(program, results, [f"clip to [{lo}, {hi}]" for lo, hi in bounds])


# --- cast ----------------------------------------------------------------------------------


def cast_source(dtype: str) -> np.ndarray:
    """Values whose conversion to every dtype is defined (no negative float -> unsigned)."""
    if dtype == "bool":
        return np.array([True, False, True, True])
    if np.dtype(dtype).kind == "f":
        return np.array([0.0, 1.0, 2.75, 100.9, 0.25, 3.0e-3, 65.5, 127.0], dtype=dtype)
    info = np.iinfo(dtype)
    return np.array([0, 1, info.max, info.max // 3, 100, min(info.max, 300), 2], dtype=dtype)


@pytest.mark.parametrize(
    "source", ["bool", "int8", "int64", "uint8", "uint64", "float16", "float32", "float64"]
)
def test_cast_to_every_dtype_matches_astype(source: str) -> None:
    program, results = cast_all(cast_source(source))
    check(program, results, [f"cast {source} -> {target}" for target in DTYPES])


def test_signed_floats_cast_to_signed_integers_truncate_toward_zero() -> None:
    x = np.array([-2.75, -0.5, 0.5, 2.75, -100.9, 99.99], dtype="float32")
    program = Program([x])
    targets = ["int8", "int16", "int32", "int64", "bool", "float64"]
    check(program, [program.add("cast", [0], dtype=t)[0] for t in targets], targets)


# --- fills, where, broadcast_to, bias_add ------------------------------------------------------


def test_fills_make_the_requested_shape_and_dtype() -> None:
    fill = np.array(2.75, dtype="float32")
    data = RNG.integers(-5, 5, (2, 3)).astype("int32")
    program = Program([fill, data])
    results = [
        program.add("zeros", [], shape=(2, 3), dtype="float32")[0],
        program.add("ones", [], shape=(4,), dtype="int8")[0],
        program.add("zeros", [], shape=(), dtype="bool")[0],
        program.add("ones", [], shape=(2, 0), dtype="float16")[0],
        program.add("full", [0], shape=(2, 2))[0],
        program.add("full", [0], shape=(3,), dtype="int32")[0],
        program.add("full", [0], shape=(2,), dtype="float16")[0],
        program.add("full", [0], shape=(1, 2), dtype="bool")[0],
        program.add("zeros_like", [1])[0],
        program.add("ones_like", [1])[0],
        program.add("full_like", [1, 0])[0],
    ]
    check(program, results)


def test_where_broadcasts_all_three_arguments() -> None:
    # condition (rank 2), x (rank 2), y (rank 0 or 1): one kernel, shapes varied.
    for cond, x, y in [((3, 4), (1, 4), ()), ((3, 1), (1, 4), ()), ((1, 1), (2, 2), ())]:
        c = RNG.random(cond) < 0.5
        xs = RNG.standard_normal(x).astype("float32")
        ys = RNG.standard_normal(y).astype("float32")
        program = Program([c, xs, ys])
        check(program, program.add("where", [0, 1, 2]), [f"where {cond} {x} {y}"])


def test_broadcast_to_copies_into_the_target_shape() -> None:
    sources = [RNG.integers(0, 9, s).astype("int16") for s in [(3,), (1, 3), (2, 1, 3)]]
    program = Program(sources)
    results = [program.add("broadcast_to", [k], shape=(2, 4, 3))[0] for k in range(3)]
    check(program, results)


@pytest.mark.parametrize(("shape", "axis"), [((2, 3, 4, 5), 1), ((2, 3, 4, 5), -1), ((6,), 0)])
def test_bias_add_adds_along_the_axis(shape: tuple, axis: int) -> None:
    x = RNG.standard_normal(shape).astype("float32")
    bias = RNG.standard_normal(shape[axis]).astype("float32")
    program = Program([x, bias])
    check(program, program.add("nn.bias_add", [0, 1], axis=axis))

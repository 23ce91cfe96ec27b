"""Shape-changing operators: type relations with ``?`` dims, attribute errors, references."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ir.types import TupleType
from compiler.op.registry import OpTypeError
from compiler.op.typerel import fmt_type
from tests.compiler.op._helpers import T, Tup, check_array, ref, rel, rel_text

# --- reshape -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "newshape", "expected"),
    [
        ((2, 3, 4), (6, 4), "(6, 4)"),
        ((2, 3, 4), (-1,), "(24,)"),
        ((2, 3, 4), (0, -1), "(2, 12)"),
        ((2, 3, 4), (4, 0, 2), "(4, 3, 2)"),
        ((2, 3, 4), (-2,), "(2, 3, 4)"),
        ((2, 3, 4), (2, -2), "(2, 3, 4)"),
        ((2, 3, 4), (-3, 4), "(6, 4)"),
        ((2, 3, 4), (0, -3), "(2, 12)"),
        ((6, 4), (-4, 2, 3, 4), "(2, 3, 4)"),
        ((6, 4), (-4, -1, 3, 0), "(2, 3, 4)"),
        ((6, 4), (-4, 2, -1, -1), "(2, 3, 4)"),
        ((None, 3, 4), (-1, 4), "(?, 4)"),
        ((None, 3, 4), (0, 12), "(?, 12)"),
        ((None, 3, 4), (0, -1), "(?, 12)"),
        ((2, None), (-1,), "(?,)"),
        ((None, 3), (-3,), "(?,)"),
        ((None, 4), (-4, 2, -1, 0), "(2, ?, 4)"),
        ((), (1, 1), "(1, 1)"),
        ((0, 3), (3, -1), "(3, 0)"),
        ((0, 3), (-1,), "(0,)"),
        ((0, 3), (0, -1), "(0, 3)"),
        ((2, 3, 4), (0, 0, -1), "(2, 3, 4)"),
        ((None, 3, 4), (-1, 0, 4), "(?, 3, 4)"),
        ((None, None, 4), (0, -1), "(?, ?)"),
        ((1,), (), "()"),
    ],
)
def test_reshape_shapes(shape, newshape, expected):
    assert rel_text("reshape", T(shape), newshape=newshape) == f"Tensor[{expected}, float32]"


@pytest.mark.parametrize(
    ("shape", "newshape", "message"),
    [
        ((2, 3), (4, 2), "reshape: cannot reshape Tensor[(2, 3), float32] to newshape (4, 2): "
                         "6 elements vs 8"),
        ((2, 3), (-1, -1), "reshape: newshape (-1, -1) may contain -1 only once"),
        ((2, 3), (4, -1), "reshape: cannot reshape Tensor[(2, 3), float32] to newshape (4, -1): "
                          "6 elements do not divide into parts of 4"),
        ((2, 3), (0, 0, 0), "0 at position 2 copies input dimension 2, but the input has rank 2"),
        ((2, 3), (2, -3), "-3 at position 1 merges input dimensions 1 and 2, but the input has "
                          "rank 2"),
        ((6,), (-4, 4, -1), "-4 cannot split dimension 6 into parts of 4"),
        ((6,), (-4, 4, 2), "-4 splits dimension 6 into 4 x 2 = 8"),
        ((6,), (-4, -1, -1), "-4 may be followed by at most one -1"),
        ((6,), (-4, 6), "-4 at position 0 must be followed by two dimensions"),
        ((6,), (-4, 0, 6), "the two dimensions after -4 must be > 0 or -1, found 0, 6"),
        ((6,), (-5,), "newshape (-5,) has invalid value -5 at position 0"),
        ((None, 3), (5, 7), None),  # unknowable: accepted, checked at run time
    ],
)  # fmt: skip
def test_reshape_errors(shape, newshape, message):
    if message is None:
        assert rel("reshape", T(shape), newshape=newshape) == T((5, 7))
        return
    with pytest.raises(OpTypeError) as info:
        rel("reshape", T(shape), newshape=newshape)
    assert message in str(info.value)
    assert str(info.value).startswith("reshape: ")


def test_reshape_reference():
    x = np.arange(24, dtype="int16").reshape(2, 3, 4)
    out = ref("reshape", x, newshape=(0, -1))
    check_array(out, [list(range(12)), list(range(12, 24))], "int16")
    assert not np.shares_memory(out, x) and out.flags.writeable
    check_array(ref("reshape", x, newshape=(-4, 1, 2, -2)), x.reshape(1, 2, 3, 4), "int16")
    check_array(ref("reshape", np.float32(5), newshape=(1,)), [5], "float32")


# --- transpose, squeeze, expand_dims -----------------------------------------------------------


def test_transpose():
    assert rel("transpose", T((2, None, 4))) == T((4, None, 2))
    assert rel("transpose", T((2, 3, 4)), axes=(1, -1, 0)) == T((3, 4, 2))
    assert rel("transpose", T(())) == T(())
    x = np.arange(6).reshape(2, 3)
    out = ref("transpose", x)
    check_array(out, [[0, 3], [1, 4], [2, 5]], "int64")
    assert out.flags.c_contiguous
    y = np.arange(24).reshape(2, 3, 4)
    assert ref("transpose", y, axes=(1, 2, 0))[2, 3, 1] == y[1, 2, 3]


def test_transpose_errors():
    with pytest.raises(OpTypeError, match=r"transpose: attribute axes=\(0,\) must list each of"):
        rel("transpose", T((2, 3)), axes=(0,))
    with pytest.raises(OpTypeError, match=r"transpose: attribute axes=.* names axis 0 more"):
        rel("transpose", T((2, 3)), axes=(0, -2))
    with pytest.raises(OpTypeError, match="transpose: attribute axes=2 is out of range"):
        rel("transpose", T((2, 3)), axes=(2, 0))


def test_squeeze():
    assert rel("squeeze", T((1, 3, 1))) == T((3,))
    assert rel("squeeze", T((1, None, 1)), axis=(0,)) == T((None, 1))
    assert rel("squeeze", T((None, 2))) == T((None, 2))  # a ? dimension is kept
    assert rel("squeeze", T((None, 2)), axis=(0,)) == T((2,))
    assert rel("squeeze", T((1, 1))) == T(())
    x = np.arange(3).reshape(1, 3, 1)
    check_array(ref("squeeze", x), [0, 1, 2], "int64")
    check_array(ref("squeeze", x, axis=-1), [[0, 1, 2]], "int64")
    with pytest.raises(OpTypeError) as info:
        rel("squeeze", T((1, 3)), axis=1)
    assert str(info.value) == (
        "squeeze: cannot squeeze axis 1 of Tensor[(1, 3), float32]: it has size 3, expected 1"
    )
    with pytest.raises(OpTypeError, match="squeeze: attribute axis=2 is out of range"):
        rel("squeeze", T((1, 3)), axis=2)


def test_expand_dims():
    assert rel("expand_dims", T((2, 3)), axis=0) == T((1, 2, 3))
    assert rel("expand_dims", T((2, 3)), axis=-1, num_newaxis=2) == T((2, 3, 1, 1))
    assert rel("expand_dims", T((None,)), axis=1) == T((None, 1))
    assert rel("expand_dims", T(()), axis=0, num_newaxis=0) == T(())
    check_array(ref("expand_dims", np.int8([1, 2]), axis=1), [[1], [2]], "int8")
    with pytest.raises(OpTypeError, match=r"expand_dims: attribute axis=3 .* \[-3, 2\]"):
        rel("expand_dims", T((2, 3)), axis=3)
    with pytest.raises(OpTypeError, match="expand_dims: attribute num_newaxis=-1 must be >= 0"):
        rel("expand_dims", T((2, 3)), axis=0, num_newaxis=-1)


# --- concatenate and stack ---------------------------------------------------------------------


def test_concatenate_shapes():
    assert rel("concatenate", Tup(T((2, 3)), T((2, 5))), axis=1) == T((2, 8))
    assert rel("concatenate", Tup(T((2, 3)), T((4, 3)), T((1, 3)))) == T((7, 3))
    assert rel("concatenate", Tup(T((None, 3)), T((2, 3)))) == T((None, 3))
    assert rel("concatenate", Tup(T((None, 3)), T((2, None))), axis=1) == T((2, None))
    assert rel("concatenate", Tup(T((4,), "int8")), axis=-1) == T((4,), "int8")


@pytest.mark.parametrize(
    ("fields", "axis", "message"),
    [
        ((T((2, 3)), T((2, 4))), 0, "concatenate: field 0 Tensor[(2, 3), float32] and field 1 "
         "Tensor[(2, 4), float32] differ off the concatenation axis 0: dimension 3 vs 4"),
        ((T((2,)), T((2,), "int8")), 0, "concatenate: argument data.0 has dtype float32 but "
         "argument data.1 has dtype int8"),
        ((T((2,)), T((2, 1))), 0, "concatenate: all fields must have the same rank; field 0 is "
         "Tensor[(2,), float32] but field 1 is Tensor[(2, 1), float32]"),
        ((T(()), T(())), 0, "concatenate: cannot concatenate scalars"),
        ((T((2,)),), 1, "concatenate: attribute axis=1 is out of range"),
        ((), 0, "concatenate: argument data must hold at least one tensor, found ()"),
        ((T((2,)), Tup(T((2,)))), 0, "concatenate: field 1 of argument data must be a tensor"),
    ],
)  # fmt: skip
def test_concatenate_errors(fields, axis, message):
    with pytest.raises(OpTypeError) as info:
        rel("concatenate", TupleType(fields), axis=axis)
    assert str(info.value).startswith(message)


def test_concatenate_needs_a_tuple():
    with pytest.raises(OpTypeError) as info:
        rel("concatenate", T((2,)))
    assert str(info.value) == (
        "concatenate: argument data must be a tuple of tensors, found Tensor[(2,), float32]"
    )


def test_concatenate_reference():
    a = np.int32([[1, 2]])
    b = np.int32([[3, 4], [5, 6]])
    check_array(ref("concatenate", (a, b)), [[1, 2], [3, 4], [5, 6]], "int32")
    check_array(ref("concatenate", (b, b), axis=1), [[3, 4, 3, 4], [5, 6, 5, 6]], "int32")


def test_stack():
    assert rel("stack", Tup(T((2, 3)), T((2, 3)))) == T((2, 2, 3))
    assert rel("stack", Tup(T((2, 3)), T((2, 3)), T((2, 3))), axis=-1) == T((2, 3, 3))
    assert rel("stack", Tup(T((None, 3)), T((2, None))), axis=1) == T((2, 2, 3))
    assert rel("stack", Tup(T(()), T(()))) == T((2,))
    out = ref("stack", (np.float32([1, 2]), np.float32([3, 4])), axis=1)
    check_array(out, [[1, 3], [2, 4]], "float32")
    with pytest.raises(OpTypeError, match=r"stack: field 0 .* and field 1 .* differ: dimension 3"):
        rel("stack", Tup(T((2, 3)), T((2, 4))))
    with pytest.raises(OpTypeError, match="stack: all fields must have the same shape"):
        rel("stack", Tup(T((2,)), T((2, 1))))
    with pytest.raises(OpTypeError, match=r"stack: attribute axis=3 .* \[-3, 2\]"):
        rel("stack", Tup(T((2, 3))), axis=3)


# --- split -------------------------------------------------------------------------------------


def _fields(ty):
    return [fmt_type(f) for f in ty.fields]


def test_split_shapes():
    assert (
        _fields(rel("split", T((6, 2)), indices_or_sections=3)) == ["Tensor[(2, 2), float32]"] * 3
    )
    assert _fields(rel("split", T((2, 7)), indices_or_sections=(2, 5), axis=-1)) == [
        "Tensor[(2, 2), float32]", "Tensor[(2, 3), float32]", "Tensor[(2, 2), float32]",
    ]  # fmt: skip
    assert _fields(rel("split", T((None, 4)), indices_or_sections=2)) == [
        "Tensor[(?, 4), float32]", "Tensor[(?, 4), float32]",
    ]  # fmt: skip
    assert _fields(rel("split", T((None,)), indices_or_sections=(1, 3))) == [
        "Tensor[(1,), float32]", "Tensor[(2,), float32]", "Tensor[(?,), float32]",
    ]  # fmt: skip
    assert _fields(rel("split", T((4,)), indices_or_sections=(4,))) == [
        "Tensor[(4,), float32]", "Tensor[(0,), float32]",
    ]  # fmt: skip
    assert _fields(rel("split", T((4,)), indices_or_sections=1)) == ["Tensor[(4,), float32]"]


@pytest.mark.parametrize(
    ("shape", "attrs", "message"),
    [
        ((5, 2), {"indices_or_sections": 2}, "split: cannot split axis 0 of Tensor[(5, 2), "
         "float32] into 2 equal sections: 5 is not divisible by 2"),
        ((4,), {"indices_or_sections": 0}, "split: attribute indices_or_sections=0 must be >= 1"),
        ((4,), {"indices_or_sections": (3, 1)}, "split: attribute indices_or_sections=(3, 1) "
         "must be non-decreasing and non-negative"),
        ((4,), {"indices_or_sections": (-1,)}, "must be non-decreasing and non-negative"),
        ((4,), {"indices_or_sections": (5,)}, "split: split index 5 is out of range for axis 0"),
        ((4,), {"indices_or_sections": 2, "axis": 1}, "split: attribute axis=1 is out of range"),
        ((), {"indices_or_sections": 1}, "split: cannot split a scalar"),
    ],
)  # fmt: skip
def test_split_errors(shape, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("split", T(shape), **attrs)
    assert message in str(info.value)
    assert str(info.value).startswith("split: ")


def test_split_reference():
    x = np.arange(12, dtype="uint8").reshape(2, 6)
    pieces = ref("split", x, indices_or_sections=3, axis=1)
    assert isinstance(pieces, tuple) and len(pieces) == 3
    check_array(pieces[1], [[2, 3], [8, 9]], "uint8")
    pieces = ref("split", x, indices_or_sections=(1, 1, 4), axis=1)
    assert [p.shape for p in pieces] == [(2, 1), (2, 0), (2, 3), (2, 2)]
    check_array(pieces[3], [[4, 5], [10, 11]], "uint8")
    assert all(p.flags.c_contiguous and not np.shares_memory(p, x) for p in pieces)


# --- strided_slice -----------------------------------------------------------------------------

SLICE_CASES = [
    # attrs, the same slice in Python syntax on an array of shape (5, 6)
    ({"begin": (1,), "end": (4,)}, np.s_[1:4]),
    ({"begin": (0, 1), "end": (5, 6), "strides": (2, 2)}, np.s_[0:5:2, 1:6:2]),
    ({"begin": (-2,), "end": (100,)}, np.s_[-2:100]),
    ({"begin": (4,), "end": (-6,), "strides": (-1,)}, np.s_[4:-6:-1]),
    ({"begin": (4,), "end": (-100,), "strides": (-2,)}, np.s_[4::-2]),
    ({"begin": (3,), "end": (1,)}, np.s_[3:1]),
    ({"begin": (1,), "end": (3,), "axes": (1,)}, np.s_[:, 1:3]),
    ({"begin": (1, 0), "end": (2, 2), "axes": (-1, 0)}, np.s_[0:2, 1:2]),
    ({"begin": (1, 2), "end": (2,)}, np.s_[1:2, 2:]),
    ({"begin": (1, 2), "end": (3, -1), "slice_mode": "size"}, np.s_[1:4, 2:]),
    ({"begin": (-3,), "end": (3,), "slice_mode": "size"}, np.s_[-3:]),
    ({"begin": (-3,), "end": (1,), "slice_mode": "size"}, np.s_[-3:-2]),
]


@pytest.mark.parametrize(("attrs", "index"), SLICE_CASES)
def test_strided_slice_matches_python_slicing(attrs, index):
    x = np.arange(30, dtype="int32").reshape(5, 6)
    expected = x[index]
    assert rel("strided_slice", T((5, 6), "int32"), **attrs) == T(expected.shape, "int32")
    check_array(ref("strided_slice", x, **attrs), expected, "int32")


def test_strided_slice_dynamic_dims():
    assert rel("strided_slice", T((None, 6)), begin=(0, 1), end=(2, 5)) == T((None, 4))
    assert rel("strided_slice", T((None, 6)), begin=(1,), end=(3,), axes=(1,)) == T((None, 2))


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"begin": (0,), "end": (2,), "strides": (0,)},
         "strided_slice: attribute strides has a 0 step for axis 0"),
        ({"begin": (0, 0, 0), "end": (1, 1, 1)},
         "strided_slice: attribute begin=(0, 0, 0) has 3 entries but Tensor[(5, 6), float32] "
         "has rank 2"),
        ({"begin": (0,), "end": (1,), "axes": (0, 1)},
         "strided_slice: attribute begin=(0,) must have one entry per axis in axes=(0, 1)"),
        ({"begin": (0,), "end": (1, 2)},
         "strided_slice: attribute end=(1, 2) has more entries than begin=(0,)"),
        ({"begin": (0,), "end": (1,), "axes": (2,)},
         "strided_slice: attribute axes=2 is out of range"),
    ],
)  # fmt: skip
def test_strided_slice_errors(attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("strided_slice", T((5, 6)), **attrs)
    assert str(info.value).startswith(message)


# --- take --------------------------------------------------------------------------------------


def test_take_shapes():
    idx = T((2, 3), "int32")
    assert rel("take", T((4, 5)), idx) == T((2, 3))
    assert rel("take", T((4, 5, 6)), idx, axis=1) == T((4, 2, 3, 6))
    assert rel("take", T((4, 5, 6)), idx, axis=-1) == T((4, 5, 2, 3))
    assert rel("take", T((4, 5)), T((), "int64"), axis=0) == T((5,))
    assert rel("take", T((2, 5, 6)), T((2, 3), "uint8"), axis=1, batch_dims=1) == T((2, 3, 6))
    batched = rel("take", T((2, 5, 6)), T((2, 3), "int32"), axis=2, batch_dims=-1)
    assert batched == T((2, 5, 3))
    assert rel("take", T((None, 5)), T((None,), "int32"), axis=1) == T((None, None))
    assert rel("take", T((None, 5)), T((4,), "int32"), axis=1, batch_dims=1) == T((4,))


@pytest.mark.parametrize(
    ("data", "indices", "attrs", "message"),
    [
        (T((4,)), T((2,)), {}, "take: argument indices must be an integer tensor, found "
         "Tensor[(2,), float32]"),
        (T((4,)), T((2,), "int32"), {"axis": 1}, "take: attribute axis=1 is out of range"),
        (T(()), T((2,), "int32"), {"axis": 0}, "take: cannot take along an axis of a scalar"),
        (T((2, 4)), T((2, 3), "int32"), {"axis": 0, "batch_dims": 1},
         "take: attribute batch_dims=1 must not exceed axis=0"),
        (T((2, 4)), T((2, 3), "int32"), {"batch_dims": 1},
         "take: batch_dims=1 needs an explicit axis"),
        (T((2, 4)), T((2,), "int32"), {"axis": 1, "batch_dims": 2},
         "take: attribute batch_dims=2 is out of range for indices Tensor[(2,), int32]"),
        (T((2, 4)), T((3, 1), "int32"), {"axis": 1, "batch_dims": 1},
         "take: batch dimension 0 of data Tensor[(2, 4), float32] and indices "
         "Tensor[(3, 1), int32]: dimension 2 vs 3"),
    ],
)  # fmt: skip
def test_take_errors(data, indices, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("take", data, indices, **attrs)
    assert str(info.value).startswith(message)


def test_take_modes():
    x = np.float32([10, 11, 12])
    idx = np.int32([-4, -1, 0, 2, 3, 7])
    check_array(ref("take", x, idx), [10, 10, 10, 12, 12, 12], "float32")
    check_array(ref("take", x, idx, mode="wrap"), [12, 12, 10, 12, 10, 11], "float32")
    check_array(ref("take", x, np.int64([2, 0]), mode="fast"), [12, 10], "float32")
    m = np.arange(6, dtype="int8").reshape(2, 3)
    check_array(ref("take", m, np.uint8([[1], [0]]), axis=1), [[[1], [0]], [[4], [3]]], "int8")
    check_array(ref("take", m, np.int32(4)), 4, "int8")  # flattened
    check_array(ref("take", m, np.int32([]), axis=0), np.zeros((0, 3)), "int8")


def test_take_batch_dims():
    x = np.arange(24, dtype="int32").reshape(2, 3, 4)
    idx = np.array([[0, 3], [2, 2]], "int32")
    out = ref("take", x, idx, axis=2, batch_dims=1)
    expected = [[[row[i] for i in idx[b]] for row in x[b].tolist()] for b in range(2)]
    check_array(out, expected, "int32")
    idx = np.array([[1], [0]], "int64")
    check_array(ref("take", x, idx, axis=1, batch_dims=1), [[x[0, 1].tolist()], [x[1, 0].tolist()]],
                "int32")  # fmt: skip


@pytest.mark.parametrize("bad", [3, -1, 100])
def test_take_fast_out_of_range_traps(bad):
    with pytest.raises(IndexError) as info:
        ref("take", np.float32([1, 2, 3]), np.int32([0, bad]), axis=0, mode="fast")
    assert str(info.value) == (
        f"take: index {bad} is out of range for axis 0 of size 3 "
        "(mode='fast' does not clip or wrap)"
    )


def test_take_from_an_empty_axis_traps():
    with pytest.raises(IndexError, match="take: cannot take from axis 0 of size 0"):
        ref("take", np.zeros((0,), "float32"), np.int32([0]))

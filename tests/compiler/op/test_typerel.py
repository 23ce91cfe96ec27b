"""Shared type-relation helpers: broadcasting with ``?``, axis checks, type formatting."""

from __future__ import annotations

import pytest

from compiler.ir.types import Any, FuncType
from compiler.op.registry import OpTypeError
from compiler.op.typerel import (
    broadcast_dim,
    fmt_type,
    merge_dims,
    normalize_axes,
    normalize_axis,
    product,
)
from tests.compiler.op._helpers import T, Tup

Q = Any()


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (3, 3, 3),  # equal
        (1, 5, 5),  # 1 vs d -> d
        (5, 1, 5),
        (1, 1, 1),
        (Q, 1, Q),  # ? vs 1 -> ?
        (1, Q, Q),
        (Q, 4, 4),  # ? vs k -> k
        (4, Q, 4),
        (Q, Q, Q),
        (0, 1, 0),
        (2, 3, None),  # incompatible
        (0, 2, None),
    ],
)
def test_broadcast_dim_rules(a, b, expected):
    assert broadcast_dim(a, b) == expected
    if expected is not None:
        assert isinstance(broadcast_dim(a, b), Any) == isinstance(expected, Any)


def test_fmt_type_matches_the_text_format():
    assert fmt_type(T((2, 3))) == "Tensor[(2, 3), float32]"
    assert fmt_type(T((4,), "int8")) == "Tensor[(4,), int8]"
    assert fmt_type(T(())) == "Tensor[(), float32]"
    assert fmt_type(T((None, 10))) == "Tensor[(?, 10), float32]"
    assert fmt_type(Tup(T((1,)), T((), "bool"))) == "(Tensor[(1,), float32], Tensor[(), bool])"
    assert fmt_type(Tup(T(()))) == "(Tensor[(), float32],)"
    assert fmt_type(FuncType([T(())], T(()))) == "fn (Tensor[(), float32]) -> Tensor[(), float32]"


def test_normalize_axis_accepts_negative_axes():
    assert normalize_axis("op", -1, 3) == 2
    assert normalize_axis("op", 0, 3) == 0
    assert normalize_axis("op", 3, 3, extra=1) == 3
    assert normalize_axis("op", -4, 3, extra=1) == 0


@pytest.mark.parametrize(("axis", "ndim", "extra"), [(3, 3, 0), (-4, 3, 0), (5, 3, 1), (0, 0, 0)])
def test_normalize_axis_rejects_out_of_range(axis, ndim, extra):
    with pytest.raises(OpTypeError, match=rf"op: attribute axis={axis} is out of range .* rank"):
        normalize_axis("op", axis, ndim, extra=extra)


def test_normalize_axes_rejects_duplicates():
    assert normalize_axes("op", (0, -1), 3) == [0, 2]
    with pytest.raises(OpTypeError, match=r"names axis 2 more than once"):
        normalize_axes("op", (2, -1), 3)


def test_merge_dims_and_product():
    assert merge_dims("op", "x", Q, 3) == 3
    assert merge_dims("op", "x", 3, Q) == 3
    assert isinstance(merge_dims("op", "x", Q, Q), Any)
    with pytest.raises(OpTypeError, match="op: what: dimension 2 vs 3"):
        merge_dims("op", "what", 2, 3)
    assert product([2, 3, 4]) == 24
    assert product([]) == 1
    assert isinstance(product([2, Q]), Any)
    assert product([0, Q]) == 0

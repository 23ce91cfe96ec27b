"""The shared shape arithmetic of vm.kernels.shape_rules: broadcasting with unknown sizes."""

import itertools

import numpy as np
import pytest

from compiler.ir.types import Any
from compiler.op.typerel import broadcast_dim as typed_broadcast_dim
from vm.kernels import shape_rules as sr
from vm.kernels.rules import RuleError

SIZES = (0, 1, 2, 3, None)

# ---- returns ------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), list(itertools.product(SIZES, SIZES)))
def test_a_known_pair_broadcasts_as_numpy_and_an_unknown_follows_the_other_size(a, b):
    try:
        expected = np.broadcast_shapes((a,), (b,))[0] if a is not None and b is not None else None
    except ValueError:
        with pytest.raises(RuleError, match=f"dimension {a} vs {b}"):
            sr.broadcast_dim(a, b)
        return
    if a is None or b is None:
        other = b if a is None else a
        expected = other if other is not None and other != 1 else None
    assert sr.broadcast_dim(a, b) == expected


@pytest.mark.parametrize(("a", "b"), list(itertools.product(SIZES, SIZES)))
def test_the_type_relation_uses_the_same_rule_with_question_marks(a, b):
    typed = typed_broadcast_dim(Any() if a is None else a, Any() if b is None else b)
    try:
        expected = sr.broadcast_dim(a, b)
    except RuleError:
        assert typed is None
        return
    assert isinstance(typed, Any) if expected is None else typed == expected


def test_shapes_broadcast_right_aligned_like_numpy():
    assert sr.broadcast_shapes([(4, 1, 3), (2, 1), ()]) == np.broadcast_shapes((4, 1, 3), (2, 1))
    assert sr.broadcast_shapes([(0, 1), (1, 5)]) == (0, 5)


# ---- traps --------------------------------------------------------------------------------


def test_shapes_that_do_not_broadcast_name_both_and_the_dimension():
    with pytest.raises(RuleError, match=r"cannot broadcast \(3, 4\) and \(5, 4\): dimension 0"):
        sr.broadcast_shapes([(3, 4), (5, 4)])

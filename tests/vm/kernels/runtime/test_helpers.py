"""Helpers compiled kernels call (``vm.kernels.runtime.helpers``): errors and strided views.

Returns: a kernel's ``KernelValueError``/``KernelIndexError`` is a ``ValueError``/
``IndexError`` whose message is formatted when read, from a template and plain values, so
names with braces come out as written. Traps: compiled code raising them through ``expect``,
``bcast``, ``take_index`` and ``index_out_of_range`` gives the messages the checks always
gave. Returns: ``restride`` views an array of any strides with a new shape exactly where
numpy reshapes without a copy, and copies elsewhere; ``unit_row`` gives a C-contiguous
row of any array at a byte offset, sharing its memory, for every dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from vm.kernels.runtime import helpers as h


def test_a_kernel_error_is_formatted_on_reading():
    error = h.KernelValueError("{}: expected {}, found {}", "dim {0} of x", 3, 4)
    assert isinstance(error, ValueError)
    assert str(error) == "dim {0} of x: expected 3, found 4"
    assert str(h.KernelIndexError()) == ""
    assert isinstance(h.KernelIndexError("{}", 1), IndexError)


@njit
def _checks(which, a, b):
    if which == 0:
        h.expect(a, b, "reshape: elements")
    elif which == 1:
        return h.bcast(a, b, "add: dimension 1")
    elif which == 2:
        return h.take_index(a, b, 2)
    else:
        h.index_out_of_range("gather along axis 0", a, b)
    return 0


@pytest.mark.parametrize(
    ("which", "error", "message"),
    [
        (0, ValueError, "reshape: elements: expected 7, found 6"),
        (1, ValueError, "add: dimension 1: dimensions 6 and 7 do not broadcast"),
        (2, IndexError, "take: index 6 is out of range for an axis of size 3"),
        (3, IndexError, "gather along axis 0: index 6 is out of range for an axis of size 7"),
    ],
)
def test_compiled_checks_raise_the_messages_they_name(which, error, message):
    b = 3 if which == 2 else 7
    with pytest.raises(error) as raised:
        _checks(which, 6, b)
    assert str(raised.value).startswith(message)


@njit
def _restride(a, shape):
    return h.restride(a, shape)


def _factor_shape(rng: np.random.Generator, size: int) -> tuple[int, ...]:
    """A random shape of ``size`` elements, with axes of size 1 here and there."""
    factors: list[int] = []
    m = size
    while m > 1:
        d = next(d for d in range(2, m + 1) if m % d == 0)
        factors.append(d)
        m //= d
    rng.shuffle(factors)
    shape: list[int] = []
    for d in factors:
        if shape and rng.random() < 0.5:
            shape[-1] *= d
        else:
            shape.append(d)
        if rng.random() < 0.2:
            shape.append(1)
    return tuple(shape) or (1,)


def test_restride_views_where_numpy_would_and_copies_elsewhere():
    rng = np.random.default_rng(3)
    for _ in range(400):
        base = rng.standard_normal(tuple(int(d) for d in rng.integers(1, 5, rng.integers(1, 5))))
        a = base.transpose(tuple(rng.permutation(base.ndim)))
        a = a[tuple(slice(None, None, int(rng.choice([1, 1, 2, -1]))) for _ in range(a.ndim))]
        shape = _factor_shape(rng, a.size)
        got = _restride(a, shape)
        np.testing.assert_array_equal(got, a.reshape(shape))
        try:
            a.view().shape = shape  # numpy refuses where a copy is needed
            in_place = True
        except AttributeError:
            in_place = False
        if a.size > 1:
            assert np.shares_memory(got, a) == in_place, (a.shape, a.strides, shape)


def test_restride_of_nothing_is_empty():
    got = _restride(np.empty((3, 0, 2))[:, :, ::-1], (0, 6))
    assert got.shape == (0, 6)


@njit
def _second_row_from(a, column):
    # The row of a (2, n) view starting at ``column`` of its second row.
    row = h.unit_row(a, a.strides[0] + column * a.itemsize, a.shape[1] - column)
    row[0] = row[-1]
    return row


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "bool"])
def test_unit_row_views_a_row_in_place(dtype):
    base = np.arange(30).reshape(3, 10).astype(dtype)
    view = base[:2, 3:8]  # strides (row, item): numba types it layout "A"
    row = _second_row_from(view, 1)
    assert row.flags.c_contiguous and row.dtype == base.dtype
    assert row.tolist() == base[1, 4:8].tolist() and np.shares_memory(row, base)
    assert base[1, 4] == base[1, 7]  # written through the row

"""Errors raised by compiled kernels (``vm.kernels.runtime.helpers``).

Returns: a kernel's ``KernelValueError``/``KernelIndexError`` is a ``ValueError``/
``IndexError`` whose message is formatted when read, from a template and plain values, so
names with braces come out as written. Traps: compiled code raising them through ``expect``,
``bcast``, ``take_index`` and ``index_out_of_range`` gives the messages the checks always
gave.
"""

from __future__ import annotations

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

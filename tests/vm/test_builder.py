"""ExecutableBuilder's constant table (runtime layer): equal constants share one entry,
anything that differs in dtype, shape or a single byte gets its own (returns)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from vm.builder import ExecutableBuilder


def test_equal_constants_share_an_index_whatever_array_holds_them():
    b = ExecutableBuilder()
    values = np.arange(12, dtype="float32").reshape(3, 4)
    first = b.add_constant(values)
    assert b.add_constant(values.copy()) == first
    # A transposed view of the transpose: equal values, not contiguous, same index.
    assert b.add_constant(np.ascontiguousarray(values.T).T) == first
    assert b.add_constant(np.array(2.5, "float64")) == b.add_constant(np.float64(2.5))


def test_constants_that_differ_in_dtype_shape_or_one_byte_are_kept_apart():
    b = ExecutableBuilder()
    values = np.zeros(8, "float32")
    changed = values.copy()
    changed[5] = -0.0  # equal as a number, not as bytes
    indexes = {
        b.add_constant(values),
        b.add_constant(values.view("int32")),
        b.add_constant(values.reshape(2, 4)),
        b.add_constant(changed),
        b.add_constant(np.zeros(0, "float32")),
        b.add_constant(np.zeros((0, 8), "float32")),
    }
    assert len(indexes) == 6


def test_a_nan_constant_is_shared_with_its_bitwise_equal():
    b = ExecutableBuilder()
    nan = np.array([np.nan, 1.0], "float32")
    assert b.add_constant(nan) == b.add_constant(nan.copy())


def test_the_stored_constant_keeps_its_values_when_the_source_changes():
    b = ExecutableBuilder()
    values = np.ones(4, "float32")
    index = b.add_constant(values)
    values[:] = 7.0
    assert b.add_constant(np.ones(4, "float32")) == index
    assert b.add_constant(values) != index


def test_interning_a_constant_keeps_no_copy_of_its_bytes():
    values = np.ones(1 << 22, "float32")  # 16 MB
    values.flags.writeable = False  # read-only and owning its memory: stored as it is
    b = ExecutableBuilder()
    tracemalloc.start()
    try:
        index = b.add_constant(values)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert b.build(verify=False).constant_values[index] is values
    assert held < values.nbytes // 16

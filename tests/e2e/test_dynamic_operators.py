"""The dynamic-shape operators of TVM's VM tests, one executable for every shape.

Returns: ``shape_of``, ``ndarray_size``, ``reshape`` with a tensor ``newshape``
(``dyn.reshape``), ``broadcast_to``/``zeros``/``ones``/``full`` with a tensor shape,
``strided_slice`` with tensor ``begin``/``end``, ``arange`` with tensor bounds, ``topk``
and ``argsort``, and the boxes kept by ``vision.all_class_non_max_suppression`` sliced to
its count, each run at several run-time shapes through one compiled executable, and
agree with numpy on the reference interpreter, the VM, and the VM after save/load. The
outputs are sized at run time by shape functions that read the shape tensors' values.
Traps: values that do not fit (a reshape to the wrong element count, a zero step, a
negative size) raise ``vm.VMError`` naming the operator, and the machine stays usable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vm
from compiler import relay
from tests.e2e.harness import assert_same_value
from vm.isa import Opcode

ANY = relay.Any()
RNG = np.random.default_rng(7)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def i32(*values: int) -> np.ndarray:
    return np.array(values, dtype="int32")


class Runner:
    """One executable of ``mod``, run on the interpreter, the VM and the reloaded VM."""

    def __init__(self, mod: relay.IRModule) -> None:
        self.reference = relay.create_executor("debug", mod).evaluate()
        exe = relay.vm.compile(mod)
        reloaded = vm.Executable.load_exec(*exe.save())
        assert reloaded.save()[0] == exe.save()[0]
        self.exe = exe
        self.machines = [vm.VirtualMachine(exe), vm.VirtualMachine(reloaded)]

    def check(self, *args: Any, expected: Any) -> None:
        reference = self.reference(*args)
        assert_same_value(reference, expected, "interpreter vs numpy")
        for k, machine in enumerate(self.machines):
            assert_same_value(machine.invoke("main", *args), expected, f"machine {k} vs numpy")


def runner(params: list[relay.Var], body: relay.Expr) -> Runner:
    return Runner(relay.IRModule.from_expr(relay.Function(params, body)))


# --- returns -------------------------------------------------------------------------------------


def test_shape_of_and_ndarray_size_of_any_shape() -> None:
    x = relay.var("x", shape=(ANY, ANY, ANY))
    run = runner([x], relay.Tuple([relay.shape_of(x), relay.ndarray_size(x, dtype="int64")]))
    for shape in ((2, 3, 4), (1, 5, 1), (0, 2, 2)):
        data = f32(*shape)
        run.check(data, expected=(i32(*shape), np.array(data.size, dtype="int64")))


def test_reshape_to_a_tensor_newshape_and_to_the_shape_of_another_tensor() -> None:
    # TVM's test_vm_reshape_tensor: the new shape is a parameter, or shape_of(z).
    x = relay.var("x", shape=(ANY, ANY))
    newshape = relay.var("newshape", shape=(3,), dtype="int32")
    run = runner([x, newshape], relay.reshape(x, newshape))
    assert Opcode.AllocTensorReg in [
        Opcode(i.opcode) for i in run.exe.get_function("main").instructions
    ]
    data = f32(4, 6)
    for target, shape in (((2, 3, 4), (2, 3, 4)), ((0, -1, 2), (4, 3, 2)), ((24, 1, 1), None)):
        run.check(data, i32(*target), expected=data.reshape(shape or target))
    z = relay.var("z", shape=(ANY, ANY))
    run = runner([x, z], relay.reshape(x, relay.shape_of(z)))
    data = f32(2, 6)
    for shape in ((3, 4), (12, 1), (1, 12)):
        run.check(data, f32(*shape), expected=data.reshape(shape))


def test_broadcast_to_zeros_ones_and_full_with_a_tensor_shape() -> None:
    x = relay.var("x", shape=(ANY, 1))
    shape = relay.var("shape", shape=(2,), dtype="int64")
    fill = relay.var("fill", shape=(), dtype="float32")
    body = relay.Tuple(
        [
            relay.broadcast_to(x, shape),
            relay.zeros(shape, dtype="float32"),
            relay.ones(relay.shape_of(x), dtype="int32"),
            relay.full(fill, shape),
        ]
    )
    run = runner([x, shape, fill], body)
    for rows, cols in ((3, 4), (1, 1), (5, 2)):
        data = f32(rows, 1)
        target = np.array([rows, cols], dtype="int64")
        run.check(
            data,
            target,
            np.float32(2.5),
            expected=(
                np.broadcast_to(data, (rows, cols)).copy(),
                np.zeros((rows, cols), "float32"),
                np.ones((rows, 1), "int32"),
                np.full((rows, cols), 2.5, "float32"),
            ),
        )


def test_strided_slice_with_tensor_begin_and_end() -> None:
    x = relay.var("x", shape=(ANY, ANY))
    begin = relay.var("begin", shape=(2,), dtype="int32")
    end = relay.var("end", shape=(2,), dtype="int32")
    run = runner([x, begin, end], relay.strided_slice(x, begin, end))
    data = f32(6, 5)
    for (b0, b1), (e0, e1) in (((1, 0), (4, 5)), ((-3, 2), (6, 100)), ((0, 4), (6, 1))):
        run.check(data, i32(b0, b1), i32(e0, e1), expected=data[b0:e0, b1:e1])
    strided = runner([x, begin, end], relay.strided_slice(x, begin, end, strides=[2, -1]))
    for shape in ((7, 4), (3, 3)):
        data = f32(*shape)
        strided.check(data, i32(0, 3), i32(7, -5), expected=data[0:7:2, 3:-5:-1])


def test_arange_with_tensor_bounds() -> None:
    start = relay.var("start", shape=(), dtype="int32")
    stop = relay.var("stop", shape=(), dtype="int32")
    step = relay.var("step", shape=(), dtype="int32")
    run = runner([start, stop, step], relay.arange(start, stop, step, dtype="int32"))
    for a, b, s in ((0, 10, 1), (2, 11, 3), (5, -4, -2), (3, 3, 1)):
        run.check(np.int32(a), np.int32(b), np.int32(s), expected=np.arange(a, b, s, dtype="int32"))
    n = relay.var("n", shape=(), dtype="float32")
    floats = runner([n], relay.arange(n, dtype="float32"))
    for stop_value in (4.0, 2.5, 0.0):
        floats.check(np.float32(stop_value), expected=np.arange(stop_value, dtype="float32"))


def test_argwhere_sizes_its_rows_from_the_values_of_each_input() -> None:
    x = relay.var("x", shape=(ANY, 3))
    run = runner([x], relay.argwhere(x))
    for shape in ((4, 3), (1, 3), (0, 3)):
        data = RNG.integers(0, 2, size=shape).astype("float32")
        run.check(data, expected=np.argwhere(data).astype("int32"))
    run.check(np.zeros((5, 3), "float32"), expected=np.zeros((0, 2), "int32"))
    run.check(np.ones((2, 3), "float32"), expected=np.argwhere(np.ones((2, 3))).astype("int32"))


def test_topk_and_argsort_along_any_axis_of_any_shape() -> None:
    x = relay.var("x", shape=(ANY, ANY))
    topk = relay.topk(x, k=3, axis=1)
    body = relay.Tuple(
        [
            topk[0],
            topk[1],
            relay.topk(x, k=2, axis=0, ret_type="indices", is_ascend=True, dtype="int64"),
            relay.argsort(x, axis=1),
            relay.argsort(x, axis=0, is_ascend=False),
        ]
    )
    run = runner([x], body)
    for shape in ((4, 5), (2, 3), (3, 8)):
        data = RNG.integers(0, 4, size=shape).astype("float32")  # ties: order must be stable
        down = np.argsort(-data, axis=1, kind="stable")[:, :3]
        run.check(
            data,
            expected=(
                np.take_along_axis(data, down, axis=1),
                down.astype("int32"),
                np.argsort(data, axis=0, kind="stable")[:2].astype("int64"),
                np.argsort(data, axis=1, kind="stable").astype("int32"),
                np.argsort(-data, axis=0, kind="stable").astype("int32"),
            ),
        )


def test_topk_with_k_given_at_run_time_keeps_that_many() -> None:
    x = relay.var("x", shape=(ANY, 6))
    k = relay.var("k", shape=(), dtype="int32")
    top = relay.topk(x, k, axis=1)
    run = runner([x, k], relay.Tuple([top[0], top[1]]))
    data = RNG.integers(0, 4, size=(3, 6)).astype("float32")  # ties: order must be stable
    order = np.argsort(-data, axis=1, kind="stable")
    for keep in (1, 4, 6, 9, 0):
        kept = order[:, : min(keep, 6)] if keep >= 1 else order
        run.check(
            data,
            np.int32(keep),
            expected=(np.take_along_axis(data, kept, axis=1), kept.astype("int32")),
        )
    smallest = runner([x, k], relay.topk(x, k, axis=0, ret_type="indices", is_ascend=True))
    smallest.check(
        data, np.int32(2), expected=np.argsort(data, axis=0, kind="stable")[:2].astype("int32")
    )


def test_suppressed_boxes_are_sliced_to_the_count_of_each_input() -> None:
    # TVM's ONNX pattern: the suppression's table cut to the rows its count says were kept.
    boxes = relay.var("boxes", shape=(1, ANY, 4))
    scores = relay.var("scores", shape=(1, 2, ANY))
    kept = relay.vision.all_class_non_max_suppression(boxes, scores, 2, 0.5, 0.25)
    run = runner([boxes, scores], relay.strided_slice(kept[0], [0], kept[1]))
    disjoint = np.array([[[0, 3 * i, 1, 3 * i + 1] for i in range(4)]], "float32")
    same = np.tile(np.array([0, 0, 2, 2], "float32"), (1, 3, 1))
    for data, ranks, expected in (
        (disjoint, [[0.1, 0.9, 0.5, 0.7], [0.3, 0.2, 0.1, 0.0]], [[0, 0, 1], [0, 0, 3], [0, 1, 0]]),
        (same, [[0.3, 0.6, 0.6], [0.1, 0.2, 0.0]], [[0, 0, 1]]),
        (disjoint[:, :0], np.zeros((2, 0)), np.zeros((0, 3))),
    ):
        run.check(data, np.asarray(ranks, "float32")[None], expected=np.asarray(expected, "int64"))


def test_detection_operators_print_and_parse_back() -> None:
    data = relay.var("data", shape=(1, 3, 8, 8))
    rois = relay.var("rois", shape=(ANY, 5))
    boxes = relay.var("boxes", shape=(1, 6, 4))
    scores = relay.var("scores", shape=(1, 2, 6))
    body = relay.Tuple(
        [
            relay.vision.roi_align(data, rois, (2, 2), 0.5, sample_ratio=0, mode="max"),
            relay.vision.all_class_non_max_suppression(
                boxes, scores, 3, 0.5, center_point_box=True
            )[0],
        ]
    )
    mod = relay.IRModule.from_expr(relay.Function([data, rois, boxes, scores], body))
    assert relay.structural_equal(relay.fromtext(str(mod)), mod)


def test_dynamic_operators_print_and_parse_back() -> None:
    x = relay.var("x", shape=(ANY, ANY))
    shape = relay.var("shape", shape=(2,), dtype="int64")
    body = relay.Tuple(
        [
            relay.reshape(x, shape),
            relay.full(relay.const(1.0), shape),
            relay.strided_slice(x, relay.shape_of(x, "int64") - shape, [3, 3]),
            relay.topk(x, k=2),
            relay.arange(relay.ndarray_size(x), dtype="int32"),
        ]
    )
    mod = relay.IRModule.from_expr(relay.Function([x, shape], body))
    assert relay.structural_equal(relay.fromtext(str(mod)), mod)


# --- traps ---------------------------------------------------------------------------------------


def test_values_that_do_not_fit_raise_vm_errors_naming_the_operator() -> None:
    x = relay.var("x", shape=(ANY,))
    newshape = relay.var("newshape", shape=(2,), dtype="int32")
    step = relay.var("step", shape=(), dtype="int32")
    body = relay.Tuple(
        [relay.reshape(x, newshape), relay.arange(relay.const(0), relay.const(4), step, "int32")]
    )
    machine = vm.VirtualMachine(
        relay.vm.compile(relay.IRModule.from_expr(relay.Function([x, newshape, step], body)))
    )
    data = f32(6)
    with pytest.raises(vm.VMError, match=r"dyn\.reshape"):
        machine.invoke("main", data, i32(4, 2), np.int32(1))
    with pytest.raises(vm.VMError, match=r"arange.*step must not be 0"):
        machine.invoke("main", data, i32(3, 2), np.int32(0))
    reshaped, counted = machine.invoke("main", data, i32(3, 2), np.int32(2))
    np.testing.assert_array_equal(reshaped, data.reshape(3, 2))
    np.testing.assert_array_equal(counted, i32(0, 2))
    zeros = vm.VirtualMachine(
        relay.vm.compile(
            relay.IRModule.from_expr(relay.Function([newshape], relay.zeros(newshape)))
        )
    )
    with pytest.raises(vm.VMError, match="negative size"):
        zeros.invoke("main", i32(2, -1))


# --- invalid -------------------------------------------------------------------------------------


def test_a_shape_tensor_of_unknown_length_is_a_type_error() -> None:
    x = relay.var("x", shape=(ANY,))
    shape = relay.var("shape", shape=(ANY,), dtype="int32")
    mod = relay.IRModule.from_expr(relay.Function([x, shape], relay.reshape(x, shape)))
    with pytest.raises(
        TypeError, match=r"newshape must be a one-dimensional integer tensor of static length"
    ):
        relay.transform.InferType()(mod)

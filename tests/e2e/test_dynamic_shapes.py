"""Dynamic shapes end to end: one executable runs any batch size; reshapes make no copy.

Returns: an MLP over ``Tensor[(?, 784)]`` runs at batch 1, 7 and 64 from one executable,
elementwise and broadcast chains with ``?`` dimensions, ``reshape`` with 0 and -1 on a
``?`` batch, ``concatenate`` along a ``?`` axis, and a recursion that doubles a ``?`` axis
agree on the reference interpreter, the VM and the VM after save/load. Reshapes (static
and dynamic) return views sharing memory with their input and run no kernel. Traps: a
shape mismatch the types could not see raises ``vm.VMError`` naming the operator and the
shapes, and the machine stays usable. The kernels repeat those of the fused-program tests
(dense + bias_add + relu) so that few new numba kernels are built.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vm
from compiler import relay
from tests.e2e.harness import parse, run_all
from vm.isa import Opcode

RNG = np.random.default_rng(23)
ANY = relay.Any()


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def assert_close(actual: Any, expected: Any, what: str, tol: float = 1e-5) -> None:
    assert isinstance(actual, np.ndarray), f"{what}: not an array: {actual!r}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} vs {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} vs {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, err_msg=what)


def machines(exe: vm.Executable) -> list[vm.VirtualMachine]:
    """A machine on ``exe`` and one on the executable saved and loaded back."""
    reloaded = vm.Executable.load_exec(exe.save()[0])
    assert reloaded.save()[0] == exe.save()[0]
    return [vm.VirtualMachine(exe), vm.VirtualMachine(reloaded)]


def opcodes(exe: vm.Executable, name: str = "main") -> list[Opcode]:
    return [Opcode(i.opcode) for i in exe.get_function(name).instructions]


def check_three_ways(mod: relay.IRModule, *args: Any, tol: float = 1e-5) -> Any:
    reference, direct, after_load = run_all(mod, *args)
    if isinstance(reference, tuple):
        for r, d, a in zip(reference, direct, after_load):
            assert_close(d, r, "VM vs interpreter", tol)
            assert_close(a, r, "VM after save/load vs interpreter", tol)
        return direct
    assert_close(direct, reference, "VM vs interpreter", tol)
    assert_close(after_load, reference, "VM after save/load vs interpreter", tol)
    return direct


# --- returns -------------------------------------------------------------------------------------


def _mlp() -> tuple[relay.IRModule, dict[str, np.ndarray]]:
    x = relay.var("x", shape=(ANY, 784))
    params: dict[str, np.ndarray] = {}
    h: relay.Expr = x
    weights = []
    sizes = [(784, 32), (32, 10)]
    for k, (fan_in, fan_out) in enumerate(sizes):
        w = relay.var(f"w{k}", shape=(fan_out, fan_in))
        b = relay.var(f"b{k}", shape=(fan_out,))
        weights += [w, b]
        params[f"w{k}"] = (f32(fan_out, fan_in) / np.sqrt(fan_in)).astype("float32")
        params[f"b{k}"] = f32(fan_out)
        h = relay.nn.bias_add(relay.nn.dense(h, w), b)
        if k < len(sizes) - 1:
            h = relay.nn.relu(h)
    return relay.IRModule.from_expr(relay.Function([x, *weights], h)), params


def test_one_mlp_executable_runs_batch_1_7_and_64() -> None:
    mod, params = _mlp()
    exe = relay.vm.compile(mod, params=params)
    codes = opcodes(exe)
    assert Opcode.AllocTensorReg in codes and Opcode.ShapeOf in codes
    reference = relay.create_executor("debug", mod).evaluate()
    runners = machines(exe)
    for batch in (1, 7, 64):
        x = f32(batch, 784)
        expected = reference(x, *params.values())
        for k, machine in enumerate(runners):
            assert_close(machine.run(x), expected, f"batch {batch}, machine {k}")
    # Results are caller-owned: a later call at another batch leaves an earlier one intact.
    machine = runners[0]
    x = f32(7, 784)
    first = machine.run(x)
    kept = first.copy()
    machine.run(f32(64, 784))
    np.testing.assert_array_equal(first, kept)


def test_elementwise_and_broadcast_chains_with_dynamic_dimensions() -> None:
    mod = parse(
        "def @main(%x: Tensor[(?, 4), float32], %y: Tensor[(?, 1), float32], "
        "%z: Tensor[(4), float32]) {"
        "  %0 = exp(%x) * %y;"
        "  %1 = %0 + %z;"
        "  (%1, sum(%1, axis=[1]))"
        "}"
    )
    for batch in (1, 5):
        check_three_ways(mod, f32(batch, 4), f32(batch, 1), f32(4))
    # A ? dimension of 1 broadcasting against another ? dimension.
    mod = parse("def @main(%a: Tensor[(?, ?), float32], %b: Tensor[(?, ?), float32]) { %a - %b }")
    check_three_ways(mod, f32(3, 1), f32(1, 6))
    check_three_ways(mod, f32(2, 5), f32(2, 5))


def test_reshape_with_zero_and_minus_one_on_a_dynamic_batch() -> None:
    mod = parse(
        "def @main(%x: Tensor[(?, 3, 4), float32]) {"
        "  %0 = reshape(%x, newshape=[0, -1]);"
        "  %1 = exp(%0);"
        "  reshape(%1, newshape=[-1, 2, 6])"
        "}"
    )
    for batch in (1, 4):
        out = check_three_ways(mod, f32(batch, 3, 4))
        assert out.shape == (batch, 2, 6)


def test_concatenate_along_a_dynamic_axis() -> None:
    mod = parse(
        "def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(?, 3), float32]) {"
        "  concatenate((%x, %y), axis=0)"
        "}"
    )
    for rows in ((1, 2), (0, 5), (4, 4)):
        out = check_three_ways(mod, f32(rows[0], 3), f32(rows[1], 3))
        assert out.shape == (sum(rows), 3)


def test_split_of_a_dynamic_axis_gives_static_and_dynamic_pieces() -> None:
    # The first piece is (1, 3) whatever the batch (it comes from the storage pool); the
    # second is (?, 3) (its own storage, sized by the shape function).
    mod = parse(
        "def @main(%x: Tensor[(?, 3), float32]) { split(%x, indices_or_sections=[1], axis=0) }"
    )
    for rows in (1, 4):
        first, rest = check_three_ways(mod, f32(rows, 3))
        assert first.shape == (1, 3) and rest.shape == (rows - 1, 3)


def test_a_recursion_doubling_a_dynamic_axis() -> None:
    mod = parse(
        "def @grow(%x: Tensor[(?, 2), float32], %n: int32) -> Tensor[(?, 2), float32] {"
        "  if (%n == 0) { %x } else {"
        "    @grow(concatenate((%x, %x), axis=0), %n - 1)"
        "  }"
        "}"
        "def @main(%x: Tensor[(?, 2), float32], %n: int32) { @grow(%x, %n) }"
    )
    x = f32(3, 2)
    out = check_three_ways(mod, x, np.array(3, dtype="int32"))
    assert out.shape == (24, 2)


def test_a_static_reshape_is_a_view_of_its_input_and_runs_no_kernel() -> None:
    mod = parse("def @main(%x: Tensor[(2, 6), float32]) { reshape(%x, newshape=[3, 4]) }")
    exe = relay.vm.compile(mod)
    assert exe.primitive_ops == []
    assert Opcode.ReshapeTensor in opcodes(exe)
    x = f32(2, 6)
    for machine in machines(exe):
        out = machine.run(x)
        assert out.shape == (3, 4) and np.shares_memory(out, x)
        np.testing.assert_array_equal(out, x.reshape(3, 4))


def test_a_dynamic_reshape_is_a_view_of_its_input() -> None:
    mod = parse(
        "def @main(%x: Tensor[(?, 6), float32]) {"
        "  expand_dims(reshape(%x, newshape=[-1, 3]), axis=0)"
        "}"
    )
    exe = relay.vm.compile(mod)
    assert all("shape_func" in name for name in exe.primitive_ops)
    for batch in (1, 5):
        x = f32(batch, 6)
        for machine in machines(exe):
            out = machine.run(x)
            assert out.shape == (1, 2 * batch, 3) and np.shares_memory(out, x)
            np.testing.assert_array_equal(out, x.reshape(1, -1, 3))


def test_squeeze_without_axis_keeps_a_dynamic_dimension_that_is_one() -> None:
    # The type is Tensor[(3, ?)]: the ? stays even when it is 1 at run time.
    exe = relay.vm.compile(parse("def @main(%x: Tensor[(1, 3, ?), float32]) { squeeze(%x) }"))
    for machine in machines(exe):
        for n in (1, 4):
            x = f32(1, 3, n)
            out = machine.run(x)
            assert out.shape == (3, n) and np.shares_memory(out, x)


def test_squeeze_without_axis_after_a_kernel_agrees_with_the_interpreter() -> None:
    # Fused into exp's kernel, with a ? that is 1 at run time: both backends keep it.
    mod = parse("def @main(%x: Tensor[(?, 1, 3), float32]) { squeeze(exp(%x)) }")
    for n in (1, 2):
        out = check_three_ways(mod, f32(n, 1, 3))
        assert out.shape == (n, 3)


def test_a_reshaped_kernel_output_shares_its_memory_and_stays_intact() -> None:
    # %1 views %0 while the dense of %2 runs: the memory plan must not give %2 the bytes
    # of %0, which looks dead after the reshape unless the view is known to refer to it.
    mod = parse(
        "def @main(%x: Tensor[(4, 5), float32], %w: Tensor[(6, 5), float32],"
        "          %w2: Tensor[(6, 5), float32], %v: Tensor[(3, 4), float32]) {"
        "  %0 = nn.dense(%x, %w);"
        "  %1 = reshape(%0, newshape=[6, 4]);"
        "  %2 = nn.dense(%x, %w2);"
        "  %3 = nn.dense(%1, %v);"
        "  %4 = reshape(%2, newshape=[6, 4]);"
        "  nn.dense(%4, %v) + %3"
        "}"
    )
    exe = relay.vm.compile(mod)
    assert not any("reshape" in name for name in exe.primitive_ops)
    assert opcodes(exe).count(Opcode.ReshapeTensor) == 2
    calls: list[tuple[str, tuple]] = []

    def record(func: Any, name: str, before: bool, ret: Any, *args: Any) -> None:
        if not before and name.startswith("vm_mod"):
            calls.append((name, args))

    args = (f32(4, 5), f32(6, 5), f32(6, 5), f32(3, 4))
    machine = vm.VirtualMachine(exe)
    machine.set_instrument(record)
    machine.run(*args)
    # Each (6, 4) kernel input is one of the (4, 6) dense outputs, seen through a view.
    views = [a for _, arrays in calls for a in arrays[:-1] if a.shape == (6, 4)]
    dense_outputs = [arrays[-1] for _, arrays in calls if arrays[-1].shape == (4, 6)]
    assert len(views) == 2 and len(dense_outputs) == 2
    for view in views:
        assert sum(np.shares_memory(view, out) for out in dense_outputs) == 1
    check_three_ways(mod, *args)


# --- traps ---------------------------------------------------------------------------------------


def test_a_run_time_shape_mismatch_names_the_operator_and_leaves_the_vm_usable() -> None:
    mod = parse("def @main(%x: Tensor[(?, 4), float32], %y: Tensor[(?, 4), float32]) { %x + %y }")
    machine = vm.VirtualMachine(relay.vm.compile(mod))
    with pytest.raises(vm.VMError, match=r"add: cannot broadcast \(3, 4\) and \(5, 4\)"):
        machine.run(f32(3, 4), f32(5, 4))
    a, b = f32(2, 4), f32(2, 4)
    assert_close(machine.run(a, b), a + b, "after the error")


def test_a_dense_layer_given_the_wrong_feature_count_names_nn_dense() -> None:
    x = relay.var("x", shape=(ANY, ANY))
    w = relay.var("w", shape=(3, 4))
    mod = relay.IRModule.from_expr(relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w))))
    machine = vm.VirtualMachine(relay.vm.compile(mod))
    with pytest.raises(vm.VMError, match=r"nn.dense: the input features differ.*\(2, 5\)"):
        machine.run(f32(2, 5), f32(3, 4))
    x_ok, w_ok = f32(2, 4), f32(3, 4)
    assert_close(machine.run(x_ok, w_ok), np.maximum(x_ok @ w_ok.T, 0), "after the error")


def test_a_reshape_of_the_wrong_element_count_names_reshape() -> None:
    mod = parse("def @main(%x: Tensor[(?, 4), float32]) { reshape(%x, newshape=[-1, 3]) }")
    machine = vm.VirtualMachine(relay.vm.compile(mod))
    with pytest.raises(vm.VMError, match=r"reshape: cannot reshape \(2, 4\) .*8 elements"):
        machine.run(f32(2, 4))
    assert machine.run(f32(3, 4)).shape == (4, 3)

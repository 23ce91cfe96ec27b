"""The table of decoded kinds: the loop reads every kind by its name, and decoders emit them all.

A kind added to the table and forgotten in the loop, or numbered outside the group the
loop tests it in, fails here; so does a loop compiled with lookups instead of numbers.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest

import vm
import vm.interpreter
from tests.vm.interpreter_programs import (
    closure_programs,
    kernel_programs,
    loop_programs,
    memory_programs,
    nat_programs,
    scalar_programs,
)
from vm.decoded import KIND_NAMES, KINDS, Kind, with_kind_numbers
from vm.interpreter import run


def _run_tree() -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(inspect.getsource(run)))
    (function,) = tree.body
    assert isinstance(function, ast.FunctionDef)
    return function


def _kinds_compared_with_op(function: ast.FunctionDef) -> list[tuple[type, str]]:
    compared = []
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name):
            if node.left.id != "op":
                continue
            for operator, right in zip(node.ops, node.comparators):
                # A bare number would bypass the table.
                assert isinstance(right, ast.Attribute), ast.unparse(right)
                assert isinstance(right.value, ast.Name) and right.value.id == "Kind"
                compared.append((type(operator), right.attr))
    return compared


def test_kinds_are_plain_ints_numbered_in_table_order():
    assert list(KINDS) == list(range(len(KIND_NAMES)))
    for number, name in KIND_NAMES.items():
        assert type(getattr(Kind, name)) is int and getattr(Kind, name) == number


def test_the_loop_tests_every_kind_of_the_table_by_its_name():
    compared = _kinds_compared_with_op(_run_tree())
    assert {name for _, name in compared} == set(KIND_NAMES.values())


def test_the_loop_s_group_bounds_come_in_table_order():
    compared = _kinds_compared_with_op(_run_tree())
    bounds = [getattr(Kind, name) for op, name in compared if op is ast.LtE]
    assert len(bounds) == 3 and bounds == sorted(bounds)


def test_the_compiled_loop_compares_with_numbers_not_lookups():
    assert "Kind" not in run.__code__.co_names
    assert run.__code__.co_filename == inspect.getsourcefile(vm.interpreter)


def test_with_kind_numbers_keeps_behaviour_and_needs_the_source():
    def kind_of(op):
        return "ret" if op == Kind.RET else "other"

    compiled = with_kind_numbers(kind_of)
    assert "Kind" in kind_of.__code__.co_names and "Kind" not in compiled.__code__.co_names
    assert [compiled(op) for op in (Kind.RET, Kind.MOVE)] == ["ret", "other"]
    namespace: dict = {"Kind": Kind}
    exec("def no_source(op):\n    return op == Kind.RET\n", namespace)
    assert with_kind_numbers(namespace["no_source"]) is namespace["no_source"]


def _decoded_kinds(machine: vm.VirtualMachine) -> set[int]:
    class Recorder:
        def record(self, *args):
            pass

    programs = [
        machine._decode("fast"),
        machine._decode("hooked", hook=lambda *args: None),
        machine._decode("profile", recorder=Recorder()),
        machine._decode("count", recorder=[0]),
    ]
    kinds = set()
    for program in programs:
        for code in program.codes:
            kinds.update(ins[0] for ins in code)
            for ins in code:
                if ins[0] == Kind.KERNEL_RUN:  # every step has the one shape of a step
                    assert all(len(step) == 8 for step in ins[1])
    return kinds


def _compiled_programs() -> vm.Executable:
    """Kernels of one input (``sin``) and of three (``x * y + z``, one fused kernel)."""
    from compiler import relay

    x, y, z = (relay.var(name, shape=(2, 2), dtype="float32") for name in "xyz")
    main = relay.Function([x, y, z], relay.Tuple([relay.sin(x), x * y + z]))
    return relay.vm.compile(relay.IRModule.from_expr(main))


@pytest.fixture(scope="module")
def every_decoded_kind() -> set[int]:
    kinds: set[int] = set()
    kinds |= _decoded_kinds(vm.VirtualMachine(_compiled_programs()))
    for make in (
        nat_programs,
        loop_programs,
        scalar_programs,
        closure_programs,
        memory_programs,
        kernel_programs,
    ):
        kinds |= _decoded_kinds(vm.VirtualMachine(make()))
    return kinds


def test_the_decoders_emit_only_kinds_of_the_table(every_decoded_kind):
    assert every_decoded_kind <= set(KINDS)


def test_every_kind_of_the_table_is_emitted_by_some_decode(every_decoded_kind):
    missing = {KIND_NAMES[k] for k in set(KINDS) - every_decoded_kind}
    assert not missing


def test_a_single_kernel_pair_is_a_run_of_one_step():
    machine = vm.VirtualMachine(kernel_programs())
    code = machine._fast.codes[machine.executable.globals.index("main")]
    runs = [ins for ins in code if ins[0] == Kind.KERNEL_RUN]
    assert len(runs) == 1 and len(runs[0][1]) == 1
    x = np.arange(100, dtype=np.float32).reshape(10, 10)
    np.testing.assert_array_equal(machine.invoke("main", x), x + x)

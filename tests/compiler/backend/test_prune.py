"""Removing instructions whose results nobody reads: what goes, what stays, jumps."""

from __future__ import annotations

import numpy as np

import vm
from compiler.backend.prune import prune
from vm.builder import ExecutableBuilder
from vm.isa import Opcode as O

I64 = ("tensor", (), "int64")


def ops(function) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(O(i.opcode).name, *i.operands) for i in function.instructions]


def build(emit) -> tuple:  # type: ignore[no-untyped-def]
    """``main(x: int64)`` emitted by ``emit(f)``, and it pruned."""
    b = ExecutableBuilder()
    f = b.function("main", ["x"], [I64], I64)
    emit(f)
    function = f.finish()
    return function, prune(function)


def test_a_tuple_nobody_reads_goes_with_the_move_and_kill_that_only_touch_it() -> None:
    def emit(f):  # type: ignore[no-untyped-def]
        t, u = f.reg(), f.reg()
        f.emit(O.AllocADT, 0, [0, 0], t)
        f.emit(O.Move, t, u)
        f.emit(O.KillRegister, u)
        f.emit(O.Ret, 0)

    _, pruned = build(emit)
    assert ops(pruned) == [("Ret", 0)]


def test_values_that_are_read_and_effects_stay() -> None:
    def emit(f):  # type: ignore[no-untyped-def]
        one, t, field, dead_call = f.reg(), f.reg(), f.reg(), f.reg()
        f.emit(O.LoadConsti, 1, one)
        f.emit(O.AllocADT, 0, [0, one], t)
        f.emit(O.GetField, t, 1, field)
        f.emit(O.Invoke, 0, [field], dead_call)  # a call may not return: it stays
        f.emit(O.Ret, field)

    function, pruned = build(emit)
    assert pruned is function


def test_jumps_over_removed_instructions_are_retargeted() -> None:
    def emit(f):  # type: ignore[no-untyped-def]
        one, dead, result = f.reg(), f.reg(), f.reg()
        otherwise, end = f.label(), f.label()
        f.emit(O.LoadConsti, 1, one)
        f.emit(O.If, 0, one, 1, otherwise)
        f.emit(O.LoadConsti, 7, dead)  # removed: the true branch shrinks
        f.emit(O.LoadConsti, 10, result)
        f.emit(O.Goto, end)
        f.place(otherwise)
        f.emit(O.AllocADT, 0, [0], dead)  # removed, and it was the jump's target
        f.emit(O.LoadConsti, 20, result)
        f.place(end)
        f.emit(O.Ret, result)

    _, pruned = build(emit)
    assert ops(pruned) == [
        ("LoadConsti", 1, 1),
        ("If", 0, 1, 1, 3),
        ("LoadConsti", 10, 3),
        ("Goto", 2),
        ("LoadConsti", 20, 3),
        ("Ret", 3),
    ]
    b = ExecutableBuilder()
    b.add_function(pruned)
    machine = vm.VirtualMachine(b.build())
    assert machine.invoke("main", np.int64(1)) == 10
    assert machine.invoke("main", np.int64(0)) == 20


def test_chains_of_dead_values_die_together() -> None:
    def emit(f):  # type: ignore[no-untyped-def]
        a, b, c = f.reg(), f.reg(), f.reg()
        f.emit(O.LoadConsti, 3, a)
        f.emit(O.AllocADT, 0, [a], b)
        f.emit(O.AllocADT, 0, [b, a], c)
        f.emit(O.Ret, 0)

    _, pruned = build(emit)
    assert ops(pruned) == [("Ret", 0)]
    assert pruned.register_file_size == 4  # registers keep their numbers

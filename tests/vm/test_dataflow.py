"""Register dataflow: the writers of each register, and the facts they prove."""

from __future__ import annotations

import numpy as np

from vm.builder import ExecutableBuilder
from vm.dataflow import analyse, register_writers
from vm.isa import Opcode as O


def _function():
    b = ExecutableBuilder()
    f = b.function("f", ["x"], [("tensor", (2,), "float32")], ("any",))
    size, storage, tensor, flag = f.reg(), f.reg(), f.reg(), f.reg()
    f.emit(O.LoadConsti, 8, size)  # pc 0
    f.emit(O.AllocStorage, size, 16, "float32", storage)  # pc 1
    f.emit(O.AllocTensor, storage, 0, (2,), "float32", tensor)  # pc 2
    f.emit(O.LoadConsti, 1, flag)  # pc 3
    f.emit(O.LoadConsti, 1, flag)  # pc 4: the same value again
    f.emit(O.KillRegister, storage)  # pc 5: empties, does not write
    f.emit(O.Move, 0, tensor)  # pc 6: a second writer of another kind
    f.emit(O.Ret, tensor)
    return f.finish()


def test_writers_are_listed_in_order_and_a_clearing_opcode_is_not_one():
    writers = register_writers(_function().instructions)
    assert writers == {1: [0], 2: [1], 3: [2, 6], 4: [3, 4]}


def test_the_writers_prove_storage_constants_and_nothing_about_mixed_registers():
    facts = analyse(_function(), [np.zeros(1, np.float32)])
    assert facts.storage == {2}
    assert facts.consti == {1: 8, 4: 1}
    assert 3 not in facts.vm_allocated and facts.tensor_type[3] is None
    assert 0 not in facts.tensor_type  # parameters depend on the callers

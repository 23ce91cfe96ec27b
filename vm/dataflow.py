"""Register dataflow: which instructions write each register, and what their writers prove.

Runtime layer (``vm``); imports :mod:`vm.isa` and :mod:`vm.program`.

The decoder (:mod:`vm.decode`) binds fast handlers only where facts proven here make
them safe, and the compiler's dead-code pruning (``compiler.backend.prune``) removes
instructions by the same writer sets. What each opcode does to its destination comes
from its ISA row (:mod:`vm.isa`): a ``clears`` opcode empties its register instead of
writing it, so it is never a writer. The verifier (:mod:`vm.verify`) guarantees a
register is written before it is read, which is what lets writers speak for values.

Facts proven per function:

- a register written only by ``alloc_tensor`` of one static rank and dtype (or by
  ``load_const`` of such a constant) needs no rank check when passed to a kernel
  (numba entry points check dtypes but not ranks, so a wrong-rank array would be
  read out of bounds); so does a tensor parameter of a function no instruction calls
  or makes a closure of, since its arguments only come through the machine's API,
  which checks them against the parameter types;
- a kernel output register written only by ``alloc_tensor``/``alloc_tensor_reg``
  is writable memory the VM allocated (anything else is checked, so a kernel can
  never write into a read-only constant or a caller's read-only array);
- an ``alloc_tensor`` whose storage register is written only by ``alloc_storage``
  views a fresh writable buffer (anything else is checked);
- an ``if`` whose target register is written only by ``load_consti`` of one value
  compares against that Python int.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vm.isa import OPCODES, Opcode, register_written
from vm.program import Instruction, VMFunction


def operands(instruction: Instruction) -> dict[str, Any]:
    """The operands of ``instruction`` by their names in its ISA row."""
    return dict(zip(OPCODES[instruction.opcode].operand_names, instruction.operands))


def register_writers(code: Sequence[Instruction]) -> dict[int, list[int]]:
    """Register -> the pcs of the instructions that write it, in order.

    An instruction whose ISA row ``clears`` its register (``kill_register``) is not a
    writer: the verifier rejects reading the register after it.
    """
    writers: dict[int, list[int]] = {}
    for pc, instruction in enumerate(code):
        if OPCODES[instruction.opcode].clears:
            continue
        reg = register_written(instruction.opcode, instruction.operands)
        if reg is not None:
            writers.setdefault(reg, []).append(pc)
    return writers


@dataclass
class Facts:
    """What the writers of each register of one function prove about its value."""

    tensor_type: dict[int, tuple[int, str] | None]  # reg -> (ndim, dtype) if all writers agree
    vm_allocated: set[int]  # written only by alloc_tensor / alloc_tensor_reg
    storage: set[int]  # written only by alloc_storage
    consti: dict[int, int]  # written only by load_consti of this value
    returned: set[int]  # read by a ret

    @property
    def returns_fresh_tensor(self) -> bool:
        """Whether every ``ret`` returns a register only ``alloc_tensor`` writes: the result
        is then a new, writable tensor, caller-owned as it is."""
        return bool(self.returned) and self.returned <= self.vm_allocated


def analyse(function: VMFunction, constants: Sequence[np.ndarray]) -> Facts:
    """Collect the writers of every register of ``function`` and what they prove.

    Parameters are left out: what they hold depends on the callers, which
    :func:`analyse_program` looks at.
    """
    code = function.instructions
    arity = len(function.params)
    tensor_type: dict[int, tuple[int, str] | None] = {}
    vm_allocated: set[int] = set()
    storage: set[int] = set()
    consti: dict[int, int] = {}
    for reg, pcs in register_writers(code).items():
        if reg < arity:
            continue
        items = [(code[pc].opcode, operands(code[pc])) for pc in pcs]
        types = set()
        for opcode, ops in items:
            if opcode is Opcode.AllocTensor:
                types.add((len(ops["shape"]), ops["dtype"]))
            elif opcode is Opcode.LoadConst:
                const = constants[ops["const_index"]]
                types.add((const.ndim, str(const.dtype)))
            else:
                types.add(None)
        tensor_type[reg] = types.pop() if len(types) == 1 else None
        opcodes = {opcode for opcode, _ in items}
        if opcodes <= {Opcode.AllocTensor, Opcode.AllocTensorReg}:
            vm_allocated.add(reg)
        if opcodes == {Opcode.AllocStorage}:
            storage.add(reg)
        if opcodes == {Opcode.LoadConsti}:
            values = {ops["value"] for _, ops in items}
            if len(values) == 1:
                consti[reg] = values.pop()
    returned = {operands(i)["result"] for i in code if i.opcode is Opcode.Ret}
    return Facts(tensor_type, vm_allocated, storage, consti, returned)


def analyse_program(
    functions: Sequence[VMFunction], constants: Sequence[np.ndarray]
) -> list[Facts]:
    """The :class:`Facts` of every function, with tensor parameters proven across calls.

    A tensor parameter has the rank and dtype of its type when every value that can
    reach it does: values passed through the machine's API are checked against the
    parameter types, so only ``invoke`` sites matter, and each must pass a register
    whose writers prove that rank and dtype, or a parameter of its own function that
    is proven in turn. Parameters of a function some instruction makes a closure of
    are never proven (``invoke_closure`` passes whatever the closure is called with).

    This is the greatest fixpoint: every candidate starts proven and a call site that
    fails disproves it, which disproves the parameters it fed in turn (a worklist, so
    the work is linear in the program's size, and no recursion).
    """
    closures: set[int] = set()
    for function in functions:
        for instruction in function.instructions:
            if instruction.opcode is Opcode.AllocClosure:
                closures.add(operands(instruction)["func_index"])
    candidates: dict[tuple[int, int], tuple[int, str]] = {}
    for index, function in enumerate(functions):
        if index in closures:
            continue
        written = register_writers(function.instructions)
        for reg, spec in enumerate(function.param_types):
            if spec[0] == "tensor" and reg not in written:
                candidates[(index, reg)] = (len(spec[1]), spec[2])
    base = [analyse(f, constants) for f in functions]
    feeds: dict[tuple[int, int], list[tuple[int, int]]] = {}  # caller param -> callee params
    disproven: list[tuple[int, int]] = []
    for caller, function in enumerate(functions):
        for instruction in function.instructions:
            if instruction.opcode is not Opcode.Invoke:
                continue
            ops = operands(instruction)
            callee = ops["func_index"]
            for param, reg in enumerate(ops["args"]):
                key = (callee, param)
                wanted = candidates.get(key)
                if wanted is None:
                    continue
                source = (caller, reg)
                if reg < len(function.params) and source in candidates:
                    if candidates[source] == wanted:
                        feeds.setdefault(source, []).append(key)
                        continue
                elif base[caller].tensor_type.get(reg) == wanted:
                    continue
                disproven.append(key)
    while disproven:
        key = disproven.pop()
        if candidates.pop(key, None) is not None:
            disproven.extend(feeds.get(key, ()))
    # Candidates are never written by their function, so their facts are exactly these.
    for (index, reg), kind in candidates.items():
        base[index].tensor_type[reg] = kind
    return base

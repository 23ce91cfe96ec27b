"""Remove instructions whose results no instruction reads (the last step of code generation).

Compiler layer (``compiler.backend``); imports ``vm.dataflow``, ``vm.isa`` and ``vm.program``.

Code generation builds some values it then never uses: the tuple of a ``split``
whose fields are read from their own registers, a constant loaded for a branch that
projects it away. Each costs a dispatch per run. :func:`prune` drops every
instruction whose ISA row says it is ``pure`` and whose destination nobody reads (a
``kill_register`` does not count as a read; it goes with the value), repeating until
nothing more dies, and re-targets the jumps around the removed instructions. A worklist
of use counts keeps it linear in the function's size.
"""

from __future__ import annotations

from vm.dataflow import register_writers
from vm.isa import OPCODES, OperandKind, registers_read
from vm.program import Instruction, VMFunction


def _reads(instruction: Instruction) -> list[int]:
    return registers_read(instruction.opcode, instruction.operands)


def prune(function: VMFunction) -> VMFunction:
    """``function`` without the pure instructions whose results are never read.

    Parameters
    ----------
    function : vm.program.VMFunction
        A function as code generation made it.

    Returns
    -------
    vm.program.VMFunction
        The same function, or a shorter one with its jump offsets adjusted.
    """
    code = function.instructions
    uses: dict[int, int] = {}
    kills: dict[int, list[int]] = {}
    for pc, instruction in enumerate(code):
        if OPCODES[instruction.opcode].clears:
            kills.setdefault(instruction.operands[0], []).append(pc)
            continue
        for reg in _reads(instruction):
            uses[reg] = uses.get(reg, 0) + 1
    writers = register_writers(code)
    removed: set[int] = set()
    pending = [reg for reg in writers if not uses.get(reg)]
    while pending:
        reg = pending.pop()
        pcs = writers.get(reg, [])
        if uses.get(reg) or not all(OPCODES[code[pc].opcode].pure for pc in pcs):
            continue
        if reg < len(function.params) or any(pc in removed for pc in pcs):
            continue
        for pc in pcs:
            removed.add(pc)
            for read in _reads(code[pc]):
                uses[read] -= 1
                if not uses[read]:
                    pending.append(read)
        removed.update(kills.get(reg, ()))
    if not removed:
        return function
    # new_pc[pc]: where instruction pc (or, if removed, the next kept one) ends up.
    new_pc = [0] * (len(code) + 1)
    count = 0
    for pc in range(len(code)):
        new_pc[pc] = count
        if pc not in removed:
            count += 1
    new_pc[len(code)] = count
    kept = []
    for pc, instruction in enumerate(code):
        if pc in removed:
            continue
        info = OPCODES[instruction.opcode]
        operands = list(instruction.operands)
        for position, (_name, kind) in enumerate(info.operands):
            if kind is OperandKind.OFFSET:
                operands[position] = new_pc[pc + operands[position]] - new_pc[pc]
        kept.append(Instruction(instruction.opcode, tuple(operands)))
    return VMFunction(
        function.name,
        function.params,
        function.param_types,
        function.ret_type,
        function.register_file_size,
        tuple(kept),
    )

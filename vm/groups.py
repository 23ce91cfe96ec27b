"""Storage groups: tensors of one storage that can share one strided view (fast mode).

Runtime layer (``vm``); imports numpy, :mod:`vm.dataflow`, :mod:`vm.isa` and :mod:`vm.program`.

The memory plan carves many tensors of one shape and dtype out of one storage at evenly
spaced offsets (the steps of an unrolled chain, say). :func:`plan_groups` finds them, so
the decoder (:mod:`vm.decode`) can make one view of them all at the ``alloc_storage``
and turn each ``alloc_tensor`` of the group into an index of that view.

A storage that backs a single tensor (a function's result, most often) is not made at
all: its ``alloc_storage`` makes the tensor itself, in a one-item list that the
``alloc_tensor`` indexes, as a group member does. ``x + x`` on 10x10 through ``invoke``
took 2.80-2.88 us with a uint8 buffer and a view of it, 2.60-2.67 us this way (AMD EPYC
Zen 3, both decodes in one process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vm.dataflow import Facts, operands
from vm.isa import Opcode, registers_read
from vm.program import VMFunction


@dataclass(frozen=True)
class Group:
    """Tensors of one shape and dtype at evenly spaced offsets of one storage.

    ``alloc_storage`` makes one strided view of them all, ``view[count, *shape]`` in a
    hidden register, and each ``alloc_tensor`` of the group takes ``view[index]``:
    the same view of the same bytes as ``ndarray(shape, dtype, storage, offset)``, for
    about half the cost (an index instead of a constructor call).
    """

    slot: int  # the hidden register holding the group's view
    shape: tuple[int, ...]  # (count, *tensor shape)
    dtype: np.dtype
    base: int  # byte offset of the first tensor
    strides: tuple[int, ...]


@dataclass
class GroupPlan:
    """The groups of one function: made at which ``alloc_storage``, used by which tensors."""

    at_storage: dict[int, list[Group]] = field(default_factory=dict)  # pc -> groups it makes
    members: dict[int, tuple[int, Any]] = field(default_factory=dict)  # pc -> (slot, index)
    # storage register -> slots of its groups: killing the storage must drop their views too,
    # or the hidden views keep its bytes alive and the memory plan's reuse frees nothing.
    views_of: dict[int, list[int]] = field(default_factory=dict)
    # pc of an alloc_storage -> (slot, shape, dtype) of the only tensor its storage backs
    singles: dict[int, tuple[int, tuple[int, ...], np.dtype]] = field(default_factory=dict)
    slots: int = 0  # hidden registers after the function's own


def plan_groups(function: VMFunction, facts: Facts) -> GroupPlan:
    """Group the static ``alloc_tensor`` s of each storage whose size is known.

    Only a storage register written by exactly one ``alloc_storage`` of a
    ``load_consti`` size takes part, and only tensors that fit in it, so a group's
    view can always be made; tensors of one shape and dtype whose offsets step evenly
    form a group (two or more).
    """
    plan = GroupPlan()
    sources: dict[int, list[int]] = {}  # storage register -> pcs of alloc_storage writing it
    tensors: dict[tuple[int, tuple[int, ...], str], list[tuple[int, int]]] = {}
    code = function.instructions
    # A returned tensor is allocated on its own, as the NDArray the caller receives; group
    # views are plain arrays, whose items index faster than a subclass's.
    returned = facts.returned
    for pc, instruction in enumerate(code):
        ops = operands(instruction)
        if instruction.opcode is Opcode.AllocStorage:
            sources.setdefault(ops["dst"], []).append(pc)
        elif instruction.opcode is Opcode.AllocTensor and ops["dst"] not in returned:
            key = (ops["storage"], tuple(ops["shape"]), ops["dtype"])
            tensors.setdefault(key, []).append((ops["offset"], pc))
    next_slot = function.register_file_size
    for (reg, shape, dtype_name), members in tensors.items():
        writers = sources.get(reg, [])
        if reg not in facts.storage or len(writers) != 1:
            continue
        size = facts.consti.get(operands(code[writers[0]])["size"])
        if size is None:
            continue
        dtype = np.dtype(dtype_name)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        offsets = sorted({offset for offset, _ in members if offset + nbytes <= size})
        for run in _even_runs(offsets):
            group = Group(
                slot=next_slot,
                shape=(len(run), *shape),
                dtype=dtype,
                base=run[0],
                strides=(run[1] - run[0], *_c_strides(shape, dtype.itemsize)),
            )
            next_slot += 1
            plan.at_storage.setdefault(writers[0], []).append(group)
            plan.views_of.setdefault(reg, []).append(group.slot)
            # Indexing the first axis of a view gives a view, except for scalar tensors,
            # where it gives a numpy scalar; (i, ...) gives a 0-d view there.
            index = {offset: (i, ...) if not shape else i for i, offset in enumerate(run)}
            for offset, pc in members:
                if offset in index:
                    plan.members[pc] = (group.slot, index[offset])
    next_slot = _plan_singles(plan, code, sources, facts, next_slot)
    plan.slots = next_slot - function.register_file_size
    return plan


def _plan_singles(
    plan: GroupPlan, code: list, sources: dict[int, list[int]], facts: Facts, next_slot: int
) -> int:
    """Record the storages read by nothing but one ``alloc_tensor`` at offset 0 (see the
    module's docstring); returns the next free hidden register."""
    readers: dict[int, list[int]] = {}
    for pc, instruction in enumerate(code):
        for reg in registers_read(instruction.opcode, instruction.operands):
            readers.setdefault(reg, []).append(pc)
    for reg, writers in sources.items():
        reading = readers.get(reg, [])
        if reg not in facts.storage or len(writers) != 1 or len(reading) != 1:
            continue
        size = facts.consti.get(operands(code[writers[0]])["size"])
        tensor_pc = reading[0]
        if size is None or code[tensor_pc].opcode is not Opcode.AllocTensor:
            continue
        ops = operands(code[tensor_pc])
        shape, dtype = tuple(ops["shape"]), np.dtype(ops["dtype"])
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if ops["offset"] != 0 or nbytes > size or tensor_pc in plan.members:
            continue
        plan.singles[writers[0]] = (next_slot, shape, dtype)
        plan.members[tensor_pc] = (next_slot, 0)
        plan.views_of.setdefault(reg, []).append(next_slot)
        next_slot += 1
    return next_slot


def _even_runs(offsets: list[int]) -> list[list[int]]:
    """Maximal runs of two or more sorted, distinct offsets with a constant step."""
    runs: list[list[int]] = []
    current: list[int] = []
    for offset in offsets:
        if len(current) >= 2 and offset - current[-1] != current[1] - current[0]:
            runs.append(current)
            current = []
        current.append(offset)
    runs.append(current)
    return [run for run in runs if len(run) >= 2]


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))

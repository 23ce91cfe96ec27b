"""Pre-decoding: each function's instructions become the flat tuples the interpreter loop runs.

Runtime layer (``vm``); imports numpy and the runtime modules of ``vm`` below the interpreter.

A :class:`vm.VirtualMachine` decodes every function of its executable once. Each
instruction becomes a tuple whose first item is a kind of :class:`vm.decoded.Kind`
followed by operands with everything resolvable bound in advance: constants, the 0-d
arrays of ``load_consti`` and ``get_tag``, numpy dtype objects, shapes, kernel entry
points and the callee's decoded code. Instructions that only move data and never
change control flow may decode to ``(Kind.CALL, handler)``, where ``handler(registers)``
does the work.

The decoder table :data:`DECODERS` has one entry per opcode of :data:`vm.isa.OPCODES`
(a test checks it). Operands are read by their names in the ISA row. Fast handlers are
bound only where the register facts of :mod:`vm.dataflow` make them safe; tensors of one
storage share a view where :mod:`vm.groups` finds a group, and common sequences become
superinstructions (:mod:`vm.fusion`).

Four modes: ``"fast"`` (plain running), ``"hooked"`` (an instrument is called
around kernel and function calls), ``"profile"`` (kernels and the costly VM
operations are timed into a :class:`vm.profiling.Recorder`) and ``"count"`` (every
instruction is preceded by a tuple that counts it, so the same loop reports how many
instructions a run executes; jump offsets are rescaled to the interleaved layout).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from vm.dataflow import analyse_program, operands
from vm.decoded import Kind, Program
from vm.explain import KernelArgumentError, call_hook, shape_from, type_text, value_text
from vm.fusion import fuse
from vm.groups import GroupPlan, plan_groups
from vm.instrument import VMInstrumentReturnKind
from vm.isa import OPCODES, Opcode
from vm.ndarray import TENSOR_TYPES as _TENSOR_TYPES
from vm.ndarray import NDArray
from vm.objects import ADT, Closure
from vm.program import Instruction, VMFunction

_ndarray = np.ndarray
#: Tensors the VM makes are NDArrays from the start: constructing one costs what a plain
#: array costs, so results need no conversion when they leave the VM. The strided views
#: of storage groups are the exception: indexing a subclass's view costs about 25 ns
#: more per tensor, so they are plain, and a returned tensor is never in one.
_tensor = NDArray
#: Makes the one tensor of a storage that backs nothing else: ``new(NDArray, shape, dtype)``
#: (``ndarray.__new__`` called directly skips ``type.__call__``, 0.25 us of 0.65).
_new_tensor = np.ndarray.__new__
_empty = np.empty
_UINT8 = np.dtype(np.uint8)
#: Storages from this many bytes start on a cache line (or the instruction's alignment,
#: if larger). numpy's buffers start 16 bytes past a page once malloc maps them, and
#: every 64-byte vector load of a kernel reading such a buffer spans two cache lines: a
#: 1x1 convolution from 16 to 96 channels at 112x112 read its input in 770 us from
#: there, in 415 us from a line (one thread of an Intel Xeon with AVX-512). Smaller
#: storages skip the extra step: numpy gives an array's address in 1.2 us, which made
#: the LSTM's steps (2 KB tensors) 15% slower when every storage from 1 KB took it.
ALIGNED_MIN_BYTES = 16384
CACHE_LINE = 64


def _aligned(nbytes: int, alignment: int) -> tuple[np.ndarray, int]:
    """A uint8 buffer with room for ``nbytes`` from an ``alignment``-aligned offset, and
    that offset."""
    raw = _empty(nbytes + alignment, _UINT8)
    return raw, -raw.ctypes.data % alignment


def aligned_empty(nbytes: int, alignment: int = CACHE_LINE) -> np.ndarray:
    """``nbytes`` uninitialised bytes whose first is ``alignment``-aligned."""
    raw, start = _aligned(nbytes, alignment)
    return raw[start : start + nbytes]


_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)
_FLOAT16 = np.dtype(np.float16)
_SKIP_RUN = VMInstrumentReturnKind.SKIP_RUN

Handler = Callable[[list], None]


def frozen_scalar(value: int, dtype: np.dtype) -> np.ndarray:
    """A read-only 0-d array: shared by every run, so nothing may write to it."""
    array = np.array(value, dtype=dtype)
    array.flags.writeable = False
    return array


@dataclass
class Decoder:
    """Decodes the functions of one executable for one virtual machine and mode."""

    exe: Any
    kernels: Sequence[Any]
    mode: str = "fast"
    hook: Callable[..., Any] | None = None
    recorder: Any = None
    max_depth: int = 250_000
    consti_cache: dict[int, np.ndarray] = field(default_factory=dict)
    tag_cache: dict[int, np.ndarray] = field(default_factory=dict)

    def decode(self) -> Program:
        """Decode every function; returns the :class:`Program`."""
        exe = self.exe
        functions = exe.functions
        codes: list[list[tuple]] = [[] for _ in functions]
        self.facts_of = analyse_program(functions, exe.constant_values)
        # Grouped views are a fast-mode optimization; other modes time or count each view.
        self.plans = [
            plan_groups(f, facts) if self.mode == "fast" else GroupPlan()
            for f, facts in zip(functions, self.facts_of)
        ]
        program = Program(
            codes=codes,
            arities=[len(f.params) for f in functions],
            pads=[
                [None] * (f.register_file_size - len(f.params) + plan.slots)
                for f, plan in zip(functions, self.plans)
            ],
            max_depth=self.max_depth,
            counting=self.mode == "count",
            functions=functions,
            kernels=self.kernels,
            primitive_names=[p.name for p in exe.primitives],
            exe=exe,
            fresh_results=[facts.returns_fresh_tensor for facts in self.facts_of],
        )
        self.program = program
        self.constants = exe.constant_values
        for tag in (0, *exe.constructor_by_tag):
            program.tags[tag] = self.tag_array(tag)
        for index, code in enumerate(codes):
            program.owners[id(code)] = index
        for index, function in enumerate(functions):
            codes[index][:] = self._decode_function(index, function)
        return program

    def _decode_function(self, findex: int, function: VMFunction) -> list[tuple]:
        self.findex = findex
        self.function = function
        self.facts = self.facts_of[findex]
        self.plan = self.plans[findex]
        decoded = []
        for pc, instruction in enumerate(function.instructions):
            self.pc = pc
            decoded.append(DECODERS[instruction.opcode](self, operands(instruction)))
        if self.mode == "fast":
            fuse(decoded)
        if self.mode == "count":
            decoded = _interleave_counter(decoded, self.recorder)
        return decoded

    # -- helpers used by the decoders ------------------------------------------------------

    def consti(self, value: int) -> np.ndarray:
        array = self.consti_cache.get(value)
        if array is None:
            array = self.consti_cache[value] = frozen_scalar(value, _INT64)
        return array

    def tag_array(self, tag: int) -> np.ndarray:
        array = self.tag_cache.get(tag)
        if array is None:
            array = self.tag_cache[tag] = frozen_scalar(tag, _INT32)
        return array

    def timed(self, name: str, handler: Handler, describe: Callable[[list], str]) -> tuple:
        """In profile mode, ``handler`` wrapped to record its duration under ``name``."""
        record = self.recorder.record
        clock = time.perf_counter_ns

        def timed_handler(regs: list) -> None:
            start = clock()
            handler(regs)
            record(name, describe(regs), clock() - start)

        return (Kind.CALL, timed_handler)


DECODERS: dict[Opcode, Callable[[Decoder, dict[str, Any]], tuple]] = {}


def _decoder(opcode: Opcode) -> Callable:
    def register(fn: Callable[[Decoder, dict[str, Any]], tuple]) -> Callable:
        DECODERS[opcode] = fn
        return fn

    return register


@_decoder(Opcode.Move)
def _move(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (Kind.MOVE, ops["src"], ops["dst"])


@_decoder(Opcode.Ret)
def _ret(d: Decoder, ops: dict[str, Any]) -> tuple:
    # A callee's register list ends with its caller's frame (see vm.interpreter.run), in
    # the slots after its own registers; hooked calls add the instrument's record.
    at = d.function.register_file_size + d.plan.slots
    if d.mode == "hooked":
        return (Kind.RET_HOOKED, ops["result"], at)
    return (Kind.RET, ops["result"], at, at + 1, at + 2, at + 3, at + 4)


@_decoder(Opcode.Invoke)
def _invoke(d: Decoder, ops: dict[str, Any]) -> tuple:
    callee = ops["func_index"]
    code = d.program.codes[callee]
    pad = d.program.pads[callee]
    args = tuple(ops["args"])
    if d.mode == "hooked":
        return (Kind.INVOKE_HOOKED, code, args, pad, ops["dst"], d.exe.functions[callee], d.hook)
    if d.mode != "count" and _returns_result(d.function.instructions, d.pc, ops["dst"]):
        # A tail call: the callee's frame replaces this one and returns to this frame's
        # caller (the slots after this function's registers, none in the entry frame).
        at = d.function.register_file_size + d.plan.slots
        return (Kind.INVOKE, code, args, pad, None, _gather(args), at)
    return (Kind.INVOKE, code, args, pad, ops["dst"], _gather(args))


def _returns_result(code: Sequence[Instruction], pc: int, dst: int) -> bool:
    """Whether the instructions after ``pc`` only return register ``dst``: moves of it
    and jumps, then ``ret`` of where it went (``ret dst``; ``move x dst; ret x``; a call
    in a branch of ``if``: ``move m dst; goto end`` ... ``end: ret m``). Then the call at
    ``pc`` is a tail call, and a loop written as a recursive function runs in one frame,
    so its memory does not grow with the number of steps (each frame holds the storage
    of its step's tensors)."""
    reg, at, seen = dst, pc + 1, set()
    while 0 <= at < len(code) and at not in seen:
        seen.add(at)
        instruction = code[at]
        ops = operands(instruction)
        if instruction.opcode is Opcode.Ret:
            return ops["result"] == reg
        if instruction.opcode is Opcode.Move and ops["src"] == reg:
            reg = ops["dst"]
            at += 1
        elif instruction.opcode is Opcode.Goto:
            at += ops["offset"]
        else:
            return False
    return False


def _no_arguments(registers: list) -> tuple:
    return ()


def _gather(regs: tuple[int, ...]) -> Callable[[list], tuple] | None:
    """A function of the register list returning the values of ``regs`` as a tuple (None
    for one register, which the loop reads directly)."""
    if len(regs) >= 2:
        return itemgetter(*regs)  # gathers in C
    return None if regs else _no_arguments


@_decoder(Opcode.InvokeClosure)
def _invoke_closure(d: Decoder, ops: dict[str, Any]) -> tuple:
    args = tuple(ops["args"])
    if d.mode == "hooked":
        return (Kind.INVOKE_CLOSURE_HOOKED, ops["closure"], args, ops["dst"], d.hook)
    if d.mode != "count" and _returns_result(d.function.instructions, d.pc, ops["dst"]):
        # A tail call, as for invoke: a loop written as a local recursive function (a
        # closure after lambda lifting) runs in one frame.
        at = d.function.register_file_size + d.plan.slots
        return (Kind.INVOKE_CLOSURE, ops["closure"], args, None, at)
    return (Kind.INVOKE_CLOSURE, ops["closure"], args, ops["dst"])


@_decoder(Opcode.InvokePacked)
def _invoke_packed(d: Decoder, ops: dict[str, Any]) -> tuple:
    prim = ops["prim_index"]
    kernel = d.kernels[prim]
    name = d.exe.primitives[prim].name
    regs = tuple(ops["args"])
    num_outputs = ops["num_outputs"]
    description = d.exe.primitives[prim].description
    arg_types = [tuple(t) for t in description["inputs"]] + [
        tuple(t) for t in description["outputs"]
    ]
    first_output = len(regs) - num_outputs
    facts = d.facts
    # Rank checks only where the register's writers do not prove the rank and dtype.
    rank_checks = tuple(
        (i, ndim)
        for i, (reg, (dtype, ndim)) in enumerate(zip(regs, arg_types))
        if facts.tensor_type.get(reg) != (ndim, dtype)
    )
    # numba checks dtypes, but a float16 argument reaches it as a uint16 view, which any
    # 2-byte array would pass: unproven float16 arguments get their dtype checked here.
    half_checks = tuple(i for i, ndim in rank_checks if arg_types[i][0] == "float16")
    write_checks = tuple(
        i for i in range(first_output, len(regs)) if regs[i] not in facts.vm_allocated
    )
    entry = kernel.entry
    if d.mode == "fast" and not (rank_checks or write_checks):
        if len(regs) == 3:
            return (Kind.PACKED3, entry, *regs)
        if len(regs) == 2:
            return (Kind.PACKED2, entry, *regs)
        if len(regs) > 3:
            return (Kind.PACKEDN, entry, itemgetter(*regs), regs)
    handler = _kernel_handler(
        entry, regs, rank_checks, half_checks, write_checks, first_output, name
    )
    if d.mode == "hooked":
        return (Kind.CALL, _hooked_kernel(handler, kernel, name, regs, d.hook))
    if d.mode == "profile":
        return (Kind.CALL, _profiled_kernel(handler, name, regs, d.recorder))
    return (Kind.CALL, handler)


def _kernel_handler(
    entry: Callable[..., Any],
    regs: tuple[int, ...],
    rank_checks: tuple[tuple[int, int], ...],
    half_checks: tuple[int, ...],
    write_checks: tuple[int, ...],
    first_output: int,
    name: str,
) -> Callable[..., Any]:
    """``handler(registers, args=None)``: check the arguments, then run the kernel."""
    if len(regs) == 1:
        (only,) = regs

        def gather(registers: list) -> tuple:
            return (registers[only],)
    else:
        gather = itemgetter(*regs)  # a tuple of the registers' values, gathered in C

    def run_kernel(registers: list, args: Sequence[Any] | None = None) -> None:
        if args is None:
            args = gather(registers)
        for i, ndim in rank_checks:
            if args[i].ndim != ndim:
                raise KernelArgumentError(
                    f"argument {i} (${regs[i]}) of kernel {name} is "
                    f"{type_text(args[i].dtype, args[i].shape)}, "
                    f"but the kernel takes a tensor of rank {ndim}"
                )
        for i in half_checks:
            if args[i].dtype != _FLOAT16:
                raise KernelArgumentError(
                    f"argument {i} (${regs[i]}) of kernel {name} is "
                    f"{type_text(args[i].dtype, args[i].shape)}, "
                    "but the kernel takes a float16 tensor"
                )
        for i in write_checks:
            if not args[i].flags.writeable:
                raise KernelArgumentError(
                    f"output {i - first_output} (${regs[i]}) of kernel {name} is read-only memory "
                    "(a constant or a read-only input); kernels write only to tensors "
                    "allocated with alloc_tensor"
                )
        entry(*args)

    return run_kernel


def _hooked_kernel(
    run_kernel: Callable[..., Any],
    kernel: Any,
    name: str,
    regs: tuple[int, ...],
    hook: Callable[..., Any],
) -> Handler:
    def hooked(registers: list) -> None:
        args = [registers[r] for r in regs]
        if call_hook(hook, kernel, name, True, None, *args) == _SKIP_RUN:
            return
        run_kernel(registers, args)
        call_hook(hook, kernel, name, False, None, *args)

    return hooked


def _profiled_kernel(
    run_kernel: Callable[..., Any], name: str, regs: tuple[int, ...], recorder: Any
) -> Handler:
    record = recorder.record
    clock = time.perf_counter_ns

    def profiled(registers: list) -> None:
        start = clock()
        run_kernel(registers)
        elapsed = clock() - start
        shapes = ", ".join(
            type_text(a.dtype, a.shape) if isinstance(a, np.ndarray) else type(a).__name__
            for a in (registers[r] for r in regs)
        )
        record(name, shapes, elapsed)

    return profiled


@_decoder(Opcode.AllocTensor)
def _alloc_tensor(d: Decoder, ops: dict[str, Any]) -> tuple:
    storage, offset, dst = ops["storage"], ops["offset"], ops["dst"]
    shape = tuple(ops["shape"])
    dtype = np.dtype(ops["dtype"])
    proven = storage in d.facts.storage
    member = d.plan.members.get(d.pc)
    if member is not None:
        slot, index = member
        return (Kind.ALLOC, slot, None, None, index, dst)  # view[index] of its group
    if d.mode != "profile" and proven:
        return (Kind.ALLOC, storage, shape, dtype, offset, dst)
    ndarray = _tensor

    def alloc(regs: list) -> None:
        buffer = regs[storage]
        if not proven:
            _check_storage(buffer, storage)
        regs[dst] = ndarray(shape, dtype, buffer, offset)

    if d.mode == "profile":
        text = type_text(dtype, shape)
        return d.timed("VM::AllocTensor", alloc, lambda regs: text)
    return (Kind.CALL, alloc)


def _check_storage(buffer: Any, reg: int) -> None:
    if (
        type(buffer) is not _ndarray
        or buffer.dtype != _UINT8
        or buffer.ndim != 1
        or not buffer.flags.writeable
    ):
        raise KernelArgumentError(
            f"register ${reg} does not hold a storage buffer from alloc_storage "
            f"(it holds {value_text(buffer)})"
        )


@_decoder(Opcode.AllocTensorReg)
def _alloc_tensor_reg(d: Decoder, ops: dict[str, Any]) -> tuple:
    storage, offset, dst, shape_reg = ops["storage"], ops["offset"], ops["dst"], ops["shape_reg"]
    dtype = np.dtype(ops["dtype"])
    proven = storage in d.facts.storage
    ndarray = _tensor

    def alloc(regs: list) -> None:
        buffer = regs[storage]
        if not proven:
            _check_storage(buffer, storage)
        regs[dst] = ndarray(shape_from(regs[shape_reg], "shape"), dtype, buffer, offset)

    if d.mode == "profile":
        return d.timed("VM::AllocTensorReg", alloc, lambda regs: type_text(dtype, regs[dst].shape))
    return (Kind.CALL, alloc)


@_decoder(Opcode.AllocADT)
def _alloc_adt(d: Decoder, ops: dict[str, Any]) -> tuple:
    tag, dst = ops["tag"], ops["dst"]
    fields = tuple(ops["fields"])
    if len(fields) >= 2:
        gather: Callable[[list], tuple] = itemgetter(*fields)
    elif len(fields) == 1:
        (only,) = fields

        def gather(regs: list) -> tuple:
            return (regs[only],)
    else:

        def gather(regs: list) -> tuple:
            return ()

    if tag == 0:

        def alloc(regs: list) -> None:
            regs[dst] = gather(regs)
    else:
        info = d.exe.constructor_by_tag.get(tag)
        name = info.name if info is not None else ""

        def alloc(regs: list) -> None:
            regs[dst] = ADT(tag, gather(regs), name)

    if d.mode == "profile":
        text = f"{len(fields)} fields"
        return d.timed("VM::AllocADT", alloc, lambda regs: text)
    return (Kind.CALL, alloc)


@_decoder(Opcode.AllocClosure)
def _alloc_closure(d: Decoder, ops: dict[str, Any]) -> tuple:
    index, dst = ops["func_index"], ops["dst"]
    captured = tuple(ops["captured"])
    name = d.exe.functions[index].name

    def alloc(regs: list) -> None:
        regs[dst] = Closure(index, [regs[r] for r in captured], name)

    if d.mode == "profile":
        text = f"{len(captured)} captured"
        return d.timed("VM::AllocClosure", alloc, lambda regs: text)
    return (Kind.CALL, alloc)


@_decoder(Opcode.GetField)
def _get_field(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (Kind.GET_FIELD, ops["object"], ops["index"], ops["dst"])


@_decoder(Opcode.If)
def _if(d: Decoder, ops: dict[str, Any]) -> tuple:
    target = ops["target"]
    if target in d.facts.consti:
        value = d.facts.consti[target]
        return (Kind.IF_CONST, ops["test"], value, ops["true_offset"], ops["false_offset"], target)
    return (Kind.IF, ops["test"], target, ops["true_offset"], ops["false_offset"])


@_decoder(Opcode.LoadConst)
def _load_const(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (Kind.SET, d.constants[ops["const_index"]], ops["dst"])


@_decoder(Opcode.Goto)
def _goto(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (Kind.GOTO, ops["offset"])


@_decoder(Opcode.GetTag)
def _get_tag(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (Kind.GET_TAG, ops["object"], ops["dst"])


@_decoder(Opcode.LoadConsti)
def _load_consti(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (Kind.SET, d.consti(ops["value"]), ops["dst"])


@_decoder(Opcode.Fatal)
def _fatal(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (Kind.FATAL,)


@_decoder(Opcode.AllocStorage)
def _alloc_storage(d: Decoder, ops: dict[str, Any]) -> tuple:
    size, dst = ops["size"], ops["dst"]
    empty = _empty
    uint8 = _UINT8
    alignment = max(int(ops["alignment"]), CACHE_LINE)
    known = d.facts.consti.get(size)
    single = d.plan.singles.get(d.pc)
    if single is not None:
        # The storage backs one tensor: make it instead (vm.groups), as the type results
        # are handed back in; the storage's register is never read.
        slot, shape, dtype = single
        new, tensor = _new_tensor, _tensor
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if nbytes >= ALIGNED_MIN_BYTES:
            aligned = _aligned

            def alloc_single(regs: list) -> None:
                raw, start = aligned(nbytes, alignment)
                regs[slot] = [new(tensor, shape, dtype, raw, start)]
        else:

            def alloc_single(regs: list) -> None:
                regs[slot] = [new(tensor, shape, dtype)]

        return (Kind.CALL, alloc_single)

    # numpy's allocator aligns buffers to 16 bytes, which covers every element type a
    # kernel reads; big storages start on a cache line (ALIGNED_MIN_BYTES).
    if known is not None and known >= ALIGNED_MIN_BYTES:

        def empty(nbytes: int, _: np.dtype) -> np.ndarray:
            return aligned_empty(nbytes, alignment)

    groups = [
        (g.slot, g.shape, g.dtype, g.base, g.strides) for g in d.plan.at_storage.get(d.pc, ())
    ]
    ndarray = _ndarray  # returned tensors are never in a group (see vm.groups)
    if groups:

        def alloc(regs: list) -> None:
            storage = regs[dst] = empty(known, uint8)
            for slot, shape, dtype, base, strides in groups:
                regs[slot] = ndarray(shape, dtype, storage, base, strides)
    elif known is not None and known >= 0:

        def alloc(regs: list) -> None:
            regs[dst] = empty(known, uint8)
    else:

        def alloc(regs: list) -> None:
            nbytes = regs[size].item()
            if nbytes >= ALIGNED_MIN_BYTES:
                regs[dst] = aligned_empty(nbytes, alignment)
            else:
                regs[dst] = empty(nbytes, uint8)

    if d.mode == "profile":
        return d.timed("VM::AllocStorage", alloc, lambda regs: f"uint8[{regs[dst].size}]")
    return (Kind.CALL, alloc)


@_decoder(Opcode.ShapeOf)
def _shape_of(d: Decoder, ops: dict[str, Any]) -> tuple:
    tensor, dst = ops["tensor"], ops["dst"]
    array = np.array
    int64 = _INT64

    def shape_of(regs: list) -> None:
        regs[dst] = array(regs[tensor].shape, dtype=int64)

    if d.mode == "profile":
        return d.timed(
            "VM::ShapeOf",
            shape_of,
            lambda regs: type_text(regs[tensor].dtype, regs[tensor].shape),
        )
    return (Kind.CALL, shape_of)


@_decoder(Opcode.ReshapeTensor)
def _reshape_tensor(d: Decoder, ops: dict[str, Any]) -> tuple:
    tensor, newshape, dst = ops["tensor"], ops["newshape"], ops["dst"]

    def reshape(regs: list) -> None:
        source = regs[tensor]
        if type(source) not in _TENSOR_TYPES:
            raise KernelArgumentError(
                f"reshape_tensor needs a tensor in ${tensor}, it holds {value_text(source)}"
            )
        shape = shape_from(regs[newshape], "new shape")
        if any(dim < 0 for dim in shape):
            raise KernelArgumentError(f"reshape_tensor: the new shape {list(shape)} is negative")
        # Registers hold C-contiguous tensors, so this is always a view, never a copy.
        regs[dst] = source.reshape(shape)

    if d.mode == "profile":
        return d.timed(
            "VM::ReshapeTensor", reshape, lambda regs: type_text(regs[dst].dtype, regs[dst].shape)
        )
    return (Kind.CALL, reshape)


@_decoder(Opcode.KillRegister)
def _kill_register(d: Decoder, ops: dict[str, Any]) -> tuple:
    reg = ops["reg"]
    views = d.plan.views_of.get(reg)
    if not views:
        return (Kind.SET, None, reg)
    cleared = (reg, *views)

    def kill_storage(regs: list) -> None:
        for r in cleared:
            regs[r] = None

    return (Kind.CALL, kill_storage)


missing = set(OPCODES) - set(DECODERS)
assert not missing, f"opcodes without a decoder: {sorted(op.name for op in missing)}"


# ---- counting -----------------------------------------------------------------------------


def _interleave_counter(decoded: list[tuple], counter: list[int]) -> list[tuple]:
    """``decoded`` with a counting tuple before each instruction (count mode).

    Instruction ``i`` moves to ``2i + 1``; a relative jump ``o`` from it must land on
    the counter of instruction ``i + o`` at ``2(i + o)``, so it becomes ``2o - 1``.
    Calls return to ``pc + 1``, which is the next instruction's counter.
    """

    def tick(regs: list) -> None:
        counter[0] += 1

    result: list[tuple] = []
    for ins in decoded:
        kind = ins[0]
        if kind in (Kind.IF, Kind.IF_CONST):
            ins = (*ins[:3], 2 * ins[3] - 1, 2 * ins[4] - 1, *ins[5:])
        elif kind == Kind.GOTO:
            ins = (Kind.GOTO, 2 * ins[1] - 1)
        result += [(Kind.CALL, tick), ins]
    return result

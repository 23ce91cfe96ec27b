"""Pre-decoding: each function's instructions become flat tuples the interpreter loop runs.

Runtime layer (``vm``); imports numpy and the plain-data modules of ``vm``.

A :class:`vm.VirtualMachine` decodes every function of its executable once. Each
instruction becomes a tuple whose first item is a *kind* (a small int the loop in
:mod:`vm.interpreter` tests) followed by operands with everything resolvable bound in
advance: constants, the 0-d arrays of ``load_consti`` and ``get_tag``, numpy dtype
objects, shapes, kernel entry points and the callee's decoded code. Instructions
that only move data and never change control flow may decode to ``(K_CALL,
handler)``, where ``handler(registers)`` does the work.

The decoder table :data:`DECODERS` has one entry per opcode of :data:`vm.isa.OPCODES`
(a test checks it). Operands are read by their names in the ISA row.

Facts that make fast handlers safe are proven per function from the writers of each
register (the verifier guarantees a register is written before it is read):

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

In the fast mode, common sequences become one *fused* tuple (a superinstruction):
``alloc_tensor`` with the kernel call that fills it, a run of such pairs (an inner
loop), and ``get_tag; load_consti; if``, the test of a constructor pattern. A fused
tuple replaces only the first instruction of its sequence and advances ``pc`` past
the rest, whose own tuples stay in place for jumps into the middle.

Four modes: ``"fast"`` (plain running), ``"hooked"`` (an instrument is called
around kernel and function calls), ``"profile"`` (kernels and the costly VM
operations are timed into a :class:`vm.profiling.Recorder`) and ``"count"`` (every
instruction is preceded by a tuple that counts it, so the same loop reports how many
instructions a run executes; jump offsets are rescaled to the interleaved layout).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from vm.errors import VMError
from vm.instrument import VMInstrumentReturnKind
from vm.isa import OPCODES, Opcode, OperandKind, register_written
from vm.ndarray import TENSOR_TYPES as _TENSOR_TYPES
from vm.ndarray import NDArray
from vm.objects import ADT, Closure
from vm.program import Instruction, VMFunction

# ---- decoded kinds ------------------------------------------------------------------------------
# The loop finds a kind with a small decision tree over these numbers (kernel kinds
# 0-7, data and matching 8-11, calls and jumps 12-15, the rest after), so the numbers
# are part of the loop's design: vm.interpreter checks them when it is imported.

K_KERNEL_RUN = 0  # (k, steps, first pair): consecutive K_ALLOC_PACKED* pairs, one inner loop
K_ALLOC_PACKED1 = 1  # (k, storage, shape, dtype, offset, dst, entry, a): alloc; entry(a, dst)
K_ALLOC_PACKED2 = 2  # (k, storage, shape, dtype, offset, dst, entry, a, b): alloc; entry(a, b, dst)
K_ALLOC_PACKEDN = 3  # (k, storage, shape, dtype, offset, dst, entry, gather): alloc; entry(*gather)
K_PACKED2 = 4  # (k, entry, r0, r1)
K_PACKED3 = 5  # (k, entry, r0, r1, r2)
K_PACKEDN = 6  # (k, entry, gather, regs): entry(*gather(registers)); gather = itemgetter(*regs)
K_ALLOC = 7  # (k, storage, shape, dtype, offset, dst); grouped: (k, slot, None, None, index, dst)
K_SET = 8  # (k, value, dst): load_const, load_consti, kill_register
K_MATCH_TAG = 9  # (k, object, tag_dst, const_dst, const, tag, true_skip, false_skip)
K_IF_CONST = 10  # (k, test, value, true_offset, false_offset, target)
K_GET_FIELD = 11  # (k, object, index, dst)
K_INVOKE = 12  # (k, callee code, args, pad, dst, gather); gather is None for one argument;
# a tail call has dst None and one more item, where this frame's caller slots begin
K_RET = 13  # (k, result, slots of: caller code, return pc, caller registers, result register,
# caller depth)
K_MOVE = 14  # (k, src, dst)
K_GOTO = 15  # (k, offset)
K_CALL = 16  # (k, handler): handler(registers)
K_GET_TAG = 17  # (k, object, dst)
K_IF = 18  # (k, test, target, true_offset, false_offset)
K_INVOKE_CLOSURE = 19  # (k, closure, args, dst)
K_FATAL = 20  # (k,)
K_INVOKE_HOOKED = 21  # (k, callee code, args, pad, dst, function, hook)
K_INVOKE_CLOSURE_HOOKED = 22  # (k, closure, args, dst, hook)
K_RET_HOOKED = 23  # (k, result, first caller slot)

KIND_NAMES = {
    value: name for name, value in globals().items() if name.startswith("K_") and type(value) is int
}

_ndarray = np.ndarray
#: Tensors the VM makes are NDArrays from the start: constructing one costs what a plain
#: array costs, so results need no conversion when they leave the VM.
_tensor = NDArray
_empty = np.empty
_UINT8 = np.dtype(np.uint8)
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


# ---- the decoded program --------------------------------------------------------------------


@dataclass
class Program:
    """An executable decoded for one virtual machine in one mode.

    Attributes
    ----------
    codes : list of list of tuple
        Decoded instructions, one list per function (function-index order).
    arities : list of int
        Each function's parameter count.
    pads : list of list
        Per function, ``[None] * (register_file_size - arity)``: the registers after
        the parameters of a fresh frame.
    max_depth : int
        The call-depth limit.
    functions : sequence of VMFunction
        The original functions, for error messages.
    kernels, primitive_names : sequence
        The compiled kernel and the name of every primitive.
    exe : vm.Executable
        The executable (for naming things in messages).
    tags : dict
        Constructor tag -> the read-only int32 0-d array ``get_tag`` produces.
    owners : dict
        ``id`` of a decoded code list -> its function index (for messages).
    counting : bool
        True in the count mode, where decoded pc ``2i + 1`` runs instruction ``i``.
    """

    codes: list[list[tuple]]
    arities: list[int]
    pads: list[list[None]]
    max_depth: int
    functions: Sequence[VMFunction]
    kernels: Sequence[Any]
    primitive_names: Sequence[str]
    exe: Any
    tags: dict[int, np.ndarray] = field(default_factory=dict)
    owners: dict[int, int] = field(default_factory=dict)
    counting: bool = False

    def function_of(self, code: list) -> int:
        """The index of the function whose decoded code is ``code``."""
        return self.owners[id(code)]

    def source_pc(self, pc: int) -> int:
        """The instruction index in the function of decoded position ``pc``."""
        return pc // 2 if self.counting else pc


def format_instruction(program: Program, findex: int, pc: int) -> str:
    """``alloc_tensor $2 $1 0 [10, 10] float32`` for the instruction at ``pc``."""
    from vm.text import format_instruction as text

    instruction = program.functions[findex].instructions[pc]
    body, comment = text(instruction, pc, program.exe)
    return f"{body}  # {comment}" if comment else body


# ---- per-function facts ---------------------------------------------------------------------


@dataclass
class Facts:
    """What the writers of each register of one function prove about its value."""

    tensor_type: dict[int, tuple[int, str] | None]  # reg -> (ndim, dtype) if all writers agree
    vm_allocated: set[int]  # written only by alloc_tensor / alloc_tensor_reg
    storage: set[int]  # written only by alloc_storage
    consti: dict[int, int]  # written only by load_consti of this value


def _operands(instruction: Instruction) -> dict[str, Any]:
    return dict(zip(OPCODES[instruction.opcode].operand_names, instruction.operands))


def analyse(function: VMFunction, constants: Sequence[np.ndarray]) -> Facts:
    """Collect the writers of every register of ``function`` and what they prove.

    Parameters are left out: what they hold depends on the callers, which
    :func:`analyse_program` looks at.
    """
    writers: dict[int, list[tuple[Opcode, dict[str, Any]]]] = {}
    for instruction in function.instructions:
        info = OPCODES[instruction.opcode]
        if info.opcode is Opcode.KillRegister:
            continue  # empties a register; the verifier rejects reading it afterwards
        for (_name, kind), value in zip(info.operands, instruction.operands):
            if kind is OperandKind.DST:
                writers.setdefault(value, []).append((info.opcode, _operands(instruction)))
    params = set(range(len(function.params)))
    tensor_type: dict[int, tuple[int, str] | None] = {}
    vm_allocated: set[int] = set()
    storage: set[int] = set()
    consti: dict[int, int] = {}
    for reg, items in writers.items():
        if reg in params:
            continue
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
    return Facts(tensor_type, vm_allocated, storage, consti)


def _written_params(function: VMFunction) -> set[int]:
    arity = len(function.params)
    written = set()
    for instruction in function.instructions:
        if instruction.opcode is Opcode.KillRegister:
            continue
        reg = register_written(instruction.opcode, instruction.operands)
        if reg is not None and reg < arity:
            written.add(reg)
    return written


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
                closures.add(_operands(instruction)["func_index"])
    candidates: dict[tuple[int, int], tuple[int, str]] = {}
    for index, function in enumerate(functions):
        if index in closures:
            continue
        written = _written_params(function)
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
            ops = _operands(instruction)
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
    for pc, instruction in enumerate(code):
        ops = _operands(instruction)
        if instruction.opcode is Opcode.AllocStorage:
            sources.setdefault(ops["dst"], []).append(pc)
        elif instruction.opcode is Opcode.AllocTensor:
            key = (ops["storage"], tuple(ops["shape"]), ops["dtype"])
            tensors.setdefault(key, []).append((ops["offset"], pc))
    next_slot = function.register_file_size
    for (reg, shape, dtype_name), members in tensors.items():
        writers = sources.get(reg, [])
        if reg not in facts.storage or len(writers) != 1:
            continue
        size = facts.consti.get(_operands(code[writers[0]])["size"])
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
    plan.slots = next_slot - function.register_file_size
    return plan


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


# ---- decoding ----------------------------------------------------------------------------------


class KernelArgumentError(Exception):
    """A kernel argument failed a check; the loop turns it into a VMError."""


class HookError(Exception):
    """The instrument raised; the loop reports it as a VMError caused by the original."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"the instrument raised {type(original).__name__}: {original}")
        self.original = original


def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """``hook(*args)``, with any exception it raises wrapped in :class:`HookError`."""
    try:
        return hook(*args)
    except Exception as err:
        raise HookError(err) from err


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
            decoded.append(DECODERS[instruction.opcode](self, _operands(instruction)))
        if self.mode == "fast":
            _fuse(decoded)
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

        return (K_CALL, timed_handler)


DECODERS: dict[Opcode, Callable[[Decoder, dict[str, Any]], tuple]] = {}


def _decoder(opcode: Opcode) -> Callable:
    def register(fn: Callable[[Decoder, dict[str, Any]], tuple]) -> Callable:
        DECODERS[opcode] = fn
        return fn

    return register


def type_text(dtype: Any, shape: Sequence[int]) -> str:
    """``float32[1, 784]``: how profiles and kernel errors print a tensor's type."""
    return _type_text(dtype, shape if type(shape) is tuple else tuple(shape))


# A profiled run describes every argument of every call; formatting a numpy dtype takes
# about 10 us, which made a profiled LSTM run 30x slower than a plain one and its
# percentages sum to 6%, so each (dtype, shape) is formatted once.
@functools.lru_cache(maxsize=4096)
def _type_text(dtype: Any, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{', '.join(str(d) for d in shape)}]"


@_decoder(Opcode.Move)
def _move(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (K_MOVE, ops["src"], ops["dst"])


@_decoder(Opcode.Ret)
def _ret(d: Decoder, ops: dict[str, Any]) -> tuple:
    # A callee's register list ends with its caller's frame (see vm.interpreter.run), in
    # the slots after its own registers; hooked calls add the instrument's record.
    at = d.function.register_file_size + d.plan.slots
    if d.mode == "hooked":
        return (K_RET_HOOKED, ops["result"], at)
    return (K_RET, ops["result"], at, at + 1, at + 2, at + 3, at + 4)


@_decoder(Opcode.Invoke)
def _invoke(d: Decoder, ops: dict[str, Any]) -> tuple:
    callee = ops["func_index"]
    code = d.program.codes[callee]
    pad = d.program.pads[callee]
    args = tuple(ops["args"])
    if d.mode == "hooked":
        return (K_INVOKE_HOOKED, code, args, pad, ops["dst"], d.exe.functions[callee], d.hook)
    if d.mode != "count" and _returns_result(d.function.instructions, d.pc, ops["dst"]):
        # A tail call: the callee's frame replaces this one and returns to this frame's
        # caller (the slots after this function's registers, none in the entry frame).
        at = d.function.register_file_size + d.plan.slots
        return (K_INVOKE, code, args, pad, None, _gather(args), at)
    return (K_INVOKE, code, args, pad, ops["dst"], _gather(args))


def _returns_result(code: Sequence[Instruction], pc: int, dst: int) -> bool:
    """Whether the instructions after ``pc`` only return register ``dst`` (``ret dst``, or
    ``move x dst; ret x``): then the call at ``pc`` is a tail call. A loop written as a
    recursive function runs in one frame, so its memory does not grow with the number of
    steps (each frame holds the storage of its step's tensors)."""
    following = [(i.opcode, _operands(i)) for i in code[pc + 1 : pc + 3]]
    if not following:
        return False
    opcode, ops = following[0]
    if opcode is Opcode.Ret:
        return ops["result"] == dst
    if opcode is not Opcode.Move or ops["src"] != dst or len(following) < 2:
        return False
    last, last_ops = following[1]
    return last is Opcode.Ret and last_ops["result"] == ops["dst"]


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
        return (K_INVOKE_CLOSURE_HOOKED, ops["closure"], args, ops["dst"], d.hook)
    return (K_INVOKE_CLOSURE, ops["closure"], args, ops["dst"])


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
            return (K_PACKED3, entry, *regs)
        if len(regs) == 2:
            return (K_PACKED2, entry, *regs)
        if len(regs) > 3:
            return (K_PACKEDN, entry, itemgetter(*regs), regs)
    handler = _kernel_handler(
        entry, regs, rank_checks, half_checks, write_checks, first_output, name
    )
    if d.mode == "hooked":
        return (K_CALL, _hooked_kernel(handler, kernel, name, regs, d.hook))
    if d.mode == "profile":
        return (K_CALL, _profiled_kernel(handler, name, regs, d.recorder))
    return (K_CALL, handler)


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
        return (K_ALLOC, slot, None, None, index, dst)  # view[index] of its group
    if d.mode != "profile" and proven:
        return (K_ALLOC, storage, shape, dtype, offset, dst)
    ndarray = _tensor

    def alloc(regs: list) -> None:
        buffer = regs[storage]
        if not proven:
            _check_storage(buffer, storage)
        regs[dst] = ndarray(shape, dtype, buffer, offset)

    if d.mode == "profile":
        text = type_text(dtype, shape)
        return d.timed("VM::AllocTensor", alloc, lambda regs: text)
    return (K_CALL, alloc)


def _check_storage(buffer: Any, reg: int) -> None:
    if (
        type(buffer) is not _ndarray
        or buffer.dtype != _UINT8
        or buffer.ndim != 1
        or not buffer.flags.writeable
    ):
        raise KernelArgumentError(
            f"register ${reg} does not hold a storage buffer from alloc_storage "
            f"(it holds {_value_text(buffer)})"
        )


def _value_text(value: Any) -> str:
    if isinstance(value, np.ndarray):
        flag = "" if value.flags.writeable else "read-only "
        return f"a {flag}tensor {type_text(value.dtype, value.shape)}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} fields"
    if isinstance(value, ADT):
        return f"an ADT value ({value.constructor or f'tag {value.tag}'}, {len(value)} fields)"
    if isinstance(value, Closure):
        return "a closure"
    return "nothing" if value is None else type(value).__name__


def _shape_from(value: Any, what: str) -> tuple[int, ...]:
    if type(value) not in _TENSOR_TYPES or value.dtype.kind not in "iu" or value.ndim > 1:
        raise KernelArgumentError(
            f"the {what} register must hold a 1-D integer tensor, it holds {_value_text(value)}"
        )
    return tuple(value.tolist()) if value.ndim == 1 else ()


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
        regs[dst] = ndarray(_shape_from(regs[shape_reg], "shape"), dtype, buffer, offset)

    if d.mode == "profile":
        return d.timed("VM::AllocTensorReg", alloc, lambda regs: type_text(dtype, regs[dst].shape))
    return (K_CALL, alloc)


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
    return (K_CALL, alloc)


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
    return (K_CALL, alloc)


@_decoder(Opcode.GetField)
def _get_field(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (K_GET_FIELD, ops["object"], ops["index"], ops["dst"])


@_decoder(Opcode.If)
def _if(d: Decoder, ops: dict[str, Any]) -> tuple:
    target = ops["target"]
    if target in d.facts.consti:
        value = d.facts.consti[target]
        return (K_IF_CONST, ops["test"], value, ops["true_offset"], ops["false_offset"], target)
    return (K_IF, ops["test"], target, ops["true_offset"], ops["false_offset"])


@_decoder(Opcode.LoadConst)
def _load_const(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (K_SET, d.constants[ops["const_index"]], ops["dst"])


@_decoder(Opcode.Goto)
def _goto(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (K_GOTO, ops["offset"])


@_decoder(Opcode.GetTag)
def _get_tag(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (K_GET_TAG, ops["object"], ops["dst"])


@_decoder(Opcode.LoadConsti)
def _load_consti(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (K_SET, d.consti(ops["value"]), ops["dst"])


@_decoder(Opcode.Fatal)
def _fatal(d: Decoder, ops: dict[str, Any]) -> tuple:
    return (K_FATAL,)


@_decoder(Opcode.AllocStorage)
def _alloc_storage(d: Decoder, ops: dict[str, Any]) -> tuple:
    size, dst = ops["size"], ops["dst"]
    empty = _empty
    uint8 = _UINT8
    known = d.facts.consti.get(size)

    # numpy's allocator aligns buffers to 16 bytes, which covers every element type a
    # kernel reads; larger requested alignments are performance hints only.
    groups = [
        (g.slot, g.shape, g.dtype, g.base, g.strides) for g in d.plan.at_storage.get(d.pc, ())
    ]
    ndarray = _tensor
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
            regs[dst] = empty(regs[size].item(), uint8)

    if d.mode == "profile":
        return d.timed("VM::AllocStorage", alloc, lambda regs: f"uint8[{regs[dst].size}]")
    return (K_CALL, alloc)


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
    return (K_CALL, shape_of)


@_decoder(Opcode.ReshapeTensor)
def _reshape_tensor(d: Decoder, ops: dict[str, Any]) -> tuple:
    tensor, newshape, dst = ops["tensor"], ops["newshape"], ops["dst"]

    def reshape(regs: list) -> None:
        source = regs[tensor]
        if type(source) not in _TENSOR_TYPES:
            raise KernelArgumentError(
                f"reshape_tensor needs a tensor in ${tensor}, it holds {_value_text(source)}"
            )
        shape = _shape_from(regs[newshape], "new shape")
        if any(dim < 0 for dim in shape):
            raise KernelArgumentError(f"reshape_tensor: the new shape {list(shape)} is negative")
        # Registers hold C-contiguous tensors, so this is always a view, never a copy.
        regs[dst] = source.reshape(shape)

    if d.mode == "profile":
        return d.timed(
            "VM::ReshapeTensor", reshape, lambda regs: type_text(regs[dst].dtype, regs[dst].shape)
        )
    return (K_CALL, reshape)


@_decoder(Opcode.KillRegister)
def _kill_register(d: Decoder, ops: dict[str, Any]) -> tuple:
    reg = ops["reg"]
    views = d.plan.views_of.get(reg)
    if not views:
        return (K_SET, None, reg)
    cleared = (reg, *views)

    def kill_storage(regs: list) -> None:
        for r in cleared:
            regs[r] = None

    return (K_CALL, kill_storage)


missing = set(OPCODES) - set(DECODERS)
assert not missing, f"opcodes without a decoder: {sorted(op.name for op in missing)}"


# ---- fusion --------------------------------------------------------------------------------


def _fuse(decoded: list[tuple]) -> None:
    """Replace common instruction sequences by one tuple that does their work (fast mode).

    - ``alloc_tensor`` then the kernel call that fills it (``K_ALLOC_PACKED*``);
    - ``get_tag``, ``load_consti``, ``if`` comparing the two, which is how a
      constructor pattern is tested (``K_MATCH_TAG``; it still writes both registers).

    Only the first tuple of a sequence is replaced, so jumps into the middle still work.
    """
    for pc in range(len(decoded) - 1):
        first, second = decoded[pc], decoded[pc + 1]
        if first[0] == K_ALLOC:
            dst = first[5]
            if second[0] == K_PACKED3 and second[4] == dst:
                decoded[pc] = (K_ALLOC_PACKED2, *first[1:], second[1], second[2], second[3])
            elif second[0] == K_PACKED2 and second[3] == dst:
                decoded[pc] = (K_ALLOC_PACKED1, *first[1:], second[1], second[2])
            elif second[0] == K_PACKEDN and dst in second[3]:
                decoded[pc] = (K_ALLOC_PACKEDN, *first[1:], second[1], second[2])
        elif first[0] == K_GET_TAG and second[0] == K_SET and pc + 2 < len(decoded):
            test = decoded[pc + 2]
            _, obj, tag_dst = first
            _, const, const_dst = second
            if (
                test[0] in (K_IF, K_IF_CONST)
                and tag_dst != const_dst
                and type(const) is np.ndarray
                and const.dtype == _INT64
                and {test[1], test[2] if test[0] == K_IF else test[5]} == {tag_dst, const_dst}
            ):
                # The if's offsets are relative to itself, two instructions further on.
                decoded[pc] = (
                    K_MATCH_TAG,
                    obj,
                    tag_dst,
                    const_dst,
                    const,
                    int(const),
                    2 + test[3],
                    2 + test[4],
                )
    _chain_kernel_runs(decoded)


_PAIRS = (K_ALLOC_PACKED1, K_ALLOC_PACKED2, K_ALLOC_PACKEDN)


def _chain_kernel_runs(decoded: list[tuple]) -> None:
    """Put a ``K_KERNEL_RUN`` before each run of two or more back-to-back fused kernel pairs.

    The run's steps are the pairs from there on (at pcs ``pc, pc + 2, ...``); the
    fused tuples stay in place for jumps into the run and for error reporting.
    """
    pc = 0
    while pc < len(decoded):
        steps = []
        at = pc
        while at < len(decoded) and decoded[at][0] in _PAIRS:
            ins = decoded[at]
            if ins[0] == K_ALLOC_PACKEDN:
                steps.append((*ins[1:7], None, ins[7]))  # a None: b gathers every array
            else:
                steps.append((*ins[1:8], ins[8] if ins[0] == K_ALLOC_PACKED2 else None))
            at += 2
        if len(steps) >= 2:
            decoded[pc] = (K_KERNEL_RUN, tuple(steps), decoded[pc])
            pc = at
        else:
            pc += 1


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
        if kind in (K_IF, K_IF_CONST):
            ins = (*ins[:3], 2 * ins[3] - 1, 2 * ins[4] - 1, *ins[5:])
        elif kind == K_GOTO:
            ins = (K_GOTO, 2 * ins[1] - 1)
        result += [(K_CALL, tick), ins]
    return result


# ---- errors --------------------------------------------------------------------------------


def failing_pc(code: list[tuple], pc: int, regs: list) -> int:
    """The pc of the instruction that failed when a fused tuple at ``pc`` raised.

    Creating the view is free of side effects, so it is redone here: if it fails, the
    ``alloc_tensor`` failed, otherwise the kernel call after it did.
    """
    ins = code[pc]
    if ins[0] == K_KERNEL_RUN:
        ins = ins[2]  # the fused pair this run replaced
    if ins[0] not in _PAIRS:
        return pc
    try:
        if ins[2] is None:
            regs[ins[1]][ins[4]]
        else:
            _ndarray(ins[2], ins[3], regs[ins[1]], ins[4])
    except Exception:
        return pc
    return pc + 1


def explain(program: Program, findex: int, pc: int, regs: list, error: BaseException) -> str:
    """Why the instruction at ``pc`` failed, in words (for the VMError message)."""
    function = program.functions[findex]
    instruction = function.instructions[pc]
    ops = _operands(instruction)
    opcode = instruction.opcode
    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, (KernelArgumentError, HookError)):
        detail = str(error)
    elif opcode is Opcode.InvokePacked:
        detail = _explain_kernel(program, ops, regs, error)
    elif opcode in (Opcode.AllocTensor, Opcode.AllocTensorReg):
        buffer = regs[ops["storage"]]
        if isinstance(buffer, np.ndarray) and "too small" in str(error):
            if opcode is Opcode.AllocTensor:
                shape = tuple(ops["shape"])
            else:
                shape = _shape_from(regs[ops["shape_reg"]], "shape")
            dtype = np.dtype(ops["dtype"])
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            detail = (
                f"a {type_text(dtype, shape)} tensor ({size} bytes) at byte offset "
                f"{ops['offset']} does not fit in a storage of {buffer.nbytes} bytes"
            )
    elif opcode is Opcode.AllocStorage:
        size = regs[ops["size"]]
        if isinstance(size, np.ndarray) and size.size == 1:
            detail = f"cannot allocate a storage of {size.item()} bytes ({detail})"
        else:
            detail = f"the size register ${ops['size']} holds {_value_text(size)}, not a scalar"
    elif opcode in _NEEDS:
        reg = ops[_NEEDS[opcode][0]]
        value = regs[reg]
        needed = _NEEDS[opcode][1]
        if opcode is Opcode.If:
            bad = [
                f"${r} holds {_value_text(regs[r])}"
                for r in (ops["test"], ops["target"])
                if not (isinstance(regs[r], np.ndarray) and regs[r].size == 1)
            ]
            detail = f"if compares two scalars, but {' and '.join(bad) or detail}"
        elif not isinstance(value, needed):
            kinds = " or ".join(_KIND_WORDS[k] for k in needed)
            detail = f"${reg} holds {_value_text(value)}, not {kinds}"
        elif opcode is Opcode.GetTag and isinstance(error, KeyError):
            detail = (
                f"${reg} holds an ADT value with tag {value.tag}, which is not a constructor "
                "of this executable"
            )
        elif opcode is Opcode.GetField:
            fields = value if isinstance(value, tuple) else value.fields
            detail = f"${reg} holds {_value_text(value)}, which has no field {ops['index']}"
            if len(fields) > ops["index"]:
                detail = f"{type(error).__name__}: {error}"
    return detail


# Operand each opcode reads a structured value from, and the kinds it accepts there.
_NEEDS: dict[Opcode, tuple[str, tuple[type, ...]]] = {
    Opcode.GetField: ("object", (tuple, ADT)),
    Opcode.GetTag: ("object", (tuple, ADT)),
    Opcode.InvokeClosure: ("closure", (Closure,)),
    Opcode.If: ("test", (np.ndarray,)),
}
_KIND_WORDS = {tuple: "a tuple", ADT: "an ADT", Closure: "a closure", np.ndarray: "a tensor"}


def _explain_kernel(program: Program, ops: dict[str, Any], regs: list, error: BaseException) -> str:
    prim = ops["prim_index"]
    name = program.primitive_names[prim]
    description = program.exe.primitives[prim].description
    arg_types = list(description["inputs"]) + list(description["outputs"])
    for i, (reg, (dtype, ndim)) in enumerate(zip(ops["args"], arg_types)):
        value = regs[reg]
        if not isinstance(value, np.ndarray) or str(value.dtype) != dtype or value.ndim != ndim:
            return (
                f"argument {i} (${reg}) of kernel {name} is {_value_text(value)}, "
                f"but the kernel takes a {dtype} tensor of rank {ndim}"
            )
    return f"kernel {name} raised {type(error).__name__}: {error}"


def vm_error(program: Program, code: list, pc: int, regs: list, error: BaseException) -> VMError:
    """The VMError for ``error`` raised by the instruction at ``pc`` of ``code``."""
    findex = program.function_of(code)
    pc = program.source_pc(failing_pc(code, pc, regs))
    name = program.functions[findex].name
    try:
        detail = explain(program, findex, pc, regs, error)
    except Exception:  # the explanation must never hide the original failure
        detail = f"{type(error).__name__}: {error}"
    text = format_instruction(program, findex, pc)
    result = VMError(f"in function {name} at pc {pc} ({text}): {detail}")
    result.function = name
    result.pc = pc
    return result

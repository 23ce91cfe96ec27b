"""The virtual machine: a flat dispatch loop over pre-decoded instructions, and its API.

Runtime layer (``vm``); imports numpy and the runtime modules of ``vm`` (numba only
through :mod:`vm.kernels`, when an executable with kernels is first run).

:func:`run` is the interpreter: one ``while`` loop that finds the kind of each
decoded tuple (:mod:`vm.decode` makes them) with a small decision tree, hot kinds
first, and reads the kinds by their names in the table :class:`vm.decoded.Kind`.
Calls never use Python's stack: a callee's register list ends with its caller's
frame (code, return pc, registers, result register, depth), so frames form a chain that
costs no allocation beyond the register list, and a call depth counter enforces
``max_call_depth``. A call whose result is returned at once (a loop written as a
recursive function) is a tail call: the callee's frame replaces the caller's and takes
over its return slots, so such a loop runs in constant memory (it still counts towards
``max_call_depth``, and an instrument or the instruction counter sees every call and
return, so those modes make ordinary calls). Any exception raised by an instruction
becomes a :class:`vm.VMError` naming the function, the pc and the instruction. Frames are local
to one run, so after an error the machine is ready for the next call.

:class:`VirtualMachine` follows TVM's Relay VM API (``invoke``, ``run``,
``set_input``, ``set_one_input``, ``invoke_stateful``, ``get_outputs``,
``get_num_outputs``, ``get_input_index``, ``benchmark``) plus the Relax
VM's additions (``vm[name]``, ``invoke_closure``, ``save_function``,
``set_instrument``, ``time_evaluator``, ``profile``).

Decisions where TVM is loose
----------------------------
- Kernels are loaded when the machine is created (all of them), so the first
  ``invoke`` costs no compilation and a kernel that cannot be built fails early.
  Kernels come from numba's disk cache after the first build, and a second machine on
  the same executable reuses the loaded ones (figures in benchmarks/NOTES.md).
- Arguments are checked against the parameter types (Relay does not check).
- ``invoke`` with arguments also records them as the function's inputs, as TVM
  does, so a later ``invoke(name)`` with no arguments reuses them.
- Results are caller-owned: tensors the VM allocated are fresh for every call, and
  read-only values (constants, the VM's shared scalars) come back as writable copies.
  A function that returns its argument returns the caller's own array.
- Instruments see the calls a program makes (``invoke``, ``invoke_closure``
  instructions and kernels), not the entry call itself.
- A function of straight-line code with static shapes (most models' ``main``) runs from
  its second call as one generated function (:mod:`vm.straight`) in the thread the
  stateful API belongs to, on an arena the machine keeps; everything else, and every
  call while an instrument is set, runs in the loop, which also answers any call the
  generated function raised on (so errors read the same either way).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vm.aot import kernel_examples
from vm.args import Signature, describe_value
from vm.decode import Decoder
from vm.decoded import Kind, Program, with_kind_numbers
from vm.device import Device, check_devices
from vm.errors import UnknownFunctionError, VMError
from vm.executable import Executable
from vm.explain import HookError, call_hook, format_instruction, vm_error
from vm.instrument import VMInstrumentReturnKind
from vm.ndarray import NDArray, caller_owned
from vm.objects import ADT, Closure
from vm.primitives import interruption_of, load_kernels
from vm.profiling import Recorder, Report
from vm.straight import build as build_tier
from vm.timing import check_settings, measure, preprocessor
from vm.value_types import TypeContext, check_closure_call

#: Frames a run may stack before it fails with VMError: 2.5 times the 100,000-deep
#: recursions the VM must support. A frame costs about 250 bytes plus its registers'
#: values, so a runaway recursion stops after roughly 60 MB and a third of a second
#: instead of exhausting memory; deeper programs raise it with ``max_call_depth``.
DEFAULT_MAX_CALL_DEPTH = 250_000

_ndarray = np.ndarray
_SKIP_RUN = VMInstrumentReturnKind.SKIP_RUN


# ---- the interpreter loop ------------------------------------------------------------------


@with_kind_numbers
def run(program: Program, code: list[tuple], regs: list[Any]) -> Any:
    """Run decoded ``code`` with register file ``regs`` (parameters first) to its ``ret``.

    Raises
    ------
    vm.VMError
        If an instruction fails, a match is not exhaustive (``fatal``) or the call
        depth limit is reached.
    """
    # Everything the loop touches is a local: no attribute or global lookups per
    # instruction (the kinds are numbers in the compiled loop, see with_kind_numbers).
    # Kinds are found by a small decision tree over their groups (see vm.decoded.Kind),
    # because each failed test of a long if/elif chain costs as much as a simple
    # instruction.
    codes, arities, pads, tags, limit = program.loop_locals
    ndarray = NDArray  # tensors are made as the type results are handed back in
    tuple_type = tuple
    skip_run = _SKIP_RUN
    depth = 0  # calls in flight above the entry frame, tail calls included
    pc = 0
    try:
        while True:
            ins = code[pc]
            op = ins[0]
            if op <= Kind.ALLOC:
                if op == Kind.KERNEL_RUN:  # alloc_tensor + invoke_packed pairs
                    for storage, shape, dtype, offset, dst, entry, a, b in ins[1]:
                        if shape is None:  # a tensor of a group: its view's index
                            out = regs[storage][offset]
                        else:
                            out = ndarray(shape, dtype, regs[storage], offset)
                        regs[dst] = out
                        if b is None:
                            entry(regs[a], out)
                        elif a is None:  # b gathers every array
                            entry(*b(regs))
                        else:
                            entry(regs[a], regs[b], out)
                        pc += 2  # kept exact, so an error names the failing pair
                elif op == Kind.PACKED2:
                    ins[1](regs[ins[2]], regs[ins[3]])
                    pc += 1
                elif op == Kind.PACKED3:
                    ins[1](regs[ins[2]], regs[ins[3]], regs[ins[4]])
                    pc += 1
                elif op == Kind.PACKEDN:
                    ins[1](*ins[2](regs))
                    pc += 1
                else:  # Kind.ALLOC
                    if ins[2] is None:
                        regs[ins[5]] = regs[ins[1]][ins[4]]
                    else:
                        regs[ins[5]] = ndarray(ins[2], ins[3], regs[ins[1]], ins[4])
                    pc += 1
            elif op <= Kind.GET_FIELD:
                if op == Kind.SET:
                    regs[ins[2]] = ins[1]
                    pc += 1
                elif op == Kind.MATCH_TAG:  # get_tag, load_consti, if
                    value = regs[ins[1]]
                    tag = 0 if type(value) is tuple_type else value.tag
                    regs[ins[2]] = tags[tag]
                    regs[ins[3]] = ins[4]
                    if tag == ins[5]:
                        pc += ins[6]
                    else:
                        pc += ins[7]
                elif op == Kind.IF_CONST:
                    if regs[ins[1]].item() == ins[2]:
                        pc += ins[3]
                    else:
                        pc += ins[4]
                else:  # Kind.GET_FIELD
                    value = regs[ins[1]]
                    if type(value) is tuple_type:
                        regs[ins[3]] = value[ins[2]]
                    else:
                        regs[ins[3]] = value.fields[ins[2]]
                    pc += 1
            elif op <= Kind.GOTO:
                if op == Kind.INVOKE:
                    if depth >= limit:
                        raise _depth_error(program, code, pc, limit)
                    if ins[4] is None:  # a tail call: the callee takes over this frame
                        _, callee, args, pad, _, gather, at = ins
                        # It still counts towards the limit (so a runaway loop stops as
                        # it would without tail calls), and the frame's slots restore
                        # the caller's depth on return however many tail calls ran.
                        depth += 1
                        if len(args) == 1:
                            regs = [regs[args[0]], *pad, *regs[at:]]
                        else:
                            regs = [*gather(regs), *pad, *regs[at:]]
                        code = callee
                        pc = 0
                        continue
                    _, callee, args, pad, dst, gather = ins
                    # The callee's registers end with the caller's frame: code, return
                    # pc, registers, the register that receives the result and depth.
                    if len(args) == 1:
                        regs = [regs[args[0]], *pad, code, pc + 1, regs, dst, depth]
                    else:
                        regs = [*gather(regs), *pad, code, pc + 1, regs, dst, depth]
                    depth += 1
                    code = callee
                    pc = 0
                elif op == Kind.RET:
                    _, result, at_code, at_pc, at_regs, at_dst, at_depth = ins
                    value = regs[result]
                    if len(regs) == at_code:  # the entry frame has no caller slots
                        return value
                    code = regs[at_code]
                    pc = regs[at_pc]
                    dst = regs[at_dst]
                    depth = regs[at_depth]
                    regs = regs[at_regs]
                    regs[dst] = value
                elif op == Kind.MOVE:
                    regs[ins[2]] = regs[ins[1]]
                    pc += 1
                else:  # Kind.GOTO
                    pc += ins[1]
            elif op == Kind.CALL:
                ins[1](regs)
                pc += 1
            elif op == Kind.GET_TAG:
                value = regs[ins[1]]
                regs[ins[2]] = tags[0 if type(value) is tuple_type else value.tag]
                pc += 1
            elif op == Kind.IF:
                if regs[ins[1]].item() == regs[ins[2]].item():
                    pc += ins[3]
                else:
                    pc += ins[4]
            elif op == Kind.INVOKE_CLOSURE:
                closure = regs[ins[1]]
                args = ins[2]
                index = closure.func_index
                captured = closure.captured
                if len(captured) + len(args) != arities[index]:
                    raise _closure_arity_error(program, code, pc, closure, len(args))
                if depth >= limit:
                    raise _depth_error(program, code, pc, limit)
                if ins[3] is None:  # a tail call, as for INVOKE
                    regs = [*captured, *[regs[r] for r in args], *pads[index], *regs[ins[4] :]]
                else:
                    regs = [
                        *captured, *[regs[r] for r in args], *pads[index], code, pc + 1, regs,
                        ins[3], depth,
                    ]  # fmt: skip
                depth += 1
                code = codes[index]
                pc = 0
            elif op == Kind.FATAL:
                raise _fatal_error(program, code, pc)
            # The instrumented kinds: only a machine with an instrument decodes to them.
            elif op == Kind.INVOKE_HOOKED:
                _, callee, args, pad, dst, function, hook = ins
                values = [regs[r] for r in args]
                if call_hook(hook, function, function.name, True, None, *values) == skip_run:
                    regs[dst] = None
                    pc += 1
                    continue
                if depth >= limit:
                    raise _depth_error(program, code, pc, limit)
                depth += 1
                regs = [*values, *pad, code, pc + 1, regs, dst, (hook, function, values)]
                code = callee
                pc = 0
            elif op == Kind.INVOKE_CLOSURE_HOOKED:
                _, closure_reg, args, dst, hook = ins
                closure = regs[closure_reg]
                index = closure.func_index
                values = [*closure.captured, *[regs[r] for r in args]]
                if len(values) != arities[index]:
                    raise _closure_arity_error(program, code, pc, closure, len(args))
                function = program.functions[index]
                if call_hook(hook, function, function.name, True, None, *values) == skip_run:
                    regs[dst] = None
                    pc += 1
                    continue
                if depth >= limit:
                    raise _depth_error(program, code, pc, limit)
                depth += 1
                regs = [*values, *pads[index], code, pc + 1, regs, dst, (hook, function, values)]
                code = codes[index]
                pc = 0
            elif op == Kind.RET_HOOKED:
                value = regs[ins[1]]
                if not depth:
                    return value
                depth -= 1
                code, pc, regs, dst, called = regs[ins[2] :]
                regs[dst] = value
                hook, function, values = called
                call_hook(hook, function, function.name, False, value, *values)
            else:  # pragma: no cover - the decoder emits only the kinds above
                raise AssertionError(f"unknown decoded kind {op}")
    except VMError:
        raise
    except HookError as error:
        raise vm_error(program, code, pc, regs, error) from error.original
    except Exception as error:
        interrupted = interruption_of(error)
        if interrupted is not None:
            raise interrupted from None
        # The cause stays reachable as __context__, but tracebacks show only our message.
        raise vm_error(program, code, pc, regs, error) from None


def _where(program: Program, code: list, pc: int) -> str:
    index = program.function_of(code)
    pc = program.source_pc(pc)
    text = format_instruction(program, index, pc)
    return f"function {program.functions[index].name} at pc {pc} ({text})"


def _located(program: Program, code: list, pc: int, message: str) -> VMError:
    error = VMError(message)
    error.function = program.functions[program.function_of(code)].name
    error.pc = program.source_pc(pc)
    return error


def _depth_error(program: Program, code: list, pc: int, limit: int) -> VMError:
    return _located(
        program,
        code,
        pc,
        f"call depth limit of {limit} frames exceeded in {_where(program, code, pc)}; "
        "the recursion does not terminate, or needs "
        "VirtualMachine(exe, max_call_depth=...) set higher",
    )


def _fatal_error(program: Program, code: list, pc: int) -> VMError:
    name = program.functions[program.function_of(code)].name
    where = f"function {name} at pc {program.source_pc(pc)}"
    return _located(program, code, pc, f"no match clause applied in {where} (fatal)")


def _closure_arity_error(
    program: Program, code: list, pc: int, closure: Closure, given: int
) -> VMError:
    function = program.functions[closure.func_index]
    return _located(
        program,
        code,
        pc,
        f"in {_where(program, code, pc)}: the closure of {function.name} captured "
        f"{len(closure.captured)} values and is called with {given} arguments, but "
        f"{function.name} takes {len(function.params)}",
    )


# ---- results -------------------------------------------------------------------------------


def export(value: Any) -> Any:
    """``value`` made caller-owned: read-only tensors inside it are replaced by copies, and
    every tensor is an :class:`vm.NDArray` (those the VM allocated already are; inputs and
    constants handed back are viewed as one)."""
    kind = type(value)
    if kind is NDArray or kind is _ndarray:
        return caller_owned(value)
    if not isinstance(value, (tuple, ADT, Closure)) or _all_exported(value):
        return value
    return _export_containers(value)


#: Containers the quick pass of :func:`export` visits before leaving the value to the
#: memoizing pass (which also bounds the work on heavily shared values).
_QUICK_VISITS = 1 << 22


def _all_exported(value: Any) -> bool:
    """Whether every tensor inside ``value`` is a writable NDArray (then it is returned as it
    is)."""
    adt, closure, tuple_, ndarray = ADT, Closure, tuple, NDArray
    stack = [value]
    pop, push = stack.pop, stack.append
    budget = _QUICK_VISITS
    while stack:
        budget -= 1
        if not budget:
            return False
        item = pop()
        kind = type(item)
        children = item.fields if kind is adt else item.captured if kind is closure else item
        for child in children:
            kind = type(child)
            if kind is ndarray:
                if not child.flags.writeable:
                    return False
            elif kind is tuple_ or kind is adt or kind is closure:
                push(child)
            elif kind is _ndarray:
                return False
    return True


def _export_containers(value: Any) -> Any:
    # Iterative post-order rebuild; containers are rebuilt only if something inside changed,
    # and shared sub-values stay shared.
    done: dict[int, Any] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, expanded = stack.pop()
        key = id(item)
        if key in done:
            continue
        children = _children(item)
        if not expanded:
            stack.append((item, True))
            stack.extend(
                (child, False)
                for child in children
                if isinstance(child, (tuple, ADT, Closure)) and id(child) not in done
            )
            continue
        new_children = []
        changed = False
        for child in children:
            kind = type(child)
            if kind is NDArray or kind is _ndarray:
                new = caller_owned(child)
            elif isinstance(child, (tuple, ADT, Closure)):
                new = done[id(child)]
            else:
                new = child
            changed = changed or new is not child
            new_children.append(new)
        if not changed:
            done[key] = item
        elif isinstance(item, ADT):
            done[key] = ADT(item.tag, new_children, item.constructor)
        elif isinstance(item, Closure):
            done[key] = Closure(item.func_index, new_children, item.name)
        else:
            done[key] = tuple(new_children)
    return done[id(value)]


def _children(item: Any) -> tuple:
    if isinstance(item, ADT):
        return item.fields
    if isinstance(item, Closure):
        return item.captured
    return item


# ---- the machine ---------------------------------------------------------------------------


class VirtualMachine:
    """Runs the functions of an :class:`vm.Executable`.

    Parameters
    ----------
    exe : vm.Executable
        The program. It is shared, never modified: many machines (in many threads)
        may run one executable; all mutable state belongs to the machine.

    Notes
    -----
    Threads: one VirtualMachine per thread, one Executable shared. The stateless call
    ``invoke(name, *args)`` (and ``vm[name](*args)``, ``invoke_closure``) takes no lock
    and may be shared between threads. The stateful API (``set_input``,
    ``invoke_stateful``, ``get_outputs``, ``invoke(name)`` with no arguments) keeps inputs
    and outputs in the machine, so it belongs to the first thread that uses it; another
    thread using it gets a ``RuntimeError`` instead of another thread's inputs or
    result. An ``invoke`` with arguments from another thread runs but does not record
    its arguments as inputs.
    device : vm.Device, list of vm.Device, or None
        Where to run; only ``vm.cpu()`` exists, so this is accepted for TVM
        compatibility and checked.
    memory_cfg : str, dict or None
        TVM's memory allocator choice, ``"naive"`` or ``"pooled"`` (or a dict of device
        to either). Accepted and checked for TVM compatibility; the storage plan is
        made by the compiler, so both mean the same here.
    profile : bool
        TVM's switch for a profiling machine; every machine has :meth:`profile`, so
        both values give the same machine.
    max_call_depth : int
        How many nested calls a run may make before it fails with :class:`vm.VMError`.

    Raises
    ------
    TypeError
        If ``exe`` is not an Executable, ``device`` is not a device or ``profile`` is
        not a bool.
    ValueError
        If ``memory_cfg`` names another allocator or ``max_call_depth`` is not a
        positive int.
    vm.VMError
        If one of the executable's kernels cannot be built.
    """

    def __init__(
        self,
        exe: Any,
        device: Any = None,
        memory_cfg: str | dict[Any, str] | None = None,
        profile: bool = False,
        *,
        max_call_depth: int = DEFAULT_MAX_CALL_DEPTH,
    ) -> None:

        if not isinstance(exe, Executable):
            raise TypeError(f"VirtualMachine needs a vm.Executable, got {describe_value(exe)}")
        check_devices(device, "VirtualMachine")
        _check_memory_cfg(memory_cfg)
        if not isinstance(profile, bool):
            raise TypeError(f"profile must be a bool, got {describe_value(profile)}")
        if (
            isinstance(max_call_depth, bool)
            or not isinstance(max_call_depth, int)
            or max_call_depth < 1
        ):
            raise ValueError(f"max_call_depth must be a positive int, got {max_call_depth!r}")
        self._exe = exe
        self._device = device
        self._max_call_depth = max_call_depth
        self._kernels = load_kernels(exe, lambda: kernel_examples(exe))
        self._types = TypeContext(exe.functions, exe.constructor_by_tag)
        self._index: dict[str, int] = {}
        for index, function in enumerate(exe.functions):
            self._index.setdefault(function.name, index)
        self._signatures = [Signature(f, self._types) for f in exe.functions]
        self._convert = [signature.convert_all for signature in self._signatures]
        self._fast = self._decode("fast")
        self._program = self._fast
        self._instrument: Callable[..., Any] | None = None
        self._inputs: dict[int, list[Any]] = {}
        self._outputs: Any = _NOTHING
        self._outputs_of: dict[int, Any] = {}
        self._partial_inputs: dict[int, list[Any]] = {}
        self._owner: int | None = None  # the thread the stateful API belongs to
        self._owner_lock = threading.Lock()
        self._saved: dict[str, Callable[[], Any]] = {}
        # The straight-line tier (vm.straight), by function index: the generated invoke
        # and call once built, in the lists in use (lists of None while an instrument is
        # set); the functions neither built nor refused yet.
        count = len(exe.functions)
        self._tier_built: tuple[list[Any], list[Any]] = ([None] * count, [None] * count)
        self._tier_invoke, self._tier_call = self._tier_built
        self._tier_pending: set[int] = set(range(count))

    def _decode(self, mode: str, **extra: Any) -> Program:
        return Decoder(
            self._exe, self._kernels, mode, max_depth=self._max_call_depth, **extra
        ).decode()

    # ---- lookups ----------------------------------------------------------------------------

    @property
    def executable(self) -> Any:
        """The executable this machine runs."""
        return self._exe

    @property
    def max_call_depth(self) -> int:
        """The call-depth limit of a run."""
        return self._max_call_depth

    def _function_index(self, func_name: Any) -> int:
        try:
            return self._index[func_name]
        except (KeyError, TypeError):
            raise UnknownFunctionError(func_name, self._exe.globals) from None

    def __getitem__(self, func_name: str) -> Callable[..., Any]:
        """A callable for a function (``machine["main"](x)``) or a saved function (no args)."""
        saved = self._saved.get(func_name) if isinstance(func_name, str) else None
        if saved is not None:
            return saved
        self._function_index(func_name)
        return functools.partial(self.invoke, func_name)

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        """The position of parameter ``input_name`` of ``func_name``, or -1 (as TVM)."""
        params = self._exe.functions[self._function_index(func_name)].params
        return params.index(input_name) if input_name in params else -1

    # ---- calling ----------------------------------------------------------------------------

    def _arguments(self, index: int, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """Converted arguments of function ``index``; with none given, the inputs set."""
        signature = self._signatures[index]
        if kwargs:
            args = signature.bind(args, kwargs)
        if args or not signature.arity:
            values = signature.convert_all(args)
            if args and self._owns_state():
                self._inputs[index] = values
            return values
        self._claim_state("invoke with no arguments")
        stored = self._inputs.get(index)
        if stored is None:
            if index in self._partial_inputs:
                raise TypeError(self._no_inputs_message(index, "invoke"))
            error = signature.count_error(0)
            raise TypeError(f"{error}, and no inputs were set with set_input")
        return stored

    def _owns_state(self) -> bool:
        """Whether this thread may use the stateful API (claiming it if nobody has)."""
        owner = self._owner
        if owner is None:
            with self._owner_lock:
                if self._owner is None:
                    self._owner = _get_ident()
                owner = self._owner
        return owner == _get_ident()

    def _claim_state(self, what: str) -> None:
        """Raise unless this thread may use the stateful API (see the class notes)."""
        if not self._owns_state():
            raise RuntimeError(
                f"{what}: this VirtualMachine's stateful API (set_input, invoke_stateful, "
                f"get_outputs, invoke with no arguments) belongs to thread {self._owner}, and "
                f"this is thread {_get_ident()}; the rule is one VirtualMachine per thread, one "
                "Executable shared: create VirtualMachine(exe) in this thread (invoke(name, "
                "*args) with arguments may be shared between threads)"
            )

    def _call(self, index: int, values: list[Any]) -> Any:
        """Run function ``index`` on checked ``values``: by its straight-line tier when it
        has one (see :meth:`_promote`), else in the loop. The result is not exported."""
        tier = self._tier_call[index]
        if tier is None and index in self._tier_pending:
            tier = self._promote(index)[1]
        if tier is not None and self._owner == _get_ident():
            try:
                return tier(*values)
            except Exception as error:
                _rerun_unless_interrupted(error)
        program = self._program
        return run(program, program.codes[index], [*values, *program.pads[index]])

    def _promote(self, index: int) -> tuple[Any, Any]:
        """Build the straight-line tier of function ``index`` if this thread owns the
        machine's state (a first call claims it, so this is the second call, or the first
        after ``set_input``) and no instrument is set.

        Only the owning thread builds (and so changes ``_tier_pending``). Returns the
        tier's ``(invoke, call)``, or ``(None, None)``.
        """
        if self._owner != _get_ident() or self._instrument is not None:
            return None, None
        try:
            tier = build_tier(self._exe, index, self._kernels, self._inputs)
        except OSError:
            tier = None  # the kernel cache cannot hold the generated code: interpret
        # Only now: a build cut short (Ctrl-C) is tried again on the next call.
        self._tier_pending.discard(index)
        if tier is None:
            return None, None
        self._tier_built[0][index], self._tier_built[1][index] = tier
        return tier

    def invoke(self, func_name: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``func_name`` and return its result (caller-owned).

        With no arguments, the inputs set by :meth:`set_input` (or the last
        ``invoke`` with arguments) are used.

        Raises
        ------
        vm.errors.UnknownFunctionError
            (a ``KeyError`` and ``ValueError``) for an unknown function name.
        TypeError, ValueError
            If the arguments do not match the parameters (the message names them).
        vm.VMError
            If the program fails while running.
        """
        try:
            index = self._index[func_name]
        except (KeyError, TypeError):
            raise UnknownFunctionError(func_name, self._exe.globals) from None
        if not args or kwargs:
            return export(self._call(index, self._arguments(index, args, kwargs)))
        # Positional arguments, the common call, go straight to the tier's invoke, which
        # checks and records them itself.
        tier = self._tier_invoke[index]
        if tier is None and index in self._tier_pending:
            tier = self._promote(index)[0]
        if tier is not None and self._owner == _get_ident():
            try:
                return tier(*args)
            except Exception as error:
                _rerun_unless_interrupted(error)
        values = self._convert[index](args)
        # Record the inputs (TVM's rule) only for the thread the state belongs to.
        if self._owner == _get_ident() or self._owns_state():
            self._inputs[index] = values
        program = self._program
        result = run(program, program.codes[index], [*values, *program.pads[index]])
        return result if program.fresh_results[index] else export(result)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """``invoke("main", *args, **kwargs)``."""
        return self.invoke("main", *args, **kwargs)

    def invoke_closure(self, closure: Closure, *args: Any) -> Any:
        """Call a function value (a :class:`vm.Closure`) with ``args``.

        The closure's captured values come first, then ``args``; both are checked
        against the function's parameter types (sharing its type variables), so a
        caller-made closure cannot pass what the function's code does not expect.
        """
        index, values = check_closure_call(self._types, closure, args, "invoke_closure")
        return export(self._call(index, values))

    # ---- stateful use ------------------------------------------------------------------------

    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Convert and keep the inputs of ``func_name`` for :meth:`invoke_stateful` and
        argument-less :meth:`invoke`.

        Keyword arguments fill the parameters they name; positional ones fill the
        remaining slots in order.
        """
        index = self._function_index(func_name)
        self._claim_state("set_input")
        signature = self._signatures[index]
        bound = signature.bind(args, kwargs) if kwargs else args
        self._inputs[index] = signature.convert_all(bound)
        self._partial_inputs.pop(index, None)

    def set_one_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Set one input of ``func_name`` (TVM's ``set_one_input``): ``(func_name, index or
        name, value)`` or ``(func_name, name=value)``; the other inputs keep their values.

        When every parameter has a value, :meth:`invoke_stateful` and argument-less
        :meth:`invoke` use them.

        Raises
        ------
        TypeError, ValueError
            If the value does not fit the parameter (naming it).
        IndexError, KeyError
            If there is no such parameter.
        """
        if len(args) == 2 and not kwargs:
            index_or_name, value = args
        elif len(kwargs) == 1 and not args:
            ((index_or_name, value),) = kwargs.items()
        else:
            raise TypeError(
                "set_one_input takes one input: set_one_input(func_name, index_or_name, value) "
                f"or set_one_input(func_name, name=value); got {len(args)} positional and "
                f"{len(kwargs)} keyword arguments"
            )
        self._claim_state("set_one_input")
        index = self._function_index(func_name)
        function = self._exe.functions[index]
        params = function.params
        if isinstance(index_or_name, str):
            if index_or_name not in params:
                raise KeyError(
                    f"{function.name}() has no parameter {index_or_name!r}; its parameters "
                    f"are {', '.join(params) or 'none'}"
                )
            position = params.index(index_or_name)
        elif (
            isinstance(index_or_name, int)
            and not isinstance(index_or_name, bool)
            and 0 <= index_or_name < len(params)
        ):
            position = index_or_name
        else:
            raise IndexError(
                f"input {index_or_name!r} of {function.name}() is neither a parameter name "
                f"nor an index below {len(params)}"
            )
        spec = function.param_types[position]
        where = f"{function.name}(): argument {position} ({params[position]!r})"
        # One value alone: its type variables are its own (set_input checks them together).
        (converted,) = self._types.check([(value, spec, where)])
        values = self._partial_inputs.get(index)
        if values is None:
            current = self._inputs.get(index)
            values = list(current) if current is not None else [_NOTHING] * len(params)
        values[position] = converted
        if any(v is _NOTHING for v in values):
            self._partial_inputs[index] = values
            self._inputs.pop(index, None)
        else:
            self._partial_inputs.pop(index, None)
            self._inputs[index] = values

    def invoke_stateful(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Run ``func_name`` on the inputs set; keep the result for :meth:`get_outputs`.

        Arguments, if given, are set as inputs first (as TVM's Relay VM does).

        Raises
        ------
        ValueError
            If no inputs were set for a function that has parameters.
        """
        index = self._function_index(func_name)
        self._claim_state("invoke_stateful")
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        values = self._inputs.get(index)
        if values is None:
            if self._signatures[index].arity:
                raise ValueError(self._no_inputs_message(index, "invoke_stateful"))
            values = []
        self._outputs = self._outputs_of[index] = self._call(index, values)

    def _no_inputs_message(self, index: int, caller: str) -> str:
        name = self._exe.functions[index].name
        partial = self._partial_inputs.get(index)
        if partial is None:
            return f"no inputs set for {name}: call set_input({name!r}, ...) before {caller}"
        params = self._exe.functions[index].params
        missing = ", ".join(p for p, v in zip(params, partial) if v is _NOTHING)
        return f"inputs of {name} not set: {missing} (set them with set_one_input or set_input)"

    def get_outputs(self, func_name: str | None = None) -> list[Any]:
        """The result of the last :meth:`invoke_stateful` (of ``func_name`` if given): a
        tuple's fields, or ``[result]``.

        Raises
        ------
        ValueError
            If :meth:`invoke_stateful` has not run yet (for that function).
        """
        self._claim_state("get_outputs")
        if func_name is None:
            result = self._outputs
        else:
            result = self._outputs_of.get(self._function_index(func_name), _NOTHING)
        if result is _NOTHING:
            target = "func_name" if func_name is None else repr(func_name)
            raise ValueError(f"no outputs saved: call invoke_stateful({target}) before get_outputs")
        if type(result) is tuple:
            return [export(field) for field in result]
        return [export(result)]

    def get_num_outputs(self, func_name: str | None = None) -> int:
        """How many values :meth:`get_outputs` returns (for ``func_name`` if given).

        Raises
        ------
        ValueError
            If :meth:`invoke_stateful` has not run yet (for that function).
        """
        if func_name is None:
            result = self._outputs
        else:
            result = self._outputs_of.get(self._function_index(func_name), _NOTHING)
        if result is _NOTHING:
            target = "func_name" if func_name is None else repr(func_name)
            raise ValueError(
                f"no outputs saved: call invoke_stateful({target}) before get_num_outputs"
            )
        return len(result) if type(result) is tuple else 1

    def save_function(
        self,
        func_name: str,
        saved_name: str,
        *args: Any,
        include_return: bool = True,
        **kwargs: Any,
    ) -> None:
        """Bind (and convert now) arguments of ``func_name`` under ``saved_name``.

        ``machine[saved_name]()`` then runs the function with them and no per-call
        argument work; with ``include_return=False`` it returns None.

        Raises
        ------
        ValueError
            If ``saved_name`` is the name of one of the executable's functions.
        """
        index = self._function_index(func_name)
        if not isinstance(saved_name, str) or not saved_name:
            raise TypeError(f"saved_name must be a non-empty str, got {saved_name!r}")
        if saved_name in self._index:
            raise ValueError(
                f"cannot save a function as {saved_name!r}: the executable has a function "
                "of that name; choose another name"
            )
        signature = self._signatures[index]
        values = signature.convert_all(signature.bind(args, kwargs) if kwargs else args)
        call = self._call

        def saved(*extra: Any) -> Any:
            if extra:
                raise TypeError(
                    f"the saved function {saved_name!r} takes no arguments (they were bound "
                    f"by save_function), but {len(extra)} were given"
                )
            result = call(index, values)
            return export(result) if include_return else None

        saved.__name__ = saved_name
        self._saved[saved_name] = saved

    # ---- instrumentation, timing, profiling ----------------------------------------------------

    def set_instrument(self, instrument: Callable[..., Any] | None) -> None:
        """Call ``instrument(func, func_symbol, before_run, ret_value, *args)`` around calls.

        It runs before and after every kernel call (``func`` is the compiled kernel,
        ``func_symbol`` the primitive's name, ``args`` its arrays, inputs then outputs,
        ``ret_value`` None) and every function call a program makes with ``invoke``
        or ``invoke_closure`` instructions (``func`` is the vm.program.VMFunction,
        ``func_symbol`` its name, ``args`` its arguments, ``ret_value`` its result
        after the call). Returning :attr:`vm.VMInstrumentReturnKind.SKIP_RUN` before a
        call skips the call and its after-call (a skipped function call's result is
        None). ``None`` removes the instrument; without one, calls cost nothing extra.
        """
        if instrument is None:
            self._instrument = None
            self._program = self._fast
            self._tier_invoke, self._tier_call = self._tier_built
            return
        if not callable(instrument):
            raise TypeError(
                f"an instrument must be callable or None, got {describe_value(instrument)}"
            )
        self._instrument = instrument
        self._program = self._decode("hooked", hook=instrument)
        # Every call through the interpreter, so that the hooks see every call.
        self._tier_invoke = self._tier_call = [None] * len(self._exe.functions)

    def time_evaluator(
        self,
        func_name: str,
        dev: Any = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        limit_zero_time_iterations: int = 100,
        f_preproc: Callable[..., Any] | str | None = None,
    ) -> Callable[..., Any]:
        """A callable that times ``func_name`` and returns a :class:`vm.BenchmarkResult`.

        TVM's semantics: one discarded warm-up call, then ``repeat`` rounds of
        ``number`` calls; with ``min_repeat_ms``, ``number`` grows (and stays grown)
        until a round lasts that long. ``func_name`` is a function (the evaluator
        takes its arguments, converted once before timing; with none, the inputs set
        are used), a name given to :meth:`save_function` (no arguments), or
        ``"invoke_stateful"`` (the evaluator takes the function's name).

        ``f_preproc`` runs before each round, untimed: a callable (given the
        evaluator's arguments), or one of TVM's names, ``""`` (nothing) and
        ``"cache_flush_cpu_non_first_arg"`` (see :func:`vm.timing.cache_flush_cpu_non_first_arg`).

        Raises
        ------
        ValueError
            If ``number`` or ``repeat`` is below 1, or another setting is out of range.
        """

        check_devices(dev, "time_evaluator")
        settings = check_settings(
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
            limit_zero_time_iterations=limit_zero_time_iterations,
        )

        f_preproc = preprocessor(f_preproc)

        if func_name == "invoke_stateful":
            invoke_stateful = self.invoke_stateful

            def evaluate_stateful(name: str) -> Any:
                self._function_index(name)
                return measure(
                    functools.partial(invoke_stateful, name), (name,), f_preproc, **settings
                )

            return evaluate_stateful
        saved = self._saved.get(func_name) if isinstance(func_name, str) else None
        if saved is not None:

            def evaluate_saved() -> Any:
                return measure(saved, (), f_preproc, **settings)

            return evaluate_saved
        index = self._function_index(func_name)

        def evaluate(*args: Any, **kwargs: Any) -> Any:
            values = self._arguments(index, args, kwargs)
            call = self._call

            def once() -> Any:
                return export(call(index, values))

            return measure(once, args, f_preproc, **settings)

        return evaluate

    def benchmark(
        self,
        device: Any = None,
        *args: Any,
        func_name: str = "main",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: float | None = None,
        end_to_end: bool = False,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        limit_zero_time_iterations: int = 100,
        **kwargs: Any,
    ) -> Any:
        """Time ``func_name`` as TVM's ``VirtualMachine.benchmark`` does.

        Arguments, if given, are set as inputs once, untimed; the timed calls are
        ``invoke(func_name)``. With ``end_to_end=True`` every timed call passes the
        arguments again, so converting them is timed too.

        Returns
        -------
        vm.BenchmarkResult
            Seconds per call, one entry per repeat.
        """

        if device is not None and not isinstance(device, Device):
            raise TypeError(
                "benchmark's first argument is the device (vm.cpu() or None), got "
                f"{describe_value(device)}; pass inputs after it"
            )
        settings = check_settings(
            number=number,
            repeat=repeat,
            min_repeat_ms=0 if min_repeat_ms is None else min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
            limit_zero_time_iterations=limit_zero_time_iterations,
        )
        index = self._function_index(func_name)
        if end_to_end:
            invoke = self.invoke

            def once_end_to_end() -> Any:
                return invoke(func_name, *args, **kwargs)

            return measure(once_end_to_end, (), None, **settings)
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        values = self._arguments(index, (), {})
        call = self._call

        def once() -> Any:
            return export(call(index, values))

        return measure(once, (), None, **settings)

    def count_instructions(self, func_name: str, *args: Any, **kwargs: Any) -> int:
        """How many instructions one run of ``func_name`` executes (for benchmarks).

        Arguments are taken as by :meth:`invoke`. The run uses a counting decode of
        the program; the machine's own decode is untouched.
        """
        index = self._function_index(func_name)
        values = self._arguments(index, args, kwargs)
        counter = [0]
        program = self._decode("count", recorder=counter)
        run(program, program.codes[index], [*values, *program.pads[index]])
        return counter[0]

    def profile(self, func_name: str = "main", *args: Any, **kwargs: Any) -> Any:
        """Run ``func_name`` once more after a warm-up, timing every kernel and VM operation.

        Returns
        -------
        vm.Report
            Rows per kernel (by primitive name) and per costly VM operation
            (``VM::AllocStorage``, ``VM::AllocTensor``, ...), aggregated by name and
            argument shapes, with durations, percentages of the whole run and counts.
        """

        index = self._function_index(func_name)
        values = self._arguments(index, args, kwargs)
        fast = self._fast
        run(fast, fast.codes[index], [*values, *fast.pads[index]])  # warm-up, untimed
        recorder = Recorder()
        program = self._decode("profile", recorder=recorder)
        start = time.perf_counter_ns()
        run(program, program.codes[index], [*values, *program.pads[index]])
        total_ns = time.perf_counter_ns() - start
        configuration = {
            "Executor": "VM",
            "Function": self._exe.functions[index].name,
            "Number of threads": kernel_threads(),
        }
        return Report.from_recorder(recorder, total_ns, configuration)


def _rerun_unless_interrupted(error: Exception) -> None:
    """After the straight-line tier raised ``error``: raise what interrupted a kernel, if
    that is what happened; otherwise return, and the interpreter runs the call again (and
    its error names the argument or the instruction that was wrong)."""
    interrupted = interruption_of(error)
    if interrupted is not None:
        raise interrupted from None


_NOTHING = object()
_get_ident = threading.get_ident

#: TVM's allocator names; the compiler plans storage, so they behave alike here.
_ALLOCATORS = ("naive", "pooled")


def _check_memory_cfg(memory_cfg: Any) -> None:
    values = list(memory_cfg.values()) if isinstance(memory_cfg, dict) else [memory_cfg]
    for value in values:
        if value is not None and value not in _ALLOCATORS:
            raise ValueError(
                f"memory_cfg must be None, 'naive' or 'pooled' (or a dict of device to "
                f"them), got {memory_cfg!r}"
            )


def kernel_threads() -> int:
    """How many threads kernels may use (``RELAYVM_NUM_THREADS``, see
    :mod:`vm.kernels.runtime.threads`)."""
    from vm.kernels.runtime import threads  # deferred: numba, until kernels run

    return threads.threads()
